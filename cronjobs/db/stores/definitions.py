"""Job definitions: define, pause, resume, remove, the history of a definition, jobs as code."""

from __future__ import annotations

import dataclasses
import datetime as dt
from enum import StrEnum
from typing import TYPE_CHECKING, Any

from psycopg.types.json import Jsonb

from cronjobs.db.session import Queries
from cronjobs.models import (
    Definition,
    DefinitionSpec,
    SkipReason,
    UpsertedDefinition,
)

if TYPE_CHECKING:
    # (imported where its rows are read, off the tick's path: see Store)
    from cronjobs.reports import DefinitionSummary


class DefinitionStore(Queries):
    """Job definitions: define, pause, resume, remove, the history of a definition, jobs as code."""

    def upsert_definition(
        self, spec: DefinitionSpec, *, start: dt.datetime, next_due_at: dt.datetime | None,
        source: str | None = None,
    ) -> tuple[Definition, bool] | None:
        """Insert or update; returns (definition, created) or None when nothing changed.
        A new schedule continues from ``start`` (never before the cursor), whose first
        slot after it is ``next_due_at``. ``source`` is recorded on a new definition only."""
        params = {column.name: _column_value(getattr(spec, column.name))
                  for column in dataclasses.fields(spec)}
        params.update(source=source, start=start, next_due_at=next_due_at)
        row = self._row("upsert_definition", params, UpsertedDefinition)
        return (row, row.created) if row is not None else None

    def definition_by_name(self, name: str, *, for_update: bool = False) -> Definition | None:
        query = "definition_by_name_for_update" if for_update else "definition_by_name"
        return self._row(query, {"name": name}, Definition)

    def left_off(self, name: str) -> dt.datetime | None:
        """Where the definitions that carried ``name`` (current and removed) left off."""
        value: dt.datetime | None = self._values("name_left_off", {"name": name})[0]
        return value.astimezone(dt.UTC) if value is not None else None

    def list_definitions(self) -> list[DefinitionSummary]:
        from cronjobs.reports import DefinitionSummary, ListedDefinition  # noqa: PLC0415 - see Store
        return [DefinitionSummary(row, row.last_run_status, row.last_run_at)
                for row in self._rows("list_definitions", None, ListedDefinition)]

    def pause_definition(
        self, definition_id: int, *, now: dt.datetime, until: dt.datetime | None, note: str | None
    ) -> Definition:
        params = {"id": definition_id, "now": now, "until": until, "note": note}
        return self._one("pause_definition", params, Definition)

    def resume_definition(
        self, definition_id: int, *, now: dt.datetime, next_due_at: dt.datetime | None
    ) -> Definition:
        params = {"id": definition_id, "now": now, "next_due_at": next_due_at}
        return self._one("resume_definition", params, Definition)

    def record_skip(
        self,
        definition_id: int,
        *,
        first_slot: dt.datetime,
        last_slot: dt.datetime,
        slot_count: int,
        reason: SkipReason,
        detail: str | None,
        now: dt.datetime,
        tick_id: int | None = None,
    ) -> None:
        self._send(
            "record_skip",
            {
                "definition_id": definition_id,
                "first_slot": first_slot,
                "last_slot": last_slot,
                "slot_count": slot_count,
                "reason": reason.value,
                "detail": detail,
                "tick_id": tick_id,
                "now": now,
            },
        )

    def remove_definition(self, definition_id: int, *, now: dt.datetime) -> tuple[Definition, int]:
        """Mark removed; cancel its waiting runs and ask its running runs to stop."""
        row = self._one("remove_definition", {"id": definition_id, "now": now}, Definition)
        reason = "job removed"
        cancelled = self._count(
            "cancel_waiting_runs", {"definition_id": definition_id, "now": now, "reason": reason}
        )
        self.request_cancel_running([definition_id], now=now)
        return row, cancelled

    def request_cancel_running(self, definition_ids: list[int], *, now: dt.datetime) -> int:
        params = {"definition_ids": definition_ids, "now": now}
        return self._count("request_cancel_running_of", params)

    def definition_history(self, name: str) -> list[Definition]:
        return self._rows("definition_history", {"name": name}, Definition)

    def lock_apply(self) -> None:
        self._send("apply_lock")

    def adopt_definition(self, definition_id: int, *, source: str, now: dt.datetime
                         ) -> Definition:
        return self._one("adopt_definition", {"id": definition_id, "source": source,
                                              "now": now}, Definition)


def _column_value(value: Any) -> Any:
    """A DefinitionSpec attribute as its column takes it: an enum as its text, a tuple as an
    array (of texts), a mapping as jsonb."""
    if isinstance(value, StrEnum):
        return value.value
    if isinstance(value, tuple):
        return [_column_value(item) for item in value]
    if isinstance(value, dict):
        return Jsonb(value)
    return value
