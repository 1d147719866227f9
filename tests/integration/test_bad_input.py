"""Bad input: a clear message, exit code 2, and nothing written."""

from __future__ import annotations

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
        (["prune", "--older-than", "999999999w"], "must be between 1h and 36500d"),
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


def test_unregistered_handler_is_refused_when_apps_are_given(
        database_url: str, db: psycopg.Connection[Any], tmp_path: Any,
        monkeypatch: pytest.MonkeyPatch) -> None:
    from conftest import make_invoke

    (tmp_path / "myjobs.py").write_text(
        "import cronjobs\n\n@cronjobs.job('known')\ndef known(ctx):\n    pass\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    invoke = make_invoke(["--database-url", database_url, "--app", "myjobs"])
    result = invoke("define", "unknown_job", "0 3 * * *")
    assert result.exit_code == 2
    assert "no handler named 'unknown_job'" in result.stderr
    assert "known" in result.stderr
    assert invoke("define", "known", "0 3 * * *").exit_code == 0
    bad_app = make_invoke(["--database-url", database_url, "--app", "no_such_module_xyz"])
    result = bad_app("define", "known", "0 3 * * *", "--handler", "known")
    assert result.exit_code == 2
    assert "cannot import --app module 'no_such_module_xyz'" in result.stderr
