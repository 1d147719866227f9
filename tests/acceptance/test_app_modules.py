"""`--app mymodule` imports from the current directory, as `python -m` does: no PYTHONPATH."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import psycopg
import pytest

from conftest import Invoke, one_run, run_cronjobs

MODULE = """\
import os

import cronjobs
from cronjobs import JobContext


@cronjobs.job("from_cwd")
def from_cwd(ctx: JobContext) -> dict[str, str]:
    return {"cwd": os.getcwd(), "key": ctx.idempotency_key}
"""


def _env(database_url: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items()
           if k not in ("PYTHONPATH", "CRONJOBS_APP", "DATABASE_URL")}
    env["CRONJOBS_DATABASE_URL"] = database_url
    # not even `python -m` puts the directory on the path of a handler's process now: only
    # cronjobs does
    env["PYTHONSAFEPATH"] = "1"
    return env


@pytest.mark.parametrize("mode", [[], ["--in-process"]], ids=["child", "in-process"])
def test_an_app_module_in_the_current_directory(cli: Invoke, database_url: str,
                                                db: psycopg.Connection[Any], tmp_path: Path,
                                                mode: list[str]) -> None:
    code = tmp_path / "code"
    code.mkdir()
    (code / "cwd_jobs.py").write_text(MODULE)
    env = _env(database_url)
    one_run(cli, "from_cwd")
    defined = run_cronjobs("define", "from_cwd", "0 0 1 1 *", "--app", "cwd_jobs", env=env,
                           cwd=code)
    assert defined.returncode == 0, defined.stderr
    assert defined.stdout.startswith("no change to from_cwd: "), defined.stdout
    tick = run_cronjobs("tick", "--app", "cwd_jobs", *mode, env=env, cwd=code)
    assert tick.returncode == 0, tick.stderr
    row = db.execute("SELECT status, result FROM job_runs").fetchone()
    assert row == ("succeeded", {"cwd": str(code), "key": "from_cwd@2020-01-01T00:00:00+00:00"})


def test_elsewhere_the_module_is_not_found(database_url: str, tmp_path: Path) -> None:
    (tmp_path / "cwd_jobs.py").write_text(MODULE)
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    result = run_cronjobs("define", "from_cwd", "0 0 1 1 *", "--app", "cwd_jobs",
                          env=_env(database_url), cwd=elsewhere)
    assert result.returncode == 2
    assert result.stderr == ("error: cannot import --app module 'cwd_jobs': "
                             "ModuleNotFoundError: No module named 'cwd_jobs'\n")
