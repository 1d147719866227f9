"""`cronjobs serve` as a real process: where it listens, what it says, what it never says,
clients that go away mid-request, and a clear error without the web extra."""

from __future__ import annotations

import os
import socket
import struct
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import psycopg
import pytest
from psycopg.conninfo import conninfo_to_dict, make_conninfo

from conftest import run_cronjobs, serving, snapshot

TOKEN = "acceptance-admin-token-0123456789"
PASSWORD = "pw-never-shown-4242"


def _with_password(url: str) -> str:
    """The test database's URL with a password in it (ignored where authentication
    trusts the user; what matters is that it is never shown)."""
    params = conninfo_to_dict(url)
    return make_conninfo(url, password=params.get("password") or PASSWORD)


@pytest.fixture
def served(database_url: str, tmp_path: Path) -> Iterator[tuple[str, Path, subprocess.Popen[str]]]:
    log = tmp_path / "serve.log"
    with serving(log, {"CRONJOBS_DATABASE_URL": _with_password(database_url),
                       "CRONJOBS_ADMIN_TOKEN": TOKEN}) as (base, process):
        yield base, log, process


def test_it_listens_on_loopback_and_never_shows_secrets(
        served: tuple[str, Path, subprocess.Popen[str]]) -> None:
    base, log, process = served
    first = log.read_text().splitlines()[0]
    assert first == (f"serving the dashboard on {base}/ (actions enabled (admin token set))")
    for path in ("/", "/metrics", "/healthz", "/runs/1", "/jobs/x"):
        answer = httpx.get(base + path, timeout=10)
        assert PASSWORD not in answer.text and TOKEN not in answer.text
    process.terminate()
    process.wait(timeout=30)
    text = log.read_text()
    assert PASSWORD not in text and TOKEN not in text
    assert "Application shutdown complete" in text


def test_clients_that_go_away_mid_request_harm_nothing(
        served: tuple[str, Path, subprocess.Popen[str]], db: psycopg.Connection[Any]) -> None:
    base, log, process = served
    port = int(base.rsplit(":", 1)[1])
    for index in range(40):
        with socket.create_connection(("127.0.0.1", port), timeout=5) as client:
            if index % 2:
                client.sendall(b"GET / HTTP/1.1\r\nHost: x\r\n\r\n")  # then leave at once
            else:
                client.sendall(b"POST /signin HTTP/1.1\r\nHost: x\r\nContent-Length: 100\r\n"
                               b"\r\ntoken=")  # a body that never comes
            # close with a reset, as a client that crashed
            client.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    answer = httpx.get(base + "/", timeout=10)
    assert answer.status_code == 200
    assert process.poll() is None
    sessions = db.execute(
        "SELECT count(*), count(*) FILTER (WHERE state LIKE 'idle in transaction%%') "
        "FROM pg_stat_activity WHERE datname = current_database() "
        "AND application_name LIKE 'cronjobs serve%%'").fetchone()
    assert sessions is not None
    assert 1 <= sessions[0] <= 4  # the pool, never more
    assert sessions[1] == 0
    assert "Traceback" not in log.read_text()


def test_bad_options_exit_2_with_one_line_and_write_nothing(
        database_url: str, db: psycopg.Connection[Any]) -> None:
    before = snapshot(db)
    env = {**os.environ, "CRONJOBS_DATABASE_URL": database_url}
    env.pop("CRONJOBS_ADMIN_TOKEN", None)
    for args in (["serve", "--admin-token", "short"], ["serve", "--port", "0"],
                 ["serve", "--refresh", "1s"], ["serve", "--max-tick-age", "nonsense"]):
        result = run_cronjobs(*args, env=env)
        assert result.returncode == 2, (args, result.stderr)
        assert result.stderr.startswith("error: ") and result.stderr.count("\n") == 1, args
        assert result.stdout == ""
    assert snapshot(db) == before


def test_a_port_in_use_is_one_line_and_exit_2(database_url: str,
                                               db: psycopg.Connection[Any]) -> None:
    """Not uvicorn's log lines and its exit code 3 (which is `status --check`'s)."""
    before = snapshot(db)
    env = {**os.environ, "CRONJOBS_DATABASE_URL": database_url}
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        result = run_cronjobs("serve", "--port", str(port), env=env)
    assert (result.returncode, result.stdout) == (2, "")
    assert result.stderr == (f"error: cannot listen on 127.0.0.1:{port}: the port is in use "
                             "(by another `cronjobs serve`?); choose another with --port\n")
    assert snapshot(db) == before


def test_without_the_web_extra_it_says_what_to_install(database_url: str) -> None:
    blocked = ", ".join(repr(name) for name in ("uvicorn", "starlette", "jinja2",
                                                "psycopg_pool", "multipart"))
    code = (f"import sys\nfor name in ({blocked}):\n    sys.modules[name] = None\n"
            "from cronjobs.cli import main\nmain(['serve'])\n")
    env = {**os.environ, "CRONJOBS_DATABASE_URL": database_url}
    result = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True,
                            text=True, timeout=60, check=False)
    assert result.returncode == 2, result.stderr
    assert result.stderr == ("error: `cronjobs serve` needs the web extra: pip install "
                             "'cronjobs[web]' (missing module uvicorn)\n")


def test_the_tick_imports_nothing_of_the_web_extra_nor_prometheus(database_url: str) -> None:
    code = ("import sys\nfrom cronjobs.cli import main\n"
            "try:\n    main(['tick'])\nexcept SystemExit:\n    pass\n"
            "loaded = sorted(m for m in sys.modules if m.split('.')[0] in ('starlette', "
            "'uvicorn', 'jinja2', 'psycopg_pool', 'prometheus_client', 'multipart') "
            "or m.startswith('cronjobs.web'))\nprint(loaded)\n")
    env = {**os.environ, "CRONJOBS_DATABASE_URL": database_url}
    result = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True,
                            text=True, timeout=120, check=False)
    assert result.stdout.strip().splitlines()[-1] == "[]", result.stderr


def test_a_body_far_over_the_bound_gets_its_413_read(
        served: tuple[str, Path, subprocess.Popen[str]], db: psycopg.Connection[Any]) -> None:
    """The server reads and drops what the client sends before it answers and closes: a
    client that writes its whole body first reads the 413, not a reset connection."""
    base, log, process = served
    before = snapshot(db)
    body = b"token=" + b"x" * (20 * 1024 * 1024)
    form = {"Content-Type": "application/x-www-form-urlencoded"}
    port = int(base.rsplit(":", 1)[1])
    for _ in range(3):  # a client that writes all it has, then reads (it was reset)
        with socket.create_connection(("127.0.0.1", port), timeout=30) as client:
            client.sendall(b"POST /signin HTTP/1.1\r\nHost: x\r\nContent-Type: "
                           b"application/x-www-form-urlencoded\r\nContent-Length: "
                           + str(len(body)).encode() + b"\r\n\r\n" + body)
            answer = client.makefile("rb").read()
        assert answer.startswith(b"HTTP/1.1 413 Request Entity Too Large\r\n"), answer[:200]
        assert answer.endswith(b"\r\n\r\nrequest body larger than 16384 bytes\n")
        assert b"\r\nconnection: close\r\n" in answer
    page = httpx.post(base + "/signin", content=body, timeout=30,
                      headers={**form, "Accept": "text/html"})
    assert page.status_code == 413 and '<h1 id="oops-title">Too large</h1>' in page.text

    def chunks() -> Iterator[bytes]:  # no Content-Length: counted as it arrives
        for _ in range(20 * 1024):
            yield b"x" * 1024

    # (the form's 4 KiB field bound (400) or the body's bound (413), whichever the chunks
    # as they arrive reach first: either way, an answer the client reads)
    streamed = httpx.post(base + "/signin", content=chunks(), headers=form, timeout=30)
    assert streamed.status_code in (400, 413)
    # a client that waits for "100 Continue" gets the 413 instead, and sends nothing
    with socket.create_connection(("127.0.0.1", port), timeout=10) as client:
        client.sendall(b"POST /signin HTTP/1.1\r\nHost: x\r\nContent-Length: 20971520\r\n"
                       b"Expect: 100-continue\r\n\r\n")
        head = client.recv(4096)
    assert head.startswith(b"HTTP/1.1 413 ")
    assert snapshot(db) == before
    assert process.poll() is None
    assert "Traceback" not in log.read_text()
