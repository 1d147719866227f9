"""The lease keeper: renews the leases of the attempts under way (a heartbeat at a third of
each lease), stops those whose lease was lost or whose run was cancelled, and keeps the
watchdog's deadlines in step: a job whose lease could not be renewed is killed just before
it expires, so that a reclaimed run never overlaps this copy — and while handlers run in
this process, the deadline is the tick's own."""

from __future__ import annotations

import logging
import os
import time
from collections.abc import Callable

from cronjobs.clock import Clock
from cronjobs.execution.runners.dispatch import Runners
from cronjobs.execution.state import Active, Database, deadline
from cronjobs.models import AttemptOutcome

log = logging.getLogger(__name__)


class LeaseKeeper:
    """Heartbeats, stops and the watchdog's deadlines of the attempts in ``active``."""

    def __init__(self, db: Database, clock: Clock, active: dict[int, Active],
                 runners: Runners, should_stop: Callable[[], bool]) -> None:
        self.db = db
        self.clock = clock
        self.active = active
        self.runners = runners  # whose watchdog holds the deadlines
        self.should_stop = should_stop
        self._self_deadline: float | None = None  # what the watchdog holds for this process

    def heartbeat(self) -> None:
        """Renew the leases due for it, in one statement; stop the attempts whose lease was
        lost or whose run was cancelled."""
        now = time.monotonic()
        due = [a for a in self.active.values() if a.stop_requested is None
               and now - a.last_beat >= a.claim.lease.total_seconds() / 3]
        # (the heartbeat extends the lease from the clock's instant, read after `now`, so
        # `now + lease` is a safe end of the lease for the watchdog)
        if not due:
            return
        leases = [(a.claim.id, a.claim.lease_token, a.claim.lease) for a in due]
        # Retried until the first of these leases must be given up (5/6 of it), so that two
        # copies never overlap; a stop request ends the retries early.
        give_up = min(a.last_beat + a.claim.lease.total_seconds() * 5 / 6 for a in due)
        held = self.db.call_until(lambda s: s.queue.heartbeat(leases, now=self.clock.now()),
                                  give_up, self.should_stop)
        if held is None:
            late = time.monotonic()
            for a in due:
                if late - a.last_beat >= a.claim.lease.total_seconds() * 5 / 6:
                    self.stop(a, AttemptOutcome.LOST,
                              "could not renew the lease: the database is unavailable")
            return
        watchdog = self.runners.watchdog
        for a in due:
            if a.claim.id not in held:
                self.stop(a, AttemptOutcome.LOST, "lease lost: another worker took the run over")
            elif held[a.claim.id]:
                self.stop(a, AttemptOutcome.CANCELLED, "cancelled")
            else:
                a.last_beat = now
                if watchdog is not None and a.job.pid:
                    watchdog.renew(a.job.pid, deadline(now, a.claim))
        self.watch_self()
        self.runners.flush()

    def stop(self, active: Active, outcome: AttemptOutcome, reason: str) -> None:
        if active.stop_requested is None:
            active.stop_requested = outcome
            active.job.stop(outcome, reason)
            log.warning("stopping run %s: %s", active.claim.id, reason,
                        extra={"action": "stop", "run_id": active.claim.id,
                               "job": active.claim.name})

    def interrupt_all(self) -> None:
        for active in self.active.values():
            self.stop(active, AttemptOutcome.INTERRUPTED, "interrupted: the tick was stopped")

    def watch_self(self, starting: float | None = None) -> None:
        """While handlers run in this process, the watchdog holds the earliest deadline of
        their leases, and kills this whole process if it passes unrenewed (a frozen tick).
        An earlier deadline is sent at once; a later one at most once a second.
        ``starting``: the deadline of a handler about to start (sent before it starts)."""
        watchdog = self.runners.watchdog
        if watchdog is None:
            return
        if starting is not None and self._self_deadline is not None \
                and starting >= self._self_deadline:
            # the watchdog holds an earlier deadline already (what it holds is never later
            # than the earliest of the running handlers'): nothing to send before the
            # handler starts, and the pass's own call sends a later one. (Without this,
            # starting n handlers would look at every running one n times.)
            return
        deadlines = [deadline(a.last_beat, a.claim) for a in self.active.values()
                     if a.in_process] + ([starting] if starting is not None else [])
        sent = self._self_deadline
        if deadlines:
            earliest = min(deadlines)
            if sent is None or earliest < sent or earliest > sent + 1.0:
                watchdog.watch(-os.getpid(), earliest)
                self._self_deadline = earliest
        elif sent is not None:
            watchdog.forget(-os.getpid())
            self._self_deadline = None
