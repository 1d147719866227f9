"""The reclaimer (river's rescuer): runs whose lease expired — their worker died, froze or
lost the database — go back to the queue, or die when that was their last attempt; their
attempt is lost and counted against the job, and alerted and notified like any failure
(its notifications written to the outbox in the transaction of the takeover)."""

from __future__ import annotations

import logging
import time

from cronjobs.clock import Clock
from cronjobs.db.store import Store
from cronjobs.execution.alerts import Alerting, AlertKind, Event
from cronjobs.execution.completer import counted
from cronjobs.execution.outbox import Ending, Outbox
from cronjobs.execution.state import Database, ExecReport
from cronjobs.models import JobFailure, Outgoing, Reclaimed, RunStatus

log = logging.getLogger(__name__)

RECLAIM_EVERY = 5.0  # seconds between reclaim passes while the tick is busy


class Reclaimer:
    """Takes over expired leases: at the start of a tick and every RECLAIM_EVERY seconds
    of its claiming."""

    def __init__(self, db: Database, clock: Clock, report: ExecReport, outbox: Outbox,
                 alerts: Alerting) -> None:
        self.db = db
        self.clock = clock
        self.report = report
        self.outbox = outbox
        self.alerts = alerts
        self.last = 0.0  # monotonic time of the last pass

    def now_and_then(self, now: float) -> None:
        """Reclaim if the last pass is RECLAIM_EVERY seconds old (``now``: monotonic)."""
        if now - self.last >= RECLAIM_EVERY:
            self.reclaim(now)

    def reclaim(self, now: float | None = None) -> None:
        """Take over the expired leases (``now``: this pass's monotonic time, else the
        time it is done)."""
        def reclaim(store: Store) -> tuple[list[tuple[Reclaimed, JobFailure]], list[Outgoing]]:
            # the takeover, the count of the lost attempts and their notifications in one
            # transaction
            at = self.clock.now()
            if not store.queue.leases_expired(now=at):
                # (one statement when nothing expired: a lease that expires after it is
                # the next pass's, as it would be after the locking reclaim)
                return [], []
            with store.transaction():
                rows = sorted(store.queue.reclaim_expired(now=at),
                              key=lambda r: r.definition_id)
                counted = [(row, store.queue.record_reclaimed_failure(
                    row.definition_id, error=row.error, now=at)) for row in rows]
                deliveries = (self.outbox.notifications(store, [Ending.of_reclaimed(row)
                                                                for row in rows])
                              if rows else [])
                sent = self.outbox.record(store, deliveries)()
                # a lost lease that was the run's last attempt: to the history at once,
                # the way every run goes
                store.queue.move_ended([row.id for row in rows
                                        if row.status == RunStatus.DEAD], now=at)
                return counted, sent

        reclaimed, sent = self.db.call(reclaim)
        for row, failure in reclaimed:
            self.report.reclaimed += 1
            log.warning("lease expired: run %s back to %s", row.id, row.status.value,
                        extra={"action": "reclaim", "run_id": row.id, "job": row.job,
                               "worker": row.lease_owner})
            kind = AlertKind.DEAD if row.status == RunStatus.DEAD else AlertKind.FAILED
            counted(failure, Event(kind, row.id, row.job, row.scheduled_for, row.attempt,
                                   row.status, row.error, None), self.alerts)
        self.outbox.send(sent)
        self.last = now if now is not None else time.monotonic()
