"""The database's indexes: every foreign key has one, and a heartbeat is a HOT update.
(Runs and attempts have no foreign keys: they move to the history and retire on their own;
the partitions' indexes are the plan tests'.)"""

from __future__ import annotations

import datetime as dt
import uuid
from typing import Any

import psycopg

from cronjobs.db.store import Store

# Foreign keys with no index whose leading columns are the key's columns. A partial index
# counts only when its predicate is "the key IS NOT NULL" (every row a delete looks up).
UNINDEXED_FOREIGN_KEYS = """
SELECT c.conrelid::regclass::text AS tab, c.conname,
       array(SELECT a.attname FROM unnest(c.conkey) AS k (n)
             JOIN pg_attribute AS a ON a.attrelid = c.conrelid AND a.attnum = k.n) AS cols
FROM pg_constraint AS c
WHERE c.contype = 'f' AND c.connamespace = 'public'::regnamespace
  AND NOT EXISTS (
      SELECT 1 FROM pg_index AS i
      WHERE i.indrelid = c.conrelid
        AND (i.indkey::int2[])[0:cardinality(c.conkey) - 1] = c.conkey
        AND (i.indpred IS NULL
             OR pg_get_expr(i.indpred, i.indrelid) = (
                 SELECT '(' || string_agg(quote_ident(a.attname) || ' IS NOT NULL', ' AND ')
                        || ')'
                 FROM unnest(c.conkey) AS k (n)
                 JOIN pg_attribute AS a ON a.attrelid = c.conrelid AND a.attnum = k.n)))
ORDER BY 1, 2
"""


def test_every_foreign_key_has_an_index(db: psycopg.Connection[Any]) -> None:
    keys = {name for (name,) in db.execute(
        "SELECT conname FROM pg_constraint WHERE contype = 'f' "
        "AND connamespace = 'public'::regnamespace")}
    assert keys >= {"job_skips_definition_id_fkey", "job_skips_tick_id_fkey"}
    assert db.execute(UNINDEXED_FOREIGN_KEYS).fetchall() == []


def test_the_check_finds_an_unindexed_key(db: psycopg.Connection[Any]) -> None:
    db.execute("DROP INDEX job_skips_tick_idx")
    db.execute("CREATE INDEX job_skips_tick_other_idx ON job_skips (tick_id) "
               "WHERE reason = 'paused'")
    db.execute("DROP INDEX job_skips_definition_idx")
    assert db.execute(UNINDEXED_FOREIGN_KEYS).fetchall() == [
        ("job_skips", "job_skips_definition_id_fkey", ["definition_id"]),
        ("job_skips", "job_skips_tick_id_fkey", ["tick_id"]),
    ]


def _running_run(db: psycopg.Connection[Any]) -> tuple[int, uuid.UUID]:
    db.execute("INSERT INTO job_definitions (name, schedule, kind, command, cursor_at) "
               "VALUES ('beat', '* * * * *', 'command', 'sleep 60', now())")
    token = uuid.uuid4()
    row = db.execute(
        "INSERT INTO job_runs (definition_id, scheduled_for, trigger, status, max_attempts, "
        "eligible_at, attempt, lease_owner, lease_token, lease_expires_at, heartbeat_at, "
        "started_at) SELECT id, now(), 'manual', 'running', 3, now(), 1, 'w', %s, "
        "now() + interval '1 minute', now(), now() FROM job_definitions RETURNING id",
        (token,)).fetchone()
    assert row is not None
    return int(row[0]), token


def _hot_updates(store: Store) -> tuple[int, int]:
    row = store.conn.execute(
        "SELECT pg_stat_get_xact_tuples_updated('job_runs_queue'::regclass), "
        "pg_stat_get_xact_tuples_hot_updated('job_runs_queue'::regclass)").fetchone()
    assert row is not None
    return int(row[0]), int(row[1])


def test_heartbeats_and_cancel_requests_are_hot_updates(db: psycopg.Connection[Any],
                                                       store: Store) -> None:
    run_id, token = _running_run(db)
    now = store.now()
    with store.transaction(rollback=True):
        for _ in range(5):
            assert store.queue.heartbeat([(run_id, token, dt.timedelta(minutes=1))], now=now) == {
                run_id: False}
        assert store.runs.request_cancel_run(run_id, now=now) is not None
        assert _hot_updates(store) == (6, 6)
    row = db.execute("SELECT reloptions FROM pg_class "
                     "WHERE oid = 'job_runs_queue'::regclass").fetchone()
    assert row is not None and "fillfactor=90" in row[0]
