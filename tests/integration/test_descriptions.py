"""Schedules in words in every place that shows a schedule (define, describe, next, list),
and the day extensions end to end: materialisation, catch-up, explain and next agree."""

from __future__ import annotations

import datetime as dt
import json
from typing import Any

import psycopg

from conftest import Invoke, count

BERLIN_LAST_DAY = "At 03:00 on the last day of the month (Europe/Berlin)"
WORKING_HOURS = "Every 15 minutes, between 09:00 and 17:59, Monday through Friday (UTC)"


def _ok(cli: Invoke, *args: str) -> str:
    result = cli(*args)
    assert result.exit_code == 0, (args, result.stderr)
    return str(result.stdout)


def test_define_shows_the_schedule_in_words(cli: Invoke) -> None:
    data = json.loads(_ok(cli, "define", "close", "0 3 L * *", "--tz", "Europe/Berlin",
                          "--command", "true", "--json"))
    assert data["description"] == BERLIN_LAST_DAY
    assert list(data) == ["outcome", "job", "description", "next", "warning", "crowding",
                          "changes"]
    assert data["changes"] is None  # a new job: nothing changed
    assert data["crowding"] is None  # alone in its minute
    text = _ok(cli, "define", "close", "0 3 L * *", "--tz", "Europe/Berlin", "--command",
               "true")
    # the confirmation says it in words; `describe` has it among the settings
    assert text.splitlines()[0] == f"no change to close: 0 3 L * * ({BERLIN_LAST_DAY})"
    assert f"  in words           {BERLIN_LAST_DAY}\n" in _ok(cli, "describe", "close")


def test_describe_shows_the_schedule_in_words(cli: Invoke) -> None:
    _ok(cli, "define", "poll", "*/15 9-17 * * 1-5", "--command", "true")
    data = json.loads(_ok(cli, "describe", "poll", "--json"))
    assert data["description"] == WORKING_HOURS
    assert list(data) == ["job", "description", "next", "recent_runs"]
    assert f"in words           {WORKING_HOURS}\n" in _ok(cli, "describe", "poll")


def test_next_shows_the_schedule_in_words_before_the_instants(cli: Invoke) -> None:
    text = _ok(cli, "next", "0 3 L * *", "--tz", "Europe/Berlin", "--from", "2026-01-01",
               "--count", "2")
    lines = text.splitlines()
    assert lines[0] == BERLIN_LAST_DAY
    assert lines[1] == ""
    assert lines[2].startswith("TIME (UTC)")  # the reader's zone (TZ=UTC here), then the job's
    assert lines[3] == "2026-01-31 02:00 UTC  2026-01-31 03:00 CET"
    assert lines[4] == "2026-02-28 02:00 UTC  2026-02-28 03:00 CET"
    data = json.loads(_ok(cli, "next", "0 3 L * *", "--tz", "Europe/Berlin", "--json"))
    assert data["description"] == BERLIN_LAST_DAY
    # A job's H is its own: the description says which minute its name picked.
    _ok(cli, "define", "hashed", "H * * * *", "--command", "true")
    data = json.loads(_ok(cli, "next", "hashed", "--json", "--count", "1"))
    minute = dt.datetime.fromisoformat(data["next"][0]["utc"]).minute
    assert data["description"] == (
        f"Once an hour, at minute {minute} (fixed for this job) (UTC)")
    # Shown in another zone, the schedule is still described in its own.
    data = json.loads(_ok(cli, "next", "hashed", "--tz", "Asia/Tokyo", "--json"))
    assert data["description"].endswith("(fixed for this job) (UTC)")


def test_list_shows_descriptions_with_wide_and_in_json(cli: Invoke,
                                                       db: psycopg.Connection[Any]) -> None:
    _ok(cli, "define", "close", "0 3 L * *", "--tz", "Europe/Berlin", "--command", "true")
    _ok(cli, "define", "poll", "*/15 9-17 * * 1-5", "--command", "true")
    _ok(cli, "define", "broken", "@daily", "--command", "true")
    db.execute("UPDATE job_definitions SET timezone = 'Atlantis/Capital' WHERE name = 'broken'")
    narrow = _ok(cli, "list")
    assert "DESCRIPTION" not in narrow
    assert BERLIN_LAST_DAY not in narrow
    wide = _ok(cli, "list", "--wide").splitlines()
    assert wide[0].split()[-1] == "DESCRIPTION"
    rows = {line.split()[0]: line for line in wide[1:4]}
    assert rows["close"].endswith(BERLIN_LAST_DAY)
    assert rows["poll"].endswith(WORKING_HOURS)
    assert rows["broken"].endswith(" -")
    column = wide[0].index("DESCRIPTION")
    assert rows["close"][column:] == BERLIN_LAST_DAY
    listed = {e["name"]: e for e in json.loads(_ok(cli, "list", "--json"))}
    assert listed["close"]["description"] == BERLIN_LAST_DAY
    assert listed["poll"]["description"] == WORKING_HOURS
    assert listed["broken"]["description"] is None
    assert listed["broken"]["state"] == "invalid"


def test_list_wide_reads_its_environment_variable(cli: Invoke) -> None:
    _ok(cli, "define", "poll", "*/15 9-17 * * 1-5", "--command", "true")
    result = cli("list", env={"CRONJOBS_LIST_WIDE": "1"})
    assert result.exit_code == 0, result.stderr
    assert result.stdout.splitlines()[0].split()[-1] == "DESCRIPTION"


# -- the day extensions, end to end ---------------------------------------------------------

# The last Sunday of each month of 2024 at 02:30 in Europe/Berlin. The last Sundays of March
# and October are the nights the clocks change: 02:30 is skipped in March (the run comes at
# 03:00 CEST, 01:00 UTC) and happens twice in October (the run comes once, at 02:30 CEST).
LAST_SUNDAYS_2024 = [
    "2024-01-28T01:30", "2024-02-25T01:30", "2024-03-31T01:00", "2024-04-28T00:30",
    "2024-05-26T00:30", "2024-06-30T00:30", "2024-07-28T00:30", "2024-08-25T00:30",
    "2024-09-29T00:30", "2024-10-27T00:30", "2024-11-24T01:30", "2024-12-29T01:30",
]


def _utc(text: str) -> dt.datetime:
    return dt.datetime.fromisoformat(text).replace(tzinfo=dt.UTC)


def test_extensions_materialise_catch_up_explain_and_next_alike(
        cli: Invoke, db: psycopg.Connection[Any]) -> None:
    start, now = _utc("2024-01-01T00:00"), _utc("2024-12-31T12:00")
    for name, catchup in (("all_of_them", "all"), ("the_latest", "latest")):
        _ok(cli, "define", name, "30 2 * * sunL", "--tz", "Europe/Berlin", "--catchup",
            catchup, "--command", "true", "--overlap", "allow")
    db.execute("UPDATE job_definitions SET cursor_at = %s, next_due_at = NULL", (start,))
    tick = cli("tick", "--now", now.isoformat(), "--max-runs", "0")
    assert tick.exit_code == 0, tick.stderr
    assert tick.stderr.startswith("tick: materialised 13, skipped 11,"), tick.stderr

    expected = [_utc(t) for t in LAST_SUNDAYS_2024]
    runs = db.execute(
        "SELECT d.name, r.scheduled_for FROM job_runs r JOIN job_definitions d "
        "ON d.id = r.definition_id ORDER BY d.name, r.scheduled_for").fetchall()
    assert [r[1] for r in runs if r[0] == "all_of_them"] == expected
    assert [r[1] for r in runs if r[0] == "the_latest"] == [expected[-1]]
    skips = db.execute(
        "SELECT reason, first_slot, last_slot, slot_count FROM job_skips s "
        "JOIN job_definitions d ON d.id = s.definition_id WHERE d.name = 'the_latest'"
    ).fetchall()
    assert skips == [("coalesced", expected[0], expected[-2], 11)]
    assert count(db, "job_runs") == 13

    explained = json.loads(_ok(cli, "explain", "all_of_them", "--from", start.isoformat(),
                               "--to", now.isoformat(), "--json"))
    assert [_utc(s["first_slot"][:16]) for s in explained["slots"]] == expected
    assert {s["outcome"] for s in explained["slots"]} == {"queued"}

    preview = json.loads(_ok(cli, "next", "30 2 * * sunL", "--tz", "Europe/Berlin", "--from",
                             start.isoformat(), "--count", "12", "--json"))
    assert [_utc(s["utc"][:16]) for s in preview["next"]] == expected
    assert preview["description"] == (
        "At 02:30 on the last Sunday of the month (Europe/Berlin)")


def test_a_bad_extension_is_a_usage_error_naming_the_field(cli: Invoke,
                                                           db: psycopg.Connection[Any]) -> None:
    for schedule, fragment in [
        ("0 0 * * fri#6", "day-of-week field 'fri#6': in 'fri#6' the number after '#' must "
                          "be 1-5"),
        ("0 0 L-31 * *", "day-of-month field 'L-31'"),
        ("0 L * * *", "hour field 'L': 'L' and 'W' belong in the day fields"),
        ("0 0 * * 7-mon", "(write 'sun-mon' instead)"),
    ]:
        for args in (["define", "job", schedule, "--command", "true"], ["next", schedule]):
            result = cli(*args)
            assert result.exit_code == 2, (args, result.stdout)
            assert result.stdout == ""
            assert result.stderr.count("\n") == 1
            assert fragment in result.stderr, result.stderr
    assert count(db, "job_definitions") == 0
