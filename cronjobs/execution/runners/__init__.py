"""The run modes, behind one :class:`Runner` protocol: a runner starts a :class:`Work` and
returns a :class:`Job`, which the executor polls until it gives the :class:`Result`.

- :mod:`.shell`: commands, ``/bin/sh -c`` as cron runs them.
- :mod:`.forked`: a handler in a child forked from the tick's template process
  (:mod:`.template`), isolated at the cost of a fork.
- :mod:`.interpreter`: a handler in a fresh interpreter (when there is no usable template).
- :mod:`.inprocess`: a handler in a thread of the tick (``--in-process``).
- :mod:`.dispatch`: which mode runs a claimed run, and starting it; :func:`.dispatch.start`
  for a single attempt.

The first three run an attempt in a process group of its own (:mod:`.process`, with
:mod:`.groups` and the output pump :mod:`.output`).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Protocol

from cronjobs.execution.context import JobContext
from cronjobs.models import AttemptOutcome, Kind


@dataclass(frozen=True)
class Work:
    """One attempt to run: what to run, for which run, and within which limits."""

    context: JobContext
    kind: Kind
    command: str | None
    handler: str | None
    apps: tuple[str, ...] = ()  # modules to import in the child so that handlers register
    timeout: float | None = None  # seconds; None for no timeout
    kill_grace: float = 10.0  # seconds between SIGTERM and SIGKILL
    output_limit: int = 64 * 1024  # bytes of output kept (the tail)
    result_limit: int = 64 * 1024  # bytes of a handler's JSON result kept; bigger is dropped
    env: Mapping[str, str] | None = None  # base environment; None for os.environ

    def __post_init__(self) -> None:
        if self.kind not in (Kind.COMMAND, Kind.HANDLER):
            raise ValueError(f"kind must be 'command' or 'handler', not {self.kind!r}")
        object.__setattr__(self, "kind", Kind(self.kind))
        if self.kind == Kind.COMMAND and not self.command:
            raise ValueError("a command job needs a command")
        if self.kind == Kind.HANDLER and not self.handler:
            raise ValueError("a handler job needs a handler name")
        if self.timeout is not None and not self.timeout > 0:
            raise ValueError(f"timeout must be positive or None, not {self.timeout!r}")
        if not self.kill_grace >= 0:
            raise ValueError(f"kill_grace must not be negative, not {self.kill_grace!r}")
        if self.output_limit < 0 or self.result_limit < 0:
            raise ValueError("output_limit and result_limit must not be negative")


@dataclass(frozen=True)
class Result:
    """How one attempt ended."""

    outcome: AttemptOutcome
    exit_code: int | None  # the main process's exit code; None when killed by a signal
    error: str | None  # one line for people; None on success
    output_tail: str  # the last output_limit bytes of stdout+stderr, as text
    result: Any  # a handler's JSON-ready return value; None for commands and failures
    duration: float  # seconds from start to the exit of the main process


class Job(Protocol):
    """One attempt under way, in any mode. Use it from one thread."""

    @property
    def pid(self) -> int:
        """Its process (and process group); 0 when it has none of its own."""

    @property
    def abandoned(self) -> bool:
        """Whether it was given up on while still running (in-process only)."""

    def poll(self) -> Result | None:
        """The result once the attempt is over, else None; enforces its timeout."""

    def stop(self, outcome: AttemptOutcome, reason: str) -> None:
        """Ask it to stop; its result will have ``outcome`` (the first request wins)."""

    def live_output(self) -> tuple[str, int] | None:
        """The output so far and the bytes printed so far, while it runs."""


class Runner(Protocol):
    """A way to run attempts."""

    # whether its attempts run inside the tick's own process (the watchdog then holds a
    # deadline for the tick itself)
    in_process: bool

    def start(self, work: Work, deadline: float | None) -> Job:
        """Start ``work`` and return at once. ``deadline`` (``time.monotonic()``) is when
        the watchdog kills it unless its lease is renewed first. A job that cannot be
        started has a FAILED result at once."""


class NotStarted:
    """A job that was never started: its result is known already."""

    pid = 0
    abandoned = False

    def __init__(self, result: Result) -> None:
        self.result = result

    def poll(self) -> Result:
        return self.result

    def stop(self, outcome: AttemptOutcome, reason: str) -> None:
        """Nothing runs: nothing to stop."""

    def live_output(self) -> None:
        return None


def failed(error: str) -> Result:
    """The result of an attempt that failed before it ran."""
    return Result(AttemptOutcome.FAILED, None, error, "", None, 0.0)
