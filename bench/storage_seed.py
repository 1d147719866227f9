"""What the storage benchmarks' databases hold: definitions not due (shell commands, no-op
handlers), the history's day partitions, queued no-op runs to drain, and how a drain went.
The history itself is written by the product's own claim and finish: history.py."""

from __future__ import annotations

import datetime as dt
from collections.abc import Sequence

import psycopg
from benchlib import Server
from common import db_clock, sql

NOOP_DEFS = 100  # no-op handler definitions the drains' runs are spread over


def add_days(server: Server, db: str, days: Sequence[dt.date]) -> None:
    with psycopg.connect(server.conninfo(db), autocommit=True) as conn:
        for day in days:
            conn.execute("SELECT cronjobs_add_history_day(%s)", (day,))


def add_jobs(server: Server, db: str, *, count: int, prefix: str = "job-",
             schedule: str = "0 0 1 1 *") -> None:
    """``count`` shell-command definitions named prefix000001…, not due before next year."""
    sql(server, db, """
        INSERT INTO job_definitions (name, schedule, timezone, kind, command, overlap,
                                     max_attempts, cursor_at, next_due_at)
        SELECT %(prefix)s::text || lpad(g::text, 6, '0'), %(schedule)s, 'UTC', 'command',
               'true', 'skip', 1, now(), date_trunc('year', now(), 'UTC') + interval '1 year'
        FROM generate_series(1, %(count)s) AS g""",
        {"prefix": prefix, "count": count, "schedule": schedule})


def add_noop(server: Server, db: str, *, count: int = NOOP_DEFS, schedule: str = "0 0 1 1 *",
             prefix: str = "noop-") -> None:
    sql(server, db, """
        INSERT INTO job_definitions (name, schedule, timezone, kind, handler, overlap,
                                     max_attempts, cursor_at, next_due_at)
        SELECT %(prefix)s::text || g, %(schedule)s, 'UTC', 'handler', 'noop', 'allow', 1,
               now(), date_trunc('year', now(), 'UTC') + interval '1 year'
        FROM generate_series(1, %(count)s) AS g""",
        {"count": count, "schedule": schedule, "prefix": prefix})


def enqueue(server: Server, db: str, count: int, *, trigger: str = "backfill",
            vacuum: bool = True) -> int:
    """``count`` queued runs of the no-op definitions (as ``cronjobs backfill`` leaves them,
    or manual runs); returns the largest run id before them."""
    with psycopg.connect(server.conninfo(db), autocommit=True) as conn:
        row = conn.execute("SELECT coalesce(max(id), 0) FROM job_runs_queue").fetchone()
        seq = conn.execute("SELECT CASE WHEN is_called THEN last_value ELSE 0 END "
                           "FROM job_runs_id_seq").fetchone()
        conn.execute("""
            INSERT INTO job_runs (definition_id, scheduled_for, trigger, max_attempts,
                                  exclusive, eligible_at)
            SELECT d.id, date_trunc('minute', now()) - g * interval '1 minute', %(trigger)s,
                   1, false, now() - interval '1 second'
            FROM generate_series(1, %(count)s) AS g
            JOIN job_definitions AS d ON d.name = 'noop-' || (1 + g %% %(defs)s)
            ORDER BY g""", {"count": count, "defs": NOOP_DEFS, "trigger": trigger})
        if vacuum:
            conn.execute("VACUUM ANALYZE job_runs_queue")
    return max(int(row[0]) if row else 0, int(seq[0]) if seq else 0)


def drained(server: Server, db: str, after_id: int) -> tuple[int, float]:
    """(runs succeeded with an id above ``after_id``, first start -> last finish)."""
    row = sql(server, db, """
        SELECT count(*) FILTER (WHERE status = 'succeeded'),
               extract(epoch FROM max(finished_at) - min(started_at))::float8
        FROM job_runs WHERE id > %s AND trigger = 'backfill'""", (after_id,))[0]
    return int(row[0]), float(row[1] or 0)


def utc_today(server: Server) -> dt.date:
    return db_clock(server).astimezone(dt.UTC).date()

