"""Benchmark ``--only upgrade``: the online upgrade to schema version 11 (issue 26). A
database made by the migrations before it, holding a history of finished runs, is upgraded
by ``cronjobs migrate`` while a probe reads and writes runs the whole time: how long each
part takes, which locks it holds for how long, and how long the probe was held up."""

from __future__ import annotations

import threading
import time

import psycopg
from common import Context, Section

from cronjobs.core.retention import ensure_partitions
from cronjobs.core.upgrade import finish_upgrade
from cronjobs.db import sql as queries
from cronjobs.db.migrate import migrate
from cronjobs.db.store import Store

JOBS = 100
WAITING = 1_000

SEED = """
INSERT INTO job_definitions (name, schedule, kind, command, cursor_at, next_due_at, overlap)
SELECT 'job-' || g, '0 0 1 1 *', 'command', 'true', now(), now() + interval '1 year', 'allow'
FROM generate_series(1, {jobs}) AS g;
INSERT INTO job_runs (definition_id, scheduled_for, trigger, status, max_attempts,
                      eligible_at, attempt, started_at, finished_at)
SELECT 1 + g % {jobs}, now() - g * interval '1 second', 'schedule',
       CASE WHEN g % 100 = 0 THEN 'dead' ELSE 'succeeded' END, 1,
       now() - g * interval '1 second', 1, now() - g * interval '1 second',
       now() - g * interval '1 second' + interval '1 second'
FROM generate_series(1, {history}) AS g;
INSERT INTO job_attempts (run_id, attempt, worker, lease_token, started_at, finished_at,
                          outcome)
SELECT id, 1, 'old', gen_random_uuid(), started_at, finished_at, 'succeeded' FROM job_runs;
INSERT INTO job_runs (definition_id, scheduled_for, trigger, max_attempts, eligible_at)
SELECT 1 + g % {jobs}, now() + g * interval '1 second', 'manual', 3, now()
FROM generate_series(1, {waiting}) AS g;
"""


class Probe(threading.Thread):
    """Reads a run by id and counts the due runs every 20 ms, as a tick and a dashboard
    would: the latency of each probe, to see how long any lock held it up."""

    def __init__(self, dsn: str) -> None:
        super().__init__(daemon=True)
        self.dsn = dsn
        self.latencies: list[float] = []
        self.stop = threading.Event()

    def run(self) -> None:
        with psycopg.connect(self.dsn, autocommit=True) as conn:
            while not self.stop.is_set():
                began = time.monotonic()
                conn.execute("SELECT status FROM job_runs WHERE id = 1")
                conn.execute("SELECT count(*) FROM job_runs WHERE status = 'queued'")
                self.latencies.append(time.monotonic() - began)
                time.sleep(0.02)


def bench_upgrade(ctx: Context) -> Section:
    history = 1_000_000 if not ctx.quick else 100_000
    s = Section(
        "The online upgrade to the hot queue and the partitioned history",
        f"A database at schema version 10 (migrations 1 to 10), {history:,} finished runs with "
        f"their attempts over {JOBS} jobs and {WAITING:,} runs waiting, VACUUM ANALYZE; then "
        "`cronjobs migrate`'s two parts, timed apart: migration 11 (one transaction: the old "
        "tables become the 'legacy' partitions, the waiting runs move to the queue), then "
        "the online part (the history moved to the day partitions in batches of 5,000, each "
        "its own transaction, then the emptied tables dropped). Throughout, a probe reads a "
        "run by id and counts the queued runs every 20 ms: its latencies show how long a "
        "lock held readers up.")
    with ctx.server.database("upgrade", cronjobs=False) as name:
        dsn = ctx.server.conninfo(name)
        with psycopg.connect(dsn, autocommit=True) as conn:
            store = Store(conn)
            with store.transaction():
                for migration in queries.migrations()[:10]:
                    store.run_script(migration.sql)
                    if migration.version != 1:
                        store.schema.record_migration(migration.version, migration.name)
                store.schema.record_migration(1, "initial")
            conn.execute(SEED.format(jobs=JOBS, history=history, waiting=WAITING).encode())
            conn.execute("VACUUM ANALYZE")
            probe = Probe(dsn)
            probe.start()
            time.sleep(1.0)
            began = time.monotonic()
            migrate(store)
            structural = time.monotonic() - began
            during = len(probe.latencies)
            report = finish_upgrade(store)
            time.sleep(1.0)
            probe.stop.set()
            probe.join()
            if report is None:
                raise RuntimeError("the upgrade found nothing to move")
            ensure_partitions(store, now=store.now())
            moved = conn.execute("SELECT count(*) FROM job_runs WHERE stage = 'history'"
                                 ).fetchone()
    s.figure("migration 11 (one transaction: ACCESS EXCLUSIVE on job_runs, job_attempts)",
             "s", [structural])
    s.figure("online part, in all", "s", [report.seconds], batches=report.batches,
             moved=report.moved)
    s.figure("longest batch (row locks on its 5,000 runs)", "s", [report.longest_batch])
    s.figure("dropping the emptied tables (ACCESS EXCLUSIVE on job_runs, job_attempts)", "s",
             [report.drop_seconds])
    s.figure("probe latency, before and during", "ms",
             [1000 * x for x in probe.latencies], p99=1000 * _p99(probe.latencies),
             max_during_migration_11=1000 * max(probe.latencies[max(during - 5, 0):during + 5]
                                                or [0.0]))
    s.extra["history"] = history
    s.extra["moved_to_history"] = moved[0] if moved else None
    s.target("the probe is never held up for more than 1 s", (max(probe.latencies),
             max(probe.latencies)), "<=", 1.0, "s")
    return s


def _p99(values: list[float]) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(len(ordered) * 0.99))] if ordered else 0.0

