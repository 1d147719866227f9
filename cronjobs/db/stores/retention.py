"""Retention: history deleted in bounded batches."""

from __future__ import annotations

import datetime as dt

from cronjobs.db.session import Queries
from cronjobs.models import (
    Pruned,
)


class RetentionStore(Queries):
    """Retention: history deleted in bounded batches."""

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

    def prune_ticks(self, *, cutoff: dt.datetime, batch: int) -> int:
        return len(self._values("prune_ticks", {"cutoff": cutoff, "batch": batch}))

