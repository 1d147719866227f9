"""`runs --watch` and `status --watch` as real processes: on a terminal (a pseudo-terminal
here) the screen is redrawn in place and Ctrl-C gives it back cleanly; piped, each refresh
is appended (JSON Lines with --json)."""

from __future__ import annotations

import json
import os
import pty
import select
import signal
import subprocess
import sys
import time

from conftest import Invoke, one_run

ENTER, LEAVE, HOME_CLEAR = "\x1b[?1049h", "\x1b[?1049l", "\x1b[H\x1b[2J"


def _argv(database_url: str, *args: str) -> list[str]:
    return [sys.executable, "-m", "cronjobs", "--database-url", database_url, *args]


def _read_until(fd: int, done: str, limit: float = 60) -> str:
    """Read a pty until ``done`` has appeared (or fail)."""
    seen = b""
    deadline = time.monotonic() + limit
    while done.encode() not in seen:
        assert time.monotonic() < deadline, f"gave up waiting for {done!r} in {seen!r}"
        ready, _, _ = select.select([fd], [], [], 0.5)
        if ready:
            try:
                seen += os.read(fd, 65536)
            except OSError:  # the other side closed
                break
    return seen.decode()


def _watch_on_a_terminal(database_url: str, *args: str) -> tuple[int, str, str]:
    """Start the command on a pty, wait for two redraws, press Ctrl-C; (exit code, what
    was drawn before, what was printed after Ctrl-C)."""
    leader, follower = pty.openpty()
    process = subprocess.Popen(_argv(database_url, *args), stdin=follower, stdout=follower,
                               stderr=follower, env={**os.environ, "TZ": "UTC"},
                               start_new_session=True)
    os.close(follower)
    try:
        drawn = _read_until(leader, HOME_CLEAR)
        drawn += _read_until(leader, HOME_CLEAR)  # a second screen: redrawn, not scrolled
        os.killpg(process.pid, signal.SIGINT)  # what Ctrl-C does
        after = _read_until(leader, LEAVE)
        code = process.wait(timeout=30)
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()
        os.close(leader)
    return code, drawn, after


def test_runs_watch_redraws_in_place_and_stops_cleanly(cli: Invoke, database_url: str) -> None:
    one_run(cli, "nightly", "--command", "true")
    code, drawn, after = _watch_on_a_terminal(database_url, "runs", "--watch", "--interval",
                                              "0.3")
    assert code == 0
    assert drawn.startswith(ENTER)
    assert drawn.count(HOME_CLEAR) >= 2
    screens = drawn.split(HOME_CLEAR)[1:]
    assert all("every 0.3s, Ctrl-C to stop" in screen and "nightly" in screen
               and "SLOT (UTC)" in screen for screen in screens)
    assert LEAVE in after
    assert "Traceback" not in drawn + after


def test_status_watch_redraws_in_place(cli: Invoke, database_url: str) -> None:
    code, drawn, after = _watch_on_a_terminal(database_url, "status", "-w", "--interval",
                                              "0.3")
    assert code == 0
    assert drawn.count(HOME_CLEAR) >= 2
    assert all("last tick" in screen for screen in drawn.split(HOME_CLEAR)[1:])
    assert LEAVE in after


def _piped(database_url: str, *args: str, lines: int) -> tuple[int, list[str]]:
    process = subprocess.Popen(_argv(database_url, *args), stdout=subprocess.PIPE,
                               stderr=subprocess.PIPE, text=True)
    assert process.stdout is not None
    got = [process.stdout.readline() for _ in range(lines)]
    process.send_signal(signal.SIGINT)
    process.wait(timeout=30)
    return process.returncode, got


def test_piped_each_refresh_is_appended(cli: Invoke, database_url: str) -> None:
    one_run(cli, "nightly", "--command", "true")
    # a header, the table's two lines, and the next header: nothing redrawn
    code, got = _piped(database_url, "runs", "--watch", "--interval", "0.2", "--utc",
                       lines=4)
    assert code == 0
    assert got[0].startswith("--- ") and got[0].endswith("Z ---\n")
    assert got[1].split()[:3] == ["ID", "JOB", "SLOT"]
    assert "nightly" in got[2]
    assert got[3].startswith("--- ")
    assert "\x1b" not in "".join(got)


def test_piped_json_is_one_document_per_line(cli: Invoke, database_url: str) -> None:
    one_run(cli, "nightly", "--command", "true")
    code, got = _piped(database_url, "status", "--watch", "--json", "--interval", "0.2",
                       lines=2)
    assert code == 0
    documents = [json.loads(line) for line in got]
    assert all(d["backlog"]["runs"] == 1 for d in documents)


def test_status_watch_and_check_do_not_mix(cli: Invoke) -> None:
    result = cli("status", "--watch", "--check")
    assert result.exit_code == 2
    assert result.stdout == ""
    assert result.stderr.startswith("error: --watch and --check cannot be used together")
