"""`cronjobs worker` runs queued runs itself, woken by a notification of each (LISTEN/NOTIFY)
or by its polling: real worker processes, real triggers, a real PostgreSQL. Every run is
claimed by the worker's own process (its attempts name the worker's pid, no tick claimed
them: their tick_id is empty) and runs exactly once."""

from __future__ import annotations

import os
import re
import signal
import socket
import subprocess
import sys
from collections import Counter
from pathlib import Path
from typing import Any

import psycopg
import pytest

from conftest import Invoke, alive, wait_for

JOBS = '''
import os, time
import cronjobs

LOG = os.environ["JOBS_LOG"]


@cronjobs.job("record")
def record(ctx):
    with open(LOG, "a") as f:
        f.write(f"{ctx.run_id}\\n")


@cronjobs.job("hang")
def hang(ctx):
    with open(LOG, "a") as f:
        f.write(f"started {os.getpid()}\\n")
    time.sleep(300)
'''

RUNS = 5


@pytest.fixture
def jobs(tmp_path: Path) -> dict[str, str]:
    (tmp_path / "wake_jobs.py").write_text(JOBS)
    return dict(os.environ, PYTHONPATH=os.pathsep.join(
        [str(tmp_path), os.environ.get("PYTHONPATH", "")]), JOBS_LOG=str(tmp_path / "log"))


class Worker:
    """A `cronjobs -v worker` process; its stderr goes to a file (read while it runs)."""

    def __init__(self, database_url: str, env: dict[str, str], log: Path, *args: str) -> None:
        self.log = log
        with log.open("w") as err:
            self.process = subprocess.Popen(
                [sys.executable, "-m", "cronjobs", "-v", "--database-url", database_url,
                 "--app", "wake_jobs", "worker", "--grace", "2s", *args],
                stdout=subprocess.DEVNULL, stderr=err, text=True, env=env)

    def said(self, text: str) -> int:
        return self.log.read_text().count(text)

    def listening(self, times: int = 1) -> None:
        wait_for(lambda: self.said("listening for queued runs") >= times,
                 f"the worker to listen ({times})")

    def stop(self) -> str:
        """SIGTERM; its stderr once it exited (0)."""
        self.process.send_signal(signal.SIGTERM)
        self.process.wait(timeout=60)
        err = self.log.read_text()
        assert self.process.returncode == 0, err
        return err

    def __enter__(self) -> Worker:
        return self

    def __exit__(self, *exc: object) -> None:
        if self.process.poll() is None:  # a test that failed before stopping it
            self.process.kill()
            self.process.wait()


def _trigger(cli: Invoke, times: int) -> None:
    for _ in range(times):
        result = cli("trigger", "record")
        assert result.exit_code == 0, result.stderr


def _ran_once_by(db: psycopg.Connection[Any], log: Path, worker: Worker, runs: int) -> None:
    """``runs`` runs succeeded, each ran once, each claimed by ``worker``'s own process."""
    assert db.execute("SELECT status, count(*) FROM job_runs GROUP BY 1").fetchall() == [
        ("succeeded", runs)]
    ran = Counter(log.read_text().split())
    assert len(ran) == runs and set(ran.values()) == {1}
    # claimed by the worker's claimer, never by a tick (a tick records its id on the run)
    assert db.execute("SELECT count(*) FROM job_runs WHERE tick_id IS NULL").fetchone() == (
        runs,)
    assert db.execute("SELECT worker, count(*) FROM job_attempts GROUP BY 1").fetchall() == [
        (f"{socket.gethostname()}:{worker.process.pid}", runs)]


def _define(cli: Invoke) -> None:
    result = cli("define", "record", "0 0 1 1 *", "--handler", "record", "--overlap", "allow")
    assert result.exit_code == 0, result.stderr


def _succeeded(db: psycopg.Connection[Any], runs: int) -> None:
    wait_for(lambda: db.execute("SELECT count(*) FROM job_runs WHERE status = 'succeeded'"
                                ).fetchone() == (runs,), f"{runs} runs to succeed")


@pytest.mark.slow
def test_a_notification_wakes_the_worker_which_runs_each_trigger_once_itself(
        cli: Invoke, database_url: str, db: psycopg.Connection[Any], jobs: dict[str, str],
        tmp_path: Path) -> None:
    _define(cli)
    # polling once an hour: only the notifications (or a minute tick's end) wake it
    with Worker(database_url, jobs, tmp_path / "worker.log",
                "--poll-interval", "1h") as worker:
        worker.listening()
        _trigger(cli, RUNS)
        _succeeded(db, RUNS)
        err = worker.stop()
    _ran_once_by(db, tmp_path / "log", worker, RUNS)
    assert re.search(rf"; {RUNS} run\(s\) in \d+ claim pass\(es\), {RUNS} notification\(s\)",
                     err), err


@pytest.mark.slow
def test_without_listen_the_polling_finds_every_trigger(
        cli: Invoke, database_url: str, db: psycopg.Connection[Any], jobs: dict[str, str],
        tmp_path: Path) -> None:
    _define(cli)
    with Worker(database_url, jobs, tmp_path / "worker.log", "--listen", "off",
                "--poll-interval", "1s") as worker:
        _trigger(cli, RUNS)
        _succeeded(db, RUNS)
        err = worker.stop()
    _ran_once_by(db, tmp_path / "log", worker, RUNS)
    assert worker.said("listening for queued runs") == 0
    assert f"; {RUNS} run(s) in " in err and ", 0 notification(s)" in err, err


@pytest.mark.slow
def test_a_lost_listening_connection_is_opened_again_and_listens(
        cli: Invoke, database_url: str, db: psycopg.Connection[Any], jobs: dict[str, str],
        tmp_path: Path) -> None:
    _define(cli)
    with Worker(database_url, jobs, tmp_path / "worker.log",
                "--poll-interval", "1h") as worker:
        worker.listening()
        # every session of the worker ends, as in a database restart
        ended = db.execute(
            "SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity "
            "WHERE datname = current_database() AND pid <> pg_backend_pid() "
            "AND application_name LIKE %s", (f"cronjobs worker %:{worker.process.pid}",)
        ).fetchone()
        assert ended == (2,)  # the one that listens, the one that claims
        worker.listening(2)
        _trigger(cli, 1)
        _succeeded(db, 1)
        err = worker.stop()
    _ran_once_by(db, tmp_path / "log", worker, 1)
    assert "lost the connection that listens for queued runs" in err
    assert ", 1 notification(s)" in err, err


@pytest.mark.slow
def test_sigterm_stops_the_worker_and_its_running_run_goes_back_to_the_queue(
        cli: Invoke, database_url: str, db: psycopg.Connection[Any], jobs: dict[str, str],
        tmp_path: Path) -> None:
    result = cli("define", "hang", "0 0 1 1 *", "--handler", "hang")
    assert result.exit_code == 0, result.stderr
    log = tmp_path / "log"
    with Worker(database_url, jobs, tmp_path / "worker.log") as worker:
        assert cli("trigger", "hang").exit_code == 0
        wait_for(lambda: log.exists() and "started" in log.read_text(), "the run to start")
        handler = int(log.read_text().split()[1])
        err = worker.stop()
    assert not alive(handler)
    assert "1 run(s) in " in err, err
    assert db.execute("SELECT status, attempt, lease_token FROM job_runs").fetchall() == [
        ("queued", 1, None)]
    assert db.execute("SELECT outcome, worker FROM job_attempts").fetchall() == [
        ("interrupted", f"{socket.gethostname()}:{worker.process.pid}")]
