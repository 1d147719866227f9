"""The forecast: every active job's fires over a window, counted per bucket, the peaks and
the jobs that make them, beside the capacity this deployment has shown; and the warning
given while a schedule is written into a crowded minute.

Every fire comes from the schedule engine (``cronjobs.cron``), exactly as the tick will
decide it: the job's zone and its DST rules, ``H`` from its name, the day extensions. A
paused job fires only after its pause's end (``paused_until``: the slots up to it are
recorded as paused, as the tick does); one paused without an end does not fire. One-off
runs waiting for their time (``trigger --at``) fire at it.

Fleets share few distinct schedules: the jobs are grouped by what they fire on (the
schedule as compiled, ``H`` expanded, its DST class and its zone), each group is expanded
once, and its fires are counted once per job.

The capacity comes from the history (``run_capacity``, ``typical_run_times``): how fast
runs started when many shared a slot, per run mode (the job's kind), and each job's median
run time. A peak's lateness is predicted by draining every fire of the window, in order,
at those rates: the start of a bucket's last run minus its slot.
"""

from __future__ import annotations

import bisect
import datetime as dt
import heapq
import math
import re
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

from cronjobs import cron as schedules
from cronjobs.cron.expressions import MACROS
from cronjobs.db.store import Store
from cronjobs.durations import format_duration, parse_bounded, shown
from cronjobs.errors import ScheduleError, UsageError
from cronjobs.models import DefinitionSpec
from cronjobs.reports import ForecastGroup, OneOffRun, TypicalRunTime

DEFAULT_WINDOW = dt.timedelta(hours=24)
DEFAULT_BUCKET = dt.timedelta(minutes=1)
MIN_BUCKET = dt.timedelta(minutes=1)
MAX_WINDOW = dt.timedelta(days=31)
DEFAULT_TOP = 10
MAX_TOP = 1000
PEAK_JOBS = 100  # the jobs named per peak (the others are counted)
HISTORY = dt.timedelta(days=7)  # how far back the capacity is read
# The crowded-minute threshold: without history, this many fires of other jobs; with it,
# the runs the slowest run mode shown starts in CROWDED_SECONDS.
DEFAULT_CROWDED = 10
CROWDED_SECONDS = 10
CHECK_WINDOW = dt.timedelta(days=7)  # the window a new schedule is checked over
_TICK = dt.timedelta(microseconds=1)
_EPOCH = dt.datetime(1970, 1, 1, tzinfo=dt.UTC)


# -- the window -------------------------------------------------------------------------------

@dataclass(frozen=True)
class Window:
    """The instants [start, end), in buckets of ``bucket`` aligned on the UTC epoch (the
    first bucket starts at ``origin``, at or before ``start``)."""

    start: dt.datetime
    end: dt.datetime
    bucket: dt.timedelta

    @property
    def origin(self) -> dt.datetime:
        return self.start - (self.start - _EPOCH) % self.bucket

    @property
    def buckets(self) -> int:
        return -(-(self.end - self.origin) // self.bucket)

    def index(self, instant: dt.datetime) -> int:
        return (instant - self.origin) // self.bucket

    def bucket_start(self, index: int) -> dt.datetime:
        return self.origin + index * self.bucket


def make_window(start: dt.datetime, end: dt.datetime | None = None,
                bucket: dt.timedelta = DEFAULT_BUCKET) -> Window:
    """The window [start, end) (default: a day), or a UsageError naming the bad option."""
    end = start + DEFAULT_WINDOW if end is None else end
    if end <= start:
        raise UsageError("invalid --to: it must be after --from")
    if end - start > MAX_WINDOW:
        raise UsageError(f"invalid --to: a forecast covers at most "
                         f"{format_duration(MAX_WINDOW)} (--from to --to)")
    if bucket < MIN_BUCKET or bucket % MIN_BUCKET:
        raise UsageError("invalid --bucket: use whole minutes, at least 1m")
    if bucket > end - start:
        raise UsageError("invalid --bucket: longer than the window")
    return Window(start.astimezone(dt.UTC), end.astimezone(dt.UTC), bucket)


def parse_bucket(text: str) -> dt.timedelta:
    return parse_bounded(text, option="--bucket", minimum=MIN_BUCKET, maximum=MAX_WINDOW)


# -- expanding the fleet ----------------------------------------------------------------------

@dataclass(frozen=True)
class Member:
    """A job in a group: its name, id (0 when not stored yet), kind, and the instant its
    fires start after (a pause's end), if any."""

    name: str
    id: int
    kind: str
    after: dt.datetime | None = None


@dataclass
class _Group:
    """One distinct schedule in one zone: its fires in the window, once, and its jobs: those
    firing all window (by name, id and kind, in three parallel lists) and those whose pause
    ends inside it."""

    expression: str  # as the first of its jobs wrote it
    timezone: str
    fires: list[dt.datetime]
    buckets: list[int]
    per_bucket: Counter[int]
    names: list[str] = field(default_factory=list)
    ids: list[int] = field(default_factory=list)
    kinds: list[str] = field(default_factory=list)
    whole: Counter[str] = field(default_factory=Counter)  # the jobs firing all window, by kind
    partial: list[Member] = field(default_factory=list)

    def fires_after(self, after: dt.datetime | None) -> int:
        """The index of the first fire after ``after``."""
        return 0 if after is None else bisect.bisect_right(self.fires, after)

    def fires_in(self, index: int, after: dt.datetime) -> int:
        """Its fires in bucket ``index`` after ``after``."""
        first = self.fires_after(after)
        return sum(1 for b in self.buckets[first:] if b == index)

    def member(self, position: int) -> Member:
        return Member(self.names[position], self.ids[position], self.kinds[position])


@dataclass(frozen=True)
class Unreadable:
    """A job whose stored schedule cannot be evaluated (left out, with why)."""

    name: str
    problem: str


def _hashed(schedule: str) -> bool:
    """Whether the schedule has an H field, which makes it each job's own (its name)."""
    return "h" in schedule.lower() and not schedule.lstrip().startswith("@")


class Load:
    """The fires of a fleet over a window: per bucket, and who makes them."""

    def __init__(self, window: Window) -> None:
        self.window = window
        self.groups: dict[tuple[str, bool, str], _Group] = {}
        self._by_text: dict[tuple[str, str, str], _Group] = {}
        self.one_offs: list[tuple[int, OneOffRun]] = []
        self.unreadable: list[Unreadable] = []
        self.jobs = 0  # jobs that fire in the window, or may
        self.paused = 0  # jobs paused through the window

    # building

    def add(self, names: Sequence[str], schedule: str, timezone: str, *,
            ids: Sequence[int] = (), kind: str = "command",
            after: dt.datetime | None = None) -> None:
        """Count jobs in that share a schedule, a zone, a kind and a pause's end (``after``:
        they fire only after it). ``ids``: theirs (none: not stored yet)."""
        ids = list(ids) or [0] * len(names)
        if _hashed(schedule) and len(names) > 1:  # H: each job's schedule is its own
            for name, job_id in zip(names, ids, strict=True):
                self.add([name], schedule, timezone, ids=[job_id], kind=kind, after=after)
            return
        window = self.window
        if after is not None and after >= window.end:
            self.paused += len(names)
            return
        if not names:
            return
        # (jobs sharing an expression without H share a group: parsed once)
        text = (schedule, timezone, names[0] if _hashed(schedule) else "")
        group = self._by_text.get(text)
        if group is None:
            try:
                sched = schedules.parse(schedule, timezone, hash_key=names[0])
            except ScheduleError as exc:
                self.unreadable += [Unreadable(name, exc.message) for name in names]
                return
            group = self._by_text[text] = self._group(sched)
        self.jobs += len(names)
        if after is not None and after >= window.start:
            group.partial += [Member(name, job_id, kind, after)
                              for name, job_id in zip(names, ids, strict=True)]
        else:
            group.names += names
            group.ids += ids
            group.kinds += [kind] * len(names)
            group.whole[kind] += len(names)

    def add_one_off(self, run: OneOffRun) -> None:
        if self.window.start <= run.at < self.window.end:
            self.one_offs.append((self.window.index(run.at), run))

    def totals(self) -> list[int]:
        """The fires per bucket: each group's fires times its jobs firing all window, then
        those firing after a pause's end, then the one-off runs."""
        counts = [0] * self.window.buckets
        for group in self.groups.values():
            whole = len(group.names)
            if whole:
                for index, fires in group.per_bucket.items():
                    counts[index] += fires * whole
            for member in group.partial:
                for index in group.buckets[group.fires_after(member.after):]:
                    counts[index] += 1
        for index, _ in self.one_offs:
            counts[index] += 1
        return counts

    def _group(self, sched: schedules.Schedule) -> _Group:
        key = (sched.canonical, sched.is_wildcard, sched.timezone)
        group = self.groups.get(key)
        if group is None:
            fires = list(fires_of(sched, self.window))
            buckets = [self.window.index(instant) for instant in fires]
            group = _Group(sched.expression, sched.timezone, fires, buckets, Counter(buckets))
            self.groups[key] = group
        return group

    # reading

    def jobs_in(self, index: int, limit: int = PEAK_JOBS) -> tuple[list[tuple[Member, int]], int]:
        """Up to ``limit`` jobs firing in bucket ``index``, each with its fires there (its
        one-off runs included), and how many jobs fire there in all."""
        extra = Counter(run.name for at, run in self.one_offs if at == index)
        named: dict[str, tuple[Member, int]] = {}
        total = 0
        for group in self.groups.values():
            fires = group.per_bucket.get(index, 0)
            if not fires:
                continue
            total += len(group.names)
            for position in range(min(len(group.names), max(0, limit - len(named)))):
                named[group.names[position]] = (group.member(position), fires)
            for name in [n for n in extra if n in named or n in group.names]:
                member = named[name][0] if name in named else group.member(
                    group.names.index(name))
                named[name] = (member, fires + extra.pop(name))
            for member in group.partial:
                own = group.fires_in(index, member.after or self.window.start)
                if own:
                    total += 1
                    if len(named) < limit or member.name in extra:
                        named[member.name] = (member, own + extra.pop(member.name, 0))
        for at, run in self.one_offs:
            if at == index and run.name in extra:
                total += 1
                if len(named) < limit:
                    named[run.name] = (Member(run.name, run.definition_id, run.kind),
                                       extra[run.name])
                del extra[run.name]
        listed = sorted(named.values(), key=lambda pair: (-pair[1], pair[0].name))
        return listed[:limit], total

    def instants(self) -> list[tuple[dt.datetime, Counter[str]]]:
        """Every fire instant of the window with its fires by kind, in order."""
        by_instant: dict[dt.datetime, Counter[str]] = {}
        for group in self.groups.values():
            for member in group.partial:
                for at in group.fires[group.fires_after(member.after):]:
                    by_instant.setdefault(at, Counter())[member.kind] += 1
            if group.whole:
                for at in group.fires:
                    by_instant.setdefault(at, Counter()).update(group.whole)
        for _, run in self.one_offs:
            by_instant.setdefault(run.at, Counter())[run.kind] += 1
        return sorted(by_instant.items())

    def own_buckets(self, name: str) -> Counter[int]:
        """The buckets ``name`` fires in, with its fires there."""
        own: Counter[int] = Counter()
        for group in self.groups.values():
            if name in group.names:
                own.update(group.buckets)
            for member in group.partial:
                if member.name == name:
                    own.update(group.buckets[group.fires_after(member.after):])
        for index, run in self.one_offs:
            if run.name == name:
                own[index] += 1
        return own


def fires_of(sched: schedules.Schedule, window: Window) -> Iterable[dt.datetime]:
    """The schedule's slots in [start, end)."""
    return sched.between(window.start - _TICK, window.end - _TICK)


def expand(jobs: Iterable[ForecastGroup], one_offs: Iterable[OneOffRun], window: Window, *,
           leave_out: Iterable[str] = ()) -> Load:
    """The load the stored jobs (in groups sharing a schedule, a zone, a kind and a pause)
    and the one-off runs put on ``window`` (jobs named in ``leave_out`` left out)."""
    load = Load(window)
    skip = set(leave_out)
    for row in jobs:
        names, ids = row.names, row.ids
        if skip and not skip.isdisjoint(names):
            kept = [(n, i) for n, i in zip(names, ids, strict=True) if n not in skip]
            names, ids = [n for n, _ in kept], [i for _, i in kept]
        if row.paused_at is not None and row.paused_until is None:
            load.paused += len(names)
            continue
        load.add(names, row.schedule, row.timezone, ids=ids, kind=row.kind,
                 after=row.paused_until if row.paused_at is not None else None)
    for run in one_offs:
        if run.name not in skip:
            load.add_one_off(run)
    return load


# -- capacity ---------------------------------------------------------------------------------

@dataclass(frozen=True)
class Capacity:
    """What this deployment has shown: runs started per second when many were due at once,
    per run mode (job kind), over ``since`` to now; empty when the history has no such
    burst."""

    since: dt.datetime
    per_second: dict[str, float]
    bursts: dict[str, int]
    largest: dict[str, int]

    @property
    def known(self) -> bool:
        return bool(self.per_second)

    def threshold(self) -> int:
        """The default crowded-minute threshold: what the slowest run mode shown starts
        in CROWDED_SECONDS (at least 1), else DEFAULT_CROWDED."""
        if not self.per_second:
            return DEFAULT_CROWDED
        return max(1, math.floor(min(self.per_second.values()) * CROWDED_SECONDS))


def capacity(store: Store, now: dt.datetime) -> Capacity:
    since = now - HISTORY
    rates: dict[str, float] = {}
    bursts: dict[str, int] = {}
    largest: dict[str, int] = {}
    for row in store.forecast.burst_rates(since=since):
        bursts[row.kind] = row.bursts
        largest[row.kind] = row.largest
        if row.seconds:  # all at once (0 s) tells no rate
            rates[row.kind] = (row.runs - row.bursts) / row.seconds
    return Capacity(since, rates, bursts, largest)


def predicted_lateness(load: Load, per_second: dict[str, float]
                       ) -> dict[int, dt.timedelta | None]:
    """Per bucket with fires, how late its last run starts when every fire of the window
    is started in order at the rates shown (a backlog carries over to the next fires); None
    for every bucket once a kind without a known rate is due."""
    late: dict[int, dt.timedelta | None] = {}
    free = 0.0  # when the starter is free again, in seconds after the window's origin
    unknown = False
    origin = load.window.origin
    for at, kinds in load.instants():
        index = load.window.index(at)
        if unknown or any(kind not in per_second for kind in kinds):
            unknown = True
            late[index] = None
            continue
        slot = (at - origin).total_seconds()
        begin = max(free, slot)
        cost = sum(n / per_second[kind] for kind, n in kinds.items())
        free = begin + cost
        last = max(min(per_second[kind] for kind in kinds), 1e-9)
        late[index] = dt.timedelta(seconds=max(0.0, free - 1 / last - slot))
    return late


# -- the forecast -----------------------------------------------------------------------------

@dataclass(frozen=True)
class PeakJob:
    name: str
    kind: str
    fires: int  # its fires in the bucket
    typical: dt.timedelta | None  # its median run time, from its history


@dataclass(frozen=True)
class Peak:
    start: dt.datetime  # the bucket's
    fires: int
    jobs: tuple[PeakJob, ...]  # up to PEAK_JOBS, most fires first, then by name
    job_count: int  # every job firing in it
    late: dt.timedelta | None  # predicted lateness of its last run (None: no history)


@dataclass(frozen=True)
class Forecast:
    window: Window
    now: dt.datetime
    counts: tuple[int, ...]  # fires per bucket
    peaks: tuple[Peak, ...]
    jobs: int  # jobs that fire (or may) in the window
    paused: int  # jobs paused through it
    distinct: int  # distinct schedules (in their zones) expanded
    one_offs: int
    unreadable: tuple[Unreadable, ...]
    capacity: Capacity
    threshold: int  # the crowded-minute threshold (per minute)

    @property
    def total(self) -> int:
        return sum(self.counts)


def forecast(store: Store, *, start: dt.datetime | None = None, end: dt.datetime | None = None,
             length: dt.timedelta | None = None, bucket: dt.timedelta = DEFAULT_BUCKET,
             top: int = DEFAULT_TOP) -> Forecast:
    """The fires of every active job over [start, end) (default: from the database's now;
    ``length`` after the start, else a day), per bucket, with the ``top`` peaks and the
    capacity shown."""
    if not 1 <= top <= MAX_TOP:
        raise UsageError(f"invalid --top {top}: must be between 1 and {MAX_TOP}")
    now = store.now()
    begin = start if start is not None else now
    if end is None and length is not None:
        end = begin + length
    window = make_window(begin, end, bucket)
    load = expand(store.forecast.forecast_jobs(),
                  store.forecast.one_off_runs(start=window.start, end=window.end), window)
    shown_capacity = capacity(store, now)
    return summarise(load, now, top, shown_capacity, store)


def summarise(load: Load, now: dt.datetime, top: int, shown_capacity: Capacity,
              store: Store | None = None) -> Forecast:
    """The forecast of a load: its peaks (with the jobs' run times, read from ``store``)."""
    counts = load.totals()
    best = heapq.nlargest(top, (i for i in range(len(counts)) if counts[i]),
                          key=lambda i: (counts[i], -i))
    late = predicted_lateness(load, shown_capacity.per_second) if shown_capacity.known else {}
    listed = {index: load.jobs_in(index) for index in best}
    typical: dict[int, TypicalRunTime] = {}
    ids = {member.id for named, _ in listed.values() for member, _ in named if member.id}
    if store is not None and ids:
        typical = {row.definition_id: row for row in store.forecast.typical_run_times(ids)}
    peaks = []
    for index in best:
        named, total = listed[index]
        jobs = tuple(PeakJob(m.name, m.kind, fires,
                             dt.timedelta(seconds=typical[m.id].seconds) if m.id in typical
                             else None) for m, fires in named)
        peaks.append(Peak(load.window.bucket_start(index), counts[index], jobs, total,
                          late.get(index)))
    return Forecast(load.window, now, tuple(counts), tuple(peaks), load.jobs, load.paused,
                    len(load.groups), len(load.one_offs), tuple(load.unreadable),
                    shown_capacity, shown_capacity.threshold())


# -- a job's place in the forecast ------------------------------------------------------------

@dataclass(frozen=True)
class Place:
    """Where one job's fires land: its busiest bucket (the first of them), the fires of the
    whole fleet there, and that bucket's rank among the window's (1: the busiest)."""

    job: str
    fires: int  # its fires in the window
    busiest: dt.datetime | None
    fleet: int  # the fleet's fires in its busiest bucket (its own included)
    rank: int | None


def place_of(result: Forecast, load: Load, name: str) -> Place:
    """``name``'s place in the load."""
    own = load.own_buckets(name)
    if not own:
        return Place(name, 0, None, 0, None)
    counts = result.counts
    index = max(own, key=lambda i: (counts[i], -i))
    rank = 1 + sum(1 for count in counts if count > counts[index])
    return Place(name, sum(own.values()), load.window.bucket_start(index), counts[index], rank)


# -- crowded minutes --------------------------------------------------------------------------

OFF = -1  # the threshold that checks nothing


def parse_threshold(text: str) -> int | None:
    """``--crowded-threshold``: a number of fires (0 or more), ``auto`` (None: from the
    capacity shown, else DEFAULT_CROWDED) or ``off`` (OFF)."""
    value = text.strip().lower()
    if value == "auto":
        return None
    if value == "off":
        return OFF
    if value.isascii() and value.isdigit() and len(value) <= 9:
        return int(value)
    raise UsageError(f"invalid --crowded-threshold {shown(text)}: use a number of runs (0 or "
                     "more), auto or off")


@dataclass(frozen=True)
class Crowding:
    """A schedule that lands in a minute already holding more than ``threshold`` fires of
    other jobs, and what ``H`` would give instead. A warning, never an error."""

    job: str
    schedule: str
    timezone: str
    at: dt.datetime  # the most crowded minute it lands in (the first of them)
    others: int  # fires of other jobs in that minute
    threshold: int
    suggestion: str | None  # the schedule with H in the minute field, if that fits
    suggestion_at: dt.datetime | None  # its first fire in the window
    suggestion_others: int | None  # fires of other jobs in its most crowded minute

    @property
    def message(self) -> str:
        zone = schedules.check_timezone(self.timezone)
        local = self.at.astimezone(zone)
        text = (f"{self.schedule} shares {local:%H:%M} ({self.timezone}, first on "
                f"{local:%Y-%m-%d}) with {self.others} other job run(s), more than the "
                f"crowded-minute threshold of {self.threshold}")
        if self.suggestion is not None and self.suggestion_at is not None:
            alt = self.suggestion_at.astimezone(zone)
            text += (f"; `{self.suggestion}` would run at {alt:%H:%M}, which holds "
                     f"{self.suggestion_others}")
        return text


def hashed_alternative(expression: str) -> str | None:
    """The expression with ``H`` in its minute field, when that field is one plain value
    (``0 3 * * *``: ``H 3 * * *``) or a step from the hour's start (``*/15``: ``H/15``);
    None otherwise."""
    text = " ".join(expression.split())
    if text.startswith("@"):
        text = MACROS.get(text.lower(), "")
    fields = text.split(" ")
    if len(fields) != 5:
        return None
    minute = fields[0]
    if minute.isascii() and minute.isdigit():
        fields[0] = "H"
    elif (step := re.fullmatch(r"(?:\*|0|0-59)/(\d+)", minute, re.ASCII)) is not None:
        fields[0] = f"H/{step.group(1)}"
    else:
        return None
    return " ".join(fields)


def crowding(load: Load, counts: Sequence[int], name: str, expression: str, timezone: str,
             threshold: int, *, counted: bool = False, after: dt.datetime | None = None
             ) -> Crowding | None:
    """Whether the job's fires land in a minute of ``load`` (1-minute buckets; ``counts``:
    its totals) holding more than ``threshold`` fires of other jobs. ``counted``: the job
    is in the load already (its own fires are taken off). ``after``: its pause's end."""
    if threshold < 0:
        return None
    sched = schedules.parse(expression, timezone, hash_key=name)
    window = load.window
    own = [window.index(at) for at in fires_of(sched, window) if after is None or at > after]
    if not own:
        return None
    own_count = Counter(own) if counted else Counter[int]()

    def others(index: int) -> int:
        return counts[index] - own_count[index]

    worst = max(own, key=lambda i: (others(i), -i))
    if others(worst) <= threshold:
        return None
    suggestion = hashed_alternative(expression)
    suggestion_at = suggestion_others = None
    if suggestion is not None:
        try:
            alt = schedules.parse(suggestion, timezone, hash_key=name)
        except ScheduleError:
            suggestion = None
        else:
            alt_fires = [at for at in fires_of(alt, window) if after is None or at > after]
            if alt_fires:
                suggestion_at = alt_fires[0]
                suggestion_others = max(others(window.index(at)) for at in alt_fires)
            else:
                suggestion = None
    return Crowding(name, expression, timezone, window.bucket_start(worst), others(worst),
                    threshold, suggestion, suggestion_at, suggestion_others)


def check_load(store: Store, *, leave_out: Iterable[str] = ()) -> tuple[Load, Capacity]:
    """The load of the stored jobs (less ``leave_out``) over the next CHECK_WINDOW in
    minutes, and the capacity shown: what a new schedule is checked against."""
    now = store.now()
    window = make_window(now, now + CHECK_WINDOW, MIN_BUCKET)
    load = expand(store.forecast.forecast_jobs(),
                  store.forecast.one_off_runs(start=window.start, end=window.end), window,
                  leave_out=leave_out)
    return load, capacity(store, now)


def check_define(store: Store, spec: DefinitionSpec, threshold: int | None,
                 after: dt.datetime | None = None) -> Crowding | None:
    """The warning for ``define``: ``spec`` against every other stored job. ``threshold``
    None: the default (from the capacity shown); OFF: no check."""
    if threshold == OFF:
        return None
    load, shown_capacity = check_load(store, leave_out=(spec.name,))
    limit = shown_capacity.threshold() if threshold is None else threshold
    return crowding(load, load.totals(), spec.name, spec.schedule, spec.timezone, limit,
                    after=after)


def check_apply(store: Store, specs: Sequence[DefinitionSpec], threshold: int | None, *,
                paused: dict[str, tuple[dt.datetime | None, dt.datetime | None]],
                removed: Iterable[str] = ()) -> dict[str, Crowding]:
    """The warnings for ``apply``: each declared job against the fleet as it will be (the
    stored jobs less the declared and the removed ones, plus the declared ones). ``paused``:
    the declared jobs' current pause (paused_at, paused_until), which apply keeps."""
    if threshold == OFF or not specs:
        return {}
    declared = [spec.name for spec in specs]
    load, shown_capacity = check_load(store, leave_out=[*declared, *removed])
    limit = shown_capacity.threshold() if threshold is None else threshold
    ends: dict[str, dt.datetime | None] = {}
    for spec in specs:
        paused_at, paused_until = paused.get(spec.name, (None, None))
        if paused_at is not None and paused_until is None:
            continue  # paused for good: fires nothing
        ends[spec.name] = paused_until
        load.add([spec.name], spec.schedule, spec.timezone, kind=spec.kind.value,
                 after=paused_until)
    found = {}
    counts = load.totals()
    for spec in specs:
        if spec.name in ends:
            warning = crowding(load, counts, spec.name, spec.schedule, spec.timezone, limit,
                               counted=True, after=ends[spec.name])
            if warning is not None:
                found[spec.name] = warning
    return found


# -- the dashboard's view ---------------------------------------------------------------------

VIEWS = ("day", "week")
_WEEKDAYS = ("Mon", "Tue", "Wed", "Thu", "Fri", "Sat", "Sun")


@dataclass(frozen=True)
class Heatmap:
    """Fires laid out for the eye: hour of day by minute (``day``: the next 24 hours in
    1-minute buckets) or day of week by hour (``week``: the next 7 days in 1-hour buckets),
    on UTC's clock. ``cells[row][column]``; ``top`` the largest."""

    view: str
    rows: tuple[str, ...]
    columns: tuple[str, ...]
    cells: tuple[tuple[int, ...], ...]
    top: int


@dataclass(frozen=True)
class Outlook:
    """What the dashboard shows of the forecast: the forecast of the view's window, its
    load (to place a job in it) and its heatmap."""

    forecast: Forecast
    load: Load
    heatmap: Heatmap


def outlook(store: Store, view: str = "day", *, top: int = DEFAULT_TOP) -> Outlook:
    """The next day (``day``, from the current minute) or week (``week``, from the current
    hour) of the fleet's fires, for the dashboard."""
    if view not in VIEWS:
        raise UsageError(f"invalid view {view!r}: use day or week")
    now = store.now()
    bucket = MIN_BUCKET if view == "day" else dt.timedelta(hours=1)
    start = now - (now - _EPOCH) % bucket
    window = make_window(start, start + (DEFAULT_WINDOW if view == "day"
                                         else dt.timedelta(days=7)), bucket)
    load = expand(store.forecast.forecast_jobs(),
                  store.forecast.one_off_runs(start=window.start, end=window.end), window)
    result = summarise(load, now, top, capacity(store, now), store)
    return Outlook(result, load, _heatmap(result, view))


def _heatmap(result: Forecast, view: str) -> Heatmap:
    day = view == "day"
    rows = tuple(f"{h:02d}" for h in range(24)) if day else _WEEKDAYS
    columns = tuple(f"{m:02d}" for m in range(60)) if day else tuple(
        f"{h:02d}" for h in range(24))
    cells = [[0] * len(columns) for _ in rows]
    for index, count in enumerate(result.counts):
        at = result.window.bucket_start(index)
        row, column = (at.hour, at.minute) if day else (at.weekday(), at.hour)
        cells[row][column] += count
    return Heatmap(view, rows, columns, tuple(map(tuple, cells)),
                   max(result.counts, default=0))


def job_outlook(view: Outlook, name: str, expression: str, timezone: str,
                after: dt.datetime | None = None) -> tuple[Place, Crowding | None]:
    """A job's place in the dashboard's forecast, and whether its schedule is crowded (by
    the threshold of the capacity shown; ``after``: its pause's end) in 1-minute views."""
    place = place_of(view.forecast, view.load, name)
    warning = None
    if view.load.window.bucket == MIN_BUCKET and place.fires:
        try:
            warning = crowding(view.load, view.forecast.counts, name, expression, timezone,
                               view.forecast.threshold, counted=True, after=after)
        except ScheduleError:
            warning = None
    return place, warning
