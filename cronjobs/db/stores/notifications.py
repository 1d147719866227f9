"""Notifications: the worker's wake-up channel, webhook targets and deliveries, live output of
running runs."""

from __future__ import annotations

import datetime as dt
import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from psycopg.rows import class_row

from cronjobs.db.session import Queries, translated
from cronjobs.models import (
    DeliveryOutcome,
    NewDelivery,
    NotifyConfig,
    Outgoing,
)

if TYPE_CHECKING:
    # (imported where its rows are read, off the tick's path: see Store)
    from cronjobs.reports import Delivery, LiveOutput


@dataclass(frozen=True)
class _Finished:
    id: int
    status: str


@dataclass(frozen=True)
class _Ended:
    id: int
    dead: bool


class NotificationStore(Queries):
    """Notifications: the worker's wake-up channel, webhook targets and deliveries, live output of
    running runs."""

    def listen_for_runs(self) -> None:
        """Hear of every run queued from now on (this session, until it ends)."""
        self._send("listen_runs")

    def notify_runs(self, job: str) -> None:
        """Tell the listening workers that a run of ``job`` is queued, when the caller's
        transaction commits."""
        self._send("notify_runs", {"job": job})

    def wait_for_notifications(self, timeout: float) -> int:
        """Wait up to ``timeout`` seconds for notifications; how many arrived (those
        received meanwhile, and those that came with the first)."""
        with translated():
            return sum(1 for _ in self.conn.notifies(timeout=timeout, stop_after=1))

    def notify_config(self, definition_ids: Sequence[int]) -> dict[int, NotifyConfig]:
        """{definition id: its receivers} of those jobs that have any."""
        rows = self._rows("notify_config", {"ids": list(definition_ids)}, NotifyConfig)
        return {row.id: row for row in rows}

    def previous_ended_run(self, run_id: int) -> tuple[int, bool] | None:
        """The last run of the same job that ended before ``run_id``: (its id, whether it
        died); None when there is none."""
        row = self._row("previous_ended_run", {"run_id": run_id}, _Ended)
        return None if row is None else (row.id, row.dead)

    def enqueue_deliveries(self, deliveries: Sequence[NewDelivery], *, now: dt.datetime,
                           claimed_until: dt.datetime, expires_at: dt.datetime,
                           token: uuid.UUID) -> Callable[[], list[Outgoing]]:
        """Send the writing of notifications to the outbox, 'pending' and claimed by
        ``token`` until ``claimed_until``, in the caller's transaction (that of the
        outcomes they tell of); the rows written are read by calling the result (inside a
        pipeline: after it). A delivery with a lease token is written only while that lease
        holds, and locks its run until the transaction ends; those of a run pruned
        meanwhile are skipped."""
        if not deliveries:
            return lambda: []
        return self._later("enqueue_deliveries", {
            "run_ids": [d.run_id for d in deliveries],
            "attempts": [d.attempt for d in deliveries],
            "events": [d.event for d in deliveries],
            "targets": [d.target for d in deliveries],
            "urls": [d.url for d in deliveries],
            "bodies": [d.body for d in deliveries],
            "leases": [d.lease_token for d in deliveries],
            "now": now, "claimed_until": claimed_until, "expires_at": expires_at,
            "token": token}, class_row(Outgoing))

    def claim_deliveries(self, *, now: dt.datetime, claimed_until: dt.datetime,
                         token: uuid.UUID, limit: int) -> list[Outgoing]:
        """Take up to ``limit`` due deliveries of the outbox (none another caller holds)."""
        return self._rows("claim_deliveries", {"now": now, "claimed_until": claimed_until,
                                               "token": token, "limit": limit}, Outgoing)

    def finish_deliveries(self, outcomes: Sequence[DeliveryOutcome], *, now: dt.datetime,
                          token: uuid.UUID) -> dict[int, str]:
        """Record how the rounds of these deliveries went, each only while the claim of
        ``token`` holds; returns {id: its status now} of those written."""
        if not outcomes:
            return {}
        rows = self._rows("finish_deliveries", {
            "ids": [o.id for o in outcomes], "sent": [o.sent for o in outcomes],
            "retry": [o.retry for o in outcomes], "tries": [o.tries for o in outcomes],
            "http_statuses": [o.http_status for o in outcomes],
            "errors": [o.error for o in outcomes], "now": now, "token": token}, _Finished)
        return {row.id: row.status for row in rows}

    def deliveries_of_run(self, run_id: int) -> list[Delivery]:
        from cronjobs.reports import Delivery  # noqa: PLC0415 - see Store
        return self._rows("deliveries_of_run", {"run_id": run_id}, Delivery)

    def write_live_output(self, outputs: Sequence[tuple[int, Any, str, int]]) -> set[int]:
        """(run id, lease token, output so far, bytes printed so far) of running runs, each
        written only while that lease holds; returns the ids written."""
        if not outputs:
            return set()
        return {int(value) for value in self._values("write_live_output", {
            "ids": [o[0] for o in outputs], "tokens": [o[1] for o in outputs],
            "tails": [o[2] for o in outputs], "bytes": [o[3] for o in outputs]})}

    def live_output(self, run_id: int) -> LiveOutput | None:
        """What `cronjobs logs` reads of a run: its status, attempt, output so far, error."""
        from cronjobs.reports import LiveOutput  # noqa: PLC0415 - see Store
        rows = self._rows("live_output", {"id": run_id}, LiveOutput)
        return rows[0] if rows else None

