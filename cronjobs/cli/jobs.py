"""The commands about jobs: define, list, describe, pause, resume, remove, next, explain,
backfill. Each parses its input, calls one library function and renders the result."""

from __future__ import annotations

import datetime as dt
from typing import Any

import click

from cronjobs.cli.app import (
    App,
    emit,
    json_option,
    pass_app,
    time_help,
)
from cronjobs.cli.confirming import dry_run_option, go_ahead, yes_option
from cronjobs.cli.diff import changes_json, changes_text
from cronjobs.cli.options import Command, crowded_option, definition_options
from cronjobs.cli.render.explain import backfill_json, backfill_text, explain_json, explain_text
from cronjobs.cli.render.jobs import (
    define_json,
    define_text,
    describe_json,
    describe_text,
    job_json,
    list_json,
    list_text,
    preview_json,
    preview_text,
)
from cronjobs.cli.render_forecast import crowding_json
from cronjobs.cli.render_preview import backfill_preview, remove_preview
from cronjobs.core import definitions
from cronjobs.core.crowding import parse_threshold
from cronjobs.core.definitions import describe as run_describe
from cronjobs.core.definitions import get, job_info, list_jobs, resume_if_paused
from cronjobs.core.definitions import pause_if_active as run_pause
from cronjobs.core.definitions import remove as run_remove
from cronjobs.core.explain import explain as run_explain
from cronjobs.core.materialise import BACKFILL_LIMIT, BACKFILL_MAX_RUNS, BackfillReport
from cronjobs.core.materialise import backfill as run_backfill
from cronjobs.core.update import define_given
from cronjobs.cron import check_timezone
from cronjobs.instants import parse_instant

# -- definitions --------------------------------------------------------------------------------

@click.command(cls=Command)
@click.argument("name")
@click.argument("schedule", required=False)
@definition_options
@click.option("--reset", multiple=True, metavar="OPTION",
              help="A job that exists: return OPTION to its default, e.g. --reset "
                   "alert-command (repeatable or comma-separated).")
@click.option("--replace-target", is_flag=True,
              help="A job that exists: let --command replace its handler, or --handler its "
                   "command (without it, a change of kind is refused).")
@crowded_option
@json_option
@pass_app
def define(app: App, name: str, schedule: str | None, options: dict[str, Any],
           reset: tuple[str, ...], replace_target: bool, crowded_threshold: str,
           as_json: bool) -> None:
    """Create job NAME to run on cron SCHEDULE, or change job NAME: the options given (and
    SCHEDULE, if given), keeping the rest. Prints what changed.

    SCHEDULE has 5 fields (minute hour day-of-month month day-of-week), or a macro
    (@hourly, @daily, @weekly, @monthly, @yearly); H spreads a field by the job's name,
    e.g. "H 3 * * *". Day of month also takes L (last day), L-3, 15W (nearest weekday) and
    LW; day of week fri#3 (third Friday) and 5L or friL (last Friday). The schedule is
    said back in words. A new job needs SCHEDULE; its options left out take their
    defaults. A job that exists keeps every option not given: --reset OPTION returns one
    to its default, and changing what it runs from a command to a handler (or back) needs
    --replace-target. A changed schedule or zone continues from now. A job landing in a
    minute that already holds more than --crowded-threshold runs of other jobs is defined
    with a warning saying what H would give instead.

    \b
    Examples:
      cronjobs define nightly_cleanup "0 3 * * *" --tz Europe/Berlin
      cronjobs define month_end "0 18 LW * *" --command "./close-books.sh"
      cronjobs define backup "0 2 * * *" --command "pg_dump mydb > /backups/db.sql"
      cronjobs define report "@daily" --handler build_report --payload '{"days": 7}'
      cronjobs define sales_report "0 6 * * *" --group reports
      cronjobs define audit "@daily" --command "audit.sh" --keep-succeeded 12w \
          --keep-failed 365d
      cronjobs define backup "0 2 * * *" --command "backup.sh" \
          --notify https://hooks.slack.com/services/T000/B000/XXXX --notify-on dead,recovery
      cronjobs define backup --max-attempts 5          # change one option, keep the rest
      cronjobs define backup --reset notify,notify-on  # back to their defaults
      cronjobs define report --command "report.sh" --replace-target
    """
    threshold = parse_threshold(crowded_threshold)
    store = app.store()
    done = define_given(store, name, schedule, options, reset=reset,
                        replace_target=replace_target, handlers=app.handlers,
                        crowded_threshold=threshold)
    result = done.result
    changes = None if done.diff is None else changes_json(done.diff)
    text = define_text(result, app.times(store.now()))
    if done.diff is not None:
        text = "\n".join([text, *changes_text(done.diff)])
    app.confirm(define_json(result) | {"crowding": crowding_json(result.crowding),
                                       "changes": changes},
                text, as_json)
    if result.warning is not None:
        click.echo(f"warning: {result.warning}", err=True)
    if result.crowding is not None:
        click.echo(f"warning: {result.crowding.message}", err=True)


@click.command(cls=Command, name="list")
@click.option("--wide", is_flag=True,
              help="Add a DESCRIPTION column: each schedule in words, with its zone.")
@json_option
@pass_app
def list_command(app: App, wide: bool, as_json: bool) -> None:
    """List every job with its state, next fire time and last run (times in the local zone
    and relative to now, or --utc).

    \b
    Examples:
      cronjobs list
      cronjobs list --wide      # and each schedule in words
      cronjobs list --utc
      cronjobs list --json
    """
    store = app.store()
    now = store.now()
    listings = list_jobs(store)
    emit(list_json(listings), list_text(listings, app.times(now), wide=wide), as_json)


@click.command(cls=Command)
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
    store = app.store()
    now = store.now()
    description = run_describe(store, name)
    emit(describe_json(description), describe_text(description, app.times(now)), as_json)


@click.command(cls=Command)
@click.argument("name")
@click.option("--until", metavar="TIME",
              help=time_help("Resume by itself then (a date: at its start)", "future"))
@click.option("--note", metavar="TEXT", help="Why it is paused (shown by describe).")
@json_option
@pass_app
def pause(app: App, name: str, until: str | None, note: str | None, as_json: bool) -> None:
    """Pause job NAME: its slots are recorded as paused instead of run.

    A paused job paused again keeps its pause (its end and note) unless --until or --note
    replaces them.

    \b
    Examples:
      cronjobs pause nightly_cleanup --note "disk full, see INC-42"
      cronjobs pause backup --until 2026-12-27T08:00:00+01:00
      cronjobs pause backup --until 2h
    """
    until_at = (parse_instant(until, option="--until", now=lambda: app.store().now(),
                              towards="future") if until is not None else None)
    store = app.store()
    definition, paused = run_pause(store, name, until=until_at, note=note)
    info = job_info(definition, store.now())
    times = app.times(store.now())
    extra = (f" until {times.when(info.paused_until)}; next run "
             f"{times.when(info.next_fire_at)}" if info.paused_until else "")
    app.confirm(job_json(definition, info),
                f"paused {name}{extra}" if paused
                else f"{name} was already paused since {times.when(info.paused_at)}"
                + (f" until {times.when(info.paused_until)}" if info.paused_until else "")
                + ": nothing changed (--until or --note changes the pause)", as_json)


@click.command(cls=Command)
@click.argument("name")
@json_option
@pass_app
def resume(app: App, name: str, as_json: bool) -> None:
    """Resume job NAME from now; slots missed while paused are not replayed.

    \b
    Examples:
      cronjobs resume nightly_cleanup
    """
    store = app.store()
    definition, was_paused = resume_if_paused(store, name)
    info = job_info(definition, store.now())
    following = app.times(store.now()).when(info.next_fire_at)
    app.confirm(job_json(definition, info),
                f"resumed {name}, next {following}" if was_paused
                else f"{name} was not paused: nothing changed (next run {following})",
                as_json)


@click.command(cls=Command)
@click.argument("name")
@yes_option
@dry_run_option
@json_option
@pass_app
def remove(app: App, name: str, yes: bool, dry_run: bool, as_json: bool) -> None:
    """Remove job NAME. Its run history stays readable; waiting runs are cancelled.

    A job with runs waiting says how many it would cancel first, and asks on a terminal;
    a script passes --yes.

    \b
    Examples:
      cronjobs remove nightly_cleanup
      cronjobs remove nightly_cleanup --yes      # from a script
    """
    store = app.store()
    if dry_run or not yes:
        _, waiting = run_remove(store, name, dry_run=True)
        if dry_run:
            emit({"job": name, "dry_run": True, "cancelled_runs": waiting},
                 remove_preview(name, waiting) if waiting
                 else f"removing {name} would cancel no run (its history stays)", as_json)
            return
        if waiting:
            go_ahead(remove_preview(name, waiting), yes=yes,
                     question=f"remove {name} and cancel {waiting:,} run(s)?",
                     option_hint="add --yes to remove it")
    definition, cancelled = run_remove(store, name)
    app.confirm({"job": job_json(definition, job_info(definition, store.now())),
                 "cancelled_runs": cancelled},
                f"removed {name} ({cancelled} waiting run(s) cancelled; its history stays)",
                as_json)


@click.command(cls=Command, name="next")
@click.argument("job_or_schedule", metavar="NAME|SCHEDULE")
@click.option("--tz", metavar="ZONE",
              help="Zone of a bare SCHEDULE (default UTC); for a NAME, the zone to show "
                   "local times in (default: the job's).")
@click.option("--from", "start", metavar="TIME",
              help=time_help("Start after this (default: now; a time without an offset is "
                             "read in --tz)"))
@click.option("--count", type=click.IntRange(1, 1000), default=5, show_default=True,
              help="How many fire times.")
@json_option
@pass_app
def next_command(app: App, job_or_schedule: str, tz: str | None, start: str | None, count: int,
                 as_json: bool) -> None:
    """Print the next fire times of job NAME or of a cron SCHEDULE, in UTC and local time,
    after the schedule in words.

    Uses the same code the tick uses. A bare SCHEDULE is previewed against this machine's
    clock and needs no database; a NAME uses the database's clock.

    \b
    Examples:
      cronjobs next "30 2 * * *" --tz Europe/Berlin --from 2026-10-24 --count 3
      cronjobs next "30 2 * * sunL" --tz Europe/Berlin --count 12
      cronjobs next nightly_cleanup --count 10 --json
    """
    zone = check_timezone(tz) if tz is not None else dt.UTC
    bare = _looks_like_schedule(job_or_schedule)
    clock = (lambda: dt.datetime.now(dt.UTC)) if bare else (lambda: app.store().now())
    begin = (parse_instant(start, option="--from", zone=zone, now=clock)
             if start is not None else None)
    if bare:
        result = definitions.preview(job_or_schedule, timezone=tz or "UTC", start=begin,
                                     count=count)
    else:
        result = definitions.preview_job(app.store(), job_or_schedule, timezone=tz,
                                         start=begin, count=count)
    # relative to now ("in 3 h") only when the preview starts now
    times = app.times(result.start, relative=start is None)
    emit(preview_json(result), preview_text(result, times), as_json)


def _looks_like_schedule(value: str) -> bool:
    return value.strip().startswith("@") or len(value.split()) > 1


# -- explaining and backfilling -------------------------------------------------------------

@click.command(cls=Command)
@click.argument("name")
@click.option("--from", "start", metavar="TIME",
              help=time_help("Start of the range (default: 24h before --to)"))
@click.option("--to", "end", metavar="TIME",
              help=time_help("End of the range, inclusive: a date includes that whole day "
                             "(default: now)"))
@json_option
@pass_app
def explain(app: App, name: str, start: str | None, end: str | None, as_json: bool) -> None:
    """For every slot of job NAME in a range: did it run, and if not, why.

    Consecutive slots with the same story fold into one line with a count (before the
    job was defined, skipped for one reason, runs that succeeded); runs that need a look
    (failed, dead, running, queued, cancelled) get a line each. At most 2,000 lines and
    100,000 slots (69 days of a per-minute job). --json folds the same way.

    \b
    Examples:
      cronjobs explain nightly_cleanup
      cronjobs explain nightly_cleanup --from 2026-03-28 --to 2026-03-30
      cronjobs explain every_minute --from 7d
    """
    store = app.store()
    begin = parse_instant(start, option="--from", now=store.now) if start is not None else None
    finish = (parse_instant(end, option="--to", now=store.now, end=True) if end is not None
              else None)
    result = run_explain(store, name, start=begin, end=finish)
    emit(explain_json(result), explain_text(result, app.times(store.now())), as_json)


@click.command(cls=Command)
@click.argument("name")
@click.option("--from", "start", metavar="TIME", required=True,
              help=time_help("First instant of the range, inclusive"))
@click.option("--to", "end", metavar="TIME", required=True,
              help=time_help("Last instant of the range, inclusive: a date includes that "
                             "whole day; a range ending after now ends at now"))
@click.option("--max-runs", type=click.IntRange(1, BACKFILL_LIMIT), default=BACKFILL_MAX_RUNS,
              show_default=True, metavar="N",
              help="Refuse to create more runs than this (nothing is created then).")
@yes_option
@dry_run_option
@json_option
@pass_app
def backfill(app: App, name: str, start: str, end: str, max_runs: int, yes: bool,
             dry_run: bool, as_json: bool) -> None:
    """Run the slots of job NAME in a past range, on purpose (trigger `backfill`).

    Slots that already have a run are left alone (one run per slot, always); a range that
    ends after now stops at now (never a future slot). It says first how many runs it
    would create, and for which slots, and asks on a terminal; a script passes --yes.
    More than --max-runs (default 1,000) are refused; at most 10,000 slots at a time. The
    overlap policy does not apply: you asked for these runs.

    \b
    Examples:
      cronjobs backfill report --from 2026-03-01 --to 2026-03-07
      cronjobs backfill report --from 7d --to now --dry-run
      cronjobs backfill report --from 2026-01-01 --to now --max-runs 5000 --yes
    """
    store = app.store()
    begin = parse_instant(start, option="--from", now=store.now)
    finish = parse_instant(end, option="--to", now=store.now, end=True)
    definition = get(store, name)

    def attempt(dry: bool) -> BackfillReport:
        return run_backfill(store, definition, begin, finish, max_runs=max_runs, dry_run=dry)

    times = app.times()
    if dry_run or not yes:
        preview = attempt(True)
        text = backfill_preview(preview, times)
        if dry_run:
            emit(backfill_json(preview) | {"dry_run": True}, text, as_json)
            return
        if preview.created:
            go_ahead(text, yes=yes, question=f"create {preview.created:,} run(s)?",
                     option_hint="add --yes to create them, or --dry-run to see them only")
    result = attempt(False)
    app.confirm(backfill_json(result) | {"dry_run": False}, backfill_text(result), as_json)
