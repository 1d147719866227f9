"""Turning due schedule slots into runs, exactly once, with every decision recorded.

For each due definition the tick decides every slot between the definition's cursor (all
slots up to it are decided) and the tick's instant: a slot becomes a run, or a skip record
with its reason. Runs are inserted with one ``INSERT … ON CONFLICT DO NOTHING`` on the slot
key, and the cursor moves in the same transaction, so a crash leaves either everything or
nothing, and concurrent or repeated ticks can never decide a slot twice.

``decide`` is pure: a definition, an instant and the job's active runs in, a decision out.
"""

from __future__ import annotations

import datetime as dt
import itertools
import logging
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field

from cronjobs import cron as schedules
from cronjobs.db.store import Store
from cronjobs.durations import format_duration
from cronjobs.errors import ScheduleError, UsageError
from cronjobs.models import (
    Advance,
    Catchup,
    Definition,
    DueDefinition,
    NewRun,
    NewSkip,
    Overlap,
    SkipReason,
    Trigger,
)
from cronjobs.timefmt import in_zone

log = logging.getLogger(__name__)

TICK = dt.timedelta(microseconds=1)
COUNT_LIMIT = 10_000  # skipped ranges are counted up to this many slots
NONE_WINDOW = dt.timedelta(minutes=1)  # catch-up "none": on time means within a minute
BATCH = 5000
PART = 100  # definitions decided and written at a time within a batch
BACKFILL_LIMIT = 10_000  # the most slots one backfill reads
BACKFILL_MAX_RUNS = 1_000  # the most runs `cronjobs backfill` creates unless told more
# The policies by their value in the row (a lookup, cheaper than calling the enum).
_CATCHUPS = {c.value: c for c in Catchup}
_OVERLAPS = {o.value: o for o in Overlap}


@dataclass(frozen=True)
class Decision:
    """What to do with one definition's due slots."""

    definition_id: int
    runs: tuple[dt.datetime, ...]
    skips: tuple[NewSkip, ...]
    advance: Advance
    cancel_running: bool = False


@dataclass(frozen=True)
class Decided:
    """One decision as reported to the user: a run, or skipped slots with a reason."""

    job: str
    first_slot: dt.datetime
    last_slot: dt.datetime
    slot_count: int | None
    outcome: str  # "run", "exists" (the slot already had a run) or a SkipReason value
    detail: str | None = None


@dataclass
class MaterialiseReport:
    definitions: int = 0
    materialised: int = 0
    released: int = 0  # one-off runs (trigger --at) queued at their time
    one_offs_skipped: int = 0  # ... or cancelled by their job's overlap policy
    skipped_slots: int = 0
    invalid: list[str] = field(default_factory=list)
    decisions: list[Decided] = field(default_factory=list)


def decide(d: DueDefinition, now: dt.datetime, *, running: int = 0, waiting: int = 0,
           earliest: dt.datetime | None = None) -> Decision:
    """Decide every slot of ``d`` in (cursor, now]. ``running`` counts the job's runs that
    hold a live lease, ``waiting`` its runs queued or awaiting a retry, ``earliest`` is the
    earliest slot (or trigger instant) among them: runs asked for after every due slot
    (a run triggered after the slot came due, decided by a late tick) do not hold it back."""
    try:
        sched = schedules.parse(d.schedule, d.timezone, hash_key=d.name)
        # From the cursor, not d.next_due_at: that is how the row was found, worked out when
        # the cursor last moved, and it may be stale since (new zone rules, a schedule
        # edited with SQL). Jobs sharing a schedule, a zone and a cursor (those decided by
        # the same tick) share this answer: the schedule module remembers it.
        first = sched.next_after(d.cursor_at)
    except ScheduleError as exc:
        return _invalid(d, now, exc.message)
    if now <= d.cursor_at or first > now:
        # Nothing due (or the clock went backwards): decide nothing twice.
        return Decision(d.id, (), (), Advance(d.id, d.cursor_at, first))

    second = sched.next_after(first)
    if second > now:  # the usual case: exactly one slot is due
        latest, next_due = first, second
    else:
        latest, next_due = _latest(sched, now), sched.next_after(now)
    skips: list[NewSkip] = []
    resumed = False

    def skip(a: dt.datetime, b: dt.datetime, reason: SkipReason, detail: str | None) -> None:
        skips.append(NewSkip(d.id, a, b, _count(sched, a, b), reason, detail))

    if d.paused_at is not None:
        if d.paused_until is None or d.paused_until > now:
            skip(first, latest, SkipReason.PAUSED, _pause_detail(d))
            return Decision(d.id, (), tuple(skips), Advance(d.id, now, next_due))
        # paused until a moment that has passed: slots until then were paused
        last_paused = sched.latest_at_or_before(d.paused_until)
        if last_paused is not None and last_paused >= first:
            skip(first, last_paused, SkipReason.PAUSED, _pause_detail(d))
            first = sched.next_after(last_paused)
        resumed = True
        if first > now:
            advance = Advance(d.id, now, next_due, resumed=True)
            return Decision(d.id, (), tuple(skips), advance)

    chosen = _catch_up(d, sched, first, latest, now, skip)

    if chosen and earliest is not None and earliest > chosen[-1]:
        running = waiting = 0  # every unfinished run came after these slots
    runs, overlap_skips, cancel = _apply_overlap(d, chosen, running, waiting)
    skips.extend(overlap_skips)
    skips.sort(key=lambda s: s.first_slot)
    advance = Advance(d.id, now, next_due, resumed=resumed)
    return Decision(d.id, tuple(runs), tuple(skips), advance, cancel_running=cancel)


def _catch_up(d: DueDefinition, sched: schedules.Schedule, first: dt.datetime,
              latest: dt.datetime, now: dt.datetime,
              skip: Callable[[dt.datetime, dt.datetime, SkipReason, str | None], None]
              ) -> list[dt.datetime]:
    """Which of the due slots first..latest run, by the catch-up policy and the starting
    deadline; the others are recorded through ``skip``."""
    catchup = _CATCHUPS[d.catchup]
    deadline = d.starting_deadline
    if deadline is None and catchup == Catchup.NONE:
        deadline = NONE_WINDOW
    timely_first = first
    if deadline is not None and first < now - deadline:  # some slots are late
        timely_first = max(first, sched.next_after(now - deadline - TICK))
        if timely_first > first:
            last_late = min(latest, _before(sched, timely_first))
            reason = (SkipReason.CATCHUP_NONE if catchup == Catchup.NONE
                      else SkipReason.MISSED_DEADLINE)
            skip(first, last_late, reason,
                 f"later than the starting deadline of {format_duration(deadline)}")
    chosen: list[dt.datetime] = []
    if timely_first <= latest:
        if catchup == Catchup.ALL:
            chosen = list(_walk_back(sched, latest, timely_first, d.catchup_limit))
            chosen.reverse()
            if chosen[0] > timely_first:
                skip(timely_first, _before(sched, chosen[0]), SkipReason.CATCHUP_LIMIT,
                     f"catch-up 'all' runs at most {d.catchup_limit} missed slots")
        else:
            chosen = [latest]
            if latest > timely_first:
                reason = (SkipReason.CATCHUP_NONE if catchup == Catchup.NONE
                          else SkipReason.COALESCED)
                detail = ("catch-up 'none' runs only the current slot"
                          if catchup == Catchup.NONE
                          else f"catch-up 'latest' ran only {in_zone(latest, dt.UTC)}")
                skip(timely_first, _before(sched, latest), reason, detail)

    return chosen


def _apply_overlap(d: DueDefinition, chosen: list[dt.datetime], running: int, waiting: int
                   ) -> tuple[list[dt.datetime], list[NewSkip], bool]:
    if not chosen:
        return [], [], False
    policy = _OVERLAPS[d.overlap]
    busy = running > 0 or waiting > 0
    keep = chosen
    if policy == Overlap.SKIP and busy:
        keep = []
    elif policy == Overlap.QUEUE and busy:
        keep = [] if waiting > 0 else chosen[-1:]
    dropped = chosen[: len(chosen) - len(keep)]
    skips = []
    if dropped:
        state = (f"{running} run(s) still running" if running
                 else f"{waiting} run(s) still waiting")
        detail = f"overlap '{policy.value}': {state}"
        skips.append(NewSkip(d.id, dropped[0], dropped[-1], len(dropped), SkipReason.OVERLAP,
                             detail))
    return keep, skips, policy == Overlap.REPLACE and running > 0


def _invalid(d: DueDefinition, now: dt.datetime, reason: str) -> Decision:
    skips: tuple[NewSkip, ...] = ()
    start = d.next_due_at or d.cursor_at
    if start <= now:
        skips = (NewSkip(d.id, start, max(start, now), None, SkipReason.INVALID, reason),)
    return Decision(d.id, (), skips, Advance(d.id, max(now, d.cursor_at), None, reason))


def _pause_detail(d: DueDefinition) -> str:
    return "paused" + (f": {d.pause_note}" if d.pause_note else "")


def _latest(sched: schedules.Schedule, instant: dt.datetime) -> dt.datetime:
    latest = sched.latest_at_or_before(instant)
    if latest is None:  # pragma: no cover - callers checked a slot is due
        raise ScheduleError("no slot at or before the tick")
    return latest


def _before(sched: schedules.Schedule, slot: dt.datetime) -> dt.datetime:
    return _latest(sched, slot - TICK)


def _walk_back(sched: schedules.Schedule, latest: dt.datetime, floor: dt.datetime,
               limit: int) -> Iterator[dt.datetime]:
    slot: dt.datetime | None = latest
    for _ in range(limit):
        if slot is None or slot < floor:
            return
        yield slot
        slot = sched.latest_at_or_before(slot - TICK)


def _count(sched: schedules.Schedule, first: dt.datetime, last: dt.datetime) -> int | None:
    slots = itertools.islice(sched.between(first - TICK, last), COUNT_LIMIT + 1)
    total = sum(1 for _ in slots)
    return total if total <= COUNT_LIMIT else None


def exclusive(d: Definition | DueDefinition) -> bool:
    """Whether the job's runs must not run beside each other (overlap skip or queue)."""
    return _OVERLAPS[d.overlap] in (Overlap.SKIP, Overlap.QUEUE)


# -- applying decisions -------------------------------------------------------------------

def materialise(store: Store, now: dt.datetime, *, tick_id: int | None = None,
                batch: int = BATCH, part: int = PART, dry_run: bool = False
                ) -> MaterialiseReport:
    """Decide every due slot of every due definition, in batches of short transactions.
    Concurrent ticks take different definitions (SKIP LOCKED). With ``dry_run`` everything
    is decided in one transaction that is rolled back: nothing is written."""
    report = MaterialiseReport()

    def one_batch(first: bool) -> int:
        return _materialise_batch(store, now, tick_id=tick_id, batch=batch, part=part,
                                  include_unscheduled=first, report=report)

    if dry_run:
        with store.transaction(rollback=True):
            first = True
            while one_batch(first) >= batch:
                first = False
            release_one_offs(store, now, report, batch=batch)
        return report
    if not store.materialise.anything_to_materialise(now=now):
        # (an empty tick's case: what the loop below would find is nothing, read without
        # locking; a row that comes due after this read is the next tick's, as it would be
        # after the locking reads)
        return report
    first, released = True, 0
    while True:
        with store.transaction():
            found = one_batch(first)
            if found < batch:  # the last batch: the first one-off runs in its transaction
                released = release_one_offs(store, now, report, batch=batch)
        first = False
        if found < batch:
            break
    while released >= batch:
        with store.transaction():
            released = release_one_offs(store, now, report, batch=batch)
    return report


def release_one_offs(store: Store, now: dt.datetime, report: MaterialiseReport, *,
                     batch: int = BATCH) -> int:
    """One-off runs (trigger --at) whose time has come meet their job's overlap policy, as
    a manual trigger does: queued to be claimed, or cancelled saying why (skip: the job is
    busy; queue: a run already waits); replace asks the running run to stop. Returns how
    many were decided."""
    due = store.materialise.due_one_off_runs(now=now, limit=batch)
    if not due:
        return 0
    active = store.materialise.active_runs(sorted({row.definition_id for row in due}), now=now)
    counts = {key: list(value) for key, value in active.items()}
    releases: list[tuple[int, bool, str | None]] = []
    replace: set[int] = set()
    for row in due:
        running, waiting = counts.setdefault(row.definition_id, [0, 0])
        policy = _OVERLAPS[row.overlap]
        error = None
        if policy == Overlap.SKIP and (running or waiting):
            error = (f"skipped at its time: the job had {running} running and {waiting} "
                     "waiting run(s) and its overlap policy is 'skip'")
        elif policy == Overlap.QUEUE and waiting:
            error = ("skipped at its time: a run was already waiting and the job's overlap "
                     "policy is 'queue'")
        elif policy == Overlap.REPLACE and running:
            replace.add(row.definition_id)
        if error is None:
            counts[row.definition_id][1] += 1
        releases.append((row.id, policy in (Overlap.SKIP, Overlap.QUEUE), error))
        outcome = "run" if error is None else Overlap.SKIP.value
        report.released += error is None
        report.one_offs_skipped += error is not None
        report.decisions.append(Decided(row.name, row.scheduled_for,
                                        row.scheduled_for, 1,
                                        "one-off" if outcome == "run" else "overlap", error))
    store.materialise.release_one_off_runs(releases, now=now)
    if replace:
        store.definitions.request_cancel_running(sorted(replace), now=now)
    return len(due)


def _materialise_batch(store: Store, now: dt.datetime, *, tick_id: int | None, batch: int,
                       part: int, include_unscheduled: bool, report: MaterialiseReport
                       ) -> int:
    definitions = store.materialise.due_definitions(now=now, limit=batch)
    if include_unscheduled:
        definitions += store.materialise.unscheduled_definitions(limit=batch)
    if not definitions:
        return 0
    active = store.materialise.active_runs_since([d.id for d in definitions], now=now)
    idle = (0, 0, None)
    decided: list[tuple[DueDefinition, Decision]] = []
    answers = []
    # The batch is decided a part at a time, each part written while the next one is
    # decided: in the pipeline its statements go out without waiting for the server.
    with store.pipeline():
        for start in range(0, len(definitions), part):
            some = []
            for d in definitions[start:start + part]:
                running, waiting, earliest = active.get(d.id, idle)
                some.append((d, decide(d, now, running=running, waiting=waiting,
                                       earliest=earliest)))
            new_runs = [NewRun(d.id, slot, Trigger.SCHEDULE, d.max_attempts, slot,
                               exclusive(d))
                        for d, dec in some for slot in dec.runs]
            answers.append(store.materialise.send_runs(new_runs, now=now, tick_id=tick_id))
            store.materialise.insert_skips([s for _, dec in some for s in dec.skips], now=now,
                               tick_id=tick_id)
            store.materialise.advance_definitions([dec.advance for _, dec in some])
            decided += some
    cancel = [d.id for d, dec in decided if dec.cancel_running]
    if cancel:
        store.definitions.request_cancel_running(cancel, now=now)
    _report(report, decided, {run for answer in answers for run in answer()})
    return len(definitions)


def _report(report: MaterialiseReport, decided: list[tuple[DueDefinition, Decision]],
            created: set[tuple[int, dt.datetime]]) -> None:
    logged = log.isEnabledFor(logging.INFO)  # thousands of records: build none unread
    for d, dec in decided:
        name = d.name
        report.definitions += 1
        if dec.advance.invalid_reason is not None:
            report.invalid.append(name)
        for slot in dec.runs:
            made = (d.id, slot) in created
            report.materialised += made
            report.decisions.append(Decided(name, slot, slot, 1, "run" if made else "exists"))
            if logged:
                log.info("run materialised" if made else "slot already had a run",
                         extra={"action": "materialise", "job": name,
                                "slot": slot.isoformat()})
        for s in dec.skips:
            report.skipped_slots += s.slot_count or 1
            report.decisions.append(Decided(name, s.first_slot, s.last_slot, s.slot_count,
                                            s.reason.value, s.detail))
            if logged:
                log.info("slots skipped", extra={"action": "skip", "job": name,
                                                 "reason": s.reason.value})


# -- backfill -----------------------------------------------------------------------------

@dataclass(frozen=True)
class BackfillReport:
    job: str
    slots: tuple[dt.datetime, ...]  # every slot of the range
    created: int
    created_slots: tuple[dt.datetime, ...] = ()  # the slots that got (would get) a run
    dry_run: bool = False  # nothing was written: ``created`` says what would have been

    @property
    def existing(self) -> int:
        return len(self.slots) - self.created


def backfill(store: Store, definition: Definition, start: dt.datetime, end: dt.datetime,
             *, now: dt.datetime | None = None, max_runs: int | None = None,
             dry_run: bool = False) -> BackfillReport:
    """Materialise the slots of a past range [start, end] on purpose (trigger ``backfill``).
    Slots that already have a run keep it: the unique slot key decides. A range ending
    after now ends at now: never a future slot. More than ``max_runs`` new runs are
    refused; ``dry_run`` writes nothing and reports what would be created (the same
    statements, undone)."""
    sched = schedules.parse(definition.schedule, definition.timezone, hash_key=definition.name)
    if end < start:
        raise UsageError("invalid range: --to is before --from")
    with store.transaction(rollback=dry_run):
        current = now if now is not None else store.now()
        if start > current:
            raise UsageError(f"invalid --from {start.isoformat()}: backfill is for the past "
                             f"(now is {in_zone(current, dt.UTC)})")
        end = min(end, current)
        slots = list(itertools.islice(sched.between(start - TICK, end), BACKFILL_LIMIT + 1))
        if len(slots) > BACKFILL_LIMIT:
            raise UsageError(f"the range holds more than {BACKFILL_LIMIT:,} slots of "
                             f"{definition.name}: backfill a shorter range at a time")
        # a slot whose run retention dropped must not run again: the history cannot tell
        # whether one before the horizon ran
        horizon = store.materialise.retention_horizon(definition.id)
        if slots and horizon is not None and slots[0] < horizon:
            raise UsageError(
                f"invalid --from {start.isoformat()}: retention has dropped runs of "
                f"{definition.name} from before {horizon.isoformat()}, so cronjobs cannot "
                "tell whether an older slot ran (use `cronjobs trigger` to run one on purpose)")
        runs = [NewRun(definition.id, s, Trigger.BACKFILL, definition.max_attempts, current,
                       exclusive(definition)) for s in slots]
        created = store.materialise.insert_backfill_runs(runs, now=current)
        if max_runs is not None and len(created) > max_runs:  # undone with the transaction
            raise UsageError(
                f"backfill of {definition.name} would create {len(created):,} runs, more "
                f"than --max-runs {max_runs:,}: give --max-runs {len(created)} to create "
                "them, or backfill a shorter range")
    return BackfillReport(definition.name, tuple(slots), len(created),
                          tuple(slot for _, slot in created), dry_run)
