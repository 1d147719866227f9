"""The load a fleet puts on a window: every active job's fires over [start, end), counted
in buckets aligned on the UTC epoch, and who makes them.

Every fire comes from the schedule engine (``cronjobs.cron``), exactly as the tick will
decide it: the job's zone and its DST rules, ``H`` from its name, the day extensions. A
paused job fires only after its pause's end (``paused_until``: the slots up to it are
recorded as paused, as the tick does); one paused without an end does not fire. One-off
runs waiting for their time (``trigger --at``) fire at it.

Fleets share few distinct schedules: the jobs are grouped by what they fire on (the
schedule as compiled, ``H`` expanded, its DST class and its zone), each group is expanded
once, and its fires are counted once per job.
"""

from __future__ import annotations

import bisect
import datetime as dt
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

from cronjobs import cron as schedules
from cronjobs.durations import format_duration, parse_bounded
from cronjobs.errors import ScheduleError, UsageError
from cronjobs.reports import ForecastGroup, OneOffRun

DEFAULT_WINDOW = dt.timedelta(hours=24)
DEFAULT_BUCKET = dt.timedelta(minutes=1)
MIN_BUCKET = dt.timedelta(minutes=1)
MAX_WINDOW = dt.timedelta(days=31)
PEAK_JOBS = 100  # the jobs named per peak (the others are counted)
_TICK = dt.timedelta(microseconds=1)
EPOCH = dt.datetime(1970, 1, 1, tzinfo=dt.UTC)


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
        return self.start - (self.start - EPOCH) % self.bucket

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
        # by (schedule, zone, the values of its H fields)
        self._by_text: dict[tuple[str, str, tuple[frozenset[int] | None, ...]], _Group] = {}
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
        hashed = _hashed(schedule)
        if hashed and len(names) > 1:  # H: each job's schedule is its own
            for name, job_id in zip(names, ids, strict=True):
                self.add([name], schedule, timezone, ids=[job_id], kind=kind, after=after)
            return
        window = self.window
        if after is not None and after >= window.end:
            self.paused += len(names)
            return
        if not names:
            return
        # Jobs sharing an expression share a group, parsed once; with H, jobs whose names
        # give its H fields the same values (hash_fields: a CRC per field, no parse).
        hashes = schedules.hash_fields(schedule, names[0]) if hashed else ()
        text = None if hashes is None else (schedule, timezone, hashes)
        group = None if text is None else self._by_text.get(text)
        if group is None:
            try:
                sched = schedules.parse(schedule, timezone, hash_key=names[0])
            except ScheduleError as exc:
                self.unreadable += [Unreadable(name, exc.message) for name in names]
                return
            group = self._group(sched)
            if text is not None:
                self._by_text[text] = group
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


