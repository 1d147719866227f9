"""Every Python enum of a column mirrors that column's CHECK constraint in the schema."""

from __future__ import annotations

import datetime as dt
import re
from enum import StrEnum
from typing import Any

import psycopg
import pytest

from cronjobs.models import (
    AttemptOutcome,
    Catchup,
    DeliveryStatus,
    Kind,
    NotifyEvent,
    Overlap,
    RunStatus,
    SkipReason,
    TickStatus,
    Trigger,
    dead_unacknowledged,
)

COLUMNS: list[tuple[str, str, type[StrEnum]]] = [
    ("job_definitions", "kind", Kind),
    ("job_definitions", "catchup", Catchup),
    ("job_definitions", "overlap", Overlap),
    ("job_runs", "trigger", Trigger),
    ("job_runs", "status", RunStatus),
    ("job_attempts", "outcome", AttemptOutcome),
    ("job_skips", "reason", SkipReason),
    ("job_ticks", "status", TickStatus),
    ("job_notifications", "event", NotifyEvent),
    ("job_notifications", "status", DeliveryStatus),
]


def _allowed(db: psycopg.Connection[Any], table: str, column: str) -> set[str]:
    """The values the one CHECK constraint on ``table.column`` alone allows."""
    rows = db.execute(
        """SELECT pg_get_constraintdef(c.oid) FROM pg_constraint c
           JOIN pg_attribute a ON a.attrelid = c.conrelid AND a.attnum = ANY (c.conkey)
           WHERE c.contype = 'c' AND c.conrelid = %s::regclass AND a.attname = %s
             AND cardinality(c.conkey) = 1""", (table, column)).fetchall()
    assert len(rows) == 1, f"{table}.{column}: {len(rows)} single-column CHECK constraints"
    definition = rows[0][0]
    assert "ANY (ARRAY[" in definition, definition
    return set(re.findall(r"'([^']*)'::text", definition))


@pytest.mark.parametrize(("table", "column", "enum"), COLUMNS,
                         ids=[f"{t}.{c}" for t, c, _ in COLUMNS])
def test_enum_mirrors_check_constraint(db: psycopg.Connection[Any], table: str, column: str,
                                       enum: type[StrEnum]) -> None:
    assert _allowed(db, table, column) == {member.value for member in enum}


def test_every_in_list_check_has_an_enum(db: psycopg.Connection[Any]) -> None:
    rows = db.execute(
        # (a partition's checks are its table's: job_runs_queue's are job_runs')
        """SELECT c.conrelid::regclass::text, a.attname FROM pg_constraint c
           JOIN pg_attribute a ON a.attrelid = c.conrelid AND a.attnum = ANY (c.conkey)
           JOIN pg_class t ON t.oid = c.conrelid AND NOT t.relispartition
           WHERE c.contype = 'c' AND cardinality(c.conkey) = 1
             AND pg_get_constraintdef(c.oid) LIKE '%%ANY (ARRAY[%%'
             AND c.connamespace = 'public'::regnamespace""").fetchall()
    assert {(t, c) for t, c in rows} == {(t, c) for t, c, _ in COLUMNS}


def test_the_python_rule_of_unacknowledged_dead_runs_is_the_schemas(
        db: psycopg.Connection[Any]) -> None:
    # models.dead_unacknowledged mirrors cronjobs_run_dead_unacknowledged, case by case
    died = dt.datetime(2026, 3, 1, 12, tzinfo=dt.UTC)
    second = dt.timedelta(seconds=1)
    cases = [(status, acked, finished)
             for status in ("dead", "succeeded", "failed", "cancelled")
             for acked in (None, died - second, died, died + second)
             for finished in (died, None)]
    for status, acked, finished in cases:
        row = db.execute("SELECT cronjobs_run_dead_unacknowledged(%s, %s, %s)",
                         (status, acked, finished)).fetchone()
        assert row is not None
        # (SQL's NULL, for a dead run acknowledged but never finished, is false in a WHERE)
        assert bool(row[0]) == dead_unacknowledged(status, acked, finished), (
            status, acked, finished, row[0])
