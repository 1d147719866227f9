"""``cronjobs explain``: for every slot of a range, what became of it: the state of its run
(queued, running, failed, succeeded, dead, cancelled), or why it has none."""

from __future__ import annotations

import datetime as dt
import itertools
from collections.abc import Callable
from dataclasses import dataclass

from cronjobs import cron as schedules
from cronjobs.core import facts
from cronjobs.core.facts import RunInfo
from cronjobs.core.groups import usage_of
from cronjobs.core.health import Thresholds, waiting_for_handlers
from cronjobs.db.store import Store
from cronjobs.errors import JobNotFound, ScheduleError, UsageError
from cronjobs.models import Definition, Run, WaitingRuns
from cronjobs.reports import GroupUsage, Skip
from cronjobs.validation import check_name

TICK = dt.timedelta(microseconds=1)
MAX_SLOTS = 2000

REASONS = {
    "missed_deadline": "missed its starting deadline",
    "coalesced": "coalesced by catch-up: a later missed slot ran instead",
    "catchup_none": "late, and catch-up is 'none'",
    "catchup_limit": "beyond the catch-up limit",
    "overlap": "skipped by the overlap policy: the previous run had not finished",
    "paused": "the job was paused",
    "invalid": "the definition could not be evaluated",
    "superseded": "the schedule was changed before a tick decided this slot",
}


@dataclass(frozen=True)
class Explained:
    """One slot (or range of slots) and what became of it."""

    first_slot: dt.datetime
    last_slot: dt.datetime
    slot_count: int | None
    # a run's status when the slot has a run (queued, running, failed, succeeded, dead,
    # cancelled); else "skipped", "pending", "not-a-slot" or "unknown"
    outcome: str
    reason: str | None
    detail: str | None
    run: Run | None = None
    info: RunInfo | None = None  # the run's facts (cronjobs.core.facts)


@dataclass(frozen=True)
class Explanation:
    job: str
    definition: Definition
    start: dt.datetime
    end: dt.datetime
    rows: tuple[Explained, ...]
    # the job's due runs that wait for its handler, which no recent tick has loaded
    # (handler, runs, oldest), or None
    waiting: WaitingRuns | None = None
    # the job's one-off runs waiting for their time (trigger --at), whatever the range
    one_offs: tuple[RunInfo, ...] = ()
    # the job's group (its limit, running and waiting runs), if it has one
    group: GroupUsage | None = None


def explain(store: Store, name: str, *, start: dt.datetime | None = None,
            end: dt.datetime | None = None) -> Explanation:
    """Answer, for every slot of [start, end] (default: the last 24 hours), whether it ran
    and, if not, why. Runs and skip records in the range that are not slots of the current
    schedule (an older schedule, manual runs) are listed too."""
    check_name(name)
    history = store.definitions.definition_history(name)
    if not history:
        raise JobNotFound(f"no job named {name!r} (see `cronjobs list`)")
    definition = history[0]
    now = store.now()
    end = end if end is not None else now
    start = start if start is not None else end - dt.timedelta(days=1)
    if start > end:
        raise UsageError("invalid range: --from is after --to")
    runs: list[Run] = []
    skips: list[Skip] = []
    for d in history:
        runs += store.materialise.runs_between(d.id, start, end)
        skips += store.materialise.skips_between(d.id, start, end)
    slots = _slots(definition, start, end)
    rows: list[Explained] = []
    matched_runs: set[int] = set()
    matched_skips: set[int] = set()
    run_of, skip_of = _run_finder(runs), _skip_finder(skips)
    infos = {info.id: info for info in facts.load_runs(store, ((r, name) for r in runs))}
    for slot in slots:
        run = run_of(slot)
        if run is not None:
            matched_runs.add(run.id)
            info = infos[run.id]
            rows.append(Explained(slot, slot, 1, run.status, None, facts.run_words(info, now),
                                  run, info))
            continue
        skip = skip_of(slot)
        if skip is not None:
            matched_skips.add(skip.id)
            rows.append(Explained(slot, slot, 1, "skipped", skip.reason, skip.detail))
        elif definition.removed_at is not None and slot > definition.cursor_at:
            rows.append(Explained(slot, slot, 1, "not-a-slot", None,
                                  f"the job was removed at {definition.removed_at.isoformat()}"))
        elif slot > definition.cursor_at:
            rows.append(Explained(slot, slot, 1, "pending", None,
                                  "not decided yet: the next tick decides it"))
        elif slot <= definition.created_at:
            rows.append(Explained(slot, slot, 1, "not-a-slot", None,
                                  "before the job was defined"))
        elif slot <= definition.schedule_since:
            rows.append(Explained(slot, slot, 1, "not-a-slot", None,
                                  "before the current schedule took effect "
                                  f"({definition.schedule_since.isoformat()})"))
        else:
            rows.append(Explained(slot, slot, 1, "unknown", None, "no record of this slot"))
    for run in runs:
        if run.id not in matched_runs:
            info = infos[run.id]
            rows.append(Explained(run.scheduled_for, run.scheduled_for, 1, run.status, None,
                                  facts.run_words(info, now), run, info))
    for skip in skips:
        if skip.id not in matched_skips:
            rows.append(Explained(skip.first_slot, skip.last_slot, skip.slot_count, "skipped",
                                  skip.reason, skip.detail))
    rows.sort(key=lambda r: (r.first_slot, r.last_slot))
    return Explanation(name, definition, start, end, tuple(rows),
                       *_waiting(store, definition, now))


def _waiting(store: Store, definition: Definition, now: dt.datetime
             ) -> tuple[WaitingRuns | None, tuple[RunInfo, ...], GroupUsage | None]:
    """What the job's runs wait for: a handler no recent tick loaded, their time (one-off
    runs for later), a free slot of their group."""
    waiting = None
    if definition.kind == "handler" and definition.removed_at is None:
        found = waiting_for_handlers(store, now, Thresholds().max_tick_age, definition.id)
        waiting = found[0] if found else None
    one_offs = tuple(facts.load_runs(
        store, ((r, definition.name) for r in store.materialise.one_off_runs_of(definition.id))))
    group = None
    if definition.group_name is not None:
        group = usage_of(store, definition.group_name, now)
    return waiting, one_offs, group


def _slots(definition: Definition, start: dt.datetime, end: dt.datetime) -> list[dt.datetime]:
    if definition.invalid_reason is not None:
        return []
    try:
        sched = schedules.parse(definition.schedule, definition.timezone,
                                hash_key=definition.name)
        slots = list(itertools.islice(sched.between(start - TICK, end), MAX_SLOTS + 1))
    except ScheduleError:
        return []
    if len(slots) > MAX_SLOTS:
        raise UsageError(f"the range holds more than {MAX_SLOTS} slots of {definition.name!r}: "
                         "narrow it with --from and --to")
    return slots


# Lookups by slot, so that a day of a minutely job is 1,440 steps, not 1,440 squared.

def _run_finder(runs: list[Run]) -> Callable[[dt.datetime], Run | None]:
    """The slot's first run of the slot key (schedule or backfill), else its first run."""
    keyed: dict[dt.datetime, Run] = {}
    any_run: dict[dt.datetime, Run] = {}
    for run in runs:
        any_run.setdefault(run.scheduled_for, run)
        if run.trigger in ("schedule", "backfill"):
            keyed.setdefault(run.scheduled_for, run)
    return lambda slot: keyed.get(slot) or any_run.get(slot)


def _skip_finder(skips: list[Skip]) -> Callable[[dt.datetime], Skip | None]:
    """The first skip record (in the given order) whose range covers the slot."""
    single: dict[dt.datetime, tuple[int, Skip]] = {}
    ranges: list[tuple[int, Skip]] = []
    for index, skip in enumerate(skips):
        if skip.first_slot == skip.last_slot:
            single.setdefault(skip.first_slot, (index, skip))
        else:
            ranges.append((index, skip))

    def find(slot: dt.datetime) -> Skip | None:
        covering = [found for found in (single.get(slot),) if found is not None] + [
            (index, skip) for index, skip in ranges if skip.first_slot <= slot <= skip.last_slot]
        return min(covering, key=lambda found: found[0])[1] if covering else None

    return find
