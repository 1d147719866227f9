"""How long history is kept, set by people: a job's own keep_succeeded and keep_failed
(`define`, the jobs file, the decorator, apply's diff, describe and list), the global
retention (`cronjobs retention`), and the retirement day a finished run gets from them."""

from __future__ import annotations

import datetime as dt
import json
import re
import sys
import textwrap
from pathlib import Path
from typing import Any

import psycopg
import pytest

from conftest import Invoke, clean_env, run_cronjobs, snapshot
from cronjobs.db.store import Store
from cronjobs.tick import TickOptions, tick

DAY = dt.timedelta(days=1)


def _keeps(db: psycopg.Connection[Any], name: str) -> tuple[Any, ...]:
    row = db.execute("SELECT keep_succeeded, keep_failed FROM job_definitions "
                     "WHERE name = %s AND removed_at IS NULL", (name,)).fetchone()
    assert row is not None
    return tuple(row)


def _write(tmp_path: Path, text: str, name: str = "jobs.toml") -> str:
    path = tmp_path / name
    path.write_text(textwrap.dedent(text))
    return str(path)


# -- define ---------------------------------------------------------------------------------------

def test_define_sets_shows_and_clears_a_jobs_own_retention(
        cli: Invoke, db: psycopg.Connection[Any]) -> None:
    created = cli("define", "audit", "@daily", "--command", "true", "--keep-succeeded", "30d",
                  "--keep-failed", "12w", "--json")
    assert created.exit_code == 0, created.stderr
    job = json.loads(created.stdout)["job"]
    assert (job["keep_succeeded_seconds"], job["keep_failed_seconds"]) == (30 * 86400,
                                                                           84 * 86400)
    assert _keeps(db, "audit") == (30 * DAY, 84 * DAY)
    text = cli("describe", "audit").stdout
    assert "  keep succeeded     30d\n  keep failed        84d\n" in text
    # the same, written otherwise: nothing changes
    again = cli("define", "audit", "@daily", "--command", "true", "--keep-succeeded", "720h",
                "--keep-failed", "84d", "--json")
    assert json.loads(again.stdout)["outcome"] == "unchanged"
    listed = json.loads(cli("list", "--json").stdout)
    assert [(j["name"], j["keep_succeeded_seconds"], j["keep_failed_seconds"])
            for j in listed] == [("audit", 30 * 86400, 84 * 86400)]
    # back to the global retention: explicitly, or with --reset (an option left out of a
    # define of a job that exists keeps its value)
    cleared = cli("define", "audit", "@daily", "--command", "true", "--keep-succeeded",
                  "default", "--keep-failed", "84d", "--json")
    assert json.loads(cleared.stdout)["outcome"] == "updated"
    assert json.loads(cleared.stdout)["job"]["keep_succeeded_seconds"] is None
    assert _keeps(db, "audit") == (None, 84 * DAY)
    kept = cli("define", "audit", "@daily", "--command", "true", "--json")
    assert json.loads(kept.stdout)["outcome"] == "unchanged"
    assert _keeps(db, "audit") == (None, 84 * DAY)
    assert cli("define", "audit", "--reset", "keep-failed").exit_code == 0
    assert _keeps(db, "audit") == (None, None)
    text = cli("describe", "audit").stdout
    assert ("  keep succeeded     default (see `cronjobs retention`)\n"
            "  keep failed        default (see `cronjobs retention`)\n") in text
    shown = json.loads(cli("describe", "audit", "--json").stdout)["job"]
    assert (shown["keep_succeeded_seconds"], shown["keep_failed_seconds"]) == (None, None)


@pytest.mark.parametrize(("args", "message"), [
    (["--keep-succeeded", "23h"],
     "error: invalid --keep-succeeded '23h': must be between 1d and 3650d (or default: the "
     "global retention)\n"),
    (["--keep-failed", "3651d"],
     "error: invalid --keep-failed '3651d': must be between 1d and 3650d (or default: the "
     "global retention)\n"),
    (["--keep-succeeded", "0d"],
     "error: invalid --keep-succeeded '0d': must be greater than zero (or default: the "
     "global retention)\n"),
    (["--keep-failed", "forever"],
     "error: invalid --keep-failed 'forever': use a number with a unit, such as 90s, 5m, 2h, "
     "1d or 1h30m (or default: the global retention)\n"),
    (["--keep-succeeded", ""],
     "error: invalid --keep-succeeded '': use a number with a unit, such as 90s, 5m, 2h, 1d "
     "or 1h30m (or default: the global retention)\n"),
    (["--keep-succeeded", "30d", "--keep-failed", "-1d"],
     "error: invalid --keep-failed '-1d': use a number with a unit, such as 90s, 5m, 2h, 1d "
     "or 1h30m (or default: the global retention)\n"),
])
def test_a_bad_keep_is_one_line_and_writes_nothing(
        cli: Invoke, db: psycopg.Connection[Any], args: list[str], message: str) -> None:
    assert cli("define", "audit", "@daily", "--command", "true", "--keep-failed",
               "30d").exit_code == 0
    before = snapshot(db)
    result = cli("define", "audit", "@daily", "--command", "true", *args)
    assert (result.exit_code, result.stdout, result.stderr) == (2, "", message)
    assert snapshot(db) == before


# -- jobs as code ---------------------------------------------------------------------------------

JOBS = '''
source = "audit"

[jobs.ledger]
schedule = "@daily"
command = "true"
keep_succeeded = "30d"
keep_failed = "180d"

[jobs.plain]
schedule = "@hourly"
command = "true"
'''


def test_apply_sets_diffs_and_clears_keep(cli: Invoke, db: psycopg.Connection[Any],
                                          tmp_path: Path) -> None:
    path = _write(tmp_path, JOBS)
    added = cli("apply", path, "--json")
    assert added.exit_code == 0, added.stderr
    fields = json.loads(added.stdout)["added"][0]["fields"]
    assert (fields["keep_succeeded"], fields["keep_failed"]) == ("30d", "180d")
    assert json.loads(added.stdout)["added"][1]["fields"]["keep_failed"] == "default"
    assert _keeps(db, "ledger") == (30 * DAY, 180 * DAY)
    assert _keeps(db, "plain") == (None, None)
    # one changed, one cleared (the key left out), one set on the other job
    _write(tmp_path, JOBS.replace('keep_succeeded = "30d"', 'keep_succeeded = "6w"')
           .replace('keep_failed = "180d"\n', "")
           + 'keep_failed = "2d"\n')
    dry = cli("apply", path, "--dry-run")
    assert dry.exit_code == 4, dry.stderr
    assert dry.stdout == (
        "source 'audit':\n"
        "~ ledger\n"
        "    keep_succeeded: '30d' -> '42d'\n"
        "    keep_failed: '180d' -> 'default' (default)\n"
        "~ plain\n"
        "    keep_failed: 'default' -> '2d'\n"
        "= 0 unchanged\n"
        "dry run: 2 change(s) pending, nothing written\n")
    assert _keeps(db, "ledger") == (30 * DAY, 180 * DAY)
    applied = cli("apply", path, "--json")
    assert applied.exit_code == 0, applied.stderr
    changes = {d["job"]: d["changes"] for d in json.loads(applied.stdout)["changed"]}
    assert changes == {"ledger": {"keep_succeeded": {"old": "30d", "new": "42d"},
                                  "keep_failed": {"old": "180d", "new": "default",
                                                  "default": True}},
                       "plain": {"keep_failed": {"old": "default", "new": "2d"}}}
    assert _keeps(db, "ledger") == (42 * DAY, None)
    assert _keeps(db, "plain") == (None, 2 * DAY)
    # export writes a job's own retention only, and reads back unchanged
    exported = cli("export", "--format", "json")
    assert json.loads(exported.stdout)["jobs"] == {
        "ledger": {"schedule": "@daily", "command": "true", "keep_succeeded": "42d"},
        "plain": {"schedule": "@hourly", "command": "true", "keep_failed": "2d"}}
    again = _write(tmp_path, cli("export").stdout, "exported.toml")
    before = snapshot(db)
    in_sync = cli("apply", again, "--json")
    assert json.loads(in_sync.stdout)["unchanged"] == 2
    assert snapshot(db) == before


def test_a_bad_keep_in_a_jobs_file_applies_nothing(cli: Invoke, db: psycopg.Connection[Any],
                                                   tmp_path: Path) -> None:
    path = _write(tmp_path, JOBS.replace('"180d"', '"10y"'))
    before = snapshot(db)
    result = cli("apply", path)
    assert (result.exit_code, result.stdout) == (2, "")
    assert result.stderr == (f"error: {path}:4: job 'ledger': invalid keep_failed '10y': use "
                             "a number with a unit, such as 90s, 5m, 2h, 1d or 1h30m (or "
                             "default: the global retention)\n")
    _write(tmp_path, JOBS.replace('"30d"', "3650.5"))
    typed = cli("apply", path)
    assert (typed.exit_code, typed.stdout) == (2, "")
    assert typed.stderr == (f"error: {path}:4: job 'ledger': field 'keep_succeeded' must be "
                            'a duration such as "1h", got a number\n')
    assert snapshot(db) == before


MODULE = '''
import cronjobs

@cronjobs.job("{name}", schedule="@daily", keep_succeeded="{succeeded}",
              keep_failed="{failed}")
def kept(ctx):
    pass
'''


def test_the_decorator_sets_and_clears_keep(cli: Invoke, db: psycopg.Connection[Any],
                                            database_url: str, tmp_path: Path,
                                            monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(sys, "path", list(sys.path))
    for module, failed in (("keep_mod_a", "365d"), ("keep_mod_b", "default")):
        (tmp_path / f"{module}.py").write_text(MODULE.format(name="kept", succeeded="3d",
                                                             failed=failed))
    first = cli("--app", "keep_mod_a", "apply", "--source", "code", "--json")
    assert first.exit_code == 0, first.stderr
    assert _keeps(db, "kept") == (3 * DAY, 365 * DAY)
    # the file declaring the same is in sync with the decorator
    path = _write(tmp_path, 'source = "code"\n[jobs.kept]\nschedule = "@daily"\n'
                            'keep_succeeded = "72h"\nkeep_failed = "365d"\n')
    assert json.loads(cli("apply", path, "--json").stdout)["unchanged"] == 1
    # another process (this one has registered the handler `kept` of keep_mod_a)
    cleared = run_cronjobs("--database-url", database_url, "--app", "keep_mod_b", "apply",
                           "--source", "code", "--json", env=clean_env(), cwd=tmp_path)
    assert cleared.returncode == 0, cleared.stderr
    assert json.loads(cleared.stdout)["changed"][0]["changes"] == {
        "keep_failed": {"old": "365d", "new": "default", "default": True}}
    assert _keeps(db, "kept") == (3 * DAY, None)


def test_a_bad_keep_on_the_decorator_applies_nothing(
        cli: Invoke, db: psycopg.Connection[Any], tmp_path: Path,
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(sys, "path", list(sys.path))
    (tmp_path / "keep_mod_bad.py").write_text(MODULE.format(name="kept_bad", succeeded="12h",
                                                              failed="30d"))
    before = snapshot(db)
    result = cli("--app", "keep_mod_bad", "apply")
    assert (result.exit_code, result.stdout) == (2, "")
    assert result.stderr == (
        f"error: {tmp_path / 'keep_mod_bad.py'}:4 (keep_mod_bad.kept): job 'kept_bad': invalid "
        "keep_succeeded '12h': must be between 1d and 3650d (or default: the global "
        "retention)\n")
    assert snapshot(db) == before


# -- cronjobs retention ---------------------------------------------------------------------------

def _retention(db: psycopg.Connection[Any]) -> tuple[Any, ...]:
    row = db.execute("SELECT succeeded, failed, skips, ticks FROM cronjobs_retention").fetchone()
    assert row is not None
    return tuple(row)


def test_retention_shows_the_defaults(cli: Invoke, db: psycopg.Connection[Any]) -> None:
    result = cli("retention")
    assert result.exit_code == 0, result.stderr
    (updated,) = db.execute("SELECT updated_at FROM cronjobs_retention").fetchone()  # type: ignore[misc]
    shown = updated.astimezone(dt.UTC).strftime("%Y-%m-%d %H:%M UTC")
    *table, last = result.stdout.splitlines(keepends=True)
    assert re.fullmatch(rf"updated   {shown} \((now|\d+ (s|min|h) ago)\)\n", last), last
    assert "".join(table) == (
        "KEEP       FOR  WHAT\n"
        "succeeded  14d  succeeded and cancelled runs (a job's --keep-succeeded wins)\n"
        "failed     90d  dead runs (a job's --keep-failed wins), webhook notification "
        "records\n"
        "skips      14d  records of slots not run (`explain` reads them)\n"
        "ticks      14d  records of ticks\n"
        "\n"
        "retired   nothing yet\n")
    assert json.loads(cli("retention", "--json").stdout) == {
        "succeeded_seconds": 14 * 86400, "failed_seconds": 90 * 86400,
        "skips_seconds": 14 * 86400, "ticks_seconds": 14 * 86400, "retired_before": None,
        "updated_at": updated.astimezone(dt.UTC).isoformat(), "changed": {}}


def test_retention_sets_only_what_is_given(cli: Invoke, db: psycopg.Connection[Any]) -> None:
    result = cli("retention", "--succeeded", "30d", "--ticks", "1w")
    assert result.exit_code == 0, result.stderr
    # a change is confirmed in one line; `cronjobs retention` shows the whole table
    assert result.stdout == "set retention: succeeded 14d -> 30d, ticks 14d -> 7d\n"
    assert cli("retention").stdout.startswith(
        "KEEP       FOR  WHAT\n"
        "succeeded  30d  succeeded and cancelled runs (a job's --keep-succeeded wins)\n"
        "failed     90d  dead runs (a job's --keep-failed wins), webhook notification "
        "records\n"
        "skips      14d  records of slots not run (`explain` reads them)\n"
        "ticks      7d   records of ticks\n")
    assert _retention(db) == (30 * DAY, 90 * DAY, 14 * DAY, 7 * DAY)
    data = json.loads(cli("retention", "--failed", "3650d", "--skips", "24h",
                          "--json").stdout)
    assert {k: v for k, v in data.items() if k != "updated_at"} == {
        "succeeded_seconds": 30 * 86400, "failed_seconds": 3650 * 86400,
        "skips_seconds": 86400, "ticks_seconds": 7 * 86400, "retired_before": None,
        "changed": {"failed": {"old_seconds": 90 * 86400, "new_seconds": 3650 * 86400},
                    "skips": {"old_seconds": 14 * 86400, "new_seconds": 86400}}}
    assert _retention(db) == (30 * DAY, 3650 * DAY, DAY, 7 * DAY)
    # the same values again: nothing written (not even updated_at)
    before = snapshot(db)
    same = cli("retention", "--succeeded", "720h", "--json")
    assert json.loads(same.stdout)["changed"] == {}
    assert snapshot(db) == before


@pytest.mark.parametrize(("args", "message"), [
    (["--succeeded", "23h"], "error: invalid --succeeded '23h': must be between 1d and 3650d\n"),
    (["--failed", "3651d"], "error: invalid --failed '3651d': must be between 1d and 3650d\n"),
    (["--skips", "0"], "error: invalid --skips '0': must be greater than zero\n"),
    (["--ticks", "soon"],
     "error: invalid --ticks 'soon': use a number with a unit, such as 90s, 5m, 2h, 1d or "
     "1h30m\n"),
    (["--succeeded", "default"],
     "error: invalid --succeeded 'default': use a number with a unit, such as 90s, 5m, 2h, 1d "
     "or 1h30m\n"),
    # a good value beside a bad one: nothing is written
    (["--succeeded", "30d", "--ticks", "522w"],
     "error: invalid --ticks '522w': must be between 1d and 3650d\n"),
])
def test_bad_retention_is_one_line_and_writes_nothing(
        cli: Invoke, db: psycopg.Connection[Any], args: list[str], message: str) -> None:
    before = snapshot(db)
    result = cli("retention", *args)
    assert (result.exit_code, result.stdout, result.stderr) == (2, "", message)
    assert snapshot(db) == before
    assert _retention(db) == (14 * DAY, 90 * DAY, 14 * DAY, 14 * DAY)


# -- what a finished run gets ---------------------------------------------------------------------

def _run(cli: Invoke, db: psycopg.Connection[Any], name: str) -> tuple[str, dt.timedelta]:
    """Trigger job ``name``, finish its run with one tick; (status, retire_at - finished_at)."""
    triggered = cli("trigger", name, "--json")
    assert triggered.exit_code == 0, triggered.stderr
    run_id = json.loads(triggered.stdout)["id"]
    tick(Store(db), TickOptions(worker="test"))
    row = db.execute("SELECT status, stage, retire_at - finished_at FROM job_runs "
                     "WHERE id = %s", (run_id,)).fetchone()
    assert row is not None and row[1] == "history", row
    return row[0], row[2]


def test_a_run_finishing_after_define_keep_retires_by_it(
        cli: Invoke, db: psycopg.Connection[Any]) -> None:
    assert cli("define", "ok", "0 0 1 1 *", "--command", "true", "--keep-succeeded",
               "30d").exit_code == 0
    assert cli("define", "bad", "0 0 1 1 *", "--command", "exit 3", "--max-attempts", "1",
               "--keep-failed", "400d").exit_code == 0
    assert cli("define", "usual", "0 0 1 1 *", "--command", "true").exit_code == 0
    assert _run(cli, db, "ok") == ("succeeded", 30 * DAY)
    assert _run(cli, db, "bad") == ("dead", 400 * DAY)
    assert _run(cli, db, "usual") == ("succeeded", 14 * DAY)
    # the job's own keep wins over the global one; a change applies to later runs only
    assert cli("retention", "--succeeded", "20d").exit_code == 0
    assert _run(cli, db, "usual") == ("succeeded", 20 * DAY)
    assert _run(cli, db, "ok") == ("succeeded", 30 * DAY)
    assert cli("define", "ok", "0 0 1 1 *", "--command", "true", "--keep-succeeded",
               "default").exit_code == 0
    assert _run(cli, db, "ok") == ("succeeded", 20 * DAY)
    kept = sorted(db.execute(
        "SELECT d.name, r.retire_at - r.finished_at FROM job_runs AS r "
        "JOIN job_definitions AS d ON d.id = r.definition_id ORDER BY r.id").fetchall())
    assert kept == [("bad", 400 * DAY), ("ok", 20 * DAY), ("ok", 30 * DAY), ("ok", 30 * DAY),
                    ("usual", 14 * DAY), ("usual", 20 * DAY)]
