"""The worker's ticks run with the worker's options: the very :class:`TickOptions` object
it built, handed to each ``cronjobs tick`` on its stdin (never in argv or the environment,
where the jobs would see it)."""

from __future__ import annotations

import json
import socket
import subprocess
import sys
from typing import Any

import psycopg

from conftest import Invoke, clean_env, one_run
from cronjobs.tick import TickOptions


def test_a_tick_started_by_the_worker_runs_with_the_workers_options(
        cli: Invoke, database_url: str, db: psycopg.Connection[Any]) -> None:
    one_run(cli, "shell", "--command", "echo ran")
    options = TickOptions(worker="the-worker", handlers_only=True, concurrency=2)
    tick = subprocess.run([sys.executable, "-m", "cronjobs", "tick", "--options-stdin"],
                          input=options.to_json(), capture_output=True, text=True, timeout=60,
                          env=clean_env(CRONJOBS_DATABASE_URL=database_url), check=False)
    assert tick.returncode == 0, tick.stderr
    row = db.execute("SELECT r.status, r.error, a.worker FROM job_runs AS r "
                     "JOIN job_attempts AS a ON a.run_id = r.id").fetchone()
    assert row is not None
    status, error, worker = row
    # refused, as --handlers-only refuses a command; the attempt is this process's own
    assert (status, error) == (
        "dead", "refused: this worker runs registered Python handlers only (--handlers-only)")
    assert worker.startswith(f"{socket.gethostname()}:"), worker


def test_options_that_are_not_tick_options_are_a_usage_error(database_url: str) -> None:
    tick = subprocess.run([sys.executable, "-m", "cronjobs", "tick", "--options-stdin"],
                          input=json.dumps({"concurrency": 2, "bogus": 1}), capture_output=True,
                          text=True, timeout=60,
                          env=clean_env(CRONJOBS_DATABASE_URL=database_url), check=False)
    assert tick.returncode == 2, tick.stderr
    assert "--options-stdin" in tick.stderr
