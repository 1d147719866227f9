"""`tick --in-process`: handlers in threads of the tick, with real ticks, real processes and
a real PostgreSQL — exactly-once claims, outcomes, timeouts, cancels and a frozen tick."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from collections import Counter
from pathlib import Path
from typing import Any

import psycopg
import pytest

from conftest import Invoke, count, one_run, wait_for

JOBS = '''
import os, sys, time
import cronjobs

LOG = os.environ["JOBS_LOG"]


@cronjobs.job("record")
def record(ctx):
    with open(LOG, "a") as f:
        f.write(f"{ctx.run_id}\\n")
    print("recorded", ctx.run_id)
    return {"run": ctx.run_id}


@cronjobs.job("report")
def report(ctx):
    print("building", ctx.job, ctx.attempt)
    print("to stderr", file=sys.stderr)
    return {"days": ctx.payload["days"], "key": ctx.idempotency_key}


@cronjobs.job("broken")
def broken(ctx):
    raise ValueError("bad input")


@cronjobs.job("unserialisable")
def unserialisable(ctx):
    return {1, 2}


@cronjobs.job("hang")
def hang(ctx):
    with open(LOG, "a") as f:
        f.write(f"started {ctx.attempt}\\n")
    if ctx.attempt == 1:
        time.sleep(300)
    return "done"
'''


@pytest.fixture
def jobs(tmp_path: Path) -> dict[str, str]:
    (tmp_path / "inproc_jobs.py").write_text(JOBS)
    return dict(os.environ, PYTHONPATH=str(tmp_path), JOBS_LOG=str(tmp_path / "log"))


def _tick(database_url: str, env: dict[str, str], *args: str) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-m", "cronjobs", "--database-url", database_url, "--app",
         "inproc_jobs", "tick", "--in-process", *args],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)


def _finish(tick: subprocess.Popen[str], timeout: float = 60) -> dict[str, Any]:
    out, err = tick.communicate(timeout=timeout)
    assert tick.returncode == 0, err
    report: dict[str, Any] = json.loads(out)
    return report


@pytest.mark.smoke
def test_handlers_run_in_process_with_context_result_and_output(
        cli: Invoke, database_url: str, db: psycopg.Connection[Any],
        jobs: dict[str, str]) -> None:
    one_run(cli, "report", "--payload", '{"days": 7}')
    one_run(cli, "broken", "--max-attempts", "1")
    one_run(cli, "unserialisable")
    one_run(cli, "missing", "--handler", "no_such_handler", "--max-attempts", "1")
    report = _finish(_tick(database_url, jobs, "--json"))
    assert (report["counts"]["succeeded"], report["counts"]["failed"]) == (2, 1)
    rows = {name: rest for name, *rest in db.execute(
        "SELECT d.name, r.status, r.result, r.error, r.output_tail FROM job_runs AS r "
        "JOIN job_definitions AS d ON d.id = r.definition_id")}
    assert rows["report"] == ["succeeded",
                              {"days": 7, "key": "report@2020-01-01T00:00:00+00:00"}, None,
                              "building report 1\nto stderr\n"]
    status, result, error, output = rows["broken"]
    assert (status, result, error) == ("dead", None, "ValueError: bad input")
    assert "Traceback" in output and output.endswith("ValueError: bad input\n")
    assert rows["unserialisable"][:2] == ["succeeded", {"repr": "{1, 2}"}]
    # no --app module registers its handler: the tick leaves it queued, attempts untouched
    assert rows["missing"] == ["queued", None, None, None]
    assert [(w["handler"], w["runs"]) for w in report["waiting_for_handlers"]] == [
        ("no_such_handler", 1)]
    # each attempt recorded once, fenced like any other
    assert db.execute("SELECT outcome, count(*) FROM job_attempts GROUP BY 1 ORDER BY 1"
                      ).fetchall() == [("failed", 1), ("succeeded", 2)]


def test_concurrent_in_process_ticks_run_each_run_exactly_once(
        cli: Invoke, database_url: str, db: psycopg.Connection[Any], jobs: dict[str, str],
        tmp_path: Path) -> None:
    assert cli("define", "record", "0 0 1 1 *", "--overlap", "allow").exit_code == 0
    assert cli("backfill", "--yes", "record", "--from", "1950-01-01T00:00:00Z",
               "--to", "2025-01-01T00:00:00Z").exit_code == 0
    runs = count(db, "job_runs")
    assert runs == 76
    ticks = [_tick(database_url, jobs, "--concurrency", "4", "--json") for _ in range(6)]
    reports = [_finish(t, 120) for t in ticks]
    lines = Counter((tmp_path / "log").read_text().split())
    assert len(lines) == runs
    assert set(lines.values()) == {1}
    assert sum(r["counts"]["claimed"] for r in reports) == runs
    assert sum(r["counts"]["succeeded"] for r in reports) == runs
    assert db.execute("SELECT status, count(*) FROM job_runs GROUP BY 1").fetchall() == [
        ("succeeded", runs)]
    assert count(db, "job_attempts") == runs
    assert db.execute("SELECT count(*) FROM job_runs WHERE result->>'run' = id::text"
                      ).fetchone() == (runs,)


def test_a_handler_past_its_timeout_is_recorded_and_the_tick_exits(
        cli: Invoke, database_url: str, db: psycopg.Connection[Any],
        jobs: dict[str, str]) -> None:
    one_run(cli, "hang", "--timeout", "1s", "--max-attempts", "2", "--backoff", "1s")
    one_run(cli, "report", "--payload", '{"days": 1}')
    # The hanging handler would sleep 300 s: the tick records the timeout and exits
    # without waiting for it (the thread ends with the process).
    report = _finish(_tick(database_url, jobs, "--json"), timeout=60)
    assert report["counts"]["claimed"] == 2
    outcomes = dict(db.execute(
        "SELECT d.name, a.outcome FROM job_attempts AS a JOIN job_runs AS r ON r.id = a.run_id "
        "JOIN job_definitions AS d ON d.id = r.definition_id").fetchall())
    assert outcomes == {"hang": "timed_out", "report": "succeeded"}
    status, error, output = db.execute(
        "SELECT r.status, r.error, r.output_tail FROM job_runs AS r JOIN job_definitions AS d "
        "ON d.id = r.definition_id WHERE d.name = 'hang'").fetchone() or ()
    assert (status, error) == ("failed", "timed out after 1s")
    assert "the handler was still running in the tick" in output
    # the retry runs (and finishes) in a later tick: one at an instant past the backoff
    later = db.execute("SELECT eligible_at FROM job_runs WHERE status = 'failed'"
                       ).fetchone()[0]  # type: ignore[index]
    assert _finish(_tick(database_url, jobs, "--json", "--now", later.isoformat(),
                         "--allow-future"))["counts"]["succeeded"] == 1
    assert db.execute("SELECT status, attempt, result FROM job_runs AS r JOIN job_definitions "
                      "AS d ON d.id = r.definition_id WHERE d.name = 'hang'"
                      ).fetchone() == ("succeeded", 2, "done")


def test_cancelling_an_in_process_run(cli: Invoke, database_url: str,
                                      db: psycopg.Connection[Any], jobs: dict[str, str],
                                      tmp_path: Path) -> None:
    one_run(cli, "hang", "--lease", "10s")
    tick = _tick(database_url, jobs, "--json")
    wait_for((tmp_path / "log").exists, "the handler to start")
    db.execute("UPDATE job_runs SET cancel_requested_at = now()")
    report = _finish(tick)
    assert [(r["outcome"], r["status"]) for r in report["runs"]] == [("cancelled", "cancelled")]
    assert db.execute("SELECT status FROM job_runs").fetchone() == ("cancelled",)
    assert db.execute("SELECT outcome FROM job_attempts").fetchone() == ("cancelled",)


@pytest.mark.slow
def test_a_frozen_in_process_tick_is_killed_before_its_lease_expires(
        cli: Invoke, database_url: str, db: psycopg.Connection[Any], jobs: dict[str, str],
        tmp_path: Path) -> None:
    one_run(cli, "hang", "--lease", "10s")
    frozen = _tick(database_url, jobs, "--json")
    wait_for((tmp_path / "log").exists, "the handler to start")
    frozen.send_signal(signal.SIGSTOP)
    try:
        # Its watchdog kills the whole tick (the handler is in it) before the lease ends.
        frozen.wait(30)
    finally:
        if frozen.poll() is None:
            frozen.kill()
    assert frozen.returncode == -signal.SIGKILL
    wait_for(lambda: db.execute("SELECT lease_expires_at < now() FROM job_runs"
                                 ).fetchone() == (True,), "the lease to expire", 30)
    report = _finish(_tick(database_url, jobs, "--json"))
    assert (report["counts"]["reclaimed"], report["counts"]["succeeded"]) == (1, 1)
    assert db.execute("SELECT outcome FROM job_attempts ORDER BY attempt").fetchall() == [
        ("lost",), ("succeeded",)]
    assert (tmp_path / "log").read_text().split("\n")[:2] == ["started 1", "started 2"]


def test_shell_commands_still_run_in_their_own_process(
        cli: Invoke, database_url: str, db: psycopg.Connection[Any],
        jobs: dict[str, str]) -> None:
    one_run(cli, "shell", "--command", 'echo "run $CRONJOBS_RUN_ID pid $$"')
    _finish(_tick(database_url, jobs, "--json"))
    run_id, output = db.execute("SELECT id, output_tail FROM job_runs").fetchone() or ()
    words = output.split()
    assert words[:2] == ["run", str(run_id)]
    assert int(words[3]) != os.getpid()
