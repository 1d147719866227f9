"""The template process: isolated handler runs at the cost of a fork, not an interpreter.

Each tick that runs jobs starts one template process (``python -m
cronjobs.execution.processes.template``, see :mod:`cronjobs.execution.processes.template`) —
a fresh interpreter, so nothing of the tick (its database connection, its threads, its locks, its
logging handlers) is in it. It imports the
``--app`` modules once and then forks one child per handler attempt. The child is what a
fresh interpreter per run used to be: the leader of a new session and process group, with
its own stdout/stderr pipe and result pipe, ``PR_SET_PDEATHSIG = SIGKILL`` towards the
template, the run's ``CRONJOBS_*`` variables, and :func:`cronjobs.execution.processes.handler.call`
calling the handler. It ends with ``os._exit``: nothing of the template (atexit handlers,
buffers) runs twice. Whatever a handler does (segfaults, ``os._exit``, leaks memory, ignores
SIGTERM) happens in its child and ends with it; the tick times it out, stops it and reads
its output exactly as before, by its process group.

The tick and its template share one ``SOCK_SEQPACKET`` socket pair. The tick sends
``run ID``, a newline and the run's spec (JSON) with two file descriptors (the child's
output pipe and its result pipe), and the watchdog's own lines (``watch`` / ``renew`` /
``forget``, see :mod:`cronjobs.execution.processes.fence`), which makes the template a second
watchdog. The template answers ``hello`` once the modules are imported (``unsafe REASON``
when they started threads: forking then could copy a lock that another thread holds, so
the tick runs handlers in a fresh interpreter each instead), ``started ID PID`` for each
child and ``exit PID CODE`` when one exits (its exit code, or minus the signal that killed
it).

No orphans: when the socket ends without ``close`` (the tick died, even by SIGKILL, and
its watchdog with it), the template SIGKILLs every group it still fenced — its children
and every command group the watchdog's lines name — and exits. If the template itself
dies, its children die with it (their parent-death signal); the tick notices the end of
the socket, fails those attempts with the reason and starts a new template for the next
run.
"""

from __future__ import annotations

import contextlib
import errno
import logging
import os
import signal
import socket
import subprocess
import sys
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

from cronjobs.durations import format_duration
from cronjobs.execution.processes import fence
from cronjobs.execution.processes.fence import MESSAGE, SPEC, apply_lines
from cronjobs.execution.runners.groups import signal_name

log = logging.getLogger(__name__)

HELLO_WAIT = 3.0  # seconds the first handler run waits for the template to be ready
RESPAWN = 5.0  # seconds between two starts of a fence-only template that died
ANSWER_WAIT = 5.0  # seconds to wait for a started template to answer a run


class TemplateChild:
    """A handler attempt's main process, a child of the template: the tick cannot wait for
    it, so the template reports its exit. (A :class:`~.process.Main`.)"""

    def __init__(self, wake: threading.Event | None) -> None:
        self.pid = 0
        self.refused: str | None = None  # why the template did not start it
        self._wake = wake
        self._answered = threading.Event()
        self._exited = threading.Event()
        self._code = 0
        self._lost: str | None = None

    def exited(self) -> bool:
        return self._exited.is_set()

    def status(self) -> int:
        return self._code

    def lost(self) -> str | None:
        return self._lost

    def _start(self, pid: int) -> None:
        self.pid = pid
        self._answered.set()

    def _refuse(self, reason: str) -> None:
        self.refused = reason
        self._answered.set()

    def _exit(self, code: int, lost: str | None = None) -> None:
        if self._exited.is_set():
            return
        self._code, self._lost = code, lost
        self._exited.set()
        if self._wake is not None:
            self._wake.set()


@dataclass
class _Process:
    """One template process and what it was asked to do."""

    popen: subprocess.Popen[bytes]
    sock: socket.socket
    ready: threading.Event = field(default_factory=threading.Event)
    unsafe: str | None = None
    waited: bool = False  # a run waited for it to be ready
    dead: str | None = None  # why it ended, once it did
    pending: dict[str, TemplateChild] = field(default_factory=dict)  # run id -> not started
    children: dict[int, TemplateChild] = field(default_factory=dict)  # pid -> running
    lock: threading.Lock = field(default_factory=threading.Lock)


class Template:
    """The tick's handle on its template process, started at once and started again, for
    the next run, if it dies. Thread-safe; :meth:`run` is called from the tick's thread."""

    def __init__(self, apps: tuple[str, ...], wake: threading.Event | None = None) -> None:
        self.apps = apps
        self._wake = wake
        self._watched: dict[int, float | None] = {}  # what the watchdog watches, to replay
        self._lines: list[bytes] = []
        self._lock = threading.Lock()
        self._closed = False
        self._next_id = 0
        self._warned_unsafe = False
        self._respawned = time.monotonic()
        self._current: _Process | None = None
        self._current = self._spawn()

    @property
    def pid(self) -> int | None:
        current = self._current
        return current.popen.pid if current is not None else None

    def wait_ready(self, timeout: float) -> bool:
        """Wait until the template imported the app (or cannot fork); True if it did."""
        current = self._current
        return current is not None and current.ready.wait(timeout)

    # -- the watchdog's lines -------------------------------------------------------------

    def line(self, line: bytes) -> None:
        """A line the watchdog was sent (``watch``/``renew``/``forget``); sent on flush."""
        with self._lock:
            apply_lines([line], self._watched)
            self._lines.append(line)

    def flush(self) -> None:
        with self._lock:
            lines, self._lines = self._lines, []
            current = self._current
            closed = self._closed
        if not lines or closed:
            return
        if current is None or current.dead is not None:
            # The fence is gone: a new one (at most every RESPAWN seconds) gets the
            # whole watched set replayed, so these lines need not be sent.
            if time.monotonic() >= self._respawned + RESPAWN:
                self._respawned = time.monotonic()
                current = self._spawn()
                with self._lock:
                    self._current = current
            return
        batch: list[bytes] = []
        size = 0
        for line in lines:  # in messages the template reads whole
            if batch and size + len(line) >= MESSAGE // 2:
                self._send(current, b"\n".join(batch))
                batch, size = [], 0
            batch.append(line)
            size += len(line) + 1
        self._send(current, b"\n".join(batch))

    # -- runs -------------------------------------------------------------------------------

    def run(self, spec: bytes, output: int, result: int) -> TemplateChild | None:
        """Start a handler child for ``spec`` with these file descriptors (the caller
        closes its copies). None when the template cannot be used (it is not ready in
        time, the app made forking unsafe, or the spec is too large for one message):
        then run it in a fresh interpreter. A child whose ``refused`` is set could not be
        started."""
        if len(spec) > SPEC:
            return None
        current = self._usable()
        if current is None:
            return None
        child = TemplateChild(self._wake)
        with self._lock:
            self._next_id += 1
            run_id = str(self._next_id)
        with current.lock:
            if current.dead is not None:
                child._refuse(current.dead)
                return child
            current.pending[run_id] = child
        try:
            socket.send_fds(current.sock, [f"run {run_id}\n".encode(), spec], [output, result])
        except OSError as exc:
            if exc.errno == errno.EMSGSIZE:  # more than this system lets one message hold
                with current.lock:
                    current.pending.pop(run_id, None)
                return None
            self._gone(current, exc)
        if not child._answered.wait(ANSWER_WAIT):
            self._kill(current, f"the template process did not start the handler within "
                                f"{format_duration(ANSWER_WAIT)}; it was killed")
            child._answered.wait(ANSWER_WAIT)
        return child

    def _usable(self) -> _Process | None:
        with self._lock:
            if self._closed or not self.apps:  # without apps it only fences
                return None
            current = self._current
        if current is None or current.dead is not None:
            current = self._spawn()  # a new one, for this run and the next ones
            with self._lock:
                self._current = current
        if current is None:
            return None
        # Only the first run waits (a little: the tick's heartbeats wait with it); until
        # the app is imported, runs take a fresh interpreter each.
        waited, current.waited = current.waited, True
        if not current.ready.wait(0 if waited else HELLO_WAIT):
            return None
        if current.unsafe is not None:
            if not self._warned_unsafe:
                self._warned_unsafe = True
                log.warning("handlers run in a fresh interpreter each: %s", current.unsafe,
                            extra={"action": "template"})
            return None
        return current

    # -- the process ------------------------------------------------------------------------

    def _spawn(self) -> _Process | None:
        ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        fd = str(theirs.fileno())
        script = Path(fence.__file__)
        if self.apps:
            argv = [sys.executable, "-m", "cronjobs.execution.processes.template", fd,
                    *self.apps]
        elif script.is_file():  # it only fences: isolated and quick to start, as the watchdog
            argv = [sys.executable, "-I", "-S", str(script), "--template", fd]
        else:
            argv = [sys.executable, "-m", "cronjobs.execution.processes.fence", "--template",
                    fd]
        try:
            popen = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=2,
                                     pass_fds=(theirs.fileno(),), start_new_session=True)
        except (OSError, subprocess.SubprocessError) as exc:
            ours.close()
            theirs.close()
            log.warning("could not start the template process: %s", exc,
                        extra={"action": "template"})
            return None
        theirs.close()
        current = _Process(popen, ours)
        with self._lock:
            replay = [f"watch {g}".encode() if d is None else f"watch {g} {d:.3f}".encode()
                      for g, d in self._watched.items()]
        if replay:
            self._send(current, b"\n".join(replay))
        threading.Thread(target=self._read, args=(current,), name="cronjobs-template",
                         daemon=True).start()
        return current

    def _send(self, current: _Process, data: bytes) -> None:
        try:
            current.sock.send(data)
        except OSError as exc:
            self._gone(current, exc)

    def _gone(self, current: _Process, exc: OSError) -> None:
        """A message could not be sent: the process ended (say how, from its exit status,
        as the reader does when it sees the socket close: a send can fail first) or
        closed its end of the socket."""
        if exc.errno in (errno.EPIPE, errno.ECONNRESET):
            self._died(current, None)
        else:
            self._died(current, f"the template process is gone ({exc})")

    def _read(self, current: _Process) -> None:
        """The reader thread of one template process: its answers and reports."""
        while True:
            try:
                data = current.sock.recv(MESSAGE)
            except OSError:
                data = b""
            if not data:
                break
            words = data.decode(errors="replace").split(" ", 2)
            kind = words[0]
            if kind == "hello":
                current.ready.set()
            elif kind == "unsafe":
                current.unsafe = data.decode(errors="replace")[len("unsafe "):]
                current.ready.set()
            elif kind == "started" and len(words) == 3:
                with current.lock:
                    child = current.pending.pop(words[1], None)
                    if child is not None:
                        current.children[int(words[2])] = child
                if child is not None:
                    child._start(int(words[2]))
            elif kind == "refused" and len(words) == 3:
                with current.lock:
                    child = current.pending.pop(words[1], None)
                if child is not None:
                    child._refuse(words[2])
            elif kind == "exit" and len(words) == 3:
                with current.lock:
                    child = current.children.pop(int(words[1]), None)
                if child is not None:
                    child._exit(int(words[2]))
        self._died(current, None)

    def _died(self, current: _Process, reason: str | None) -> None:
        """The template process ended (or is unusable): fail what it had not finished."""
        with current.lock:
            if current.dead is not None:
                return
            if reason is None:
                try:
                    current.popen.wait(1.0)
                except subprocess.TimeoutExpired:  # it closed the socket but lives on
                    with contextlib.suppress(OSError):
                        os.killpg(current.popen.pid, signal.SIGKILL)
                code = current.popen.returncode
                how = ("still running" if code is None else f"killed by signal "
                       f"{signal_name(-code)}" if code < 0 else f"exit code {code}")
                reason = f"the template process died ({how})"
            current.dead = reason
            pending, current.pending = list(current.pending.values()), {}
            children, current.children = list(current.children.values()), {}
        current.ready.set()
        if not self._closed and (pending or children):
            log.warning("%s: %d handler attempt(s) lost with it", reason,
                        len(pending) + len(children), extra={"action": "template"})
        for child in pending:
            child._refuse(reason)
        for child in children:
            child._exit(-signal.SIGKILL, f"{reason}; the attempt was killed with it")
        with contextlib.suppress(OSError):
            current.sock.close()

    def _kill(self, current: _Process, reason: str) -> None:
        with contextlib.suppress(OSError):
            os.killpg(current.popen.pid, signal.SIGKILL)
        self._died(current, reason)

    def close(self) -> None:
        """End the template (killing what it still fences) and wait for it to exit."""
        self.flush()
        with self._lock:
            self._closed = True
            current, self._current = self._current, None
        if current is None:
            return
        if current.dead is None:
            with contextlib.suppress(OSError):
                current.sock.send(b"close")
        try:
            current.popen.wait(5.0)
        except subprocess.TimeoutExpired:
            self._kill(current, "the template process did not exit")
            current.popen.wait()

