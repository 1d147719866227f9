"""``cronjobs explain``: for every slot of a range, what became of it: the state of its run
(queued, running, failed, succeeded, dead, cancelled), or why it has none.

Sized for people (docs/reference/output.md, "explain"): consecutive slots with the same story fold
into one entry with a count: the slots before the job was defined, a stretch of skips for
one reason, of pending slots, of runs that succeeded. Runs that need attention (queued,
running, failed, dead, cancelled) keep an entry each. The limit is on the entries shown
(:data:`MAX_ENTRIES`), not on the slots, so a per-minute job can be explained over days;
the slots looked at are bounded too (:data:`MAX_SLOTS`), for time and memory.
"""

from __future__ import annotations

import datetime as dt
import itertools
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, replace

from cronjobs import cron as schedules
from cronjobs.core import facts
from cronjobs.core.facts import RunInfo
from cronjobs.core.groups import usage_of
from cronjobs.core.health import waiting_for_handlers
from cronjobs.core.thresholds import Thresholds
from cronjobs.db.store import Store
from cronjobs.errors import JobNotFound, ScheduleError, UsageError
from cronjobs.models import Definition, Run, RunStatus, WaitingRuns
from cronjobs.reports import GroupUsage, JobRun, Skip
from cronjobs.timefmt import in_zone
from cronjobs.validation import check_name

TICK = dt.timedelta(microseconds=1)
MAX_SLOTS = 100_000  # slots looked at: 69 days of a per-minute job
MAX_ENTRIES = 2000  # entries shown, after folding
# outcomes whose consecutive entries fold into one (a run's only when it succeeded)
FOLDED_RUN_STATUSES = frozenset({RunStatus.SUCCEEDED})
# the runs of a slot (the others, manual runs, stand at the instant they were asked for)
SLOT_TRIGGERS = frozenset({"schedule", "backfill"})

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
    # a folded stretch of runs (``run`` is None then): the first and last run's ids
    first_run_id: int | None = None
    last_run_id: int | None = None

    @property
    def folded(self) -> bool:
        """Whether this entry stands for more than one slot or run."""
        return self.first_slot != self.last_slot or (self.slot_count or 0) > 1


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
        raise JobNotFound(f"no job named {name!r}", advice=" (see `cronjobs list`)",
                          python=f"no job named {name!r} (see Client.jobs())")
    definition = history[0]
    now = store.now()
    end = end if end is not None else now
    start = start if start is not None else end - dt.timedelta(days=1)
    if start > end:
        raise UsageError("invalid range: --from is after --to")
    runs: list[JobRun] = []
    skips: list[Skip] = []
    for d in history:
        runs += (JobRun.of(r, d) for r in store.materialise.runs_between(d.id, start, end))
        skips += store.materialise.skips_between(d.id, start, end)
    matched_runs: set[int] = set()
    matched_skips: set[int] = set()
    run_of, skip_of = _run_finder(runs), _skip_finder(skips)
    infos = {info.id: info for info in facts.load_runs(store, runs)}

    def ran(slot: dt.datetime, run: Run) -> Explained:
        info = infos[run.id]
        return Explained(slot, slot, 1, run.status, None, facts.run_words(info, now), run,
                         info)

    def each_slot() -> Iterator[Explained]:
        for slot in _slots(definition, start, end):
            run = run_of(slot)
            if run is not None:
                matched_runs.add(run.id)
                yield ran(slot, run)
                continue
            skip = skip_of(slot)
            if skip is not None:
                matched_skips.add(skip.id)
                yield Explained(slot, slot, 1, "skipped", skip.reason, skip.detail)
            else:
                yield Explained(slot, slot, 1, *_no_record(definition, slot))

    rows = fold(each_slot())
    rows += [ran(run.scheduled_for, run) for run in runs if run.id not in matched_runs]
    rows += [Explained(skip.first_slot, skip.last_slot, skip.slot_count, "skipped",
                       skip.reason, skip.detail) for skip in skips
             if skip.id not in matched_skips]
    rows.sort(key=lambda r: (r.first_slot, r.last_slot))
    shown = fold(rows)
    if len(shown) > MAX_ENTRIES:
        raise UsageError(f"the range of {definition.name} has more than {MAX_ENTRIES:,} "
                         "entries to show, even folded: narrow it with --from and --to")
    return Explanation(name, definition, start, end, tuple(shown),
                       *_waiting(store, definition, now))


def _no_record(definition: Definition, slot: dt.datetime
               ) -> tuple[str, str | None, str | None]:
    """(outcome, reason, detail) of a slot that has neither a run nor a skip record."""
    if definition.removed_at is not None and slot > definition.cursor_at:
        return "not-a-slot", None, f"the job was removed at {_utc(definition.removed_at)}"
    if slot > definition.cursor_at:
        return "pending", None, "not decided yet: the next tick decides it"
    if slot <= definition.created_at:
        return "not-a-slot", None, "before the job was defined"
    if slot <= definition.schedule_since:
        return ("not-a-slot", None, "before the current schedule took effect "
                f"({_utc(definition.schedule_since)})")
    return "unknown", None, "no record of this slot"


def _utc(value: dt.datetime) -> str:
    return in_zone(value, dt.UTC)


def fold(entries: Iterable[Explained]) -> list[Explained]:
    """Consecutive entries with the same story as one: same outcome, reason and detail
    (a slot without a run), or runs that all succeeded. Each fold counts its slots (None
    when a skip record it holds did not count its own)."""
    out: list[Explained] = []
    for entry in entries:
        last = out[-1] if out else None
        if last is not None and _key(last) is not None and _key(last) == _key(entry):
            out[-1] = _merge(last, entry)
        else:
            out.append(entry)
    return out


def _key(entry: Explained) -> tuple[str, str | None, str | None] | None:
    """What must be equal for two neighbours to fold; None: this one never folds."""
    if entry.run is None and entry.first_run_id is None:
        # skips fold by reason; their details (how many runs were still running) vary
        return entry.outcome, entry.reason, None if entry.reason else entry.detail
    if entry.outcome in FOLDED_RUN_STATUSES and (entry.run is None
                                                 or entry.run.trigger in SLOT_TRIGGERS):
        return entry.outcome, None, None
    return None  # a run that needs a look, or a manual run: not a slot, a line of its own


def _merge(a: Explained, b: Explained) -> Explained:
    count = None if a.slot_count is None or b.slot_count is None \
        else a.slot_count + b.slot_count
    merged = replace(a, last_slot=max(a.last_slot, b.last_slot), slot_count=count,
                     detail=a.detail if a.detail == b.detail else None)
    if a.run is None and a.first_run_id is None:
        return merged
    first = a.first_run_id if a.run is None else a.run.id
    last = b.last_run_id if b.run is None else b.run.id
    return replace(merged, run=None, info=None, first_run_id=first, last_run_id=last,
                   detail=f"{count or 'several'} runs succeeded")


def _waiting(store: Store, definition: Definition, now: dt.datetime
             ) -> tuple[WaitingRuns | None, tuple[RunInfo, ...], GroupUsage | None]:
    """What the job's runs wait for: a handler no recent tick loaded, their time (one-off
    runs for later), a free slot of their group."""
    waiting = None
    if definition.kind == "handler" and definition.removed_at is None:
        found = waiting_for_handlers(store, now, Thresholds().max_tick_age, definition.id)
        waiting = found[0] if found else None
    one_offs = tuple(facts.load_runs(
        store, (JobRun.of(r, definition)
                for r in store.materialise.one_off_runs_of(definition.id))))
    group = None
    if definition.group_name is not None:
        group = usage_of(store, definition.group_name, now)
    return waiting, one_offs, group


def _slots(definition: Definition, start: dt.datetime, end: dt.datetime
           ) -> Iterator[dt.datetime]:
    """The schedule's slots in [start, end], one at a time, at most :data:`MAX_SLOTS`."""
    if definition.invalid_reason is not None:
        return
    try:
        sched = schedules.parse(definition.schedule, definition.timezone,
                                hash_key=definition.name)
        found = sched.between(start - TICK, end)
        yield from itertools.islice(found, MAX_SLOTS)
        extra = next(iter(found), None)
    except ScheduleError:
        return
    if extra is not None:
        raise UsageError(f"the range holds more than {MAX_SLOTS:,} slots of "
                         f"{definition.name}: narrow it with --from and --to")


# Lookups by slot, so that a day of a minutely job is 1,440 steps, not 1,440 squared.

def _run_finder(runs: Sequence[Run]) -> Callable[[dt.datetime], Run | None]:
    """The slot's first run of the slot key (schedule or backfill), else its first run."""
    keyed: dict[dt.datetime, Run] = {}
    any_run: dict[dt.datetime, Run] = {}
    for run in runs:
        any_run.setdefault(run.scheduled_for, run)
        if run.trigger in SLOT_TRIGGERS:
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
