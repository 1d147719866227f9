"""The health of the storage itself (docs/explanation/storage.md, "Storage health"): a snapshot held
open in another connection is named by `status`, /healthz and /metrics with its pid and
age, and turns `status --check` red past --max-xmin-age; dead rows in the hot queue are
reported from the statistics; the history's oldest partition, its partitions, its size and
the rows in its default partitions are reported, and retention that does not run turns the
check red.

Ages are exact: a status is judged at the database's instant it reports (``now`` in its
JSON), and a transaction's start is its own ``now()``. Statistics are flushed by the session
that wrote them (``pg_stat_force_next_flush()``) before anything reads them."""

from __future__ import annotations

import datetime as dt
import json
from collections.abc import Iterator
from typing import Any

import psycopg
import pytest
from psycopg import IsolationLevel
from starlette.testclient import TestClient

from conftest import Invoke, wait_for
from cronjobs.core.health import status
from cronjobs.core.thresholds import Thresholds
from cronjobs.db.store import Store
from cronjobs.tick import TickOptions, tick
from cronjobs.web.app import create_app
from cronjobs.web.site import Settings

QUERY = "SELECT 1 FROM job_definitions"  # the held transaction's


def _status(cli: Invoke, *args: str) -> tuple[int, dict[str, Any], str]:
    result = cli("status", "--json", *args)
    return result.exit_code, json.loads(result.stdout), result.stderr


def _at(text: str) -> dt.datetime:
    return dt.datetime.fromisoformat(text)


def _samples(text: str) -> dict[str, float]:
    return {line.rsplit(" ", 1)[0]: float(line.rsplit(" ", 1)[1])
            for line in text.splitlines() if line and not line.startswith("#")}


@pytest.fixture
def ticked(db: psycopg.Connection[Any]) -> None:
    """A tick has run (with no job): the rest of the status is well."""
    tick(Store(db), TickOptions(worker="test"))


@pytest.fixture
def holder(database_url: str) -> Iterator[tuple[psycopg.Connection[Any], int, dt.datetime]]:
    """Another connection holding a REPEATABLE READ snapshot open: (connection, its pid, the
    start of its transaction)."""
    conn = psycopg.connect(database_url, application_name="held-snapshot")
    conn.isolation_level = IsolationLevel.REPEATABLE_READ
    row = conn.execute("SELECT pg_backend_pid(), now()").fetchone()
    assert row is not None
    conn.execute(QUERY)  # (its snapshot was taken by the statement before)
    yield conn, int(row[0]), row[1]
    conn.rollback()
    conn.close()


def test_nothing_holds_vacuum_back_and_the_status_excludes_itself(
        cli: Invoke, ticked: None) -> None:
    code, data, stderr = _status(cli, "--check")
    assert code == 0, stderr
    assert data["storage"]["oldest_xmin_holder"] is None
    assert data["storage"]["xmin_holders"] == []
    assert data["warnings"] == []
    assert "xmin holder     none" in cli("status").stdout


def test_a_held_snapshot_is_named_with_its_pid_and_age_and_turns_the_check_red(
        cli: Invoke, db: psycopg.Connection[Any], database_url: str, ticked: None,
        holder: tuple[psycopg.Connection[Any], int, dt.datetime]) -> None:
    _, pid, started = holder
    code, data, stderr = _status(cli, "--check")
    assert code == 0, stderr  # younger than an hour: shown, not a problem
    oldest = data["storage"]["oldest_xmin_holder"]
    assert oldest == data["storage"]["xmin_holders"][0]
    assert len(data["storage"]["xmin_holders"]) == 1
    assert {k: oldest[k] for k in ("kind", "pid", "name", "application_name", "usename",
                                   "state", "query")} == {
        "kind": "session", "pid": pid, "name": None, "application_name": "held-snapshot",
        "usename": db.info.user, "state": "idle in transaction",
        "query": QUERY}
    assert _at(oldest["since"]) == started
    assert oldest["age_seconds"] == round((_at(data["now"]) - started).total_seconds(), 3)
    assert oldest["xid_age"] >= 0
    text = cli("status").stdout
    assert (f"xmin holder     session pid {pid} (application 'held-snapshot', user "
            f"{db.info.user}") in text

    # judged at an instant two hours on: a problem that names it, in the core...
    later = started + dt.timedelta(hours=2)
    verdict = status(Store(db), now=later)
    assert verdict.storage is not None
    where = f"from {oldest['client_addr']}, " if oldest["client_addr"] else ""
    who = f"session pid {pid} (application 'held-snapshot', user {db.info.user}, {where}"
    assert [p for p in verdict.problems if "held back vacuum" in p] == [
        f"{who}idle in transaction) has held back vacuum for 2h00m "
        f"({verdict.storage.holders[0].xid_age} transactions; threshold 60m): {QUERY!r}"]

    # ...and in the command, once the transaction is older than --max-xmin-age
    def db_now() -> dt.datetime:
        row = db.execute("SELECT now()").fetchone()
        assert row is not None
        return row[0]  # type: ignore[no-any-return]

    wait_for(lambda: db_now() - started > dt.timedelta(seconds=1.5),
             "the held transaction to be 1.5 s old")
    red = cli("status", "--check", "--max-xmin-age", "1s")
    assert red.exit_code == 3
    assert f"problem: session pid {pid} (application 'held-snapshot'" in red.stderr
    assert f"threshold 1s): {QUERY!r}" in red.stderr
    assert cli("status", "--check", "--max-xmin-age", "1h").exit_code == 0

    # /healthz with the same threshold: 503, the same problem, the figures
    settings = Settings(conninfo=database_url,
                        thresholds=Thresholds(max_xmin_age=dt.timedelta(seconds=1)))
    with TestClient(create_app(settings), raise_server_exceptions=False) as web:
        answer = web.get("/healthz")
        assert answer.status_code == 503
        body = answer.json()
        assert any(p.startswith(f"session pid {pid} (application 'held-snapshot'")
                   for p in body["problems"])
        assert body["storage"]["oldest_xmin_holder"]["pid"] == pid
        assert body["storage"]["oldest_xmin_holder"]["age_seconds"] == round(
            (_at(body["checked_at"]) - started).total_seconds(), 3)
        metrics = _samples(web.get("/metrics").text)
    info = [k for k in metrics if k.startswith("cronjobs_xmin_holder_info{")]
    assert len(info) == 1
    assert f'pid="{pid}"' in info[0] and 'application_name="held-snapshot"' in info[0]
    assert 'kind="session"' in info[0] and 'state="idle in transaction"' in info[0]
    assert metrics[info[0]] == 1
    assert metrics["cronjobs_xmin_holder_age_seconds"] > 1.5
    assert metrics["cronjobs_xmin_holder_xid_age"] >= 0


def test_the_query_shown_is_cut_at_80_characters(
        cli: Invoke, database_url: str, ticked: None) -> None:
    long_query = "SELECT 1 AS " + "a" * 60 + ", 2 AS " + "b" * 60 + " FROM job_definitions"
    with psycopg.connect(database_url) as conn:
        conn.isolation_level = IsolationLevel.REPEATABLE_READ
        conn.execute(long_query)
        _, data, _ = _status(cli)
        conn.rollback()
    assert data["storage"]["oldest_xmin_holder"]["query"] == long_query[:80]


def test_dead_tuples_of_the_hot_queue_are_reported_and_judged(
        cli: Invoke, db: psycopg.Connection[Any], ticked: None) -> None:
    # (autovacuum off for this test's database's queue: it would clean them at any moment)
    db.execute("ALTER TABLE job_runs_queue SET (autovacuum_enabled = false)")
    db.execute("""
        INSERT INTO job_runs (definition_id, scheduled_for, trigger, max_attempts, eligible_at)
        SELECT 1, timestamptz '2026-01-01' + g * interval '1 minute', 'manual', 1, now()
        FROM generate_series(1, 1500) AS g""")
    db.execute("DELETE FROM job_runs_queue WHERE id % 3 <> 0")  # 1,000 dead, 500 live
    db.execute("SELECT pg_stat_force_next_flush()")
    code, data, stderr = _status(cli, "--check")
    assert code == 0, stderr
    runs, attempts = data["storage"]["hot_tables"]
    assert (runs["table"], runs["live_tuples"], runs["dead_tuples"]) == (
        "job_runs_queue", 500, 1000)
    assert (attempts["table"], attempts["dead_tuples"]) == ("job_attempts_queue", 0)
    assert runs["last_autovacuum"] is None
    assert "job_runs_queue: 500 live, 1000 dead (never autovacuumed)" in cli("status").stdout

    # more than --max-dead-tuples: red, and so is a tenth of it beside 4x fewer live rows
    assert cli("status", "--check", "--max-dead-tuples", "1000").exit_code == 0  # not > 1000
    # 1000 > 150, but not > 4 x 500
    assert cli("status", "--check", "--max-dead-tuples", "1500").exit_code == 0
    db.execute("DELETE FROM job_runs_queue WHERE id % 6 <> 0")  # 1,250 dead, 250 live
    db.execute("SELECT pg_stat_force_next_flush()")
    red = cli("status", "--check", "--max-dead-tuples", "5000")
    assert red.exit_code == 3  # 1250 > 500 and > 4 x 250
    assert ("problem: job_runs_queue: 1250 dead row versions beside 250 live (threshold "
            "5000, or 500 and 4x the live rows); never vacuumed; is autovacuum "
            "running?") in red.stderr
    assert cli("status", "--check", "--max-dead-tuples", "1000").exit_code == 3
    assert cli("status", "--check").exit_code == 0  # the defaults: 100,000 or 10,000

    metrics = _samples(cli("metrics").stdout)
    assert metrics['cronjobs_table_dead_tuples{table="job_runs_queue"}'] == 1250
    assert metrics['cronjobs_table_live_tuples{table="job_runs_queue"}'] == 250
    assert metrics['cronjobs_table_dead_tuples{table="job_attempts_queue"}'] == 0
    assert metrics['cronjobs_table_last_autovacuum_timestamp_seconds{'
                   'table="job_runs_queue"}'] == 0


def _day(db: psycopg.Connection[Any], days_ago: int) -> dt.date:
    row = db.execute("SELECT (now() AT TIME ZONE 'UTC')::date - %s", (days_ago,)).fetchone()
    assert row is not None
    return row[0]  # type: ignore[no-any-return]


def _partition(db: psycopg.Connection[Any], table: str, day: dt.date) -> str:
    name = f"{table}_history_{day:%Y%m%d}"
    after = day + dt.timedelta(days=1)
    db.execute(f"CREATE TABLE {name} PARTITION OF {table}_history "  # (test-made names)
               f"FOR VALUES FROM ('{day} 00:00+00') TO ('{after} 00:00+00')")
    return name


def _history_bytes(db: psycopg.Connection[Any]) -> int:
    row = db.execute(
        "SELECT sum(pg_total_relation_size(relid))::bigint FROM ("
        "SELECT relid FROM pg_partition_tree('job_runs_history') WHERE isleaf UNION ALL "
        "SELECT relid FROM pg_partition_tree('job_attempts_history') WHERE isleaf) AS l"
    ).fetchone()
    assert row is not None
    return int(row[0])


def test_the_oldest_partition_sizes_and_retention_lag(
        cli: Invoke, db: psycopg.Connection[Any], ticked: None) -> None:
    _, before, _ = _status(cli)
    history = before["storage"]["history"]
    day = _day(db, 3)
    runs_day = _partition(db, "job_runs", day)
    _partition(db, "job_attempts", day)
    _partition(db, "job_runs", _day(db, 1))
    db.execute("""
        INSERT INTO job_runs (definition_id, scheduled_for, trigger, status, max_attempts,
                              eligible_at, finished_at, stage, retire_at)
        SELECT 1, timestamptz '2026-01-01' + g * interval '1 minute', 'manual', 'succeeded',
               1, now(), now(), 'history', (%s::date + interval '12 hours') AT TIME ZONE 'UTC'
        FROM generate_series(1, 200) AS g""", (day,))

    code, data, stderr = _status(cli, "--check")
    assert code == 3
    now = _at(data["now"])
    until = dt.datetime.combine(day + dt.timedelta(days=1), dt.time(), dt.UTC)
    lag = now - until  # between 2 and 3 days: the day ended 2 days and some hours ago
    got = data["storage"]["history"]
    assert got["run_partitions"] == history["run_partitions"] + 2
    assert got["attempt_partitions"] == history["attempt_partitions"] + 1
    assert got["oldest_partition"] == runs_day
    assert got["oldest_day"] == day.isoformat()
    assert _at(got["oldest_until"]) == until
    assert got["retention_lag_seconds"] == int(lag.total_seconds())
    assert got["default_partition_rows"] == {"runs": 0, "attempts": 0, "capped_at": 1000}
    sizes = data["storage"]["bytes"]
    assert sizes["history"] == _history_bytes(db)
    assert sizes["history"] > before["storage"]["bytes"]["history"]
    assert sizes["queue"] > 0 and sizes["kept"] > 0
    assert (f"problem: the oldest history partition, {runs_day}, retired "
            f"{lag.days}d ago and is still there (threshold 2d): is the tick's retention "
            "running?") in stderr
    assert cli("status", "--check", "--max-retention-lag", "4d").exit_code == 0
    text = cli("status").stdout
    assert f"day partition(s), oldest {runs_day} (retires by " in text

    metrics = _samples(cli("metrics").stdout)
    assert metrics["cronjobs_history_oldest_partition_end_timestamp_seconds"] == (
        until.timestamp())
    assert metrics['cronjobs_history_partitions{table="job_runs"}'] == got["run_partitions"]
    assert metrics['cronjobs_storage_bytes{stage="history"}'] == sizes["history"]
    assert metrics['cronjobs_history_default_partition_rows{table="job_runs"}'] == 0


def test_rows_in_a_default_partition_warn_then_turn_red_after_a_day(
        cli: Invoke, db: psycopg.Connection[Any], ticked: None) -> None:
    # a finished run whose retirement day has no partition: the default partition holds it
    db.execute("""
        INSERT INTO job_runs (definition_id, scheduled_for, trigger, status, max_attempts,
                              eligible_at, finished_at, stage, retire_at)
        VALUES (1, '2026-01-01', 'manual', 'succeeded', 1, now(), now() - interval '2 hours',
                'history', timestamptz '2999-01-01')""")
    code, data, stderr = _status(cli, "--check")
    assert code == 0, stderr
    assert data["storage"]["history"]["default_partition_rows"]["runs"] == 1
    assert data["warnings"] == [
        "1 run(s) and 0 attempt(s) in the history's default partitions (no partition for "
        "their retirement day)"]
    assert "warnings:\n  - 1 run(s) and 0 attempt(s)" in cli("status").stdout
    db.execute("UPDATE job_runs SET finished_at = now() - interval '26 hours' "
               "WHERE stage = 'history'")
    code, data, stderr = _status(cli, "--check")
    assert code == 3
    assert data["warnings"] == []
    assert ("problem: 1 run(s) and 0 attempt(s) in the history's default partitions (no "
            "partition for their retirement day), the oldest finished 26h00m ago: does the "
            "tick make the history's partitions?") in stderr


def test_healthz_estimates_the_sizes_from_the_catalog(
        db: psycopg.Connection[Any], database_url: str, ticked: None) -> None:
    db.execute("VACUUM job_runs_queue")  # (relpages as of now)
    with TestClient(create_app(Settings(conninfo=database_url)),
                    raise_server_exceptions=False) as web:
        answer = web.get("/healthz")
    assert answer.status_code == 200, answer.text
    sizes = answer.json()["storage"]["bytes"]
    assert sizes["exact"] is False
    row = db.execute(
        "SELECT sum(greatest(c.relpages, 0))::bigint * current_setting('block_size')::bigint "
        "FROM pg_class AS c WHERE c.oid IN (SELECT relid FROM pg_partition_tree('job_runs') "
        "WHERE relid::regclass::text = 'job_runs_queue' UNION ALL SELECT indexrelid "
        "FROM pg_index WHERE indrelid = 'job_runs_queue'::regclass UNION ALL SELECT "
        "reltoastrelid FROM pg_class WHERE oid = 'job_runs_queue'::regclass) "
        "OR c.oid IN (SELECT 'job_attempts_queue'::regclass UNION ALL SELECT indexrelid "
        "FROM pg_index WHERE indrelid = 'job_attempts_queue'::regclass UNION ALL SELECT "
        "reltoastrelid FROM pg_class WHERE oid = 'job_attempts_queue'::regclass)").fetchone()
    assert row is not None
    assert sizes["queue"] == row[0]
