"""A tick's outbox of webhook notifications (:mod:`~cronjobs.execution.notify` sends them).

A run's notifications are written to the outbox in the transaction that records the
outcome they tell of (the completer's, or the reclaimer's): a tick killed, or a database
lost, at any moment leaves both or neither. In three steps:
:meth:`~Outbox.notifications` (which notifications the outcomes cause: reads, with the
transaction's store, before it writes), :meth:`~Outbox.record` (their rows, sent in the
transaction, fenced like the outcomes) and, once it committed, :meth:`~Outbox.send`. A
transaction the retry policy repeats repeats the three with it; the first two fail the
transaction they are part of when they fail (the outcome is then not recorded either).

A tick's outbox (:class:`TickOutbox`) also retries the deliveries that are due
(:meth:`~TickOutbox.redeliver`), with the same senders, records how each round of tries
went (:meth:`~Outbox.tick_pass`) and waits, bounded, for the rounds under way when the tick
ends (:meth:`~TickOutbox.close`). Sending never raises or waits on the network: a failing
receiver is recorded, and the runs go on. :class:`NullOutbox` writes nothing.
"""

from __future__ import annotations

import datetime as dt
import json
import logging
import time
import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from cronjobs.db.store import Store
from cronjobs.errors import CronjobsError
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
from cronjobs.models import (
    RUN_FINAL,
    Claimed,
    DeliveryOutcome,
    NewDelivery,
    NotifyConfig,
    NotifyEvent,
    Outcome,
    Outgoing,
    Reclaimed,
    RunStatus,
)
from cronjobs.validation import mask_url

log = logging.getLogger(__name__)

RECEIVERS_FOR = 60.0  # seconds a job's receivers are kept before they are read again
HURRY = 2.0  # seconds a stopping tick waits for deliveries under way (SIGTERM's grace is short)
NOTIFIED = (RunStatus.DEAD, RunStatus.FAILED, RunStatus.SUCCEEDED)  # what may be notified


@dataclass(frozen=True)
class Ending:
    """An outcome about to be recorded, as its notifications see it."""

    definition_id: int
    run_id: int
    job: str
    scheduled_for: dt.datetime
    attempt: int
    max_attempts: int
    status: RunStatus
    error: str | None
    exit_code: int | None
    output: str | None
    lease_token: Any  # the holder's lease, which fences the outcome (None: reclaimed)

    @classmethod
    def of_attempt(cls, claim: Claimed, outcome: Outcome) -> Ending:
        return cls(claim.definition_id, claim.id, claim.name, claim.scheduled_for,
                   claim.attempt, claim.max_attempts, outcome.status, outcome.error,
                   outcome.exit_code, outcome.output_tail, claim.lease_token)

    @classmethod
    def of_reclaimed(cls, row: Reclaimed) -> Ending:
        return cls(row.definition_id, row.id, row.job, row.scheduled_for, row.attempt,
                   row.attempt, row.status, row.error, None, None, None)


def nothing() -> list[Outgoing]:
    return []


class Outbox(Protocol):
    """Where the outcomes' notifications are written, and from where they are sent."""

    def notifications(self, store: Store, endings: Sequence[Ending]) -> list[NewDelivery]:
        """The notifications these outcomes cause (reads with ``store``, the connection
        of the transaction that is to record them; a failure fails that transaction)."""

    def record(self, store: Store, deliveries: Sequence[NewDelivery]
               ) -> Callable[[], list[Outgoing]]:
        """Send the outbox rows of ``deliveries`` in ``store``'s open transaction, before
        the outcomes are written; the rows written are read by calling the result."""

    def send(self, written: Sequence[Outgoing]) -> None:
        """The transaction that wrote ``written`` committed: send them (in the background)."""

    def tick_pass(self) -> None:
        """Once per pass of the executor's loop: record the rounds of tries that ended."""


class NullOutbox:
    """Writes and sends nothing."""

    def notifications(self, store: Store, endings: Sequence[Ending]) -> list[NewDelivery]:
        return []

    def record(self, store: Store, deliveries: Sequence[NewDelivery]
               ) -> Callable[[], list[Outgoing]]:
        return nothing

    def send(self, written: Sequence[Outgoing]) -> None:
        pass

    def tick_pass(self) -> None:
        pass


NULL_OUTBOX = NullOutbox()


class TickOutbox:
    """The outbox of one tick, written with its store (the deliveries it tries are claimed
    with a token of its own)."""

    def __init__(self, store: Store, now: Callable[[], dt.datetime], *,
                 dashboard_url: str | None = None, notifier: Notifier | None = None,
                 notify_deadline: dt.timedelta = DEADLINE) -> None:
        self.store = store
        self._now = now
        self.notify_deadline = notify_deadline
        self._token = uuid.uuid4()  # this tick's claim on the deliveries it tries
        self.dashboard_url = dashboard_url
        self._notifier = notifier
        # definition id -> (when read, its receivers); read again after RECEIVERS_FOR
        self._config: dict[int, tuple[float, NotifyConfig | None]] = {}

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

    def tick_pass(self) -> None:
        """Record the rounds of tries that ended since the last pass."""
        if self._notifier is None:
            return
        try:
            self._finish(self._notifier.take())
        except Exception as exc:
            log.warning("could not record deliveries: %s", exc, extra={"action": "notify"})

    def close(self, *, hurry: bool = False) -> None:
        """The tick ends: wait (bounded; HURRY seconds at most when it was asked to stop)
        for the notifications under way and record them."""
        if self._notifier is None:
            return
        done = self._notifier.close(HURRY if hurry else DRAIN)
        try:
            self._finish(done)
        except Exception as exc:  # they stay pending: tried again when the claim ends
            log.warning("could not record %d notification(s): %s", len(done), exc,
                        extra={"action": "notify"})

    def notifications(self, store: Store, endings: Sequence[Ending]
                      ) -> list[NewDelivery]:
        """The notifications these outcomes cause, one per receiver: a job's receivers are
        read once per tick (then cached), whether the job's previous run died only for a
        first attempt's success of a job notified of recoveries."""
        deliveries: list[NewDelivery] = []
        now = self._now()
        for ending in endings:
            if ending.status not in NOTIFIED:
                continue
            config = self._receivers(store, ending.definition_id)
            event = None if config is None else self._event(store, ending, config, endings)
            if config is None or event is None:
                continue
            notice = Notice(event, ending.run_id, ending.job, ending.scheduled_for,
                            ending.attempt, ending.max_attempts, ending.status, ending.error,
                            ending.exit_code, ending.output,
                            run_url(self.dashboard_url, ending.run_id))
            try:
                document = json.dumps(body(notice, now), ensure_ascii=False)
            except Exception as exc:  # fails this outcome alone (the completer's one by one)
                raise CronjobsError(f"run {ending.run_id}: its notification could not be "
                                    f"written: {type(exc).__name__}: {exc}") from exc
            deliveries += [NewDelivery(ending.run_id, ending.attempt, event.value,
                                       mask_url(url), url, document, ending.lease_token)
                           for url in config.notify_urls]
        return deliveries

    def record(self, store: Store, deliveries: Sequence[NewDelivery]
               ) -> Callable[[], list[Outgoing]]:
        """Send the outbox rows of ``deliveries`` in ``store``'s open transaction, claimed
        by this tick for its first round; the rows written are read by calling the
        result."""
        if not deliveries:
            return nothing
        now = self._now()
        return store.notifications.enqueue_deliveries(
            deliveries, now=now, claimed_until=now + CLAIM,
            expires_at=now + self.notify_deadline, token=self._token)

    def send(self, written: Sequence[Outgoing]) -> None:
        """The transaction that wrote ``written`` committed: send them in the background."""
        if written:
            self._sender().send(list(written))

    def _receivers(self, store: Store, definition_id: int) -> NotifyConfig | None:
        """A job's receivers (None: it has none), read once per tick, or once a
        RECEIVERS_FOR in a longer one (a worker's pass)."""
        now = time.monotonic()
        cached = self._config.get(definition_id)
        if cached is None or now - cached[0] > RECEIVERS_FOR:
            found = store.notifications.notify_config([definition_id])
            cached = self._config[definition_id] = (now, found.get(definition_id))
        return cached[1]

    @staticmethod
    def _event(store: Store, ending: Ending, config: NotifyConfig,
               endings: Sequence[Ending]) -> NotifyEvent | None:
        """The event an outcome is notified as (None: not notified), among ``endings``
        recorded in the same transaction."""
        status = ending.status
        on = {NotifyEvent(e) for e in config.notify_on}
        if status == RunStatus.DEAD:
            return (NotifyEvent.DEAD if NotifyEvent.DEAD in on
                    else NotifyEvent.FAILURE if NotifyEvent.FAILURE in on else None)
        if status == RunStatus.FAILED:
            return NotifyEvent.FAILURE if NotifyEvent.FAILURE in on else None
        if NotifyEvent.RECOVERY in on and (
                ending.attempt > 1 or _after_death(store, ending, endings)):
            return NotifyEvent.RECOVERY
        return None

    def _sender(self) -> Notifier:
        if self._notifier is None:
            self._notifier = Notifier(self._now)
        return self._notifier

    def _finish(self, outcomes: list[DeliveryOutcome]) -> None:
        """Write how the rounds went (each only while this tick's claim holds)."""
        if outcomes:
            self.store.notifications.finish_deliveries(outcomes, now=self._now(),
                                                       token=self._token)


def _after_death(store: Store, ending: Ending, endings: Sequence[Ending]) -> bool:
    """Whether the run of the same job that ended last before ``ending``'s run died: the
    history's (read before the transaction writes), or one of ``endings``, which the same
    transaction records."""
    last = [(e.run_id, e.status == RunStatus.DEAD) for e in endings
            if e.definition_id == ending.definition_id and e.run_id < ending.run_id
            and e.status in RUN_FINAL]
    before = store.notifications.previous_ended_run(ending.run_id)
    if before is not None:
        last.append(before)
    return bool(last) and max(last)[1]

