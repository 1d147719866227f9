"""The hot queries keep using their indexes over a large history.

50,000 runs and 2,000 definitions are seeded with SQL; each hot query is planned with
EXPLAIN (FORMAT JSON, never executed) and must read job_runs and job_definitions through
the expected indexes, never with a sequential scan. The claim is planned once before
ANALYZE too: a freshly filled table, before autovacuum has looked at it, must not make
the claim scan the table.
"""

from __future__ import annotations

import datetime as dt
import json
import re
import uuid
from collections.abc import Iterator
from typing import Any

import psycopg
import pytest

from conftest import _create_database, _drop_database
from cronjobs.db import sql

SEED = """
ALTER TABLE job_runs_queue SET (autovacuum_enabled = false);
ALTER TABLE job_runs_history_default SET (autovacuum_enabled = false);
ALTER TABLE job_definitions SET (autovacuum_enabled = false);
-- 2,000 jobs, 20 of them due
INSERT INTO job_definitions (name, schedule, kind, command, cursor_at, next_due_at)
SELECT 'job-' || g, '* * * * *', 'command', 'true', now(),
       now() + CASE WHEN g <= 20 THEN interval '-1 minute' ELSE interval '1 day' END
FROM generate_series(1, 2000) AS g;
-- 50,000 runs: 47,000 finished over the first 100 jobs (every 50th dead) over the last
-- 100 days; 2,000 queued (half not due yet), 500 failed waiting for a retry, 500 running
-- (every 5th lease expired; not exclusive, so that they can run together) over all 2,000
-- jobs, so that a few jobs' unfinished runs are a small part of the queue (which holds
-- the unfinished runs alone)
INSERT INTO job_runs (definition_id, scheduled_for, trigger, status, max_attempts,
                      exclusive, eligible_at, attempt, started_at, finished_at, lease_owner,
                      lease_token, lease_expires_at, heartbeat_at, stage, retire_at)
SELECT 1 + g % CASE WHEN g <= 47000 THEN 100 ELSE 2000 END,
       timestamptz '2026-01-01' + g * interval '1 minute', 'schedule',
       s.status, 3, s.status <> 'running',
       now() + CASE WHEN g % 2 = 0 THEN interval '1 hour' ELSE '-1 hour' END,
       1, now() - interval '1 minute',
       CASE WHEN s.status IN ('succeeded', 'dead')
            THEN now() - interval '100 days' + g * interval '2 minutes' END,
       CASE WHEN s.status = 'running' THEN 'w' END,
       CASE WHEN s.status = 'running' THEN gen_random_uuid() END,
       CASE WHEN s.status = 'running'
            THEN now() + CASE WHEN g % 5 = 0 THEN interval '-1 minute' ELSE '1 minute' END
       END,
       CASE WHEN s.status = 'running' THEN now() END,
       CASE WHEN s.status IN ('succeeded', 'dead') THEN 'history' ELSE 'queue' END,
       CASE WHEN s.status IN ('succeeded', 'dead') THEN now() + interval '14 days' END
FROM generate_series(1, 50000) AS g,
     LATERAL (SELECT CASE WHEN g <= 47000 AND g % 50 = 0 THEN 'dead'
                          WHEN g <= 47000 THEN 'succeeded'
                          WHEN g <= 49000 THEN 'queued'
                          WHEN g <= 49500 THEN 'failed'
                          ELSE 'running' END AS status) AS s;
INSERT INTO job_ticks (worker, tick_at, started_at, status)
SELECT 'w', now() - g * interval '1 minute', now() - g * interval '1 minute', 'finished'
FROM generate_series(1, 5000) AS g;
"""


@pytest.fixture(scope="module")
def seeded(server_url: str, template_name: str
           ) -> Iterator[tuple[psycopg.Connection[Any], tuple[set[str], set[str]],
                               dict[str, tuple[set[str], set[str]]]]]:
    """One seeded database for the module (EXPLAIN changes nothing), the claim's plan
    before ANALYZE, and the plans of every statement of an executor's pass then."""
    name = f"cronjobs_plans_{uuid.uuid4().hex[:10]}"
    url = _create_database(server_url, name, template_name)
    try:
        with psycopg.connect(url, autocommit=True) as conn:
            conn.execute(SEED)
            stats = conn.execute("SELECT last_analyze, last_autoanalyze FROM "
                                 "pg_stat_user_tables WHERE relname = 'job_runs_queue'").fetchone()
            assert stats == (None, None)
            before_analyze = _plan(conn, "claim_runs")
            pass_plans = {name: _plan(conn, name) for name in PASS}
            conn.execute("ANALYZE job_runs, job_definitions, job_ticks")
            yield conn, before_analyze, pass_plans
    finally:
        _drop_database(server_url, name)


def _params(name: str, now: dt.datetime) -> dict[str, Any]:
    """A value for every placeholder of the named query (None for one not known here: an
    optional filter, off). A name followed by [by id] is the query given ids (run_ids)."""
    known: dict[str, Any] = {
        "now": now, "worker": "w", "limit": 10, "scan": 40, "tick_id": None,
        "run_ids": [1, 2, 3] if name.endswith("[by id]") else None,
        "definition_ids": list(range(1, 21)),
        "cutoff": now - dt.timedelta(days=30), "keep_last": 3, "batch": 500,
        "after_at": dt.datetime.min.replace(tzinfo=dt.UTC), "after_id": 0,
        "ids": [1, 2, 3], "tokens": [uuid.uuid4() for _ in range(3)],
        "leases": [dt.timedelta(minutes=1)] * 3, "handlers": [], "since": None,
        "definition_id": None, "count_jobs": True,
    }
    names = re.findall(r"%\((\w+)\)[sb]", sql.query(_query_name(name)))
    return {n: known.get(n) for n in names}


def _query_name(name: str) -> str:
    return name.removesuffix("[by id]")


def _nodes(plan: dict[str, Any]) -> Iterator[dict[str, Any]]:
    yield plan
    for child in plan.get("Plans", []):
        yield from _nodes(child)


# partitions whose size does not grow with the history, which a plan may read whole: the
# kept runs (at most a job's latest success and death, and the dead runs nobody
# acknowledged)
BOUNDED = ("job_runs_kept", "job_attempts_kept")


def _table(relation: str) -> str:
    """The table a relation of a plan belongs to: job_runs and job_attempts for their
    partitions (the queue, the history's days and default), except the bounded ones."""
    if relation in BOUNDED:
        return relation
    for table in ("job_runs", "job_attempts"):
        if relation.startswith(table):
            return table
    return relation


def _plan(conn: psycopg.Connection[Any], name: str) -> tuple[set[str], set[str]]:
    """(the indexes the plan of the named query reads, the tables it scans sequentially)."""
    nodes = _plan_nodes(conn, name)
    indexes = {n["Index Name"] for n in nodes if "Index Name" in n}
    seq = {_table(n["Relation Name"]) for n in nodes if n["Node Type"] == "Seq Scan"}
    return indexes, seq


def _plan_nodes(conn: psycopg.Connection[Any], name: str) -> list[dict[str, Any]]:
    """The nodes of the plan of the named query."""
    now = conn.execute("SELECT now()").fetchone()
    assert now is not None
    with conn.transaction(force_rollback=True):
        if _query_name(name) in (*PASS, "claimable_backlog"):  # as the store runs it
            conn.execute(sql.query("claim_plan"), {"generic": False})
        row = conn.execute(b"EXPLAIN (FORMAT JSON) " + sql.query(_query_name(name)).encode(),
                           _params(name, now[0])).fetchone()
    assert row is not None
    doc = row[0] if isinstance(row[0], list) else json.loads(row[0])
    return list(_nodes(doc[0]["Plan"]))


# the statements of an executor's pass, all planned after claim_plan (Store._pass)
PASS = ("claim_runs", "lock_claimable_groups", "finish_runs", "record_job_failure")

HOT_QUERIES = {
    "due_definitions": {"job_definitions_due_idx"},
    "definitions_due": {"job_definitions_due_idx"},
    "claim_runs": {"job_runs_queue_claim_idx", "job_definitions_pkey"},
    # `trigger --run`: the claim given ids (a plan for them: see QueueStore._claim_later)
    "claim_runs[by id]": {"job_runs_queue_pkey", "job_definitions_pkey"},
    # --concurrency auto: the first entries of the claim's index, as the claim reads them
    "claimable_backlog": {"job_runs_queue_claim_idx", "job_definitions_pkey"},
    "waiting_for_handlers": {"job_runs_queue_definition_idx"},
    "reclaim_expired": {"job_runs_queue_running_idx"},
    "active_runs": {"job_runs_queue_definition_idx"},
    "heartbeat": {"job_runs_queue_pkey"},
    # (the dead runs of the day by job_runs_history_dead_idx, whose copy on a partition
    # PostgreSQL names after its column: the name by finish is taken, hence the 1)
    "health": {"job_runs_queue_running_idx", "job_runs_history_default_finished_at_idx1",
               "job_ticks_started_idx"},
}


def test_the_claim_uses_its_index_before_any_analyze(
        seeded: tuple[psycopg.Connection[Any], tuple[set[str], set[str]],
                      dict[str, tuple[set[str], set[str]]]]) -> None:
    indexes, seq = seeded[1]
    assert "job_runs_queue_claim_idx" in indexes, indexes
    # (each run's job is looked up by its primary key, row by row of the index scan)
    assert "job_runs" not in seq, seq


@pytest.mark.parametrize("name", PASS)
def test_no_statement_of_a_pass_reads_a_table_whole_before_any_analyze(
        seeded: tuple[psycopg.Connection[Any], tuple[set[str], set[str]],
                      dict[str, tuple[set[str], set[str]]]], name: str) -> None:
    # without statistics, the group locks once read the whole queue at every pass
    _, seq = seeded[2][name]
    assert not seq & {"job_runs", "job_definitions", "job_attempts"}, (name, seq)


@pytest.mark.parametrize("name", sorted(HOT_QUERIES))
def test_hot_queries_use_their_indexes(
        seeded: tuple[psycopg.Connection[Any], tuple[set[str], set[str]],
                      dict[str, tuple[set[str], set[str]]]], name: str) -> None:
    indexes, seq = _plan(seeded[0], name)
    assert HOT_QUERIES[name] <= indexes, (name, indexes)
    if name.endswith("[by id]"):
        # its runs by id: the queue's index, if read at all, with the ids as an index
        # condition (PostgreSQL 18 skips to them), never along the queue
        on_queue = [n for n in _plan_nodes(seeded[0], name)
                    if n.get("Index Name") == "job_runs_queue_claim_idx"]
        assert all("id = ANY" in n["Index Cond"] for n in on_queue), on_queue
    # health counts every job, waiting_for_handlers looks at every handler job: reading
    # all of job_definitions is their job; health counts the queue's due runs, and the
    # queue holds the unfinished runs alone (the history is read through its index)
    scanned = {"job_runs", "job_ticks"} | (
        {"job_definitions"} if name not in ("health", "waiting_for_handlers") else set())
    if name == "health":
        seq = seq - {"job_runs"} | {_table(r) for r in _history_scans(seeded[0], name)}
    assert not seq & scanned, (name, seq)


def test_group_usage_reads_the_hot_table_alone(
        seeded: tuple[psycopg.Connection[Any], tuple[set[str], set[str]],
                      dict[str, tuple[set[str], set[str]]]]) -> None:
    # running and due runs live in the queue only: a plan over every partition of the
    # history (even one that never runs) cost the verdict more than the statement itself
    read = {n["Relation Name"] for n in _plan_nodes(seeded[0], "group_usage")
            if "Relation Name" in n}
    assert "job_runs_queue" in read, read
    assert not {r for r in read if r.startswith(("job_runs", "job_attempts"))
                and r != "job_runs_queue"}, read


# the scans of job_definitions, its indexes' included, in the current transaction
DEFINITION_SCANS = """
SELECT pg_stat_get_xact_numscans('job_definitions'::regclass)
       + (SELECT sum(pg_stat_get_xact_numscans(indexrelid)) FROM pg_index
          WHERE indrelid = 'job_definitions'::regclass)
"""


@pytest.mark.parametrize("plan", ["custom", "generic"])
@pytest.mark.parametrize("count_jobs", [True, False])
def test_the_servers_verdict_reads_no_definition_for_a_count(
        seeded: tuple[psycopg.Connection[Any], tuple[set[str], set[str]],
                      dict[str, tuple[set[str], set[str]]]], count_jobs: bool,
        plan: str) -> None:
    # /healthz and the banner show no count of the jobs: with 100,000 jobs counting them
    # cost every verdict 5-10 ms. Without count_jobs the count is never run, whether the
    # statement is planned for its values or once (`cronjobs serve` prepares it).
    conn = seeded[0]
    now = conn.execute("SELECT now()").fetchone()
    assert now is not None
    params = {**_params("health", now[0]), "count_jobs": count_jobs}
    with conn.transaction(force_rollback=True):
        conn.execute(f"SET LOCAL plan_cache_mode = force_{plan}_plan".encode())
        before = conn.execute(DEFINITION_SCANS).fetchone()
        row = conn.execute(sql.query("health"), params, prepare=plan == "generic").fetchone()
        after = conn.execute(DEFINITION_SCANS).fetchone()
    assert row is not None and before is not None and after is not None
    assert row[9] == (2000 if count_jobs else None)  # (the column `jobs`)
    assert (after[0] > before[0]) == count_jobs, (before, after)


def _history_scans(conn: psycopg.Connection[Any], name: str) -> set[str]:
    """The relations other than the queue the plan reads whole."""
    return {n["Relation Name"] for n in _plan_nodes(conn, name)
            if n["Node Type"] == "Seq Scan" and n["Relation Name"].startswith("job_runs")
            and n["Relation Name"] not in ("job_runs_queue", *BOUNDED)}


# What `cronjobs serve` reads: every page from a range of an index, whatever the history.
DASHBOARD_QUERIES: dict[str, tuple[dict[str, Any], set[str]]] = {
    "runs_between": ({"definition_id": 1, "start": dt.datetime(2026, 1, 10, tzinfo=dt.UTC),
                      "end": dt.datetime(2026, 1, 11, tzinfo=dt.UTC)},
                     {"job_runs_queue_definition_idx",
                      "job_runs_history_default_definition_id_scheduled_for_idx"}),
    "dashboard_jobs": ({"after": "job-5", "search": None, "limit": 51, "strip": 20},
                       {"job_definitions_name_key", "job_runs_history_default_definition_id_id_idx",
                        "job_runs_queue_definition_idx"}),
    "job_stats": ({"since": dt.datetime.now(dt.UTC) - dt.timedelta(days=1)},
                  {"job_runs_history_default_finished_at_idx",
                   "job_runs_history_default_definition_id_id_idx",
                   # (the dead runs nobody acknowledged: its partial index)
                   "job_runs_history_default_definition_id_idx"}),
    "recent_runs": ({"definition_id": 1, "limit": 20},
                    {"job_runs_history_default_definition_id_id_idx",
                     "job_runs_queue_definition_idx"}),
    "attempts_of_runs": ({"run_ids": [1, 2, 3]},
                         {"job_attempts_queue_run_attempt_key",
                          "job_attempts_history_default_run_id_attempt_idx"}),
    "run_by_id": ({"id": 1}, {"job_runs_queue_pkey", "job_runs_history_default_id_idx",
                              "job_definitions_pkey"}),
    # the verdict on the jobs (/healthz): the schedules that may be overdue by skipping
    # along their index, then per schedule the range of jobs older than its slot
    "health_schedules": ({"now": dt.datetime.now(dt.UTC)},
                         {"job_definitions_unsucceeded_idx"}),
    "job_problems": ({"now": dt.datetime.now(dt.UTC), "every": False, "cap": 20,
                      "schedules": ["* * * * *"], "timezones": ["UTC"], "names": [None],
                      "befores": [dt.datetime.now(dt.UTC) - dt.timedelta(minutes=1)],
                      "errors": [None]},
                     {"job_definitions_verdict_idx"}),
    # start lateness (status, /metrics, the dashboard): the day's runs by their finish, the
    # running ones by their start
    "start_lateness": ({"now": dt.datetime.now(dt.UTC),
                        "hour": dt.datetime.now(dt.UTC) - dt.timedelta(hours=1),
                        "day": dt.datetime.now(dt.UTC) - dt.timedelta(days=1)},
                       {"job_runs_history_default_finished_at_idx",
                        "job_runs_queue_running_idx"}),
}


@pytest.mark.parametrize("name", sorted(DASHBOARD_QUERIES))
def test_dashboard_queries_use_their_indexes(
        seeded: tuple[psycopg.Connection[Any], tuple[set[str], set[str]],
                      dict[str, tuple[set[str], set[str]]]], name: str) -> None:
    params, expected = DASHBOARD_QUERIES[name]
    row = seeded[0].execute(b"EXPLAIN (FORMAT JSON) " + sql.query(name).encode(),
                            params).fetchone()
    assert row is not None
    doc = row[0] if isinstance(row[0], list) else json.loads(row[0])
    nodes = list(_nodes(doc[0]["Plan"]))
    indexes = {n["Index Name"] for n in nodes if "Index Name" in n}
    # (job_stats counts every job's unfinished runs: the queue, which holds them alone, is
    # its to read whole, as it once read an index of every unfinished run)
    whole = {"job_runs_queue"} if name == "job_stats" else set()
    seq = {_table(n["Relation Name"]) for n in nodes
           if n["Node Type"] == "Seq Scan" and n["Relation Name"] not in whole}
    assert expected <= indexes, (name, indexes)
    assert "job_runs" not in seq and "job_attempts" not in seq, (name, seq)


# "A dead run nobody acknowledged" is one SQL function (schema.sql): the queries call it,
# and so do the partial indexes that hold those runs.
DEAD_UNACKNOWLEDGED = "cronjobs_run_dead_unacknowledged(status, acknowledged_at, finished_at)"


def test_the_unacknowledged_indexes_predicate_is_the_function(
        seeded: tuple[psycopg.Connection[Any], tuple[set[str], set[str]],
                      dict[str, tuple[set[str], set[str]]]]) -> None:
    rows = seeded[0].execute(
        "SELECT c.relname, pg_get_expr(i.indpred, i.indrelid) FROM pg_index AS i "
        "JOIN pg_class AS c ON c.oid = i.indexrelid "
        "WHERE c.relname IN ('job_runs_history_unacknowledged_idx', "
        "'job_runs_kept_unacknowledged_idx', 'job_runs_history_default_definition_id_idx') "
        "ORDER BY 1").fetchall()
    assert rows == [("job_runs_history_default_definition_id_idx", DEAD_UNACKNOWLEDGED),
                    ("job_runs_history_unacknowledged_idx", DEAD_UNACKNOWLEDGED),
                    ("job_runs_kept_unacknowledged_idx", DEAD_UNACKNOWLEDGED)]


@pytest.mark.parametrize("spelled", [False, True])
def test_a_query_calling_the_function_reads_the_unacknowledged_index(
        seeded: tuple[psycopg.Connection[Any], tuple[set[str], set[str]],
                      dict[str, tuple[set[str], set[str]]]], spelled: bool) -> None:
    # PostgreSQL inlines the function in the index's predicate as in the query (both go
    # through eval_const_expressions), so the predicate matches whether the query calls the
    # function or spells its body out: a job's dead runs are read through the index, never
    # along the history
    where = (b"status = 'dead' AND (acknowledged_at IS NULL OR acknowledged_at < finished_at)"
             if spelled else DEAD_UNACKNOWLEDGED.encode())
    row = seeded[0].execute(b"EXPLAIN (FORMAT JSON) SELECT count(*) FROM job_runs_history "
                            b"WHERE definition_id = 50 AND " + where).fetchone()
    assert row is not None
    doc = row[0] if isinstance(row[0], list) else json.loads(row[0])
    nodes = list(_nodes(doc[0]["Plan"]))
    indexes = {n["Index Name"] for n in nodes if "Index Name" in n}
    assert "job_runs_history_default_definition_id_idx" in indexes, indexes
    assert not [n for n in nodes if n["Node Type"] == "Seq Scan"], nodes


def test_acknowledging_a_jobs_dead_runs_reads_the_unacknowledged_index(
        seeded: tuple[psycopg.Connection[Any], tuple[set[str], set[str]],
                      dict[str, tuple[set[str], set[str]]]]) -> None:
    # (job_stats, the dashboard's, reads it too: DASHBOARD_QUERIES)
    params = {"definition_id": 1, "now": dt.datetime.now(dt.UTC), "by": "t"}
    with seeded[0].transaction(force_rollback=True):
        row = seeded[0].execute(b"EXPLAIN (FORMAT JSON) "
                                + sql.query("acknowledge_dead_runs").encode(),
                                params).fetchone()
    assert row is not None
    doc = row[0] if isinstance(row[0], list) else json.loads(row[0])
    indexes = {n["Index Name"] for n in _nodes(doc[0]["Plan"]) if "Index Name" in n}
    assert "job_runs_history_default_definition_id_idx" in indexes, indexes


def _generic_plan(conn: psycopg.Connection[Any], name: str, params: dict[str, Any],
                  types: dict[str, str], *, analyze: bool = False) -> list[dict[str, Any]]:
    """The nodes of the generic plan of the named query (`cronjobs serve` prepares its
    statements and runs the verdict's generic plans): PREPARE with ``types`` per
    placeholder, EXPLAIN EXECUTE under force_generic_plan (``analyze``: run, with the rows
    each node returned)."""
    order: list[str] = []
    for placeholder in re.findall(r"%\((\w+)\)s", sql.query(name)):
        if placeholder not in order:
            order.append(placeholder)
    text = re.sub(r"%\((\w+)\)s", lambda m: f"${order.index(m.group(1)) + 1}",
                  sql.query(name)).replace("%%", "%")
    with conn.transaction(force_rollback=True):
        conn.execute(b"SET LOCAL plan_cache_mode = force_generic_plan")
        conn.execute(f"PREPARE generic_plan ({', '.join(types[n] for n in order)}) AS "
                     f"{text}".encode())
        try:
            row = psycopg.ClientCursor(conn).execute(
                f"EXPLAIN ({'ANALYZE, ' if analyze else ''}FORMAT JSON) EXECUTE generic_plan "
                f"({', '.join(['%s'] * len(order))})".encode(),
                [params[n] for n in order]).fetchone()
        finally:
            conn.execute(b"DEALLOCATE generic_plan")
    assert row is not None
    doc = row[0] if isinstance(row[0], list) else json.loads(row[0])
    return list(_nodes(doc[0]["Plan"]))


@pytest.mark.parametrize("plan", ["custom", "generic"])
def test_the_backlogs_oldest_run_is_the_first_entry_of_the_claim_index(
        seeded: tuple[psycopg.Connection[Any], tuple[set[str], set[str]],
                      dict[str, tuple[set[str], set[str]]]], plan: str) -> None:
    # A min() over the due runs read every one of them (100,000 in a queue nobody claims:
    # 0.1 s of every verdict); the first due entry of each half of the claim's index
    # (backfills apart) is the oldest: an ordered index scan stopped after one row.
    conn = seeded[0]
    now = conn.execute("SELECT now()").fetchone()
    assert now is not None
    params = _params("health", now[0])
    nodes = (_plan_nodes(conn, "health") if plan == "custom" else _generic_plan(
        conn, "health", params, {"now": "timestamptz", "count_jobs": "boolean"}))
    first = [n for n in nodes if n["Node Type"] == "Limit"
             and any(c["Node Type"] == "Index Scan"
                     and c.get("Index Name") == "job_runs_queue_claim_idx"
                     for c in n.get("Plans", []))]
    assert first, [(n["Node Type"], n.get("Index Name")) for n in nodes]


VERDICT_TYPES = {"now": "timestamptz", "every": "boolean", "cap": "integer",
                 "schedules": "text[]", "timezones": "text[]", "names": "text[]",
                 "befores": "timestamptz[]", "errors": "text[]"}


@pytest.mark.parametrize("plan", ["custom", "generic"])
def test_a_verdict_on_many_overdue_jobs_reads_each_once_and_the_listed_again(
        db: psycopg.Connection[Any], plan: str) -> None:
    # 500 every-minute jobs defined an hour ago, never succeeded: all overdue (a queue
    # nobody claims leaves every job so). Each is read once, from its schedule's range of
    # job_definitions_verdict_idx, and only the 20 listed are read again (by id): the
    # verdict once joined every judged job back to its definition, a second read of all
    # of them (and counted and sorted them all through a window: 0.5 s for 100,000).
    jobs = 500
    db.execute("INSERT INTO job_definitions (name, schedule, kind, command, created_at, "
               "schedule_since, cursor_at, next_due_at) "
               "SELECT 'job-' || g, '* * * * *', 'command', 'true', now() - interval '1 hour', "
               "now() - interval '1 hour', now(), now() + interval '1 minute' "
               "FROM generate_series(1, %s) AS g", (jobs,))
    now = db.execute("SELECT now()").fetchone()
    assert now is not None
    before = now[0].replace(second=0, microsecond=0) - dt.timedelta(minutes=1)
    params = {"now": now[0], "every": False, "cap": 20, "schedules": ["* * * * *"],
              "timezones": ["UTC"], "names": [None], "befores": [before], "errors": [None]}
    rows = db.execute(sql.query("job_problems"), params).fetchall()
    assert len(rows) == 20
    assert {row[-1] for row in rows} == {jobs}  # (the column overdue_jobs)
    if plan == "custom":
        row = db.execute(b"EXPLAIN (ANALYZE, FORMAT JSON) " + sql.query("job_problems").encode(),
                         params).fetchone()
        assert row is not None
        doc = row[0] if isinstance(row[0], list) else json.loads(row[0])
        nodes = list(_nodes(doc[0]["Plan"]))
    else:
        nodes = _generic_plan(db, "job_problems", params, VERDICT_TYPES, analyze=True)
    read = sum(n["Actual Rows"] * n["Actual Loops"] for n in nodes
               if n.get("Relation Name") == "job_definitions")
    assert read == jobs + 20, [(n["Node Type"], n.get("Index Name"), n["Actual Rows"],
                                    n["Actual Loops"]) for n in nodes
                                   if n.get("Relation Name") == "job_definitions"]
