"""Groups: limits on how many runs of several jobs run at once."""

from __future__ import annotations

import datetime as dt

from cronjobs.db.session import Queries
from cronjobs.reports import (
    GroupUsage,
)


class GroupStore(Queries):
    """Groups: limits on how many runs of several jobs run at once."""

    def set_group_limit(self, name: str, *, max_running: int, now: dt.datetime) -> None:
        self._send("set_group_limit", {"name": name, "max_running": max_running, "now": now})

    def remove_group_limit(self, name: str) -> bool:
        return bool(self._values("remove_group_limit", {"name": name}))

    def group_usage(self, *, now: dt.datetime, name: str | None = None) -> list[GroupUsage]:
        return self._rows("group_usage", {"now": now, "name": name}, GroupUsage)

    def group_jobs(self, name: str) -> list[str]:
        return [str(value) for value in self._values("group_jobs", {"name": name})]

