"""Python handlers run inside the tick process, in threads: ``cronjobs tick --in-process``.

The default runs every handler attempt in a process of its own, forked from the tick's
template process (:mod:`.forked`), which isolates it completely and
costs a fork per run. In this mode the
tick imports the ``--app`` modules once and calls each handler in a thread of its own, so
a no-op handler costs about as much as the database writes around it. Leases, heartbeats
and fenced outcomes are the executor's and work exactly as for isolated runs.

What the speed costs, and how the tick makes up for it:

- A thread cannot be killed. A handler that overruns its timeout (or whose run is
  cancelled, or whose lease was lost, or whose tick is stopped) is recorded with that
  outcome at once and *abandoned*: it keeps running inside the tick, which stops claiming
  and exits as soon as its other runs have ended, ending the abandoned thread with it.
- A frozen tick cannot be trusted to stop its handlers before their leases expire: the
  tick's watchdog is told the earliest lease deadline of its in-process runs and kills the
  whole tick process if that passes without a renewal.
- What a handler prints through ``sys.stdout`` and ``sys.stderr`` (``print``, tracebacks)
  is kept as its output tail; output written to the file descriptors directly, or through
  logging handlers configured with the original streams, is not captured. The
  ``CRONJOBS_*`` environment variables are not set: use the :class:`JobContext`.
"""

from __future__ import annotations

import functools
import json
import sys
import threading
import time
import traceback
from collections.abc import Callable
from typing import Any, TextIO, cast

from cronjobs.durations import format_duration
from cronjobs.errors import ConfigurationError
from cronjobs.execution.context import JobContext
from cronjobs.execution.processes.handler import describe_exception, encode_result
from cronjobs.execution.registry import load_apps, lookup
from cronjobs.execution.runners import Result, Work
from cronjobs.execution.runners.output import Tail, Workers
from cronjobs.models import AttemptOutcome

_local = threading.local()  # .tail: the output tail of the handler this thread runs


class _ThreadOutput:
    """Stands in for sys.stdout / sys.stderr: text written from a handler's thread goes to
    that handler's tail, anything else to the real stream."""

    def __init__(self, stream: TextIO) -> None:
        self._stream = stream

    def write(self, text: str) -> int:
        tail: Tail | None = getattr(_local, "tail", None)
        if tail is None:
            return self._stream.write(text)
        tail.keep(text.encode("utf-8", errors="replace"))
        return len(text)

    def flush(self) -> None:
        if getattr(_local, "tail", None) is None:
            self._stream.flush()

    def __getattr__(self, name: str) -> Any:
        return getattr(self._stream, name)


def _route_output() -> None:
    if not isinstance(sys.stdout, _ThreadOutput):
        sys.stdout = cast(TextIO, _ThreadOutput(sys.stdout))
    if not isinstance(sys.stderr, _ThreadOutput):
        sys.stderr = cast(TextIO, _ThreadOutput(sys.stderr))


class ThreadRunner:
    """Starts handler attempts in threads of this process; one per tick. The executor
    guards the tick itself with the watchdog while they run (``in_process``)."""

    in_process = True

    def __init__(self, apps: tuple[str, ...], wake: threading.Event) -> None:
        self._apps = apps
        self._wake = wake
        self._handlers: dict[str, Callable[[JobContext], Any]] | None = None
        self._load_error: str | None = None
        self._threads = Workers("cronjobs-handler")

    def _handler(self, name: str) -> Callable[[JobContext], Any] | str:
        """The handler called ``name``, or why there is none."""
        if self._handlers is None and self._load_error is None:
            try:
                self._handlers = load_apps(self._apps)
            except ConfigurationError as exc:
                self._load_error = exc.message
        if self._load_error is not None:
            return self._load_error
        try:
            return lookup(self._handlers or {}, name)
        except ConfigurationError as exc:
            return exc.message

    def start(self, work: Work, deadline: float | None = None) -> InProcessJob:
        """(``deadline``: the watchdog holds one for the tick itself, the executor's.)"""
        _route_output()
        handler = self._handler(work.handler or "")
        job = InProcessJob(work, self._wake)
        if isinstance(handler, str):
            job.fail(handler)
            return job
        self._threads.submit(functools.partial(job.run, handler))
        return job


class InProcessJob:
    """One handler attempt in a thread (a :class:`~cronjobs.execution.runners.Job`)."""

    pid = 0  # no process of its own

    def __init__(self, work: Work, wake: threading.Event) -> None:
        self.work = work
        self._wake = wake
        self._started = time.monotonic()
        self._tail = Tail(work.output_limit)
        self._finished: Result | None = None  # what the thread reported
        self._result: Result | None = None  # what poll() returned
        self.abandoned = False  # given up on while the handler still runs

    def run(self, handler: Callable[[JobContext], Any]) -> None:
        """The thread: call the handler, keep its output, report its outcome."""
        _local.tail = self._tail
        try:
            value = handler(self.work.context)
        except BaseException as exc:
            tb = exc.__traceback__
            traceback.print_exception(type(exc), exc, tb.tb_next if tb is not None else None)
            self._done(AttemptOutcome.FAILED, 1, describe_exception(exc), None)
        else:
            data, note = encode_result(value, self.work.result_limit)
            if note is not None:
                print(f"cronjobs: {note}", file=sys.stderr)
            self._done(AttemptOutcome.SUCCEEDED, 0, None,
                       json.loads(data) if data is not None else None)
        finally:
            _local.tail = None

    def live_output(self) -> tuple[str, int]:
        """The output so far and the bytes printed so far, while the handler runs."""
        return self._tail.snapshot()

    def fail(self, message: str) -> None:
        """The handler could not be called at all."""
        self._tail.keep(f"cronjobs: {message}\n".encode())
        self._done(AttemptOutcome.FAILED, 1, message, None)

    def _done(self, outcome: AttemptOutcome, code: int, error: str | None, result: Any) -> None:
        self._finished = Result(outcome, code, error, self._tail.text(), result,
                                time.monotonic() - self._started)
        self._wake.set()

    def poll(self) -> Result | None:
        if self._result is None:
            if self._finished is not None:
                self._result = self._finished
            elif (self.work.timeout is not None
                  and time.monotonic() - self._started >= self.work.timeout):
                self._abandon(AttemptOutcome.TIMED_OUT,
                              f"timed out after {format_duration(self.work.timeout)}")
        return self._result

    def stop(self, outcome: AttemptOutcome, reason: str) -> None:
        """The result becomes ``outcome`` now; the handler, if still running, is abandoned
        (see the module docstring)."""
        if self._result is None and self._finished is None:
            self._abandon(outcome, reason)

    def _abandon(self, outcome: AttemptOutcome, reason: str) -> None:
        self.abandoned = True
        note = f"cronjobs: {reason}; the handler was still running in the tick"
        self._result = Result(outcome, None, reason, self._tail.text(note), None,
                              time.monotonic() - self._started)
