"""The fences: the processes that kill a tick's job groups when the tick dies, so that no
job outlives the process that could fence it. Standard library only, so that both start
isolated and quickly (``python -I -S .../fence.py``).

``python -I -S .../processes/fence.py --watchdog``
    The watchdog of one tick (see :class:`cronjobs.execution.watchdog.Watchdog`). Reads
    lines ``watch PGID [DEADLINE]`` / ``renew PGID DEADLINE`` / ``forget PGID`` / ``close``
    from stdin; ``-PID`` in place of a group is the single process PID (the tick itself,
    while it runs handlers in-process). When stdin ends, with or without ``close``, every
    process group still watched is killed (SIGKILL) and it exits: an end without ``close``
    means the tick died.

``python -I -S .../processes/fence.py --template N``
    The template process of a tick with no handlers to fork (see
    :mod:`cronjobs.execution.runners.template`): it only fences, following the watchdog's
    lines read from the socket on fd ``N``. With handlers to fork it runs as
    :mod:`cronjobs.execution.processes.template`, on the same :class:`Server`.

DEADLINE is a ``time.monotonic()`` value (the clock is system-wide): a group whose deadline
passes is killed, because its lease is about to expire and the tick (frozen, or cut off
from the database) did not renew it.
"""

from __future__ import annotations

import os
import select
import signal
import socket
import sys
import time
from collections.abc import Iterable
from typing import TypeVar

FDS = 2  # file descriptors the tick sends the template with each run: output, result
MESSAGE = 64 * 1024  # largest message between the tick and its template, but a run request
SPEC = 128 * 1024  # largest spec a run request carries (a larger one takes a fresh interpreter)
REQUEST = SPEC + 1024  # largest run request: ``run ID`` and a newline, then the spec


def apply_lines(lines: Iterable[bytes], watched: dict[int, float | None]) -> bool:
    """Apply command lines to ``watched``; True when ``close`` was read."""
    for line in lines:
        words = line.split()
        if words == [b"close"]:
            return True
        if len(words) < 2 or not words[1].lstrip(b"-").isdigit() or abs(int(words[1])) <= 1:
            continue
        group = int(words[1])  # -PID: the single process PID (a tick running handlers)
        deadline = _number(words[2]) if len(words) == 3 else None
        renewing = words[0] == b"renew" and group in watched and deadline is not None
        if words[0] == b"watch" or renewing:
            watched[group] = deadline
        elif words[0] == b"forget":
            watched.pop(group, None)
    return False


def _number(word: bytes) -> float | None:
    try:
        return float(word)
    except ValueError:
        return None


def kill_groups(groups: Iterable[int]) -> None:
    """SIGKILL each process group; a negative entry -PID is the single process PID.
    (Plain ``try`` rather than ``contextlib.suppress``: the template calls it between
    forks, see :class:`Server`.)"""
    for pgid in groups:
        try:
            if pgid < 0:
                os.kill(-pgid, signal.SIGKILL)
            else:
                os.killpg(pgid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass


def _kill_expired(watched: dict[int, float | None]) -> None:
    now = time.monotonic()
    expired = [g for g, d in watched.items() if d is not None and d <= now]
    if expired:
        kill_groups(expired)
        for group in expired:
            del watched[group]


def _wait(watched: dict[int, float | None]) -> float | None:
    """Seconds until the earliest deadline (None: no deadline)."""
    deadlines = [d for d in watched.values() if d is not None]
    return max(0.0, min(deadlines) - time.monotonic()) if deadlines else None


def _ignore_stop_signals() -> None:
    for signum in (signal.SIGINT, signal.SIGHUP, signal.SIGTERM):
        signal.signal(signum, signal.SIG_IGN)  # only the end of the input (or SIGKILL)


# -- the watchdog ---------------------------------------------------------------------------


def watchdog(fd: int) -> int:
    """Follow the lines read from ``fd`` (see the module docstring). At the end of the
    input, whatever is still watched is killed."""
    _ignore_stop_signals()
    watched: dict[int, float | None] = {}
    pending = b""
    while True:
        ready, _, _ = select.select([fd], [], [], _wait(watched))
        if ready:
            data = os.read(fd, 65536)
            if not data:
                break
            pending += data
            *lines, pending = pending.split(b"\n")
            if apply_lines(lines, watched):
                break
        _kill_expired(watched)
    groups = [g for g in watched if g > 0]  # the tick itself (-PID) ended already
    if groups:
        kill_groups(groups)
        time.sleep(0.1)
        kill_groups(groups)  # anything forked while the first signal was being sent
    return 0


# -- the template's loop --------------------------------------------------------------------


class Server:
    """The template's loop: follow the watchdog's lines from the socket, fence the groups,
    report the exits of its children. This one only fences: a run request is refused
    (:class:`cronjobs.execution.processes.template.Forker` forks them).

    (Its steps use plain ``try`` rather than ``contextlib.suppress``: every page the
    template writes between two forks is copied, once per fork.)"""

    def __init__(self, sock: socket.socket) -> None:
        self.sock = sock
        self.watched: dict[int, float | None] = {}  # the watchdog's groups (and -PIDs)
        self.children: set[int] = set()  # children not yet reaped (each its own group)
        self.wake_r, self.wake_w = os.pipe()
        os.set_blocking(self.wake_w, False)
        os.set_blocking(self.wake_r, False)

    def send(self, data: bytes) -> None:
        try:  # noqa: SIM105 - see the class's docstring
            self.sock.send(data)
        except OSError:
            pass  # the tick is gone: the loop sees the end

    def run(self, run_id: str, spec: bytes, fds: list[int]) -> None:
        """A request to run a handler: refused, since this template has none."""
        close_fds(fds)
        self.send(f"refused {run_id} this template process only fences".encode())

    def serve(self) -> int:
        signal.set_wakeup_fd(self.wake_w)
        signal.signal(signal.SIGCHLD, lambda signum, frame: None)
        closing = False
        while True:
            ready, _, _ = select.select([self.sock.fileno(), self.wake_r], [], [],
                                        _wait(self.watched))
            if self.wake_r in ready:
                try:  # noqa: SIM105 - see the class's docstring
                    os.read(self.wake_r, 4096)
                except BlockingIOError:
                    pass
            self._reap()
            if self.sock.fileno() in ready:
                try:
                    data, fds, _flags, _addr = socket.recv_fds(self.sock, REQUEST, FDS)
                except OSError:
                    data, fds = b"", []
                if not data:
                    break  # the tick died (or closed without saying so)
                if data.startswith(b"run "):
                    header, _, spec = data.partition(b"\n")
                    self.run(header[4:].decode(), spec, fds)
                else:
                    close_fds(fds)
                    if apply_lines(data.split(b"\n"), self.watched):
                        closing = True
                        break
            _kill_expired(self.watched)
        # The tick ended: nothing supervises these any more. (After a clean close there
        # are none left but groups the tick gave up on.)
        groups = {g for g in self.watched if g > 0} | self.children
        if groups:
            kill_groups(groups)
            if not closing:
                time.sleep(0.1)
                kill_groups(groups)  # anything forked while the first signal was being sent
        return 0

    def _reap(self) -> None:
        while self.children:
            try:
                pid, status = os.waitpid(-1, os.WNOHANG)
            except ChildProcessError:
                return
            if pid == 0:
                return
            self.children.discard(pid)
            self.send(f"exit {pid} {os.waitstatus_to_exitcode(status)}".encode())


def close_fds(fds: Iterable[int]) -> None:
    for fd in fds:
        try:  # noqa: SIM105 - used by the template between forks (see Server)
            os.close(fd)
        except OSError:
            pass


S = TypeVar("S", bound="Server")


def serve_socket(fd: int, server_class: type[S]) -> S:
    """The template's start, either kind: its socket on ``fd``, stop signals ignored,
    stdin from /dev/null."""
    _ignore_stop_signals()
    sock = socket.socket(fileno=fd)
    os.set_inheritable(fd, False)
    devnull = os.open(os.devnull, os.O_RDONLY)
    os.dup2(devnull, 0)
    os.close(devnull)
    return server_class(sock)


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    if args == ["--watchdog"]:
        return watchdog(sys.stdin.fileno())
    if len(args) == 2 and args[0] == "--template" and args[1].isdigit():
        server = serve_socket(int(args[1]), Server)
        server.send(b"hello")
        return server.serve()
    print("usage: fence.py (--watchdog | --template N)", file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main())
