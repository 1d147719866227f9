"""Operating it: retry, trigger, cancel, runs, show, status, retention, metrics, alerts —
against a real database with history from real ticks."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import psycopg

from conftest import Invoke, count, snapshot
from cronjobs.core.retention import upkeep
from cronjobs.db.store import Store
from cronjobs.tick import TickOptions, tick


def _job(cli: Invoke, name: str, command: str, *options: str) -> None:
    result = cli("define", name, "0 0 1 1 *", "--command", command, *options)
    assert result.exit_code == 0, result.stderr


def _one_run(cli: Invoke, name: str) -> int:
    result = cli("trigger", name, "--json")
    assert result.exit_code == 0, result.stderr
    return int(json.loads(result.stdout)["id"])


def _tick(db: psycopg.Connection[Any], **options: Any) -> Any:
    return tick(Store(db), TickOptions(worker="test", **options))


def _status(db: psycopg.Connection[Any], run_id: int) -> str:
    row = db.execute("SELECT status FROM job_runs WHERE id = %s", (run_id,)).fetchone()
    assert row is not None
    return str(row[0])


def test_trigger_then_tick_runs_it(cli: Invoke, db: psycopg.Connection[Any]) -> None:
    _job(cli, "hello", "echo hello $CRONJOBS_PAYLOAD")
    result = cli("trigger", "hello", "--payload", '{"who": "ops"}')
    assert result.exit_code == 0, result.stderr
    assert "the next tick runs it" in result.stdout
    report = _tick(db)
    assert report.counts()["succeeded"] == 1
    run_id = db.execute("SELECT id FROM job_runs").fetchone()[0]  # type: ignore[index]
    shown = json.loads(cli("show", str(run_id), "--json").stdout)
    assert shown["trigger"] == "manual"
    assert shown["status"] == "succeeded"
    assert shown["attempts"][0]["output_tail"] == 'hello {"who":"ops"}\n'
    assert shown["attempts"][0]["worker"] == "test"
    assert shown["attempts"][0]["duration_seconds"] >= 0
    text = cli("show", str(run_id)).stdout
    assert "attempt 1: succeeded on test" in text


def test_trigger_run_runs_it_here_and_now(cli: Invoke, db: psycopg.Connection[Any]) -> None:
    _job(cli, "now", "echo right now")
    result = cli("trigger", "now", "--run", "--json")
    assert result.exit_code == 0, result.stderr
    data = json.loads(result.stdout)
    assert (data["status"], data["output_tail"]) == ("succeeded", "right now\n")


def test_trigger_honours_overlap(cli: Invoke, db: psycopg.Connection[Any]) -> None:
    _job(cli, "single", "true")
    first = _one_run(cli, "single")
    before = snapshot(db)
    refused = cli("trigger", "single")
    assert refused.exit_code == 2
    assert "overlap policy is 'skip'" in refused.stderr
    assert snapshot(db) == before
    forced = cli("trigger", "single", "--force", "--json")
    assert forced.exit_code == 0
    assert json.loads(forced.stdout)["id"] != first
    assert count(db, "job_runs") == 2


def test_retry_failed_dead_cancelled(cli: Invoke, db: psycopg.Connection[Any]) -> None:
    _job(cli, "broken", "exit 4", "--max-attempts", "1")
    run_id = _one_run(cli, "broken")
    _tick(db)
    assert _status(db, run_id) == "dead"
    result = cli("retry", str(run_id), "--attempts", "2", "--json")
    assert result.exit_code == 0, result.stderr
    data = json.loads(result.stdout)
    assert (data["status"], data["max_attempts"], data["retry_count"]) == ("queued", 3, 1)
    _tick(db)
    assert _status(db, run_id) == "failed"  # attempt 2 failed, one more to go
    attempts = db.execute("SELECT attempt, outcome FROM job_attempts WHERE run_id = %s "
                          "ORDER BY attempt", (run_id,)).fetchall()
    assert attempts == [(1, "failed"), (2, "failed")]
    cancelled = cli("cancel", str(run_id))
    assert cancelled.exit_code == 0
    assert _status(db, run_id) == "cancelled"
    assert cli("retry", str(run_id)).exit_code == 0
    assert _status(db, run_id) == "queued"


def test_retry_refusals(cli: Invoke, db: psycopg.Connection[Any]) -> None:
    _job(cli, "fine", "true")
    run_id = _one_run(cli, "fine")
    before = snapshot(db)
    queued = cli("retry", str(run_id))
    assert queued.exit_code == 2
    assert "is queued: there is nothing to retry" in queued.stderr
    missing = cli("retry", "999999")
    assert missing.exit_code == 2
    assert "no run with id 999999" in missing.stderr
    assert snapshot(db) == before
    _tick(db)
    done = cli("retry", str(run_id))
    assert done.exit_code == 2
    assert "use --force" in done.stderr
    forced = json.loads(cli("retry", str(run_id), "--force", "--json").stdout)
    assert forced["id"] != run_id
    assert forced["trigger"] == "retry"
    assert forced["retry_of"] == run_id
    slot = db.execute("SELECT count(DISTINCT scheduled_for) FROM job_runs").fetchone()
    assert slot == (1,)


def test_cancel_running_and_finished(cli: Invoke, db: psycopg.Connection[Any]) -> None:
    _job(cli, "long", "true")
    run_id = _one_run(cli, "long")
    db.execute("UPDATE job_runs SET status = 'running', attempt = 1, lease_owner = 'w', "
               "lease_token = gen_random_uuid(), lease_expires_at = now() + interval '1 m'")
    result = cli("cancel", str(run_id))
    assert result.exit_code == 0
    assert "at the next heartbeat" in result.stdout
    assert db.execute("SELECT cancel_requested_at IS NOT NULL FROM job_runs").fetchone() == (
        True,)
    db.execute("UPDATE job_runs SET status = 'succeeded', lease_token = NULL, "
               "lease_expires_at = NULL")
    finished = cli("cancel", str(run_id))
    assert finished.exit_code == 2
    assert "already finished" in finished.stderr


def test_runs_filters_and_shape(cli: Invoke, db: psycopg.Connection[Any]) -> None:
    _job(cli, "ok", "true")
    _job(cli, "bad", "exit 1", "--max-attempts", "1")
    for name in ("ok", "bad", "ok"):
        _one_run(cli, name)
        _tick(db)
    everything = json.loads(cli("runs", "--json").stdout)
    assert [r["job"] for r in everything] == ["ok", "bad", "ok"]
    assert {"id", "job", "scheduled_for", "trigger", "status", "attempt", "max_attempts",
            "started_at", "finished_at", "exit_code", "error"} <= set(everything[0])
    dead = json.loads(cli("runs", "--status", "dead", "--json").stdout)
    assert [(r["job"], r["exit_code"]) for r in dead] == [("bad", 1)]
    assert len(json.loads(cli("runs", "ok", "--limit", "1", "--json").stdout)) == 1
    assert json.loads(cli("runs", "--since", "1h", "--json").stdout) == everything
    assert json.loads(cli("runs", "--since", "2999-01-01", "--json").stdout) == []
    table = cli("runs").stdout.splitlines()
    assert table[0].split()[:3] == ["ID", "JOB", "SLOT"]
    unknown = cli("runs", "ghost")
    assert unknown.exit_code == 2


def test_status_and_check(cli: Invoke, db: psycopg.Connection[Any]) -> None:
    never = cli("status", "--check")
    assert never.exit_code == 3
    assert "no tick has ever run" in never.stderr
    _job(cli, "ok", "true")
    _one_run(cli, "ok")
    _tick(db)
    healthy = cli("status", "--check", "--json")
    assert healthy.exit_code == 0, healthy.stderr
    data = json.loads(healthy.stdout)
    assert data["healthy"] is True
    assert data["last_tick"]["worker"] == "test"
    assert data["ticks_last_hour"] == 1
    assert "all well" in cli("status").stdout
    db.execute("UPDATE job_ticks SET started_at = now() - interval '20 minutes'")
    stale = cli("status", "--check")
    assert stale.exit_code == 3
    assert "no tick for 20m" in stale.stderr
    assert cli("status", "--check", "--max-tick-age", "1h").exit_code == 0


def test_status_reports_overdue_invalid_dead(cli: Invoke, db: psycopg.Connection[Any]) -> None:
    _job(cli, "bad", "exit 1", "--max-attempts", "1")
    _one_run(cli, "bad")
    _tick(db)
    assert cli("define", "hourly", "0 * * * *", "--command", "true").exit_code == 0
    db.execute("UPDATE job_definitions SET created_at = now() - interval '1 day', "
               "schedule_since = now() - interval '1 day' WHERE name = 'hourly'")
    data = json.loads(cli("status", "--json").stdout)
    problems = "\n".join(data["problems"])
    assert "job 'bad': 1 dead run(s) not acknowledged (latest: run 1)" in problems
    assert "job 'hourly': never succeeded" in problems
    db.execute("UPDATE job_definitions SET schedule = '99 * * * *' WHERE name = 'hourly'")
    data = json.loads(cli("status", "--json").stdout)
    assert any("job 'hourly' is invalid" in p for p in data["problems"])


def test_retention_keeps_latest_success_and_failure(cli: Invoke,
                                                    db: psycopg.Connection[Any]) -> None:
    # (was `prune --older-than 30d`, gone: the one retention policy, applied by the upkeep,
    # keeps the same runs)
    _job(cli, "ok", "true")
    _job(cli, "bad", "exit 1", "--max-attempts", "1")
    for name in ("ok", "ok", "ok", "bad", "bad"):
        _one_run(cli, name)
        _tick(db)
    assert cli("ack", "--all", "bad", "--yes").exit_code == 0
    # as if they had finished 100 days ago (past the 90 days dead runs are kept)
    for table in ("job_runs", "job_attempts"):
        db.execute(f"UPDATE {table} SET finished_at = finished_at - interval '100 days', "  # noqa: S608
                   "retire_at = retire_at - interval '100 days'")
    db.execute("UPDATE job_definitions SET last_succeeded_at = last_succeeded_at - interval "
               "'100 days', last_failed_at = last_failed_at - interval '100 days'")
    assert count(db, "job_runs") == 5
    store = Store(db)
    upkeep(store, now=store.now())
    left = db.execute("SELECT d.name, r.status FROM job_runs r JOIN job_definitions d "
                      "ON d.id = r.definition_id ORDER BY 1").fetchall()
    assert left == [("bad", "dead"), ("ok", "succeeded")]
    assert count(db, "job_attempts") == 2


def test_metrics(cli: Invoke, db: psycopg.Connection[Any]) -> None:
    _job(cli, "ok", "true")
    _one_run(cli, "ok")
    _tick(db)
    result = cli("metrics")
    assert result.exit_code == 0
    lines = result.stdout.splitlines()
    samples = {line.split(" ")[0]: float(line.split(" ")[1]) for line in lines
               if not line.startswith("#")}
    assert samples['cronjobs_job_runs{job="ok",status="succeeded"}'] == 1
    assert samples['cronjobs_job_last_success_timestamp_seconds{job="ok"}'] > 0
    assert samples["cronjobs_ticks_last_hour"] == 1
    assert samples["cronjobs_backlog_runs"] == 0
    assert samples['cronjobs_job_overdue{job="ok"}'] == 0
    for line in lines:
        if line.startswith("# TYPE"):
            assert line.split()[3] == "gauge"


def test_alert_command_on_dead_and_pause_after_failures(
        cli: Invoke, db: psycopg.Connection[Any], tmp_path: Path) -> None:
    alert_log = tmp_path / "alerts.log"
    alert = (f'echo "$CRONJOBS_ALERT_EVENT $CRONJOBS_JOB $CRONJOBS_RUN_ID $CRONJOBS_EXIT_CODE" '
             f'>> {alert_log}')
    _job(cli, "doomed", "exit 5", "--max-attempts", "1", "--alert-command", alert,
         "--pause-after-failures", "2")
    first = _one_run(cli, "doomed")
    _tick(db)
    assert alert_log.read_text().splitlines() == [f"dead doomed {first} 5"]
    second = _one_run(cli, "doomed")
    _tick(db)
    lines = alert_log.read_text().splitlines()
    assert lines[1] == f"dead doomed {second} 5"
    assert lines[2].startswith(f"paused doomed {second}")
    described = json.loads(cli("describe", "doomed", "--json").stdout)["job"]
    assert described["state"] == "paused"
    assert "paused after 2 consecutive failures" in described["pause_note"]


def test_global_alert_command_and_alert_on_failure(cli: Invoke, db: psycopg.Connection[Any],
                                                   tmp_path: Path) -> None:
    alert_log = tmp_path / "alerts.log"
    _job(cli, "flaky", "exit 1", "--max-attempts", "2", "--backoff", "1h",
         "--alert-on-failure")
    _one_run(cli, "flaky")
    _tick(db, alert_command=f'echo "$CRONJOBS_ALERT_EVENT $CRONJOBS_STATUS" >> {alert_log}')
    assert alert_log.read_text() == "failed failed\n"



def test_time_options_take_dates_and_durations(cli: Invoke, db: psycopg.Connection[Any]) -> None:
    """A date ends a range with its whole day; a start may be a duration back from now."""
    assert cli("define", "noon", "0 12 * * *", "--command", "true").exit_code == 0
    result = cli("backfill", "--yes", "noon", "--from", "2020-01-01", "--to", "2020-01-02",
                 "--json")
    assert result.exit_code == 0, result.stderr
    assert db.execute("SELECT count(*) FROM job_runs").fetchone() == (2,)
    result = cli("explain", "noon", "--from", "2020-01-02", "--to", "2020-01-02")
    assert result.exit_code == 0, result.stderr
    assert "2020-01-02 12:00 UTC" in result.stdout
    assert "2020-01-01 12:00 UTC" not in result.stdout
    result = cli("runs", "noon", "--since", "1h")
    assert result.exit_code == 0, result.stderr
    assert result.stdout.count("2020-01-0") == 2  # created just now, for 2020's slots
