"""What a tick does around its runs besides running and recording them: the live output of
running runs (flushed to the database, read by ``cronjobs logs --follow``) and optional
tracing (:mod:`~cronjobs.execution.tracing`). (The runs' notifications are the outbox's:
:mod:`~cronjobs.execution.outbox`.)

The executor calls its :class:`Observer` when an attempt starts (:meth:`~Observer.started`),
when its outcome is recorded (:meth:`~Observer.finished`, :meth:`~Observer.lost`), and once
per pass of its loop (:meth:`~Observer.tick_pass`); the tick closes it
(:meth:`~Observer.close`). None of these ever raises: a failing database write is logged,
and the runs go on. A tick's observer is a :class:`RunObserver`; :class:`NullObserver` does
nothing.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Iterable
from typing import Protocol

from cronjobs.db.store import Store
from cronjobs.execution import tracing
from cronjobs.execution.runners import Job
from cronjobs.execution.tracing import Tracing
from cronjobs.models import AttemptOutcome, Claimed, RunStatus

log = logging.getLogger(__name__)

LIVE_EVERY = 1.0  # seconds between two writes of one run's output while it prints


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

    def tick_pass(self, active: Iterable[Attempt]) -> None:
        """Once per pass of the executor's loop, with the attempts under way."""

    def close(self, counts: dict[str, int], error: str | None = None) -> None:
        """The tick ends."""


class NullObserver:
    """Observes nothing."""

    def started(self, claim: Claimed) -> str | None:
        return None

    def finished(self, claim: Claimed, outcome: AttemptOutcome, status: RunStatus,
                 error: str | None, exit_code: int | None, output: str | None) -> None:
        pass

    def lost(self, claim: Claimed, outcome: AttemptOutcome, error: str | None) -> None:
        pass

    def tick_pass(self, active: Iterable[Attempt]) -> None:
        pass

    def close(self, counts: dict[str, int], error: str | None = None) -> None:
        pass


NULL_OBSERVER = NullObserver()


class RunObserver:
    """The live output and spans of one tick, written with its store."""

    def __init__(self, store: Store, *, tracing: Tracing | None = None) -> None:
        self.store = store
        self.tracing = tracing
        # (run, attempt) -> (first seen, last written or None, bytes written)
        self._live: dict[tuple[int, int], tuple[float, float | None, int]] = {}

    @classmethod
    def for_tick(cls, store: Store, *, tick_id: int | None, worker: str) -> RunObserver:
        return cls(store, tracing=tracing.start(
            {"cronjobs.tick_id": tick_id or 0, "cronjobs.worker": worker}))

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
        attempt that ends sooner costs no write but its outcome's)."""
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
        if not writes:
            return
        try:
            self.store.notifications.write_live_output(writes)
        except Exception as exc:
            log.warning("could not write live output: %s", exc, extra={"action": "observe"})

    def close(self, counts: dict[str, int], error: str | None = None) -> None:
        """The tick ends: end the spans."""
        if self.tracing is not None:
            self.tracing.close(counts, error)

    def _end_span(self, run_id: int, outcome: AttemptOutcome, status: RunStatus | None,
                  error: str | None) -> None:
        if self.tracing is None:
            return
        try:
            self.tracing.run_ended(run_id, outcome, status, error)
        except Exception as exc:
            log.warning("tracing failed: %s", exc, extra={"action": "tracing"})

