"""A row written directly with SQL that the code cannot parse is reported, never fatal."""

from __future__ import annotations

import json
from typing import Any

import psycopg
import pytest
from psycopg import sql

from conftest import Invoke


@pytest.mark.parametrize(
    ("column", "value", "reason"),
    [("schedule", "61 * * * *", "minute"), ("timezone", "Not/AZone", "unknown time zone"),
     ("schedule", "0 0 30 2 *", "never fires")],
)
def test_broken_definition_is_reported(cli: Invoke, db: psycopg.Connection[Any], column: str,
                                       value: str, reason: str) -> None:
    assert cli("define", "good", "0 3 * * *").exit_code == 0
    assert cli("define", "broken", "0 4 * * *").exit_code == 0
    db.execute(sql.SQL("UPDATE job_definitions SET {} = %s WHERE name = 'broken'").format(
        sql.Identifier(column)), (value,))

    listed = cli("list")
    assert listed.exit_code == 0
    assert "good" in listed.stdout
    assert "invalid" in listed.stdout
    assert reason in listed.stdout
    entries = {e["name"]: e for e in json.loads(cli("list", "--json").stdout)}
    assert entries["broken"]["state"] == "invalid"
    assert reason in entries["broken"]["invalid_reason"]
    assert entries["good"]["state"] == "active"

    described = cli("describe", "broken")
    assert described.exit_code == 0
    assert "cannot be evaluated" in described.stdout

    nxt = cli("next", "broken")
    assert nxt.exit_code == 2
    assert "cannot be evaluated" in nxt.stderr

    # Defining it again with a valid schedule repairs it.
    repaired = json.loads(cli("define", "broken", "0 4 * * *", "--json").stdout)
    assert repaired["outcome"] == "updated"
    assert repaired["job"]["state"] == "active"
