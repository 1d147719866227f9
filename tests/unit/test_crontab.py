"""`cronjobs crontab`: the lines name the executable by its absolute path and carry the
database and modules the command was given, never a password. (That the printed tick line
runs under cron's own environment: tests/acceptance/test_crontab_line.py.)"""

from __future__ import annotations

import json
import shlex
import sys
from pathlib import Path

from conftest import make_invoke
from cronjobs.core.crontab import CHECK, TICK, crontab, find_executable
from cronjobs.db.config import DatabaseTarget

EXE = "/opt/cronjobs/venv/bin/cronjobs"


def test_the_embedded_default_names_its_home() -> None:
    lines = crontab(EXE, DatabaseTarget(None, "embedded default"), {}, apps=(), workdir="/x")
    assert lines.lines == (f"* * * * * {EXE} {TICK}", f"*/5 * * * * {EXE} {CHECK}")
    assert [name for name, _ in lines.variables] == ["CRONJOBS_HOME"]
    assert Path(dict(lines.variables)["CRONJOBS_HOME"]).is_absolute()


def test_a_url_without_password_is_written() -> None:
    url = "postgresql://cronjobs@db.internal:5432/app"
    lines = crontab(EXE, DatabaseTarget(url, "CRONJOBS_DATABASE_URL"), {}, apps=(),
                    workdir="/x")
    assert lines.variables == (("CRONJOBS_DATABASE_URL", url),)
    assert lines.notes == ()
    assert f"CRONJOBS_DATABASE_URL={url}\n" in lines.text()


def test_a_password_is_never_written() -> None:
    url = "postgresql://cronjobs:s3cretpassw0rd@db.internal:5432/app"
    lines = crontab(EXE, DatabaseTarget(url, "--database-url"), {}, apps=(), workdir="/x")
    text = lines.text()
    assert "s3cret" not in text and "passw0rd" not in text
    assert lines.variables == ()
    assert "# CRONJOBS_DATABASE_URL=postgresql://cronjobs:***@db.internal:5432/app" in text


def test_libpq_variables_are_written_but_the_password() -> None:
    env = {"PGHOST": "db", "PGDATABASE": "app", "PGPASSWORD": "hunter2hunter2", "HOME": "/r"}
    lines = crontab(EXE, DatabaseTarget("", "PG* environment variables"), env, apps=(),
                    workdir="/x")
    assert lines.variables == (("PGDATABASE", "app"), ("PGHOST", "db"))
    assert "hunter2" not in lines.text()
    assert lines.notes == ("PGPASSWORD is not written here: keep the password in ~/.pgpass.",)


def test_modules_are_imported_from_the_working_directory() -> None:
    lines = crontab(EXE, DatabaseTarget(None, "embedded default"), {},
                    apps=("myapp.jobs", "other"), workdir="/srv/my app")
    assert ("CRONJOBS_APP", "myapp.jobs,other") in lines.variables
    assert lines.lines[0] == f"* * * * * cd '/srv/my app' && {EXE} {TICK}"
    assert shlex.split(lines.lines[0].split(" && ")[0])[-1] == "/srv/my app"


def test_the_executable_is_this_installation() -> None:
    assert find_executable() == str(Path(sys.executable).absolute().parent / "cronjobs")


def test_the_command_prints_the_lines_and_json() -> None:
    invoke = make_invoke([])
    url = "postgresql://cronjobs@db.internal/app"
    text = invoke("--database-url", url, "crontab")
    assert text.exit_code == 0, text.stderr
    assert text.stderr == ""
    executable = find_executable()
    assert text.stdout.splitlines()[-2:] == [f"* * * * * {executable} {TICK}",
                                             f"*/5 * * * * {executable} {CHECK}"]
    data = json.loads(invoke("--database-url", url, "crontab", "--json").stdout)
    assert data == {"executable": executable, "variables": {"CRONJOBS_DATABASE_URL": url},
                    "notes": [], "lines": [f"* * * * * {executable} {TICK}",
                                           f"*/5 * * * * {executable} {CHECK}"]}
