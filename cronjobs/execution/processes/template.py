"""The template process of a tick with handlers to run (see
:mod:`cronjobs.execution.runners.template` for the tick's side).

``python -m cronjobs.execution.processes.template N APP [APP ...]``
    Imports the ``--app`` modules, then forks one child per ``run`` request read from the
    socket on fd ``N`` (the request carries the spec) and calls the handler in it as
    :func:`cronjobs.execution.processes.handler.call` does in a fresh interpreter. It also
    follows the watchdog's lines, as a second fence (:class:`~.fence.Server`). A template
    with no handlers to fork runs as :mod:`cronjobs.execution.processes.fence` instead,
    isolated.
"""

from __future__ import annotations

import contextlib
import faulthandler
import gc
import io
import json
import os
import signal
import socket
import sys
import threading
import traceback
from typing import Any

from cronjobs.errors import ConfigurationError
from cronjobs.execution.processes.fence import FDS, Server, close_fds, serve_socket
from cronjobs.execution.processes.handler import SET_HANDLER, SIG_DFL, call
from cronjobs.execution.registry import load_apps
from cronjobs.execution.runners.groups import die_with_parent

# What a forked handler child restores: the default for the signals the template handles
# or ignores, Python's own handler for SIGINT. (Plain ints: an enum member used in a forked
# child copies pages.)
_CHILD_HANDLERS: tuple[tuple[int, Any], ...] = (
    *((int(s), SIG_DFL)
      for s in (signal.SIGCHLD, signal.SIGTERM, signal.SIGHUP, signal.SIGPIPE)),
    (int(signal.SIGINT), signal.default_int_handler))


class Forker(Server):
    """The template's loop (:class:`~.fence.Server`) that forks a child per run request.
    (What every child needs was made ready once, in :func:`template`: a child does only
    what differs from run to run, since each page it touches is copied.)"""

    def __init__(self, sock: socket.socket) -> None:
        super().__init__(sock)
        self.handlers: dict[str, Any] | None = None  # the apps' handlers, once imported

    def run(self, run_id: str, spec: bytes, fds: list[int]) -> None:
        if len(fds) != FDS:
            close_fds(fds)
            self.send(f"refused {run_id} expected {FDS} file descriptors".encode())
            return
        for stream in (sys.stdout, sys.stderr):  # nothing buffered is copied into the child
            try:  # noqa: SIM105 - see fence.Server's docstring
                stream.flush()
            except (OSError, ValueError):
                pass
        template = os.getpid()
        try:
            pid = os.fork()
        except OSError as exc:
            close_fds(fds)
            self.send(f"refused {run_id} could not fork: {exc}".encode())
            return
        if pid == 0:
            self._child(spec, fds, template)  # never returns
        close_fds(fds)
        self.children.add(pid)
        self.send(f"started {run_id} {pid}".encode())

    def _child(self, spec: bytes, fds: list[int], template: int) -> None:
        """In the forked child: become an isolated job, run the handler, ``os._exit``."""
        code = 70
        try:
            os.setsid()
            die_with_parent(template)
            signal.set_wakeup_fd(-1)
            for signum, handler in _CHILD_HANDLERS:
                SET_HANDLER(signum, handler)
            output, result = fds
            os.set_inheritable(result, False)  # the handler's own subprocesses must not hold it
            os.dup2(output, 1)  # stdin is the template's /dev/null
            os.dup2(output, 2)
            close_fds([output, self.wake_r, self.wake_w])
            self.sock.close()
            # (random reseeds itself in a forked child, if the app imported it)
            code = call(result, json.loads(spec.decode() or "{}"), self.handlers)
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


def _threads() -> int:
    try:
        return len(os.listdir("/proc/self/task"))
    except OSError:
        return threading.active_count()


def template(fd: int, apps: list[str]) -> int:
    """Import ``apps``, say hello (or why forking is unsafe), serve until the socket
    ends."""
    server = serve_socket(fd, Forker)
    hello = b"hello"
    with contextlib.suppress(ConfigurationError):  # each child reports it, as a fresh
        server.handlers = load_apps(apps)  # interpreter would
    threads = _threads()
    if threads > 1:
        hello = (f"unsafe the --app modules started {threads - 1} thread(s) on import, "
                 "and forking could copy a lock one of them holds").encode()
    # Once, after the apps: what is the same for every child. The child's stdout, made
    # line-buffered here, and faulthandler's fd 2 are the child's output pipe once it set
    # them up.
    faulthandler.enable()  # a crash prints the Python stack to stderr, into the output tail
    if isinstance(sys.stdout, io.TextIOWrapper):
        sys.stdout.reconfigure(line_buffering=True)  # output survives ``os._exit``
    # Objects that exist now are never collected in a child: a full collection there would
    # touch (and so copy) every page of the template's heap. Measured with an app holding
    # 200,000 objects and a handler building 100,000 lists: 36 ms of CPU per forked run
    # frozen, 130 ms not (5,000 page faults against 15,200); a no-op handler: no difference.
    gc.freeze()
    server.send(hello)
    return server.serve()


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    if len(args) >= 2 and args[0].isdigit():
        return template(int(args[0]), args[1:])
    print("usage: python -m cronjobs.execution.processes.template N APP [APP ...]",
          file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main())
