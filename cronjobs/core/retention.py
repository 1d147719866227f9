"""Retention, on by default: every tick looks after the storage a little. This is the one
retention policy (`cronjobs retention` sets it): runs retire by whole days, their
partitions dropped; nothing deletes runs row by row but the default partition's few.

- Finished runs left in the queue (a removed job's waiting runs, a one-off run cancelled
  when it came due, an older cronjobs) move to the history, the one way every run goes
  there (finish_runs).
- The history's day partitions are made ahead of need: for every retention in use, the days
  a run finishing in the next few days retires on.
- A day whose time has come is dropped whole, after what must outlive it moved to the kept
  runs: dead runs nobody acknowledged, each job's latest success and latest death. The
  tick's own instant (``--now`` may set it) says which days have come, as it says
  everything else; the database still never drops a day that is not over by its own
  clock, and leaves it for a later tick.
- Skipped slots, tick records and notification records are deleted in small batches.

One tick at a time does it (an advisory lock; the others skip it), and its DDL waits a short
while at most for its locks, then leaves the rest to the next tick: never urgent, and a
claim must never queue behind it.
"""

from __future__ import annotations

import datetime as dt
import logging
from collections.abc import Callable
from dataclasses import dataclass

from cronjobs.db.store import Store
from cronjobs.db.stores.retention import RetentionSettings
from cronjobs.durations import parse_bounded
from cronjobs.errors import LockBusy

log = logging.getLogger(__name__)

# days made ahead of the first one a run finishing now retires on: a tick a few days late
# still finds its days made (a run whose day is missing goes to the default partition)
AHEAD_DAYS = 3
LOCK_TIMEOUT = dt.timedelta(milliseconds=200)
# one tick in this long does the upkeep (the others ask with one statement, and go)
UPKEEP_EVERY = dt.timedelta(seconds=55)
BATCH = 1000
# how long history may be kept, globally and by a job (the schema's CHECKs say the same)
KEEP_LEAST = dt.timedelta(days=1)
KEEP_MOST = dt.timedelta(days=3650)


@dataclass
class Upkeep:
    """What one tick's upkeep of the storage did."""

    archived: int = 0
    created: int = 0
    kept: int = 0
    dropped: int = 0
    retired_rows: int = 0
    released: int = 0
    skips: int = 0
    ticks: int = 0
    notifications: int = 0
    busy: bool = False  # another tick had the upkeep, or a lock was held too long
    left: int = 0  # days over by the tick's clock, not yet by the database's: left for later
    error: str | None = None  # why a step failed (the tick still did its runs)


def in_batches(step: Callable[[], int], *, batch: int, max_batches: int | None) -> int:
    """Run ``step`` (one batch, its own short transaction: it returns how many rows it
    did) until a batch does fewer than ``batch`` rows, at most ``max_batches`` times (None:
    no bound). Returns the rows done in all."""
    total = done = 0
    while max_batches is None or done < max_batches:
        rows = step()
        total += rows
        done += 1
        if rows < batch:
            break
    return total


def days_needed(retentions: list[dt.timedelta], now: dt.datetime,
                ahead: int = AHEAD_DAYS) -> set[dt.date]:
    """The retirement days of runs finishing between now and ``ahead`` days from now."""
    days: set[dt.date] = set()
    for keep in retentions:
        first = (now + keep).astimezone(dt.UTC).date()
        days.update(first + dt.timedelta(days=n) for n in range(ahead + 1))
    return days


def ensure_partitions(store: Store, *, now: dt.datetime,
                      lock_timeout: dt.timedelta = LOCK_TIMEOUT) -> int | None:
    """Make the missing day partitions; None when another tick has the upkeep."""
    with store.transaction():
        if not store.retention.try_maintenance_lock(lock_timeout=lock_timeout):
            return None
        needed = days_needed(store.retention.retentions_in_use(), now)
        existing = store.retention.history_partitions()
        # a day is made for both tables at once: missing when either lacks it
        made_for_both = set(existing["job_runs_history"]) & set(existing["job_attempts_history"])
        missing = sorted(needed - made_for_both)
        for day in missing:
            store.retention.add_history_day(day)
    return len(missing)


def tick_upkeep(store: Store, *, now: dt.datetime) -> Upkeep | None:
    """At the end of a tick: the upkeep, if no tick did it in the last UPKEEP_EVERY (one
    statement decides, whichever ticks ask at once; None when another tick has it)."""
    if not store.retention.claim_upkeep(now=now, every=UPKEEP_EVERY):
        return None
    return upkeep(store, now=now)


def upkeep(store: Store, *, now: dt.datetime, lock_timeout: dt.timedelta = LOCK_TIMEOUT,
           batches: int = 1) -> Upkeep:
    """One tick's share of the upkeep (``batches`` bounds each batched step)."""
    report = Upkeep()
    report.archived = in_batches(lambda: archive_finished(store, now=now, limit=BATCH),
                                 batch=BATCH, max_batches=batches)
    try:
        made = ensure_partitions(store, now=now, lock_timeout=lock_timeout)
        if made is None:
            report.busy = True
            return report
        report.created = made
        _retire(store, now=now, lock_timeout=lock_timeout, batches=batches, report=report)
    except LockBusy as exc:
        log.info("storage upkeep postponed: a lock was busy",
                 extra={"action": "retention", "error": str(exc)})
        report.busy = True
    settings = store.retention.settings()
    report.skips = in_batches(
        lambda: store.retention.prune_skips(cutoff=now - settings.skips, batch=BATCH),
        batch=BATCH, max_batches=batches)
    report.ticks = in_batches(
        lambda: store.retention.prune_ticks(cutoff=now - settings.ticks, batch=BATCH),
        batch=BATCH, max_batches=batches)
    report.notifications = in_batches(
        lambda: store.retention.prune_notifications(cutoff=now - settings.failed, batch=BATCH),
        batch=BATCH, max_batches=batches)
    return report


def archive_finished(store: Store, *, now: dt.datetime, limit: int) -> int:
    """Move up to ``limit`` runs that ended in the queue to the history (the one way:
    QueueStore.move_ended); returns how many were found (the batch's size)."""
    ids = store.retention.finished_in_queue(limit=limit)
    store.queue.move_ended(ids, now=now)
    return len(ids)


def _retire(store: Store, *, now: dt.datetime, lock_timeout: dt.timedelta, batches: int,
            report: Upkeep) -> None:
    """Drop the days whose time has come by the tick's clock (retire_at before today's
    start, UTC); a day the database finds not over yet by its own is left for later."""
    today = now.astimezone(dt.UTC).date()
    before = dt.datetime.combine(today, dt.time(), dt.UTC)
    expired = sorted({day for days in store.retention.history_partitions().values()
                      for day in days if day < today})
    if not expired and not store.retention.default_has_expired(before=now):
        return  # nothing retires yet: the usual minute
    report.released += store.retention.release_kept(before=now)
    # what outlives its day moves to the kept runs first (its own transaction: a day's
    # rows only change by moving out, so nothing needing it arrives before the drop)
    report.kept += store.retention.keep_before_retiring(before=now)
    store.retention.record_retired(before=now)
    for day in expired:
        if store.retention.drop_history_day(day, lock_timeout=lock_timeout):
            report.dropped += 1
        else:
            report.left += 1
    report.retired_rows = in_batches(
        lambda: store.retention.retire_default_runs(before=before, batch=BATCH),
        batch=BATCH, max_batches=batches)


# -- the settings (`cronjobs retention`) --------------------------------------------------------

@dataclass(frozen=True)
class Retention:
    """The global retention, and what a call changed: setting -> (old, new)."""

    settings: RetentionSettings
    changed: dict[str, tuple[dt.timedelta, dt.timedelta]]


def parse_keep(text: str, *, option: str) -> dt.timedelta:
    """A retention as users write it (``30d``, ``12w``): from 1 day to 3650 days."""
    return parse_bounded(text, option=option, minimum=KEEP_LEAST, maximum=KEEP_MOST)


def retention(store: Store, *, succeeded: str | None = None, failed: str | None = None,
              skips: str | None = None, ticks: str | None = None) -> Retention:
    """The global retention, after setting the ones given (the others stay). Every value is
    checked first (a bad one is a UsageError naming its option, and nothing is written);
    values equal to the stored ones write nothing."""
    texts = {"succeeded": succeeded, "failed": failed, "skips": skips, "ticks": ticks}
    given = {name: parse_keep(text, option=f"--{name}")
             for name, text in texts.items() if text is not None}
    if not given:
        return Retention(store.retention.settings(), {})
    with store.transaction():
        current = store.retention.settings()
        changed = {name: (getattr(current, name), value) for name, value in given.items()
                   if getattr(current, name) != value}
        if not changed:
            return Retention(current, {})
        new = {name: changed[name][1] for name in changed}
        stored = store.retention.set_retention(
            succeeded=new.get("succeeded"), failed=new.get("failed"), skips=new.get("skips"),
            ticks=new.get("ticks"), now=store.now())
    return Retention(stored, changed)
