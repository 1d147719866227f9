"""A drain's cursor: each claim of a drain starts after the last run the drain claimed (a
start key of the claim index's range scan), so that the entries a held snapshot keeps
alive in front of it are not read again; what lies behind the cursor is never lost (see
cronjobs/execution/claim_loop.py). Real store, real `cronjobs tick` processes, a REPEATABLE
READ transaction held open in another connection, exact counts."""

from __future__ import annotations

import datetime as dt
import json
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import psycopg
import pytest

from conftest import run_cronjobs
from cronjobs.clock import Clock
from cronjobs.db import sql
from cronjobs.db.store import Store
from cronjobs.db.stores.queue import claim_scan
from cronjobs.execution.claim_loop import FRONT_EVERY, SLOW, SLOW_FLOOR, SLOW_PER_ROW, slow
from cronjobs.execution.executor import Executor
from cronjobs.execution.options import TickOptions
from cronjobs.models import ClaimKey

APP = """\
import os

import psycopg

import cronjobs


@cronjobs.job("noop")
def noop(ctx):
    return None


@cronjobs.job("maker")
def maker(ctx):
    # a run due before every other one: behind the cursor of the drain that claimed this
    with psycopg.connect(os.environ["CRONJOBS_DATABASE_URL"], autocommit=True) as conn:
        conn.execute(
            "INSERT INTO job_runs (definition_id, scheduled_for, trigger, max_attempts, "
            "exclusive, eligible_at) SELECT id, now(), 'manual', 1, false, "
            "now() - interval '1 day' FROM job_definitions WHERE name = 'late'")
"""


def _job(db: psycopg.Connection[Any], name: str, handler: str = "noop", *,
         group: str | None = None) -> int:
    row = db.execute(
        "INSERT INTO job_definitions (name, schedule, kind, handler, overlap, group_name, "
        "cursor_at, next_due_at) VALUES (%s, '0 0 1 1 *', 'handler', %s, 'allow', %s, now(), "
        "now() + interval '300 days') RETURNING id", (name, handler, group)).fetchone()
    assert row is not None
    return int(row[0])


def _runs(db: psycopg.Connection[Any], job: int, count: int, *, first: int = 0,
          exclusive: bool = False, trigger: str = "manual") -> None:
    """``count`` due runs of ``job``, run i due at an hour ago plus ``first`` + i seconds."""
    db.execute(
        "INSERT INTO job_runs (definition_id, scheduled_for, trigger, max_attempts, exclusive, "
        "eligible_at) SELECT %(job)s, now() - interval '2 hours' + g * interval '1 second', "
        "%(trigger)s, 1, %(exclusive)s, now() - interval '1 hour' + g * interval '1 second' "
        "FROM generate_series(%(first)s, %(first)s + %(count)s - 1) AS g",
        {"job": job, "count": count, "first": first, "exclusive": exclusive,
         "trigger": trigger})


@pytest.fixture
def held(database_url: str) -> Iterator[psycopg.Connection[Any]]:
    """A REPEATABLE READ transaction that has read the runs and stays open: vacuum cannot
    remove, nor an index scan mark dead, any row version deleted after it began."""
    with psycopg.connect(database_url) as conn:
        conn.execute("BEGIN ISOLATION LEVEL REPEATABLE READ")
        conn.execute("SELECT count(*) FROM job_runs").fetchone()
        yield conn
        conn.rollback()


def _tick(database_url: str, code: Path) -> dict[str, Any]:
    env = {k: v for k, v in os.environ.items()
           if k not in ("PYTHONPATH", "CRONJOBS_APP", "DATABASE_URL")}
    env["CRONJOBS_DATABASE_URL"] = database_url
    tick = run_cronjobs("--app", "cursor_jobs", "tick", "--in-process", "--concurrency", "8",
                        "--json", env=env, cwd=code, timeout=300)
    assert tick.returncode == 0, tick.stderr
    report: dict[str, Any] = json.loads(tick.stdout)
    return report


@pytest.fixture
def code(tmp_path: Path) -> Path:
    (tmp_path / "cursor_jobs.py").write_text(APP)
    return tmp_path


def _exactly_once(db: psycopg.Connection[Any], total: int) -> None:
    """Every run succeeded at its first and only attempt, and the queue is empty."""
    runs = db.execute("SELECT count(*), count(*) FILTER (WHERE status = 'succeeded'), "
                      "count(*) FILTER (WHERE attempt = 1), count(DISTINCT tick_id) "
                      "FROM job_runs").fetchone()
    assert runs == (total, total, total, 1)
    attempts = db.execute("SELECT count(*), count(DISTINCT run_id), "
                          "count(*) FILTER (WHERE attempt = 1 AND outcome = 'succeeded') "
                          "FROM job_attempts").fetchone()
    assert attempts == (total, total, total)
    left = db.execute("SELECT count(*) FROM job_runs_queue").fetchone()
    assert left == (0,)


def _never_together(db: psycopg.Connection[Any], where: str) -> None:
    """No two of these runs held a lease at the same time."""
    overlapping = db.execute(
        "SELECT count(*) FROM job_runs AS a JOIN job_runs AS b ON a.id < b.id "  # noqa: S608
        "AND a.started_at < b.finished_at AND b.started_at < a.finished_at "
        f"WHERE a.{where} AND b.{where}").fetchone()
    assert overlapping == (0,)


def test_a_held_snapshot_drain_claims_every_run_exactly_once(
        database_url: str, db: psycopg.Connection[Any], code: Path,
        held: psycopg.Connection[Any]) -> None:
    # 600 runs of two jobs, 20 exclusive runs of a third (one at a time), 20 of a group
    # that lets one run at a time, and 30 backfilled runs (after every other): runs the
    # claims skip, behind a cursor that moves on
    db.execute("INSERT INTO job_groups (name, max_running) VALUES ('one', 1)")
    for name in ("a", "b"):
        _runs(db, _job(db, name), 300)
    _runs(db, _job(db, "solo"), 20, exclusive=True)
    _runs(db, _job(db, "grouped", group="one"), 20, first=100)
    _runs(db, _job(db, "old"), 30, trigger="backfill")
    assert held.execute("SELECT count(*) FROM job_runs").fetchone() == (0,)
    report = _tick(database_url, code)
    assert report["counts"]["claimed"] == report["counts"]["succeeded"] == 670
    _exactly_once(db, 670)
    _never_together(db, "exclusive")
    _never_together(db, "definition_id = (SELECT id FROM job_definitions "
                        "WHERE name = 'grouped')")
    # the backfilled runs started after every other run had started
    order = db.execute(
        "SELECT max(started_at) FILTER (WHERE trigger <> 'backfill' AND NOT exclusive "
        "AND definition_id NOT IN (SELECT id FROM job_definitions WHERE group_name = 'one')) "
        "<= min(started_at) FILTER (WHERE trigger = 'backfill') FROM job_runs").fetchone()
    assert order == (True,)
    # (the snapshot still held throughout)
    assert held.execute("SELECT count(*) FROM job_runs").fetchone() == (0,)


def test_a_run_due_behind_the_cursor_runs_in_the_same_tick(
        database_url: str, db: psycopg.Connection[Any], code: Path,
        held: psycopg.Connection[Any]) -> None:
    # the 101st of 201 runs makes a run due a day ago: before every run claimed so far
    noop = _job(db, "noop")
    _runs(db, noop, 100)
    _runs(db, _job(db, "maker", handler="maker"), 1, first=100)
    _runs(db, noop, 100, first=101)
    _job(db, "late")
    _tick(database_url, code)
    _exactly_once(db, 202)
    late = db.execute("SELECT count(*) FROM job_runs AS r JOIN job_definitions AS d "
                      "ON d.id = r.definition_id WHERE d.name = 'late' "
                      "AND r.status = 'succeeded'").fetchone()
    assert late == (1,)


def test_a_claim_from_a_cursor_starts_after_it(store: Store,
                                                db: psycopg.Connection[Any]) -> None:
    noop = _job(db, "noop")
    _runs(db, noop, 10)
    _runs(db, _job(db, "old"), 2, trigger="backfill")
    order = [r[0] for r in db.execute(
        "SELECT id FROM job_runs_queue ORDER BY trigger = 'backfill', eligible_at, id")]
    now = store.now()

    def claim(after: ClaimKey | None) -> list[int]:
        got = store.queue.claim_runs(now=now, worker="w", limit=3, tick_id=None,
                                     handlers=["noop"], after=after)
        return [c.id for c in sorted(got, key=lambda c: c.key)]

    first = claim(None)
    assert first == order[:3]
    key = max(c.key for c in store.queue.claim_runs(
        now=now, worker="w", limit=3, tick_id=None, handlers=["noop"],
        after=ClaimKey(False, dt.datetime.min.replace(tzinfo=dt.UTC), 0)))
    # (a key before every run: the same as from the front)
    assert key.id == order[5]
    # a run due before all of them: a claim from the cursor does not see it, one from the
    # front does, first
    _runs(db, noop, 1, first=-100)
    earliest = db.execute("SELECT max(id) FROM job_runs_queue").fetchone()
    assert earliest is not None
    assert claim(key) == order[6:9]
    assert claim(None) == [earliest[0], order[9], order[10]]
    # past the last non-backfilled run: the backfilled ones
    assert claim(ClaimKey(False, now, 0)) == [order[11]]


def _index_scans(plan: dict[str, Any]) -> Iterator[dict[str, Any]]:
    if plan.get("Index Name") == "job_runs_queue_claim_idx":
        yield plan
    for child in plan.get("Plans", []):
        yield from _index_scans(child)


@pytest.mark.parametrize("query", ["claim_runs", "claimable_backlog"])
def test_the_cursor_is_a_start_key_of_the_range_scan(
        store: Store, db: psycopg.Connection[Any], query: str) -> None:
    _runs(db, _job(db, "noop"), 1000)
    db.execute("ANALYZE job_runs, job_definitions")
    now = store.now()
    params = {"now": now, "worker": "w", "limit": 10, "scan": claim_scan(10), "tick_id": None,
              "handlers": ["noop"], "run_ids": None, "from_late": False,
              "from_at": now - dt.timedelta(minutes=30), "from_id": 1}
    with db.transaction(force_rollback=True):
        db.execute(sql.query("claim_plan"), {"generic": False})
        row = db.execute(b"EXPLAIN (FORMAT JSON) " + sql.query(query).encode(),
                         params).fetchone()
    assert row is not None
    doc = row[0] if isinstance(row[0], list) else json.loads(row[0])
    scans = list(_index_scans(doc[0]["Plan"]))
    assert len(scans) == 1, scans
    assert "ROW((trigger = 'backfill'::text), eligible_at, id) > ROW(" in scans[0]["Index Cond"]
    assert "ROW(" not in scans[0].get("Filter", "")
    # without a key, from the front: the condition is gone from the plan
    params.update(from_late=None, from_at=None, from_id=None)
    with db.transaction(force_rollback=True):
        db.execute(sql.query("claim_plan"), {"generic": False})
        rows = db.execute(b"EXPLAIN " + sql.query(query).encode(), params).fetchall()
    assert not [line for (line,) in rows if "ROW(" in line]


def _claims(store: Store, **options: Any) -> Any:
    return Executor(store, TickOptions(worker="cursor-test", concurrency=8, **options),
                    clock=Clock(store.now()), handlers=("noop",)).claims


K1 = ClaimKey(False, dt.datetime(2030, 1, 1, tzinfo=dt.UTC), 10)
K2 = ClaimKey(False, dt.datetime(2030, 1, 1, tzinfo=dt.UTC), 20)


def test_where_a_drain_claims_from(store: Store) -> None:
    claims = _claims(store)
    assert claims.after(0.0) is None  # the first claim: from the front
    # it filled its slots in a pass as quick as SLOW, for as many runs as that allows (64
    # outcomes and 64 claims): the next claim is from the front too
    assert claims.claimed(64, 64, 0.0, running=True, last=K1, took=SLOW, written=128)
    assert claims.after(0.001) is None
    # one that took twice SLOW: the next claims start after its last run for FRONT_EVERY
    # times as long
    slower = 2 * SLOW
    front = FRONT_EVERY * slower
    assert claims.claimed(8, 8, 0.0, running=True, last=K1, took=slower)
    assert claims.after(front / 2) == K1
    assert claims.claimed(8, 8, front / 2, running=True, last=K2, took=5.0)  # (not timed)
    assert claims.after(front * 0.9) == K2
    assert claims.after(front) is None  # time to look from the front again
    assert claims.claimed(8, 8, front, running=True, last=K1, took=slower)
    assert claims.after(front * 1.5) == K1
    # short from the cursor: the tick goes on, and the next claim is from the front
    assert claims.claimed(3, 8, front * 1.5, running=False, last=K2, took=0.01)
    assert claims.cursor is None
    assert claims.after(front * 1.6) is None
    # short from the front, nothing running: the tick is done
    assert not claims.claimed(0, 8, front * 1.6, running=False, took=slower)


def test_what_makes_a_claim_from_the_front_slow() -> None:
    # longer than SLOW, whatever the pass wrote
    assert not slow(SLOW, 10_000)
    assert slow(SLOW + 0.001, 10_000)
    # or longer than SLOW_FLOOR and SLOW_PER_ROW a run written (8 outcomes, 8 claims)
    per_16 = SLOW_PER_ROW * 16
    assert per_16 > SLOW_FLOOR
    assert not slow(per_16, 16)
    assert slow(per_16 + 0.001, 16)
    # never at SLOW_FLOOR or under, however few the runs
    assert not slow(SLOW_FLOOR, 1)
    assert not slow(SLOW_FLOOR, 0)
    assert slow(SLOW_FLOOR + 0.001, 1)


def test_a_slow_pass_for_its_runs_starts_the_cursor(store: Store) -> None:
    # (a held snapshot: passes of 8 outcomes and 8 claims that took 24 ms)
    claims = _claims(store)
    took = SLOW_PER_ROW * 16 + 0.008
    assert took < SLOW
    assert claims.claimed(8, 8, 0.0, running=True, last=K1, took=took, written=16)
    assert claims.after(FRONT_EVERY * took / 2) == K1
    assert claims.after(FRONT_EVERY * took) is None
    # the same pass, had it written four times the runs: the front again at once
    claims = _claims(store)
    assert claims.claimed(8, 8, 0.0, running=True, last=K1, took=took, written=64)
    assert claims.after(0.001) is None


def test_a_claim_by_id_never_starts_at_a_cursor(store: Store) -> None:
    claims = _claims(store, run_ids=(1, 2))
    assert claims.claimed(8, 8, 0.0, running=True, last=K1, took=1.0)
    assert claims.after(0.1) is None
