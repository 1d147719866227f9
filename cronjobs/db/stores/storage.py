"""The storage's own health: the hot tables' dead rows, what holds vacuum back, the history's
partitions and sizes (catalogs and statistics only: cheap whatever the history)."""

from __future__ import annotations

from cronjobs.db.session import Queries
from cronjobs.reports import HistoryStorage, HotTable, XminHolder


class StorageStore(Queries):
    """The storage's own health: the hot tables' dead rows, what holds vacuum back, the
    history's partitions and sizes."""

    def hot_tables(self) -> list[HotTable]:
        """job_runs_queue then job_attempts_queue, as the statistics views see them."""
        return self._rows("hot_tables", None, HotTable)

    def xmin_holders(self, *, limit: int) -> list[XminHolder]:
        """At most ``limit`` of what holds back vacuum in this database (sessions, prepared
        transactions, replication slots), oldest first; never this session."""
        return self._rows("xmin_holders", {"limit": limit}, XminHolder)

    def history_storage(self, *, cap: int, exact: bool = True) -> HistoryStorage:
        """The history's partitions and sizes; rows in the default partitions counted up to
        ``cap``. ``exact``: sizes by pg_total_relation_size, else estimated from the
        catalog's page counts (cheaper with many partitions)."""
        return self._one("history_storage", {"cap": cap, "exact": exact}, HistoryStorage)
