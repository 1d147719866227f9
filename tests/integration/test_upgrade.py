"""The upgrade to schema version 11 (a hot queue and a partitioned history), online: a
database made by the older migrations, with history and waiting runs, is migrated while
ticks keep running. Nothing is lost, nothing runs twice, and the result is the schema a new
database gets."""

from __future__ import annotations

import subprocess
import sys
import time

import psycopg

from conftest import count
from cronjobs.db import sql
from cronjobs.db.store import Store

HISTORY = 12_000  # finished runs of the old tables (3 batches of 5,000 at most)
WAITING = 30  # runs due when the upgrade starts
BATCH = 4_000

SEED = """
INSERT INTO job_definitions (name, schedule, kind, command, cursor_at, next_due_at,
                             overlap)
SELECT 'job-' || g, '0 0 1 1 *', 'command', 'true', now(), now() + interval '1 year', 'allow'
FROM generate_series(1, 3) AS g;
INSERT INTO job_runs (definition_id, scheduled_for, trigger, status, max_attempts,
                      eligible_at, attempt, started_at, finished_at)
SELECT 1 + g % 3, now() - g * interval '1 minute', 'schedule',
       CASE WHEN g % 100 = 0 THEN 'dead' ELSE 'succeeded' END, 1,
       now() - g * interval '1 minute', 1, now() - g * interval '1 minute',
       now() - g * interval '1 minute' + interval '1 second'
FROM generate_series(1, %(history)s) AS g;
INSERT INTO job_attempts (run_id, attempt, worker, lease_token, started_at, finished_at,
                          outcome)
SELECT id, 1, 'old', gen_random_uuid(), started_at, finished_at,
       CASE WHEN status = 'dead' THEN 'failed' ELSE 'succeeded' END FROM job_runs;
INSERT INTO job_runs (definition_id, scheduled_for, trigger, max_attempts, eligible_at)
SELECT 1 + g % 3, now() + g * interval '1 minute', 'manual', 3, now() - interval '1 second'
FROM generate_series(1, %(waiting)s) AS g;
"""

UPGRADE = (
    "import sys, psycopg\n"
    "from cronjobs.db.store import Store\n"
    "from cronjobs.core.upgrade import migrate_and_upgrade\n"
    "done = migrate_and_upgrade(Store(psycopg.connect(sys.argv[1], autocommit=True)),\n"
    f"                           batch={BATCH})\n"
    "u = done.upgrade\n"
    "print(done.migration.from_version, done.migration.to_version, u.moved, u.batches,\n"
    "      u.dropped)\n")


def _version_10(url: str) -> None:
    """The database as cronjobs made it before version 11, with its history."""
    with psycopg.connect(url, autocommit=True) as conn:
        store = Store(conn)
        with store.transaction():
            for migration in sql.migrations()[:10]:
                store.run_script(migration.sql)
                if migration.version != 1:
                    store.schema.record_migration(migration.version, migration.name)
            store.schema.record_migration(1, "initial")
        conn.execute(SEED.replace('%(history)s', str(HISTORY))
                     .replace('%(waiting)s', str(WAITING)).encode())


def test_an_online_upgrade_loses_nothing_and_runs_nothing_twice(
        empty_database_url: str) -> None:
    _version_10(empty_database_url)
    url = empty_database_url
    with psycopg.connect(url, autocommit=True) as conn:
        before = conn.execute("SELECT id, status, finished_at FROM job_runs ORDER BY id"
                              ).fetchall()
        attempts_before = count(conn, "job_attempts")
    # ticks keep trying from before the upgrade until after it: refused (exit 2, one
    # line, "run `cronjobs migrate`") while the schema is older, then running the waiting
    # runs while the old history moves
    ticker = subprocess.Popen(
        ["bash", "-c", f"for i in $(seq 1 400); do {sys.executable} -m cronjobs "
         f"--database-url '{url}' tick --concurrency 8 --max-runtime 5; sleep 0.05; done"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    time.sleep(1.0)
    upgrade = subprocess.run([sys.executable, "-c", UPGRADE, url], capture_output=True,
                             text=True, timeout=300, check=False)
    assert upgrade.returncode == 0, upgrade.stderr
    from_version, to_version, moved, batches, dropped = upgrade.stdout.split()
    assert (int(from_version), int(to_version)) == (10, sql.current_version())
    assert int(moved) == HISTORY and int(batches) == 3 and dropped == "True"
    with psycopg.connect(url, autocommit=True) as conn:
        deadline = time.monotonic() + 120
        while count(conn, "job_runs_queue") and time.monotonic() < deadline:
            time.sleep(0.2)
        ticker.terminate()
        _, err = ticker.communicate(timeout=60)
        refusals = {line for line in err.splitlines() if "cronjobs migrate" in line}
        assert all(f"needs version {sql.current_version()}" in line for line in refusals), (
            refusals)
        # every run of before is there, as it was; the waiting ones ran once each
        after = conn.execute("SELECT id, status, finished_at FROM job_runs "
                             "WHERE id <= %s ORDER BY id", (before[-1][0],)).fetchall()
        assert after[:HISTORY] == before[:HISTORY]
        assert conn.execute(
            "SELECT status, attempt, count(*) FROM job_runs WHERE trigger = 'manual' "
            "GROUP BY 1, 2").fetchall() == [("succeeded", 1, WAITING)]
        assert conn.execute("SELECT count(*), count(DISTINCT run_id) FROM job_attempts "
                            "WHERE worker <> 'old'").fetchone() == (WAITING, WAITING)
        assert count(conn, "job_attempts") == attempts_before + WAITING
        # the old history sits in the day partitions, kept one retention from the upgrade
        assert conn.execute("SELECT stage, count(*) FROM job_runs GROUP BY 1").fetchall() == [
            ("history", HISTORY + WAITING)]
        assert conn.execute("SELECT count(*) FROM job_runs_history_default").fetchone() == (0,)
        assert conn.execute("SELECT to_regclass('job_runs_legacy'), "
                            "to_regclass('job_attempts_legacy')").fetchone() == (None, None)
        # new runs continue the old ids
        assert min(r[0] for r in conn.execute(
            "SELECT id FROM job_runs WHERE trigger = 'manual'")) == HISTORY + 1
    # and a second migrate has nothing left to do
    again = subprocess.run([sys.executable, "-m", "cronjobs", "--database-url", url,
                            "migrate", "--json"], capture_output=True, text=True, timeout=60,
                           check=False)
    assert again.returncode == 0, again.stderr
    assert '"applied": []' in again.stdout and '"upgrade"' not in again.stdout


def test_an_interrupted_upgrade_goes_on_at_the_next_migrate(empty_database_url: str) -> None:
    _version_10(empty_database_url)
    url = empty_database_url
    with psycopg.connect(url, autocommit=True) as conn:
        store = Store(conn)
        from cronjobs.db.migrate import migrate
        migrate(store)  # the structural part alone, as if the process died right after it
        assert store.schema.legacy_rows() is not None
        assert conn.execute("SELECT stage, count(*) FROM job_runs GROUP BY 1 ORDER BY 1"
                            ).fetchall() == [("legacy", HISTORY), ("queue", WAITING)]
        # readers see every run meanwhile
        assert count(conn, "job_runs") == HISTORY + WAITING
    result = subprocess.run([sys.executable, "-m", "cronjobs", "--database-url", url,
                             "migrate"], capture_output=True, text=True, timeout=300,
                            check=False)
    assert result.returncode == 0, result.stderr
    assert f"moved {HISTORY} runs of the old history" in result.stdout
    with psycopg.connect(url, autocommit=True) as conn:
        assert conn.execute("SELECT stage, count(*) FROM job_runs GROUP BY 1 ORDER BY 1"
                            ).fetchall() == [("history", HISTORY), ("queue", WAITING)]
