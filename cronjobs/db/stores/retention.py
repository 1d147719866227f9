"""Retention: the history's day partitions made ahead and dropped when they retire, what
must outlive them kept, and the rest of the history (skips, ticks, notifications) deleted in
batches."""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass

from psycopg.rows import tuple_row

from cronjobs.db.session import Queries

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
    """Retention: partitions made and dropped, kept runs, the other records deleted in
    batches."""

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

    def drop_history_day(self, day: dt.date, *, lock_timeout: dt.timedelta) -> bool:
        """Drop the day's partitions, in a short transaction of its own (it locks the
        history's parents) waiting ``lock_timeout`` at most for its locks. False when the
        database left them: the day is not over by its own clock (a later tick drops it)."""
        with self.session.transaction():
            self.session.lock_timeout(lock_timeout)
            return bool(self._values("drop_history_day", {"day": day})[0])

    # -- moving and keeping -----------------------------------------------------------------

    def finished_in_queue(self, *, limit: int) -> list[int]:
        """Up to ``limit`` runs that ended in the queue and are still there, oldest first."""
        return [int(i) for i in self._values("finished_in_queue", {"limit": limit})]

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

    # -- deleting in batches ------------------------------------------------------------------

    def prune_skips(self, *, cutoff: dt.datetime, batch: int) -> int:
        return len(self._values("prune_skips", {"cutoff": cutoff, "batch": batch}))

    def prune_ticks(self, *, cutoff: dt.datetime, batch: int) -> int:
        return len(self._values("prune_ticks", {"cutoff": cutoff, "batch": batch}))

    def prune_notifications(self, *, cutoff: dt.datetime, batch: int) -> int:
        return len(self._values("prune_notifications", {"cutoff": cutoff, "batch": batch}))
