"""The processes the runner starts besides commands; never imported by the tick itself.

``python -m cronjobs.execution.child --result-fd N``
    Runs one handler attempt. Reads a JSON spec from stdin (``apps``, ``handler``,
    ``context``, ``result_limit``), imports the ``--app`` modules, calls ``handler(ctx)``
    and writes one JSON envelope to fd ``N``: ``{"ok": true, "result": ...}`` or
    ``{"ok": false, "error": "ValueError: bad input"}``. The handler's output (stdout and
    stderr, tracebacks included) goes to the inherited stdout/stderr, never to fd ``N``.
    Exit status: 0 when the handler returned, 1 when it raised or could not be found; a
    handler stopped by SIGTERM dies by SIGTERM (after printing where it was), and whatever
    the handler itself does (``os._exit(7)``, a crash) shows through unchanged.

``python -m cronjobs.execution.child --template N [APP ...]``
    The tick's template process (see :mod:`cronjobs.execution.template`): imports the
    ``--app`` modules, then forks one child per ``run`` request read from the socket on fd
    ``N`` (the request carries the spec) and calls the handler in it as :func:`run_handler`
    would; it also follows the watchdog's lines. Without
    ``APP`` (a tick with no handlers to fork) it only fences, and runs isolated like the
    watchdog.

``python -I -S .../cronjobs/child.py --watchdog``
    The watchdog of one tick (see :class:`cronjobs.execution.watchdog.Watchdog`). Reads lines
    ``watch PGID [DEADLINE]`` / ``renew PGID DEADLINE`` / ``forget PGID`` / ``close`` from
    stdin; ``-PID`` in place of a group is the single process PID (the tick itself, while
    it runs handlers in-process). When stdin ends, with or without ``close``, every process
    group still watched is killed (SIGKILL) and it exits: an end without ``close`` means
    the tick died. It imports nothing but the standard
    library, so it can run isolated (``-I -S``) and starts quickly.

Return values that cannot be stored as JSON (not serialisable, NaN or infinity, NUL
characters, lone surrogates) are stored as ``{"repr": "..."}``, shortened to fit
``result_limit``. A JSON result larger than ``result_limit`` bytes is dropped: the attempt
still succeeds with no result, and a note saying so is written to stderr (so it shows in
the output tail).
"""

from __future__ import annotations

import contextlib
import faulthandler
import gc
import io
import json
import os
import select
import signal
import socket
import sys
import time
import traceback
from collections.abc import Callable, Iterable
from types import FrameType
from typing import Any

ERROR_CHARS = 1000  # longest error line sent to the tick
FDS = 2  # file descriptors the tick sends the template with each run: output, result
MESSAGE = 64 * 1024  # largest message between the tick and its template, but a run request
SPEC = 128 * 1024  # largest spec a run request carries (a larger one takes a fresh interpreter)
REQUEST = SPEC + 1024  # largest run request: ``run ID`` and a newline, then the spec


# Handlers are set with the C function that signal.signal wraps: the wrapper converts to and
# from enums, and in a forked child every page that touches is copied (a tenth of a no-op
# run). What a forked handler child restores: the default for the signals the template
# handles or ignores, Python's own handler for SIGINT.
_SET_HANDLER: Callable[[int, Any], Any] = getattr(signal.signal, "__wrapped__", signal.signal)
_SIGTERM, _SIG_DFL = int(signal.SIGTERM), int(signal.SIG_DFL)
_CHILD_HANDLERS: tuple[tuple[int, Any], ...] = (
    *((int(s), _SIG_DFL)
      for s in (signal.SIGCHLD, signal.SIGTERM, signal.SIGHUP, signal.SIGPIPE)),
    (int(signal.SIGINT), signal.default_int_handler))


class _Terminated(BaseException):
    """SIGTERM arrived while the handler ran (raised so that ``finally`` blocks run)."""


def _on_sigterm(signum: int, frame: FrameType | None) -> None:
    raise _Terminated


def _one_line(text: str) -> str:
    line = text.strip().splitlines()[0] if text.strip() else ""
    line = line.replace("\x00", "\ufffd")
    return line if len(line) <= ERROR_CHARS else line[: ERROR_CHARS - 3] + "..."


def describe_exception(exc: BaseException) -> str:
    """The last line of a traceback, on one line: ``ValueError: bad input``."""
    cls = type(exc)
    name = cls.__qualname__
    if cls.__module__ not in ("builtins", "__main__"):
        name = f"{cls.__module__}.{name}"
    try:
        message = str(exc)
    except Exception:  # a broken __str__ must not hide the exception
        message = "<exception str() failed>"
    return _one_line(f"{name}: {message}" if message.strip() else name)


def _safe_repr(value: Any) -> str:
    try:
        text = repr(value)
    except Exception:  # a broken __repr__ must not fail a finished handler
        text = f"<unrepresentable {type(value).__qualname__}>"
    return text.replace("\x00", "\\x00")


def encode_result(value: Any, limit: int) -> tuple[bytes | None, str | None]:
    """``(json bytes, None)`` for a result that fits ``limit``, else ``(None, note)``."""
    if value is None and limit >= 4:  # the usual result, without the encoder's machinery
        return b"null", None
    try:
        text = json.dumps(value, allow_nan=False, ensure_ascii=False, separators=(",", ":"))
        if "\\u0000" in text:  # PostgreSQL's jsonb cannot hold NUL characters
            raise ValueError("NUL character")  # noqa: TRY301 - handled just below
        data = text.encode("utf-8")  # lone surrogates raise UnicodeEncodeError (a ValueError)
    except (TypeError, ValueError, RecursionError):
        shown = _safe_repr(value)
        while True:
            data = json.dumps({"repr": shown}).encode("ascii")
            over = len(data) - limit
            if over <= 0:
                return data, None
            if len(shown) <= 3:
                return None, f"the handler's result does not fit in {limit} bytes"
            shown = shown[: max(0, len(shown) - over - 3)] + "..."
    if len(data) > limit:
        return None, (f"the handler's result was dropped: {len(data)} bytes of JSON "
                      f"exceed the limit of {limit} bytes")
    return data, None


def _send(channel: int, envelope: bytes) -> None:
    """Write ``envelope`` to ``channel`` and close it (with system calls only: no file
    object to build in a forked child)."""
    view = memoryview(envelope)
    try:
        while view:
            view = view[os.write(channel, view):]
    except OSError:
        pass  # the runner stopped listening (it gave up on this process)
    finally:
        with contextlib.suppress(OSError):
            os.close(channel)


def _error_envelope(message: str) -> bytes:
    return json.dumps({"ok": False, "error": message}).encode("ascii")


def _prepare_stdio() -> None:
    """Line-buffer stdout (output survives ``os._exit``) and detach stdin once read."""
    if isinstance(sys.stdout, io.TextIOWrapper):
        sys.stdout.reconfigure(line_buffering=True)
    devnull = os.open(os.devnull, os.O_RDONLY)
    os.dup2(devnull, 0)
    os.close(devnull)


def run_handler(channel: int) -> int:
    """Run the handler named by the spec on stdin; see the module docstring."""
    os.set_inheritable(channel, False)  # the handler's own subprocesses must not hold it
    faulthandler.enable()  # a crash prints the Python stack to stderr, into the output tail
    spec = json.loads(sys.stdin.buffer.read() or b"{}")
    _prepare_stdio()
    return _call(channel, spec, None)


def _call(channel: int, spec: dict[str, Any], handlers: dict[str, Any] | None) -> int:
    """Call the handler the spec names, from ``handlers`` (the template's, already
    imported) or, when None, from the spec's ``apps`` imported now."""
    for key, value in (spec.get("environment") or {}).items():  # CRONJOBS_*: a forked
        os.environ[key] = value  # child's own (set one by one: update() is an ABC's)

    from cronjobs.errors import ConfigurationError  # noqa: PLC0415
    from cronjobs.execution.context import JobContext  # noqa: PLC0415 - the watchdog mode imports nothing
    from cronjobs.execution.registry import load_apps, lookup  # noqa: PLC0415

    name = str(spec.get("handler"))
    limit = int(spec.get("result_limit", 64 * 1024))
    if handlers is None:
        try:
            handlers = load_apps(spec.get("apps") or ())
        except ConfigurationError as exc:
            traceback.print_exception(exc.__cause__ or exc)
            _send(channel, _error_envelope(_one_line(exc.message)))
            return 1
    try:
        handler = lookup(handlers, name)
    except ConfigurationError as exc:
        print(f"cronjobs: {exc.message}", file=sys.stderr)
        _send(channel, _error_envelope(_one_line(exc.message)))
        return 1
    context = JobContext.from_dict(spec["context"])

    _SET_HANDLER(_SIGTERM, _on_sigterm)
    try:
        value = handler(context)
    except _Terminated as exc:
        _SET_HANDLER(_SIGTERM, _SIG_DFL)
        frames = traceback.extract_tb(exc.__traceback__)[1:-1]  # the handler's frames only
        print("cronjobs: the handler got SIGTERM while at:", file=sys.stderr)
        print("".join(traceback.format_list(frames)), end="", file=sys.stderr)
        _die_by(signal.SIGTERM)
        return 128 + signal.SIGTERM
    except Exception as exc:  # the handler failed: its traceback goes to the output
        _SET_HANDLER(_SIGTERM, _SIG_DFL)
        tb = exc.__traceback__
        traceback.print_exception(type(exc), exc, tb.tb_next if tb is not None else None)
        _send(channel, _error_envelope(describe_exception(exc)))
        return 1
    _SET_HANDLER(_SIGTERM, _SIG_DFL)

    data, note = encode_result(value, limit)
    if note is not None:
        print(f"cronjobs: {note}", file=sys.stderr)
    _send(channel, b'{"ok":true,"result":' + (data or b"null") + b"}")
    return 0


def _die_by(signum: int) -> None:
    """Flush and kill this process with ``signum``, so the parent sees the real cause."""
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(OSError, ValueError):
            stream.flush()
    os.kill(os.getpid(), signum)
    time.sleep(1)  # the signal is delivered at once; never reached in practice


def _kill_groups(groups: Iterable[int]) -> None:
    """SIGKILL each process group; a negative entry -PID is the single process PID."""
    for pgid in groups:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            if pgid < 0:
                os.kill(-pgid, signal.SIGKILL)
            else:
                os.killpg(pgid, signal.SIGKILL)


def watchdog(fd: int) -> int:
    """Follow ``watch PGID [DEADLINE]`` / ``renew PGID DEADLINE`` / ``forget PGID`` /
    ``close`` lines read from ``fd``. DEADLINE is a ``time.monotonic()`` value (the clock
    is system-wide): a group whose deadline passes is killed, because its lease is about
    to expire and the tick (frozen, or cut off from the database) did not renew it. At the
    end of the input, whatever is still watched is killed."""
    for signum in (signal.SIGINT, signal.SIGHUP, signal.SIGTERM):
        signal.signal(signum, signal.SIG_IGN)  # only the end of stdin (or SIGKILL) ends it
    watched: dict[int, float | None] = {}
    pending = b""
    while True:
        deadlines = [d for d in watched.values() if d is not None]
        wait = max(0.0, min(deadlines) - time.monotonic()) if deadlines else None
        ready, _, _ = select.select([fd], [], [], wait)
        if ready:
            data = os.read(fd, 65536)
            if not data:
                break
            pending += data
            *lines, pending = pending.split(b"\n")
            if _apply(lines, watched):
                break
        now = time.monotonic()
        expired = [g for g, d in watched.items() if d is not None and d <= now]
        if expired:
            _kill_groups(expired)
            for group in expired:
                del watched[group]
    groups = [g for g in watched if g > 0]  # the tick itself (-PID) ended already
    if groups:
        _kill_groups(groups)
        time.sleep(0.1)
        _kill_groups(groups)  # anything forked while the first signal was being sent
    return 0


def _apply(lines: Iterable[bytes], watched: dict[int, float | None]) -> bool:
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


# -- the template process (see cronjobs.execution.template) ---------------------------------


def _threads() -> int:
    try:
        return len(os.listdir("/proc/self/task"))
    except OSError:
        import threading  # noqa: PLC0415 - the other modes never need it

        return threading.active_count()


class _Server:
    """The template's loop: fork children on request, report their exits, fence groups.

    (Its steps use plain ``try`` rather than ``contextlib.suppress``: every page the
    template writes between two forks is copied, once per fork.)"""

    def __init__(self, sock: socket.socket) -> None:
        self.sock = sock
        self.handlers: dict[str, Any] | None = None  # the apps' handlers, once imported
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

    def serve(self) -> int:
        signal.set_wakeup_fd(self.wake_w)
        signal.signal(signal.SIGCHLD, lambda signum, frame: None)
        closing = False
        while True:
            deadlines = [d for d in self.watched.values() if d is not None]
            wait = max(0.0, min(deadlines) - time.monotonic()) if deadlines else None
            ready, _, _ = select.select([self.sock.fileno(), self.wake_r], [], [], wait)
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
                    self._fork(header[4:].decode(), spec, fds)
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

    def _fork(self, run_id: str, spec: bytes, fds: list[int]) -> None:
        if len(fds) != FDS:
            _close(fds)
            self.send(f"refused {run_id} expected {FDS} file descriptors".encode())
            return
        for stream in (sys.stdout, sys.stderr):  # nothing buffered is copied into the child
            try:  # noqa: SIM105 - see the class's docstring
                stream.flush()
            except (OSError, ValueError):
                pass
        template = os.getpid()
        try:
            pid = os.fork()
        except OSError as exc:
            _close(fds)
            self.send(f"refused {run_id} could not fork: {exc}".encode())
            return
        if pid == 0:
            self._child(spec, fds, template)  # never returns
        _close(fds)
        self.children.add(pid)
        self.send(f"started {run_id} {pid}".encode())

    def _child(self, spec: bytes, fds: list[int], template: int) -> None:
        """In the forked child: become an isolated job, run the handler, ``os._exit``.
        (What every child needs was made ready once, in :func:`template`: a child does
        only what differs from run to run, since each page it touches is copied.)"""
        code = 70
        try:
            os.setsid()
            from cronjobs.execution.groups import die_with_parent  # noqa: PLC0415

            die_with_parent(template)
            signal.set_wakeup_fd(-1)
            for signum, handler in _CHILD_HANDLERS:
                _SET_HANDLER(signum, handler)
            output, result = fds
            os.set_inheritable(result, False)  # the handler's own subprocesses must not hold it
            os.dup2(output, 1)  # stdin is the template's /dev/null
            os.dup2(output, 2)
            _close([output, self.wake_r, self.wake_w])
            self.sock.close()
            # (random reseeds itself in a forked child, if the app imported it)
            code = _call(result, json.loads(spec.decode() or "{}"), self.handlers)
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
        try:  # noqa: SIM105 - used by the template between forks (see _Server)
            os.close(fd)
        except OSError:
            pass


def _ready_for_children() -> None:
    """Once, after the apps: what every handler child needs and is the same for all of
    them, so that no child pays for it (importing ctypes for the parent-death signal cost
    more than the rest of a no-op run). The child's stdout, made line-buffered here, and
    faulthandler's fd 2 are the child's output pipe once it set them up."""
    import cronjobs.execution.context  # noqa: PLC0415
    import cronjobs.execution.groups  # noqa: PLC0415, F401 - ctypes, prctl resolved

    faulthandler.enable()  # a crash prints the Python stack to stderr, into the output tail
    if isinstance(sys.stdout, io.TextIOWrapper):
        sys.stdout.reconfigure(line_buffering=True)  # output survives ``os._exit``


def template(fd: int, apps: list[str]) -> int:
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
            server.handlers = load_apps(apps)  # fresh interpreter would
        threads = _threads()
        if threads > 1:
            hello = (f"unsafe the --app modules started {threads - 1} thread(s) on import, "
                     "and forking could copy a lock one of them holds").encode()
        _ready_for_children()
    # Objects that exist now are never collected in a child: the collector would otherwise
    # touch (and so copy) every page of the template in every child.
    gc.freeze()
    server.send(hello)
    return server.serve()


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    if args == ["--watchdog"]:
        return watchdog(sys.stdin.fileno())
    if len(args) >= 2 and args[0] == "--template" and args[1].isdigit():
        return template(int(args[1]), args[2:])
    if len(args) == 2 and args[0] == "--result-fd" and args[1].isdigit():
        return run_handler(int(args[1]))
    print("usage: python -m cronjobs.execution.child (--result-fd N | --watchdog | "
          "--template N [APP ...])", file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main())
