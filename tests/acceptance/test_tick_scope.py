"""A tick writes only what was meant: it claims only the runs it can execute (pools of
ticks with different --app modules share one database), and it refuses a --now ahead of
the database clock unless asked to tick there for real."""

from __future__ import annotations

import datetime as dt
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import psycopg
import pytest

from conftest import Invoke, count, one_run, snapshot

POOL_A = '''
import os, cronjobs

@cronjobs.job("alpha")
def alpha(ctx):
    with open(os.environ["POOL_LOG"], "a") as f:
        f.write(f"alpha {ctx.run_id}\\n")
'''

POOL_B = '''
import os, cronjobs

@cronjobs.job("beta")
def beta(ctx):
    with open(os.environ["POOL_LOG"], "a") as f:
        f.write(f"beta {ctx.run_id}\\n")
'''


@pytest.fixture
def pools(tmp_path: Path) -> dict[str, str]:
    (tmp_path / "pool_a.py").write_text(POOL_A)
    (tmp_path / "pool_b.py").write_text(POOL_B)
    return dict(os.environ, PYTHONPATH=str(tmp_path), POOL_LOG=str(tmp_path / "log"))


def _tick(database_url: str, env: dict[str, str], *args: str) -> tuple[dict[str, Any], str]:
    result = subprocess.run(
        [sys.executable, "-m", "cronjobs", "--database-url", database_url, *args, "tick",
         "--json"], capture_output=True, text=True, env=env, timeout=120, check=False)
    assert result.returncode == 0, result.stderr
    report: dict[str, Any] = json.loads(result.stdout)
    return report, result.stderr


def _runs(db: psycopg.Connection[Any]) -> dict[str, tuple[str, int]]:
    return {name: (status, attempt) for name, status, attempt in db.execute(
        "SELECT d.name, r.status, r.attempt FROM job_runs AS r "
        "JOIN job_definitions AS d ON d.id = r.definition_id")}


def _waiting(handler: str, runs: int) -> str:
    return (f"{runs} due run(s) wait for handler {handler}, which no --app module of this "
            "tick registers (try --app MODULE)")


@pytest.mark.smoke
def test_ticks_with_different_apps_each_run_only_their_own_handlers(
        cli: Invoke, database_url: str, db: psycopg.Connection[Any], pools: dict[str, str],
        tmp_path: Path) -> None:
    one_run(cli, "a1", "--handler", "alpha")
    one_run(cli, "b1", "--handler", "beta")
    one_run(cli, "b2", "--handler", "beta")
    one_run(cli, "shell", "--command", "true")
    queued = {"a1": ("queued", 0), "b1": ("queued", 0), "b2": ("queued", 0)}

    # No --app: the command runs; the handler runs wait, no attempt used.
    report, stderr = _tick(database_url, pools)
    assert (report["counts"]["claimed"], report["counts"]["succeeded"]) == (1, 1)
    assert report["handlers"] == []
    assert [(w["handler"], w["runs"]) for w in report["waiting_for_handlers"]] == [
        ("alpha", 1), ("beta", 2)]
    assert stderr.splitlines()[1:] == [_waiting("alpha", 1), _waiting("beta", 2)]
    assert _runs(db) == queued | {"shell": ("succeeded", 1)}
    assert count(db, "job_attempts") == 1

    # Pool A runs alpha's run alone, and says beta's still wait.
    report, stderr = _tick(database_url, pools, "--app", "pool_a")
    assert (report["counts"]["claimed"], report["counts"]["succeeded"]) == (1, 1)
    assert report["handlers"] == ["alpha"]
    assert stderr.splitlines()[1:] == [_waiting("beta", 2)]
    assert _runs(db)["a1"] == ("succeeded", 1)
    assert (_runs(db)["b1"], _runs(db)["b2"]) == (("queued", 0), ("queued", 0))

    # Pool B runs beta's two, and nothing is left waiting.
    report, stderr = _tick(database_url, pools, "--app", "pool_b")
    assert (report["counts"]["claimed"], report["counts"]["succeeded"]) == (2, 2)
    assert report["waiting_for_handlers"] == []
    assert len(stderr.splitlines()) == 1
    assert set(_runs(db).values()) == {("succeeded", 1)}
    assert count(db, "job_attempts") == 4
    assert sorted(line.split()[0] for line in (tmp_path / "log").read_text().splitlines()) == [
        "alpha", "beta", "beta"]
    assert db.execute("SELECT handlers FROM job_ticks ORDER BY id").fetchall() == [
        ([],), (["alpha"],), (["beta"],)]


def test_trigger_run_without_the_handler_leaves_the_run_queued(
        cli: Invoke, db: psycopg.Connection[Any]) -> None:
    assert cli("define", "report", "0 0 1 1 *", "--handler", "build_report").exit_code == 0
    result = cli("trigger", "report", "--run", "--json")
    assert result.exit_code == 0, result.stderr
    assert json.loads(result.stdout)["status"] == "queued"
    assert _waiting("build_report", 1) in result.stderr.splitlines()
    assert db.execute("SELECT status, attempt FROM job_runs").fetchall() == [("queued", 0)]
    assert count(db, "job_attempts") == 0


def test_status_and_explain_name_runs_waiting_for_a_missing_handler(
        cli: Invoke, db: psycopg.Connection[Any]) -> None:
    one_run(cli, "report", "--handler", "build_report")
    assert cli("tick").exit_code == 0  # no --app: the run waits
    assert db.execute("SELECT status, attempt FROM job_runs").fetchall() == [("queued", 0)]
    fresh = cli("status", "--check")
    waiting = json.loads(cli("status", "--json").stdout)["waiting_for_handlers"]
    assert [(w["handler"], w["runs"]) for w in waiting] == [("build_report", 1)]
    assert "build_report" in fresh.stdout  # shown, not yet a problem
    assert "wait for handler" not in fresh.stderr

    db.execute("UPDATE job_runs SET eligible_at = now() - interval '20 minutes'")
    late = cli("status", "--check", "--max-backlog-age", "5m")
    assert late.exit_code == 3
    problems = [line for line in late.stderr.splitlines() if "wait for handler" in line]
    assert problems == ["problem: 1 due run(s) wait for handler 'build_report', the oldest "
                        "for 20m: no tick of the last 5m registers it (try --app MODULE on a "
                        "tick)"]

    explained = cli("explain", "report", "--from", "2020-01-01", "--to", "2020-01-01")
    assert explained.exit_code == 0, explained.stderr
    assert "1 due run(s) wait for handler build_report, since " in explained.stdout
    assert "no tick of the last 5 minutes registers it" in explained.stdout
    data = json.loads(cli("explain", "report", "--from", "2020-01-01", "--to", "2020-01-01",
                          "--json").stdout)
    assert (data["waiting_for_handler"]["handler"], data["waiting_for_handler"]["runs"]) == (
        "build_report", 1)
    metrics = cli("metrics").stdout
    assert 'cronjobs_handler_waiting_runs{handler="build_report"} 1.0\n' in metrics


def _db_now(db: psycopg.Connection[Any]) -> dt.datetime:
    value: dt.datetime = db.execute("SELECT now()").fetchone()[0]  # type: ignore[index]
    return value


def test_a_now_ahead_of_the_database_clock_is_refused(cli: Invoke,
                                                      db: psycopg.Connection[Any]) -> None:
    assert cli("define", "often", "*/5 * * * *", "--command", "true").exit_code == 0
    before = snapshot(db)
    ahead = (_db_now(db) + dt.timedelta(hours=3)).replace(microsecond=0)
    refused = cli("tick", "--now", ahead.isoformat())
    assert refused.exit_code == 2
    assert refused.stdout == ""
    (line,) = refused.stderr.splitlines()
    assert line.startswith("error: --now is 3h ahead of the database clock (")
    assert (f"this tick would materialise 1 run(s) for slots up to {ahead.isoformat()} and run "
            "them for real") in line
    assert line.endswith("add --dry-run to preview it or --allow-future to do it anyway")
    assert snapshot(db) == before  # not even the tick's own record

    preview = cli("tick", "--now", ahead.isoformat(), "--dry-run")
    assert preview.exit_code == 0, preview.stderr
    assert snapshot(db) == before

    within_skew = cli("tick", "--now", (_db_now(db) + dt.timedelta(seconds=30)).isoformat(),
                      "--max-runs", "0")
    assert within_skew.exit_code == 0, within_skew.stderr
    assert count(db, "job_ticks") == 1

    forced = cli("tick", "--now", ahead.isoformat(), "--allow-future", "--json")
    assert forced.exit_code == 0, forced.stderr
    assert json.loads(forced.stdout)["counts"]["succeeded"] == 1
    # A run that started before its slot (as an attempt recorded on a clock behind the
    # slot's would be) is not negative lateness: seeded, since the tick's clock follows --now.
    db.execute("UPDATE job_runs SET started_at = scheduled_for - interval '1 minute'")
    db.execute("UPDATE job_attempts AS a SET started_at = r.started_at FROM job_runs AS r "
               "WHERE r.id = a.run_id")
    (started, slot), = db.execute("SELECT started_at, scheduled_for FROM job_runs").fetchall()
    assert started < slot
    metrics = cli("metrics").stdout
    assert 'cronjobs_job_lateness_seconds{job="often"} 0.0\n' in metrics


def test_trigger_run_is_not_refused_as_a_future_tick(cli: Invoke,
                                                    db: psycopg.Connection[Any]) -> None:
    assert cli("define", "now", "0 0 1 1 *", "--command", "true").exit_code == 0
    result = cli("trigger", "now", "--run", "--json")
    assert result.exit_code == 0, result.stderr
    assert json.loads(result.stdout)["status"] == "succeeded"
