"""The template process: isolated handler runs at the cost of a fork, not an interpreter.

Each tick that runs jobs starts one template process, ``python -m
cronjobs.execution.template`` — a fresh interpreter, so nothing of the tick (its database
connection, its threads, its locks, its logging handlers) is in it. It imports the
``--app`` modules once and then forks one child per handler attempt. The child is what a
fresh interpreter per run used to be: the leader of a new session and process group, with
its own stdout/stderr pipe and result pipe, ``PR_SET_PDEATHSIG = SIGKILL`` towards the
template, the run's ``CRONJOBS_*`` variables, and :func:`cronjobs.execution.child.run_handler`
calling the handler. It ends with ``os._exit``: nothing of the template (atexit handlers,
buffers) runs twice. Whatever a handler does (segfaults, ``os._exit``, leaks memory, ignores
SIGTERM) happens in its child and ends with it; the tick times it out, stops it and reads
its output exactly as before, by its process group.

The tick and its template share one ``SOCK_SEQPACKET`` socket pair. The tick sends
``run ID`` with three file descriptors (the child's stdin carrying the spec, its output
pipe and its result pipe), and the watchdog's own lines (``watch`` / ``renew`` /
``forget``, see :mod:`cronjobs.execution.child`), which makes the template a second
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
import logging
import os
import select
import signal
import socket
import subprocess
import sys
import threading
import time
import traceback
from collections.abc import Iterable
from dataclasses import dataclass, field

from cronjobs.execution.groups import die_with_parent, signal_name

log = logging.getLogger(__name__)

FDS = 3  # file descriptors sent with each run: spec (child's stdin), output, result
HELLO_WAIT = 5.0  # seconds a handler run waits for the template to be ready
ANSWER_WAIT = 10.0  # seconds to wait for a started template to answer a run
MESSAGE = 64 * 1024  # largest message read


# -- the template process ---------------------------------------------------------------------


def _threads() -> int:
    try:
        return len(os.listdir("/proc/self/task"))
    except OSError:
        return threading.active_count()


class _Server:
    """The template's loop: fork children on request, report their exits, fence groups."""

    def __init__(self, sock: socket.socket) -> None:
        self.sock = sock
        self.watched: dict[int, float | None] = {}  # the watchdog's groups (and -PIDs)
        self.children: set[int] = set()  # children not yet reaped (each its own group)
        self.wake_r, self.wake_w = os.pipe()
        os.set_blocking(self.wake_w, False)
        os.set_blocking(self.wake_r, False)

    def send(self, data: bytes) -> None:
        with contextlib.suppress(OSError):  # the tick is gone: the loop sees the end
            self.sock.send(data)

    def serve(self) -> int:
        from cronjobs.execution.child import _apply, _kill_groups  # noqa: PLC0415

        signal.set_wakeup_fd(self.wake_w)
        signal.signal(signal.SIGCHLD, lambda signum, frame: None)
        closing = False
        while True:
            deadlines = [d for d in self.watched.values() if d is not None]
            wait = max(0.0, min(deadlines) - time.monotonic()) if deadlines else None
            ready, _, _ = select.select([self.sock.fileno(), self.wake_r], [], [], wait)
            if self.wake_r in ready:
                with contextlib.suppress(BlockingIOError):
                    os.read(self.wake_r, 4096)
            self._reap()
            if self.sock.fileno() in ready:
                try:
                    data, fds, _flags, _addr = socket.recv_fds(self.sock, MESSAGE, FDS)
                except OSError:
                    data, fds = b"", []
                if not data:
                    break  # the tick died (or closed without saying so)
                if data.startswith(b"run "):
                    self._fork(data[4:].decode(), fds)
                else:
                    _close(fds)
                    if _apply(data.split(b"\n"), self.watched):
                        closing = True
                        break
            now = time.monotonic()
            expired = [g for g, d in self.watched.items() if d is not None and d <= now]
            if expired:
                _kill_groups(expired)
                for group in expired:
                    del self.watched[group]
        # The tick ended: nothing supervises these any more. (After a clean close there
        # are none left but groups the tick gave up on.)
        groups = {g for g in self.watched if g > 0} | self.children
        if groups:
            _kill_groups(groups)
            if not closing:
                time.sleep(0.1)
                _kill_groups(groups)  # anything forked while the first signal was being sent
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

    def _fork(self, run_id: str, fds: list[int]) -> None:
        if len(fds) != FDS:
            _close(fds)
            self.send(f"refused {run_id} expected {FDS} file descriptors".encode())
            return
        for stream in (sys.stdout, sys.stderr):  # nothing buffered is copied into the child
            with contextlib.suppress(OSError, ValueError):
                stream.flush()
        template = os.getpid()
        try:
            pid = os.fork()
        except OSError as exc:
            _close(fds)
            self.send(f"refused {run_id} could not fork: {exc}".encode())
            return
        if pid == 0:
            self._child(fds, template)  # never returns
        _close(fds)
        self.children.add(pid)
        self.send(f"started {run_id} {pid}".encode())

    def _child(self, fds: list[int], template: int) -> None:
        """In the forked child: become an isolated job, run the handler, ``os._exit``."""
        code = 70
        try:
            os.setsid()
            die_with_parent(template)
            signal.set_wakeup_fd(-1)
            for signum in (signal.SIGCHLD, signal.SIGTERM, signal.SIGHUP, signal.SIGPIPE):
                signal.signal(signum, signal.SIG_DFL)
            signal.signal(signal.SIGINT, signal.default_int_handler)
            spec, output, result = fds
            os.dup2(spec, 0)
            os.dup2(output, 1)
            os.dup2(output, 2)
            _close([spec, output, self.wake_r, self.wake_w])
            self.sock.close()
            import random  # noqa: PLC0415 - the child's own seed (fork reseeds it; made sure)

            random.seed()
            from cronjobs.execution.child import run_handler  # noqa: PLC0415

            code = run_handler(result)
        except SystemExit as exc:  # sys.exit() in a handler ends its process, as it would
            code = _exit_code(exc)
        except BaseException:
            with contextlib.suppress(Exception):
                traceback.print_exc()
            code = 70
        finally:
            for stream in (sys.stdout, sys.stderr):
                with contextlib.suppress(Exception):
                    stream.flush()
            os._exit(code)


def _exit_code(exc: SystemExit) -> int:
    if exc.code is None:
        return 0
    if isinstance(exc.code, int):
        return exc.code & 0xFF
    print(exc.code, file=sys.stderr)
    return 1


def _close(fds: Iterable[int]) -> None:
    for fd in fds:
        with contextlib.suppress(OSError):
            os.close(fd)


def serve(fd: int, apps: list[str]) -> int:
    """The template process: import ``apps``, say hello, serve until the socket ends."""
    for signum in (signal.SIGINT, signal.SIGHUP, signal.SIGTERM):
        signal.signal(signum, signal.SIG_IGN)  # only the end of the socket (or SIGKILL)
    sock = socket.socket(fileno=fd)
    os.set_inheritable(fd, False)
    devnull = os.open(os.devnull, os.O_RDONLY)
    os.dup2(devnull, 0)
    os.close(devnull)
    server = _Server(sock)
    hello = b"hello"
    if apps:
        from cronjobs.errors import ConfigurationError  # noqa: PLC0415
        from cronjobs.execution.registry import load_apps  # noqa: PLC0415

        with contextlib.suppress(ConfigurationError):  # each child reports it, as a
            load_apps(apps)  # fresh interpreter would
        threads = _threads()
        if threads > 1:
            hello = (f"unsafe the --app modules started {threads - 1} thread(s) on import, "
                     "and forking could copy a lock one of them holds").encode()
    server.send(hello)
    return server.serve()


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    if len(args) >= 2 and args[0] == "--socket-fd" and args[1].isdigit():
        return serve(int(args[1]), args[2:])
    print("usage: python -m cronjobs.execution.template --socket-fd N [APP ...]",
          file=sys.stderr)
    return 2


# -- the tick's side ----------------------------------------------------------------------------


class TemplateChild:
    """A handler attempt's main process, a child of the template: the tick cannot wait for
    it, so the template reports its exit. (A :class:`cronjobs.execution.process.Main`.)"""

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
        self._current: _Process | None = None
        self._current = self._spawn()

    @property
    def pid(self) -> int | None:
        current = self._current
        return current.popen.pid if current is not None else None

    # -- the watchdog's lines -------------------------------------------------------------

    def line(self, line: bytes) -> None:
        """A line the watchdog was sent (``watch``/``renew``/``forget``); sent on flush."""
        from cronjobs.execution.child import _apply  # noqa: PLC0415

        with self._lock:
            _apply([line], self._watched)
            self._lines.append(line)

    def flush(self) -> None:
        with self._lock:
            lines, self._lines = self._lines, []
            current = self._current
        if current is None or not lines or current.dead is not None:
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

    def run(self, spec: int, output: int, result: int) -> TemplateChild | None:
        """Start a handler child with these file descriptors (the caller closes its
        copies). None when the template cannot be used (it is not ready in time, or the
        app made forking unsafe): then run it in a fresh interpreter. A child whose
        ``refused`` is set could not be started."""
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
            socket.send_fds(current.sock, [f"run {run_id}".encode()], [spec, output, result])
        except OSError as exc:
            self._died(current, f"the template process is gone ({exc})")
        if not child._answered.wait(ANSWER_WAIT):
            self._kill(current, f"the template process did not start the handler within "
                                f"{ANSWER_WAIT:g}s; it was killed")
            child._answered.wait(ANSWER_WAIT)
        return child

    def _usable(self) -> _Process | None:
        with self._lock:
            if self._closed:
                return None
            current = self._current
        if current is None or current.dead is not None:
            current = self._spawn()  # a new one, for this run and the next ones
            with self._lock:
                self._current = current
        if current is None:
            return None
        if not current.ready.wait(HELLO_WAIT):
            return None  # still importing: this run takes a fresh interpreter
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
        argv = [sys.executable, "-m", "cronjobs.execution.template", "--socket-fd",
                str(theirs.fileno()), *self.apps]
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
                with contextlib.suppress(subprocess.TimeoutExpired):
                    current.popen.wait(1.0)
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


if __name__ == "__main__":
    sys.exit(main())
