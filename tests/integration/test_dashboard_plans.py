"""The dashboard's queries keep their plans over a history of day partitions.

A history partitioned by retirement day holds, beside the days of every job's successes,
days that one job fills alone (the days its failures retire on, when it is the only job
that failed). The statistics of such a day say that every row is that job's: a query that
names the job as a constant of the plan (a job's newest runs, ``= d.id``) is then planned
to read that day whole, newest id first, filtering on the job, for every job of the page.
Each query is planned here (EXPLAIN, never executed) on such a history: every day must be
read through its job's index, never through the id index with a filter on the job.
"""

from __future__ import annotations

import datetime as dt
import json
import uuid
from collections.abc import Iterator
from typing import Any

import psycopg
import pytest

from conftest import _create_database, _drop_database
from cronjobs.db import sql

DAYS = 6  # day partitions, the last three filled by job 1 alone

SEED = """
INSERT INTO job_definitions (name, schedule, kind, command, cursor_at, next_due_at)
SELECT 'job-' || lpad(g::text, 4, '0'), '* * * * *', 'command', 'true', now(),
       now() + interval '1 day'
FROM generate_series(1, 1000) AS g;
-- the first three days: 2,000 successes each, over every job; the last three: 2,000
-- failures each, all job 1's
INSERT INTO job_runs (definition_id, scheduled_for, trigger, status, max_attempts,
                      exclusive, eligible_at, attempt, started_at, finished_at, stage,
                      retire_at)
SELECT CASE WHEN d.n < 3 THEN 1 + g %% 1000 ELSE 1 END,
       %(day0)s::timestamptz - interval '20 days' + (d.n * 2000 + g) * interval '1 minute',
       'schedule', CASE WHEN d.n < 3 THEN 'succeeded' ELSE 'dead' END, 1, true,
       now(), 1, now(), now(), 'history',
       %(day0)s::timestamptz + d.n * interval '1 day' + interval '1 hour'
FROM generate_series(0, 5) AS d(n), generate_series(1, 2000) AS g;
INSERT INTO job_attempts (run_id, attempt, worker, lease_token, started_at, finished_at,
                          outcome, stage, retire_at)
SELECT id, 1, 'w', gen_random_uuid(), started_at, finished_at, 'succeeded', stage,
       retire_at
FROM job_runs;
"""


@pytest.fixture(scope="module")
def history(server_url: str, template_name: str) -> Iterator[psycopg.Connection[Any]]:
    name = f"cronjobs_dashplans_{uuid.uuid4().hex[:10]}"
    url = _create_database(server_url, name, template_name)
    try:
        with psycopg.connect(url, autocommit=True) as conn:
            day0 = dt.datetime.now(dt.UTC).date() + dt.timedelta(days=1)
            for n in range(DAYS):
                conn.execute("SELECT cronjobs_add_history_day(%s)",
                             (day0 + dt.timedelta(days=n),))
            for statement in SEED.split(";\n"):
                if statement.strip():
                    conn.execute(statement, {"day0": day0})
            conn.execute("VACUUM ANALYZE job_runs, job_attempts, job_definitions")
            filled = conn.execute(
                "SELECT n_distinct FROM pg_stats WHERE tablename = %s "
                "AND attname = 'definition_id'",
                (f"job_runs_history_{(day0 + dt.timedelta(days=DAYS - 1)):%Y%m%d}",)
            ).fetchone()
            assert filled == (1,)  # the statistics say one job fills the last day
            yield conn
    finally:
        _drop_database(server_url, name)


def _nodes(plan: dict[str, Any]) -> Iterator[dict[str, Any]]:
    yield plan
    for child in plan.get("Plans", ()):
        yield from _nodes(child)


def _plan(conn: psycopg.Connection[Any], name: str, params: dict[str, Any]
          ) -> list[dict[str, Any]]:
    row = conn.execute(b"EXPLAIN (FORMAT JSON) " + sql.query(name).encode(),
                       params).fetchone()
    assert row is not None
    doc = row[0] if isinstance(row[0], list) else json.loads(row[0])
    return list(_nodes(doc[0]["Plan"]))


def _day_scans(nodes: list[dict[str, Any]]) -> dict[str, str]:
    """The day partitions of job_runs the plan reads, each with the index it reads it by
    (that of its bitmap for a bitmap scan), or its node type."""
    def index(node: dict[str, Any]) -> str:
        if node["Node Type"] == "Bitmap Heap Scan":
            return str(node["Plans"][0].get("Index Name", "Bitmap Heap Scan"))
        return str(node.get("Index Name", node["Node Type"]))

    return {n["Relation Name"]: index(n) for n in nodes
            if n.get("Relation Name", "").startswith("job_runs_history_2")}


NOW = dt.datetime.now(dt.UTC)
QUERIES: dict[str, tuple[dict[str, Any], str]] = {
    # the jobs table: each job's newest runs
    "dashboard_jobs": ({"after": "", "search": None, "limit": 51, "strip": 20},
                       "_definition_id_id_idx"),
    "dashboard_jobs (a search)": ({"after": "", "search": "job-01", "limit": 51,
                                   "strip": 20}, "_definition_id_id_idx"),
    # a job's page: its newest runs, where its timeline starts
    "recent_runs": ({"definition_id": 7, "limit": 20}, "_definition_id_id_idx"),
    "timeline_start": ({"name": "job-0007", "start": NOW - dt.timedelta(days=30),
                        "end": NOW, "runs": 300}, "_definition_id_scheduled_for_idx"),
}


@pytest.mark.parametrize("name", sorted(QUERIES))
def test_each_day_is_read_by_its_job_index(history: psycopg.Connection[Any],
                                           name: str) -> None:
    params, index = QUERIES[name]
    scans = _day_scans(_plan(history, name.split(" ", maxsplit=1)[0], params))
    assert len(scans) == DAYS, scans
    wrong = {day: how for day, how in scans.items() if not how.endswith(index)}
    assert not wrong, wrong


def test_a_search_and_the_count_read_the_names_index_alone(
        history: psycopg.Connection[Any]) -> None:
    for name, params in (("count_jobs", {"search": "job-01"}),
                         ("dashboard_jobs", {"after": "", "search": "job-01", "limit": 51,
                                             "strip": 20})):
        nodes = _plan(history, name, params)
        scans = [n for n in nodes if n.get("Relation Name") == "job_definitions"]
        assert any(n["Node Type"] == "Index Only Scan"
                   and n["Index Name"] == "job_definitions_name_key" for n in scans), scans
        assert not any(n["Node Type"] == "Seq Scan" for n in scans), (name, scans)


def test_a_job_s_definitions_are_found_by_name(history: psycopg.Connection[Any]) -> None:
    for name, params in (("definition_history", {"name": "job-0007"}),
                         ("timeline_start", {"name": "job-0007", "start": NOW, "end": NOW,
                                             "runs": 300})):
        nodes = _plan(history, name, params)
        scans = [n for n in nodes if n.get("Relation Name") == "job_definitions"]
        assert scans and all(n.get("Index Name") == "job_definitions_name_idx"
                             for n in scans), (name, scans)


def test_the_attempts_of_runs_read_are_probed_in_their_own_day(
        history: psycopg.Connection[Any]) -> None:
    # (a few: on days this small, the planner reads a day whole for hundreds of runs,
    # rightly; on days of 100,000 runs it probes them for a thousand)
    runs = history.execute("SELECT id, stage, retire_at FROM job_runs "
                           "ORDER BY id DESC LIMIT 5").fetchall()
    nodes = _plan(history, "attempts_of_placed_runs", {
        "run_ids": [r[0] for r in runs], "stages": [r[1] for r in runs],
        "retire_at": [r[2] for r in runs]})
    days = {n["Relation Name"]: n for n in nodes
            if n.get("Relation Name", "").startswith("job_attempts_history_2")}
    assert days, nodes
    # every day by its (run_id, attempt) index, as the inner side of a nested loop on
    # the run's day, the partition key: the other days are pruned as the join runs
    wrong = {day: (n["Node Type"], n.get("Index Name")) for day, n in days.items()
             if n["Node Type"] != "Index Scan"
             or not n.get("Index Name", "").endswith("_run_id_attempt_idx")}
    assert not wrong, wrong
    assert len(days) == DAYS
    assert any(n["Node Type"] == "Nested Loop" for n in nodes)
