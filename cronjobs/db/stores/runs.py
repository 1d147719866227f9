"""Runs as an operator sees them: find, list, retry, acknowledge, trigger, cancel."""

from __future__ import annotations

import datetime as dt
from collections.abc import Sequence
from typing import Any

from psycopg.types.json import Jsonb

from cronjobs.db.session import Queries
from cronjobs.models import (
    Run,
    Trigger,
)
from cronjobs.reports import (
    Attempt,
    JobRun,
)


class RunStore(Queries):
    """Runs as an operator sees them: find, list, retry, acknowledge, trigger, cancel."""

    def run_by_id(self, run_id: int, *, for_update: bool = False) -> JobRun | None:
        query = "run_by_id_for_update" if for_update else "run_by_id"
        return self._row(query, {"id": run_id}, JobRun)

    def attempts_of_run(self, run_id: int) -> list[Attempt]:
        return self._rows("attempts_of_run", {"run_id": run_id}, Attempt)

    def attempts_of_runs(self, run_ids: Sequence[int]) -> list[Attempt]:
        """The attempts of several runs (by run, then attempt): one query for a page."""
        return self._rows("attempts_of_runs", {"run_ids": list(run_ids)}, Attempt)

    def attempts_of(self, runs: Sequence[Run]) -> list[Attempt]:
        """The attempts of runs just read (by run, then attempt), each looked for where its
        run is: the same as attempts_of_runs, for a fraction of the reads when the runs
        are many and in the history."""
        return self._rows("attempts_of_placed_runs", {
            "run_ids": [r.id for r in runs], "stages": [r.stage for r in runs],
            "retire_at": [r.retire_at for r in runs]}, Attempt)

    def recent_runs(self, definition_id: int, limit: int) -> list[Run]:
        return self._rows("recent_runs", {"definition_id": definition_id, "limit": limit}, Run)

    def timeline_start(self, name: str, *, start: dt.datetime, end: dt.datetime,
                       runs: int) -> dt.datetime | None:
        """The slot of the ``runs``-th newest run of [start, end] of the job ``name`` (of
        any definition that carried it), None when it has fewer runs there."""
        values = self._values("timeline_start", {"name": name, "start": start, "end": end,
                                                 "runs": runs})
        return values[0] if values else None

    def list_runs(self, *, name: str | None, statuses: Sequence[str] | None,
                  since: dt.datetime | None, limit: int) -> list[JobRun]:
        return self._rows("list_runs", {"name": name, "statuses": list(statuses) if statuses
                                        else None, "since": since, "limit": limit}, JobRun)

    def requeue_run(self, run_id: int, *, attempts: int, now: dt.datetime,
                    by: str | None = None) -> Run:
        with self.session.transaction():
            run = self._one("requeue_run", {"id": run_id, "attempts": attempts, "by": by,
                                            "now": now}, Run)
            self._send("requeue_attempts", {"id": run_id})
        return run

    def acknowledge_run(self, run_id: int, *, by: str | None, now: dt.datetime) -> Run | None:
        return self._row("acknowledge_run", {"id": run_id, "by": by, "now": now}, Run)

    def acknowledge_dead_runs(self, definition_id: int, *, by: str | None, now: dt.datetime
                              ) -> list[Run]:
        rows = self._rows("acknowledge_dead_runs", {"definition_id": definition_id, "by": by,
                                                    "now": now}, Run)
        return sorted(rows, key=lambda run: run.id)

    def insert_manual_run(self, *, definition_id: int, scheduled_for: dt.datetime,
                          trigger: Trigger, payload: dict[str, Any] | None, max_attempts: int,
                          exclusive: bool, now: dt.datetime, retry_of: int | None = None
                          ) -> Run:
        return self._one("insert_manual_run", {
            "now": now, "definition_id": definition_id, "scheduled_for": scheduled_for,
            "trigger": trigger.value, "payload": Jsonb(payload) if payload is not None else None,
            "max_attempts": max_attempts, "exclusive": exclusive, "retry_of": retry_of,
        }, Run)

    def cancel_waiting_run(self, run_id: int, *, now: dt.datetime) -> Run | None:
        return self._row("cancel_waiting_run", {"id": run_id, "now": now}, Run)

    def request_cancel_run(self, run_id: int, *, now: dt.datetime) -> Run | None:
        return self._row("request_cancel_run", {"id": run_id, "now": now}, Run)

