"""The global options work wherever a user types them: before the command or after it."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import psycopg
import pytest

from conftest import count, make_invoke, snapshot


@pytest.fixture(autouse=True)
def _no_configuration_from_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    for var in ("CRONJOBS_DATABASE_URL", "DATABASE_URL", "CRONJOBS_APP",
                "CRONJOBS_CONNECT_TIMEOUT", "CRONJOBS_VERBOSE", "PGHOST", "PGDATABASE"):
        monkeypatch.delenv(var, raising=False)


def _both(option: list[str], command: list[str]) -> list[list[str]]:
    """The command line with ``option`` before the command, and after it."""
    return [[*option, *command], [*command, *option]]


@pytest.mark.parametrize("position", ["before", "after"])
def test_database_url(database_url: str, db: psycopg.Connection[Any], position: str) -> None:
    invoke = make_invoke([])
    define, listing = (_both(["--database-url", database_url], args)
                       for args in (["define", "job", "0 3 * * *", "--command", "true"],
                                    ["list", "--json"]))
    at = 0 if position == "before" else 1
    result = invoke(*define[at])
    assert result.exit_code == 0, result.stderr
    result = invoke(*listing[at])
    assert result.exit_code == 0, result.stderr
    assert [job["name"] for job in json.loads(result.stdout)] == ["job"]
    assert count(db, "job_definitions") == 1


def test_the_database_url_typed_last_wins(database_url: str, db: psycopg.Connection[Any]) -> None:
    invoke = make_invoke([])
    result = invoke("--database-url", "postgresql://nobody@127.0.0.1:1/nowhere",
                    "define", "job", "0 3 * * *", "--command", "true",
                    "--database-url", database_url)
    assert result.exit_code == 0, result.stderr
    assert count(db, "job_definitions") == 1


@pytest.mark.parametrize("position", ["before", "after"])
def test_connect_timeout(database_url: str, position: str) -> None:
    invoke = make_invoke(["--database-url", database_url])
    at = 0 if position == "before" else 1
    result = invoke(*_both(["--connect-timeout", "forever"], ["list"])[at])
    assert result.exit_code == 2
    assert result.stderr.startswith("error: invalid --connect-timeout 'forever'")
    result = invoke(*_both(["--connect-timeout", "3s"], ["list"])[at])
    assert result.exit_code == 0, result.stderr


def test_a_connect_timeout_typed_overrides_the_environment(database_url: str) -> None:
    invoke = make_invoke(["--database-url", database_url])
    result = invoke("list", "--connect-timeout", "3s", env={"CRONJOBS_CONNECT_TIMEOUT": "bad"})
    assert result.exit_code == 0, result.stderr


@pytest.mark.parametrize("position", ["before", "after"])
def test_app(database_url: str, db: psycopg.Connection[Any], tmp_path: Path,
             monkeypatch: pytest.MonkeyPatch, position: str) -> None:
    invoke = make_invoke(["--database-url", database_url])
    at = 0 if position == "before" else 1
    before = snapshot(db)
    result = invoke(*_both(["--app", "no_such_module_xyz"],
                           ["define", "job", "0 3 * * *"])[at])
    assert result.exit_code == 2
    assert result.stderr == ("error: cannot import --app module 'no_such_module_xyz': "
                             "ModuleNotFoundError: No module named 'no_such_module_xyz'\n")
    assert snapshot(db) == before
    module, handler = f"global_option_jobs_{position}", f"global_option_{position}"
    (tmp_path / f"{module}.py").write_text(  # the registry is per process: names of its own
        f"import cronjobs\n\n@cronjobs.job({handler!r})\ndef known(ctx):\n    pass\n")
    monkeypatch.chdir(tmp_path)
    result = invoke(*_both(["--app", module], ["define", handler, "0 3 * * *"])[at])
    assert result.exit_code == 0, result.stderr
    assert count(db, "job_definitions") == 1


@pytest.mark.parametrize("position", ["before", "after"])
def test_verbose(database_url: str, position: str) -> None:
    invoke = make_invoke(["--database-url", database_url])
    quiet = invoke("tick", "--max-runs", "0")
    assert quiet.exit_code == 0, quiet.stderr
    assert quiet.stdout == ""  # the decisions are printed with -v only
    at = 0 if position == "before" else 1
    result = invoke(*_both(["-v"], ["tick", "--max-runs", "0"])[at])
    assert result.exit_code == 0, result.stderr
    assert result.stdout == "nothing due\n"


@pytest.fixture
def merged(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> list[dict[str, Any]]:
    """The global options every command invoked in the test was given, once merged."""
    from cronjobs.cli import options as cli

    seen: list[dict[str, Any]] = []
    real = cli._make_app

    def spy(values: dict[str, Any]) -> Any:
        seen.append(values)
        return real(values)

    monkeypatch.setattr(cli, "_make_app", spy)
    monkeypatch.setenv("CRONJOBS_HOME", str(tmp_path))  # `embedded status` looks here
    return seen


@pytest.mark.parametrize(("args", "env", "apps", "verbose"), [
    (["embedded", "status"], {}, (), 0),
    (["-v", "embedded", "-v", "status", "-v"], {}, (), 3),
    (["embedded", "status", "-vv"], {"CRONJOBS_VERBOSE": "1"}, (), 2),
    (["embedded", "status"], {"CRONJOBS_VERBOSE": "1"}, (), 1),
    (["--app", "a", "embedded", "status", "--app", "b,c"], {}, ("a", "b,c"), 0),
    (["embedded", "status", "--app", "b"], {"CRONJOBS_APP": "x"}, ("b",), 0),
    (["embedded", "status"], {"CRONJOBS_APP": "x"}, ("x",), 0),
])
def test_values_typed_in_several_places_add_up_and_override_the_environment(
        merged: list[dict[str, Any]], monkeypatch: pytest.MonkeyPatch, args: list[str],
        env: dict[str, str], apps: tuple[str, ...], verbose: int) -> None:
    for var, value in env.items():
        monkeypatch.setenv(var, value)
    result = make_invoke([])(*args, "--json")
    assert result.exit_code == 0, result.stderr
    assert json.loads(result.stdout)["running"] is False
    assert [(m["apps"], m["verbose"]) for m in merged] == [(apps, verbose)]
