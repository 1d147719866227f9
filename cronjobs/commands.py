"""The commands other than `tick` and `worker`: loaded by ``cronjobs.cli`` only when one of
them is invoked (or the commands are listed), so that the tick, which runs every minute,
does not build them. Each command parses its input, calls one library function and renders
the result: no SQL and no clock here.
"""

from __future__ import annotations

import datetime as dt
from typing import Any

import click

from cronjobs.cli import (
    DURATION_HELP,
    EXIT_UNHEALTHY,
    App,
    _stop_on_signals,
    emit,
    json_option,
    main_group,
    parse_instant,
    pass_app,
)

# -- schema -----------------------------------------------------------------------------------

@main_group.command()
@json_option
@pass_app
def migrate(app: App, as_json: bool) -> None:
    """Create or upgrade the cronjobs schema (idempotent; safe from many pods at once).

    \b
    Examples:
      cronjobs migrate
      cronjobs --database-url postgresql://admin@db/app migrate --json
    """
    from cronjobs.db import MIGRATE_OPTIONS, open_store
    from cronjobs.migrate import migrate as run_migrate

    connected = open_store(app.target, retry_for=app.connect_timeout,
                           announce=lambda text: click.echo(text, err=True), check=False,
                           application_name=app.application_name(), options=MIGRATE_OPTIONS)
    try:
        report = run_migrate(connected.store)
    finally:
        connected.store.close()
    text = (f"migrated {connected.where} from version {report.from_version} to "
            f"{report.to_version}" if report.changed
            else f"{connected.where} is up to date (schema version {report.to_version})")
    emit({"from_version": report.from_version, "to_version": report.to_version,
          "applied": list(report.applied)}, text, as_json)


# -- definitions --------------------------------------------------------------------------------

@main_group.command()
@click.argument("name")
@click.argument("schedule")
@click.option("--tz", default="UTC", show_default=True, metavar="ZONE",
              help="IANA time zone the schedule is read in, e.g. Europe/Berlin.")
@click.option("--command", metavar="SHELL", help="Run this with /bin/sh -c, as cron does.")
@click.option("--handler", metavar="NAME",
              help="Run the @cronjobs.job handler of this name (default: the job's NAME).")
@click.option("--payload", default="{}", show_default=True, metavar="JSON",
              help="A JSON object handed to the job.")
@click.option("--catchup", type=click.Choice(["latest", "all", "none"]), default="latest",
              show_default=True,
              help="Missed slots: run the latest one, all of them (up to --catchup-limit), "
                   "or none.")
@click.option("--catchup-limit", type=click.IntRange(1, 10000), default=100, show_default=True,
              help="With --catchup all: the most missed slots run at once.")
@click.option("--starting-deadline", default="none", show_default=True, metavar="DURATION",
              help=f"A slot later than this is missed, not run ({DURATION_HELP}, or none).")
@click.option("--overlap", type=click.Choice(["skip", "queue", "allow", "replace"]),
              default="skip", show_default=True,
              help="When the previous run is still running: skip the new slot, queue one, "
                   "allow both, or replace the running one.")
@click.option("--max-attempts", type=click.IntRange(1, 100), default=3, show_default=True,
              help="Attempts per run, including the first.")
@click.option("--backoff", default="30s", show_default=True, metavar="DURATION",
              help="Delay before the first retry; doubles each time, with jitter, up to 1h "
                   "(or this value, if longer).")
@click.option("--timeout", default="1h", show_default=True, metavar="DURATION",
              help=f"Kill an attempt that runs longer ({DURATION_HELP}, up to 7d, or none).")
@click.option("--lease", default="60s", show_default=True, metavar="DURATION",
              help="How long a silent worker keeps a run before another takes it over "
                   "(10s to 1h; heartbeats renew it).")
@click.option("--alert-command", metavar="SHELL",
              help="Run this (/bin/sh -c) when a run becomes dead, with the run's details in "
                   "CRONJOBS_* variables (like systemd's OnFailure=).")
@click.option("--alert-on-failure", is_flag=True,
              help="Also run the alert command on every failed attempt.")
@click.option("--pause-after-failures", type=click.IntRange(1, 1000), metavar="N",
              help="Pause the job after N failed attempts in a row (with a note saying why).")
@json_option
@pass_app
def define(app: App, name: str, schedule: str, tz: str, command: str | None,
           handler: str | None, payload: str, catchup: str, catchup_limit: int,
           starting_deadline: str, overlap: str, max_attempts: int, backoff: str, timeout: str,
           lease: str, alert_command: str | None, alert_on_failure: bool,
           pause_after_failures: int | None, as_json: bool) -> None:
    """Create or update job NAME to run on cron SCHEDULE (idempotent).

    SCHEDULE has 5 fields (minute hour day-of-month month day-of-week), or a macro
    (@hourly, @daily, @weekly, @monthly, @yearly); H spreads a field by the job's name,
    e.g. "H 3 * * *". A define states the whole job: options left out take their defaults.
    A changed schedule or zone continues from now.

    \b
    Examples:
      cronjobs define nightly_cleanup "0 3 * * *" --tz Europe/Berlin
      cronjobs define backup "0 2 * * *" --command "pg_dump mydb > /backups/db.sql"
      cronjobs define report "@daily" --handler build_report --payload '{"days": 7}'
    """
    from cronjobs.definitions import define as run_define
    from cronjobs.render import define_json, define_text
    from cronjobs.spec import build_spec

    spec = build_spec(
        name=name, schedule=schedule, tz=tz, command=command, handler=handler, payload=payload,
        catchup=catchup, catchup_limit=catchup_limit, starting_deadline=starting_deadline,
        overlap=overlap, max_attempts=max_attempts, backoff=backoff, timeout=timeout,
        lease=lease, alert_command=alert_command, alert_on_failure=alert_on_failure,
        pause_after_failures=pause_after_failures,
    )
    known = app.handlers() if spec.handler is not None else None
    result = run_define(app.store(), spec, known_handlers=known)
    emit(define_json(result), define_text(result), as_json)


@main_group.command(name="list")
@json_option
@pass_app
def list_command(app: App, as_json: bool) -> None:
    """List every job with its state, next fire time and last run.

    \b
    Examples:
      cronjobs list
      cronjobs list --json
    """
    from cronjobs.definitions import list_jobs
    from cronjobs.render import list_json, list_text

    listings = list_jobs(app.store())
    emit(list_json(listings), list_text(listings), as_json)


@main_group.command()
@click.argument("name")
@json_option
@pass_app
def describe(app: App, name: str, as_json: bool) -> None:
    """Everything about job NAME: settings, next 5 fire times (UTC and local), last runs.

    \b
    Examples:
      cronjobs describe nightly_cleanup
      cronjobs describe nightly_cleanup --json
    """
    from cronjobs.definitions import describe as run_describe
    from cronjobs.render import describe_json, describe_text

    description = run_describe(app.store(), name)
    emit(describe_json(description), describe_text(description), as_json)


@main_group.command()
@click.argument("name")
@click.option("--until", metavar="ISO-8601", help="Resume by itself at this instant.")
@click.option("--note", metavar="TEXT", help="Why it is paused (shown by describe).")
@json_option
@pass_app
def pause(app: App, name: str, until: str | None, note: str | None, as_json: bool) -> None:
    """Pause job NAME: its slots are recorded as paused instead of run.

    \b
    Examples:
      cronjobs pause nightly_cleanup --note "disk full, see INC-42"
      cronjobs pause backup --until 2026-12-27T08:00:00+01:00
    """
    from cronjobs.definitions import pause as run_pause
    from cronjobs.render import definition_json, short

    until_at = parse_instant(until, option="--until") if until is not None else None
    definition = run_pause(app.store(), name, until=until_at, note=note)
    extra = f" until {short(definition.paused_until)}" if definition.paused_until else ""
    emit(definition_json(definition), f"paused job {name!r}{extra}", as_json)


@main_group.command()
@click.argument("name")
@json_option
@pass_app
def resume(app: App, name: str, as_json: bool) -> None:
    """Resume job NAME from now; slots missed while paused are not replayed.

    \b
    Examples:
      cronjobs resume nightly_cleanup
    """
    from cronjobs.definitions import resume as run_resume
    from cronjobs.render import definition_json, short

    definition = run_resume(app.store(), name)
    emit(definition_json(definition),
         f"resumed job {name!r}; next run {short(definition.next_due_at)}", as_json)


@main_group.command()
@click.argument("name")
@json_option
@pass_app
def remove(app: App, name: str, as_json: bool) -> None:
    """Remove job NAME. Its run history stays readable; waiting runs are cancelled.

    \b
    Examples:
      cronjobs remove nightly_cleanup
    """
    from cronjobs.definitions import remove as run_remove
    from cronjobs.render import definition_json

    definition, cancelled = run_remove(app.store(), name)
    emit({"job": definition_json(definition), "cancelled_runs": cancelled},
         f"removed job {name!r} ({cancelled} waiting run(s) cancelled)", as_json)


@main_group.command(name="next")
@click.argument("job_or_schedule", metavar="NAME|SCHEDULE")
@click.option("--tz", metavar="ZONE",
              help="Zone of a bare SCHEDULE (default UTC); for a NAME, the zone to show "
                   "local times in (default: the job's).")
@click.option("--from", "start", metavar="ISO-8601",
              help="Start after this instant (default: now; a time without an offset is read "
                   "in --tz).")
@click.option("--count", type=click.IntRange(1, 1000), default=5, show_default=True,
              help="How many fire times.")
@json_option
@pass_app
def next_command(app: App, job_or_schedule: str, tz: str | None, start: str | None, count: int,
                 as_json: bool) -> None:
    """Print the next fire times of job NAME or of a cron SCHEDULE, in UTC and local time.

    Uses the same code the tick uses. A bare SCHEDULE is previewed against this machine's
    clock and needs no database; a NAME uses the database's clock.

    \b
    Examples:
      cronjobs next "30 2 * * *" --tz Europe/Berlin --from 2026-10-24 --count 3
      cronjobs next nightly_cleanup --count 10 --json
    """
    from cronjobs import definitions
    from cronjobs.render import preview_json, preview_text
    from cronjobs.schedule import check_timezone

    zone = check_timezone(tz) if tz is not None else dt.UTC
    begin = parse_instant(start, option="--from", zone=zone) if start is not None else None
    if _looks_like_schedule(job_or_schedule):
        result = definitions.preview(job_or_schedule, timezone=tz or "UTC", start=begin,
                                     count=count)
    else:
        result = definitions.preview_job(app.store(), job_or_schedule, timezone=tz,
                                         start=begin, count=count)
    emit(preview_json(result), preview_text(result), as_json)


def _looks_like_schedule(value: str) -> bool:
    return value.strip().startswith("@") or len(value.split()) > 1


# -- explaining and backfilling -------------------------------------------------------------

@main_group.command()
@click.argument("name")
@click.option("--from", "start", metavar="ISO-8601", help="Start of the range (default: 24h "
              "before --to).")
@click.option("--to", "end", metavar="ISO-8601", help="End of the range (default: now).")
@json_option
@pass_app
def explain(app: App, name: str, start: str | None, end: str | None, as_json: bool) -> None:
    """For every slot of job NAME in a range: did it run, and if not, why.

    \b
    Examples:
      cronjobs explain nightly_cleanup
      cronjobs explain nightly_cleanup --from 2026-03-28 --to 2026-03-30
    """
    from cronjobs.explain import explain as run_explain
    from cronjobs.render import explain_json, explain_text

    begin = parse_instant(start, option="--from") if start is not None else None
    finish = parse_instant(end, option="--to") if end is not None else None
    result = run_explain(app.store(), name, start=begin, end=finish)
    emit(explain_json(result), explain_text(result), as_json)


@main_group.command()
@click.argument("name")
@click.option("--from", "start", metavar="ISO-8601", required=True,
              help="First instant of the range (inclusive).")
@click.option("--to", "end", metavar="ISO-8601", required=True,
              help="Last instant of the range (inclusive, not in the future).")
@json_option
@pass_app
def backfill(app: App, name: str, start: str, end: str, as_json: bool) -> None:
    """Run the slots of job NAME in a past range, on purpose (trigger `backfill`).

    Slots that already have a run are left alone (one run per slot, always). At most
    10,000 slots at a time. The overlap policy does not apply: you asked for these runs.

    \b
    Examples:
      cronjobs backfill report --from 2026-03-01T00:00:00Z --to 2026-03-07T23:59:59Z
    """
    from cronjobs.definitions import get
    from cronjobs.materialise import backfill as run_backfill
    from cronjobs.render import backfill_json, backfill_text

    begin = parse_instant(start, option="--from")
    finish = parse_instant(end, option="--to")
    store = app.store()
    result = run_backfill(store, get(store, name), begin, finish)
    emit(backfill_json(result), backfill_text(result), as_json)


# -- operating --------------------------------------------------------------------------------

RUN_ID = click.IntRange(1, 2**63 - 1)
STATUSES = ["queued", "running", "failed", "succeeded", "dead", "cancelled"]


@main_group.command()
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
    from cronjobs.operations import retry as run_retry
    from cronjobs.render import run_json

    run = run_retry(app.store(), run_id, attempts=attempts, force=force)
    text = (f"run {run.id} queued again ({run.max_attempts - run.attempt} more attempt(s))"
            if run.id == run_id else f"run {run.id} created to run the slot of run {run_id} "
            "again")
    emit(run_json(run), text, as_json)


@main_group.command()
@click.argument("name")
@click.option("--payload", metavar="JSON", help="A JSON object for this run only.")
@click.option("--force", is_flag=True, help="Ignore the job's overlap policy.")
@click.option("--run", "run_now", is_flag=True,
              help="Run it in this process now instead of leaving it to the next tick.")
@json_option
@pass_app
def trigger(app: App, name: str, payload: str | None, force: bool, run_now: bool,
            as_json: bool) -> None:
    """Run job NAME now, outside its schedule (like `kubectl create job --from=cronjob/…`).

    The job's overlap policy applies unless --force. The run is picked up by the next tick,
    or run here and now with --run (the exit code is then 0 whatever the job's outcome;
    see `cronjobs show`).

    \b
    Examples:
      cronjobs trigger nightly_cleanup
      cronjobs trigger report --payload '{"days": 30}' --run
    """
    from cronjobs.operations import trigger as run_trigger
    from cronjobs.render import run_json
    from cronjobs.validation import parse_payload

    data = parse_payload(payload) if payload is not None else None
    store = app.store()
    run = run_trigger(store, name, payload=data, force=force)
    if not run_now:
        emit(run_json(run), f"run {run.id} of {name!r} queued; the next tick runs it",
             as_json)
        return
    from cronjobs.db import worker_name
    from cronjobs.operations import show
    from cronjobs.render import show_json, show_text
    from cronjobs.tick import TickOptions
    from cronjobs.tick import tick as run_tick

    with _stop_on_signals() as stopped:
        run_tick(store, TickOptions(worker=worker_name(), apps=app.apps, run_ids=(run.id,),
                                    max_runs=1),
                 reconnect=app.reconnect, should_stop=stopped)
    detail = show(store, run.id)
    emit(show_json(detail), show_text(detail), as_json)


@main_group.command()
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
    from cronjobs.operations import cancel as run_cancel
    from cronjobs.render import run_json

    run = run_cancel(app.store(), run_id)
    text = (f"run {run.id} cancelled" if run.status == "cancelled"
            else f"run {run.id} asked to stop; its worker stops it at the next heartbeat")
    emit(run_json(run), text, as_json)


@main_group.command()
@click.argument("name", required=False)
@click.option("--status", "statuses", type=click.Choice(STATUSES), multiple=True,
              help="Only runs in this status (repeatable).")
@click.option("--since", metavar="ISO-8601|DURATION",
              help="Only runs created since this instant, or this long ago (e.g. 1d).")
@click.option("--limit", type=click.IntRange(1, 10000), default=50, show_default=True)
@json_option
@pass_app
def runs(app: App, name: str | None, statuses: tuple[str, ...], since: str | None, limit: int,
         as_json: bool) -> None:
    """List runs, newest first: of job NAME, or of all jobs.

    \b
    Examples:
      cronjobs runs nightly_cleanup --limit 10
      cronjobs runs --status failed --status dead --since 1d --json
    """
    from cronjobs.operations import list_runs
    from cronjobs.render import runs_list_json, runs_list_text

    store = app.store()
    start = _since(since, store) if since is not None else None
    found = list_runs(store, name=name, statuses=statuses, since=start, limit=limit)
    emit(runs_list_json(found), runs_list_text(found), as_json)


def _since(value: str, store: Any) -> dt.datetime:
    from cronjobs.durations import parse_duration

    text = value.strip()
    if text[:1].isdigit() and text[-1:].lower() in "smhdw" and "-" not in text:
        return store.now() - parse_duration(text, option="--since")  # type: ignore[no-any-return]
    return parse_instant(text, option="--since")


@main_group.command()
@click.argument("run_id", type=RUN_ID)
@json_option
@pass_app
def show(app: App, run_id: int, as_json: bool) -> None:
    """Everything about run RUN_ID: every attempt (worker, times, duration, outcome, exit
    code, error, output tail) and the result.

    \b
    Examples:
      cronjobs show 1234
      cronjobs show 1234 --json
    """
    from cronjobs.operations import show as run_show
    from cronjobs.render import show_json, show_text

    detail = run_show(app.store(), run_id)
    emit(show_json(detail), show_text(detail), as_json)


@main_group.command()
@click.option("--check", is_flag=True,
              help="Exit 3 when something is wrong (for monitoring), 0 when all is well.")
@click.option("--max-tick-age", default="5m", show_default=True, metavar="DURATION",
              help="A tick older than this is a problem: cron or the CronJob stopped.")
@click.option("--max-backlog-age", default="5m", show_default=True, metavar="DURATION",
              help="A due run unclaimed for longer than this is a problem.")
@json_option
@pass_app
def status(app: App, check: bool, max_tick_age: str, max_backlog_age: str,
           as_json: bool) -> None:
    """One screen of health: ticks, backlog, running runs, failures, invalid, paused and
    overdue jobs. With --check, exit 3 when anything is wrong — above all when no tick has
    run for longer than --max-tick-age, so a dead crontab or a suspended CronJob is noticed.

    \b
    Examples:
      cronjobs status
      cronjobs status --check --max-tick-age 10m   # from cron, for monitoring
    """
    from cronjobs.durations import parse_bounded
    from cronjobs.health import Thresholds
    from cronjobs.health import status as run_status
    from cronjobs.render import status_json, status_text

    limits = Thresholds(
        parse_bounded(max_tick_age, option="--max-tick-age", minimum=dt.timedelta(minutes=1),
                      maximum=dt.timedelta(days=30)),
        parse_bounded(max_backlog_age, option="--max-backlog-age",
                      minimum=dt.timedelta(minutes=1), maximum=dt.timedelta(days=30)))
    result = run_status(app.store(), limits)
    emit(status_json(result), status_text(result), as_json)
    if check and not result.healthy:
        for problem in result.problems:
            click.echo(f"problem: {problem}", err=True)
        raise click.exceptions.Exit(EXIT_UNHEALTHY)


@main_group.command()
@click.option("--older-than", required=True, metavar="DURATION",
              help="Delete finished runs older than this (e.g. 30d).")
@click.option("--keep-last", type=click.IntRange(0, 100000), default=0, show_default=True,
              help="Also keep each job's N newest finished runs.")
@click.option("--dry-run", is_flag=True, help="Count what would be deleted; delete nothing.")
@json_option
@pass_app
def prune(app: App, older_than: str, keep_last: int, dry_run: bool, as_json: bool) -> None:
    """Delete old finished runs (with their attempts), skip records and tick records, in
    small batches; each job's latest success and latest failure are always kept.

    \b
    Examples:
      cronjobs prune --older-than 30d --dry-run
      cronjobs prune --older-than 30d --keep-last 100
    """
    from cronjobs.durations import parse_bounded
    from cronjobs.prune import prune as run_prune

    age = parse_bounded(older_than, option="--older-than", minimum=dt.timedelta(hours=1),
                        maximum=dt.timedelta(days=36500))
    report = run_prune(app.store(), older_than=age, keep_last=keep_last, dry_run=dry_run)
    data = {"cutoff": report.cutoff.isoformat(), "dry_run": report.dry_run,
            "runs": report.runs, "skips": report.skips, "ticks": report.ticks}
    text = (f"would delete {report.runs} run(s) finished before {report.cutoff.isoformat()}"
            if dry_run else f"deleted {report.runs} run(s), {report.skips} skip record(s) and "
            f"{report.ticks} tick record(s) from before {report.cutoff.isoformat()}")
    emit(data, text, as_json)


@main_group.command()
@pass_app
def metrics(app: App) -> None:
    """Print metrics in the Prometheus text format (for the node exporter's textfile
    collector or a push gateway).

    \b
    Examples (the second for the textfile collector, every minute from cron):
      cronjobs metrics
      cronjobs metrics > /var/lib/node_exporter/cronjobs.prom.$$ &&
        mv /var/lib/node_exporter/cronjobs.prom.$$ /var/lib/node_exporter/cronjobs.prom
    """
    from cronjobs.health import metrics as run_metrics

    click.echo(run_metrics(app.store()), nl=False)


# -- embedded server ------------------------------------------------------------------------------

@main_group.group()
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
    from cronjobs import embedded as server
    from cronjobs.render import table

    st = server.status()
    data = {"home": str(st.home), "data_dir": str(st.data_dir), "initialised": st.initialised,
            "running": st.running, "pid": st.pid,
            "socket_dir": str(st.socket_dir) if st.socket_dir else None, "port": st.port,
            "server_version": st.server_version, "log_file": str(st.log_file)}
    text = table(["KEY", "VALUE"], [(k, "-" if v is None else v) for k, v in data.items()])
    emit(data, text, as_json)


@embedded.command(name="stop")
def embedded_stop() -> None:
    """Stop the embedded server (the next command starts it again).

    \b
    Examples:
      cronjobs embedded stop
    """
    from cronjobs import embedded as server

    was_running = server.stop()
    click.echo("stopped the embedded PostgreSQL server" if was_running
               else "the embedded PostgreSQL server was not running")


