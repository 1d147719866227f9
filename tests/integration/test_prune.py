"""prune over a history of several batches: exact counts, and exactly the runs it keeps."""

from __future__ import annotations

import datetime as dt
from typing import Any

import psycopg

from cronjobs.core.prune import prune
from cronjobs.db.store import Store

# Job a: runs 1..700, all finished 100 days ago, every 100th dead, the rest succeeded.
# Kept: its three newest (698, 699, 700), which are also its latest success (699) and its
# latest dead run (700). 697 deleted.
# Job b: runs 1..400 succeeded; 1 finished just now (retried late: its latest success,
# although its oldest run), 391..400 recently; 200 was cancelled 100 days ago (its only
# cancelled run, so its latest). Deleted: 2..390 but 200, 388 runs.
# Job c: one queued and one running run, never pruned. Runs of a and b interleave by id.
SEED = """
INSERT INTO job_definitions (name, schedule, kind, command, cursor_at)
VALUES ('a', '* * * * *', 'command', 'true', now()),
       ('b', '* * * * *', 'command', 'true', now()),
       ('c', '* * * * *', 'command', 'true', now());
INSERT INTO job_runs (definition_id, scheduled_for, trigger, status, max_attempts,
                      eligible_at, attempt, started_at, finished_at, stage, retire_at)
SELECT d.id, timestamptz '2026-01-01' + g * interval '1 minute', 'schedule',
       CASE WHEN d.name = 'a' AND g % 100 = 0 THEN 'dead'
            WHEN d.name = 'b' AND g = 200 THEN 'cancelled' ELSE 'succeeded' END,
       1, now(), 1, now(),
       CASE WHEN d.name = 'b' AND (g = 1 OR g > 390) THEN now()
            ELSE now() - interval '100 days' + g * interval '1 minute' END,
       'history', now() + interval '14 days'
FROM generate_series(1, 700) AS g
JOIN job_definitions AS d ON d.name = 'a' OR (d.name = 'b' AND g <= 400)
ORDER BY g, d.name;
INSERT INTO job_attempts (run_id, attempt, worker, lease_token, started_at, finished_at,
                          outcome, stage, retire_at)
SELECT id, 1, 'w', gen_random_uuid(), started_at, finished_at, 'succeeded', stage, retire_at
FROM job_runs;
INSERT INTO job_runs (definition_id, scheduled_for, trigger, status, max_attempts,
                      eligible_at, lease_token, lease_expires_at, finished_at)
SELECT id, now(), 'manual', s, 1, now() - interval '200 days',
       CASE WHEN s = 'running' THEN gen_random_uuid() END,
       CASE WHEN s = 'running' THEN now() END,
       now() - interval '200 days'
FROM job_definitions, unnest(array['queued', 'running']) AS s WHERE name = 'c';
"""

LEFT = """
SELECT d.name, extract(epoch FROM r.scheduled_for - timestamptz '2026-01-01')::int / 60,
       r.status
FROM job_runs AS r JOIN job_definitions AS d ON d.id = r.definition_id
WHERE r.trigger = 'schedule' ORDER BY 1, 2
"""


def test_prune_in_batches_keeps_exactly_what_it_promises(db: psycopg.Connection[Any],
                                                         store: Store) -> None:
    db.execute(SEED)
    assert db.execute("SELECT count(*) FROM job_runs").fetchone() == (1102,)
    month = dt.timedelta(days=30)
    dry = prune(store, older_than=month, keep_last=3, dry_run=True, batch=100)
    assert dry.runs == 697 + 388
    # two batches (as a tick with --retention prunes): 200 runs, whichever runs it keeps
    assert prune(store, older_than=month, keep_last=3, batch=100, max_batches=2).runs == 200
    rest = prune(store, older_than=month, keep_last=3, batch=100)
    assert rest.runs == 697 + 388 - 200
    assert prune(store, older_than=month, keep_last=3, dry_run=True).runs == 0
    assert db.execute(LEFT).fetchall() == [
        ("a", 698, "succeeded"), ("a", 699, "succeeded"), ("a", 700, "dead"),
        ("b", 1, "succeeded"), ("b", 200, "cancelled"),
        *[("b", g, "succeeded") for g in range(391, 401)]]
    assert db.execute("SELECT count(*) FROM job_runs WHERE trigger = 'manual'").fetchone() == (2,)
    assert db.execute("SELECT count(*) FROM job_attempts").fetchone() == (3 + 12,)


def test_without_keep_last_only_the_latest_of_each_status_stay(db: psycopg.Connection[Any],
                                                              store: Store) -> None:
    db.execute(SEED)
    report = prune(store, older_than=dt.timedelta(days=30), batch=7)
    # a: 699 (latest success) and 700 (latest dead); b: 200 and its recent runs
    assert report.runs == 698 + 388
    assert [row[:2] for row in db.execute(LEFT).fetchall()] == [
        ("a", 699), ("a", 700), ("b", 1), ("b", 200), *[("b", g) for g in range(391, 401)]]
