"""What a tick does around its runs besides running them: webhook notifications
(:mod:`~cronjobs.execution.notify`), the live output of running runs (flushed to the
database, read by ``cronjobs logs --follow``) and optional tracing
(:mod:`~cronjobs.execution.tracing`).

A tick's observer also retries the deliveries of the outbox that are due
(:meth:`RunObserver.redeliver`), with the same senders.

The executor calls its :class:`Observer` when an attempt starts (:meth:`~Observer.started`),
when its outcome is recorded (:meth:`~Observer.finished`, :meth:`~Observer.lost`), and once
per pass of its loop (:meth:`~Observer.tick_pass`); the tick closes it
(:meth:`~Observer.close`). None of these ever raises or waits on the network: a failing
receiver or database write is logged, and the runs go on.

A run's notifications are written to the outbox in the transaction that records the
outcome they tell of (the completer's, or the reclaimer's): a tick killed, or a database
lost, at any moment leaves both or neither. In three steps:
:meth:`~Observer.notices` (which notifications the outcomes cause: reads, with the
transaction's store, before it writes), :meth:`~Observer.enqueue` (their rows, sent in the
transaction, fenced like the outcomes) and, once it committed, :meth:`~Observer.send`. A
transaction the retry policy repeats repeats the three with it; the first two fail the
transaction they are part of when they fail (the outcome is then not recorded either). A
tick's observer is a :class:`RunObserver`; :class:`NullObserver` does nothing.
"""

from __future__ import annotations

import datetime as dt
import json
import logging
import time
import uuid
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from cronjobs.db.store import Store
from cronjobs.errors import CronjobsError
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
    RUN_FINAL,
    AttemptOutcome,
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

LIVE_EVERY = 1.0  # seconds between two writes of one run's output while it prints
HURRY = 2.0  # seconds a stopping tick waits for deliveries under way (SIGTERM's grace is short)
NOTIFIED = (RunStatus.DEAD, RunStatus.FAILED, RunStatus.SUCCEEDED)  # what may be notified


class Attempt(Protocol):  # what the executor keeps of a running attempt
    @property
    def claim(self) -> Claimed: ...

    @property
    def job(self) -> Job: ...


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


class Observer(Protocol):
    """What the executor tells about its runs besides recording them."""

    def started(self, claim: Claimed) -> str | None:
        """An attempt starts: its traceparent (None without tracing)."""

    def finished(self, claim: Claimed, outcome: AttemptOutcome, status: RunStatus,
                 error: str | None, exit_code: int | None, output: str | None) -> None:
        """An attempt's outcome was recorded (the run is now ``status``)."""

    def lost(self, claim: Claimed, outcome: AttemptOutcome, error: str | None) -> None:
        """An attempt whose lease was lost: whoever holds the run now tells its outcome."""

    def notices(self, store: Store, endings: Sequence[Ending]) -> list[NewDelivery]:
        """The notifications these outcomes cause (reads with ``store``, the connection
        of the transaction that is to record them; a failure fails that transaction)."""

    def enqueue(self, store: Store, deliveries: Sequence[NewDelivery]
                ) -> Callable[[], list[Outgoing]]:
        """Send the outbox rows of ``deliveries`` in ``store``'s open transaction, before
        the outcomes are written; the rows written are read by calling the result."""

    def send(self, written: Sequence[Outgoing]) -> None:
        """The transaction that wrote ``written`` committed: send them (in the background)."""

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

    def notices(self, store: Store, endings: Sequence[Ending]) -> list[NewDelivery]:
        return []

    def enqueue(self, store: Store, deliveries: Sequence[NewDelivery]
                ) -> Callable[[], list[Outgoing]]:
        return nothing

    def send(self, written: Sequence[Outgoing]) -> None:
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

    def lost(self, claim: Claimed, outcome: AttemptOutcome, error: str | None) -> None:
        """An attempt whose lease was lost: whoever holds the run now tells its outcome."""
        self._end_span(claim.id, outcome, None, error)
        self._live.pop((claim.id, claim.attempt), None)

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

    def notices(self, store: Store, endings: Sequence[Ending]) -> list[NewDelivery]:
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

    def enqueue(self, store: Store, deliveries: Sequence[NewDelivery]
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
        """A job's receivers (None: it has none), read once per tick."""
        if definition_id not in self._config:
            found = store.notifications.notify_config([definition_id])
            self._config[definition_id] = found.get(definition_id)
        return self._config[definition_id]

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

    def _end_span(self, run_id: int, outcome: AttemptOutcome, status: RunStatus | None,
                  error: str | None) -> None:
        if self.tracing is None:
            return
        try:
            self.tracing.run_ended(run_id, outcome, status, error)
        except Exception as exc:
            log.warning("tracing failed: %s", exc, extra={"action": "tracing"})


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
