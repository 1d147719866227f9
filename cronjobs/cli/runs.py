"""The commands about runs: retry, trigger, cancel, ack, runs, show. Each parses its input,
calls one library function and renders the result."""

from __future__ import annotations

import datetime as dt
import getpass
from typing import Any

import click

from cronjobs.cli.app import (
    App,
    emit,
    json_option,
    pass_app,
    stop_on_signals,
    time_help,
)
from cronjobs.cli.confirming import dry_run_option, go_ahead, yes_option
from cronjobs.cli.options import Command
from cronjobs.cli.render.runs import (
    ack_json,
    ack_text,
    run_json,
    runs_list_json,
    runs_list_text,
    show_json,
    show_text,
)
from cronjobs.cli.render.ticks import waiting_lines
from cronjobs.cli.render_live import log_chunk, log_json
from cronjobs.cli.render_preview import ack_all_preview
from cronjobs.cli.watching import watch as watching
from cronjobs.cli.watching import watch_options
from cronjobs.core.logs import logs as run_logs
from cronjobs.core.operations import (
    MAX_RUN_ID,
    acknowledge,
    acknowledge_all,
    list_runs,
    run_info,
)
from cronjobs.core.operations import cancel as run_cancel
from cronjobs.core.operations import retry as run_retry
from cronjobs.core.operations import show as run_show
from cronjobs.core.operations import trigger as run_trigger
from cronjobs.db.connect import worker_name
from cronjobs.durations import parse_duration, shown
from cronjobs.errors import UsageError
from cronjobs.instants import parse_instant
from cronjobs.tick import TickOptions
from cronjobs.tick import tick as run_tick
from cronjobs.validation import parse_payload

# -- operating --------------------------------------------------------------------------------

class _RunId(click.ParamType[int]):
    """A run's id as typed: a whole number from 1 (``cronjobs runs`` shows them)."""

    name = "run id"

    def convert(self, value: Any, param: click.Parameter | None,
                ctx: click.Context | None) -> int:
        text = str(value).strip()
        if text.isascii() and text.isdigit() and 1 <= int(text) <= MAX_RUN_ID:
            return int(text)
        self.fail(f"{shown(str(value))} is not a run id: use the number `cronjobs runs` "
                  "shows in its ID column", param, ctx)


RUN_ID = _RunId()
STATUSES = ["scheduled", "queued", "running", "failed", "succeeded", "dead", "cancelled"]


@click.command(cls=Command)
@click.argument("run_id", type=RUN_ID)
@click.option("--attempts", type=click.IntRange(1, 100), default=1, show_default=True,
              help="How many more attempts it gets.")
@click.option("--force", is_flag=True,
              help="Run a run that succeeded again, as a new run of the same slot.")
@json_option
@pass_app
def retry(app: App, run_id: int, attempts: int, force: bool, as_json: bool) -> None:
    """Send failed, dead or cancelled run RUN_ID back to the queue now, keeping its history.

    The next tick runs it (any host). A queued or running run is refused; a run that
    succeeded is only run again with --force.

    \b
    Examples:
      cronjobs retry 1234
      cronjobs retry 1234 --attempts 3
      cronjobs retry 1234 --force
    """
    store = app.store()
    run = run_info(store, run_retry(store, run_id, attempts=attempts, force=force,
                                    by=_operator()).id)
    text = (f"run {run.id} queued again ({run.attempts_allowed - run.attempts_used} more "
            "attempt(s))" if run.id == run_id
            else f"run {run.id} created to run the slot of run {run_id} again")
    app.confirm(run_json(run), text, as_json)


@click.command(cls=Command)
@click.argument("name")
@click.option("--payload", metavar="JSON", help="A JSON object for this run only.")
@click.option("--force", is_flag=True, help="Ignore the job's overlap policy.")
@click.option("--run", "run_now", is_flag=True,
              help="Run it in this process now instead of leaving it to the next tick.")
@click.option("--at", "at", metavar="TIME",
              help=time_help("Run it once then instead of now", "future"))
@click.option("--in", "after", metavar="DURATION",
              help="Run it once after this delay instead of now (e.g. 30m, 2h).")
@json_option
@pass_app
def trigger(app: App, name: str, payload: str | None, force: bool, run_now: bool,
            at: str | None, after: str | None, as_json: bool) -> None:
    """Run job NAME now, outside its schedule (like `kubectl create job --from=cronjob/…`).

    The job's overlap policy applies unless --force. The run is picked up by the next tick,
    or run here and now with --run (the exit code is then 0 whatever the job's outcome;
    see `cronjobs show`). With --at or --in, one run waits for that later time (status
    `scheduled`, shown by `runs` and `explain`, cancellable with `cancel`) and meets the
    overlap policy when it becomes due.

    \b
    Examples:
      cronjobs trigger nightly_cleanup
      cronjobs trigger report --payload '{"days": 30}' --run
      cronjobs trigger report --at 2026-12-24T18:00:00+01:00
      cronjobs trigger nightly_cleanup --in 2h
    """
    data = parse_payload(payload) if payload is not None else None
    at_instant = (parse_instant(at, option="--at", now=lambda: app.store().now(),
                                towards="future") if at is not None else None)
    delay = parse_duration(after, option="--in") if after is not None else None
    later = at_instant is not None or delay is not None
    if later and run_now:
        raise UsageError("--run cannot be used with --at or --in: --run runs it now")
    store = app.store()
    run = run_trigger(store, name, payload=data, force=force, at=at_instant, after=delay)
    if later:
        app.confirm(run_json(run_info(store, run.id)), f"run {run.id} of {name} scheduled "
                    f"for {app.times(store.now()).when(run.eligible_at)}; the first tick "
                    "after then runs it", as_json)
        return
    if not run_now:
        app.confirm(run_json(run_info(store, run.id)),
                    f"run {run.id} of {name} queued; the next tick runs it", as_json)
        return

    with stop_on_signals() as stopped:
        report = run_tick(store, TickOptions(worker=worker_name(), apps=app.apps,
                                             run_ids=(run.id,), max_runs=1),
                          should_stop=stopped)
    for line in waiting_lines(report.waiting):
        click.echo(line, err=True)
    detail = run_show(store, run.id)
    app.confirm(show_json(detail), show_text(detail, app.times(store.now())), as_json)


@click.command(cls=Command)
@click.argument("run_id", type=RUN_ID)
@json_option
@pass_app
def cancel(app: App, run_id: int, as_json: bool) -> None:
    """Cancel run RUN_ID: a waiting run at once; a running run is stopped by its worker at
    its next heartbeat, wherever it runs.

    \b
    Examples:
      cronjobs cancel 1234
    """
    store = app.store()
    run = run_info(store, run_cancel(store, run_id).id)
    text = (f"run {run.id} cancelled" if run.state == "cancelled"
            else f"run {run.id} asked to stop; its worker stops it at the next heartbeat")
    app.confirm(run_json(run), text, as_json)


@click.command(cls=Command)
@click.argument("run_id", type=RUN_ID, required=False)
@click.option("--all", "all_of", metavar="NAME",
              help="Every dead run of job NAME that is not acknowledged yet (asks first on "
                   "a terminal; a script passes --yes).")
@yes_option
@dry_run_option
@json_option
@pass_app
def ack(app: App, run_id: int | None, all_of: str | None, yes: bool, dry_run: bool,
        as_json: bool) -> None:
    """Acknowledge dead run RUN_ID (or with --all, every dead run of job NAME): you have
    seen it, and `status --check` stops reporting it.

    A dead run keeps `status --check` red until it is acknowledged or retried
    (`cronjobs retry` acknowledges too); if a retried run dies again, it needs a new
    acknowledgement. Only dead runs can be acknowledged; acknowledging one twice changes
    nothing. Your login name is recorded (see `cronjobs show`). --all says which runs it
    would acknowledge first, and asks on a terminal.

    \b
    Examples:
      cronjobs ack 1234
      cronjobs ack --all nightly_cleanup
      cronjobs ack --all nightly_cleanup --yes --json   # from a script
    """
    if (run_id is None) == (all_of is None):
        raise UsageError("give either RUN_ID or --all NAME (try 'cronjobs ack --help')")
    if all_of is None and (yes or dry_run):
        raise UsageError("--yes and --dry-run go with --all NAME: acknowledging one run "
                         "asks nothing")
    store = app.store()
    if all_of is not None and (dry_run or not yes):
        preview = acknowledge_all(store, all_of, by=_operator(), dry_run=True)
        if dry_run:
            emit(ack_json(preview) | {"dry_run": True},
                 ack_all_preview(preview) if preview.runs else ack_text(preview, app.times()),
                 as_json)
            return
        if preview.runs:
            go_ahead(ack_all_preview(preview), yes=yes,
                     question=f"acknowledge {len(preview.runs):,} dead run(s)?",
                     option_hint="add --yes to acknowledge them, or --dry-run to see them "
                                 "only")
    done = (acknowledge(store, run_id, by=_operator()) if run_id is not None
            else acknowledge_all(store, all_of or "", by=_operator()))
    app.confirm(ack_json(done), ack_text(done, app.times(store.now())), as_json)


def _operator() -> str | None:
    """Who is at the keyboard, as recorded with an acknowledgement: the login name."""
    try:
        return getpass.getuser()
    except (OSError, KeyError):  # no name for this uid (e.g. a bare container)
        return None


@click.command(cls=Command)
@click.argument("name", required=False)
@click.option("--status", "statuses", type=click.Choice(STATUSES), multiple=True,
              help="Only runs in this status (repeatable).")
@click.option("--since", metavar="TIME",
              help=time_help("Only runs created since then"))
@click.option("--limit", type=click.IntRange(1, 10000), default=50, show_default=True)
@watch_options
@json_option
@pass_app
def runs(app: App, name: str | None, statuses: tuple[str, ...], since: str | None, limit: int,
         watch: bool, interval: float, as_json: bool) -> None:
    """List runs, newest first: of job NAME, or of all jobs. Times are shown in the local
    zone and relative to now ("3 min ago"); --json gives ISO-8601 instants in UTC.

    \b
    Examples:
      cronjobs runs nightly_cleanup --limit 10
      cronjobs runs --status failed --status dead --since 1d --json
      cronjobs runs --watch --limit 20          # redraws every 2s until Ctrl-C
    """
    store = app.store()
    start = parse_instant(since, option="--since", now=store.now) if since is not None else None

    def frame() -> tuple[dt.datetime, Any, str]:
        now = store.now()
        found = list_runs(store, name=name, statuses=statuses, since=start, limit=limit)
        return now, runs_list_json(found), runs_list_text(found, app.times(now))

    if watch:
        watching(frame, as_json=as_json, interval=interval)
        return
    _, data, text = frame()
    emit(data, text, as_json)


@click.command(cls=Command)
@click.argument("run_id", type=RUN_ID)
@json_option
@pass_app
def show(app: App, run_id: int, as_json: bool) -> None:
    """Everything about run RUN_ID: every attempt (worker, times, duration, outcome, exit
    code, error, output tail), the result, and its notifications.

    \b
    Examples:
      cronjobs show 1234
      cronjobs show 1234 --utc
      cronjobs show 1234 --json
    """
    store = app.store()
    now = store.now()
    detail = run_show(store, run_id)
    emit(show_json(detail), show_text(detail, app.times(now)), as_json)



@click.command(cls=Command)
@click.argument("run_id", type=RUN_ID)
@click.option("-f", "--follow", is_flag=True,
              help="Keep printing the output as the run produces it, until its attempt ends; "
                   "then print its outcome (on stderr). A run that waits to start is waited "
                   "for.")
@click.option("--interval", type=click.FloatRange(0.1, 60), default=1.0, show_default=True,
              metavar="SECONDS", help="With --follow: how often to look for new output.")
@click.option("--json", "as_json", is_flag=True,
              help="One JSON document per line (JSON Lines): output, notes and the outcome "
                   "(see the docs' JSON output reference).")
@pass_app
def logs(app: App, run_id: int, follow: bool, interval: float, as_json: bool) -> None:
    """Print the output of run RUN_ID: what a running run printed so far (a tick writes it
    to the database about once a second while it prints), or a finished run's last attempt.

    Like `kubectl logs`, this is the run's bounded output tail (its last 64 KiB), not an
    archive: output printed faster than that between two looks is skipped, and said so.
    The output goes to stdout; notes and the run's outcome to stderr. Ctrl-C stops
    following (exit code 130).

    \b
    Examples:
      cronjobs logs 1234
      cronjobs logs 1234 --follow
      cronjobs logs 1234 -f --interval 0.5
      cronjobs logs 1234 --follow --json
    """
    for chunk in run_logs(app.store(), run_id, follow=follow, poll=interval):
        if as_json:
            click.echo(log_json(chunk))
            continue
        text, to_stderr = log_chunk(chunk, following=follow, times=app.times())
        if text:
            click.echo(text, nl=False, err=to_stderr)
