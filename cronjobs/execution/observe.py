"""What a tick does around its runs besides running them: webhook notifications
(:mod:`~cronjobs.execution.notify`), the live output of running runs (flushed to the
database, read by ``cronjobs logs --follow``) and optional tracing
(:mod:`~cronjobs.execution.tracing`).

The executor calls a :class:`RunObserver` at four points: when an attempt starts
(:meth:`~RunObserver.started`), when its outcome is recorded (:meth:`~RunObserver.finished`,
:meth:`~RunObserver.lost`), when a reclaim records one (:meth:`~RunObserver.reclaimed`), and
once per pass of its loop (:meth:`~RunObserver.tick_pass`). None of these ever raises or
waits on the network: a failing receiver or database write is logged, and the runs go on.
"""

from __future__ import annotations

import datetime as dt
import logging
import time
from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING, Any, Protocol

from cronjobs.db.store import Store
from cronjobs.models import Claimed, NotifyConfig, Reclaimed

if TYPE_CHECKING:
    from cronjobs.execution.notify import Notifier
    from cronjobs.execution.tracing import Tracing

log = logging.getLogger(__name__)

LIVE_EVERY = 1.0  # seconds between two writes of one run's output while it prints
HURRY = 2.0  # seconds a stopping tick waits for deliveries under way (SIGTERM's grace is short)


class _Active(Protocol):  # what the executor keeps of a running attempt
    claim: Claimed
    job: Any


class RunObserver:
    """The notifications, live output and spans of one tick."""

    def __init__(self, now: Callable[[], dt.datetime], *, dashboard_url: str | None = None,
                 tracing: Tracing | None = None, notifier: Notifier | None = None) -> None:
        self._now = now
        self.dashboard_url = dashboard_url
        self.tracing = tracing
        self._notifier = notifier
        self._config: dict[int, NotifyConfig | None] = {}  # definition id -> receivers
        # (run, attempt) -> (first seen, last written or None, bytes written)
        self._live: dict[tuple[int, int], tuple[float, float | None, int]] = {}

    @classmethod
    def for_tick(cls, now: Callable[[], dt.datetime], *, tick_id: int | None, worker: str,
                 dashboard_url: str | None = None) -> RunObserver:
        from cronjobs.execution import tracing  # noqa: PLC0415 - imports nothing when off

        return cls(now, dashboard_url=dashboard_url, tracing=tracing.start(
            {"cronjobs.tick_id": tick_id or 0, "cronjobs.worker": worker}))

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

    def finished(self, store: Store, claim: Claimed, outcome: str, status: str,
                 error: str | None, exit_code: int | None, output: str | None) -> None:
        """An attempt's outcome was recorded (the run is now ``status``)."""
        self._end_span(claim.id, outcome, status, error)
        self._live.pop((claim.id, claim.attempt), None)
        if not claim.notifies:  # no receivers when it was claimed
            return
        try:
            self._notify(store, claim.definition_id, claim.id, claim.name,
                         claim.scheduled_for, claim.attempt, claim.max_attempts, status,
                         error, exit_code, output)
        except Exception as exc:
            log.warning("run %s: could not queue its notifications: %s", claim.id, exc,
                        extra={"action": "notify", "run_id": claim.id})

    def lost(self, claim: Claimed, outcome: str, error: str | None) -> None:
        """An attempt whose lease was lost: whoever holds the run now tells its outcome."""
        self._end_span(claim.id, outcome, None, error)
        self._live.pop((claim.id, claim.attempt), None)

    def reclaimed(self, store: Store, row: Reclaimed) -> None:
        """A run whose lease expired was sent back (``failed``) or declared ``dead``."""
        try:
            self._notify(store, row.definition_id, row.id, row.job, row.scheduled_for,
                         row.attempt, row.attempt, str(row.status), row.error, None, None)
        except Exception as exc:
            log.warning("run %s: could not queue its notifications: %s", row.id, exc,
                        extra={"action": "notify", "run_id": row.id})

    def tick_pass(self, store: Store, active: Iterable[_Active]) -> None:
        """Once per pass: write the output of attempts running for LIVE_EVERY seconds or
        more that printed since their last write (at most every LIVE_EVERY seconds each: an
        attempt that ends sooner costs no write but its outcome's), and record the
        deliveries that finished."""
        now = time.monotonic()
        writes = []
        for a in active:
            read = getattr(a.job, "live_output", None)
            if read is None:
                continue
            key = (a.claim.id, a.claim.attempt)
            seen, written, size = self._live.setdefault(key, (now, None, -1))
            if now - (seen if written is None else written) < LIVE_EVERY:
                continue
            snapshot = read()
            if snapshot is None or snapshot[1] == size:
                continue
            self._live[key] = (seen, now, snapshot[1])
            writes.append((a.claim.id, a.claim.lease_token, snapshot[0], snapshot[1]))
        try:
            if writes:
                store.notifications.write_live_output(writes)
            if self._notifier is not None:
                store.notifications.record_deliveries(self._notifier.take())
        except Exception as exc:
            log.warning("could not write live output or deliveries: %s", exc,
                        extra={"action": "observe"})

    def close(self, store: Store, counts: dict[str, int], error: str | None = None, *,
              hurry: bool = False) -> None:
        """The tick ends: wait (bounded; HURRY seconds at most when it was asked to stop)
        for the notifications under way and record them, end the spans."""
        if self._notifier is not None:
            from cronjobs.execution.notify import DRAIN  # noqa: PLC0415

            done = self._notifier.close(HURRY if hurry else DRAIN)
            try:
                store.notifications.record_deliveries(done)
            except Exception as exc:
                log.warning("could not record %d notification(s): %s", len(done), exc,
                            extra={"action": "notify"})
        if self.tracing is not None:
            self.tracing.close(counts, error)

    # -- notifications --------------------------------------------------------------------

    def _notify(self, store: Store, definition_id: int, run_id: int, job: str,
                slot: dt.datetime, attempt: int, max_attempts: int, status: str,
                error: str | None, exit_code: int | None, output: str | None) -> None:
        if status not in ("dead", "failed", "succeeded"):
            return
        if definition_id not in self._config:
            self._config.update(dict.fromkeys([definition_id]))
            self._config.update(store.notifications.notify_config([definition_id]))
        config = self._config[definition_id]
        if config is None:
            return
        on = set(config.notify_on)
        event = None
        if status == "dead":
            event = "dead" if "dead" in on else "failure" if "failure" in on else None
        elif status == "failed":
            event = "failure" if "failure" in on else None
        elif "recovery" in on and (attempt > 1 or store.notifications.previous_run_dead(run_id)):
            event = "recovery"
        if event is None:
            return
        from cronjobs.execution.notify import Notice, Notifier, run_url  # noqa: PLC0415

        if self._notifier is None:
            self._notifier = Notifier(self._now)
        self._notifier.send(Notice(event, run_id, job, slot, attempt, max_attempts, status,
                                   error, exit_code, output,
                                   run_url(self.dashboard_url, run_id)),
                            tuple(config.notify_urls))

    def _end_span(self, run_id: int, outcome: str, status: str | None,
                  error: str | None) -> None:
        if self.tracing is None:
            return
        try:
            self.tracing.run_ended(run_id, outcome, status, error)
        except Exception as exc:
            log.warning("tracing failed: %s", exc, extra={"action": "tracing"})
