"""A handler in a child forked from the tick's template process (:mod:`.template`):
isolated as a fresh interpreter would be, at the cost of a fork. The spec goes with the
request to fork, so the child has no stdin to be fed."""

from __future__ import annotations

import os
import threading
import time

from cronjobs.execution.runners import Work
from cronjobs.execution.runners.interpreter import InterpreterRunner, spec
from cronjobs.execution.runners.output import Pump
from cronjobs.execution.runners.process import Running, close, grow_pipe
from cronjobs.execution.runners.template import Template
from cronjobs.execution.watchdog import Watchdog


class ForkedRunner:
    """Starts handlers in children of ``template``; a run it cannot take (not ready in
    time, forking unsafe there, a spec too large, or a base environment of its own) runs
    in a fresh interpreter."""

    in_process = False

    def __init__(self, template: Template, watchdog: Watchdog | None = None,
                 wake: threading.Event | None = None) -> None:
        self.template = template
        self.watchdog = watchdog
        self.wake = wake
        self.fallback = InterpreterRunner(watchdog, wake)

    def start(self, work: Work, deadline: float | None = None) -> Running:
        if work.env is None:
            running = self._fork(work, deadline)
            if running is not None:
                return running
        return self.fallback.start(work, deadline)

    def _fork(self, work: Work, deadline: float | None) -> Running | None:
        """The run in a child of the template; None when the template cannot take it."""
        channel_r, channel_w = os.pipe()
        output_r, output_w = os.pipe()
        grow_pipe(output_w)
        started = time.monotonic()
        child = self.template.run(spec(work), output_w, channel_w)
        close(output_w, channel_w)  # the template holds its own copies
        if child is None or child.refused is not None:
            close(channel_r, output_r)
            if child is None:
                return None
            return Running(work, None, None, None, started,
                           failure=f"could not start the handler: {child.refused}")
        if self.watchdog is not None:
            self.watchdog.watch(child.pid, deadline)
        pump = Pump(output_r, work.output_limit, channel_r, work.result_limit, None, b"",
                    wake=self.wake)
        pump.start()
        return Running(work, child, pump, self.watchdog, started)
