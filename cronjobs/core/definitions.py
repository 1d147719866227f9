"""Job definitions: define, list, describe, pause, resume, remove, and schedule previews.

Each function validates everything first and writes nothing when input is bad; writes
happen in one short transaction, at the database's clock.
"""

from __future__ import annotations

import datetime as dt
import itertools
from collections.abc import Collection
from dataclasses import dataclass

from cronjobs import cron as schedules
from cronjobs.core import facts
from cronjobs.core.crowding import Crowding, check_define
from cronjobs.core.facts import JobInfo, RunInfo
from cronjobs.core.retention import KEEP_LEAST, KEEP_MOST
from cronjobs.cron.describe import describe_schedule
from cronjobs.db.store import Store
from cronjobs.errors import JobNotFound, ScheduleError, UsageError
from cronjobs.models import Definition, DefinitionSpec, Kind, NewSkip, Run, SkipReason
from cronjobs.reports import JobRun
from cronjobs.timefmt import in_zone
from cronjobs.validation import (
    MAX_COMMAND_CHARS,
    MAX_NOTE_CHARS,
    MAX_NOTIFY_URLS,
    check_name,
    check_notify_url,
    check_payload,
    check_text,
)

MAX_PREVIEW = 1000


@dataclass(frozen=True)
class Slot:
    """One fire time, in UTC and on the schedule's wall clock."""

    utc: dt.datetime
    local: dt.datetime


@dataclass(frozen=True)
class DefineResult:
    definition: Definition
    outcome: str  # "created", "updated" or "unchanged"
    next_slots: tuple[Slot, ...]
    warning: str | None = None  # e.g. no loaded --app module registers the handler
    description: str = ""  # the schedule in words, with its zone
    crowding: Crowding | None = None  # it lands in a crowded minute (a warning)


@dataclass(frozen=True)
class Listing:
    """A job as `list` shows it: its row, and its facts (state, next fire time, last run:
    :mod:`cronjobs.core.facts`)."""

    definition: Definition
    info: JobInfo


@dataclass(frozen=True)
class Description:
    """A job as `describe` shows it: its row, its facts, its next fire times (the slots the
    tick will run: none while paused without an end) and its latest runs."""

    definition: Definition
    info: JobInfo
    next_slots: tuple[Slot, ...]
    recent_runs: tuple[RunInfo, ...]

    @property
    def problem(self) -> str | None:
        return self.info.problem

    @property
    def description(self) -> str | None:
        return self.info.description


@dataclass(frozen=True)
class Preview:
    expression: str
    timezone: str
    job: str | None
    start: dt.datetime
    slots: tuple[Slot, ...]
    description: str = ""  # the schedule in words, with its zone
    note: str | None = None  # why there are no slots (a job paused without an end)


def validate_spec(spec: DefinitionSpec) -> None:
    """Raise a UsageError naming the first problem with ``spec``."""
    check_name(spec.name)
    schedules.parse(spec.schedule, spec.timezone, hash_key=spec.name)
    check_payload(spec.payload, what="--payload")
    if spec.kind == Kind.COMMAND:
        if spec.command is None or not spec.command.strip():
            raise UsageError("invalid --command: empty")
        check_text(spec.command, what="--command", limit=MAX_COMMAND_CHARS)
    else:
        handler = spec.handler or ""
        check_name(handler, what="handler name")
    if spec.backoff > spec.backoff_max:
        raise UsageError("invalid --backoff: longer than the backoff cap")
    for url in spec.notify_urls:
        check_notify_url(url)
    if len(spec.notify_urls) > MAX_NOTIFY_URLS:
        raise UsageError(f"invalid --notify: at most {MAX_NOTIFY_URLS} URLs per job")
    for keep, option in ((spec.keep_succeeded, "--keep-succeeded"),
                         (spec.keep_failed, "--keep-failed")):
        if keep is not None and not KEEP_LEAST <= keep <= KEEP_MOST:
            raise UsageError(f"invalid {option}: must be between 1d and 3650d")


def define(
    store: Store, spec: DefinitionSpec, *, known_handlers: Collection[str] | None = None,
    preview: int = 5, source: str | None = None, crowded_threshold: int | None = None,
) -> DefineResult:
    """Create or update a job (idempotent). A new schedule or zone continues from now, or
    from the job's cursor if that is later: the cursor never moves back (after ticks that
    ran ahead, or a database clock that stepped back), so no slot is decided twice. A new
    job continues likewise from where the removed jobs of its name left off.

    ``known_handlers`` are the handlers of the loaded --app modules (None: none configured).
    A handler they do not register is still accepted (it may live in another deployment's
    modules), with a warning in the result. ``source`` is recorded on a new job (``apply``);
    an existing job keeps its owner. A job landing in a minute that holds more than
    ``crowded_threshold`` fires of other jobs (None: the default, from the capacity shown;
    ``crowding.OFF``: not checked) is written all the same, with a warning in the result
    (see ``core.crowding``)."""
    validate_spec(spec)
    sched = schedules.parse(spec.schedule, spec.timezone, hash_key=spec.name)
    with store.transaction():
        now = store.now()
        existing = store.definitions.definition_by_name(spec.name, for_update=True)
        start = _start(store, spec.name, existing, now)
        if existing is not None and (
            (existing.schedule, existing.timezone) != (spec.schedule, spec.timezone)
            or existing.invalid_reason is not None
        ):
            store.materialise.insert_skips(_undecided(existing, spec, now), now=now, tick_id=None)
        stored = store.definitions.upsert_definition(spec, start=start,
                                                     next_due_at=sched.next_after(start),
                                                     source=source)
        if stored is None:
            definition = get(store, spec.name, for_update=True)
            outcome = "unchanged"
        else:
            definition, created = stored
            outcome = "created" if created else "updated"
    return DefineResult(definition, outcome, _slots(sched, start, preview),
                        _handler_warning(spec, known_handlers),
                        description=describe_schedule(sched),
                        crowding=crowding(store, definition, crowded_threshold))


def crowding(store: Store, definition: Definition, threshold: int | None) -> Crowding | None:
    """The crowded-minute warning of a job just defined (see ``define``); none while it is
    paused without an end."""
    if definition.paused_at is not None and definition.paused_until is None:
        return None
    return check_define(store, definition, threshold, after=definition.paused_until)


def _start(store: Store, name: str, existing: Definition | None,
           now: dt.datetime) -> dt.datetime:
    """The instant a new schedule of job ``name`` continues from: ``now``, or where its
    cursor is when that is later (ticks ran ahead of the database's clock, or the clock
    stepped back); for a new job, where the removed jobs of the name left off."""
    left_off = existing.cursor_at if existing is not None else store.definitions.left_off(name)
    return now if left_off is None else max(now, left_off)


def _handler_warning(spec: DefinitionSpec, known: Collection[str] | None) -> str | None:
    """What to tell whoever defines a handler job that no loaded module registers."""
    if spec.kind != Kind.HANDLER or spec.handler is None:
        return None
    if known is None:
        return (f"handler {spec.handler!r} not checked: no --app module is configured (try "
                "--app MODULE); only ticks whose --app modules register it run this job")
    if spec.handler in known:
        return None
    registered = ", ".join(sorted(known)) or "none"
    return (f"no --app module registers handler {spec.handler!r} (registered: {registered}); "
            "only ticks whose --app modules register it run this job (try --app MODULE)")


def _undecided(old: Definition, spec: DefinitionSpec, now: dt.datetime) -> list[NewSkip]:
    """The old schedule's due slots that no tick decided yet, recorded when a new schedule
    takes over (it continues from now), so that none is dropped silently."""
    try:
        sched = schedules.parse(old.schedule, old.timezone, hash_key=old.name)
        slots = list(itertools.islice(sched.between(old.cursor_at, now), 10_001))
    except ScheduleError as exc:
        start = old.next_due_at or old.cursor_at
        if start > now:
            return []
        reason = old.invalid_reason or exc.message
        return [NewSkip(old.id, start, now, None, SkipReason.INVALID, reason)]
    if old.invalid_reason is not None:
        start = old.next_due_at or old.cursor_at
        if start > now:
            return []
        return [NewSkip(old.id, start, now, None, SkipReason.INVALID, old.invalid_reason)]
    if not slots:
        return []
    count = len(slots) if len(slots) <= 10_000 else None
    detail = (f"the schedule changed from {old.schedule!r} ({old.timezone}) to "
              f"{spec.schedule!r} ({spec.timezone}) before a tick decided these slots")
    last = sched.latest_at_or_before(now) or slots[-1]
    return [NewSkip(old.id, slots[0], last, count, SkipReason.SUPERSEDED, detail)]


def list_jobs(store: Store) -> list[Listing]:
    """Every job with its facts: its state and next fire time (the first slot the tick will
    run: none while paused, or after the pause's end); one whose stored schedule cannot be
    evaluated is reported, not fatal."""
    now = store.now()
    return [Listing(s.definition, job_info(s.definition, now,
                                           last_run_state=s.last_run_status,
                                           last_run_at=s.last_run_at))
            for s in store.definitions.list_definitions()]


def job_info(definition: Definition, now: dt.datetime, *, last_run_state: str | None = None,
             last_run_at: dt.datetime | None = None) -> JobInfo:
    """The facts of a job at ``now`` (:func:`cronjobs.core.facts.job_info`), with its
    schedule in words."""
    return facts.job_info(definition, now, description=schedule_words(definition),
                          last_run_state=last_run_state, last_run_at=last_run_at)


def schedule_words(definition: Definition) -> str | None:
    """A job's schedule in words, with its zone (None when it cannot be evaluated)."""
    if facts.problem(definition) is not None:
        return None
    return describe_schedule(schedules.parse(definition.schedule, definition.timezone,
                                             hash_key=definition.name))


def describe(store: Store, name: str, *, count: int = 5, runs: int = 10) -> Description:
    """A job's row, facts, next ``count`` fire times and latest ``runs`` runs: of the job
    defined as ``name``, else of the latest removed one (shown as removed: no fire times)."""
    definition = shown(store, name)
    now = store.now()
    recent = store.runs.recent_runs(definition.id, runs)
    last = recent[0] if recent else None
    info = job_info(definition, now,
                          last_run_state=last.status if last is not None else None,
                          last_run_at=_run_time(last) if last is not None else None)
    slots: tuple[Slot, ...] = ()
    if info.problem is None:
        sched = schedules.parse(definition.schedule, definition.timezone, hash_key=name)
        slots = tuple(Slot(utc, sched.local(utc))
                      for utc in facts.next_fire_times(definition, now, count))
    return Description(definition, info, slots,
                       tuple(facts.load_runs(store,
                                             (JobRun.of(r, definition) for r in recent))))


def _run_time(run: Run) -> dt.datetime:
    """When a run last did something, as `list` shows it beside its status."""
    return run.finished_at or run.started_at or run.scheduled_for


def get(store: Store, name: str, *, for_update: bool = False) -> Definition:
    """The job called ``name`` (locked for the rest of the transaction with ``for_update``),
    or JobNotFound (saying so when the name is a removed job's: nothing acts on it)."""
    check_name(name)
    definition = store.definitions.definition_by_name(name, for_update=for_update)
    if definition is None:
        raise _not_found(name, store.definitions.definition_history(name))
    return definition


def shown(store: Store, name: str) -> Definition:
    """Job ``name`` as the views show it (describe, the dashboard's page of a job): the job
    defined now, else the latest removed job of that name; JobNotFound when there never was
    one."""
    check_name(name)
    history = store.definitions.definition_history(name)
    current = [d for d in history if d.removed_at is None]
    if not history:
        raise _not_found(name, history)
    return current[0] if current else history[0]


def _not_found(name: str, history: list[Definition]) -> JobNotFound:
    """No job is defined as ``name``; ``history``: the removed ones that carried it."""
    removed = [d.removed_at for d in history if d.removed_at is not None]
    if removed:
        when = in_zone(max(removed), dt.UTC)
        return JobNotFound(f"job {name!r} was removed at {when}",
                           advice=f" (its runs stay: `cronjobs runs {name}`)",
                           python=f"job {name!r} was removed at {when} (its runs stay: "
                           f"Client.runs({name!r}))")
    return JobNotFound(f"no job named {name!r}", advice=" (see `cronjobs list`)",
                       python=f"no job named {name!r} (see Client.jobs())")


def pause(
    store: Store, name: str, *, until: dt.datetime | None = None, note: str | None = None
) -> Definition:
    """Pause a job: its slots are recorded as paused, not run, until it is resumed
    (or until ``until``)."""
    return pause_if_active(store, name, until=until, note=note)[0]


def pause_if_active(store: Store, name: str, *, until: dt.datetime | None = None,
                    note: str | None = None) -> tuple[Definition, bool]:
    """:func:`pause`, and whether anything changed: pausing a paused job again without
    ``until`` or ``note`` changes nothing (it keeps its pause's end and note); with them,
    they replace the pause's."""
    check_name(name)
    if note is not None:
        check_text(note, what="--note", limit=MAX_NOTE_CHARS, python_what="note")
    with store.transaction():
        definition = get(store, name, for_update=True)
        if definition.paused_at is not None and until is None and note is None:
            return definition, False
        now = store.now()
        if until is not None and until <= now:
            raise UsageError(f"invalid --until {until.isoformat()}: it is already past",
                             python=f"invalid until={until.isoformat()}: it is already past")
        return (store.definitions.pause_definition(definition.id, now=now, until=until,
                                                   note=note), True)


def resume(store: Store, name: str) -> Definition:
    """Resume a paused job from now; the slots it missed while paused are recorded as
    paused, never replayed."""
    return resume_if_paused(store, name)[0]


def resume_if_paused(store: Store, name: str) -> tuple[Definition, bool]:
    """:func:`resume`, and whether the job was paused (else nothing changed)."""
    check_name(name)
    with store.transaction():
        definition = get(store, name, for_update=True)
        now = store.now()
        if definition.paused_at is None:
            return definition, False
        next_due: dt.datetime | None = None
        if facts.problem(definition) is None:
            sched = schedules.parse(definition.schedule, definition.timezone, hash_key=name)
            missed = list(sched.between(definition.cursor_at, now))
            if missed:
                store.definitions.record_skip(
                    definition.id, first_slot=missed[0], last_slot=missed[-1],
                    slot_count=len(missed), reason=SkipReason.PAUSED,
                    detail=definition.pause_note, now=now,
                )
            next_due = sched.next_after(max(now, definition.cursor_at))
        return (store.definitions.resume_definition(definition.id, now=now,
                                                    next_due_at=next_due), True)


def remove(store: Store, name: str, *, dry_run: bool = False) -> tuple[Definition, int]:
    """Remove a job. Its history stays readable; its waiting runs are cancelled and its
    running runs are asked to stop. Returns the definition and the cancelled count
    (``dry_run``: what it would be; the same statements, undone)."""
    check_name(name)
    with store.transaction(rollback=dry_run):
        definition = get(store, name, for_update=True)
        return store.definitions.remove_definition(definition.id, now=store.now())


def fire_times(store: Store, name: str, *, count: int = 5,
               start: dt.datetime | None = None) -> list[dt.datetime]:
    """The next ``count`` fire times of job ``name``: without ``start``, the slots the tick
    will run (as `list` shows the first: none while paused without an end); with
    ``start``, its schedule's after that instant."""
    if not 1 <= count <= MAX_PREVIEW:
        raise UsageError(f"invalid --count {count}: must be between 1 and {MAX_PREVIEW}",
                         python=f"invalid count={count}: must be between 1 and {MAX_PREVIEW}")
    if start is not None:
        return [slot.utc for slot in preview_job(store, name, start=start, count=count).slots]
    definition = get(store, name)
    problem = facts.problem(definition)
    if problem is not None:
        raise ScheduleError(f"job {name!r} cannot be evaluated: {problem}")
    return list(facts.next_fire_times(definition, store.now(), count))


def preview(
    expression: str,
    *,
    timezone: str = "UTC",
    start: dt.datetime | None = None,
    count: int = 5,
    job: str = "",
) -> Preview:
    """The next ``count`` fire times of a bare expression after ``start`` (default: this
    machine's clock, since no database is involved)."""
    if not 1 <= count <= MAX_PREVIEW:
        raise UsageError(f"invalid --count {count}: must be between 1 and {MAX_PREVIEW}",
                         python=f"invalid count={count}: must be between 1 and {MAX_PREVIEW}")
    sched = schedules.parse(expression, timezone, hash_key=job)
    begin = start if start is not None else dt.datetime.now(dt.UTC)
    return Preview(sched.expression, sched.timezone, job or None, begin,
                   _slots(sched, begin, count), describe_schedule(sched))


def preview_job(
    store: Store, name: str, *, timezone: str | None = None, start: dt.datetime | None = None,
    count: int = 5,
) -> Preview:
    """The next fire times of a defined job, after ``start``, computed exactly as the tick
    computes them. Without ``start``: the slots the tick will run, as `list` and
    `describe` show them (after a pause's end; none while paused without an end)."""
    definition = get(store, name)
    problem = facts.problem(definition)
    if problem is not None:
        raise ScheduleError(f"job {name!r} cannot be evaluated: {problem}")
    now = store.now()
    begin = start if start is not None else facts.upcoming_from(definition, now)
    if begin is None:
        schedule = preview(definition.schedule, timezone=definition.timezone, start=now,
                           count=1, job=name)
        return Preview(schedule.expression, timezone or definition.timezone, name, now, (),
                       schedule.description,
                       note=f"job {name!r} is paused: no slot runs until it is resumed "
                            "(its schedule's times: --from now)")
    result = preview(definition.schedule, timezone=definition.timezone, start=begin,
                     count=count, job=name)
    if timezone is None:
        return result
    zone = schedules.check_timezone(timezone)
    shown = tuple(Slot(s.utc, s.utc.astimezone(zone)) for s in result.slots)
    return Preview(result.expression, timezone, name, begin, shown, result.description)


def _slots(sched: schedules.Schedule, after: dt.datetime, count: int) -> tuple[Slot, ...]:
    return tuple(
        Slot(utc, sched.local(utc)) for utc in itertools.islice(sched.iter_after(after), count)
    )
