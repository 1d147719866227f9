"""define / list / describe / pause / resume / remove / next through the CLI."""

from __future__ import annotations

import datetime as dt
import json
import re
from typing import Any

import psycopg
import pytest

from conftest import Invoke, count, snapshot


def _define(cli: Invoke, *args: str) -> dict[str, Any]:
    result = cli("define", *args, "--json")
    assert result.exit_code == 0, result.stderr
    data: dict[str, Any] = json.loads(result.stdout)
    return data


@pytest.mark.smoke
def test_define_list_describe_next(cli: Invoke, db: psycopg.Connection[Any]) -> None:
    created = _define(cli, "nightly_cleanup", "0 3 * * *", "--tz", "Europe/Berlin")
    assert created["outcome"] == "created"
    job = created["job"]
    assert job["kind"] == "handler"
    assert job["handler"] == "nightly_cleanup"
    assert job["timezone"] == "Europe/Berlin"
    assert job["catchup"] == "latest"
    assert job["overlap"] == "skip"
    assert len(created["next"]) == 5
    assert all(slot["local"].endswith(("+01:00", "+02:00")) for slot in created["next"])
    assert all(slot["local"][11:19] == "03:00:00" for slot in created["next"])

    listed = cli("list")
    assert listed.exit_code == 0
    assert "nightly_cleanup" in listed.stdout
    assert "Europe/Berlin" in listed.stdout

    described = json.loads(cli("describe", "nightly_cleanup", "--json").stdout)
    assert described["job"]["name"] == "nightly_cleanup"
    assert described["recent_runs"] == []
    assert len(described["next"]) == 5

    nxt = cli("next", "nightly_cleanup", "--count", "3", "--json")
    assert nxt.exit_code == 0, nxt.stderr
    assert [s["utc"] for s in json.loads(nxt.stdout)["next"]] == [
        s["utc"] for s in created["next"][:3]]
    assert count(db, "job_definitions") == 1


def test_define_is_idempotent_and_updates(cli: Invoke, db: psycopg.Connection[Any]) -> None:
    args = ("backup", "0 2 * * *", "--command", "echo backup > /dev/null")
    assert _define(cli, *args)["outcome"] == "created"
    before = snapshot(db)
    assert _define(cli, *args)["outcome"] == "unchanged"
    assert snapshot(db) == before
    cursor_before = db.execute("SELECT cursor_at FROM job_definitions").fetchone()
    updated = _define(cli, *args, "--timeout", "5m")
    assert updated["outcome"] == "updated"
    assert updated["job"]["timeout_seconds"] == 300
    assert db.execute("SELECT cursor_at FROM job_definitions").fetchone() == cursor_before
    rescheduled = _define(cli, "backup", "30 4 * * *", "--command", "echo backup > /dev/null")
    assert rescheduled["outcome"] == "updated"
    assert rescheduled["job"]["next_due_at"].endswith("04:30:00+00:00")
    assert count(db, "job_definitions") == 1


def test_define_confirms_in_two_lines_and_describe_shows_the_rest(cli: Invoke) -> None:
    result = cli("define", "report", "@daily", "--payload", '{"days": 7}', "--overlap", "queue")
    assert result.exit_code == 0, result.stderr
    lines = result.stdout.splitlines()
    assert len(lines) == 2
    assert lines[0] == "defined report: @daily (At 00:00 (UTC))"
    assert re.fullmatch(r"handler: report; next \d{4}-\d\d-\d\d 00:00 UTC \(in \d+ (h|min)\)",
                        lines[1]), lines[1]
    again = cli("define", "report", "@daily", "--payload", '{"days": 7}', "--overlap", "queue")
    assert again.stdout.splitlines()[0] == "no change to report: @daily (At 00:00 (UTC))"
    # nothing is lost: the settings and the next fire times are `describe`'s
    shown = cli("describe", "report").stdout
    assert "overlap" in shown and "queue" in shown
    assert "next fire times:" in shown
    assert shown.count(" 00:00 UTC (in ") == 5


def test_every_option_is_stored(cli: Invoke) -> None:
    job = _define(cli, "full", "*/15 * * * *", "--tz", "America/New_York", "--catchup", "all",
                  "--catchup-limit", "7", "--starting-deadline", "10m", "--overlap", "allow",
                  "--max-attempts", "5", "--backoff", "2m", "--timeout", "none",
                  "--lease", "2m", "--handler", "other_handler",
                  "--payload", '{"a": [1, 2]}')["job"]
    assert job | {
        "catchup": "all", "catchup_limit": 7, "starting_deadline_seconds": 600,
        "overlap": "allow", "max_attempts": 5, "backoff_seconds": 120, "timeout_seconds": None,
        "lease_seconds": 120, "handler": "other_handler", "payload": {"a": [1, 2]},
    } == job


def test_pause_resume_remove(cli: Invoke, db: psycopg.Connection[Any]) -> None:
    _define(cli, "tidy", "*/5 * * * *")
    paused = cli("pause", "tidy", "--note", "disk maintenance", "--json")
    assert paused.exit_code == 0, paused.stderr
    assert json.loads(paused.stdout)["state"] == "paused"
    assert "disk maintenance" in cli("describe", "tidy").stdout
    resumed = json.loads(cli("resume", "tidy", "--json").stdout)
    assert resumed["state"] == "active"
    removed = cli("remove", "tidy")
    assert removed.exit_code == 0
    assert removed.stdout == "removed tidy (0 waiting run(s) cancelled; its history stays)\n"
    assert "tidy" not in cli("list").stdout
    assert count(db, "job_definitions") == 1  # the row stays, for history
    again = _define(cli, "tidy", "*/5 * * * *")
    assert again["outcome"] == "created"


def test_resume_records_paused_slots_and_does_not_replay(cli: Invoke,
                                                         db: psycopg.Connection[Any]) -> None:
    _define(cli, "often", "* * * * *")
    assert cli("pause", "often").exit_code == 0
    # Pretend the job was paused for 10 minutes: move its cursor back.
    db.execute("UPDATE job_definitions SET cursor_at = now() - interval '10 minutes'")
    assert cli("resume", "often").exit_code == 0
    reason, slots = db.execute("SELECT reason, slot_count FROM job_skips").fetchone() or ()
    assert reason == "paused"
    assert slots in (10, 11)  # depends on where in the minute `now()` falls
    assert count(db, "job_runs") == 0
    # the next slot is after the instant of the resume (its updated_at), not one it skipped;
    # not compared with now(): a minute may begin between the resume and this query
    next_due = db.execute("SELECT next_due_at > updated_at, cursor_at = updated_at "
                          "FROM job_definitions").fetchone()
    assert next_due == (True, True)


def test_next_of_a_bare_schedule_needs_no_database(monkeypatch: pytest.MonkeyPatch) -> None:
    from conftest import make_invoke

    monkeypatch.setenv("CRONJOBS_DATABASE_URL", "postgresql://nobody:pw@127.0.0.1:1/none")
    result = make_invoke([])("next", "30 2 * * *", "--tz", "Europe/Berlin",
                             "--from", "2026-10-24T00:00:00", "--count", "3", "--json")
    assert result.exit_code == 0, result.stderr
    data = json.loads(result.stdout)
    assert [s["utc"] for s in data["next"]] == [
        "2026-10-24T00:30:00+00:00", "2026-10-25T00:30:00+00:00", "2026-10-26T01:30:00+00:00"]


def test_next_text_output_is_a_table(cli: Invoke) -> None:
    result = cli("next", "@hourly", "--from", "2026-01-01T00:10:00Z", "--count", "2")
    assert result.exit_code == 0
    lines = result.stdout.splitlines()
    assert lines[:2] == ["Every hour (UTC)", ""]  # the schedule in words first
    assert lines[2].split() == ["TIME", "(UTC)", "JOB'S", "CLOCK"]
    # --from given: absolute times, no "in 3 h" relative to an instant the reader did not say
    assert re.split(r"\s{2,}", lines[3]) == ["2026-01-01 01:00 UTC", "2026-01-01 01:00 UTC"]


def test_list_json_shape(cli: Invoke) -> None:
    _define(cli, "a", "0 * * * *")
    data = json.loads(cli("list", "--json").stdout)
    assert isinstance(data, list) and len(data) == 1
    assert {"name", "schedule", "timezone", "state", "next_due_at", "last_run_status",
            "last_run_at", "kind", "handler", "command", "payload"} <= set(data[0])
    assert dt.datetime.fromisoformat(data[0]["next_due_at"]).tzinfo is not None


def test_empty_list_says_how_to_start(cli: Invoke) -> None:
    result = cli("list")
    assert result.exit_code == 0
    assert "cronjobs define" in result.stdout
