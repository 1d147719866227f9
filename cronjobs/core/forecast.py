"""The forecast: every active job's fires over a window (its load: ``core.load``), the
peaks and the jobs that make them, beside the capacity this deployment has shown.

The capacity comes from the history (``run_capacity``, ``typical_run_times``): how fast
runs started when many shared a slot, per run mode (the job's kind), and each job's median
run time. A peak's lateness is predicted by draining every fire of the window, in order,
at those rates: the start of a bucket's last run minus its slot.
"""

from __future__ import annotations

import datetime as dt
import heapq
import math
from dataclasses import dataclass

from cronjobs.core.load import DEFAULT_BUCKET, Load, Unreadable, Window, expand, make_window
from cronjobs.db.store import Store
from cronjobs.errors import UsageError
from cronjobs.reports import TypicalRunTime

DEFAULT_TOP = 10
MAX_TOP = 1000
HISTORY = dt.timedelta(days=7)  # how far back the capacity is read
# The crowded-minute threshold: without history, this many fires of other jobs; with it,
# the runs the slowest run mode shown starts in CROWDED_SECONDS.
DEFAULT_CROWDED = 10
CROWDED_SECONDS = 10


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


