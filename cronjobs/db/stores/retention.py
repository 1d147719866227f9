"""Retention: the history's day partitions made ahead and dropped when they retire, what
must outlive them kept, finished runs moved out of the queue, and pruning in batches."""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass

from psycopg.rows import tuple_row

from cronjobs.db.session import Queries
from cronjobs.models import (
    Pruned,
)

# the partitioned tables whose days are made and dropped together (a run and its attempts
# retire on the same day)
HISTORY_TABLES = ("job_runs_history", "job_attempts_history")


@dataclass(frozen=True)
class RetentionSettings:
    """cronjobs_retention: how long history is kept (a job's own keep_* win for its runs)."""

    succeeded: dt.timedelta
    failed: dt.timedelta
    skips: dt.timedelta
    ticks: dt.timedelta
    retired_before: dt.datetime | None  # runs retiring before this may have been dropped
    updated_at: dt.datetime


def partition_day(name: str) -> dt.date:
    return dt.datetime.strptime(name[-8:], "%Y%m%d").replace(tzinfo=dt.UTC).date()


class RetentionStore(Queries):
    """Retention: partitions made and dropped, kept runs, the queue's finished runs moved out,
    pruning in batches."""

    # -- the day partitions ---------------------------------------------------------------

    def try_maintenance_lock(self, *, lock_timeout: dt.timedelta) -> bool:
        """In a transaction: whether this session now looks after the storage (until the
        transaction ends); DDL in it waits ``lock_timeout`` at most for its locks."""
        self.session.lock_timeout(lock_timeout)
        return bool(self._values("maintenance_lock")[0])

    def claim_upkeep(self, *, now: dt.datetime, every: dt.timedelta) -> bool:
        return bool(self._values("claim_upkeep", {"now": now, "every": every}))

    def retentions_in_use(self) -> list[dt.timedelta]:
        return list(self._values("retentions_in_use"))

    def history_partitions(self) -> dict[str, list[dt.date]]:
        """{parent: [day, ...]} of the day partitions that exist."""
        found: dict[str, list[dt.date]] = {parent: [] for parent in HISTORY_TABLES}
        for parent, name in self.session.later("history_partitions", {}, tuple_row)():
            found[parent].append(partition_day(name))
        return found

    def add_history_day(self, day: dt.date) -> None:
        """Make the day's partitions (retire_at in [day, day + 1) UTC), with the rows the
        default partitions caught for that day."""
        self._send("add_history_day", {"day": day})

    def drop_history_day(self, day: dt.date, *, lock_timeout: dt.timedelta) -> None:
        """Drop the day's partitions, in a short transaction of its own (it locks the
        history's parents) waiting ``lock_timeout`` at most for its locks."""
        with self.session.transaction():
            self.session.lock_timeout(lock_timeout)
            self._send("drop_history_day", {"day": day})

    # -- moving and keeping -----------------------------------------------------------------

    def archive_finished(self, *, now: dt.datetime, limit: int) -> int:
        """Move up to ``limit`` finished runs still in the queue to the history."""
        return int(self._values("archive_finished", {"now": now, "limit": limit})[0])

    def keep_before_retiring(self, *, before: dt.datetime) -> int:
        return int(self._values("keep_before_retiring", {"before": before})[0])

    def default_has_expired(self, *, before: dt.datetime) -> bool:
        return bool(self._values("default_has_expired", {"before": before})[0])

    def retire_default_runs(self, *, before: dt.datetime, batch: int) -> int:
        return int(self._values("retire_default_runs", {"before": before, "batch": batch})[0])

    def record_retired(self, *, before: dt.datetime) -> None:
        self._send("record_retired", {"before": before})

    def release_kept(self, *, before: dt.datetime) -> int:
        return int(self._values("release_kept", {"before": before})[0])

    # -- settings ---------------------------------------------------------------------------

    def settings(self) -> RetentionSettings:
        return self._one("retention_settings", None, RetentionSettings)

    def set_retention(self, *, succeeded: dt.timedelta | None, failed: dt.timedelta | None,
                      skips: dt.timedelta | None, ticks: dt.timedelta | None,
                      now: dt.datetime) -> RetentionSettings:
        return self._one("set_retention", {"succeeded": succeeded, "failed": failed,
                                           "skips": skips, "ticks": ticks, "now": now},
                         RetentionSettings)

    # -- pruning in batches -------------------------------------------------------------------

    def prune_runs(self, *, cutoff: dt.datetime, keep_last: int, batch: int,
                   after: tuple[dt.datetime, int] | None = None
                   ) -> tuple[int, tuple[dt.datetime, int] | None]:
        """One batch: (runs deleted, the position of the last one, to give as ``after`` to
        the next batch; None when none was deleted)."""
        after_at, after_id = after or (dt.datetime.min.replace(tzinfo=dt.UTC), 0)
        rows = self._rows("prune_runs", {"cutoff": cutoff, "keep_last": keep_last,
                                         "batch": batch, "after_at": after_at,
                                         "after_id": after_id}, Pruned)
        last = max(((row.finished_at, row.id) for row in rows), default=None)
        return len(rows), last

    def count_prunable_runs(self, *, cutoff: dt.datetime, keep_last: int) -> int:
        return int(self._values("count_prunable_runs", {"cutoff": cutoff,
                                                        "keep_last": keep_last})[0])

    def prune_skips(self, *, cutoff: dt.datetime, batch: int) -> int:
        return len(self._values("prune_skips", {"cutoff": cutoff, "batch": batch}))

    def prune_run_keys(self, *, now: dt.datetime, batch: int) -> int:
        return len(self._values("prune_run_keys", {"now": now, "batch": batch}))

    def prune_ticks(self, *, cutoff: dt.datetime, batch: int) -> int:
        return len(self._values("prune_ticks", {"cutoff": cutoff, "batch": batch}))

    def prune_notifications(self, *, cutoff: dt.datetime, batch: int) -> int:
        return len(self._values("prune_notifications", {"cutoff": cutoff, "batch": batch}))
