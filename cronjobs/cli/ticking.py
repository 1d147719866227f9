"""The command that runs every minute, `tick`, and the options of how ticks run, which
`worker` (cronjobs.cli.working: it starts ticks where there is no cron) shares. Both build
one :class:`~cronjobs.tick.TickOptions` from them (:func:`run_options`) and hand it down as
it is: to the tick, or to every tick the worker starts."""

from __future__ import annotations

import dataclasses
import datetime as dt
import sys
from collections.abc import Callable
from typing import Any, TypeVar

import click

from cronjobs.cli.app import (
    App,
    emit,
    json_option,
    pass_app,
    stop_on_signals,
    time_help,
)
from cronjobs.cli.options import Command
from cronjobs.cli.render.ticks import (
    decisions_text,
    lost_tick_lines,
    tick_json,
    tick_summary,
    waiting_lines,
)
from cronjobs.db.connect import worker_name
from cronjobs.durations import parse_bounded
from cronjobs.errors import UsageError
from cronjobs.execution.sizing import FLOOR, MAX_THREADS, PROCESSES_PER_CORE, THREADS_PER_CORE
from cronjobs.instants import parse_instant
from cronjobs.tick import TickOptions
from cronjobs.tick import tick as run_tick
from cronjobs.validation import check_notify_url

F = TypeVar("F", bound=Callable[..., Any])

# -- how ticks run: the options `tick` and `worker` share -------------------------------------


class Concurrency(click.ParamType[int | None]):
    """``auto`` (None: the tick sizes itself) or a number of runs, 1 to MAX_THREADS."""

    name = "auto|N"

    def convert(self, value: Any, param: click.Parameter | None,
                ctx: click.Context | None) -> int | None:
        if value is None or (isinstance(value, str) and value.strip().lower() == "auto"):
            return None
        try:
            number = int(value)
        except (TypeError, ValueError):
            self.fail(f"{value!r} is neither auto nor a number of runs", param, ctx)
        if not 1 <= number <= MAX_THREADS:
            self.fail(f"{number} is not auto or a number from 1 to {MAX_THREADS}", param, ctx)
        return number


_RUN_OPTIONS = (
    click.option("--concurrency", type=Concurrency(), default="auto", show_default=True,
                 metavar="auto|N",
                 help="Runs executed at the same time by a tick: a number (1 to "
                      f"{MAX_THREADS}), or auto: sized from the runs due when the tick "
                      f"starts: one per due run, at least {FLOOR}, at most "
                      f"{THREADS_PER_CORE} per core for --in-process handlers (threads) and "
                      f"{PROCESSES_PER_CORE} per core (at least {FLOOR}) while more runs "
                      "that need a process of their own (shell commands, isolated "
                      "handlers) are due than that."),
    click.option("--max-runtime", default="45s", show_default=True, metavar="DURATION",
                 help="Stop claiming after this long, so that ticks started every minute do "
                      "not pile up; runs already started are finished."),
    click.option("--grace", default="25s", show_default=True, metavar="DURATION",
                 help="On SIGTERM/SIGINT: how long running jobs get after SIGTERM before they "
                      "are killed (keep it below Kubernetes' terminationGracePeriodSeconds)."),
    click.option("--alert-command", metavar="SHELL", envvar="CRONJOBS_ALERT_COMMAND",
                 help="Alert command for jobs that have none of their own."),
    # gone: the one retention policy is `cronjobs retention` (tick_options says so)
    click.option("--retention", metavar="DURATION", envvar="CRONJOBS_RETENTION", hidden=True),
    click.option("--handlers-only", is_flag=True, envvar="CRONJOBS_HANDLERS_ONLY",
                 help="Refuse shell-command jobs: only registered Python handlers run. "
                      "Whoever can write job_definitions can otherwise run commands as this "
                      "worker's OS user."),
    click.option("--allow-command", "allowed_commands", metavar="GLOB", multiple=True,
                 envvar="CRONJOBS_ALLOW_COMMANDS",
                 help="Only run shell commands matching one of these globs (repeatable; "
                      "space-separated in the environment variable)."),
    click.option("--in-process", is_flag=True, envvar="CRONJOBS_IN_PROCESS",
                 help="Run Python handlers in threads of the tick instead of a fresh "
                      "interpreter per run: tens of times faster, "
                      "but a handler that overruns its timeout or is cancelled cannot be "
                      "killed: it is recorded as such at once and the tick exits as soon as "
                      "its other runs end. Shell commands always run in their own processes."),
    click.option("--dashboard-url", metavar="URL", envvar="CRONJOBS_DASHBOARD_URL",
                 help="Where `cronjobs serve` is reachable: notifications link to its "
                      "/runs/ID page."),
    click.option("--notify-deadline", metavar="DURATION", default="24h", show_default=True,
                 envvar="CRONJOBS_NOTIFY_DEADLINE",
                 help="How long a webhook notification a receiver has not taken is tried "
                      "again (later ticks, with back-off) before it is given up as expired "
                      "(1m to 30d)."),
)


# What a tick given --retention (or CRONJOBS_RETENTION) says: one retention policy now.
RETENTION_GONE = ("--retention (CRONJOBS_RETENTION) is gone: every tick applies the one "
                  "retention policy, dropping whole days; set it with `cronjobs retention "
                  "--succeeded 30d --failed 90d` and remove --retention")


def run_options(func: F) -> F:
    """Add the options of how ticks run (see :func:`tick_options`)."""
    for option in reversed(_RUN_OPTIONS):
        func = option(func)
    return func


def tick_options(app: App, *, concurrency: int | None, max_runtime: str, grace: str,
                 alert_command: str | None, retention: str | None, handlers_only: bool,
                 allowed_commands: tuple[str, ...], in_process: bool,
                 dashboard_url: str | None, notify_deadline: str = "24h",
                 now: dt.datetime | None = None,
                 allow_future: bool = False, dry_run: bool = False,
                 max_runs: int | None = None) -> TickOptions:
    """The one options object of a tick, from the command line."""
    if retention is not None:
        raise UsageError(RETENTION_GONE)
    if dashboard_url:
        check_notify_url(dashboard_url, what="--dashboard-url")
    second, day = dt.timedelta(seconds=1), dt.timedelta(days=1)
    return TickOptions(
        now=now, allow_future=allow_future, dry_run=dry_run, worker=worker_name(),
        concurrency=concurrency,
        max_runs=max_runs,
        max_runtime=parse_bounded(max_runtime, option="--max-runtime", minimum=second,
                                  maximum=day).total_seconds(),
        grace=parse_bounded(grace, option="--grace", minimum=second,
                            maximum=dt.timedelta(hours=1)).total_seconds(),
        apps=app.apps,
        alert_command=alert_command or None,
        handlers_only=handlers_only,
        allowed_commands=allowed_commands,
        in_process=in_process,
        dashboard_url=dashboard_url or None,
        notify_deadline=parse_bounded(notify_deadline, option="--notify-deadline",
                                      minimum=dt.timedelta(minutes=1),
                                      maximum=dt.timedelta(days=30)),
    )


def _from_worker() -> TickOptions:
    """The options a worker sent on stdin, for this process."""
    try:
        options = TickOptions.from_json(sys.stdin.read())
    except (ValueError, TypeError) as exc:
        raise UsageError(f"--options-stdin: not tick options ({exc})") from None
    return dataclasses.replace(options, worker=worker_name())


# -- the tick ---------------------------------------------------------------------------------

@click.command(cls=Command)
@click.option("--now", "now", metavar="TIME",
              help="Tick as if the database clock said this (tests, what-if runs): every "
                   "decision follows it, retries' backoff and leases too. More than 60s "
                   "ahead of the database clock is refused unless --allow-future or "
                   "--dry-run. " + time_help("When", "either"))
@click.option("--allow-future", is_flag=True,
              help="Let --now be ahead of the database clock: future slots are materialised "
                   "and run for real, and cursors move ahead (simulations, tests).")
@click.option("--dry-run", is_flag=True,
              help="Print what would be materialised; write nothing, run nothing.")
@click.option("--max-runs", type=click.IntRange(0), default=None,
              help="Claim at most this many runs (0: only materialise).")
@run_options
@json_option
@click.option("--options-stdin", is_flag=True, hidden=True,
              help="Read every option from stdin, as JSON (how `cronjobs worker` starts its "
                   "ticks).")
@pass_app
def tick(app: App, /, now: str | None, allow_future: bool, dry_run: bool, max_runs: int | None,
         as_json: bool, options_stdin: bool, **run: Any) -> None:
    """Materialise due runs (exactly once per slot), run them, record the results, exit.

    Run it every minute, from cron (`* * * * * cronjobs tick`) or a Kubernetes CronJob, on
    as many hosts as you like: the database makes sure every slot is decided once and every
    run is executed by one worker at a time. Execution is at least once: a run whose worker
    died is retried after its lease expires, so make jobs idempotent on (job, slot).

    One summary line goes to stderr; -v logs every decision; --json prints the full report.
    Exit code 0 when the tick did its work (failed jobs are recorded, not tick failures).

    \b
    Examples:
      cronjobs tick --dry-run                 # what is due now; writes nothing
      cronjobs tick -v --app myapp.jobs       # a crontab line: * * * * * cronjobs tick …
      cronjobs tick --concurrency 8 --json    # 8 at once, not auto
      cronjobs tick --dashboard-url https://cron.example.com   # links in notifications
    """
    if options_stdin:
        options = _from_worker()
    else:
        at = (parse_instant(now, option="--now", now=lambda: app.store().now(),
                            towards="either") if now is not None else None)
        options = tick_options(app, now=at, allow_future=allow_future, dry_run=dry_run,
                               max_runs=max_runs, **run)
    store = app.store()
    with stop_on_signals() as stopped:
        report = run_tick(store, options, should_stop=stopped)
    times = app.times(report.now, relative=False)  # a tick's lines end up in logs: absolute
    if as_json:
        emit(tick_json(report), "", True)
    elif options.dry_run or app.verbose:
        click.echo(decisions_text(report, times))
    if not app.quiet:
        click.echo(tick_summary(report, times), err=True)
    for line in [*waiting_lines(report.waiting), *lost_tick_lines(report.lost_ticks, times)]:
        click.echo(line, err=True)
