"""The commands that look after cronjobs itself: migrate, status, retention, metrics and
the embedded server."""

from __future__ import annotations

import datetime as dt
import os
import sys
from typing import Any

import click

from cronjobs.cli.app import (
    EXIT_UNHEALTHY,
    App,
    emit,
    json_option,
    pass_app,
)
from cronjobs.cli.options import PER_JOB, Command, SubGroup, per_job_option, threshold_options
from cronjobs.cli.render.common import table
from cronjobs.cli.render.status import retention_json, retention_text, status_json, status_text
from cronjobs.cli.watching import watch as watching
from cronjobs.cli.watching import watch_options
from cronjobs.core.crontab import crontab as crontab_lines
from cronjobs.core.crontab import find_executable
from cronjobs.core.health import status as run_status
from cronjobs.core.metrics import metrics as run_metrics
from cronjobs.core.retention import retention as run_retention
from cronjobs.core.thresholds import Thresholds
from cronjobs.core.upgrade import migrate_and_upgrade
from cronjobs.db import embedded as embedded_server
from cronjobs.db.connect import MIGRATE_OPTIONS, open_store
from cronjobs.durations import elapsed
from cronjobs.errors import UsageError

# -- schema -----------------------------------------------------------------------------------

@click.command(cls=Command)
@json_option
@pass_app
def migrate(app: App, as_json: bool) -> None:
    """Create or upgrade the cronjobs schema (idempotent; safe from many pods at once).

    An upgrade from a cronjobs older than schema version 11 then moves the old history to
    the new day partitions in small batches, while ticks go on; interrupted, it goes on at
    the next `cronjobs migrate`.

    \b
    Examples:
      cronjobs migrate
      cronjobs --database-url postgresql://admin@db/app migrate --json
    """
    connected = open_store(app.target, retry_for=app.connect_timeout,
                           announce=app.announce, check=False,
                           application_name=app.application_name(), options=MIGRATE_OPTIONS)
    try:
        migrated = migrate_and_upgrade(connected.store)
    finally:
        connected.store.close()
    report, upgrade = migrated.migration, migrated.upgrade
    text = (f"migrated {connected.where} from version {report.from_version} to "
            f"{report.to_version}" if report.changed
            else f"{connected.where} is up to date (schema version {report.to_version})")
    data: dict[str, object] = {"from_version": report.from_version,
                               "to_version": report.to_version,
                               "applied": list(report.applied)}
    if upgrade is not None:
        text += (f"; moved {upgrade.moved} runs of the old history in {upgrade.batches} "
                 f"batches ({elapsed(upgrade.seconds)})"
                 + ("" if upgrade.dropped else
                    "; the old tables stay, busy: run `cronjobs migrate` again"))
        data["upgrade"] = {"moved": upgrade.moved, "batches": upgrade.batches,
                           "seconds": round(upgrade.seconds, 3),
                           "longest_batch_seconds": round(upgrade.longest_batch, 3),
                           "old_tables_dropped": upgrade.dropped}
    app.confirm(data, text, as_json)


@click.command(cls=Command)
@click.option("--check", is_flag=True,
              help="Exit 3 when something is wrong (for monitoring), 0 when all is well.")
@threshold_options
@watch_options
@json_option
@pass_app
def status(app: App, check: bool, thresholds: Thresholds, watch: bool, interval: float,
           as_json: bool) -> None:
    """One screen of health: ticks, backlog, running runs, failures, invalid, paused and
    overdue jobs, and the storage itself (dead rows in the queue, transactions holding back
    vacuum, the history's partitions). With --check, exit 3 when anything is wrong — above
    all when no tick has run for longer than --max-tick-age, so a dead crontab or a
    suspended CronJob is noticed.

    \b
    Examples:
      cronjobs status
      cronjobs status --check --max-tick-age 10m   # from cron, for monitoring
      cronjobs status --check --max-xmin-age 15m   # a stricter limit on open transactions
      cronjobs status --watch                      # a screen that redraws every 2s
    """
    if watch and check:
        raise UsageError("--watch and --check cannot be used together: --check is for "
                         "monitoring, which looks once")
    store = app.store()
    if watch:
        def frame() -> tuple[dt.datetime, Any, str]:
            shown = run_status(store, thresholds)
            return shown.now, status_json(shown), status_text(shown, app.times(shown.now))

        watching(frame, as_json=as_json, interval=interval)
        return
    result = run_status(store, thresholds)
    emit(status_json(result), status_text(result, app.times(result.now)), as_json)
    if check and not result.healthy:
        # for monitoring that reads stderr only; on a terminal the report above has them
        if as_json or not sys.stdout.isatty():
            for problem in result.problems:
                click.echo(f"problem: {problem}", err=True)
        raise click.exceptions.Exit(EXIT_UNHEALTHY)


@click.command(cls=Command)
@click.option("--succeeded", metavar="DURATION",
              help="Keep succeeded and cancelled runs (with their attempts) this long.")
@click.option("--failed", metavar="DURATION",
              help="Keep dead runs (with their attempts) and webhook notification records "
                   "this long.")
@click.option("--skips", metavar="DURATION",
              help="Keep the records of slots not run (what `explain` reads) this long.")
@click.option("--ticks", metavar="DURATION", help="Keep the records of ticks this long.")
@json_option
@pass_app
def retention(app: App, succeeded: str | None, failed: str | None, skips: str | None,
              ticks: str | None, as_json: bool) -> None:
    """Show how long history is kept, or set it: only the options given change (each
    1d to 3650d, e.g. 30d or 12w). The tick retires history a little at a time; nothing
    to schedule.

    A finished run gets its retirement day when it finishes (its end plus its retention,
    by the day in UTC); once that day is over, the tick drops the day's partition whole, no
    row-by-row deletes. So a run is kept at least its retention and at most a day longer,
    and a change of --succeeded or --failed applies to runs finishing after it (those
    finished already keep their day). Skip and tick records are deleted in small batches
    by age, so their changes apply at once. Each job's latest success and latest failure,
    and dead runs nobody acknowledged (`cronjobs ack`), are always kept, however old. A job
    can keep its own runs longer or shorter: `define --keep-succeeded D --keep-failed D`
    (keep_succeeded and keep_failed in a jobs file; `default` returns to these).

    \b
    Examples:
      cronjobs retention
      cronjobs retention --succeeded 30d --failed 180d
      cronjobs retention --ticks 7d --json
    """
    store = app.store()
    result = run_retention(store, succeeded=succeeded, failed=failed, skips=skips,
                           ticks=ticks)
    text = retention_text(result, app.times(store.now()))
    if result.changed:  # a change: its confirmation (the whole table: `cronjobs retention`)
        app.confirm(retention_json(result), text.splitlines()[0], as_json)
    else:
        emit(retention_json(result), text, as_json)


@click.command(cls=Command)
@per_job_option("--per-job", "CRONJOBS_METRICS_PER_JOB")
@pass_app
def metrics(app: App, per_job: str) -> None:
    """Print metrics in the Prometheus text format (for the node exporter's textfile
    collector or a push gateway); `cronjobs serve` answers the same on /metrics.

    \b
    Examples (the second for the textfile collector, every minute from cron):
      cronjobs metrics
      cronjobs metrics > /var/lib/node_exporter/cronjobs.prom.$$ &&
        mv /var/lib/node_exporter/cronjobs.prom.$$ /var/lib/node_exporter/cronjobs.prom
    """
    click.echo(run_metrics(app.store(), per_job=PER_JOB[per_job]), nl=False)


# -- cron -------------------------------------------------------------------------------------

@click.command(cls=Command)
@json_option
@pass_app
def crontab(app: App, as_json: bool) -> None:
    """Print the crontab lines that drive cronjobs on this host, with absolute paths.

    cron runs commands with PATH=/usr/bin:/bin, where a virtualenv's `cronjobs` is not
    found: the lines name this installation's `cronjobs` in full, and set the database
    (and the --app modules) this command was given. A password is never printed: a URL
    that holds one is written masked, in a comment, to complete by hand. Nothing connects
    to the database.

    \b
    Examples:
      cronjobs crontab
      cronjobs crontab | crontab -            # replaces your crontab: check it first
      cronjobs --app myapp.jobs crontab --json
    """
    lines = crontab_lines(find_executable(), app.target, os.environ, apps=app.apps,
                          workdir=os.getcwd())
    data = {"executable": lines.executable, "variables": dict(lines.variables),
            "notes": list(lines.notes), "lines": list(lines.lines)}
    emit(data, lines.text(), as_json)


# -- embedded server ------------------------------------------------------------------------------

@click.group(cls=SubGroup)
def embedded() -> None:
    """See or stop the embedded PostgreSQL server (the default database).

    \b
    Examples:
      cronjobs embedded status
      cronjobs embedded stop
    """


@embedded.command(name="status")
@json_option
def embedded_status(as_json: bool) -> None:
    """Show where the embedded server lives and whether it is running.

    \b
    Examples:
      cronjobs embedded status
      cronjobs embedded status --json
    """
    st = embedded_server.status()
    data = {"home": str(st.home), "data_dir": str(st.data_dir), "initialised": st.initialised,
            "running": st.running, "pid": st.pid,
            "socket_dir": str(st.socket_dir) if st.socket_dir else None, "port": st.port,
            "server_version": st.server_version, "log_file": str(st.log_file)}
    text = table(["KEY", "VALUE"], [(k, _word(v)) for k, v in data.items()])
    emit(data, text, as_json)


def _word(value: object) -> object:
    """A value in a table for people: yes/no, not Python's True/False; - for none."""
    if value is None:
        return "-"
    if isinstance(value, bool):
        return "yes" if value else "no"
    return value


@embedded.command(name="stop")
@json_option
@pass_app
def embedded_stop(app: App, as_json: bool) -> None:
    """Stop the embedded server (the next command starts it again).

    \b
    Examples:
      cronjobs embedded stop
    """
    was_running = embedded_server.stop()
    app.confirm({"was_running": was_running},
                "stopped the embedded PostgreSQL server" if was_running
                else "the embedded PostgreSQL server was not running", as_json)
