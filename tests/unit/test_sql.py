"""SQL lives in one place and every statement has a name."""

import re
from pathlib import Path

import pytest

from cronjobs.db import sql

PACKAGE = Path(__file__).resolve().parents[2] / "cronjobs"


def test_every_named_query_is_used_and_every_used_name_exists() -> None:
    # the only code that runs SQL: the session and the stores of each concept on it
    files = [PACKAGE / "db" / "session.py", *sorted((PACKAGE / "db" / "stores").glob("*.py"))]
    source = "\n".join(path.read_text() for path in files)
    names = set(sql.queries())
    runs = r"\b_?(?:rows|row|one|values|count|send|binary|later)\(\s*\"([a-z_0-9]+)\""
    used = set(re.findall(runs, source))
    for pair in re.findall(r"\"([a-z_0-9]+)\" if \w+ else \"([a-z_0-9]+)\"", source):
        used |= set(pair)
    assert used - names == set(), "queries used but not defined"
    assert names - used == set(), "queries defined but never used"


def test_no_sql_outside_the_store() -> None:
    for path in PACKAGE.rglob("*.py"):
        if path.name in {"session.py", "embedded.py", "sql.py"}:
            continue
        text = path.read_text()
        assert not re.search(r"\.execute\(", text), f"{path.name} runs SQL"


def test_parse_queries_rejects_duplicates_and_empty() -> None:
    with pytest.raises(ValueError, match="twice"):
        sql.parse_queries("-- name: a\nSELECT 1;\n-- name: a\nSELECT 2;\n")
    with pytest.raises(ValueError, match="empty"):
        sql.parse_queries("-- name: a\n\n-- name: b\nSELECT 1;\n")


def test_migrations_are_numbered_and_schema_is_current() -> None:
    migrations = sql.migrations()
    assert [m.version for m in migrations] == list(range(1, len(migrations) + 1))
    version = sql.current_version()
    assert f"VALUES ({version}, " in sql.schema()
