"""Execution with real ticks, real processes and a real PostgreSQL: exactly-once claims,
crashes, frozen workers, fencing, timeouts, retries, graceful stop."""

from __future__ import annotations

import datetime as dt
import json
import os
import signal
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path
from typing import Any

import psycopg
import pytest

from conftest import Invoke, alive, clean_env, count, one_run, peak_rss, wait_for


def _tick(database_url: str, *args: str, env: dict[str, str] | None = None
          ) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-m", "cronjobs", "--database-url", database_url, "tick", *args],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        env=env if env is not None else os.environ.copy())


def _attempts(db: psycopg.Connection[Any], run_id: int) -> list[tuple[Any, ...]]:
    return db.execute("SELECT attempt, outcome, worker FROM job_attempts WHERE run_id = %s "
                      "ORDER BY attempt", (run_id,)).fetchall()


@pytest.mark.smoke
def test_many_concurrent_ticks_run_each_run_exactly_once(cli: Invoke, database_url: str,
                                                         db: psycopg.Connection[Any],
                                                         tmp_path: Path) -> None:
    log = tmp_path / "side-effects.log"
    assert cli("define", "work", "0 0 1 1 *", "--command",
               f'echo "$CRONJOBS_RUN_ID" >> {log}', "--overlap", "allow").exit_code == 0
    result = cli("backfill", "--yes", "work", "--from", "1990-01-01T00:00:00Z",
                 "--to", "2025-01-01T00:00:00Z")
    assert result.exit_code == 0, result.stderr
    runs = count(db, "job_runs")
    assert runs == 36
    ticks = [_tick(database_url, "--concurrency", "3", "--json") for _ in range(8)]
    outputs = [t.communicate(timeout=120) for t in ticks]
    assert [t.returncode for t in ticks] == [0] * 8, outputs
    lines = Counter(log.read_text().split())
    assert len(lines) == runs
    assert set(lines.values()) == {1}
    claimed = sum(json.loads(out)["counts"]["claimed"] for out, _ in outputs)
    assert claimed == runs
    assert db.execute("SELECT status, count(*) FROM job_runs GROUP BY 1").fetchall() == [
        ("succeeded", runs)]
    assert count(db, "job_attempts") == runs


def _define_slow_once(cli: Invoke, tmp_path: Path, name: str = "slow") -> Path:
    """A job whose first attempt hangs (writing its pid first); later attempts finish."""
    marker = tmp_path / "done.log"
    script = (f'echo $$ > {tmp_path}/pid-$CRONJOBS_ATTEMPT; '
              f'if [ "$CRONJOBS_ATTEMPT" = 1 ]; then sleep 300; fi; '
              f'echo "$CRONJOBS_RUN_ID $CRONJOBS_ATTEMPT" >> {marker}')
    one_run(cli, name, "--command", script, "--lease", "10s")
    return marker


@pytest.mark.slow
def test_kill_9_of_a_tick_mid_job(cli: Invoke, database_url: str,
                                  db: psycopg.Connection[Any], tmp_path: Path) -> None:
    marker = _define_slow_once(cli, tmp_path)
    first = _tick(database_url)
    pid_file = tmp_path / "pid-1"
    wait_for(pid_file.exists, "the first attempt to start")
    job_pid = int(pid_file.read_text())
    first.kill()
    first.wait()
    wait_for(lambda: not alive(job_pid), "the orphaned job to die", 15)
    # Until the lease expires nobody else may run it.
    early = _tick(database_url, "--json")
    out, err = early.communicate(timeout=60)
    assert early.returncode == 0, err
    assert json.loads(out)["counts"]["claimed"] == 0
    run_id = db.execute("SELECT id FROM job_runs").fetchone()[0]  # type: ignore[index]
    # Once the lease has expired, another tick reclaims the run: a tick at an instant past
    # the lease's end, rather than a wait for it.
    expired = db.execute("SELECT lease_expires_at + interval '1 s' FROM job_runs"
                         ).fetchone()[0]  # type: ignore[index]
    second = _tick(database_url, "--json", "--now", expired.isoformat(), "--allow-future")
    out, err = second.communicate(timeout=60)
    assert second.returncode == 0, err
    report = json.loads(out)
    assert (report["counts"]["reclaimed"], report["counts"]["claimed"]) == (1, 1)
    assert marker.read_text().split() == [str(run_id), "2"]
    assert [a[:2] for a in _attempts(db, run_id)] == [(1, "lost"), (2, "succeeded")]
    assert db.execute("SELECT status FROM job_runs").fetchone() == ("succeeded",)


@pytest.mark.slow
def test_frozen_tick_is_fenced_out(cli: Invoke, database_url: str,
                                   db: psycopg.Connection[Any], tmp_path: Path) -> None:
    marker = _define_slow_once(cli, tmp_path)
    frozen = _tick(database_url, "--json")
    wait_for((tmp_path / "pid-1").exists, "the first attempt to start")
    job_pid = int((tmp_path / "pid-1").read_text())
    frozen.send_signal(signal.SIGSTOP)
    try:
        wait_for(lambda: db.execute("SELECT lease_expires_at < now() FROM job_runs"
                                     ).fetchone() == (True,), "the lease to expire", 30)
        # A worker that cannot renew its lease must not keep its job running.
        # (the fence kills it once it sees the lease expire: a bound that holds on a loaded
        # machine, and the job's state when it does not)
        wait_for(lambda: not alive(job_pid),
                 f"the frozen worker's job to die (pid {job_pid})", 90)
        other = _tick(database_url, "--json")
        out, err = other.communicate(timeout=60)
        assert other.returncode == 0, err
        assert json.loads(out)["counts"]["succeeded"] == 1
    finally:
        frozen.send_signal(signal.SIGCONT)
    out, err = frozen.communicate(timeout=60)
    assert frozen.returncode == 0, err
    report = json.loads(out)
    assert report["counts"]["succeeded"] == 0
    assert [r["status"] for r in report["runs"]] == [None]  # it recorded nothing
    run_id = db.execute("SELECT id FROM job_runs").fetchone()[0]  # type: ignore[index]
    assert [a[:2] for a in _attempts(db, run_id)] == [(1, "lost"), (2, "succeeded")]
    assert marker.read_text().split() == [str(run_id), "2"]
    assert db.execute("SELECT status, attempt FROM job_runs").fetchone() == ("succeeded", 2)


@pytest.mark.slow
@pytest.mark.parametrize("stop", [signal.SIGTERM, signal.SIGINT])
def test_sigterm_interrupts_and_requeues(cli: Invoke, database_url: str,
                                         db: psycopg.Connection[Any], tmp_path: Path,
                                         stop: signal.Signals) -> None:
    _define_slow_once(cli, tmp_path)
    tick = _tick(database_url, "--grace", "2s", "--json")
    wait_for((tmp_path / "pid-1").exists, "the first attempt to start")
    job_pid = int((tmp_path / "pid-1").read_text())
    tick.send_signal(stop)
    _, err = tick.communicate(timeout=60)
    assert tick.returncode == 0, err
    assert not alive(job_pid)
    run = db.execute("SELECT status, attempt, max_attempts, lease_token FROM job_runs"
                     ).fetchone()
    assert run == ("queued", 1, 4, None)
    run_id = db.execute("SELECT id FROM job_runs").fetchone()[0]  # type: ignore[index]
    assert [a[:2] for a in _attempts(db, run_id)] == [(1, "interrupted")]
    assert db.execute("SELECT status FROM job_ticks").fetchone() == ("interrupted",)
    # an interruption uses no attempt, and every view counts it so (not "1/4")
    shown = json.loads(cli("show", str(run_id), "--json").stdout)
    assert (shown["status"], shown["attempts_used"], shown["attempts_allowed"],
            shown["interrupted_attempts"], [a["counted"] for a in shown["attempts"]]) == (
        "queued", 0, 3, 1, [False])
    assert "attempts    0 of 3 used (1 interrupted, not counted)" in cli(
        "show", str(run_id)).stdout
    listed = [line for line in cli("runs").stdout.splitlines()
              if line.startswith(f"{run_id} ")]
    assert len(listed) == 1 and " queued " in listed[0] and " 0/3 " in listed[0], listed
    end = json.loads(cli("logs", str(run_id), "--json").stdout.splitlines()[-1])["end"]
    assert (end["status"], end["attempt"], end["max_attempts"]) == ("queued", 0, 3)


def test_failures_are_retried_with_backoff_then_dead(cli: Invoke, database_url: str,
                                                     db: psycopg.Connection[Any]) -> None:
    # Time is pinned, not waited for: ticks at T, T+4m and T+11m against a 10m backoff.
    assert cli("define", "flaky", "0 0 29 2 *", "--command", "echo oops >&2; exit 3",
               "--max-attempts", "2", "--backoff", "10m").exit_code == 0
    assert cli("backfill", "--yes", "flaky", "--from", "2020-02-29T00:00:00Z",
               "--to", "2020-02-29T00:00:00Z").exit_code == 0
    t = db.execute("SELECT now() + interval '1 hour'").fetchone()[0]  # type: ignore[index]

    def tick_at(minutes: int) -> dict[str, int]:
        at = t + dt.timedelta(minutes=minutes)
        tick = _tick(database_url, "--json", "--now", at.isoformat(), "--allow-future")
        out, err = tick.communicate(timeout=60)
        assert tick.returncode == 0, err
        counts: dict[str, int] = json.loads(out)["counts"]
        return counts

    assert tick_at(0)["failed"] == 1
    status, eligible_later = db.execute(
        "SELECT status, eligible_at >= %s FROM job_runs",
        (t + dt.timedelta(minutes=5),)).fetchone() or ()
    assert status == "failed" and eligible_later
    assert tick_at(4)["claimed"] == 0  # still backing off
    assert tick_at(11)["failed"] == 1
    row = db.execute("SELECT status, attempt, exit_code, error, output_tail FROM job_runs"
                     ).fetchone()
    assert row == ("dead", 2, 3, "exit code 3", "oops\n")


@pytest.mark.smoke
def test_timeout_kills_the_job(cli: Invoke, database_url: str,
                               db: psycopg.Connection[Any]) -> None:
    one_run(cli, "hang", "--command", "trap '' TERM; sleep 120", "--timeout", "1s",
            "--max-attempts", "1")
    tick = _tick(database_url, "--grace", "1s")
    _, err = tick.communicate(timeout=60)
    assert tick.returncode == 0, err
    status, error = db.execute("SELECT status, error FROM job_runs").fetchone() or ()
    assert status == "dead"
    assert error.startswith("timed out after 1s")
    assert db.execute("SELECT outcome FROM job_attempts").fetchone() == ("timed_out",)


def test_cancel_requested_stops_a_running_job(cli: Invoke, database_url: str,
                                              db: psycopg.Connection[Any],
                                              tmp_path: Path) -> None:
    _define_slow_once(cli, tmp_path)
    tick = _tick(database_url, "--json")
    wait_for((tmp_path / "pid-1").exists, "the first attempt to start")
    db.execute("UPDATE job_runs SET cancel_requested_at = now()")
    _, err = tick.communicate(timeout=60)
    assert tick.returncode == 0, err
    assert db.execute("SELECT status FROM job_runs").fetchone() == ("cancelled",)
    assert db.execute("SELECT outcome FROM job_attempts").fetchone() == ("cancelled",)


@pytest.mark.smoke
def test_handler_runs_with_its_context(cli: Invoke, database_url: str,
                                       db: psycopg.Connection[Any], tmp_path: Path) -> None:
    (tmp_path / "myjobs.py").write_text(
        "import cronjobs\n\n"
        "@cronjobs.job('report')\n"
        "def report(ctx):\n"
        "    print('building', ctx.job, ctx.attempt)\n"
        "    return {'days': ctx.payload['days'], 'key': ctx.idempotency_key}\n")
    env = dict(os.environ, PYTHONPATH=str(tmp_path))
    one_run(cli, "report", "--payload", '{"days": 7}')
    tick = subprocess.run(
        [sys.executable, "-m", "cronjobs", "--database-url", database_url, "--app", "myjobs",
         "tick"], capture_output=True, text=True, env=env, timeout=60, check=False)
    assert tick.returncode == 0, tick.stderr
    row = db.execute("SELECT status, result, output_tail FROM job_runs").fetchone()
    assert row == ("succeeded", {"days": 7, "key": "report@2020-01-01T00:00:00+00:00"},
                   "building report 1\n")


@pytest.mark.slow
def test_database_restart_while_a_job_runs_loses_nothing(tmp_path: Path) -> None:
    """A server of our own (the embedded one), stopped and started again mid-job."""
    from cronjobs.db import embedded

    home = tmp_path / "home"
    env = clean_env(CRONJOBS_HOME=str(home))
    with embedded.scratch(home):
        def cronjobs(*args: str) -> subprocess.CompletedProcess[str]:
            return subprocess.run([sys.executable, "-m", "cronjobs", *args], env=env,
                                  capture_output=True, text=True, timeout=120, check=False)

        started = tmp_path / "started"
        assert cronjobs("define", "steady", "0 0 1 1 *", "--lease", "10s", "--command",
                        f"touch {started}; sleep 6; echo finished").returncode == 0
        assert cronjobs("backfill", "--yes", "steady", "--from", "2020-01-01T00:00:00Z", "--to",
                        "2020-01-01T00:00:00Z").returncode == 0
        tick = subprocess.Popen([sys.executable, "-m", "cronjobs", "tick", "--json"], env=env,
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        wait_for(started.exists, "the job to start")
        assert embedded.stop() is True
        time.sleep(1)
        server = embedded.ensure_running()
        out, err = tick.communicate(timeout=120)
        assert tick.returncode == 0, err
        with psycopg.connect(server.conninfo) as conn:
            status, output = conn.execute("SELECT status, output_tail FROM job_runs"
                                          ).fetchone() or ()
            attempts = conn.execute("SELECT outcome FROM job_attempts ORDER BY attempt"
                                    ).fetchall()
        # The outcome was recorded once the server was back.
        assert (status, output) == ("succeeded", "finished\n")
        assert attempts == [("succeeded",)]
        assert json.loads(out)["counts"]["succeeded"] == 1


@pytest.mark.slow
def test_a_gigabyte_of_output_keeps_the_tick_small(cli: Invoke, database_url: str,
                                                   db: psycopg.Connection[Any]) -> None:
    one_run(cli, "chatty", "--command",
            "head -c 1073741824 /dev/zero | tr '\\0' 'x'; echo; echo last line")
    code, peak_mib = peak_rss([sys.executable, "-m", "cronjobs", "--database-url",
                               database_url, "tick"])
    assert code == 0
    assert peak_mib < 150, peak_mib
    status_row, tail = db.execute("SELECT status, output_tail FROM job_runs").fetchone() or ()
    assert status_row == "succeeded"
    assert tail.endswith("x\nlast line\n")
    assert len(tail.encode()) <= 64 * 1024
