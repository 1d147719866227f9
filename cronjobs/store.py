"""The only code that runs SQL: one typed method per named query in ``sql/queries.sql``.

psycopg errors are translated here into the cronjobs error tree, so nothing above this
module needs to know about psycopg exceptions.
"""

from __future__ import annotations

import datetime as dt
import logging
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import fields
from typing import Any, LiteralString, TypeVar

import psycopg
from psycopg import errors as pgerrors
from psycopg.rows import dict_row
from psycopg.types.json import Jsonb

from cronjobs import sql
from cronjobs.config import scrub
from cronjobs.errors import CronjobsError, DatabaseUnavailable, InvalidDefinition
from cronjobs.models import Definition, DefinitionSpec, DefinitionSummary, Run, SkipReason

log = logging.getLogger(__name__)

Row = dict[str, Any]
T = TypeVar("T")


def _build(cls: type[T], row: Mapping[str, Any]) -> T:
    names = [f.name for f in fields(cls)]  # type: ignore[arg-type]
    return cls(**{name: row[name] for name in names})


class Store:
    """Typed access to the cronjobs tables over one autocommit connection.

    Statements run in autocommit mode unless wrapped in ``with store.transaction():``.
    """

    def __init__(self, conn: psycopg.Connection[Any]) -> None:
        self.conn = conn

    # -- plumbing -----------------------------------------------------------------------

    @contextmanager
    def transaction(self) -> Iterator[None]:
        with _translated(), self.conn.transaction():
            yield

    def _rows(self, name: str, params: Mapping[str, Any] | None = None) -> list[Row]:
        with _translated(), self.conn.cursor(row_factory=dict_row) as cur:
            cur.execute(sql.query(name), params)
            return cur.fetchall() if cur.description is not None else []

    def _row(self, name: str, params: Mapping[str, Any] | None = None) -> Row | None:
        rows = self._rows(name, params)
        return rows[0] if rows else None

    def _count(self, name: str, params: Mapping[str, Any] | None = None) -> int:
        with _translated(), self.conn.cursor() as cur:
            cur.execute(sql.query(name), params)
            return cur.rowcount

    def run_script(self, script: LiteralString) -> None:
        """Run a multi-statement SQL script (schema or migration) as it is."""
        with _translated():
            self.conn.execute(script)

    def close(self) -> None:
        self.conn.close()

    # -- clock and schema ---------------------------------------------------------------

    def now(self) -> dt.datetime:
        value: dt.datetime = _required(self._row("now"), "now")["now"]
        return value.astimezone(dt.UTC)

    def migrations_table_exists(self) -> bool:
        row = self._row("migrations_table_exists")
        return bool(row and row["present"])

    def schema_version(self) -> int:
        row = self._row("schema_version")
        return int(row["version"]) if row else 0

    def lock_migrations(self) -> None:
        self._rows("migration_lock")

    def record_migration(self, version: int, name: str) -> None:
        self._rows("record_migration", {"version": version, "name": name})

    # -- definitions --------------------------------------------------------------------

    def upsert_definition(
        self, spec: DefinitionSpec, *, now: dt.datetime, next_due_at: dt.datetime | None
    ) -> tuple[Definition, bool] | None:
        """Insert or update; returns (definition, created) or None when nothing changed."""
        params = {
            "name": spec.name,
            "schedule": spec.schedule,
            "timezone": spec.timezone,
            "kind": spec.kind.value,
            "handler": spec.handler,
            "command": spec.command,
            "payload": Jsonb(spec.payload),
            "catchup": spec.catchup.value,
            "catchup_limit": spec.catchup_limit,
            "starting_deadline": spec.starting_deadline,
            "overlap": spec.overlap.value,
            "max_attempts": spec.max_attempts,
            "backoff": spec.backoff,
            "backoff_max": spec.backoff_max,
            "timeout": spec.timeout,
            "lease": spec.lease,
            "now": now,
            "next_due_at": next_due_at,
        }
        row = self._row("upsert_definition", params)
        if row is None:
            return None
        return _build(Definition, row), bool(row["created"])

    def definition_by_name(self, name: str, *, for_update: bool = False) -> Definition | None:
        query = "definition_by_name_for_update" if for_update else "definition_by_name"
        row = self._row(query, {"name": name})
        return _build(Definition, row) if row else None

    def list_definitions(self) -> list[DefinitionSummary]:
        return [
            DefinitionSummary(_build(Definition, row), row["last_run_status"], row["last_run_at"])
            for row in self._rows("list_definitions")
        ]

    def recent_runs(self, definition_id: int, limit: int) -> list[Run]:
        rows = self._rows("recent_runs", {"definition_id": definition_id, "limit": limit})
        return [_build(Run, row) for row in rows]

    def pause_definition(
        self, definition_id: int, *, now: dt.datetime, until: dt.datetime | None, note: str | None
    ) -> Definition:
        params = {"id": definition_id, "now": now, "until": until, "note": note}
        row = _required(self._row("pause_definition", params), "pause_definition")
        return _build(Definition, row)

    def resume_definition(
        self, definition_id: int, *, now: dt.datetime, next_due_at: dt.datetime | None
    ) -> Definition:
        params = {"id": definition_id, "now": now, "next_due_at": next_due_at}
        row = _required(self._row("resume_definition", params), "resume_definition")
        return _build(Definition, row)

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
        self._rows(
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
        row = _required(self._row("remove_definition", {"id": definition_id, "now": now}),
                        "remove_definition")
        reason = "job removed"
        cancelled = self._count(
            "cancel_waiting_runs", {"definition_id": definition_id, "now": now, "reason": reason}
        )
        self._count("request_cancel_running_runs", {"definition_id": definition_id, "now": now})
        return _build(Definition, row), cancelled


def _required(row: Row | None, query: str) -> Row:
    if row is None:
        raise CronjobsError(f"query {query!r} returned no row")
    return row


@contextmanager
def _translated() -> Iterator[None]:
    """Translate psycopg errors into the cronjobs error tree."""
    try:
        yield
    except CronjobsError:
        raise
    except pgerrors.IntegrityError as exc:
        raise InvalidDefinition(f"rejected by the database: {_first_line(exc)}") from exc
    except psycopg.OperationalError as exc:
        raise DatabaseUnavailable(f"database error: {_first_line(exc)}") from exc
    except psycopg.Error as exc:
        raise CronjobsError(f"database error: {_first_line(exc)}") from exc


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    return scrub(text[0]) if text else type(exc).__name__
