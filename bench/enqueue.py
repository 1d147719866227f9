"""``--only enqueue``: what a run enqueued from the application costs (cronjobs.enqueue on a
psycopg connection, docs/how-to/enqueue.md): runs/s and WAL bytes per run, one run per
transaction and 10,000 in one statement, with and without idempotency keys, against a plain
INSERT of the same rows as the floor.

    python bench/run.py --only enqueue
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

import psycopg
from common import Context, Section, add_definitions

SINGLE = 2_000  # runs enqueued one per transaction
BATCH = 10_000  # runs enqueued in one statement

FLOOR = """
INSERT INTO job_runs_queue (definition_id, scheduled_for, trigger, max_attempts, eligible_at,
                            payload)
SELECT d.id, now(), 'enqueue', d.max_attempts, now(), jsonb_build_object('n', g)
FROM job_definitions AS d CROSS JOIN generate_series(1, %(n)s) AS g
WHERE d.name = 'enq1'
"""


def bench_enqueue(ctx: Context) -> Section:
    import cronjobs  # noqa: PLC0415 - the product, as the application imports it

    s = Section(
        "Enqueue from the application",
        f"A fresh database per measurement with one job. Single: {SINGLE:,} runs, each "
        "`cronjobs.enqueue(conn, job, payload)` in its own transaction (BEGIN, the call, "
        f"COMMIT) on one psycopg connection. Batch: `cronjobs.enqueue_many` of {BATCH:,} "
        "runs in one transaction. Keyed: the same with a distinct idempotency key per run; "
        "repeat: the batch again with the same keys (every run found, none made). Floor: "
        f"one INSERT ... SELECT of {BATCH:,} rows into job_runs_queue. WAL bytes per run: "
        "pg_current_wal_lsn() before and after, over the runs (other databases of the "
        "server write nothing meanwhile in this benchmark, but the figure includes what "
        "the server itself writes).")
    n = ctx.repeats("enqueue")

    def single(conn: psycopg.Connection[Any], keyed: bool) -> int:
        for i in range(SINGLE):
            with conn.transaction():
                cronjobs.enqueue(conn, "enq1", {"n": i}, key=f"k{i}" if keyed else None)
        return SINGLE

    def batch(conn: psycopg.Connection[Any], keyed: bool, times: int = 1) -> int:
        runs = [{"job": "enq1", "payload": {"n": i}, **({"key": f"k{i}"} if keyed else {})}
                for i in range(BATCH)]
        for _ in range(times):
            with conn.transaction():
                cronjobs.enqueue_many(conn, runs)
        return BATCH

    def floor(conn: psycopg.Connection[Any], keyed: bool) -> int:
        conn.execute(FLOOR, {"n": BATCH})
        return BATCH

    cases: dict[str, tuple[Callable[[psycopg.Connection[Any], bool], int], bool]] = {
        "floor: INSERT ... SELECT": (floor, False),
        "single": (single, False),
        "single, keyed": (single, True),
        "batch": (batch, False),
        "batch, keyed": (batch, True),
    }
    for name, (measure, keyed) in cases.items():
        rates, wal = [], []
        for _ in range(n):
            rate, bytes_per_run = _measured(ctx, lambda c, m=measure, k=keyed: m(c, k))
            rates.append(rate)
            wal.append(bytes_per_run)
        s.figure(f"{name}: runs/s", "runs/s", rates)
        s.figure(f"{name}: WAL bytes per run", "B", wal)
    rates, wal = [], []
    for _ in range(n):
        rate, bytes_per_run = _measured(ctx, lambda c: batch(c, True),
                                        setup=lambda c: batch(c, True))
        rates.append(rate)
        wal.append(bytes_per_run)
    s.figure("batch, keyed, repeat: runs/s", "runs/s", rates)
    s.figure("batch, keyed, repeat: WAL bytes per run", "B", wal)
    s.ratio("batch / floor", "batch: runs/s", "floor: INSERT ... SELECT: runs/s")
    s.ratio("batch, keyed / batch", "batch, keyed: runs/s", "batch: runs/s")
    s.ratio("single, keyed / single", "single, keyed: runs/s", "single: runs/s")
    return s


def _measured(ctx: Context, work: Callable[[psycopg.Connection[Any]], int],
              setup: Callable[[psycopg.Connection[Any]], Any] | None = None
              ) -> tuple[float, float]:
    """Runs/s and WAL bytes per run of ``work`` on a fresh database."""
    server = ctx.server
    with server.database("enqueue") as db:
        add_definitions(server, db, prefix="enq", count=1, overlap="allow")
        with psycopg.connect(server.conninfo(db), autocommit=True) as conn:
            if setup is not None:
                setup(conn)
            conn.execute("CHECKPOINT")
            start_lsn = _lsn(conn)
            start = time.perf_counter()
            runs = work(conn)
            took = time.perf_counter() - start
            wal = _lsn(conn) - start_lsn
    return runs / took, wal / runs


def _lsn(conn: psycopg.Connection[Any]) -> int:
    row = conn.execute("SELECT pg_current_wal_lsn() - '0/0'::pg_lsn").fetchone()
    assert row is not None  # noqa: S101 - one row, always
    return int(row[0])
