"""The tick line `cronjobs crontab` prints runs under cron's own environment (PATH=/usr/bin:/bin,
none of the shell's variables), where a bare `cronjobs tick` is not found. (The real cron
daemon running crontab.example's lines: tests/acceptance/test_cron_daemon.py.)"""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest

from conftest import clean_env, run_cronjobs
from cronjobs.core.crontab import TICK

CRON_PATH = "/usr/bin:/bin"


def _cron_env(variables: dict[str, str], tmp_path: Path) -> dict[str, str]:
    """What cron gives a command (Debian's cron: HOME, LOGNAME, PATH, SHELL), plus the
    crontab's variable lines."""
    return {"HOME": str(tmp_path), "LOGNAME": "cron", "PATH": CRON_PATH, "SHELL": "/bin/sh",
            **variables}


@pytest.mark.smoke
def test_the_printed_tick_line_runs_a_job_under_crons_path(database_url: str,
                                                           tmp_path: Path) -> None:
    env = clean_env(CRONJOBS_DATABASE_URL=database_url)
    defined = run_cronjobs("define", "hello", "0 0 1 1 *", "--command", "echo hello", env=env)
    assert defined.returncode == 0, defined.stderr
    assert run_cronjobs("trigger", "hello", env=env).returncode == 0
    printed = run_cronjobs("crontab", "--json", env=env)
    assert printed.returncode == 0, printed.stderr
    data = json.loads(printed.stdout)
    assert data["variables"] == {"CRONJOBS_DATABASE_URL": database_url}
    tick_line = data["lines"][0]
    assert tick_line.startswith(f"* * * * * {data['executable']} ")
    assert os.path.isabs(data["executable"])
    # the command part of the line, its output kept here instead of handed to syslog
    command = tick_line.removeprefix("* * * * * ").removesuffix(TICK.removeprefix("tick"))
    cron_env = _cron_env(data["variables"], tmp_path)

    bare = subprocess.run(["/bin/sh", "-c", "cronjobs tick"], env=cron_env, cwd=tmp_path,
                          capture_output=True, text=True, timeout=60, check=False)
    assert bare.returncode == 127, (bare.stdout, bare.stderr)  # not found on cron's PATH

    ran = subprocess.run(["/bin/sh", "-c", command], env=cron_env, cwd=tmp_path,
                         capture_output=True, text=True, timeout=120, check=False)
    assert ran.returncode == 0, ran.stderr
    runs = json.loads(run_cronjobs("runs", "hello", "--json", env=env).stdout)
    assert [run["status"] for run in runs] == ["succeeded"]
