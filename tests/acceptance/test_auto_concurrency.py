"""`--concurrency auto`, the default of `tick` and `worker`: a tick with a backlog runs more
than the old default of 4 at once, sized by the rule of cronjobs/execution/sizing.py; an
explicit --concurrency still wins."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import psycopg
import pytest

from conftest import Invoke, count
from cronjobs.execution.sizing import Backlog, auto_concurrency, cores

# each run counts the runs under way with it (threads of one tick), sleeps 0.5 s and returns
# the most it saw at once
JOBS = '''
import threading, time
import cronjobs

_lock = threading.Lock()
_running = 0
_peak = 0


@cronjobs.job("together")
def together(ctx):
    global _running, _peak
    with _lock:
        _running += 1
        _peak = max(_peak, _running)
    time.sleep(0.5)
    with _lock:
        _running -= 1
        return {"peak": _peak}
'''


@pytest.fixture
def jobs(tmp_path: Path) -> dict[str, str]:
    (tmp_path / "auto_jobs.py").write_text(JOBS)
    return dict(os.environ, PYTHONPATH=str(tmp_path))


def _tick(database_url: str, env: dict[str, str], *args: str) -> dict[str, Any]:
    done = subprocess.run(
        [sys.executable, "-m", "cronjobs", "--database-url", database_url, "--app",
         "auto_jobs", "tick", "--in-process", "--json", *args],
        capture_output=True, text=True, env=env, timeout=120, check=False)
    assert done.returncode == 0, done.stderr
    report: dict[str, Any] = json.loads(done.stdout)
    return report


@pytest.fixture
def backlog(cli: Invoke, db: psycopg.Connection[Any]) -> int:
    """76 runs due at once (a backfill of 1950 … 2025, yearly)."""
    assert cli("define", "together", "0 0 1 1 *", "--overlap", "allow").exit_code == 0
    assert cli("backfill", "--yes", "together", "--from", "1950-01-01T00:00:00Z",
               "--to", "2025-01-01T00:00:00Z").exit_code == 0
    runs = count(db, "job_runs")
    assert runs == 76
    return runs


def test_a_tick_with_a_backlog_runs_more_than_the_old_default_at_once(
        database_url: str, db: psycopg.Connection[Any], jobs: dict[str, str],
        backlog: int) -> None:
    report = _tick(database_url, jobs)  # no --concurrency: auto
    expected = auto_concurrency(Backlog(threads=backlog, processes=0), cores=cores())
    assert expected > 4
    assert report["concurrency"] == expected
    assert report["counts"]["succeeded"] == backlog
    (peak,) = db.execute("SELECT max((result->>'peak')::int) FROM job_runs").fetchone() or (0,)
    assert 4 < peak <= expected


def test_an_explicit_concurrency_still_wins(
        database_url: str, db: psycopg.Connection[Any], jobs: dict[str, str],
        backlog: int) -> None:
    report = _tick(database_url, jobs, "--concurrency", "4", "--max-runs", "12")
    assert report["concurrency"] == 4
    assert report["counts"]["succeeded"] == 12
    (peak,) = db.execute("SELECT max((result->>'peak')::int) FROM job_runs").fetchone() or (0,)
    assert peak == 4


def test_a_quiet_tick_keeps_the_floor(database_url: str, jobs: dict[str, str]) -> None:
    assert _tick(database_url, jobs)["concurrency"] == 4
