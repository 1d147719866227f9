"""The record of each tick: its start (closing lost ticks) and its end, and the due runs
waiting for a handler no tick loaded."""

from __future__ import annotations

import datetime as dt
from collections.abc import Mapping, Sequence
from typing import Any

from cronjobs.db.session import Queries
from cronjobs.models import (
    LostTick,
    TickStarted,
    WaitingRuns,
)


class TickStore(Queries):
    """The record of each tick: its start (closing lost ticks) and its end."""

    def insert_tick(self, *, worker: str, now: dt.datetime | None, lost_after: dt.timedelta,
                    handlers: Sequence[str] = ()
                    ) -> tuple[int, dt.datetime, list[LostTick]]:
        """Record a tick starting at ``now`` (None: the database clock's now), with the
        handlers it can run, and close as lost the ticks that went away before recording
        their end (still running, started more than ``lost_after`` before the instant,
        holding no live lease); returns its id, its instant and the ticks it closed."""
        row = self._one("insert_tick", {"worker": worker, "now": now, "lost_after": lost_after,
                                        "handlers": list(handlers)}, TickStarted)
        lost = [LostTick(i, w, at) for i, w, at in zip(
            row.lost_ids or [], row.lost_workers or [], row.lost_tick_ats or [], strict=True)]
        return row.id, row.tick_at.astimezone(dt.UTC), lost

    def finish_tick(self, tick_id: int, *, status: str, counts: Mapping[str, int],
                    now: dt.datetime, error: str | None = None) -> None:
        names = ("materialised", "skipped", "reclaimed", "claimed", "succeeded", "failed")
        params: dict[str, Any] = {name: counts.get(name, 0) for name in names}
        params |= {"id": tick_id, "status": status, "error": error, "now": now}
        self._send("finish_tick", params)

    def waiting_for_handlers(self, *, now: dt.datetime, handlers: Sequence[str] | None,
                             since: dt.datetime | None = None,
                             definition_id: int | None = None) -> list[WaitingRuns]:
        """Due handler runs waiting for a handler that is missing, per handler (``handler``,
        ``runs``, ``oldest``): missing from ``handlers``, or with None, registered by no tick
        started after ``since``."""
        return self._rows("waiting_for_handlers", {
            "now": now, "handlers": list(handlers) if handlers is not None else None,
            "since": since, "definition_id": definition_id}, WaitingRuns)
