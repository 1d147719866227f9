"""Materialisation: due definitions, the runs and skips a tick writes for their slots, one-off runs
released when due."""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

from psycopg.rows import args_row, tuple_row
from psycopg.types.json import Jsonb

from cronjobs.db.session import Queries
from cronjobs.models import (
    Advance,
    DueDefinition,
    DueOneOff,
    NewRun,
    NewSkip,
    Run,
)

if TYPE_CHECKING:
    # (imported where its rows are read, off the tick's path: see Store)
    from cronjobs.reports import Skip


class MaterialiseStore(Queries):
    """Materialisation: due definitions, the runs and skips a tick writes for their slots, one-off
    runs released when due."""

    def due_definitions(self, *, now: dt.datetime, limit: int) -> list[DueDefinition]:
        return self._binary("due_definitions", {"now": now, "limit": limit},
                            args_row(DueDefinition))

    def unscheduled_definitions(self, *, limit: int) -> list[DueDefinition]:
        return self._binary("unscheduled_definitions", {"limit": limit},
                            args_row(DueDefinition))

    def active_runs(self, definition_ids: list[int], *, now: dt.datetime
                    ) -> dict[int, tuple[int, int]]:
        """{definition_id: (running with a lease live at ``now``, waiting)}"""
        return {definition_id: (running, waiting) for definition_id, (running, waiting, _)
                in self.active_runs_since(definition_ids, now=now).items()}

    def active_runs_since(self, definition_ids: list[int], *, now: dt.datetime
                          ) -> dict[int, tuple[int, int, dt.datetime | None]]:
        """{definition_id: (running, waiting, the earliest slot or trigger instant among
        them)}"""
        rows = self._binary("active_runs", {"definition_ids": definition_ids, "now": now},
                            tuple_row)
        return {definition_id: (running, waiting, earliest)
                for definition_id, running, waiting, earliest in rows}

    def insert_runs(self, runs: Sequence[NewRun], *, now: dt.datetime,
                    tick_id: int | None) -> list[tuple[int, dt.datetime]]:
        """Insert runs; slots that already have one are left alone. Returns the
        (definition_id, scheduled_for) of the new ones."""
        return self.send_runs(runs, now=now, tick_id=tick_id)()

    def send_runs(self, runs: Sequence[NewRun], *, now: dt.datetime, tick_id: int | None
                  ) -> Callable[[], list[tuple[int, dt.datetime]]]:
        """``insert_runs``, the new runs read when the returned function is called (inside
        ``pipeline()``: after the block)."""
        if not runs:
            return list  # nothing sent, nothing new: []
        params = {
            "definition_ids": [r.definition_id for r in runs],
            "slots": [r.scheduled_for for r in runs],
            "triggers": [r.trigger.value for r in runs],
            "max_attempts": [r.max_attempts for r in runs],
            "exclusive": [r.exclusive for r in runs],
            "eligible": [r.eligible_at for r in runs],
            "now": now,
            "tick_id": tick_id,
        }
        return self._later("insert_runs", params, tuple_row, binary=True)

    def insert_backfill_runs(self, runs: Sequence[NewRun], *, now: dt.datetime
                             ) -> list[tuple[int, dt.datetime]]:
        """Backfilled runs of past slots, except slots that have a run anywhere (queue or
        history). Locks the job's row first (as a deciding tick does), in the caller's
        transaction."""
        if not runs:
            return []
        for definition_id in sorted({r.definition_id for r in runs}):
            self._send("lock_definition", {"id": definition_id})
        return self._binary("insert_backfill_runs", {
            "definition_ids": [r.definition_id for r in runs],
            "slots": [r.scheduled_for for r in runs],
            "max_attempts": [r.max_attempts for r in runs],
            "exclusive": [r.exclusive for r in runs],
            "eligible": [r.eligible_at for r in runs],
            "now": now}, tuple_row)

    def retention_horizon(self, definition_id: int) -> dt.datetime | None:
        """The oldest slot of the job whose run retention cannot have dropped (None:
        nothing was retired yet)."""
        horizon: dt.datetime | None = self._values("retention_horizon",
                                                   {"id": definition_id})[0]
        return horizon

    def insert_skips(self, skips: Sequence[NewSkip], *, now: dt.datetime,
                     tick_id: int | None) -> None:
        if not skips:
            return
        self._send("insert_skips", {
            "definition_ids": [s.definition_id for s in skips],
            "first_slots": [s.first_slot for s in skips],
            "last_slots": [s.last_slot for s in skips],
            "slot_counts": [s.slot_count for s in skips],
            "reasons": [s.reason.value for s in skips],
            "details": [s.detail for s in skips],
            "now": now,
            "tick_id": tick_id,
        })

    def advance_definitions(self, advances: Sequence[Advance]) -> None:
        if not advances:
            return
        self._send("advance_definitions", {
            "ids": [a.definition_id for a in advances],
            "cursors": [a.cursor_at for a in advances],
            "next_dues": [a.next_due_at for a in advances],
            "invalid_reasons": [a.invalid_reason for a in advances],
            "resumed": [a.resumed for a in advances],
        })

    def anything_to_materialise(self, *, now: dt.datetime) -> bool:
        """Whether materialising at ``now`` would find anything to decide (no lock
        taken)."""
        return bool(self._values("anything_to_materialise", {"now": now})[0])

    def definitions_due(self, *, now: dt.datetime) -> bool:
        """Whether a definition still has a slot due at ``now`` (after this tick's
        materialisation: one that another tick is materialising right now)."""
        return bool(self._values("definitions_due", {"now": now})[0])

    def runs_between(self, definition_id: int, start: dt.datetime, end: dt.datetime
                     ) -> list[Run]:
        params = {"definition_id": definition_id, "start": start, "end": end}
        return self._rows("runs_between", params, Run)

    def skips_between(self, definition_id: int, start: dt.datetime, end: dt.datetime
                      ) -> list[Skip]:
        from cronjobs.reports import Skip  # noqa: PLC0415 - see Store
        params = {"definition_id": definition_id, "start": start, "end": end}
        return self._rows("skips_between", params, Skip)

    def insert_one_off_run(self, *, definition_id: int, at: dt.datetime,
                           payload: dict[str, Any] | None, max_attempts: int, exclusive: bool,
                           now: dt.datetime) -> Run:
        return self._one("insert_one_off_run", {
            "definition_id": definition_id, "at": at, "max_attempts": max_attempts,
            "payload": Jsonb(payload) if payload is not None else None,
            "exclusive": exclusive, "now": now}, Run)

    def due_one_off_runs(self, *, now: dt.datetime, limit: int) -> list[DueOneOff]:
        return self._rows("due_one_off_runs", {"now": now, "limit": limit}, DueOneOff)

    def release_one_off_runs(self, releases: Sequence[tuple[int, bool, str | None]], *,
                             now: dt.datetime) -> int:
        """(run id, exclusive, error): queued when error is None, else cancelled."""
        return self._count("release_one_off_runs", {
            "ids": [r[0] for r in releases], "exclusive": [r[1] for r in releases],
            "errors": [r[2] for r in releases], "now": now})

    def one_off_runs_of(self, definition_id: int) -> list[Run]:
        return self._rows("one_off_runs_of", {"definition_id": definition_id}, Run)

