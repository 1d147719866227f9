"""A few realistic jobs and two months of their history, as the docs' screenshots show them
(tests/browser/test_dashboard.py takes the pictures; docs/screenshot.py runs that test).

The history is written as rows, at the database's clock: weeks of runs from real ticks
would take weeks.
"""

from __future__ import annotations

import datetime as dt
import uuid
from typing import Any

import psycopg

from conftest import Invoke
from cronjobs import cron

# name, schedule, zone, command, the fate of its last runs (newest last):
# s succeeded, f failed then retried and succeeded, d dead, r running
JOBS = [
    ("billing-export", "15 1 * * *", "UTC", "python -m billing.export --to s3://exports",
     "sssssssssssssssssd"),
    ("cleanup-tmp", "30 4 * * *", "America/New_York", "find /scratch -mtime +7 -delete",
     "ssssssssssss"),
    ("nightly-backup", "0 2 * * *", "Europe/Berlin", "pg_dump -Fc app > /backups/app.dump",
     "ssssssssfsssssssssss"),
    ("refresh-cache", "*/5 * * * *", "UTC", "curl -fsS -X POST http://app/internal/cache",
     "sssssssssssssssssssr"),
    ("send-digest", "0 8 * * 1-5", "Asia/Tokyo", "python -m mail.digest",
     "sssssssssssssss"),
    ("sync-inventory", "*/15 * * * *", "UTC", "python -m inventory.sync --full",
     "sssssfsssssssdssssfs"),
    ("warehouse-etl", "0 * * * *", "UTC", "dbt run --select tag:hourly",
     "ssssssssssssssssssss"),
]
PAUSED = {"cleanup-tmp": "disk migration, see INC-42"}
WORKER = "worker-7f9c:1"
# the jobs whose dead runs nobody acknowledged: the health banner's problems
DEAD = ("billing-export", "sync-inventory")


def seed(cli: Invoke, db: psycopg.Connection[Any]) -> None:
    row = db.execute("SELECT now()").fetchone()
    assert row is not None
    now: dt.datetime = row[0]
    for job, schedule, zone, command, fates in JOBS:
        result = cli("define", job, schedule, "--tz", zone, "--command", command)
        assert result.exit_code == 0, result.stderr
        db.execute("UPDATE job_definitions SET created_at = %s, schedule_since = %s "
                   "WHERE name = %s", (now - dt.timedelta(days=60),) * 2 + (job,))
        sched = cron.parse(schedule, zone, hash_key=job)
        slots: list[dt.datetime] = []
        at = now
        while len(slots) < len(fates):
            slot = sched.latest_at_or_before(at)
            assert slot is not None, job
            slots.insert(0, slot)
            at = slot - dt.timedelta(microseconds=1)
        found = db.execute("SELECT id FROM job_definitions WHERE name = %s", (job,)).fetchone()
        assert found is not None
        for index, (slot, fate) in enumerate(zip(slots, fates, strict=True)):
            _insert_run(db, found[0], slot, fate, dt.timedelta(seconds=4 + 7 * index % 50),
                        now)
    # what a finish keeps on the definition (`status` reads a job's last success there)
    db.execute("UPDATE job_definitions AS d SET last_succeeded_at = (SELECT max(finished_at) "
               "FROM job_runs AS r WHERE r.definition_id = d.id AND r.status = 'succeeded')")
    db.execute("INSERT INTO job_ticks (worker, tick_at, started_at, finished_at, status) "
               "SELECT %s, t, t, t + interval '1 second', 'finished' "
               "FROM generate_series(now() - interval '59 minutes', now(), "
               "interval '1 minute') AS t", (WORKER,))
    for job, note in PAUSED.items():
        assert cli("pause", job, "--note", note).exit_code == 0


def _insert_run(db: psycopg.Connection[Any], definition_id: int, slot: dt.datetime,
                fate: str, took: dt.timedelta, now: dt.datetime) -> None:
    status = {"s": "succeeded", "f": "succeeded", "d": "dead", "r": "running"}[fate]
    attempts = 2 if fate == "f" else 3 if fate == "d" else 1
    started = slot + dt.timedelta(seconds=2)
    running = fate == "r"
    finished = None if running else started + took
    token = uuid.uuid4() if running else None
    row = db.execute(
        "INSERT INTO job_runs (definition_id, scheduled_for, trigger, status, attempt, "
        "max_attempts, eligible_at, started_at, finished_at, exit_code, error, output_tail, "
        "lease_owner, lease_token, lease_expires_at, heartbeat_at, created_at, updated_at) "
        "VALUES (%s, %s, 'schedule', %s, %s, 3, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, "
        "%s) RETURNING id",
        (definition_id, slot, status, attempts, slot, started, finished,
         None if running else (2 if fate == "d" else 0), "exit code 2" if fate == "d" else None,
         None if running else "done\n", WORKER if running else None, token,
         now + dt.timedelta(minutes=1) if running else None, now if running else None,
         slot, slot)).fetchone()
    assert row is not None
    for attempt in range(1, attempts + 1):
        last = attempt == attempts
        outcome = "running" if running else "succeeded" if last and fate != "d" else "failed"
        db.execute(
            "INSERT INTO job_attempts (run_id, attempt, worker, lease_token, started_at, "
            "finished_at, outcome, exit_code, error, output_tail) VALUES "
            "(%s, %s, %s, %s, %s, %s, %s, %s, %s, %s)",
            (row[0], attempt, WORKER, token or uuid.uuid4(), started, finished, outcome,
             None if running else (0 if outcome == "succeeded" else 2),
             None if outcome in ("succeeded", "running") else "exit code 2",
             None if running else "done\n"))
