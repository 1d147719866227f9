"""The online part of the upgrade to schema version 11 (the hot queue and the partitioned
history). Migration 11 (cronjobs/db/migrations) made the old tables the 'legacy'
partitions of the new ones, in one short transaction; this moves their rows to the
history's day partitions in small batches, each its own short transaction, while ticks go
on, then drops the emptied tables. Readers see every run throughout (a batch moves its
rows atomically). Resumable: an interrupted upgrade goes on at the next
``cronjobs migrate``."""

from __future__ import annotations

import datetime as dt
import logging
import time
from collections.abc import Callable
from dataclasses import dataclass

from cronjobs.core.retention import ensure_partitions
from cronjobs.db.migrate import MigrationReport, migrate
from cronjobs.db.store import Store
from cronjobs.errors import LockBusy

log = logging.getLogger(__name__)

BATCH = 5000
DROP_LOCK_TIMEOUT = dt.timedelta(seconds=1)
DROP_TRIES = 30


@dataclass(frozen=True)
class Migrated:
    """What `cronjobs migrate` did: the schema's migrations, then an upgrade's online part."""

    migration: MigrationReport
    upgrade: UpgradeReport | None  # None: nothing to move


def migrate_and_upgrade(store: Store, *, batch: int = BATCH,
                        progress: Callable[[int], None] | None = None) -> Migrated:
    """`cronjobs migrate`: the missing migrations, the history's day partitions a first
    tick needs (its finishes then land in their days, never in the default partition to be
    written again when the day is made), then the rows an upgrade from before version 11
    has still to move."""
    migration = migrate(store)
    try:  # (None: a tick has the upkeep's lock, and makes them itself)
        ensure_partitions(store, now=store.now())
    except LockBusy:  # finishes held the history a while: the ticks' upkeep makes them
        log.info("the history's days are left to the ticks: busy", extra={"action": "migrate"})
    return Migrated(migration, finish_upgrade(store, batch=batch, progress=progress))


@dataclass(frozen=True)
class UpgradeReport:
    moved: int
    batches: int
    seconds: float
    longest_batch: float  # seconds: the longest any batch held its rows' locks
    dropped: bool  # the old tables are gone
    drop_seconds: float  # how long dropping them held its lock on job_runs, job_attempts


def finish_upgrade(store: Store, *, batch: int = BATCH,
                   progress: Callable[[int], None] | None = None) -> UpgradeReport | None:
    """Move what the old tables hold, then drop them. None when there is nothing to do."""
    if store.schema.legacy_rows() is None:
        return None
    started = time.monotonic()
    now = store.now()
    while ensure_partitions(store, now=now) is None:  # another tick is making them
        time.sleep(0.1)
    moved = batches = 0
    longest = 0.0
    while True:
        began = time.monotonic()
        n = store.schema.move_legacy_runs(now=now, batch=batch)
        longest = max(longest, time.monotonic() - began)
        if n == 0:
            break
        moved += n
        batches += 1
        if progress is not None:
            progress(moved)
    dropped = False
    drop_seconds = 0.0
    for _ in range(DROP_TRIES):
        try:
            began = time.monotonic()
            store.schema.drop_legacy(lock_timeout=DROP_LOCK_TIMEOUT)
            drop_seconds = time.monotonic() - began
            dropped = True
            break
        except LockBusy:
            log.info("the old tables are busy: trying again", extra={"action": "migrate"})
            time.sleep(1)
    return UpgradeReport(moved, batches, time.monotonic() - started, longest, dropped,
                         drop_seconds)
