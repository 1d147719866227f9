"""Commands: ``/bin/sh -c COMMAND``, as cron runs them, with no Python in between, in a
process group of their own (:class:`~.process.Running`)."""

from __future__ import annotations

import contextlib
import functools
import os
import threading
import time

from cronjobs.execution.runners import Work
from cronjobs.execution.runners.output import Pump
from cronjobs.execution.runners.process import (
    Running,
    Spawned,
    close,
    environment,
    grow_pipe,
    popen,
)
from cronjobs.execution.watchdog import Watchdog

_SH = b"/bin/sh"


class ShellRunner:
    """Starts commands: with ``posix_spawn`` (a vfork and an exec, the least a process
    start costs) while a watchdog fences them, else with ``subprocess`` and the
    parent-death signal (see :func:`~.process.popen`)."""

    in_process = False

    def __init__(self, watchdog: Watchdog | None = None,
                 wake: threading.Event | None = None) -> None:
        self.watchdog = watchdog
        self.wake = wake  # set when a job's main process has exited (and its output ended)

    def start(self, work: Work, deadline: float | None = None) -> Running:
        assert work.command is not None  # noqa: S101 - checked by Work
        if self.watchdog is not None and self.watchdog.pid is not None:
            return self._spawn(work, deadline)
        return popen(work, ["/bin/sh", "-c", work.command], self.watchdog, deadline, self.wake)

    def _spawn(self, work: Work, deadline: float | None) -> Running:
        """/dev/null in, the output pipe out, a session of its own."""
        assert work.command is not None  # noqa: S101 - checked by Work
        env = environment(work)
        output_r, output_w = os.pipe()
        grow_pipe(output_w)
        started = time.monotonic()
        close_inherited()
        try:
            pid = os.posix_spawn(_SH, [_SH, b"-c", os.fsencode(work.command)], env,
                                 file_actions=[
                                     (os.POSIX_SPAWN_OPEN, 0, os.devnull, os.O_RDONLY, 0),
                                     (os.POSIX_SPAWN_DUP2, output_w, 1),
                                     (os.POSIX_SPAWN_DUP2, output_w, 2)],
                                 setsid=True)
        except (OSError, ValueError) as exc:
            close(output_r, output_w)
            return Running(work, None, None, None, started,
                           failure=f"could not start /bin/sh: {exc}")
        os.close(output_w)
        assert self.watchdog is not None  # noqa: S101 - spawned only under a watchdog
        self.watchdog.watch(pid, deadline)
        pump = Pump(output_r, work.output_limit, None, work.result_limit, None, b"", pid=pid,
                    wake=self.wake)
        pump.start()
        return Running(work, Spawned(pid), pump, self.watchdog, started)


@functools.lru_cache(maxsize=1)
def close_inherited() -> None:
    """Once per tick: what the tick inherited beyond stdin, stdout and stderr (a file its
    parent left open) is not passed on to jobs, as ``close_fds`` would not."""
    with contextlib.suppress(OSError):
        for name in os.listdir("/proc/self/fd"):
            fd = int(name)
            if fd > 2:
                with contextlib.suppress(OSError):
                    if os.get_inheritable(fd):
                        os.set_inheritable(fd, False)
