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
import tempfile
import time
from collections.abc import Callable
from typing import IO

from conftest import Invoke, one_run

ENTER, LEAVE, HOME_CLEAR = "\x1b[?1049h", "\x1b[?1049l", "\x1b[H\x1b[2J"
# How long each step may take (a start, a redraw, the end after Ctrl-C). Generous: with the
# whole suite on a loaded 2-core machine, its workers and their subprocesses share the CPUs
# and a new interpreter alone can take many seconds to start. A step that does not happen
# fails with what the process printed until then.
LIMIT = 240.0


def _argv(database_url: str, *args: str) -> list[str]:
    return [sys.executable, "-m", "cronjobs", "--database-url", database_url, *args]


class _Output:
    """Everything a process printed on one file descriptor (a pty or a pipe), read as it
    comes, so that a test waits for what it expects with a bound and, when it gives up,
    says what it saw (and what the process wrote to ``stderr``, a file, if apart)."""

    def __init__(self, fd: int, process: subprocess.Popen[bytes],
                 stderr: IO[bytes] | None = None) -> None:
        self.fd, self.process, self.stderr = fd, process, stderr
        self.seen, self.closed = b"", False

    def text(self) -> str:
        return self.seen.decode(errors="replace")

    def until(self, done: str, *, start: int = 0) -> str:
        """Read until ``done`` appears after character ``start`` of the output; return the
        output from ``start`` on."""
        self.wait(lambda: done in self.text()[start:], repr(done))
        return self.text()[start:]

    def lines(self, count: int) -> list[str]:
        """The first ``count`` lines, once they are there."""
        self.wait(lambda: self.text().count("\n") >= count, f"{count} lines")
        return self.text().splitlines(keepends=True)[:count]

    def ended(self) -> int:
        """The exit code, once the process has ended (reading what it still prints)."""
        self.wait(lambda: self.process.poll() is not None, "the process to end",
                  closing=False)
        return self.process.returncode

    def wait(self, predicate: Callable[[], bool], what: str, *, closing: bool = True) -> None:
        deadline = time.monotonic() + LIMIT
        while not predicate():
            if (closing and self.closed) or time.monotonic() > deadline:
                raise AssertionError(f"gave up waiting for {what} after {LIMIT:.0f}s "
                                     f"({self._state()}); it printed "
                                     f"{self.text()[-3000:]!r}{self._errors()}")
            self._read(0.5)

    def _read(self, wait: float) -> None:
        if self.closed:
            time.sleep(wait)
            return
        ready, _, _ = select.select([self.fd], [], [], wait)
        if not ready:
            return
        try:
            chunk = os.read(self.fd, 65536)
        except OSError:  # a pty whose other side closed
            chunk = b""
        self.closed = not chunk
        self.seen += chunk

    def _state(self) -> str:
        code = self.process.poll()
        return "still running" if code is None else f"it ended with exit code {code}"

    def _errors(self) -> str:
        if self.stderr is None:
            return ""
        self.stderr.seek(0)
        return f" and on stderr {self.stderr.read()[-3000:].decode(errors='replace')!r}"


def _watch_on_a_terminal(database_url: str, *args: str) -> tuple[int, str, str]:
    """Start the command on a pty, wait for two redraws, press Ctrl-C; (exit code, what
    was drawn before, what was printed after Ctrl-C)."""
    leader, follower = pty.openpty()
    process = subprocess.Popen(_argv(database_url, *args), stdin=follower, stdout=follower,
                               stderr=follower, env={**os.environ, "TZ": "UTC"},
                               start_new_session=True)
    os.close(follower)
    output = _Output(leader, process)
    try:
        first = output.until(HOME_CLEAR).index(HOME_CLEAR)
        output.until(HOME_CLEAR, start=first + 1)  # a second screen: redrawn, not scrolled
        pressed = len(output.text())
        os.killpg(process.pid, signal.SIGINT)  # what Ctrl-C does
        output.until(LEAVE, start=pressed)
        code = output.ended()
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()
        os.close(leader)
    text = output.text()
    return code, text[:pressed], text[pressed:]


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
    """Start the command with its output piped, read its first ``lines`` lines, then send
    SIGINT; (exit code, those lines)."""
    with tempfile.TemporaryFile() as errors:
        process = subprocess.Popen(_argv(database_url, *args), stdout=subprocess.PIPE,
                                   stderr=errors)
        assert process.stdout is not None
        output = _Output(process.stdout.fileno(), process, errors)
        try:
            got = output.lines(lines)
            process.send_signal(signal.SIGINT)
            code = output.ended()
        finally:
            if process.poll() is None:
                process.kill()
                process.wait()
            process.stdout.close()
    return code, got


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
