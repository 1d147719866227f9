"""Bad input: a clear message, exit code 2, and nothing written."""

from __future__ import annotations

import json
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
        (["explain", "existing", "--to", "2h"], "invalid --to '2h'"),
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
