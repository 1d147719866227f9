"""Which mode runs an attempt: the run modes of one tick (:class:`Runners`), and
:func:`start` for a single attempt."""

from __future__ import annotations

import threading

from cronjobs.execution.runners import Runner, Work
from cronjobs.execution.runners.forked import ForkedRunner
from cronjobs.execution.runners.inprocess import ThreadRunner
from cronjobs.execution.runners.interpreter import InterpreterRunner
from cronjobs.execution.runners.process import Running
from cronjobs.execution.runners.shell import ShellRunner
from cronjobs.execution.runners.template import Template
from cronjobs.execution.watchdog import Watchdog
from cronjobs.models import Kind


class Runners:
    """The run modes of one tick, and the two fences they share: its watchdog and its
    template process (which also forks isolated handler runs; with ``--in-process`` it
    only fences). Both start with the first run, so an idle tick starts no process."""

    def __init__(self, apps: tuple[str, ...], in_process: bool, wake: threading.Event) -> None:
        self.apps = apps
        self.in_process = in_process
        self.wake = wake  # set when a job ends
        self.watchdog: Watchdog | None = None
        self.template: Template | None = None
        self._modes: dict[Kind, Runner] = {}

    def for_kind(self, kind: Kind) -> Runner:
        """The runner of a job of ``kind`` (starting the fences on first use; an error
        starting them is the caller's, for the run at hand)."""
        if not self._modes:
            self._start()
        return self._modes[kind]

    def _start(self) -> None:
        watchdog = Watchdog.start()
        watchdog.autoflush = False  # flushed once per pass (:meth:`flush`)
        template = Template(() if self.in_process else self.apps, self.wake)
        watchdog.mirror = template
        self.watchdog, self.template = watchdog, template
        self._modes = {
            Kind.COMMAND: ShellRunner(watchdog, self.wake),
            Kind.HANDLER: (ThreadRunner(self.apps, self.wake) if self.in_process
                           else ForkedRunner(template, watchdog, self.wake)),
        }

    def flush(self) -> None:
        """Send the fences what was written to them since the last flush."""
        if self.watchdog is not None:
            self.watchdog.flush()

    def close(self) -> None:
        if self.watchdog is not None:
            self.watchdog.close()
        if self.template is not None:
            self.template.close()


def start(work: Work, watchdog: Watchdog | None = None, deadline: float | None = None,
          wake: threading.Event | None = None, template: Template | None = None) -> Running:
    """Start one attempt in its own process group and return at once: a command as
    ``/bin/sh -c``, a handler in a child of ``template`` or else in a fresh interpreter. A
    job that cannot be started at all (no /bin/sh, out of processes) gives a Running whose
    result is FAILED, with pid 0. With a ``watchdog``, the job's group is killed if the
    tick dies, or when ``deadline`` (``time.monotonic()``; the end of the lease) passes
    without ``watchdog.renew``. ``wake`` is set when the job's main process has exited
    (and its output ended), so that the caller can wait on it instead of polling."""
    if work.kind == Kind.COMMAND:
        return ShellRunner(watchdog, wake).start(work, deadline)
    if template is not None:
        return ForkedRunner(template, watchdog, wake).start(work, deadline)
    return InterpreterRunner(watchdog, wake).start(work, deadline)
