"""`cronjobs define` on a job that exists changes the options given and keeps the rest,
prints the diff it made (and carries it in --json), and refuses a change of kind unless
--replace-target."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import psycopg
import pytest

from conftest import Invoke, clean_env, count, snapshot, wait_for
from cronjobs.core.declarations import fields_of
from cronjobs.core.spec import FIELDS, Field, build_spec
from cronjobs.durations import format_duration

# the fields whose non-default value cannot be worked out from their bounds or choices
VALUES = {
    "tz": "Europe/Berlin",
    "command": "sleep 30",
    "handler": "other_handler",
    "payload": '{"days": 7}',
    "alert_command": "alert.sh",
    "group": "reports",
    "notify": "https://hooks.example.com/services/T0/secret",
}
DEFAULTS = fields_of(build_spec(name="job", schedule="@daily"))


def _non_default(field: Field) -> list[str]:
    """``field``'s option with a value other than its default (a new field is covered
    without a word here, unless its value cannot be worked out: then it needs one)."""
    if field.name in VALUES:
        return [field.option, VALUES[field.name]]
    if field.form == "boolean":
        return [field.option]
    if field.choices:
        default = DEFAULTS[field.name]
        other = [c for c in field.choices if default not in (c, [c])]
        return [field.option, other[-1]]
    if field.form == "integer":
        return [field.option, str(field.limits[1])]
    if field.form == "duration":
        return [field.option, format_duration(field.limits[1])]
    pytest.fail(f"field {field.name!r}: give it a non-default value in VALUES")


def _json(cli: Invoke, *args: str) -> dict[str, Any]:
    result = cli(*args, "--json")
    assert result.exit_code == 0, (args, result.stderr)
    data: dict[str, Any] = json.loads(result.stdout)
    return data


def _exported(cli: Invoke, name: str) -> dict[str, Any]:
    """The job's fields that differ from their defaults, as a jobs file writes them."""
    jobs: dict[str, Any] = json.loads(cli("export", name, "--show-secrets", "--format",
                                          "json").stdout)["jobs"]
    return dict(jobs[name])


@pytest.mark.parametrize("field", [f for f in FIELDS if not f.argument],
                         ids=lambda field: field.name)
def test_a_schedule_change_keeps_every_other_field(cli: Invoke, field: Field) -> None:
    target = [] if field.name in ("command", "handler") else ["--command", "true"]
    _json(cli, "define", "job", "* * * * *", *target, *_non_default(field))
    before = _exported(cli, "job")
    assert field.name in before, f"{field.name}: its value in this test is its default"
    changed = _json(cli, "define", "job", "*/5 * * * *")
    assert changed["outcome"] == "updated"
    assert list(changed["changes"]) == ["schedule"]
    assert _exported(cli, "job") == before | {"schedule": "*/5 * * * *"}
    # and without SCHEDULE, a change of another option keeps it and the rest
    again = _json(cli, "define", "job", "--max-attempts", "7" if field.name != "max_attempts"
                  else "8")
    assert list(again["changes"]) == ["max_attempts"]
    kept = _exported(cli, "job")
    assert kept | {"max_attempts": before.get("max_attempts")} == before | {
        "schedule": "*/5 * * * *", "max_attempts": before.get("max_attempts")}


def test_a_command_job_rescheduled_stays_a_command_job_and_shows_the_diff(
        cli: Invoke) -> None:
    """A command job defined again to change its schedule and zone kept its command."""
    assert cli("define", "sleeper", "* * * * *", "--command", "sleep 30").exit_code == 0
    result = cli("define", "sleeper", "*/5 * * * *", "--tz", "Europe/Berlin")
    assert result.exit_code == 0, result.stderr
    lines = result.stdout.splitlines()
    assert lines[0] == "updated sleeper: */5 * * * * (Every 5 minutes (Europe/Berlin))"
    assert lines[1].startswith("command: sleep 30; next ")
    assert lines[2:] == [
        "    schedule: '* * * * *' -> '*/5 * * * *'",
        "      (Every minute (UTC) -> Every 5 minutes (Europe/Berlin))",
        "    tz: 'UTC' -> 'Europe/Berlin'",
    ]
    job = _json(cli, "describe", "sleeper")["job"]
    assert (job["kind"], job["command"], job["handler"]) == ("command", "sleep 30", None)


def test_the_diff_in_json_and_a_return_to_the_default(cli: Invoke) -> None:
    created = _json(cli, "define", "backup", "@daily", "--command", "backup.sh",
                    "--max-attempts", "5", "--notify", "https://hooks.example.com/T0/secret")
    assert created["outcome"] == "created" and created["changes"] is None
    changed = _json(cli, "define", "backup", "--command", "backup.sh --full",
                    "--reset", "max-attempts", "--reset", "notify")
    assert changed["outcome"] == "updated"
    assert changed["changes"] == {
        "command": {"old": "backup.sh", "new": "backup.sh --full"},
        "max_attempts": {"old": 5, "new": 3, "default": True},
        "notify": {"old": ["https://hooks.example.com/***"], "new": [], "default": True},
    }
    assert changed["job"]["max_attempts"] == 3 and changed["job"]["notify"] == []
    text = cli("define", "backup", "--max-attempts", "4", "--payload", '{"full": true}')
    assert text.exit_code == 0, text.stderr
    assert text.stdout.splitlines()[2:] == ["    payload: {} -> {\"full\": true}",
                                            "    max_attempts: 3 -> 4"]


def test_no_change_says_so(cli: Invoke, db: psycopg.Connection[Any]) -> None:
    assert cli("define", "tidy", "@hourly", "--command", "true").exit_code == 0
    before = snapshot(db)
    for args in ((), ("@hourly",), ("--command", "true"), ("--reset", "max-attempts")):
        data = _json(cli, "define", "tidy", *args)
        assert (data["outcome"], data["changes"]) == ("unchanged", {}), args
        text = cli("define", "tidy", *args)
        assert text.exit_code == 0
        assert text.stdout.splitlines()[0] == "no change to tidy: @hourly (Every hour (UTC))"
        assert len(text.stdout.splitlines()) == 2
    assert snapshot(db) == before


@pytest.mark.parametrize(("first", "then", "message"), [
    (["--command", "sleep 30"], ["--handler", "sleeper"],
     "error: job 'job' runs a shell command: --handler would make it run a Python handler "
     "instead; add --replace-target to change what it runs\n"),
    ([], ["--command", "sleep 30"],
     "error: job 'job' runs handler 'job': --command would make it run a shell command "
     "instead; add --replace-target to change what it runs\n"),
    (["--handler", "other"], ["--command", "sleep 30", "--tz", "Europe/Berlin"],
     "error: job 'job' runs handler 'other': --command would make it run a shell command "
     "instead; add --replace-target to change what it runs\n"),
])
def test_a_change_of_kind_needs_replace_target(cli: Invoke, db: psycopg.Connection[Any],
                                               first: list[str], then: list[str],
                                               message: str) -> None:
    assert cli("define", "job", "@daily", *first).exit_code == 0
    before = snapshot(db)
    for schedule in ([], ["@hourly"]):
        refused = cli("define", "job", *schedule, *then)
        assert (refused.exit_code, refused.stdout, refused.stderr) == (2, "", message)
    assert snapshot(db) == before
    replaced = _json(cli, "define", "job", *then, "--replace-target")
    assert replaced["outcome"] == "updated"
    kind = "command" if "--command" in then else "handler"
    assert replaced["job"]["kind"] == kind
    assert set(replaced["changes"]) >= {"command", "handler"}
    assert "default" not in replaced["changes"]["command"]


def test_a_new_target_of_the_same_kind_is_an_ordinary_change(cli: Invoke) -> None:
    assert cli("define", "shell", "@daily", "--command", "a.sh").exit_code == 0
    assert cli("define", "py", "@daily", "--handler", "first").exit_code == 0
    shell = _json(cli, "define", "shell", "--command", "b.sh")
    assert shell["changes"] == {"command": {"old": "a.sh", "new": "b.sh"}}
    py = _json(cli, "define", "py", "--handler", "second")
    assert py["changes"] == {"handler": {"old": "first", "new": "second"}}
    # --replace-target with no change of kind changes nothing more
    assert _json(cli, "define", "py", "--replace-target")["outcome"] == "unchanged"


@pytest.mark.parametrize(("args", "message"), [
    (["new_job", "--max-attempts", "5"],
     "error: no job named 'new_job': give its SCHEDULE to create it\n"),
    (["tidy", "--reset", "bogus"], "error: invalid --reset 'bogus': use one of tz, "),
    (["tidy", "--reset", "command"], "error: invalid --reset 'command': use one of tz, "),
    (["tidy", "--reset", "timeout", "--timeout", "5m"],
     "error: --reset timeout and --timeout cannot be used together\n"),
    (["tidy", "--command", "x", "--handler", "y", "--replace-target"],
     "error: --command and --handler cannot be used together: "),
    (["tidy", "--tz", "Mars/Olympus"], "error: unknown time zone"),
])
def test_bad_updates_write_nothing(cli: Invoke, db: psycopg.Connection[Any], args: list[str],
                                   message: str) -> None:
    assert cli("define", "tidy", "@hourly", "--command", "true").exit_code == 0
    before = snapshot(db)
    result = cli("define", *args)
    assert result.exit_code == 2, result.stderr
    assert result.stderr.startswith(message) and result.stderr.count("\n") == 1, result.stderr
    assert snapshot(db) == before


def test_a_jobs_file_states_the_whole_job(cli: Invoke, tmp_path: Path) -> None:
    """A key left out of a jobs file returns to its default, and apply's diff says so."""
    path = tmp_path / "jobs.toml"
    path.write_text('[jobs.report]\nschedule = "@daily"\ncommand = "r.sh"\n'
                    'max_attempts = 5\ntimeout = "2h"\n')
    assert cli("apply", str(path)).exit_code == 0
    assert cli("define", "report", "--lease", "2m").exit_code == 0  # by hand, then the file
    path.write_text('[jobs.report]\nschedule = "@daily"\ncommand = "r.sh"\ntimeout = "2h"\n')
    dry = cli("apply", str(path), "--dry-run")
    assert dry.stdout.splitlines()[1:4] == ["~ report",
                                            "    max_attempts: 5 -> 3 (default)",
                                            "    lease: '2m' -> '1m' (default)"]
    changes = _json(cli, "apply", str(path))["changed"][0]["changes"]
    assert changes == {"max_attempts": {"old": 5, "new": 3, "default": True},
                       "lease": {"old": "2m", "new": "1m", "default": True}}


# imports the CLI, says so, and runs the command it is given once told to go (a line on
# stdin): its wait for the lock starts at once, well within the CLI's lock_timeout
READY_THEN_RUN = """
import sys
from cronjobs.cli import main
print("ready", flush=True)
sys.stdin.readline()
main(sys.argv[1:])
"""


def test_two_updates_at_once_both_take_effect(cli: Invoke, database_url: str,
                                              db: psycopg.Connection[Any]) -> None:
    """Each update reads the job under its row lock: neither undoes the other's option."""
    assert cli("define", "job", "@daily", "--command", "true").exit_code == 0
    updates = [subprocess.Popen([sys.executable, "-c", READY_THEN_RUN, "--database-url",
                                 database_url, "define", "job", *args], env=clean_env(),
                                stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE, text=True)
               for args in (["--max-attempts", "9"], ["--timeout", "5m"])]
    for update in updates:
        assert update.stdout is not None and update.stdout.readline() == "ready\n"
    waiting = ("SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() "
               "AND wait_event_type = 'Lock'")
    with psycopg.connect(database_url) as holder:  # a transaction holding the job's row
        holder.execute("SELECT 1 FROM job_definitions WHERE name = 'job' FOR UPDATE")
        for update in updates:
            assert update.stdin is not None
            update.stdin.write("go\n")
            update.stdin.flush()
        wait_for(lambda: db.execute(waiting).fetchone() == (2,), "both updates waiting")
    for update in updates:  # the holder committed: they run, one after the other
        _, err = update.communicate(timeout=60)
        assert update.returncode == 0, err
    row = db.execute("SELECT max_attempts, timeout, command FROM job_definitions").fetchone()
    assert row is not None
    assert (row[0], row[1].total_seconds(), row[2]) == (9, 300, "true")
    assert count(db, "job_definitions") == 1
