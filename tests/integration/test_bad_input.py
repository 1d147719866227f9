"""Bad input: a clear message, exit code 2, and nothing written."""

from __future__ import annotations

import datetime as dt
import json
import re
from typing import Any

import psycopg
import pytest

from conftest import Invoke, snapshot

BAD_DEFINE = [
    (["job", "61 * * * *"], "minute"),
    (["job", "* 24 * * *"], "hour"),
    (["job", "* * 0 * *"], "day-of-month"),
    (["job", "* * * 13 *"], "month"),
    (["job", "* * * * 8"], "day-of-week"),
    (["job", "0 0 30 2 *"], "never fires"),
    (["job", "*/10 * * * * *"], "6 fields"),
    (["job", "0 0 0 1 1 * 2027"], "7 fields"),
    (["job", "* * *"], "5 fields"),
    (["job", "@reboot"], "@reboot"),
    (["job", "@fortnightly"], "@fortnightly"),
    (["job", "0 3 * * *", "--tz", "Mars/Olympus_Mons"], "unknown time zone"),
    (["bad name", "0 3 * * *"], "invalid job name"),
    (["-leading-dash", "0 3 * * *"], "no such option"),
    (["_x", "0 3 * * *"], "invalid job name"),
    (["x" * 129, "0 3 * * *"], "invalid job name"),
    (["job'; DROP TABLE job_runs; --", "0 3 * * *"], "invalid job name"),
    (["job", "0 3 * * *", "--payload", "[1, 2]"], "expected a JSON object"),
    (["job", "0 3 * * *", "--payload", "{not json"], "not valid JSON"),
    (["job", "0 3 * * *", "--payload", "null"], "expected a JSON object"),
    (["job", "0 3 * * *", "--timeout", "-5m"], "invalid --timeout"),
    (["job", "0 3 * * *", "--timeout", "30d"], "between 1s and 7d"),
    (["job", "0 3 * * *", "--lease", "1s"], "between 10s and 1h"),
    (["job", "0 3 * * *", "--backoff", "forever"], "invalid --backoff"),
    (["job", "0 3 * * *", "--starting-deadline", "0s"], "greater than zero"),
    (["job", "0 3 * * *", "--max-attempts", "0"], "--max-attempts"),
    (["job", "0 3 * * *", "--max-attempts", "1000"], "--max-attempts"),
    (["job", "0 3 * * *", "--catchup", "sometimes"], "--catchup"),
    (["job", "0 3 * * *", "--overlap", "maybe"], "--overlap"),
    (["job", "0 3 * * *", "--command", "x", "--handler", "y"], "cannot be used together"),
    (["job", "0 3 * * *", "--command", "   "], "invalid --command"),
    (["job", "0 3 * * *", "--handler", "not a name"], "invalid handler name"),
]


@pytest.mark.parametrize(("args", "message"), BAD_DEFINE)
def test_bad_define(cli: Invoke, db: psycopg.Connection[Any], args: list[str],
                    message: str) -> None:
    cli("define", "existing", "0 1 * * *")
    before = snapshot(db)
    result = cli("define", *args)
    assert result.exit_code == 2, (result.stdout, result.stderr)
    assert message in result.stderr
    assert "Traceback" not in result.stderr
    assert result.stdout == ""
    assert snapshot(db) == before


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["describe", "ghost"], "no job named 'ghost'"),
        (["pause", "ghost"], "no job named 'ghost'"),
        (["resume", "ghost"], "no job named 'ghost'"),
        (["remove", "ghost"], "no job named 'ghost'"),
        (["next", "ghost"], "no job named 'ghost'"),
        (["describe", "bad name!"], "invalid job name"),
        (["pause", "existing", "--until", "yesterday"], "invalid --until"),
        (["pause", "existing", "--until", "2000-01-01T00:00:00Z"], "already past"),
        (["next", "61 * * * *"], "minute"),
        (["next", "@daily", "--tz", "Nowhere/City"], "unknown time zone"),
        (["next", "@daily", "--from", "tomorrow"], "invalid --from"),
        (["next", "@daily", "--count", "0"], "--count"),
        (["next", "@daily", "--from", "0001-01-01T00:00:00+01:00"],
         "invalid --from '0001-01-01T00:00:00+01:00': must lie between 1900-01-01 and "
         "9000-01-01 (UTC)"),
        (["define", "j", "@daily", "--timeout", "999999999w"],
         "invalid --timeout '999999999w': must be between 1s and 7d"),
        (["define", "j", "@daily", "--payload", '{"a": NaN}'], "numbers must be finite"),
        (["define", "j", "@daily", "--payload", '{"a": 1e999}'], "at most about 1.8e308"),
        (["define", "j", "@daily", "--payload", '{"a": "\\ud800"}'], "lone surrogate"),
        (["trigger", "existing", "--payload", '{"a": Infinity}'], "numbers must be finite"),
        (["runs", "--since", "999999999w"], "must be between 1s and 36500d"),
        # digits other than ASCII's are not numbers here (found by the fuzz)
        (["define", "j", "@daily", "--timeout", "\u00b2"], "invalid --timeout"),
        (["define", "j", "@daily", "--backoff", "\u0661\u0662s"], "invalid --backoff"),
        # gone: one retention policy (`cronjobs retention`), applied by every tick
        (["prune", "--older-than", "30d"], "`cronjobs prune` is gone"),
        (["tick", "--retention", "30d"], "--retention (CRONJOBS_RETENTION) is gone"),
        (["--connect-timeout", "999999999w", "list"], "must be between 1s and 36500d"),
        (["explain", "existing", "--to", "2 hours"], "invalid --to '2 hours'"),
        (["tick", "--now", "2h"], "say which way with a sign: -2h (2h ago) or +2h"),
        (["backfill", "existing", "--from", "+2h", "--to", "+3h"], "backfill is for the past"),
        (["backfill", "existing", "--from", "9999-12-31", "--to", "9999-12-31"],
         "must lie between"),
        (["nonsense-command"], "no such command"),
    ],
)
def test_bad_input_to_other_commands(cli: Invoke, db: psycopg.Connection[Any], args: list[str],
                                     message: str) -> None:
    cli("define", "existing", "0 1 * * *")
    before = snapshot(db)
    result = cli(*args)
    assert result.exit_code == 2, (result.stdout, result.stderr)
    assert message in result.stderr
    assert "Traceback" not in result.stderr
    assert snapshot(db) == before


def test_a_handler_no_app_module_registers_is_defined_with_a_warning(
        cli: Invoke, database_url: str, db: psycopg.Connection[Any], tmp_path: Any,
        monkeypatch: pytest.MonkeyPatch) -> None:
    """The handler may live in another deployment's modules: define says so, and writes."""
    from conftest import make_invoke

    (tmp_path / "myjobs.py").write_text(
        "import cronjobs\n\n@cronjobs.job('known')\ndef known(ctx):\n    pass\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    invoke = make_invoke(["--database-url", database_url, "--app", "myjobs"])
    result = invoke("define", "unknown_job", "0 3 * * *")
    assert result.exit_code == 0, result.stderr
    warning = [line for line in result.stderr.splitlines() if line.startswith("warning:")]
    assert len(warning) == 1
    assert warning[0].startswith("warning: no --app module registers handler 'unknown_job' "
                                 "(registered: ")
    assert "known" in warning[0] and warning[0].endswith("(try --app MODULE)")
    as_json = invoke("define", "unknown_job", "0 3 * * *", "--json")
    assert json.loads(as_json.stdout)["warning"] == warning[0].removeprefix("warning: ")
    known = invoke("define", "known", "0 3 * * *")
    assert known.exit_code == 0
    assert "warning" not in known.stderr
    unchecked = cli("define", "elsewhere", "0 3 * * *", "--handler", "build_report")
    assert unchecked.exit_code == 0, unchecked.stderr
    assert unchecked.stderr == (
        "warning: handler 'build_report' not checked: no --app module is configured (try "
        "--app MODULE); only ticks whose --app modules register it run this job\n")
    command = cli("define", "shell", "0 3 * * *", "--command", "true")
    assert "warning" not in command.stderr
    assert db.execute("SELECT name, handler FROM job_definitions ORDER BY name").fetchall() == [
        ("elsewhere", "build_report"), ("known", "known"), ("shell", None),
        ("unknown_job", "unknown_job")]
    bad_app = make_invoke(["--database-url", database_url, "--app", "no_such_module_xyz"])
    before = snapshot(db)
    result = bad_app("define", "known", "0 3 * * *", "--handler", "known")
    assert result.exit_code == 2
    assert snapshot(db) == before
    assert "cannot import --app module 'no_such_module_xyz'" in result.stderr


# -- commands that act on many runs at once: a preview, then a yes ---------------------------

def _yearly_runs(cli: Invoke, name: str, *options: str) -> None:
    """Job ``name`` (yearly) with the runs of 2020, 2021 and 2022 queued."""
    assert cli("define", name, "0 0 1 1 *", *options).exit_code == 0
    result = cli("backfill", name, "--from", "2020-01-01", "--to", "2022-01-01", "--yes")
    assert result.exit_code == 0, result.stderr


def test_backfill_off_a_terminal_needs_yes_and_says_what_it_would_do(
        cli: Invoke, db: psycopg.Connection[Any]) -> None:
    assert cli("define", "daily", "0 6 * * *", "--command", "true").exit_code == 0
    before = snapshot(db)
    refused = cli("backfill", "daily", "--from", "2026-01-01", "--to", "2026-01-07")
    assert (refused.exit_code, refused.stdout) == (2, "")
    assert refused.stderr == (
        "error: backfill of daily would create 7 run(s), from 2026-01-01 06:00 UTC to "
        "2026-01-07 06:00 UTC; add --yes to create them, or --dry-run to see them only (no "
        "terminal to ask on)\n")
    dry = cli("backfill", "daily", "--from", "2026-01-01", "--to", "2026-01-07", "--dry-run")
    assert (dry.exit_code, dry.stderr) == (0, "")
    assert dry.stdout == ("backfill of daily would create 7 run(s), from 2026-01-01 06:00 UTC "
                          "to 2026-01-07 06:00 UTC\n")
    as_json = json.loads(cli("backfill", "daily", "--from", "2026-01-01", "--to", "2026-01-07",
                             "--dry-run", "--json").stdout)
    assert (as_json["dry_run"], as_json["created"], len(as_json["slots"])) == (True, 7, 7)
    assert snapshot(db) == before
    done = cli("backfill", "daily", "--from", "2026-01-03", "--to", "2026-01-04", "-y")
    assert done.exit_code == 0, done.stderr
    # what already has a run is left alone, and the preview says so
    dry = cli("backfill", "daily", "--from", "2026-01-01", "--to", "2026-01-07", "--dry-run")
    assert dry.stdout == ("backfill of daily would create 5 run(s), from 2026-01-01 06:00 UTC "
                          "to 2026-01-07 06:00 UTC (2 of the 7 slot(s) in range already had "
                          "a run)\n")


def test_backfill_refuses_more_runs_than_its_bound_unless_told(
        cli: Invoke, db: psycopg.Connection[Any]) -> None:
    assert cli("define", "daily", "0 6 * * *", "--command", "true").exit_code == 0
    before = snapshot(db)
    for extra in ((), ("--yes",), ("--dry-run",)):
        result = cli("backfill", "daily", "--from", "2000-01-01", "--to", "2026-11-01", *extra)
        assert (result.exit_code, result.stdout) == (2, "")
        assert result.stderr == (
            "error: backfill of daily would create 9,802 runs, more than --max-runs 1,000: "
            "give --max-runs 9802 to create them, or backfill a shorter range\n")
    assert snapshot(db) == before
    small = cli("backfill", "daily", "--from", "2026-01-01", "--to", "2026-01-07", "--yes",
                "--max-runs", "6")
    assert small.exit_code == 2
    assert "would create 7 runs, more than --max-runs 6" in small.stderr
    assert snapshot(db) == before
    told = cli("backfill", "daily", "--from", "2000-01-01", "--to", "2026-11-01", "--yes",
               "--max-runs", "9802", "--json")
    assert told.exit_code == 0, told.stderr
    assert json.loads(told.stdout)["created"] == 9802


def test_backfill_to_now_or_today_stops_at_now(cli: Invoke,
                                               db: psycopg.Connection[Any]) -> None:
    assert cli("define", "hourly", "0 * * * *", "--command", "true").exit_code == 0
    now = db.execute("SELECT now()").fetchone()[0]  # type: ignore[index]
    for end in ("now", now.date().isoformat(), "+2d"):
        result = cli("backfill", "hourly", "--from", "1d", "--to", end, "--dry-run", "--json")
        assert result.exit_code == 0, (end, result.stderr)
        slots = json.loads(result.stdout)["slots"]
        assert len(slots) == 24, end  # one a hour over the last day, none ahead
        last = dt.datetime.fromisoformat(slots[-1])
        assert now - dt.timedelta(hours=1) < last <= now
    ago = cli("backfill", "hourly", "--from", "3h", "--to", "2h", "--dry-run", "--json")
    assert len(json.loads(ago.stdout)["slots"]) == 1


def test_remove_of_a_job_with_runs_waiting_asks_first(
        cli: Invoke, db: psycopg.Connection[Any]) -> None:
    _yearly_runs(cli, "busy", "--command", "true")
    before = snapshot(db)
    refused = cli("remove", "busy")
    assert (refused.exit_code, refused.stdout) == (2, "")
    assert refused.stderr == ("error: removing busy would cancel its 3 waiting run(s) (its "
                              "history stays); add --yes to remove it (no terminal to ask on)\n")
    dry = cli("remove", "busy", "--dry-run", "--json")
    assert json.loads(dry.stdout) == {"job": "busy", "dry_run": True, "cancelled_runs": 3}
    assert snapshot(db) == before
    removed = cli("remove", "busy", "--yes")
    assert removed.exit_code == 0, removed.stderr
    assert removed.stdout.startswith("removed busy (3 waiting run(s) cancelled")
    # a job with nothing waiting asks nothing (scripts that remove idle jobs go on working)
    assert cli("define", "idle", "0 0 1 1 *").exit_code == 0
    assert cli("remove", "idle").exit_code == 0


def test_ack_all_asks_first(cli: Invoke, db: psycopg.Connection[Any]) -> None:
    _yearly_runs(cli, "bad", "--command", "false", "--max-attempts", "1",
                 "--overlap", "allow")
    assert cli("tick").exit_code == 0
    ids = [r[0] for r in db.execute("SELECT id FROM job_runs ORDER BY id").fetchall()]
    before = snapshot(db)
    refused = cli("ack", "--all", "bad")
    assert (refused.exit_code, refused.stdout) == (2, "")
    assert refused.stderr == (
        f"error: ack --all would acknowledge 3 dead run(s) of bad: {ids[0]}, {ids[1]}, "
        f"{ids[2]}; add --yes to acknowledge them, or --dry-run to see them only (no "
        "terminal to ask on)\n")
    dry = cli("ack", "--all", "bad", "--dry-run")
    assert dry.stdout.startswith("ack --all would acknowledge 3 dead run(s) of bad")
    assert snapshot(db) == before
    one = cli("ack", str(ids[0]), "--yes")
    assert one.exit_code == 2
    assert one.stderr.startswith("error: --yes and --dry-run go with --all NAME")
    done = cli("ack", "--all", "bad", "--yes")
    assert done.stdout.startswith("acknowledged 3 dead run(s) of bad")
    nothing = cli("ack", "--all", "bad")  # nothing to acknowledge: nothing to ask
    assert (nothing.exit_code, nothing.stdout) == (
        0, "no dead run of bad waits for acknowledgement\n")


# -- common slips: a sentence about what was typed -------------------------------------------

@pytest.mark.parametrize(("args", "message"), [
    # `define x * * * * * --command …` in a directory holding three files: the shell gave
    # the file names five times
    (["define", "x", *["a.txt", "b.txt", "notes.md"] * 5, "--command", "true"],
     "error: the schedule must be one argument: quote it, e.g. cronjobs define x '* * * * *' "
     "(left unquoted, the shell splits it into words and turns each * into file names; 14 "
     "extra argument(s) given) (try 'cronjobs define --help')\n"),
    # in an empty directory the shell leaves * alone: the words come back quoted
    (["define", "x", "0", "3", "*", "*", "1-5"],
     "error: the schedule must be one argument: quote it, e.g. cronjobs define x "
     "'0 3 * * 1-5' (left unquoted, the shell splits it into words and turns each * into "
     "file names; 4 extra argument(s) given) (try 'cronjobs define --help')\n"),
    (["next", "0", "3", "*", "*", "*"],
     "error: the schedule must be one argument: quote it, e.g. cronjobs next '0 3 * * *' "
     "(left unquoted, the shell splits it into words and turns each * into file names; 4 "
     "extra argument(s) given) (try 'cronjobs next --help')\n"),
    (["define", "x", "0 3 * * *", "--command", "echo", "hello"],
     "error: unexpected extra argument(s) 'hello': quote an option's value that holds "
     "spaces, e.g. --command 'echo hello' (try 'cronjobs define --help')\n"),
    # a value out of range names the option typed, not its environment variable
    (["runs", "--limit", "0"],
     "error: invalid value for '--limit': 0 is not in the range 1<=x<=10000 (try 'cronjobs "
     "runs --help')\n"),
    (["define", "x", "@daily", "--max-attempts", "0"],
     "error: invalid value for '--max-attempts': 0 is not in the range 1<=x<=100 (try "
     "'cronjobs define --help')\n"),
])
def test_common_slips_are_told_what_to_type(cli: Invoke, db: psycopg.Connection[Any],
                                            args: list[str], message: str) -> None:
    before = snapshot(db)
    result = cli(*args)
    assert (result.exit_code, result.stdout, result.stderr) == (2, "", message)
    assert snapshot(db) == before


def test_a_value_from_the_environment_names_its_variable(cli: Invoke) -> None:
    result = cli("runs", env={"CRONJOBS_RUNS_LIMIT": "0"})
    assert result.exit_code == 2
    assert result.stderr.startswith("error: invalid value for '--limit' (from "
                                    "$CRONJOBS_RUNS_LIMIT): 0 is not in the range")


def test_a_jobs_file_that_is_not_toml_is_told_jobs_files_are_toml(
        cli: Invoke, db: psycopg.Connection[Any], tmp_path: Any) -> None:
    before = snapshot(db)
    (tmp_path / "jobs.yaml").write_text("jobs:\n  backup:\n    schedule: '0 2 * * *'\n")
    result = cli("apply", str(tmp_path / "jobs.yaml"))
    assert (result.exit_code, result.stdout) == (2, "")
    assert result.stderr.startswith(f"error: {tmp_path / 'jobs.yaml'}: invalid TOML: ")
    assert result.stderr.endswith(" (jobs files are TOML, as `cronjobs export` writes them: "
                                  "not YAML or JSON)\n")
    assert snapshot(db) == before


def test_resume_of_a_job_that_is_not_paused_says_so(cli: Invoke,
                                                    db: psycopg.Connection[Any]) -> None:
    assert cli("define", "x", "0 0 1 1 *", "--command", "true").exit_code == 0
    before = snapshot(db)
    result = cli("resume", "x")
    assert result.exit_code == 0
    assert result.stdout.startswith("x was not paused: nothing changed (next run ")
    assert snapshot(db) == before
    assert cli("pause", "x").exit_code == 0
    assert cli("resume", "x").stdout.startswith("resumed x, next ")


@pytest.mark.parametrize("text", ["abc", "0", "1.5", "99999999999999999999"])
def test_a_run_id_that_is_not_one_says_where_run_ids_are(cli: Invoke, text: str) -> None:
    result = cli("show", text)
    assert (result.exit_code, result.stdout) == (2, "")
    assert result.stderr == (f"error: invalid value for 'RUN_ID': '{text}' is not a run id: "
                             "use the number `cronjobs runs` shows in its ID column (try "
                             "'cronjobs show --help')\n")


# -- a removed job's name, a paused job: what a person meets -----------------------------------

def test_a_command_that_acts_on_a_removed_job_says_it_was_removed(
        cli: Invoke, db: psycopg.Connection[Any]) -> None:
    """Not 'no job named': the job was there, and its runs still are (`runs` reads them)."""
    assert cli("define", "gone", "0 0 1 1 *", "--command", "false", "--max-attempts",
               "1").exit_code == 0
    run_id = json.loads(cli("trigger", "gone", "--json").stdout)["id"]
    assert cli("tick").exit_code == 0
    assert cli("remove", "gone").exit_code == 0
    removed_at = db.execute("SELECT removed_at FROM job_definitions WHERE name = 'gone'"
                            ).fetchone()[0]  # type: ignore[index]
    when = removed_at.astimezone(dt.UTC).strftime("%Y-%m-%d %H:%M UTC")
    removed = (f"error: job 'gone' was removed at {when} (its runs stay: `cronjobs runs "
               "gone`)\n")
    before = snapshot(db)
    for args in (["pause", "gone"], ["resume", "gone"], ["remove", "gone"],
                 ["trigger", "gone"], ["next", "gone"], ["export", "gone"],
                 ["ack", "--all", "gone"],
                 ["backfill", "gone", "--from", "2020-01-01", "--to", "2021-01-01"]):
        result = cli(*args)
        assert (result.exit_code, result.stdout, result.stderr) == (2, "", removed), args
    # its runs do not run again: a retry would run a job nobody defines any more
    retried = cli("retry", str(run_id))
    assert (retried.exit_code, retried.stdout, retried.stderr) == (
        2, "", f"error: run {run_id} of 'gone' cannot run again: its job was removed at "
               f"{when} (`cronjobs define gone ...` defines it again)\n")
    assert snapshot(db) == before
    # a name that never was a job's says so
    never = cli("pause", "never_was")
    assert never.stderr == "error: no job named 'never_was' (see `cronjobs list`)\n"
    unknown = cli("explain", "never_was")
    assert (unknown.exit_code, unknown.stderr) == (
        2, "error: no job named 'never_was' (see `cronjobs list`)\n")


def test_a_name_defined_again_shows_the_new_job_and_keeps_the_old_runs_findable(
        cli: Invoke, db: psycopg.Connection[Any]) -> None:
    assert cli("define", "again", "0 0 1 1 *", "--command", "true").exit_code == 0
    old = json.loads(cli("trigger", "again", "--json").stdout)["id"]
    assert cli("tick").exit_code == 0
    assert cli("remove", "again").exit_code == 0
    assert cli("define", "again", "0 0 1 1 *", "--command", "true").exit_code == 0
    new = json.loads(cli("trigger", "again", "--json").stdout)["id"]
    described = json.loads(cli("describe", "again", "--json").stdout)
    assert (described["job"]["state"], described["job"]["removed_at"]) == ("active", None)
    assert [r["id"] for r in described["recent_runs"]] == [new]
    listed = json.loads(cli("runs", "again", "--json").stdout)
    assert [(r["id"], r["job_removed_at"] is None) for r in listed] == [(new, True),
                                                                         (old, False)]
    lines = cli("runs", "again").stdout.splitlines()
    assert lines[1].split()[:2] == [str(new), "again"]
    assert lines[2].split()[:3] == [str(old), "again", "(removed)"]
    assert cli("show", str(old)).stdout.startswith(f"run {old} of again (removed): succeeded")
    assert [j["name"] for j in json.loads(cli("list", "--json").stdout)] == ["again"]


def test_pausing_a_paused_job_again_keeps_its_pause(cli: Invoke,
                                                    db: psycopg.Connection[Any]) -> None:
    """A second `pause` without --until or --note changes nothing: it used to drop the
    pause's end and note without a word."""
    assert cli("define", "nap", "0 0 1 1 *", "--command", "true").exit_code == 0
    assert cli("pause", "nap", "--until", "2h", "--note", "disk full").exit_code == 0
    before = snapshot(db)
    again = cli("--utc", "pause", "nap")
    assert again.exit_code == 0
    assert re.fullmatch(r"nap was already paused since \d{4}-\d\d-\d\d \d\d:\d\d UTC \(.+\) "
                        r"until \d{4}-\d\d-\d\d \d\d:\d\d UTC \(in 1 h\): nothing changed "
                        r"\(--until or --note changes the pause\)\n", again.stdout), again.stdout
    assert snapshot(db) == before
    changed = cli("pause", "nap", "--note", "still full", "--json")
    assert changed.exit_code == 0
    assert json.loads(changed.stdout)["pause_note"] == "still full"
