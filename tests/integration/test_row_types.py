"""Rows are frozen dataclasses built by psycopg's ``class_row``: the classes read with
``SELECT *`` must have exactly the table's columns (a column added by a migration needs
its field, or every query of that table fails)."""

from __future__ import annotations

import dataclasses
from typing import Any

import psycopg
import pytest

from cronjobs.models import Definition, Run
from cronjobs.reports import Attempt, Skip

TABLES = [("job_definitions", Definition), ("job_runs", Run), ("job_attempts", Attempt),
          ("job_skips", Skip)]


@pytest.mark.parametrize(("table", "cls"), TABLES)
def test_row_class_has_the_tables_columns(db: psycopg.Connection[Any], table: str,
                                          cls: type[Any]) -> None:
    columns = {row[0] for row in db.execute(
        "SELECT attname FROM pg_attribute WHERE attrelid = %s::regclass AND attnum > 0 "
        "AND NOT attisdropped", (table,))}
    assert {f.name for f in dataclasses.fields(cls)} == columns
    assert cls.__dataclass_params__.frozen  # type: ignore[attr-defined]
