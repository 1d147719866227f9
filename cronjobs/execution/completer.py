"""The completer: records the outcomes of the attempts that ended, fenced by their lease
tokens, with the failures counted against their jobs and the notifications they cause
written to the outbox in the same transaction, and the next claim in it too (one round trip
per pass: ``store.queue.pass_of_executor``). An outcome the database refuses does not lose
the others: they are then recorded one by one, each with its notifications. Then it reports
each (the tick's report, the observer), has the outbox send the notifications written and
fires the alerts a failure calls for."""

from __future__ import annotations

import dataclasses
import logging
import time
from collections.abc import Callable, Sequence

from cronjobs.clock import Clock
from cronjobs.db.store import Store
from cronjobs.errors import CronjobsError, DatabaseUnavailable
from cronjobs.execution.alerts import Alerting, AlertKind, Event
from cronjobs.execution.observe import Observer
from cronjobs.execution.options import TickOptions
from cronjobs.execution.outbox import Ending, Outbox
from cronjobs.execution.outcome import next_status
from cronjobs.execution.runners import Result
from cronjobs.execution.state import Active, Database, ExecReport, Finished
from cronjobs.models import (
    AttemptOutcome,
    Claimed,
    ClaimKey,
    JobFailure,
    Outcome,
    Outgoing,
    RunStatus,
)

log = logging.getLogger(__name__)

# the report's counter of each status an outcome leaves a run in
COUNTERS = {RunStatus.SUCCEEDED: "succeeded", RunStatus.FAILED: "failed",
            RunStatus.DEAD: "dead", RunStatus.CANCELLED: "cancelled",
            RunStatus.QUEUED: "interrupted"}

Ended = tuple[Active, Result]
Write = tuple[Active, Result, Outcome]


class Completer:
    """Records what ended, one pass at a time (and claims in the same transaction)."""

    def __init__(self, db: Database, clock: Clock, options: TickOptions, report: ExecReport,
                 observer: Observer, alerts: Alerting, *, outbox: Outbox, tick_id: int | None,
                 handlers: tuple[str, ...]) -> None:
        self.db = db
        self.clock = clock
        self.options = options
        self.report = report
        self.observer = observer
        self.outbox = outbox
        self.alerts = alerts
        self.tick_id = tick_id
        self.handlers = handlers

    def finish(self, ended: Sequence[Ended], *, claim_limit: int = 0,
               after: ClaimKey | None = None) -> tuple[list[Claimed], float]:
        """Record the outcomes of the attempts that ended, in one statement; with
        ``claim_limit``, claim up to that many runs in the same transaction (``after``:
        from the drain's cursor, see ClaimLoop). Returns the
        runs claimed, and the monotonic time their leases were taken at (or later)."""
        writes = self._outcomes(ended)
        outcomes = [o for _, _, o in writes]
        # retried through a lost connection for as long as every lease written still holds
        until = (min(a.last_beat + a.claim.lease.total_seconds() for a, _, _ in writes)
                 if writes else None)
        # failures are counted in the same transaction, fenced by the same lease tokens
        # (in definition order, as finish_runs locks them; a deadlock that remains between
        # two finishes is retried by the policy: the whole transaction is fenced)
        failing = [o for a, _, o in sorted(writes, key=lambda w: w[0].claim.definition_id)
                   if o.status in (RunStatus.FAILED, RunStatus.DEAD)]
        failures: dict[int, JobFailure | None] = {}
        # the outcomes whose job had receivers when they were claimed (the others cost
        # nothing more)
        endings = [Ending.of_attempt(a.claim, o) for a, _, o in writes if a.claim.notifies]
        sent: list[Outgoing] = []

        def write(store: Store) -> tuple[set[int], list[Claimed]]:
            # the notifications are written in the same transaction (fenced by the same
            # leases): all of it is repeated when the policy repeats it
            deliveries = self.outbox.notifications(store, endings) if endings else []
            written: list[Callable[[], list[Outgoing]]] = []

            def record() -> None:
                written[:] = [self.outbox.record(store, deliveries)]

            recorded, counted, claimed = store.queue.pass_of_executor(
                outcomes, failing, now=self.clock.now(), worker=self.options.worker,
                limit=claim_limit, tick_id=self.tick_id,
                run_ids=self.options.run_ids, handlers=self.handlers,
                outbox=record if deliveries else None, after=after)
            failures.clear()
            failures.update(counted)
            sent[:] = written[0]() if written else []
            return recorded, claimed

        claims: list[Claimed] = []
        recorded: set[int] | None = set()
        # before the clock is read, so that a lease taken at the clock's instant ends
        # after `claimed_at + lease`, where the watchdog counts from
        claimed_at = time.monotonic()
        if claim_limit > 0 or writes:
            try:
                both = (self.db.call(write) if until is None
                        else self.db.call_until(write, until))
            except CronjobsError as exc:
                if isinstance(exc, DatabaseUnavailable) or not writes:
                    raise
                # one outcome the database refuses must not lose the others': each on its
                # own (no claim this pass; the next one claims)
                log.warning("recording %s outcomes failed (%s): recording them one by one",
                            len(writes), exc.message, extra={"action": "finish"})
                sent.clear()
                both = self._one_by_one(writes, failing, failures, sent), []
            recorded, claims = both if both is not None else (None, [])
        for active, result, outcome in writes:
            self._recorded(active.claim, result, outcome, recorded,
                           failures.get(active.claim.id))
        self.outbox.send(sent)
        return claims, claimed_at

    def _outcomes(self, ended: Sequence[Ended]) -> list[Write]:
        """The outcomes to record of the attempts that ended (a lost lease is not
        recorded: whoever holds the run now records its outcome)."""
        writes: list[Write] = []
        for active, result in ended:
            claim = active.claim
            if result.outcome == AttemptOutcome.LOST:
                self.lost(claim, result.outcome, result.error)
                continue
            try:
                status, retry_in, extra = next_status(claim, result.outcome)
            except Exception as exc:  # e.g. a job without a backoff
                # the outcome stands; no retry can be computed: the run ends here
                status, retry_in, extra = RunStatus.DEAD, None, 0
                result = dataclasses.replace(result, error=(  # noqa: PLW2901
                    f"{result.error or result.outcome.value}; no retry: "
                    f"{type(exc).__name__}: {exc}")[:1000])
            writes.append((active, result, Outcome(
                claim.id, claim.lease_token, status, result.outcome, result.exit_code,
                result.error, result.output_tail, result.result, retry_in, extra)))
        return writes

    def _one_by_one(self, writes: list[Write], failing: list[Outcome],
                    failures: dict[int, JobFailure | None], sent: list[Outgoing]) -> set[int]:
        """Record each outcome in a transaction of its own, with its notifications (added
        to ``sent`` once it committed); one the database refuses is logged and left to its
        lease (the run is reclaimed when it expires)."""
        recorded: set[int] = set()
        counted = {o.run_id for o in failing}
        for active, _, outcome in writes:
            ending = [Ending.of_attempt(active.claim, outcome)] if active.claim.notifies else []

            def write(store: Store, o: Outcome = outcome, ending: list[Ending] = ending
                      ) -> tuple[set[int], list[Outgoing]]:
                deliveries = self.outbox.notifications(store, ending) if ending else []
                now = self.clock.now()
                with store.transaction():
                    if o.run_id in counted:
                        failures[o.run_id] = store.queue.record_job_failure(
                            o.run_id, token=o.token, error=o.error, now=now)
                    written = self.outbox.record(store, deliveries)
                    done = store.queue.finish_runs([o], now=now)
                    return done, written()
            until = active.last_beat + active.claim.lease.total_seconds()
            try:
                done = self.db.call_until(write, until)
                if done is not None:
                    recorded |= done[0]
                    sent += done[1]
            except CronjobsError as exc:
                log.warning("run %s: its outcome could not be recorded: %s", outcome.run_id,
                            exc.message, extra={"action": "finish", "run_id": outcome.run_id,
                                                "job": active.claim.name})
        return recorded

    def _recorded(self, claim: Claimed, result: Result, outcome: Outcome,
                  recorded: set[int] | None, failure: JobFailure | None) -> None:
        """Report an attempt whose outcome was written (or not: its lease was lost), and
        alert on a failure."""
        if recorded is None or claim.id not in recorded:
            self.lost(claim, AttemptOutcome.LOST, "lease lost before the outcome was recorded")
            return
        status = outcome.status
        counter = COUNTERS[status]
        setattr(self.report, counter, getattr(self.report, counter) + 1)
        if status == RunStatus.DEAD:
            self.report.failed += 1
        self.report.ended(Finished(claim.id, claim.name, claim.attempt, result.outcome,
                                   status, result.error))
        self.observer.finished(claim, result.outcome, status, result.error,
                               result.exit_code, result.output_tail)
        if log.isEnabledFor(logging.INFO):
            log.info("run %s %s", claim.id, status.value,
                     extra={"action": "finish", "run_id": claim.id, "job": claim.name,
                            "attempt": claim.attempt, "outcome": result.outcome.value})
        if status in (RunStatus.FAILED, RunStatus.DEAD):
            kind = AlertKind.DEAD if status == RunStatus.DEAD else AlertKind.FAILED
            counted(failure, Event(kind, claim.id, claim.name, claim.scheduled_for,
                                   claim.attempt, status, result.error, result.exit_code),
                    self.alerts)

    def lost(self, claim: Claimed, outcome: AttemptOutcome, error: str | None) -> None:
        """An attempt whose lease was lost: whoever holds the run now records it."""
        self.report.lost += 1
        self.report.ended(Finished(claim.id, claim.name, claim.attempt, outcome, None,
                                   error))
        self.observer.lost(claim, outcome, error)


def counted(failure: JobFailure | None, event: Event, alerts: Alerting) -> None:
    """After a failure was counted (``failure``: the job's failures in a row, and whether
    that paused it; None when the lease was lost first), fire the alerts it calls for."""
    if failure is None:  # the lease was lost before the failure was counted
        log.warning("run %s: lease lost, its failure was not counted", event.run_id,
                    extra={"action": "lost", "run_id": event.run_id, "job": event.job})
        return
    if failure.just_paused:
        log.warning("job %s paused: %s", failure.name, failure.pause_note,
                    extra={"action": "pause", "job": failure.name, "run_id": event.run_id})
    alerts.failed(failure, event)
