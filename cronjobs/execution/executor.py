"""The execution half of a tick: reclaim expired leases, claim due runs up to the free
capacity, run them, heartbeat, and record outcomes fenced by the lease token.

No transaction or row lock is held while a job runs: claiming is one statement that
commits at once, and every later write by this worker names its lease token, so a worker
that lost its lease (it froze, the database was unreachable) can never overwrite the
outcome of whoever took the run over. Retries are rows (``eligible_at`` in the future),
never in-process loops.

The :class:`Executor` is the loop; its parts, each in its own module, do the work:

- :mod:`~cronjobs.execution.claim_loop`: capacity, gathering, back-off; starting runs in
  their run mode (:mod:`~cronjobs.execution.runners`),
- :mod:`~cronjobs.execution.completer`: outcomes, failure counts, the one-by-one fallback,
- :mod:`~cronjobs.execution.lease_keeper`: heartbeats, stops, the watchdog's deadlines,
- :mod:`~cronjobs.execution.reclaimer`: expired leases of other workers.
"""

from __future__ import annotations

import datetime as dt
import threading
import time
from collections.abc import Callable, Sequence

from cronjobs.clock import Clock
from cronjobs.db.retry import DEFAULT, RetryPolicy
from cronjobs.db.store import Store
from cronjobs.execution.alerts import NO_ALERTS, Alerting
from cronjobs.execution.claim_loop import ClaimLoop
from cronjobs.execution.completer import Completer, Ended
from cronjobs.execution.lease_keeper import LeaseKeeper
from cronjobs.execution.observe import NULL_OBSERVER, Observer
from cronjobs.execution.options import TickOptions
from cronjobs.execution.outbox import NULL_OUTBOX, Outbox
from cronjobs.execution.reclaimer import Reclaimer
from cronjobs.execution.runners.dispatch import Runners
from cronjobs.execution.state import Active, Database, ExecReport
from cronjobs.models import Claimed, ClaimKey


class Executor:
    """Runs the execution half of one tick against one store (which reconnects itself:
    see :class:`~cronjobs.execution.state.Database`).

    ``clock`` is the tick's: every claim, lease, backoff and outcome is on it (None: one
    started from the database's clock now). ``tick_id`` names the tick on its attempts;
    ``due_at`` is the instant it materialised up to; ``handlers`` the handlers its
    ``--app`` modules register (only their runs are claimed).

    ``runners``: run modes that outlive this executor (a worker's, whose template process
    stays warm from one pass to the next; their ``wake`` is this executor's, and they are
    left open); None: its own, closed when it ends. ``nudged``: set (by another thread)
    when runs were queued: the next free slot claims at once instead of after its
    back-off, and clears it."""

    def __init__(self, store: Store, options: TickOptions, *, clock: Clock | None = None,
                 tick_id: int | None = None, due_at: dt.datetime | None = None,
                 handlers: tuple[str, ...] = (), observer: Observer = NULL_OBSERVER,
                 outbox: Outbox = NULL_OUTBOX,
                 alerts: Alerting = NO_ALERTS, should_stop: Callable[[], bool] = lambda: False,
                 policy: RetryPolicy = DEFAULT, runners: Runners | None = None,
                 nudged: threading.Event | None = None) -> None:
        self.options = options
        self.should_stop = should_stop
        self.observer = observer
        self.outbox = outbox
        self.alerts = alerts
        self.report = ExecReport()
        self.active: dict[int, Active] = {}
        self._own_runners = runners is None
        self.runners = runners if runners is not None else Runners(
            options.apps, options.in_process, threading.Event())
        self.wake = self.runners.wake  # set when a job ends
        db = Database(store, policy)
        clock = clock if clock is not None else Clock(store.now())
        self.leases = LeaseKeeper(db, clock, self.active, self.runners, should_stop)
        self.reclaimer = Reclaimer(db, clock, self.report, self.outbox, self.alerts)
        self.completer = Completer(db, clock, options, self.report, self.observer,
                                   self.alerts, outbox=self.outbox, tick_id=tick_id,
                                   handlers=handlers)
        self.claims = ClaimLoop(db, options, self.active, self.report, self.runners,
                                self.leases, self.observer, due_at=due_at, clock=clock,
                                handlers=handlers, nudged=nudged)

    def run(self) -> ExecReport:
        self.claims.started = time.monotonic()  # --max-runtime counts from here
        self.reclaimer.reclaim()
        if self.claims.capacity_left() == 0:
            return self.report
        self.report.concurrency = self.claims.concurrency
        self.claims.size(time.monotonic())  # --concurrency auto: from what is due now
        try:
            self._loop()
        finally:
            if self._own_runners:
                self.runners.close()
            self.alerts.wait()
        return self.report

    def _loop(self) -> None:
        stopping = False
        while True:
            self.wake.clear()
            now = time.monotonic()
            if not stopping and self.should_stop():
                stopping = True
                self.claims.stop()
                self.leases.interrupt_all()
            self.claims.check(now)
            ended = self._ended()
            free = self.claims.free_slots(now)
            if self.claims.due(now, free):
                self.reclaimer.now_and_then(now)
                # the outcomes and the next claim share one transaction
                after = self.claims.after(now)
                claims, took = self._pass(ended, self.claims.limit(free), after=after)
                if not self.claims.claimed(len(claims), free, now, running=bool(self.active),
                                           last=max((c.key for c in claims), default=None),
                                           took=took, written=len(ended) + len(claims)):
                    return
                continue  # look at what just started before waiting
            self._pass(ended)
            if not self.active and not self.claims.claiming:
                return
            self.leases.heartbeat()
            self.observer.tick_pass(self.active.values())
            self.outbox.tick_pass()
            self.alerts.poll()
            self.wake.wait(self.claims.wait(now, free))

    def _ended(self) -> list[Ended]:
        """The jobs that ended, taken out of ``active``."""
        ended: list[Ended] = []
        for run_id, active in list(self.active.items()):
            result = active.job.poll()
            if result is not None:
                del self.active[run_id]
                ended.append((active, result))
                if active.job.abandoned:
                    self.claims.abandoned()
        return ended

    def _pass(self, ended: Sequence[Ended], claim_limit: int = 0,
              after: ClaimKey | None = None) -> tuple[list[Claimed], float]:
        """Record what ended and (with ``claim_limit``) claim, in one transaction (from
        ``after``, the drain's cursor, when given); start what was claimed. Returns the runs
        claimed, and the seconds the transaction took."""
        claims, claimed_at = self.completer.finish(ended, claim_limit=claim_limit, after=after)
        took = time.monotonic() - claimed_at
        for claim in claims:
            self.report.claimed += 1
            self.active[claim.id] = self.claims.start(claim, claimed_at)
        if ended or claims:
            self.leases.watch_self()
        self.runners.flush()
        return claims, took
