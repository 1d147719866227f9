"""`worker`: ticks where there is no cron. It takes the options of how ticks run from
`tick`'s family (cronjobs.cli.ticking), and `tick` does not import it."""

from __future__ import annotations

import os
from typing import Any

import click

from cronjobs.cli.app import App, pass_app, stop_on_signals
from cronjobs.cli.options import Command
from cronjobs.cli.ticking import run_options, tick_options
from cronjobs.worker import serve


@click.command(cls=Command)
@run_options
@click.option("--max-ticks", type=click.IntRange(1), hidden=True)
@pass_app
def worker(app: App, /, max_ticks: int | None, **run: Any) -> None:
    """Run forever, ticking at the start of every minute — for platforms without cron.

    It starts `cronjobs tick` as a child process each minute of the database's clock (and at
    once when `cronjobs trigger` is used), exactly as cron would: same guarantees, ticks may
    overlap. Each tick runs with this command's options. SIGTERM/SIGINT stop it gracefully
    (running ticks get SIGTERM and --grace). Prefer cron or a Kubernetes CronJob where you
    have them.

    \b
    Examples:
      cronjobs worker --app myapp.jobs --concurrency 8
      CRONJOBS_DATABASE_URL=postgresql://cron@db/app cronjobs worker --handlers-only
    """
    options = tick_options(app, **run)
    env = dict(os.environ)
    if app.target.conninfo is not None:  # never in argv, where `ps` would show a password
        env["CRONJOBS_DATABASE_URL"] = app.target.conninfo
    if app.apps:
        env["CRONJOBS_APP"] = ",".join(app.apps)
    store = app.store()
    with stop_on_signals() as stopped:
        report = serve(store, options, env, should_stop=stopped, max_ticks=max_ticks)
    click.echo(f"worker stopped after {report.ticks} tick(s), {report.failed_ticks} failed",
               err=True)
