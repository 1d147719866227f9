"""The claim is a range scan of job_runs_queue_claim_idx bounded by the batch, whatever the
length of the queue and whether or not the table was ever analysed.

A large backlog is seeded with SQL into a table that autovacuum may not touch (so no
statistics exist unless the test takes them), the claim is run under EXPLAIN ANALYZE as the
store runs it (claim_plan first, in a transaction that is rolled back), and its plan must
read the queue only through a Limit over an Index Scan of job_runs_queue_claim_idx that returned
at most the batch's candidates: no Sort, Seq Scan or bitmap scan of job_runs anywhere.
"""

from __future__ import annotations

import datetime as dt
import json
import re
from collections.abc import Iterator
from typing import Any

import psycopg
import pytest

from cronjobs.db import sql
from cronjobs.db.store import Store
from cronjobs.db.stores.queue import claim_scan
from cronjobs.models import AttemptOutcome, Outcome, RunStatus

SEED = """
ALTER TABLE job_runs_queue SET (autovacuum_enabled = false);
ALTER TABLE job_runs_history_default SET (autovacuum_enabled = false);
ALTER TABLE job_definitions SET (autovacuum_enabled = false);
INSERT INTO job_definitions (name, schedule, kind, handler, command, overlap, cursor_at,
                             next_due_at)
SELECT 'job-' || g, '0 0 1 1 *', CASE WHEN g % 2 = 0 THEN 'handler' ELSE 'command' END,
       CASE WHEN g % 2 = 0 THEN 'noop' END, CASE WHEN g % 2 = 1 THEN 'true' END,
       CASE WHEN g % 3 = 0 THEN 'skip' ELSE 'allow' END, now(), now() + interval '1 year'
FROM generate_series(1, 200) AS g;
-- the history: finished runs
INSERT INTO job_runs (definition_id, scheduled_for, trigger, status, max_attempts, exclusive,
                      eligible_at, attempt, started_at, finished_at, stage, retire_at)
SELECT 1 + g % 200, timestamptz '2020-01-01' + g * interval '1 minute', 'schedule',
       'succeeded', 1, false, now() - interval '1 day', 1, now() - interval '1 day',
       now() - interval '1 day', 'history', now() + interval '13 days'
FROM generate_series(1, %(history)s) AS g;
-- the queue: scheduled and backfilled runs, some exclusive, a tenth not due yet
INSERT INTO job_runs (definition_id, scheduled_for, trigger, max_attempts, exclusive,
                      eligible_at)
SELECT 1 + g % 200, timestamptz '2021-01-01' + g * interval '1 minute',
       CASE WHEN g % 4 = 0 THEN 'schedule' ELSE 'backfill' END, 3, (1 + g % 200) % 3 = 0,
       now() + CASE WHEN g % 10 = 0 THEN interval '1 hour' ELSE interval '-1 second' END
FROM generate_series(1, %(queued)s) AS g;
"""


@pytest.fixture
def backlog(database_url: str, request: pytest.FixtureRequest
            ) -> Iterator[psycopg.Connection[Any]]:
    queued, history, analyse = request.param
    with psycopg.connect(database_url, autocommit=True) as conn:
        conn.execute(SEED.replace("%(history)s", str(history))
                     .replace("%(queued)s", str(queued)).encode())
        if analyse:
            conn.execute("ANALYZE job_runs, job_definitions")
        else:
            row = conn.execute("SELECT last_analyze, last_autoanalyze FROM pg_stat_user_tables "
                               "WHERE relname = 'job_runs_queue'").fetchone()
            assert row == (None, None)
        yield conn


# the queue's shapes: a long queue, or a short one beside a long history; analysed or never
BACKLOGS = pytest.mark.parametrize(
    "backlog",
    [(100_000, 0, False), (100_000, 0, True), (100, 100_000, False), (100, 100_000, True)],
    ids=["100k-queued-unanalysed", "100k-queued-analysed", "100-queued-100k-history-unanalysed",
         "100-queued-100k-history-analysed"],
    indirect=True)


def _nodes(plan: dict[str, Any]) -> Iterator[dict[str, Any]]:
    yield plan
    for child in plan.get("Plans", []):
        yield from _nodes(child)


@BACKLOGS
@pytest.mark.parametrize("handlers", [["noop"], []], ids=["handlers", "commands-only"])
def test_the_claim_is_a_range_scan_bounded_by_the_batch(
        backlog: psycopg.Connection[Any], handlers: list[str]) -> None:
    limit = 10
    query = sql.query("claim_runs")
    now = backlog.execute("SELECT now()").fetchone()
    assert now is not None
    params = {"now": now[0], "worker": "w", "limit": limit, "scan": claim_scan(limit),
              "tick_id": None, "handlers": handlers, "run_ids": None,
              "from_late": None, "from_at": None, "from_id": None}  # (from the front)
    assert set(re.findall(r"%\((\w+)\)s", query)) == set(params)
    with backlog.transaction(force_rollback=True):
        backlog.execute(sql.query("claim_plan"), {"generic": False})
        row = backlog.execute(b"EXPLAIN (ANALYZE, FORMAT JSON) " + query.encode(),
                              params).fetchone()
        claimed = backlog.execute("SELECT count(*) FROM job_runs WHERE status = 'running'"
                                  ).fetchone()
    assert row is not None and claimed is not None
    assert claimed[0] == limit  # (it claimed for real, then was rolled back)
    doc = row[0] if isinstance(row[0], list) else json.loads(row[0])
    _assert_a_bounded_range_scan(list(_nodes(doc[0]["Plan"])), limit, _queue_length(backlog))
    # never compiled first: the claim takes a millisecond, compiling it seconds
    assert "JIT" not in doc[0]


@BACKLOGS
def test_the_prepared_claim_is_a_range_scan_bounded_by_the_batch_in_its_generic_plan(
        backlog: psycopg.Connection[Any]) -> None:
    # On a connection that allows prepared statements, the executor's claim is one, planned
    # once for every later execution (a generic plan: the instant, the batch and the
    # handlers unknown; claim_plan asks for it). Its plan, as executed, comes back as a
    # notice from auto_explain.
    limit = 10
    plans: list[dict[str, Any]] = []

    def explained(diag: psycopg.errors.Diagnostic) -> None:
        text = diag.message_primary or ""
        if "plan:" in text:
            plans.append(json.loads(text.split("plan:", 1)[1]))

    backlog.add_notice_handler(explained)
    backlog.prepare_threshold = 2**31  # as connect() sets it: prepared when asked
    backlog.execute("LOAD 'auto_explain'")
    for setting in ("auto_explain.log_min_duration = 0",
                    "auto_explain.log_analyze = on", "auto_explain.log_format = json",
                    "auto_explain.log_level = notice"):
        backlog.execute(f"SET {setting}".encode())
    store = Store(backlog)
    now = store.now()
    with backlog.transaction(force_rollback=True):
        for _ in range(2):  # prepared at the first; the second runs the cached plan
            plans.clear()
            claimed = store.queue.claim_runs(now=now, worker="w", limit=limit, tick_id=None,
                                       handlers=["noop"])
            assert len(claimed) == limit
        # (looked at before the rollback, after which psycopg forgets its statements)
        prepared = backlog.execute("SELECT count(*) FROM pg_prepared_statements "
                                   "WHERE statement LIKE '%candidates AS (%' "
                                   "AND generic_plans = 2 AND custom_plans = 0").fetchone()
    assert prepared == (1,)
    claims = [p for p in plans if "candidates AS (" in p["Query Text"]
              and "pg_prepared_statements" not in p["Query Text"]]
    assert len(claims) == 1
    _assert_a_bounded_range_scan(list(_nodes(claims[0]["Plan"])), limit,
                                 _queue_length(backlog))
    assert "JIT" not in claims[0]


@BACKLOGS
@pytest.mark.parametrize("in_a_pass", [False, True], ids=["alone", "in-a-pass"])
def test_a_claim_by_id_finds_its_runs_by_id(
        backlog: psycopg.Connection[Any], in_a_pass: bool) -> None:
    # `trigger --run`: the same claim, given ids, on a connection that prepares statements
    # (where the scheduled claim is planned generic: a generic plan, knowing no ids, would
    # look for them along the queue), alone or in a pass of the executor (whose other
    # statements are prepared). Its plan, as executed, comes back from auto_explain.
    plans = _explaining(backlog)
    store = Store(backlog)
    now = store.now()
    # the last due runs of the queue, each of a job that lets it run beside others
    ids = [row[0] for row in backlog.execute(
        "SELECT id FROM job_runs WHERE status = 'queued' AND eligible_at <= %s "
        "AND NOT exclusive ORDER BY id DESC LIMIT 3", (now,)).fetchall()]
    assert len(ids) == 3
    queued = backlog.execute("SELECT count(*) FROM job_runs WHERE status = 'queued'").fetchone()
    assert queued is not None
    with backlog.transaction(force_rollback=True):
        if in_a_pass:
            _, _, claimed = store.queue.pass_of_executor(
                [], [], now=now, worker="w", limit=10, tick_id=None, run_ids=ids,
                handlers=["noop"])
        else:
            claimed = store.queue.claim_runs(now=now, worker="w", limit=10, tick_id=None,
                                             run_ids=ids, handlers=["noop"])
    assert sorted(c.id for c in claimed) == sorted(ids)
    claims = [p for p in plans if "candidates AS (" in p["Query Text"]]
    assert len(claims) == 1
    nodes = list(_nodes(claims[0]["Plan"]))
    if (length := _queue_length(backlog)) < SHORT_QUEUE:
        _assert_the_history_unread(nodes, length)
        return
    on_runs = [n for n in nodes if n.get("Relation Name") == "job_runs_queue"]
    assert {n["Node Type"] for n in on_runs} <= {"Index Scan", "Index Only Scan", "ModifyTable"}
    # the candidates: the given runs, found by their ids in an index (the primary key, or
    # the queue's own index, whose entries hold the id, when the planner finds that cheaper:
    # a short queue, or PostgreSQL 18's skip scan), never by reading the queue: the pages
    # the lookup touches do not grow with it
    (scan,) = [n for n in on_runs
               if "eligible_at" in n.get("Index Cond", "") + n.get("Filter", "")]
    assert "id = ANY" in scan["Index Cond"], scan
    assert scan["Actual Rows"] == len(ids)
    pages = scan["Shared Hit Blocks"] + scan["Shared Read Blocks"]
    assert pages < 100, (queued[0], pages, scan)
    # anything else read of job_runs: by primary key, and the running runs
    assert {n.get("Index Name") for n in on_runs
            if n["Node Type"] != "ModifyTable" and n is not scan} <= {
        "job_runs_queue_pkey", "job_runs_queue_exclusive_running_key",
        "job_runs_queue_running_idx"}, on_runs
    assert "JIT" not in claims[0]


# the queue's shapes of BACKLOGS, and one as a drain sees it: a few thousand runs, analysed
# (a small table, which the planner would rather merge with the outcomes whole)
PASS_BACKLOGS = pytest.mark.parametrize(
    "backlog",
    [(100_000, 0, False), (100_000, 0, True), (100, 100_000, False), (100, 100_000, True),
     (5_000, 0, True)],
    ids=["100k-queued-unanalysed", "100k-queued-analysed", "100-queued-100k-history-unanalysed",
         "100-queued-100k-history-analysed", "5k-queued-analysed"],
    indirect=True)


@PASS_BACKLOGS
@pytest.mark.parametrize("prepared", [True, False], ids=["prepared", "not-prepared"])
def test_a_pass_records_its_outcomes_by_primary_key(backlog: psycopg.Connection[Any],
                                                    prepared: bool) -> None:
    # A pass of the executor: the outcomes of the runs it holds (one of them failed: its
    # failure is counted), then the next claim, some of whose jobs are in a limited group
    # (so the group locks and the group's room are looked up). On a connection that
    # prepares statements, in the generic plans claim_plan asks for; on one that does not
    # (through a transaction pooler), planned at each execution. Nothing in it reads
    # job_runs but through an index condition (the ids, the lease, the claim's bound) or an
    # index of the running runs alone (as many as run at once), a few batches of rows at
    # most, however long the queue and the history: a pass that read the whole primary key
    # to find its runs (a merge join with the outcomes), or the whole queue to find the
    # groups with due runs, would make a drain quadratic.
    limit = 10
    backlog.execute("INSERT INTO job_groups (name, max_running) VALUES ('limited', 1000)")
    backlog.execute("UPDATE job_definitions SET group_name = 'limited' WHERE id <= 20")
    plans = _explaining(backlog)
    if not prepared:
        backlog.prepare_threshold = None
    store = Store(backlog)
    now = store.now()
    with backlog.transaction(force_rollback=True):
        held = store.queue.claim_runs(now=now, worker="w", limit=limit, tick_id=None,
                                      handlers=["noop"])
        for _ in range(2):  # prepared at the first; the second runs the cached plans
            assert len(held) == limit
            outcomes = [Outcome(run_id=c.id, token=c.lease_token,
                                status=RunStatus.DEAD if i == 0 else RunStatus.SUCCEEDED,
                                outcome=AttemptOutcome.FAILED if i == 0
                                else AttemptOutcome.SUCCEEDED, exit_code=None,
                                error=None, output_tail=None, result=None)
                        for i, c in enumerate(held)]
            plans.clear()
            recorded, failures, held = store.queue.pass_of_executor(
                outcomes, outcomes[:1], now=now, worker="w", limit=limit, tick_id=None,
                handlers=["noop"])
            assert len(recorded) == limit and len(failures) == 1
    statements = [p for p in plans
                  if any(n.get("Relation Name") == "job_runs_queue" for n in _nodes(p["Plan"]))]
    # (the failure, the outcomes, the group locks, the claim)
    assert len(statements) == 4, [p["Query Text"][:80] for p in statements]
    if (length := _queue_length(backlog)) < SHORT_QUEUE:
        for plan in plans:
            _assert_the_history_unread(list(_nodes(plan["Plan"])), length)
        return
    for plan in statements:
        for node in _nodes(plan["Plan"]):
            if node.get("Relation Name") != "job_runs_queue" or node["Node Type"] == "ModifyTable":
                continue
            read = (plan["Query Text"][:100], node["Node Type"], node.get("Index Name"),
                    node.get("Index Cond"), node["Actual Rows"])
            assert node["Node Type"] in ("Index Scan", "Index Only Scan"), read
            assert "Index Cond" in node or node["Index Name"] in RUNNING_ONLY, read
            assert node["Actual Rows"] <= FEW_BATCHES, read


@PASS_BACKLOGS
def test_a_heartbeat_finds_its_runs_by_primary_key(backlog: psycopg.Connection[Any]) -> None:
    # The leases of a wide executor (64 handler threads), extended in one statement: the
    # runs are found by id in the primary key, never by reading the table (which the
    # planner would rather do for a few thousand runs, joining the leases to all of them).
    # (each in its own transaction, as the executor sends them: the claim's planner
    # settings end with the claim)
    plans = _explaining(backlog)
    store = Store(backlog)
    now = store.now()
    held = store.queue.claim_runs(now=now, worker="w", limit=64, tick_id=None,
                                  handlers=["noop"])
    assert len(held) >= 50  # (at most one exclusive run per job)
    plans.clear()
    extended = store.queue.heartbeat(
        [(c.id, c.lease_token, dt.timedelta(minutes=1)) for c in held], now=now)
    assert set(extended) == {c.id for c in held}
    (plan,) = plans
    if (length := _queue_length(backlog)) < SHORT_QUEUE:
        _assert_the_history_unread(list(_nodes(plan["Plan"])), length)
        return
    reads = [n for n in _nodes(plan["Plan"])
             if n.get("Relation Name") == "job_runs_queue" and n["Node Type"] != "ModifyTable"]
    assert reads
    for node in reads:
        # (an index scan, or a bitmap of one: each probe of the primary key, by id)
        probe = node["Plans"][0] if node["Node Type"] == "Bitmap Heap Scan" else node
        read = (node["Node Type"], probe.get("Index Name"), probe.get("Index Cond"),
                node["Actual Rows"])
        assert probe["Node Type"] in ("Index Scan", "Bitmap Index Scan"), read
        assert probe["Index Name"] == "job_runs_queue_pkey" and "Index Cond" in probe, read
        assert node["Actual Rows"] <= len(held), read


# what one read of job_runs in a pass returns at most (the claim reads its batch + 2, the
# group locks the queue up to a due run of each group), where the queue holds 100,000
FEW_BATCHES = 100
# the partial indexes of the running runs alone: as many entries as run at once
RUNNING_ONLY = ("job_runs_queue_running_idx", "job_runs_queue_exclusive_running_key")


def _explaining(conn: psycopg.Connection[Any]) -> list[dict[str, Any]]:
    """The plans, as executed, of what runs on ``conn`` from now on (auto_explain's notices,
    with the pages touched), on a connection that prepares statements as connect() sets it
    (when a call asks)."""
    plans: list[dict[str, Any]] = []

    def explained(diag: psycopg.errors.Diagnostic) -> None:
        text = diag.message_primary or ""
        if "plan:" in text:
            plans.append(json.loads(text.split("plan:", 1)[1]))

    conn.add_notice_handler(explained)
    conn.prepare_threshold = 2**31
    conn.execute("LOAD 'auto_explain'")
    for setting in ("auto_explain.log_min_duration = 0",
                    "auto_explain.log_analyze = on", "auto_explain.log_format = json",
                    "auto_explain.log_level = notice", "auto_explain.log_buffers = on"):
        conn.execute(f"SET {setting}".encode())
    return plans


# A queue this short (the runs not finished yet: the history lives in its own partitions)
# may be read whole when the planner finds that cheaper: it is the queue's own length that
# bounds what is read, and a read of the queue can never reach the history.
SHORT_QUEUE = 1000


def _queue_length(conn: psycopg.Connection[Any]) -> int:
    row = conn.execute("SELECT count(*) FROM job_runs_queue").fetchone()
    assert row is not None
    return int(row[0])


def _assert_the_history_unread(nodes: list[dict[str, Any]], queued: int) -> None:
    """A statement on a short queue: it reads no partition of the history, and nothing it
    reads of the queue returns more than the queue holds."""
    for node in nodes:
        relation = node.get("Relation Name", "")
        if node["Node Type"] == "ModifyTable":
            continue  # (a finish inserts into job_runs, which routes to the history)
        assert not relation.startswith(("job_runs_history", "job_runs_kept",
                                        "job_attempts_history", "job_attempts_kept")), node
        if relation == "job_runs_queue":
            assert node["Actual Rows"] <= queued, node


def _assert_a_bounded_range_scan(nodes: list[dict[str, Any]], limit: int,
                                 queued: int = SHORT_QUEUE) -> None:
    if queued < SHORT_QUEUE:
        _assert_the_history_unread(nodes, queued)
        return
    # nothing reads job_runs but through the claim's index, its primary key, and (to see
    # whether an exclusive candidate's job is running) an index of the running runs alone;
    # nothing sorts or scans it
    on_runs = [n for n in nodes if n.get("Relation Name") == "job_runs_queue"]
    assert {n["Node Type"] for n in on_runs} <= {"Index Scan", "Index Only Scan", "ModifyTable"}
    assert {n.get("Index Name") for n in on_runs if n["Node Type"] != "ModifyTable"} <= {
        "job_runs_queue_claim_idx", "job_runs_queue_pkey", "job_runs_queue_exclusive_running_key",
        "job_runs_queue_running_idx"}, on_runs

    # the candidates: Limit -> LockRows -> Index Scan on job_runs_queue_claim_idx, returning at
    # most the scan's bound (the queue's length plays no part)
    scans = [n for n in nodes if n.get("Index Name") == "job_runs_queue_claim_idx"]
    assert len(scans) == 1
    scan = scans[0]
    assert scan["Node Type"] == "Index Scan"
    assert "eligible_at <=" in scan["Index Cond"]
    assert scan["Actual Rows"] <= claim_scan(limit)
    limits = [n for n in nodes if n["Node Type"] == "Limit"
              and n["Plans"][0]["Node Type"] == "LockRows"
              and n["Plans"][0]["Plans"][0] is scan]
    assert len(limits) == 1
    # the sorts that remain order the few candidates (the window and the final pick)
    for sort in (n for n in nodes if n["Node Type"] == "Sort"):
        assert sort["Actual Rows"] <= claim_scan(limit), sort
