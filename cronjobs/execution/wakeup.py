"""The worker's claimer: claim passes in the worker's own process, woken the moment a run
is queued, so that a triggered run starts in milliseconds instead of after a new process.

A pass is the execution half of a tick (:class:`~cronjobs.execution.executor.Executor`:
reclaim, claim, run, heartbeat, fenced outcomes, notifications, alerts) with the same
leases and guarantees. It starts when :meth:`Claimer.nudge` is called (the worker heard a
``cronjobs_runs`` notification, or one of its minute ticks materialised runs) or every
``poll`` seconds whatever happens (the fallback: a notification lost with its connection,
or none at all through a transaction pooler). It claims while anything runs or is due, a
nudge claiming at once, and ends when nothing runs and nothing is due. The run modes
(:class:`~cronjobs.execution.runners.dispatch.Runners`: the watchdog and the template
process that forks isolated handlers) live as long as the claimer, so no pass waits for a
process to start.
"""

from __future__ import annotations

import dataclasses
import logging
import math
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass

from cronjobs.clock import Clock
from cronjobs.db.store import Store
from cronjobs.errors import CronjobsError
from cronjobs.execution.alerts import Alerts
from cronjobs.execution.executor import Executor
from cronjobs.execution.observe import RunObserver
from cronjobs.execution.options import TickOptions
from cronjobs.execution.outbox import TickOutbox
from cronjobs.execution.registry import load_apps
from cronjobs.execution.runners.dispatch import Runners
from cronjobs.execution.state import Database
from cronjobs.models import Kind

log = logging.getLogger(__name__)

STEP = 0.5  # longest wait between two looks at the stop request while idle


@dataclass
class ClaimerReport:
    """What the claimer did."""

    passes: int = 0
    claimed: int = 0
    succeeded: int = 0
    failed: int = 0  # attempts that failed (retried or dead)


class Claimer:
    """Claim passes on ``store`` (a connection of their own), in a thread of the worker,
    with ``options`` (only runs of the handlers its --app modules register, and commands,
    are claimed), at least every ``poll`` seconds, until
    ``should_stop()``: then the pass under way stops its runs as a stopped tick does
    (interrupted, back in the queue) and the thread ends."""

    def __init__(self, store: Store, options: TickOptions, *, poll: float,
                 should_stop: Callable[[], bool]) -> None:
        # A pass claims for as long as runs are queued: --max-runtime bounds a tick, which
        # the next minute's replaces; here the next run would wait for the pass to end.
        self.options = dataclasses.replace(options, max_runtime=math.inf, max_runs=None)
        self.store = store
        # the handlers of the --app modules (imported now: a broken one stops the worker
        # before it starts anything)
        self.handlers = tuple(sorted(load_apps(options.apps))) if options.apps else ()
        self.poll = poll
        self._asked = should_stop
        self._stopped = False
        self.report = ClaimerReport()
        self.gave_up = False  # an in-process handler was abandoned: the worker must end
        self.error: BaseException | None = None  # what ended the thread, unexpectedly
        self._nudged = threading.Event()
        self._runners = Runners(options.apps, options.in_process, threading.Event())
        self._thread = threading.Thread(target=self._serve, name="cronjobs-claimer",
                                        daemon=True)

    def start(self) -> None:
        self._thread.start()

    def nudge(self) -> None:
        """Runs were queued: claim now (safe from any thread)."""
        self._nudged.set()
        self._runners.wake.set()  # a pass waiting for its runs looks at once

    def stop(self) -> None:
        """Stop as on a stop request (safe from any thread)."""
        self._stopped = True
        self.nudge()

    def should_stop(self) -> bool:
        return self._stopped or self._asked()

    @property
    def alive(self) -> bool:
        return self._thread.is_alive()

    def join(self) -> None:
        self._thread.join()

    def _serve(self) -> None:
        try:
            self._warm()
            while not self.should_stop():
                try:
                    self._pass()
                except CronjobsError as exc:  # the database, after the retry policy
                    log.warning("claim pass failed: %s", exc.message,
                                extra={"action": "worker"})
                if self.gave_up:
                    log.error("an in-process handler was abandoned while running: the "
                              "worker stops so that its thread ends (restart it)",
                              extra={"action": "worker"})
                    return
                self._wait()
        except BaseException as exc:
            self.error = exc
            log.exception("the claimer failed", extra={"action": "worker"})
        finally:
            self._runners.close()

    def _warm(self) -> None:
        """Start the run modes now (the template process imports the handlers' modules),
        not for the first run; a failure is the first run's to meet and report."""
        try:
            self._runners.for_kind(Kind.HANDLER)
        except Exception as exc:
            log.warning("could not start the run modes yet: %s", exc,
                        extra={"action": "worker"})

    def _wait(self) -> None:
        """Until a nudge, the poll interval, or a stop request."""
        deadline = time.monotonic() + self.poll
        while not self.should_stop():
            left = deadline - time.monotonic()
            if left <= 0 or self._nudged.wait(min(left, STEP)):
                return

    def _pass(self) -> None:
        """One pass: claim and run what is due until nothing runs and nothing is due."""
        store, options = self.store, self.options
        clock = Clock(Database(store).call(lambda s: s.now()))
        observer = RunObserver.for_tick(store, tick_id=None, worker=options.worker)
        outbox = TickOutbox(store, clock.now, dashboard_url=options.dashboard_url,
                            notify_deadline=options.notify_deadline)
        executor = Executor(store, options, clock=clock, handlers=self.handlers,
                            observer=observer, outbox=outbox,
                            alerts=Alerts(options.alert_command),
                            should_stop=self.should_stop, runners=self._runners,
                            nudged=self._nudged)
        executor.report.keep_finished = False  # a pass may last as long as the worker
        error: str | None = None
        try:
            executor.run()
        except BaseException as exc:
            error = type(exc).__name__
            raise
        finally:
            report = executor.report
            self.report.passes += 1
            self.report.claimed += report.claimed
            self.report.succeeded += report.succeeded
            self.report.failed += report.failed
            self.gave_up = executor.claims.gave_up
            outbox.close(hurry=self.should_stop())
            observer.close({"claimed": report.claimed, "succeeded": report.succeeded,
                            "failed": report.failed}, error)
