"""Limits across jobs: at most N runs of a group's jobs run at once, across every tick.
The database enforces it under concurrent claims (real processes, exact counts); runs over
the limit wait queued, attempts untouched, and explain, status and group show say why."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
import threading
from pathlib import Path
from typing import Any

import psycopg
import pytest

from conftest import Invoke, snapshot, wait_for
from cronjobs.db.store import Store


def _group_jobs(cli: Invoke, count: int, command: str = "true", group: str = "reports"
                ) -> None:
    for i in range(count):
        result = cli("define", f"job{i}", "0 0 1 1 *", "--command", command, "--overlap",
                     "allow", "--group", group)
        assert result.exit_code == 0, result.stderr


def _queue(db: psycopg.Connection[Any], per_job: int) -> None:
    """Due manual runs of every job (as `trigger` makes them)."""
    db.execute("INSERT INTO job_runs (definition_id, scheduled_for, trigger, max_attempts, "
               "exclusive, eligible_at) SELECT d.id, now(), 'manual', 3, false, "
               "now() - interval '1 minute' FROM job_definitions AS d, "
               "generate_series(1, %s)", (per_job,))


def _statuses(db: psycopg.Connection[Any]) -> dict[str, int]:
    return dict(db.execute("SELECT status, count(*) FROM job_runs GROUP BY status").fetchall())


BARRIER = 715_015  # an advisory lock the test holds until every claimer waits on it

CLAIMER = textwrap.dedent(f'''
    import json, sys
    import psycopg
    from cronjobs.db.store import Store

    conn = psycopg.connect(sys.argv[1], autocommit=True)
    store = Store(conn)
    now = store.now()
    conn.execute("SELECT pg_advisory_lock_shared({BARRIER})")  # the start line
    got = store.queue.claim_runs(now=now, worker=sys.argv[2], limit=10, tick_id=None)
    print(json.dumps(len(got)))
''')


@pytest.mark.parametrize("processes", [8])
def test_concurrent_claims_never_exceed_the_limit(cli: Invoke, db: psycopg.Connection[Any],
                                                  database_url: str, tmp_path: Path,
                                                  processes: int) -> None:
    """Eight processes claim at once, each up to 10 runs, from 24 due runs of a group
    limited to 3: exactly 3 are claimed in all, the others wait queued."""
    _group_jobs(cli, 4)
    assert cli("group", "set", "reports", "--max-running", "3").exit_code == 0
    _queue(db, 6)
    script = tmp_path / "claimer.py"
    script.write_text(CLAIMER)
    db.execute("SELECT pg_advisory_lock(%s)", (BARRIER,))
    started = [subprocess.Popen([sys.executable, str(script), database_url, f"w{i}"],
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
               for i in range(processes)]
    wait_for(lambda: db.execute(
        "SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND objid = %s "
        "AND NOT granted", (BARRIER,)).fetchone() == (processes,),
        f"{processes} claimers at the start line")
    db.execute("SELECT pg_advisory_unlock(%s)", (BARRIER,))  # all claim at once
    claimed = []
    for process in started:
        out, err = process.communicate(timeout=120)
        assert process.returncode == 0, err
        claimed.append(json.loads(out))
    assert sum(claimed) == 3
    assert _statuses(db) == {"running": 3, "queued": 21}
    assert db.execute("SELECT count(*) FROM job_runs WHERE status = 'queued' AND attempt = 0"
                      ).fetchone() == (21,)


def test_waiting_runs_are_claimed_when_a_slot_frees(cli: Invoke, db: psycopg.Connection[Any],
                                                    store: Store) -> None:
    _group_jobs(cli, 2)
    assert cli("define", "loner", "0 0 1 1 *", "--command", "true").exit_code == 0
    assert cli("group", "set", "reports", "--max-running", "2").exit_code == 0
    _queue(db, 3)  # 3 runs each of job0, job1 (the group) and loner (no group)
    now = store.now()
    first = store.queue.claim_runs(now=now, worker="a", limit=100, tick_id=None)
    assert sorted(c.name for c in first) == ["job0", "job1", "loner", "loner", "loner"]
    assert store.queue.claim_runs(now=now, worker="b", limit=100, tick_id=None) == []
    metrics = cli("metrics").stdout.splitlines()
    assert {'cronjobs_group_max_running{group="reports"} 2.0',
            'cronjobs_group_running_runs{group="reports"} 2.0',
            'cronjobs_group_waiting_runs{group="reports"} 4.0'} <= set(metrics)
    waiting = cli("explain", "job0")
    assert "4 due run(s) of group reports wait for a free slot: 2 of 2 running" \
        in waiting.stdout
    status = cli("status", "--json")
    groups = json.loads(status.stdout)["waiting_for_groups"]
    assert groups == [{"name": "reports", "max_running": 2, "jobs": 2, "running": 2,
                       "waiting": 4, "full": True}]
    assert "4 due run(s) of group reports wait for a free slot" in cli("status").stdout
    shown = json.loads(cli("group", "show", "reports", "--json").stdout)
    assert shown["job_names"] == ["job0", "job1"] and shown["full"] is True
    # one finishes: exactly one more is claimed, the oldest first
    db.execute("UPDATE job_runs SET status = 'succeeded', lease_token = NULL, "
               "lease_expires_at = NULL, finished_at = now() WHERE id = %s", (first[0].id,))
    again = store.queue.claim_runs(now=now, worker="c", limit=100, tick_id=None)
    assert len(again) == 1
    assert store.queue.claim_runs(now=now, worker="d", limit=100, tick_id=None) == []
    # raising the limit frees slots at once; removing it frees them all
    assert cli("group", "set", "reports", "--max-running", "3").exit_code == 0
    assert len(store.queue.claim_runs(now=now, worker="e", limit=100, tick_id=None)) == 1
    assert cli("group", "remove", "reports").exit_code == 0
    assert len(store.queue.claim_runs(now=now, worker="f", limit=100, tick_id=None)) == 2
    assert db.execute("SELECT count(*) FROM job_runs WHERE status = 'running'"
                      ).fetchone() == (8,)
    metrics = cli("metrics").stdout
    assert 'cronjobs_group_max_running{' not in metrics  # no limit left: no sample
    listed = json.loads(cli("group", "list", "--json").stdout)
    assert listed == [{"name": "reports", "max_running": None, "jobs": 2, "running": 5,
                       "waiting": 0, "full": False}]


def test_a_claim_waits_for_a_claim_of_the_same_group_in_progress(
        cli: Invoke, db: psycopg.Connection[Any], database_url: str) -> None:
    """The interleaving that breaks a lock-free count: claim B starts while claim A has
    claimed the group's last free slots but not committed. B waits for A, then sees A's
    runs: it claims nothing (without the group lock, its count would miss A's runs)."""
    _group_jobs(cli, 2)
    assert cli("group", "set", "reports", "--max-running", "2").exit_code == 0
    _queue(db, 3)
    a = Store(psycopg.connect(database_url, autocommit=True))
    b = Store(psycopg.connect(database_url, autocommit=True))
    b_pid = b.conn.info.backend_pid
    now = a.now()
    got: dict[str, Any] = {}
    worker = threading.Thread(target=lambda: got.setdefault(
        "b", b.queue.claim_runs(now=now, worker="b", limit=10, tick_id=None)))
    with a.transaction():
        got["a"] = a.queue.claim_runs(now=now, worker="a", limit=10, tick_id=None)
        worker.start()
        wait_for(lambda: not worker.is_alive() or db.execute(
            "SELECT wait_event_type FROM pg_stat_activity WHERE pid = %s", (b_pid,)
        ).fetchone() == ("Lock",), "claim B waiting or done")
        blocked = worker.is_alive()
    worker.join(timeout=60)
    a.close()
    b.close()
    assert len(got["a"]) == 2
    assert blocked
    assert got["b"] == []
    assert _statuses(db) == {"running": 2, "queued": 4}


RECORDER = '''{python} -c "
import sys, time, psycopg
with psycopg.connect(sys.argv[1]) as c:
    n = c.execute('SELECT count(*) FROM job_runs r JOIN job_definitions d ON d.id = '
                  'r.definition_id WHERE d.group_name = %s AND r.status = %s',
                  ('reports', 'running')).fetchone()[0]
with open(sys.argv[2], 'a') as f:
    f.write(f'{{n}}\\n')
time.sleep(0.3)
" '{url}' '{log}'
'''


def test_eight_concurrent_ticks_never_run_more_than_the_limit(
        cli: Invoke, db: psycopg.Connection[Any], database_url: str, tmp_path: Path) -> None:
    """Each run records how many runs of its group hold a lease while it runs: never more
    than the limit, and every run runs once, none failed."""
    log = tmp_path / "running.log"
    command = RECORDER.format(python=sys.executable, url=database_url, log=log).strip()
    _group_jobs(cli, 3, command=command)
    assert cli("group", "set", "reports", "--max-running", "2").exit_code == 0
    _queue(db, 4)  # 12 runs
    env = {k: v for k, v in os.environ.items() if not k.startswith("CRONJOBS_")}
    ticks = [subprocess.Popen(
        [sys.executable, "-m", "cronjobs", "--database-url", database_url, "tick",
         "--concurrency", "4", "--json"], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
        text=True, env=env) for _ in range(8)]
    claimed = 0
    for tick in ticks:
        out, err = tick.communicate(timeout=300)
        assert tick.returncode == 0, err
        claimed += json.loads(out)["counts"]["claimed"]
    assert claimed == 12
    assert _statuses(db) == {"succeeded": 12}
    assert db.execute("SELECT count(*) FROM job_attempts").fetchone() == (12,)
    seen = [int(line) for line in log.read_text().split()]
    assert len(seen) == 12
    assert max(seen) <= 2, seen


def test_groups_in_files_decorators_and_bad_input(cli: Invoke, db: psycopg.Connection[Any],
                                                  tmp_path: Path) -> None:
    path = tmp_path / "jobs.toml"
    path.write_text('[jobs.r1]\nschedule = "@daily"\ncommand = "true"\ngroup = "reports"\n')
    assert cli("apply", str(path)).exit_code == 0
    assert db.execute("SELECT group_name FROM job_definitions").fetchone() == ("reports",)
    assert json.loads(cli("export", "--json").stdout)["jobs"]["r1"]["group"] == "reports"
    path.write_text('[jobs.r1]\nschedule = "@daily"\ncommand = "true"\n')
    changed = cli("apply", str(path))
    assert "    group: 'reports' -> none" in changed.stdout
    before = snapshot(db)
    for args, message in [
        (["group", "set", "bad name", "--max-running", "2"], "error: invalid group name"),
        (["group", "set", "g", "--max-running", "0"], "error: invalid value for "
                                                      "'--max-running'"),
        (["group", "show", "nothing"], "error: no group named 'nothing'"),
        (["group", "remove", "nothing"], "error: group 'nothing' has no limit"),
        (["define", "x", "@daily", "--group", "a b"], "error: invalid --group 'a b'"),
    ]:
        result = cli(*args)
        assert result.exit_code == 2, (args, result.stdout)
        assert result.stderr.startswith(message), result.stderr
    assert snapshot(db) == before
