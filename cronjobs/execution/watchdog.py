"""The watchdog: a small process per tick that kills every job group the tick still
watched when the tick dies, so that no job outlives the process that could fence it."""

from __future__ import annotations

import contextlib
import logging
import subprocess
import sys
import threading
from pathlib import Path
from types import TracebackType
from typing import IO

from cronjobs.execution.processes import fence
from cronjobs.execution.runners.template import Template

log = logging.getLogger(__name__)


class Watchdog:
    """One per tick process: if the tick dies (``kill -9``, the OOM killer), every job
    process group it started is killed, so a reclaimed run never overlaps an orphan.

    It is a small separate process (:mod:`cronjobs.execution.processes.fence` ``--watchdog``,
    run isolated) in a session of its own, so signals for the tick's process group or
    terminal never reach it; it ignores SIGTERM, SIGINT and SIGHUP. The tick tells it
    ``watch PGID`` / ``forget PGID`` over a pipe only the tick holds; when that pipe ends
    (the tick exited, however) it SIGKILLs every group still watched and exits.
    :meth:`close` ends it cleanly: groups still watched then are killed too, since nobody
    supervises them any more. If the watchdog cannot be started or dies, jobs still run
    (with only the parent-death signal as protection) and a warning is logged.
    """

    def __init__(self, process: subprocess.Popen[bytes] | None) -> None:
        self._process = process
        self._lock = threading.Lock()
        self._warned = False
        # With autoflush off, messages are sent by flush(): a caller starting many jobs in
        # one pass (the tick) sends them together.
        self.autoflush = True
        # A second watchdog that gets every line too: the tick's template process, so
        # that a job survives neither the tick nor its watchdog alone being killed.
        self.mirror: Template | None = None

    @classmethod
    def start(cls) -> Watchdog:
        script = Path(fence.__file__)
        if script.is_file():  # isolated: no site, no PYTHON* variables, no cwd on the path
            argv = [sys.executable, "-I", "-S", str(script), "--watchdog"]
        else:
            argv = [sys.executable, "-m", "cronjobs.execution.processes.fence", "--watchdog"]
        try:
            process = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.DEVNULL,
                                       start_new_session=True)
        except OSError as exc:
            log.warning("could not start the watchdog: %s; jobs would outlive a killed tick",
                        exc)
            return cls(None)
        return cls(process)

    @property
    def pid(self) -> int | None:
        return self._process.pid if self._process is not None else None

    def watch(self, pgid: int, deadline: float | None = None) -> None:
        """Watch a job's process group; with ``deadline`` (a ``time.monotonic()`` value)
        it is killed when that passes without :meth:`renew`. Sent at once, whatever
        ``autoflush``: a tick killed (or frozen) just after starting a job must not leave
        it unwatched until the end of the pass."""
        self._send(f"watch {pgid}\n" if deadline is None else f"watch {pgid} {deadline:.3f}\n",
                   at_once=True)

    def renew(self, pgid: int, deadline: float) -> None:
        """Move a watched group's deadline (its lease was renewed)."""
        self._send(f"renew {pgid} {deadline:.3f}\n")

    def forget(self, pgid: int) -> None:
        self._send(f"forget {pgid}\n")

    def flush(self) -> None:
        """Send the messages written since the last flush."""
        if self.mirror is not None:
            self.mirror.flush()
        with self._lock:
            if self._process is None or self._process.stdin is None:
                return
            with contextlib.suppress(OSError):  # gone: _send warns on the next message
                self._process.stdin.flush()

    def close(self) -> None:
        """End the watchdog (killing any group still watched) and wait for it to exit."""
        with self._lock:
            process, self._process = self._process, None
        if process is None:
            return
        stdin = process.stdin
        assert stdin is not None  # noqa: S101 - started with stdin=PIPE
        try:
            stdin.write(b"close\n")
            stdin.close()
        except OSError:
            pass
        try:
            process.wait(5.0)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()

    def __enter__(self) -> Watchdog:
        return self

    def __exit__(self, kind: type[BaseException] | None, value: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.close()

    def _send(self, line: str, *, at_once: bool = False) -> None:
        """Write ``line`` to both watchdogs; sent now with ``autoflush`` or ``at_once``
        (with what was buffered before it), else at the next :meth:`flush`."""
        flush = self.autoflush or at_once
        if self.mirror is not None:
            self.mirror.line(line.rstrip("\n").encode())
            if flush:
                self.mirror.flush()
        with self._lock:
            if self._process is None:
                return
            stdin: IO[bytes] | None = self._process.stdin
            assert stdin is not None  # noqa: S101
            try:
                stdin.write(line.encode())
                if flush:
                    stdin.flush()
            except OSError as exc:
                if not self._warned:
                    self._warned = True
                    log.warning("the watchdog is gone (%s); jobs would outlive a killed tick",
                                exc)
