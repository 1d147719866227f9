"""Output sized for people (docs/reference/output.md): explain folds long ranges; commands
that change something confirm in a few lines, or say nothing with --quiet, or give JSON; one time
format (local or --utc, ISO 8601 in JSON); `status` on a terminal says each problem once;
the embedded server's note appears once, on a terminal only, never in a tick's logs; -v
log lines name the job and run they concern; no Python-isms in the text."""

from __future__ import annotations

import datetime as dt
import json
import os
import pty
import re
import select
import subprocess
import sys
from pathlib import Path
from typing import Any

import psycopg

from conftest import Invoke, clean_env, run_cronjobs
from cronjobs.core.explain import MAX_ENTRIES, MAX_SLOTS

MINUTE = dt.timedelta(minutes=1)

# succeeded (or dead) runs of job `hello`, one per minute from %(first)s to %(last)s
SEED_RUNS = """
INSERT INTO job_runs (definition_id, scheduled_for, trigger, status, attempt, max_attempts,
                      eligible_at, finished_at, error)
SELECT d.id, slot, 'schedule', %(status)s, 1, 1, slot, slot + interval '1 second',
       CASE WHEN %(status)s = 'dead' THEN 'exit code 1' END
FROM job_definitions AS d,
     generate_series(%(first)s::timestamptz, %(last)s::timestamptz, interval '1 minute')
         AS slot
WHERE d.name = 'hello'
"""


def _ok(cli: Invoke, *args: str) -> str:
    result = cli(*args)
    assert result.exit_code == 0, result.stderr
    return result.stdout


def _now(db: psycopg.Connection[Any]) -> dt.datetime:
    row = db.execute("SELECT date_trunc('minute', now())").fetchone()
    assert row is not None
    return row[0]  # type: ignore[no-any-return]


def _minutely(cli: Invoke, db: psycopg.Connection[Any], defined_ago: dt.timedelta) -> dt.datetime:
    """Job `hello`, every minute, defined ``defined_ago`` (its ticks kept up since)."""
    _ok(cli, "define", "hello", "* * * * *", "--command", "true")
    now = _now(db)
    db.execute("UPDATE job_definitions SET created_at = %(at)s, schedule_since = %(at)s",
               {"at": now - defined_ago})
    return now


def _slots_between(start: dt.datetime, end: dt.datetime) -> int:
    """The per-minute slots s with start <= s <= end."""
    first = start.replace(second=0, microsecond=0)
    if first < start:
        first += MINUTE
    return (end - first) // MINUTE + 1


# -- explain folds ---------------------------------------------------------------------------

def test_explain_of_a_new_minutely_job_is_a_few_lines(cli: Invoke,
                                                     db: psycopg.Connection[Any]) -> None:
    _ok(cli, "define", "hello", "* * * * *", "--command", "true")
    text = _ok(cli, "explain", "hello")
    lines = text.splitlines()
    assert len(lines) <= 4, text  # was 1,441 lines: one per minute of the day
    before = [line for line in lines if "before the job was defined" in line]
    assert len(before) == 1
    count = int(re.search(r"\((\d[\d,]*) slots\)", before[0]).group(1).replace(",", ""))  # type: ignore[union-attr]
    assert 1438 <= count <= 1440
    assert "not-a-slot" in before[0]
    # --json folds the same way: one entry with its count, a few hundred bytes, not 361 KB
    result = cli("explain", "hello", "--json")
    data = json.loads(result.stdout)
    assert len(result.stdout) < 4000
    first = data["slots"][0]
    assert (first["outcome"], first["detail"], first["folded"]) == (
        "not-a-slot", "before the job was defined", True)
    assert first["slot_count"] == count
    start, end = (dt.datetime.fromisoformat(data[k]) for k in ("from", "to"))
    assert sum(s["slot_count"] for s in data["slots"]) == _slots_between(start, end)


def test_a_minutely_job_is_explained_over_days(cli: Invoke, db: psycopg.Connection[Any]) -> None:
    now = _minutely(cli, db, dt.timedelta(days=2))
    # a day of runs that succeeded, one that died in the middle, then a day without records
    first, last = now - dt.timedelta(days=2) + MINUTE, now - dt.timedelta(days=1)
    middle = first + dt.timedelta(hours=12)
    db.execute(SEED_RUNS, {"status": "succeeded", "first": first, "last": middle - MINUTE})
    db.execute(SEED_RUNS, {"status": "dead", "first": middle, "last": middle})
    db.execute(SEED_RUNS, {"status": "succeeded", "first": middle + MINUTE, "last": last})
    data = json.loads(_ok(cli, "explain", "hello", "--from", "3d", "--json"))
    entries = [(s["outcome"], s["slot_count"], s["first_run_id"] is not None)
               for s in data["slots"]]
    assert entries[0][0] == "not-a-slot"  # the day before it was defined: one entry
    assert entries[1:4] == [("succeeded", 720, True), ("dead", 1, False),
                            ("succeeded", 720 - 1, True)]
    assert data["slots"][2]["run"]["status"] == "dead"  # a run that needs a look: itself
    assert entries[4][0] == "unknown"  # no record: one entry for the day
    assert len(entries) == 5
    start, end = (dt.datetime.fromisoformat(data[k]) for k in ("from", "to"))
    assert sum(s["slot_count"] for s in data["slots"]) == _slots_between(start, end)
    # the folded runs name their first and last run
    runs = data["slots"][1]
    assert runs["last_run_id"] - runs["first_run_id"] == 720 - 1
    # the text: one line per entry, a range with its count
    text = _ok(cli, "explain", "hello", "--from", "3d")
    lines = text.splitlines()
    assert len(lines) == 1 + 5
    assert re.search(r"\(720 slots\)\s+succeeded\s+runs \d+ to \d+: 720 runs succeeded$",
                     lines[2]), lines[2]
    assert re.search(r"\s+dead\s+run \d+ \(schedule\): dead after attempt 1 of 1: exit code 1$",
                     lines[3]), lines[3]


def test_the_cap_counts_the_entries_shown_not_the_slots(cli: Invoke,
                                                        db: psycopg.Connection[Any]) -> None:
    now = _minutely(cli, db, dt.timedelta(days=3))
    # every other minute a dead run: nothing folds, so entries pile up
    for i in range(MAX_ENTRIES // 2 + 1):
        slot = now - dt.timedelta(days=2) + 2 * i * MINUTE
        db.execute(SEED_RUNS, {"status": "dead", "first": slot, "last": slot})
    result = cli("explain", "hello", "--from", "3d")
    assert result.exit_code == 2
    assert result.stdout == ""
    assert result.stderr == (f"error: the range of hello has more than {MAX_ENTRIES:,} entries "
                             "to show, even folded: narrow it with --from and --to\n")
    assert cli("explain", "hello", "--from", "2d", "--to",
               (now - dt.timedelta(days=1)).isoformat()).exit_code == 0


def test_slots_looked_at_are_bounded(cli: Invoke) -> None:
    _ok(cli, "define", "hello", "* * * * *", "--command", "true")
    days = MAX_SLOTS // 1440 + 1
    result = cli("explain", "hello", "--from", f"{days}d")
    assert result.exit_code == 2
    assert result.stderr == (f"error: the range holds more than {MAX_SLOTS:,} slots of hello: "
                             "narrow it with --from and --to\n")
    assert cli("explain", "hello", "--from", "7d").exit_code == 0


# -- short confirmations, --quiet, --json ----------------------------------------------------

def _confirmations(cli: Invoke, db: psycopg.Connection[Any], tmp_path: Path,
                   *mode: str) -> list[tuple[str, Any]]:
    """Every command that changes something, once, in ``mode`` (nothing, --quiet, --json):
    (command, result)."""
    jobs = tmp_path / "jobs.toml"
    jobs.write_text('source = "ops"\n\n[jobs.declared]\nschedule = "@daily"\n'
                    'command = "true"\n')
    done = []

    def run(*args: str) -> Any:
        result = cli(*args, *mode)
        assert result.exit_code == 0, (args, result.stderr)
        done.append((args[0] if args[0] != "group" else f"group {args[1]}", result))
        return result

    run("define", "nightly_cleanup", "0 3 * * *", "--command", "true")
    run("pause", "nightly_cleanup", "--note", "disk maintenance")
    run("resume", "nightly_cleanup")
    run("trigger", "nightly_cleanup")
    run_id = db.execute("SELECT max(id) FROM job_runs").fetchone()[0]  # type: ignore[index]
    run("cancel", str(run_id))
    run("retry", str(run_id))
    db.execute("UPDATE job_runs SET status = 'dead', finished_at = now(), attempt = 3, "
               "max_attempts = 3, error = 'exit code 1' WHERE id = %s", (run_id,))
    run("ack", str(run_id))
    run("backfill", "--yes", "nightly_cleanup", "--from", "2020-01-01", "--to", "2020-01-02")
    run("group", "set", "reports", "--max-running", "2")
    run("group", "remove", "reports")
    run("retention", "--succeeded", "30d")
    run("apply", str(jobs))
    run("remove", "nightly_cleanup", "--yes")
    run("migrate")
    return done


def test_changes_are_confirmed_in_a_few_lines(cli: Invoke, db: psycopg.Connection[Any],
                                              tmp_path: Path) -> None:
    for command, result in _confirmations(cli, db, tmp_path):
        lines = result.stdout.splitlines()
        assert 1 <= len(lines) <= 3 or command == "apply", (command, result.stdout)
        assert result.stderr == "", (command, result.stderr)
        _plain_english(result.stdout)
    defined = cli("define", "nightly_cleanup", "0 3 * * *", "--command", "true",
                  "--tz", "Europe/Berlin")
    assert defined.stdout.splitlines()[0] == (
        "defined nightly_cleanup: 0 3 * * * (At 03:00 (Europe/Berlin))")
    assert re.fullmatch(r"command: true; next \d{4}-\d\d-\d\d \d\d:00 UTC \(in \d+ (h|min)\)\n",
                        defined.stdout.split("\n", 1)[1])


def test_quiet_says_nothing_on_success(cli: Invoke, db: psycopg.Connection[Any],
                                       tmp_path: Path) -> None:
    done = _confirmations(cli, db, tmp_path, "--quiet")
    assert len(done) == 14  # (prune, gone, no longer among them)
    for command, result in done:
        assert (result.stdout, result.stderr) == ("", ""), command
    # an error is still one line on stderr, with its exit code
    failed = cli("pause", "no_such_job", "--quiet")
    assert (failed.exit_code, failed.stdout) == (2, "")
    assert failed.stderr.startswith("error: no job named")


def test_json_confirms_with_a_document(cli: Invoke, db: psycopg.Connection[Any],
                                       tmp_path: Path) -> None:
    for command, result in _confirmations(cli, db, tmp_path, "--json"):
        data = json.loads(result.stdout)
        assert isinstance(data, dict), command
        assert result.stderr == "", command


# -- one time format --------------------------------------------------------------------------

def test_times_in_the_local_zone_or_utc_and_iso_in_json(cli: Invoke,
                                                        db: psycopg.Connection[Any]) -> None:
    _ok(cli, "define", "nightly_cleanup", "0 3 * * *", "--command", "true")
    tokyo = {"TZ": "Asia/Tokyo"}
    listed = cli("list", env=tokyo).stdout
    assert "NEXT (JST)" in listed
    assert re.search(r"\d{4}-\d\d-\d\d 12:00 JST \(in \d+ (h|min)\)", listed), listed
    # --utc, before or after the command, or from the environment
    for args, env in ((["--utc", "list"], tokyo), (["list", "--utc"], tokyo),
                      (["list"], {**tokyo, "CRONJOBS_UTC": "1"})):
        shown = cli(*args, env=env).stdout
        assert "NEXT (UTC)" in shown
        assert re.search(r"\d{4}-\d\d-\d\d 03:00 UTC \(in \d+ (h|min)\)", shown), shown
    # JSON: ISO 8601 in UTC, whatever the zone
    data = json.loads(cli("list", "--json", env=tokyo).stdout)[0]
    assert re.fullmatch(r"\d{4}-\d\d-\d\dT03:00:00\+00:00", data["next_at"])
    # no other format anywhere in the text (seconds, a Z, an ISO T)
    for args in (["list"], ["describe", "nightly_cleanup"], ["status"], ["runs"],
                 ["explain", "nightly_cleanup"], ["next", "nightly_cleanup"]):
        text = cli(*args, env=tokyo).stdout
        assert not re.search(r"\d\d:\d\d:\d\d|\d\dZ\b|\dT\d", text), (args, text)


# -- status on a terminal ---------------------------------------------------------------------

def _on_a_terminal(argv: list[str], env: dict[str, str], timeout: float = 60) -> tuple[int, str]:
    """Run ``argv`` with stdout and stderr on one pseudo-terminal: (exit code, what it
    showed)."""
    leader, follower = pty.openpty()
    process = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=follower,
                               stderr=follower, env=env)
    os.close(follower)
    shown = b""
    while True:
        ready, _, _ = select.select([leader], [], [], timeout)
        if not ready:
            process.kill()
            raise AssertionError(f"no output for {timeout}s: {shown!r}")
        try:
            chunk = os.read(leader, 65536)
        except OSError:  # the terminal closed: the process is gone
            break
        if not chunk:
            break
        shown += chunk
    os.close(leader)
    return process.wait(timeout), shown.decode().replace("\r\n", "\n")


def _exe() -> str:
    return str(Path(sys.executable).parent / "cronjobs")


def test_status_on_a_terminal_says_each_problem_once(cli: Invoke, database_url: str) -> None:
    problem = "no tick has ever run"
    code, shown = _on_a_terminal([_exe(), "status", "--check"],
                                 clean_env(CRONJOBS_DATABASE_URL=database_url, TZ="UTC"))
    assert code == 3
    assert shown.count(problem) == 1, shown
    # piped (monitoring): the report on stdout, each problem once more on stderr
    piped = cli("status", "--check")
    assert piped.exit_code == 3
    assert piped.stdout.count(problem) == 1
    assert piped.stderr.count(problem) == 1
    assert piped.stderr.startswith("problem: ")


# -- the embedded server's note ---------------------------------------------------------------

def test_the_embedded_note_appears_once_on_a_terminal_and_never_in_a_tick(
        tmp_path: Path) -> None:
    env = clean_env(CRONJOBS_HOME=str(tmp_path / "home"), TZ="UTC")
    try:
        tick = run_cronjobs("tick", env=env, timeout=180)
        assert tick.returncode == 0, tick.stderr
        # a tick's stderr (its logs, syslog from cron): the tick's summary, no banner
        assert "embedded" not in tick.stderr
        assert tick.stderr.startswith("tick: ")
        assert len(tick.stderr.splitlines()) == 1
        assert "embedded" not in run_cronjobs("tick", "--quiet", env=env).stderr
        assert run_cronjobs("tick", "--quiet", env=env).stderr == ""
        # on a terminal: once
        code, first = _on_a_terminal([_exe(), "list"], env)
        assert code == 0
        assert first.count("using embedded PostgreSQL") == 1
        assert (tmp_path / "home" / "announced").exists()
        code, second = _on_a_terminal([_exe(), "list"], env)
        assert code == 0
        assert "embedded" not in second
    finally:
        run_cronjobs("embedded", "stop", env=env)


# -- -v log lines -----------------------------------------------------------------------------

def test_verbose_log_lines_name_the_job_and_the_run(cli: Invoke, database_url: str) -> None:
    _ok(cli, "define", "nightly_cleanup", "0 3 * * *", "--command", "exit 3",
        "--max-attempts", "1")
    run_id = json.loads(_ok(cli, "trigger", "nightly_cleanup", "--json"))["id"]
    tick = run_cronjobs("tick", "-v", env=clean_env(CRONJOBS_DATABASE_URL=database_url))
    assert tick.returncode == 0, tick.stderr
    about = [line for line in tick.stderr.splitlines()
             if f"run {run_id} " in line and "cronjobs.execution" in line]
    assert len(about) == 2, tick.stderr  # started, dead
    for line in about:
        assert line.endswith(f"  job=nightly_cleanup run={run_id} attempt=1"), line
    assert any("tick finished" in line and re.search(r"  tick=\d+$", line)
               for line in tick.stderr.splitlines()), tick.stderr


# -- plain English ---------------------------------------------------------------------------

PYTHONISMS = re.compile(r"\b(True|False|None|NoneType)\b|[a-z]Error\b|Exception|Traceback")


def _plain_english(text: str) -> None:
    assert not PYTHONISMS.search(text), text


def test_messages_carry_no_python_isms(cli: Invoke, db: psycopg.Connection[Any]) -> None:
    _ok(cli, "define", "nightly_cleanup", "0 3 * * *", "--command", "true", "--payload",
        '{"dry": true}')
    for args in (["list"], ["describe", "nightly_cleanup"], ["status"], ["runs"],
                 ["explain", "nightly_cleanup"], ["retention"], ["group", "list"]):
        _plain_english(_ok(cli, *args))
    wrong = cli("define", "x", "@daily", "--command", "true", "--payload", "[1, 2]")
    assert wrong.stderr == ("error: invalid --payload: expected a JSON object such as "
                            "'{\"days\": 7}', got an array\n")
    for payload in ('"text"', "3", "true", "null"):
        _plain_english(cli("define", "x", "@daily", "--payload", payload).stderr)
