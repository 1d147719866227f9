"""How many runs a tick runs at once when it is not told (``--concurrency auto``, the
default): sized from what is due, how it runs and the cores.

The rule (docs/explanation/concurrency.md says the same):

- Count the runs due now that this tick could claim, up to :data:`MAX_THREADS` (one short
  query: the first entries of the claim's index). Split them by what a run costs: a thread
  of the tick (a Python handler with ``--in-process``) or a process of its own (a shell
  command, or a handler in the default isolated mode).
- One slot per due run, but never fewer than :data:`FLOOR` (the old fixed default, so a
  quiet tick still takes what comes due while it runs) and never more than
  :data:`THREADS_PER_CORE` threads per core (at most :data:`MAX_THREADS`): threads are
  cheap, and for short handlers more of them mean bigger batches per claim, so fewer
  round trips per run.
- Processes cost a fork, memory and a core's time each: when more runs that need one are
  due than :data:`PROCESSES_PER_CORE` per core (at least :data:`FLOOR`), the tick runs that
  many at once, whatever else is due (a claim does not choose runs by kind, so any of its
  slots may become a process).

A tick sizes itself once it has materialised, and again (only ever upwards, at most once a
:data:`RESIZE_EVERY`) when a claim fills every free slot: what other ticks were still
materialising when it started is then in the queue too.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass

FLOOR = 4  # never fewer slots than this (the fixed default before `auto`)
THREADS_PER_CORE = 64  # in-process handlers: threads per core, at most MAX_THREADS
MAX_THREADS = 256  # the most slots a tick ever has (also --concurrency's maximum)
PROCESSES_PER_CORE = 2  # shell commands and isolated handlers: processes per core
RESIZE_EVERY = 0.1  # seconds between two counts of the backlog within a tick (each ~1 ms)


@dataclass(frozen=True)
class Backlog:
    """The runs due now that a tick could claim (counted up to :data:`MAX_THREADS`), by
    what running one costs."""

    threads: int  # Python handlers that would run in a thread of the tick (--in-process)
    processes: int  # shell commands, and handlers run in processes of their own

    @classmethod
    def of(cls, *, handlers: int, commands: int, in_process: bool) -> Backlog:
        """The backlog of ``handlers`` due handler runs and ``commands`` due commands, for
        a tick that runs handlers in threads (``in_process``) or in processes."""
        if in_process:
            return cls(threads=handlers, processes=commands)
        return cls(threads=0, processes=handlers + commands)


def cores() -> int:
    """The cores this process may run on (its CPU affinity where the OS tells it)."""
    # process_cpu_count (Python 3.13+) counts only the cores this process may use
    counter: Callable[[], int | None] = getattr(os, "process_cpu_count", os.cpu_count)
    return max(1, counter() or 1)


def thread_cap(cores: int) -> int:
    """The most slots a tick has for in-process handlers on ``cores`` cores."""
    return max(FLOOR, min(MAX_THREADS, THREADS_PER_CORE * cores))


def process_cap(cores: int) -> int:
    """The most slots a tick has while more runs needing a process are due than that."""
    return max(FLOOR, min(MAX_THREADS, PROCESSES_PER_CORE * cores))


def auto_concurrency(backlog: Backlog, *, cores: int) -> int:
    """The slots of a tick whose due runs are ``backlog``, on ``cores`` cores (the rule in
    the module's docstring)."""
    if backlog.processes > process_cap(cores):
        return process_cap(cores)
    return max(FLOOR, min(thread_cap(cores), backlog.threads + backlog.processes))
