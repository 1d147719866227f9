"""A handler in a fresh interpreter, ``python -m cronjobs.execution.processes.handler``: the
isolated mode's fallback when the template process cannot take a run (it is not ready,
the app made forking unsafe, the spec is too large for one message)."""

from __future__ import annotations

import json
import os
import sys
import threading

from cronjobs.execution.runners import Work
from cronjobs.execution.runners.process import Running, popen
from cronjobs.execution.watchdog import Watchdog


def spec(work: Work) -> bytes:
    """What a handler's process is given: on its stdin, or with the request to fork it."""
    return json.dumps({"apps": list(work.apps), "handler": work.handler,
                       "context": work.context.to_dict(),
                       "environment": work.context.environment(),
                       "result_limit": work.result_limit}).encode()


class InterpreterRunner:
    """Starts handlers each in a fresh interpreter, which imports the ``--app`` modules,
    reads the spec on its stdin and sends the result over a pipe of its own."""

    in_process = False

    def __init__(self, watchdog: Watchdog | None = None,
                 wake: threading.Event | None = None) -> None:
        self.watchdog = watchdog
        self.wake = wake

    def start(self, work: Work, deadline: float | None = None) -> Running:
        channel_r, channel_w = os.pipe()
        argv = [sys.executable, "-m", "cronjobs.execution.processes.handler", "--result-fd",
                str(channel_w)]
        return popen(work, argv, self.watchdog, deadline, self.wake,
                     result_pipe=(channel_r, channel_w), spec=spec(work))
