"""A hand-written queue worker: the floor that cronjobs' execution is compared with.

One table, one claim statement (``FOR UPDATE SKIP LOCKED``, a batch of 10, committed at
once), the no-op run in this process (or ``/bin/sh -c true`` with ``--shell``), then one
fenced finish statement per run, committed at once — or, with ``--batch-finish``, one
fenced statement finishing the whole batch. No leases, no attempts, no history: what
anyone would write by hand in an afternoon.

    BENCH_DSN=... python handloop.py setup N     # (re)create the table with N queued jobs
    BENCH_DSN=... python handloop.py work [--shell] [--batch-finish]
    BENCH_DSN=... python handloop.py count       # prints the number of finished jobs
"""

from __future__ import annotations

import os
import subprocess
import sys

import psycopg

BATCH = 10

SETUP = """
CREATE TABLE IF NOT EXISTS handloop_jobs (
    id           bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    status       text NOT NULL DEFAULT 'queued',
    worker       integer,
    started_at   timestamptz,
    finished_at  timestamptz
);
CREATE INDEX IF NOT EXISTS handloop_jobs_queued_idx ON handloop_jobs (id)
    WHERE status = 'queued';
TRUNCATE handloop_jobs;
"""

CLAIM = """
UPDATE handloop_jobs SET status = 'running', worker = %(worker)s,
       started_at = clock_timestamp()
WHERE id IN (SELECT id FROM handloop_jobs WHERE status = 'queued'
             ORDER BY id LIMIT %(batch)s FOR UPDATE SKIP LOCKED)
RETURNING id
"""

FINISH = """
UPDATE handloop_jobs SET status = 'succeeded', finished_at = clock_timestamp()
WHERE id = %(id)s AND status = 'running' AND worker = %(worker)s
"""

FINISH_BATCH = """
UPDATE handloop_jobs SET status = 'succeeded', finished_at = clock_timestamp()
WHERE id = ANY(%(ids)s) AND status = 'running' AND worker = %(worker)s
"""


def noop() -> None:
    """The job: nothing."""


def work(shell: bool, batch_finish: bool = False) -> int:
    worker = os.getpid()
    done = 0
    with psycopg.connect(os.environ["BENCH_DSN"], autocommit=True) as conn:
        while True:
            ids = [row[0] for row in conn.execute(CLAIM, {"worker": worker,
                                                          "batch": BATCH}).fetchall()]
            if not ids:
                return done
            for job_id in ids:
                if shell:
                    subprocess.run(["/bin/sh", "-c", "true"], check=True)
                else:
                    noop()
                if not batch_finish:
                    conn.execute(FINISH, {"id": job_id, "worker": worker})
                done += 1
            if batch_finish:
                conn.execute(FINISH_BATCH, {"ids": ids, "worker": worker})


def main(argv: list[str]) -> None:
    dsn = os.environ["BENCH_DSN"]
    if argv[0] == "setup":
        with psycopg.connect(dsn, autocommit=True) as conn:
            conn.execute(SETUP)
            conn.execute("INSERT INTO handloop_jobs (status) "
                         "SELECT 'queued' FROM generate_series(1, %s)", (int(argv[1]),))
            conn.execute("VACUUM ANALYZE handloop_jobs")
    elif argv[0] == "work":
        work(shell="--shell" in argv, batch_finish="--batch-finish" in argv)
    elif argv[0] == "count":
        with psycopg.connect(dsn, autocommit=True) as conn:
            row = conn.execute("SELECT count(*) FROM handloop_jobs "
                               "WHERE status = 'succeeded'").fetchone()
        print(row[0] if row else 0)
    else:
        raise SystemExit(f"unknown command {argv[0]!r}")


if __name__ == "__main__":
    main(sys.argv[1:])
