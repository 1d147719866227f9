"""One-off runs for a later time: `cronjobs trigger NAME --at TIME | --in DURATION` queues one
run that waits as 'scheduled' (shown by runs and explain, cancellable) and meets the job's
overlap policy when it becomes due. Time is pinned by the instants given to tick."""

from __future__ import annotations

import datetime as dt
import json
import os
import subprocess
import sys
from typing import Any

import psycopg
import pytest

from conftest import Invoke, snapshot


def _db_now(db: psycopg.Connection[Any]) -> dt.datetime:
    row = db.execute("SELECT now()").fetchone()
    assert row is not None
    return row[0].astimezone(dt.UTC).replace(microsecond=0)


def _define(cli: Invoke, name: str, *options: str) -> None:
    result = cli("define", name, "0 0 1 1 *", "--command", "true", *options)
    assert result.exit_code == 0, result.stderr


def _tick(cli: Invoke, at: dt.datetime) -> dict[str, Any]:
    result = cli("tick", "--now", at.isoformat(), "--allow-future", "--json")
    assert result.exit_code == 0, result.stderr
    report: dict[str, Any] = json.loads(result.stdout)
    return report


def _runs(db: psycopg.Connection[Any]) -> list[tuple[Any, ...]]:
    return db.execute("SELECT id, status, trigger, attempt, error FROM job_runs ORDER BY id"
                      ).fetchall()


def test_a_run_for_later_waits_then_runs(cli: Invoke, db: psycopg.Connection[Any]) -> None:
    _define(cli, "report")
    at = _db_now(db) + dt.timedelta(hours=2)
    made = cli("trigger", "report", "--at", at.isoformat(), "--payload", '{"days": 3}',
               "--json")
    assert made.exit_code == 0, made.stderr
    run = json.loads(made.stdout)
    assert (run["status"], run["trigger"]) == ("scheduled", "manual")
    assert db.execute("SELECT payload FROM job_runs").fetchone() == ({"days": 3},)
    assert run["scheduled_for"] == at.isoformat()
    listed = cli("runs", "report", "--status", "scheduled")
    assert listed.exit_code == 0 and "scheduled" in listed.stdout
    explained = cli("explain", "report")
    assert f"one-off run {run['id']} scheduled manually for" in explained.stdout
    explained_json = json.loads(cli("explain", "report", "--json").stdout)
    assert [r["id"] for r in explained_json["one_off_runs"]] == [run["id"]]
    later = json.loads(cli("explain", "report", "--to", (at + dt.timedelta(minutes=1))
                           .isoformat(), "--json").stdout)
    assert [s["outcome"] for s in later["slots"]] == ["scheduled"]
    assert later["slots"][0]["detail"].startswith(
        f"scheduled manually for {at.astimezone(dt.UTC):%Y-%m-%d %H:%M} UTC")
    # before its time: nothing claims it
    before = _tick(cli, at - dt.timedelta(minutes=1))
    assert before["counts"]["claimed"] == 0
    assert _runs(db) == [(run["id"], "scheduled", "manual", 0, None)]
    # at its time: queued and run by the same tick
    due = _tick(cli, at + dt.timedelta(seconds=30))
    assert due["counts"]["claimed"] == 1
    assert [d["outcome"] for d in due["decisions"]] == ["one-off"]
    assert _runs(db) == [(run["id"], "succeeded", "manual", 1, None)]
    assert _tick(cli, at + dt.timedelta(minutes=5))["counts"]["claimed"] == 0


def test_in_a_duration_and_cancel(cli: Invoke, db: psycopg.Connection[Any]) -> None:
    _define(cli, "report")
    made = json.loads(cli("trigger", "report", "--in", "90m", "--json").stdout)
    row = db.execute("SELECT eligible_at - created_at, status FROM job_runs").fetchone()
    assert row == (dt.timedelta(minutes=90), "scheduled")
    cancelled = cli("cancel", str(made["id"]), "--json")
    assert cancelled.exit_code == 0, cancelled.stderr
    assert json.loads(cancelled.stdout)["status"] == "cancelled"
    _tick(cli, _db_now(db) + dt.timedelta(hours=2))
    assert [r[1] for r in _runs(db)] == ["cancelled"]
    # removing a job drops its runs for later too
    cli("trigger", "report", "--in", "1h")
    assert cli("remove", "report", "--yes").exit_code == 0
    assert [r[1] for r in _runs(db)] == ["cancelled", "cancelled"]


@pytest.mark.parametrize(("overlap", "status", "cancel_requested"), [
    ("skip", "cancelled", False), ("queue", "queued", False), ("allow", "queued", False),
    ("replace", "queued", True)])
def test_the_overlap_policy_applies_when_it_becomes_due(
        cli: Invoke, db: psycopg.Connection[Any], overlap: str, status: str,
        cancel_requested: bool) -> None:
    _define(cli, "busy", "--overlap", overlap)
    at = _db_now(db) + dt.timedelta(hours=1)
    made = json.loads(cli("trigger", "busy", "--at", at.isoformat(), "--json").stdout)
    # a run of the job is running at that time (its lease is live then)
    db.execute("INSERT INTO job_runs (definition_id, scheduled_for, trigger, status, attempt, "
               "max_attempts, eligible_at, lease_owner, lease_token, lease_expires_at, "
               "started_at) SELECT id, %s, 'manual', 'running', 1, 3, %s, 'elsewhere', "
               "gen_random_uuid(), %s, %s FROM job_definitions",
               (at, at, at + dt.timedelta(hours=1), at))
    result = cli("tick", "--now", (at + dt.timedelta(seconds=5)).isoformat(), "--allow-future",
                 "--json", "--max-runs", "0")
    assert result.exit_code == 0, result.stderr
    row = db.execute("SELECT status, error FROM job_runs WHERE id = %s", (made["id"],)
                     ).fetchone()
    assert row is not None and row[0] == status
    if status == "cancelled":
        assert row[1] == ("skipped at its time: the job had 1 running and 0 waiting run(s) "
                          "and its overlap policy is 'skip'")
        assert "skipped at its time" in cli("explain", "busy", "--to", (
            at + dt.timedelta(minutes=1)).isoformat()).stdout
    requested = db.execute("SELECT cancel_requested_at IS NOT NULL FROM job_runs WHERE "
                           "lease_owner = 'elsewhere'").fetchone()
    assert requested == (cancel_requested,)


def test_bad_requests_write_nothing(cli: Invoke, db: psycopg.Connection[Any]) -> None:
    _define(cli, "report")
    before = snapshot(db)
    future = (_db_now(db) + dt.timedelta(hours=1)).isoformat()
    for args, message in [
        (["--at", "2020-01-01T00:00:00Z"], "error: invalid --at 2020-01-01T00:00:00+00:00: "
                                           "it is already past"),
        (["--at", future, "--force"], "error: --force cannot be used with --at or --in"),
        (["--at", future, "--in", "1h"], "error: --at and --in cannot be used together"),
        (["--in", "1h", "--run"], "error: --run cannot be used with --at or --in"),
        (["--in", "0s"], "error: invalid --in '0s': must be greater than zero"),
        (["--at", "soon"], "error: invalid --at 'soon'"),
    ]:
        result = cli("trigger", "report", *args)
        assert result.exit_code == 2, (args, result.stdout)
        assert result.stderr.startswith(message), result.stderr
        assert result.stdout == ""
    assert snapshot(db) == before


def test_concurrent_ticks_release_a_run_once(database_url: str, cli: Invoke,
                                             db: psycopg.Connection[Any]) -> None:
    _define(cli, "report", "--overlap", "allow")
    at = _db_now(db) + dt.timedelta(hours=1)
    for _ in range(3):
        assert cli("trigger", "report", "--at", at.isoformat()).exit_code == 0
    env = {k: v for k, v in os.environ.items() if not k.startswith("CRONJOBS_")}
    ticks = [subprocess.Popen(
        [sys.executable, "-m", "cronjobs", "--database-url", database_url, "tick", "--now",
         (at + dt.timedelta(seconds=1)).isoformat(), "--allow-future", "--json"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
        for _ in range(8)]
    released = 0
    for tick in ticks:
        out, err = tick.communicate(timeout=120)
        assert tick.returncode == 0, err
        released += sum(d["outcome"] == "one-off" for d in json.loads(out)["decisions"])
    assert released == 3
    assert db.execute("SELECT status, attempt, count(*) FROM job_runs GROUP BY 1, 2"
                      ).fetchall() == [("succeeded", 1, 3)]
    assert db.execute("SELECT count(*) FROM job_attempts").fetchone() == (3,)


def test_one_off_runs_beyond_a_batch_are_all_released(cli: Invoke,
                                                     db: psycopg.Connection[Any]) -> None:
    """The first batch of due one-off runs goes with materialisation's last transaction,
    the rest in batches of their own: none is left waiting."""
    from cronjobs.core.materialise import materialise
    from cronjobs.db.store import Store

    _define(cli, "report", "--overlap", "allow")
    at = _db_now(db) + dt.timedelta(hours=1)
    for _ in range(5):
        assert cli("trigger", "report", "--at", at.isoformat()).exit_code == 0
    report = materialise(Store(db), at + dt.timedelta(minutes=1), batch=2)
    assert (report.released, report.one_offs_skipped) == (5, 0)
    assert [status for _, status, *_ in _runs(db)] == ["queued"] * 5
