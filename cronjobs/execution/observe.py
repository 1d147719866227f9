"""What a tick does around its runs besides running them: webhook notifications
(:mod:`~cronjobs.execution.notify`), the live output of running runs (flushed to the
database, read by ``cronjobs logs --follow``) and optional tracing
(:mod:`~cronjobs.execution.tracing`).

A tick's observer also retries the deliveries of the outbox that are due
(:meth:`RunObserver.redeliver`), with the same senders.

The executor calls its :class:`Observer` at four points: when an attempt starts
(:meth:`~Observer.started`), when its outcome is recorded (:meth:`~Observer.finished`,
:meth:`~Observer.lost`), when a reclaim records one (:meth:`~Observer.reclaimed`), and once
per pass of its loop (:meth:`~Observer.tick_pass`); the tick closes it
(:meth:`~Observer.close`). A tick's is a :class:`RunObserver`; :class:`NullObserver` does
nothing. None of these ever raises or waits on the network: a failing receiver or database
write is logged, and the runs go on.
"""

from __future__ import annotations

import datetime as dt
import json
import logging
import time
import uuid
from collections.abc import Callable, Iterable
from typing import Protocol

from cronjobs.db.store import Store
from cronjobs.execution import tracing
from cronjobs.execution.notify import (
    CLAIM,
    DEADLINE,
    DRAIN,
    REDELIVER,
    Notice,
    Notifier,
    body,
    run_url,
)
from cronjobs.execution.runners import Job
from cronjobs.execution.tracing import Tracing
from cronjobs.models import (
    AttemptOutcome,
    Claimed,
    DeliveryOutcome,
    NewDelivery,
    NotifyConfig,
    NotifyEvent,
    Reclaimed,
    RunStatus,
)
from cronjobs.validation import mask_url

log = logging.getLogger(__name__)

LIVE_EVERY = 1.0  # seconds between two writes of one run's output while it prints
HURRY = 2.0  # seconds a stopping tick waits for deliveries under way (SIGTERM's grace is short)


class Attempt(Protocol):  # what the executor keeps of a running attempt
    @property
    def claim(self) -> Claimed: ...

    @property
    def job(self) -> Job: ...


class Observer(Protocol):
    """What the executor tells about its runs besides recording them."""

    def started(self, claim: Claimed) -> str | None:
        """An attempt starts: its traceparent (None without tracing)."""

    def finished(self, claim: Claimed, outcome: AttemptOutcome, status: RunStatus,
                 error: str | None, exit_code: int | None, output: str | None) -> None:
        """An attempt's outcome was recorded (the run is now ``status``)."""

    def lost(self, claim: Claimed, outcome: AttemptOutcome, error: str | None) -> None:
        """An attempt whose lease was lost: whoever holds the run now tells its outcome."""

    def reclaimed(self, row: Reclaimed) -> None:
        """A run whose lease expired was sent back (``failed``) or declared ``dead``."""

    def tick_pass(self, active: Iterable[Attempt]) -> None:
        """Once per pass of the executor's loop, with the attempts under way."""

    def close(self, counts: dict[str, int], error: str | None = None, *,
              hurry: bool = False) -> None:
        """The tick ends (``hurry``: it was asked to stop)."""


class NullObserver:
    """Observes nothing."""

    def started(self, claim: Claimed) -> str | None:
        return None

    def finished(self, claim: Claimed, outcome: AttemptOutcome, status: RunStatus,
                 error: str | None, exit_code: int | None, output: str | None) -> None:
        pass

    def lost(self, claim: Claimed, outcome: AttemptOutcome, error: str | None) -> None:
        pass

    def reclaimed(self, row: Reclaimed) -> None:
        pass

    def tick_pass(self, active: Iterable[Attempt]) -> None:
        pass

    def close(self, counts: dict[str, int], error: str | None = None, *,
              hurry: bool = False) -> None:
        pass


NULL_OBSERVER = NullObserver()


class RunObserver:
    """The notifications, live output and spans of one tick, written with its store."""

    def __init__(self, store: Store, now: Callable[[], dt.datetime], *,
                 dashboard_url: str | None = None, tracing: Tracing | None = None,
                 notifier: Notifier | None = None,
                 notify_deadline: dt.timedelta = DEADLINE) -> None:
        self.store = store
        self._now = now
        self.notify_deadline = notify_deadline
        self._token = uuid.uuid4()  # this tick's claim on the deliveries it tries
        self.dashboard_url = dashboard_url
        self.tracing = tracing
        self._notifier = notifier
        self._config: dict[int, NotifyConfig | None] = {}  # definition id -> receivers
        # (run, attempt) -> (first seen, last written or None, bytes written)
        self._live: dict[tuple[int, int], tuple[float, float | None, int]] = {}

    @classmethod
    def for_tick(cls, store: Store, now: Callable[[], dt.datetime], *, tick_id: int | None,
                 worker: str, dashboard_url: str | None = None,
                 notify_deadline: dt.timedelta = DEADLINE) -> RunObserver:
        return cls(store, now, dashboard_url=dashboard_url, tracing=tracing.start(
            {"cronjobs.tick_id": tick_id or 0, "cronjobs.worker": worker}),
            notify_deadline=notify_deadline)

    def redeliver(self, limit: int = REDELIVER) -> int:
        """Take the deliveries of the outbox that are due (none another tick holds) and
        send them in the background; how many."""
        try:
            now = self._now()
            due = self.store.notifications.claim_deliveries(
                now=now, claimed_until=now + CLAIM, token=self._token, limit=limit)
        except Exception as exc:
            log.warning("could not read the notifications to retry: %s", exc,
                        extra={"action": "notify"})
            return 0
        if due:
            log.info("retrying %d notification(s) of the outbox", len(due),
                     extra={"action": "notify"})
            self._sender().send(due)
        return len(due)

    # -- the executor's hooks -------------------------------------------------------------

    def started(self, claim: Claimed) -> str | None:
        """An attempt starts: its traceparent (None without tracing)."""
        if self.tracing is None:
            return None
        try:
            return self.tracing.run_started(claim.id, claim.name, claim.scheduled_for,
                                            claim.attempt)
        except Exception as exc:
            log.warning("tracing failed: %s", exc, extra={"action": "tracing"})
            return None

    def finished(self, claim: Claimed, outcome: AttemptOutcome, status: RunStatus,
                 error: str | None, exit_code: int | None, output: str | None) -> None:
        """An attempt's outcome was recorded (the run is now ``status``)."""
        self._end_span(claim.id, outcome, status, error)
        self._live.pop((claim.id, claim.attempt), None)
        if not claim.notifies:  # no receivers when it was claimed
            return
        try:
            self._notify(claim.definition_id, claim.id, claim.name,
                         claim.scheduled_for, claim.attempt, claim.max_attempts, status,
                         error, exit_code, output)
        except Exception as exc:
            log.warning("run %s: could not queue its notifications: %s", claim.id, exc,
                        extra={"action": "notify", "run_id": claim.id, "job": claim.name})

    def lost(self, claim: Claimed, outcome: AttemptOutcome, error: str | None) -> None:
        """An attempt whose lease was lost: whoever holds the run now tells its outcome."""
        self._end_span(claim.id, outcome, None, error)
        self._live.pop((claim.id, claim.attempt), None)

    def reclaimed(self, row: Reclaimed) -> None:
        """A run whose lease expired was sent back (``failed``) or declared ``dead``."""
        try:
            self._notify(row.definition_id, row.id, row.job, row.scheduled_for,
                         row.attempt, row.attempt, row.status, row.error, None, None)
        except Exception as exc:
            log.warning("run %s: could not queue its notifications: %s", row.id, exc,
                        extra={"action": "notify", "run_id": row.id, "job": row.job})

    def tick_pass(self, active: Iterable[Attempt]) -> None:
        """Once per pass: write the output of attempts running for LIVE_EVERY seconds or
        more that printed since their last write (at most every LIVE_EVERY seconds each: an
        attempt that ends sooner costs no write but its outcome's), and record the
        deliveries that finished."""
        now = time.monotonic()
        writes = []
        for a in active:
            key = (a.claim.id, a.claim.attempt)
            seen, written, size = self._live.setdefault(key, (now, None, -1))
            if now - (seen if written is None else written) < LIVE_EVERY:
                continue
            snapshot = a.job.live_output()
            if snapshot is None or snapshot[1] == size:
                continue
            self._live[key] = (seen, now, snapshot[1])
            writes.append((a.claim.id, a.claim.lease_token, snapshot[0], snapshot[1]))
        try:
            if writes:
                self.store.notifications.write_live_output(writes)
            if self._notifier is not None:
                self._finish(self._notifier.take())
        except Exception as exc:
            log.warning("could not write live output or deliveries: %s", exc,
                        extra={"action": "observe"})

    def close(self, counts: dict[str, int], error: str | None = None, *,
              hurry: bool = False) -> None:
        """The tick ends: wait (bounded; HURRY seconds at most when it was asked to stop)
        for the notifications under way and record them, end the spans."""
        if self._notifier is not None:
            done = self._notifier.close(HURRY if hurry else DRAIN)
            try:
                self._finish(done)
            except Exception as exc:  # they stay pending: tried again when the claim ends
                log.warning("could not record %d notification(s): %s", len(done), exc,
                            extra={"action": "notify"})
        if self.tracing is not None:
            self.tracing.close(counts, error)

    # -- notifications --------------------------------------------------------------------

    def _notify(self, definition_id: int, run_id: int, job: str,
                slot: dt.datetime, attempt: int, max_attempts: int, status: RunStatus,
                error: str | None, exit_code: int | None, output: str | None) -> None:
        if status not in (RunStatus.DEAD, RunStatus.FAILED, RunStatus.SUCCEEDED):
            return
        if definition_id not in self._config:
            self._config.update(dict.fromkeys([definition_id]))
            self._config.update(self.store.notifications.notify_config([definition_id]))
        config = self._config[definition_id]
        if config is None:
            return
        on = {NotifyEvent(e) for e in config.notify_on}
        event: NotifyEvent | None = None
        if status == RunStatus.DEAD:
            event = (NotifyEvent.DEAD if NotifyEvent.DEAD in on
                     else NotifyEvent.FAILURE if NotifyEvent.FAILURE in on else None)
        elif status == RunStatus.FAILED:
            event = NotifyEvent.FAILURE if NotifyEvent.FAILURE in on else None
        elif NotifyEvent.RECOVERY in on and (
                attempt > 1 or self.store.notifications.previous_run_dead(run_id)):
            event = NotifyEvent.RECOVERY
        if event is None:
            return
        notice = Notice(event, run_id, job, slot, attempt, max_attempts, status, error,
                        exit_code, output, run_url(self.dashboard_url, run_id))
        now = self._now()
        document = json.dumps(body(notice, now), ensure_ascii=False)
        written = self.store.notifications.enqueue_deliveries(
            [NewDelivery(run_id, attempt, event.value, mask_url(url), url, document)
             for url in config.notify_urls],
            now=now, claimed_until=now + CLAIM, expires_at=now + self.notify_deadline,
            token=self._token)
        self._sender().send(written)

    def _sender(self) -> Notifier:
        if self._notifier is None:
            self._notifier = Notifier(self._now)
        return self._notifier

    def _finish(self, outcomes: list[DeliveryOutcome]) -> None:
        """Write how the rounds went (each only while this tick's claim holds)."""
        if outcomes:
            self.store.notifications.finish_deliveries(outcomes, now=self._now(),
                                                       token=self._token)

    def _end_span(self, run_id: int, outcome: AttemptOutcome, status: RunStatus | None,
                  error: str | None) -> None:
        if self.tracing is None:
            return
        try:
            self.tracing.run_ended(run_id, outcome, status, error)
        except Exception as exc:
            log.warning("tracing failed: %s", exc, extra={"action": "tracing"})
