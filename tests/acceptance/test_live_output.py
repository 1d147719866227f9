"""`cronjobs logs RUN_ID --follow` against a real tick running a real command that prints
over a few seconds: the output arrives while the run runs, whole and in order, and the
follow ends with the run's outcome."""

from __future__ import annotations

import os
import subprocess
import sys
from typing import Any

import psycopg

from conftest import Invoke, one_run, run_cronjobs, wait_for

PRINTS = "for i in 1 2 3 4 5 6; do echo line $i; sleep 0.6; done; echo done >&2; exit 4"


def _run_id(db: psycopg.Connection[Any]) -> int:
    row = db.execute("SELECT id FROM job_runs").fetchone()
    assert row is not None
    return int(row[0])


def _status(db: psycopg.Connection[Any], run_id: int) -> str:
    row = db.execute("SELECT status FROM job_runs WHERE id = %s", (run_id,)).fetchone()
    assert row is not None
    return str(row[0])


def test_logs_follow_a_running_run_to_its_end(cli: Invoke, database_url: str,
                                              db: psycopg.Connection[Any]) -> None:
    one_run(cli, "printer", "--command", PRINTS, "--max-attempts", "2", "--backoff", "1h")
    run_id = _run_id(db)
    env = os.environ.copy()
    # started before the tick: it waits for the run to start, then follows it
    follow = subprocess.Popen(
        [sys.executable, "-m", "cronjobs", "--database-url", database_url, "logs",
         str(run_id), "--follow", "--interval", "0.2"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
    # the tick starts once `logs` has seen the run waiting (else the two race)
    assert follow.stderr is not None
    waiting = follow.stderr.readline()
    tick = subprocess.Popen(
        [sys.executable, "-m", "cronjobs", "--database-url", database_url, "tick"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
    try:
        assert follow.stdout is not None
        first = follow.stdout.readline()
        # the first line arrived while the run was still printing
        assert first == "line 1\n"
        assert _status(db, run_id) == "running"
        # (a little output: the pipes hold it while we wait; communicate() would skip
        # what readline() buffered)
        follow.wait(timeout=60)
        out, err = follow.stdout.read(), waiting + follow.stderr.read()
        tick.communicate(timeout=60)
    finally:
        for process in (follow, tick):
            if process.poll() is None:
                process.kill()
                process.wait()
    assert follow.returncode == 0, err
    assert first + out == "".join(f"line {i}\n" for i in range(1, 7)) + "done\n"
    lines = err.splitlines()
    assert lines[0].startswith(f"cronjobs: waiting for run {run_id} to start (queued")
    assert lines[-1].startswith(f"cronjobs: run {run_id} of printer failed (attempt 1 "
                                "of 2): exit code 4; the next attempt is due ")
    assert len(lines) == 2


def test_logs_of_a_finished_run_and_while_it_runs(cli: Invoke, database_url: str,
                                                  db: psycopg.Connection[Any]) -> None:
    one_run(cli, "printer", "--command", "echo first; sleep 8; echo second",
            "--max-attempts", "1")
    run_id = _run_id(db)
    tick = subprocess.Popen(
        [sys.executable, "-m", "cronjobs", "--database-url", database_url, "tick"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        wait_for(lambda: db.execute("SELECT output_tail FROM job_runs WHERE id = %s",
                                    (run_id,)).fetchone() == ("first\n",),
                 "the first line to be written while the run runs")
        # without --follow: what it printed so far, and it does not wait
        now = run_cronjobs("--database-url", database_url, "logs", str(run_id))
        assert now.returncode == 0, now.stderr
        assert now.stdout == "first\n"
        assert now.stderr == ""
        tick.communicate(timeout=60)
    finally:
        if tick.poll() is None:
            tick.kill()
            tick.wait()
    done = cli("logs", str(run_id))
    assert done.exit_code == 0
    assert done.stdout == "first\nsecond\n"
    assert done.stderr == f"cronjobs: run {run_id} of printer succeeded (attempt 1 of 1)\n"
    missing = cli("logs", "999999")
    assert missing.exit_code == 2
    assert missing.stderr == "error: no run with id 999999 (see `cronjobs runs`)\n"


def test_logs_of_a_running_run_that_printed_nothing_says_so(
        cli: Invoke, database_url: str, db: psycopg.Connection[Any]) -> None:
    one_run(cli, "sleeper", "--command", "sleep 60", "--max-attempts", "1")
    run_id = _run_id(db)
    tick = subprocess.Popen(
        [sys.executable, "-m", "cronjobs", "--database-url", database_url, "tick"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        wait_for(lambda: db.execute("SELECT status FROM job_runs WHERE id = %s",
                                    (run_id,)).fetchone() == ("running",),
                 "the run to start")
        result = cli("logs", str(run_id))
        assert (result.exit_code, result.stdout) == (0, "")
        assert result.stderr == (f"cronjobs: run {run_id} of sleeper is running (attempt 1 "
                                 "of 1) and has printed nothing yet; --follow waits for its "
                                 "output\n")
    finally:
        tick.terminate()
        tick.communicate(timeout=120)
