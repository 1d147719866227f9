"""`worker`: ticks where there is no cron. It takes the options of how ticks run from
`tick`'s family (cronjobs.cli.ticking), and `tick` does not import it."""

from __future__ import annotations

import datetime as dt
import os
from typing import Any

import click

from cronjobs.cli.app import EXIT_FAILURE, App, pass_app, stop_on_signals
from cronjobs.cli.options import Command
from cronjobs.cli.ticking import run_options, tick_options
from cronjobs.durations import parse_bounded
from cronjobs.worker import LISTEN_MODES, listens, serve


@click.command(cls=Command)
@run_options
@click.option("--listen", type=click.Choice(LISTEN_MODES), default="auto", show_default=True,
              envvar="CRONJOBS_LISTEN",
              help="Wake up the moment a run is queued (LISTEN on the worker's connection): "
                   "on, off (polling only), or auto: on unless the connection provably goes "
                   "through a transaction pooler such as PgBouncer, where notifications "
                   "cannot reach it (the check of --prepared-statements auto).")
@click.option("--poll-interval", default="2s", show_default=True, metavar="DURATION",
              envvar="CRONJOBS_POLL_INTERVAL",
              help="Look for queued runs at least this often (1s to 1h), notifications or "
                   "not: the fallback when one is lost, the only way through a pooler.")
@click.option("--max-ticks", type=click.IntRange(1), hidden=True)
@pass_app
def worker(app: App, /, listen: str, poll_interval: str, max_ticks: int | None,
           **run: Any) -> None:
    """Run forever: materialise every minute, and run queued runs the moment they are queued.

    At the start of every minute of the database's clock it starts `cronjobs tick` as a
    child process, exactly as cron would, to materialise the due slots (same guarantees;
    ticks may overlap). It runs the runs itself, in this process, without starting one per
    run: a run queued by `cronjobs trigger`, `Client.trigger` or the dashboard starts within
    milliseconds (LISTEN/NOTIFY, see --listen), and every --poll-interval it looks anyway.
    Runs run with this command's options (a tick's). SIGTERM/SIGINT stop it gracefully:
    running runs get SIGTERM and --grace, and go back to the queue.

    \b
    Examples:
      cronjobs worker --app myapp.jobs --concurrency 8
      CRONJOBS_DATABASE_URL=postgresql://cron@db/app cronjobs worker --handlers-only
      cronjobs worker --app myapp.jobs --listen off --poll-interval 5s   # via PgBouncer
    """
    options = tick_options(app, **run)
    poll = parse_bounded(poll_interval, option="--poll-interval",
                         minimum=dt.timedelta(seconds=1),
                         maximum=dt.timedelta(hours=1)).total_seconds()
    env = dict(os.environ)
    if app.target.conninfo is not None:  # never in argv, where `ps` would show a password
        env["CRONJOBS_DATABASE_URL"] = app.target.conninfo
    if app.apps:
        env["CRONJOBS_APP"] = ",".join(app.apps)
    store = app.store()
    listening = listens(listen, prepared=app.target.prepared,
                        own_session=store.session.prepares())
    with stop_on_signals() as stopped:
        report = serve(store, app.another_store(), options, env, listen=listening, poll=poll,
                       should_stop=stopped, max_ticks=max_ticks)
    click.echo(f"worker stopped after {report.ticks} tick(s), {report.failed_ticks} failed; "
               f"{report.claimed} run(s) in {report.passes} claim pass(es), "
               f"{report.notifications} notification(s)", err=True)
    if report.broken:
        raise click.exceptions.Exit(EXIT_FAILURE)
