"""SQL lives in one place and every statement has a name."""

import re
from pathlib import Path

import pytest

from cronjobs.db import sql

PACKAGE = Path(__file__).resolve().parents[2] / "cronjobs"


# the only code that runs SQL: the session and the store of each concept on it, each with
# its own file of named statements (session.py: queries/session.sql; stores/queue.py:
# queries/queue.sql, ...)
RUNNERS = {"session": PACKAGE / "db" / "session.py",
           **{path.stem: path for path in sorted((PACKAGE / "db" / "stores").glob("*.py"))
              if path.stem != "__init__"}}


def _used(path: Path) -> set[str]:
    """The names of the statements a module runs (through the session's helpers)."""
    source = path.read_text()
    runs = r"\b_?(?:rows|row|one|values|count|send|binary|later)\(\s*\"([a-z_0-9]+)\""
    used = set(re.findall(runs, source))
    for pair in re.findall(r"\"([a-z_0-9]+)\" if \w+ else \"([a-z_0-9]+)\"", source):
        used |= set(pair)
    return used


def test_every_named_query_is_used_and_every_used_name_exists() -> None:
    names = set(sql.queries())
    used = set().union(*(_used(path) for path in RUNNERS.values()))
    assert used - names == set(), "queries used but not defined"
    assert names - used == set(), "queries defined but never used"


def test_each_concept_runs_exactly_the_statements_of_its_own_file() -> None:
    by_concept = sql.queries_by_concept()
    assert set(by_concept) == set(RUNNERS), "a file of queries without its store, or the reverse"
    for concept, path in RUNNERS.items():
        defined = set(by_concept[concept])
        used = _used(path)
        assert used - defined == set(), f"{path.name} runs statements of another concept"
        assert defined - used == set(), f"queries/{concept}.sql defines statements it never runs"


def test_a_name_defined_in_two_files_is_an_error(tmp_path: Path,
                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "queries").mkdir()
    (tmp_path / "queries" / "a.sql").write_text("-- name: x\nSELECT 1;\n")
    (tmp_path / "queries" / "b.sql").write_text("-- name: x\nSELECT 2;\n")
    monkeypatch.setattr(sql, "_HERE", tmp_path)
    sql.queries_by_concept.cache_clear()
    sql.queries.cache_clear()
    try:
        with pytest.raises(ValueError, match=r"'x' is defined in queries/a\.sql and in "):
            sql.queries()
    finally:
        sql.queries_by_concept.cache_clear()
        sql.queries.cache_clear()


def test_the_claimable_predicate_is_written_once() -> None:
    # a run that waits (queued or failed), is due, and whose job lets it run: the schema's
    # functions (cronjobs_run_waits, cronjobs_run_is_due, cronjobs_job_lets_run), never
    # spelled out again by a query
    for concept, named in sql.queries_by_concept().items():
        for name, statement in named.items():
            flat = re.sub(r"\s+", " ", statement)
            assert "IN ('queued', 'failed')" not in flat, (concept, name)
            assert "paused_until <=" not in flat, (concept, name)


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
