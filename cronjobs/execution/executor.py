"""The execution half of a tick: reclaim expired leases, claim due runs up to the free
capacity, run them (``runner``), heartbeat, and record outcomes fenced by the lease token.

No transaction or row lock is held while a job runs: claiming is one statement that
commits at once, and every later write by this worker names its lease token, so a worker
that lost its lease (it froze, the database was unreachable) can never overwrite the
outcome of whoever took the run over. Retries are rows (``eligible_at`` in the future),
never in-process loops.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import fnmatch
import logging
import os
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from cronjobs.clock import Clock
from cronjobs.db.retry import DEFAULT, RetryPolicy, retrying
from cronjobs.db.store import Store
from cronjobs.errors import CronjobsError, DatabaseUnavailable
from cronjobs.execution.options import TickOptions
from cronjobs.execution.outcome import UnrunnableRun, lease_of, next_status, unrunnable
from cronjobs.models import AttemptOutcome, Claimed, JobFailure, Outcome, Reclaimed, RunStatus

if TYPE_CHECKING:  # imported when there is something to run: an idle tick stays light
    from cronjobs.execution.alerts import Alerts, Event
    from cronjobs.execution.observe import RunObserver
    from cronjobs.execution.runners import Result
    from cronjobs.execution.runners.inprocess import InProcessJob, ThreadRunner
    from cronjobs.execution.runners.process import Running
    from cronjobs.execution.runners.template import Template
    from cronjobs.execution.watchdog import Watchdog

log = logging.getLogger(__name__)

POLL = 0.05  # longest wait between checks of running jobs (a finished job wakes it)
RECLAIM_EVERY = 5.0  # seconds between reclaim passes while the tick is busy
CLAIM_RETRY = (0.05, 1.0)  # wait after a claim that found less than capacity: first, most
# While jobs still run, a free slot waits up to this long for half of the slots to be free,
# so that short jobs are claimed in batches (a pass costs about the same for 1 run or 50)
GATHER = 0.005


@dataclass(frozen=True)
class Finished:
    run_id: int
    job: str
    attempt: int
    outcome: str
    status: str | None  # the run's new status; None when the lease was lost
    error: str | None


@dataclass
class ExecReport:
    reclaimed: int = 0
    claimed: int = 0
    succeeded: int = 0
    failed: int = 0
    dead: int = 0
    cancelled: int = 0
    interrupted: int = 0
    lost: int = 0
    finished: list[Finished] = field(default_factory=list)


@dataclass
class _Active:
    claim: Claimed
    job: Running | InProcessJob | _Done
    last_beat: float  # monotonic time of the last renewed lease
    stop_requested: AttemptOutcome | None = None
    in_process: bool = False  # a handler in a thread of this process (runners/inprocess.py)


class Executor:
    """Runs the execution half of one tick against one store (which reconnects itself:
    ``store.reconnect()`` runs between two attempts of a database call)."""

    def __init__(self, store: Store, options: TickOptions, *, clock: Clock | None = None,
                 tick_id: int | None = None, due_at: dt.datetime | None = None,
                 handlers: tuple[str, ...] = (),
                 should_stop: Callable[[], bool] = lambda: False,
                 policy: RetryPolicy = DEFAULT) -> None:
        """``clock`` is the tick's: every claim, lease, backoff and outcome is on it (None:
        one started from the database's clock now). ``tick_id`` names the tick on its
        attempts; ``due_at`` is the instant it materialised up to; ``handlers`` the handlers
        its ``--app`` modules register (only their runs are claimed)."""
        self.store = store
        self.policy = policy
        self.options = options
        self.clock = clock if clock is not None else Clock(store.now())
        self.tick_id = tick_id
        self.due_at = due_at
        self.handlers = handlers
        self.should_stop = should_stop
        self.report = ExecReport()
        self.active: dict[int, _Active] = {}
        self.watchdog: Watchdog | None = None
        self.template: Template | None = None  # forks isolated handler runs; fences all jobs
        self.wake = threading.Event()  # set when a job ends
        self._inprocess: ThreadRunner | None = None
        self._abandoned = False  # an in-process handler was given up on while running
        self._self_deadline: float | None = None  # what the watchdog holds for this process
        self._gathering: float | None = None  # since when a free slot waits (GATHER)
        self._alerts: Alerts | None = None
        # [observe] notifications, live output, tracing (cronjobs.execution.observe)
        self.observer: RunObserver | None = None

    @property
    def alerts(self) -> Alerts:
        if self._alerts is None:
            from cronjobs.execution.alerts import Alerts  # noqa: PLC0415 - see the imports above

            self._alerts = Alerts()
        return self._alerts

    # -- the loop -----------------------------------------------------------------------

    def run(self) -> ExecReport:
        started = time.monotonic()
        self._reclaim()
        last_reclaim = time.monotonic()
        if self._capacity_left() == 0:
            return self.report
        try:
            self._loop(started, last_reclaim)
        finally:
            if self.watchdog is not None:
                self.watchdog.close()
            if self.template is not None:
                self.template.close()
            if self._alerts is not None:
                self._alerts.wait()
        return self.report

    def _loop(self, started: float, last_reclaim: float) -> None:
        claiming = True
        next_claim = 0.0  # monotonic time of the next claim
        retry = CLAIM_RETRY[0]
        stopping = False
        waited = False  # waited for runs other ticks were materialising
        while True:
            self.wake.clear()
            now = time.monotonic()
            if not stopping and self.should_stop():
                stopping = True
                claiming = False
                self._interrupt_all()
            if claiming and (now - started >= self.options.max_runtime
                             or self._capacity_left() == 0 or self._abandoned):
                claiming = False
            ended = self._poll_jobs()
            free = self._free_slots(now) if claiming else 0
            if free > 0 and now >= next_claim:
                self._gathering = None
                if now - last_reclaim >= RECLAIM_EVERY:
                    self._reclaim()
                    last_reclaim = now
                # the outcomes and the next claim share one transaction
                got = self._finish(ended, claim_limit=min(free, self._capacity_left()))
                if got < free:
                    # Nothing more is due now. Stay while runs are still being
                    # materialised by other ticks (they will be due in a moment, so look
                    # again soon rather than later). Once they are done, claim once more
                    # before leaving: what they committed while this claim ran is only
                    # visible to the next one.
                    if not self.active:
                        if self._others_materialising():
                            waited, retry = True, CLAIM_RETRY[0]
                        elif waited:
                            waited, retry = False, 0.0
                        else:
                            return
                    next_claim = now + retry
                    retry = min(max(retry * 2, CLAIM_RETRY[0]), CLAIM_RETRY[1])
                else:
                    retry = CLAIM_RETRY[0]
                continue  # look at what just started before waiting
            self._finish(ended)
            if not self.active and not claiming:
                return
            self._heartbeat()
            if self.observer is not None:  # [observe]
                self.observer.tick_pass(self.store, self.active.values())
            if self._alerts is not None:
                self._alerts.poll()
            wait = POLL
            if claiming and free > 0:
                wait = max(0.0, min(wait, next_claim - now))
            if claiming and self._gathering is not None:
                wait = max(0.0, min(wait, self._gathering + GATHER - now))
            self.wake.wait(wait)

    def _free_slots(self, now: float) -> int:
        """The slots to claim for now: none while jobs still run and fewer than half of
        the slots are free, for up to GATHER (so that short jobs come in batches)."""
        free = self.options.concurrency - len(self.active)
        if 0 < free < (self.options.concurrency + 1) // 2 and self.active:
            if self._gathering is None:
                self._gathering = now
            if now - self._gathering < GATHER:
                return 0
        return free

    def _others_materialising(self) -> bool:
        """Whether definitions are due but locked: another tick is materialising them."""
        due_at = self.due_at
        if self.options.run_ids is not None or due_at is None:
            return False
        return bool(self._db(lambda s: s.materialise.definitions_due(now=due_at)))

    def _capacity_left(self) -> int:
        if self.options.max_runs is None:
            return 1 << 30
        return max(0, self.options.max_runs - self.report.claimed)

    # -- steps --------------------------------------------------------------------------

    def _reclaim(self) -> None:
        def reclaim(store: Store) -> list[tuple[Reclaimed, JobFailure]]:
            # the takeover and the count of the lost attempts in one transaction
            now = self.clock.now()
            with store.transaction():
                rows = sorted(store.queue.reclaim_expired(now=now), key=lambda r: r.definition_id)
                return [(row, store.queue.record_reclaimed_failure(row.definition_id,
                                                             error=row.error, now=now))
                        for row in rows]

        for row, failure in self._db(reclaim) or []:
            self.report.reclaimed += 1
            log.warning("lease expired: run %s back to %s", row.id, row.status,
                        extra={"action": "reclaim", "run_id": row.id,
                               "worker": row.lease_owner})
            from cronjobs.execution.alerts import Event  # noqa: PLC0415 - see the imports above

            self._after_attempt(failure, Event(
                "dead" if row.status == RunStatus.DEAD else "failed", row.id,
                row.job, row.scheduled_for, row.attempt, row.status, row.error, None))
            if self.observer is not None:  # [observe]
                self.observer.reclaimed(self.store, row)

    def _refusal(self, claim: Claimed) -> str | None:
        """Why this worker will not run ``claim`` (a security setting), or None."""
        if claim.kind != "command":
            return None
        if self.options.handlers_only:
            return "refused: this worker runs registered Python handlers only (--handlers-only)"
        command = claim.command or ""
        if self.options.allowed_commands and not any(
                fnmatch.fnmatchcase(command, pattern) for pattern in self.options.allowed_commands):
            return "refused: the command is not on this worker's allow-list (--allow-command)"
        return None

    def _start(self, claim: Claimed, claimed_at: float) -> None:
        """Start ``claim``, whose lease was taken at monotonic time ``claimed_at`` (or
        later)."""
        from cronjobs.execution.context import JobContext  # noqa: PLC0415 - see the imports above
        from cronjobs.execution.runners import Result, Work  # noqa: PLC0415
        from cronjobs.execution.runners.dispatch import start  # noqa: PLC0415
        from cronjobs.execution.runners.template import Template  # noqa: PLC0415
        from cronjobs.execution.watchdog import Watchdog  # noqa: PLC0415

        if self.watchdog is None:
            self.watchdog = Watchdog.start()
            self.watchdog.autoflush = False  # flushed once per pass (_finish)
            self.template = Template(() if self.options.in_process else self.options.apps,
                                     self.wake)
            self.watchdog.mirror = self.template
        refusal = self._refusal(claim)
        if refusal is not None:
            log.warning("run %s: %s", claim.id, refusal,
                        extra={"action": "refuse", "run_id": claim.id, "job": claim.name})
            refused = Result(AttemptOutcome.FAILED, None, refusal, "", None, 0.0)
            dead = dataclasses.replace(claim, max_attempts=claim.attempt)  # no retry
            # recorded with the other outcomes on the next pass
            self.active[claim.id] = _Active(dead, _Done(refused), time.monotonic())
            return
        problem = unrunnable(claim)
        if problem is not None:
            raise UnrunnableRun(problem)
        context = JobContext(run_id=claim.id, job=claim.name, scheduled_for=claim.scheduled_for,
                             attempt=claim.attempt, payload=dict(claim.payload or {}),
                             traceparent=(self.observer.started(claim)  # [observe]
                                          if self.observer is not None else None))
        work = Work(context=context, kind=claim.kind, command=claim.command,
                    handler=claim.handler, apps=self.options.apps,
                    timeout=claim.timeout.total_seconds() if claim.timeout else None,
                    kill_grace=min(10.0, self.options.grace))
        if log.isEnabledFor(logging.DEBUG):
            log.debug("run claimed", extra={"action": "claim", "run_id": claim.id,
                                            "job": claim.name, "attempt": claim.attempt})
        job: Running | InProcessJob
        in_process = claim.kind == "handler" and self.options.in_process
        if in_process:
            if self._inprocess is None:
                from cronjobs.execution.runners.inprocess import (  # noqa: PLC0415
                    ThreadRunner,
                )

                self._inprocess = ThreadRunner(self.options.apps, self.wake)
            # the watchdog knows this tick's deadline before the handler can start
            self._watch_self(_deadline(claimed_at, claim))
            job = self._inprocess.start(work)
        else:
            job = start(work, self.watchdog, _deadline(claimed_at, claim), self.wake,
                        self.template)
        self.active[claim.id] = _Active(claim, job, claimed_at, in_process=in_process)

    def _cannot_start(self, claim: Claimed, exc: Exception) -> None:
        """``claim`` could not be started (a row written around the CLI's checks, or the
        system refused): it fails alone, with the reason recorded on it on the next pass;
        the rest of the batch runs."""
        from cronjobs.execution.runners import Result  # noqa: PLC0415 - see the imports above

        reason = exc.message if isinstance(exc, CronjobsError) else f"{type(exc).__name__}: {exc}"
        error = f"could not start: {reason}"[:1000]
        log.error("run %s: %s", claim.id, error,
                  extra={"action": "start", "run_id": claim.id, "job": claim.name})
        # the row itself is wrong (a retry would meet it again): dead at once; the system
        # refused (out of processes...): retried as any failed attempt
        row = isinstance(exc, (UnrunnableRun, ValueError, TypeError))
        failed = dataclasses.replace(claim, max_attempts=claim.attempt if row
                                     else claim.max_attempts, lease=lease_of(claim))
        self.active.pop(claim.id, None)
        self.active[claim.id] = _Active(failed, _Done(Result(AttemptOutcome.FAILED, None, error,
                                                             "", None, 0.0)), time.monotonic())

    def _poll_jobs(self) -> list[tuple[_Active, Result]]:
        """The jobs that ended, taken out of ``active``."""
        ended: list[tuple[_Active, Result]] = []
        for run_id, active in list(self.active.items()):
            result = active.job.poll()
            if result is not None:
                del self.active[run_id]
                ended.append((active, result))
                if active.job.abandoned:
                    self._abandoned = True
        return ended

    def _watch_self(self, starting: float | None = None) -> None:
        """While handlers run in this process, the watchdog holds the earliest deadline of
        their leases, and kills this whole process if it passes unrenewed (a frozen tick).
        An earlier deadline is sent at once; a later one at most once a second.
        ``starting``: the deadline of a handler about to start (sent before it starts)."""
        if self.watchdog is None:
            return
        if starting is not None and self._self_deadline is not None \
                and starting >= self._self_deadline:
            # the watchdog holds an earlier deadline already (what it holds is never later
            # than the earliest of the running handlers'): nothing to send before the
            # handler starts, and the pass's own call sends a later one. (Without this,
            # starting n handlers would look at every running one n times.)
            return
        deadlines = [_deadline(a.last_beat, a.claim) for a in self.active.values()
                     if a.in_process] + ([starting] if starting is not None else [])
        sent = self._self_deadline
        if deadlines:
            deadline = min(deadlines)
            if sent is None or deadline < sent or deadline > sent + 1.0:
                self.watchdog.watch(-os.getpid(), deadline)
                self._self_deadline = deadline
        elif sent is not None:
            self.watchdog.forget(-os.getpid())
            self._self_deadline = None

    def _heartbeat(self) -> None:
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
        held = self._db(lambda s: s.queue.heartbeat(leases, now=self.clock.now()), until=give_up,
                        give_up=self.should_stop)
        if held is None:
            late = time.monotonic()
            for a in due:
                if late - a.last_beat >= a.claim.lease.total_seconds() * 5 / 6:
                    self._stop(a, AttemptOutcome.LOST,
                               "could not renew the lease: the database is unavailable")
            return
        for a in due:
            if a.claim.id not in held:
                self._stop(a, AttemptOutcome.LOST, "lease lost: another worker took the run over")
            elif held[a.claim.id]:
                self._stop(a, AttemptOutcome.CANCELLED, "cancelled")
            else:
                a.last_beat = now
                if self.watchdog is not None and a.job.pid:
                    self.watchdog.renew(a.job.pid, _deadline(now, a.claim))
        self._watch_self()
        if self.watchdog is not None:
            self.watchdog.flush()

    def _stop(self, active: _Active, outcome: AttemptOutcome, reason: str) -> None:
        if active.stop_requested is None:
            active.stop_requested = outcome
            active.job.stop(outcome, reason)
            log.warning("stopping run %s: %s", active.claim.id, reason,
                        extra={"action": "stop", "run_id": active.claim.id})

    def _interrupt_all(self) -> None:
        for active in self.active.values():
            self._stop(active, AttemptOutcome.INTERRUPTED, "interrupted: the tick was stopped")

    def _outcomes(self, ended: list[tuple[_Active, Result]]
                  ) -> list[tuple[_Active, Result, Outcome]]:
        """The outcomes to record of the attempts that ended (a lost lease is not
        recorded: whoever holds the run now records its outcome)."""
        writes: list[tuple[_Active, Result, Outcome]] = []
        for active, result in ended:
            claim = active.claim
            if result.outcome == AttemptOutcome.LOST:
                # the lease is gone: whoever holds the run now records its outcome
                self._record_lost(claim, result.outcome.value, result.error)
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

    def _finish(self, ended: list[tuple[_Active, Result]], *, claim_limit: int = 0) -> int:
        """Record the outcomes of attempts that ended, in one statement; with
        ``claim_limit``, claim up to that many runs in the same transaction and start them.
        Returns the number claimed."""
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

        def write(store: Store) -> tuple[set[int], list[Claimed]]:
            recorded, counted, claimed = store.queue.pass_of_executor(
                outcomes, failing, now=self.clock.now(), worker=self.options.worker,
                limit=claim_limit, tick_id=self.tick_id,
                run_ids=self.options.run_ids, handlers=self.handlers)
            failures.clear()
            failures.update(counted)
            return recorded, claimed

        claims: list[Claimed] = []
        recorded: set[int] | None = set()
        # before the clock is read, so that a lease taken at the clock's instant ends
        # after `claimed_at + lease`, where the watchdog counts from
        claimed_at = time.monotonic()
        if claim_limit > 0 or writes:
            try:
                both = self._db(write, until=until)
            except CronjobsError as exc:
                if isinstance(exc, DatabaseUnavailable) or not writes:
                    raise
                # one outcome the database refuses must not lose the others': each on its
                # own (no claim this pass; the next one claims)
                log.warning("recording %s outcomes failed (%s): recording them one by one",
                            len(writes), exc.message, extra={"action": "finish"})
                both = self._record_one_by_one(writes, failing, failures), []
            recorded, claims = both if both is not None else (None, [])
        for active, result, outcome in writes:
            self._recorded(active.claim, result, outcome, recorded,
                           failures.get(active.claim.id))
        for claimed in claims:
            self.report.claimed += 1
            try:
                self._start(claimed, claimed_at)
            except Exception as exc:  # one run's problem is that run's alone
                self._cannot_start(claimed, exc)
        if ended or claims:
            self._watch_self()
        if self.watchdog is not None:
            self.watchdog.flush()
        return len(claims)

    def _recorded(self, claim: Claimed, result: Result, outcome: Outcome,
                  recorded: set[int] | None, failure: JobFailure | None) -> None:
        """Report an attempt whose outcome was written (or not: its lease was lost), and
        alert on a failure."""
        if recorded is None or claim.id not in recorded:
            self._record_lost(claim, "lost", "lease lost before the outcome was recorded")
            return
        status = outcome.status
        counter = {RunStatus.SUCCEEDED: "succeeded", RunStatus.FAILED: "failed",
                   RunStatus.DEAD: "dead", RunStatus.CANCELLED: "cancelled",
                   RunStatus.QUEUED: "interrupted"}[status]
        setattr(self.report, counter, getattr(self.report, counter) + 1)
        if status == RunStatus.DEAD:
            self.report.failed += 1
        self.report.finished.append(Finished(claim.id, claim.name, claim.attempt,
                                             result.outcome.value, status.value, result.error))
        self._observe_finished(claim, result, status)  # [observe]
        if log.isEnabledFor(logging.INFO):
            log.info("run %s %s", claim.id, status.value,
                     extra={"action": "finish", "run_id": claim.id, "job": claim.name,
                            "outcome": result.outcome.value})
        if status in (RunStatus.FAILED, RunStatus.DEAD):
            from cronjobs.execution.alerts import Event  # noqa: PLC0415 - see the imports above

            event = Event("dead" if status == RunStatus.DEAD else "failed", claim.id,
                          claim.name, claim.scheduled_for, claim.attempt, status.value,
                          result.error, result.exit_code)
            self._after_attempt(failure, event)

    def _record_one_by_one(self, writes: list[tuple[_Active, Result, Outcome]],
                           failing: list[Outcome], failures: dict[int, JobFailure | None]
                           ) -> set[int]:
        """Record each outcome in a transaction of its own; one the database refuses is
        logged and left to its lease (the run is reclaimed when it expires)."""
        recorded: set[int] = set()
        counted = {o.run_id for o in failing}
        for active, _, outcome in writes:
            def write(store: Store, o: Outcome = outcome) -> set[int]:
                now = self.clock.now()
                with store.transaction():
                    if o.run_id in counted:
                        failures[o.run_id] = store.queue.record_job_failure(
                            o.run_id, token=o.token, error=o.error, now=now)
                    return store.queue.finish_runs([o], now=now)
            until = active.last_beat + active.claim.lease.total_seconds()
            try:
                recorded |= self._db(write, until=until) or set()
            except CronjobsError as exc:
                log.warning("run %s: its outcome could not be recorded: %s", outcome.run_id,
                            exc.message, extra={"action": "finish", "run_id": outcome.run_id})
        return recorded
    def _observe_finished(self, claim: Claimed, result: Result, status: RunStatus) -> None:
        """[observe] The outcome of ``claim`` was recorded: notifications, its span."""
        if self.observer is not None:
            self.observer.finished(self.store, claim, result.outcome.value, status.value,
                                   result.error, result.exit_code, result.output_tail)

    def _record_lost(self, claim: Claimed, outcome: str, error: str | None) -> None:
        self.report.lost += 1
        self.report.finished.append(Finished(claim.id, claim.name, claim.attempt, outcome,
                                             None, error))
        if self.observer is not None:  # [observe]
            self.observer.lost(claim, outcome, error)

    def _after_attempt(self, row: JobFailure | None, event: Event) -> None:
        """After a failure was counted (``row``: the job's failures in a row, and whether
        that paused it), fire the alert command the outcome calls for."""
        if row is None:  # the lease was lost before the failure was counted
            log.warning("run %s: lease lost, its failure was not counted", event.run_id,
                        extra={"action": "lost", "run_id": event.run_id})
            return
        command = row.alert_command or self.options.alert_command
        if row.just_paused:
            log.warning("job %r paused: %s", row.name, row.pause_note,
                        extra={"action": "pause", "job": row.name})
        if command is None:
            return
        if event.kind == "dead" or row.alert_on_failure:
            self.alerts.fire(command, event)
        if row.just_paused:
            from cronjobs.execution.alerts import Event  # noqa: PLC0415 - see the imports above

            self.alerts.fire(command, Event("paused", event.run_id, event.job,
                                            event.scheduled_for, event.attempt, event.status,
                                            row.pause_note, event.exit_code))

    # -- database access that survives a blip -------------------------------------------

    def _db(self, call: Callable[[Store], Any], *, until: float | None = None,
            give_up: Callable[[], bool] | None = None) -> Any:
        """Run ``call`` under the retry policy (cronjobs.db.retry), the store reconnecting
        before each repeat, until ``until`` (monotonic) or for the policy's time, or
        ``give_up()``. Returns None when it could not be done by ``until``; without
        ``until`` the last error is raised."""
        try:
            return retrying(lambda: call(self.store), policy=self.policy, until=until,
                            give_up=give_up, between=self.store.reconnect,
                            on_retry=_log_retry)
        except DatabaseUnavailable as exc:
            log.warning("database unavailable: %s", exc.message, extra={"action": "database"})
            if until is None:
                raise
            return None


def _log_retry(exc: BaseException) -> None:
    log.info("database call failed, retrying: %s", exc, extra={"action": "database"})


class _Done:
    """Stands in for a job that was never started."""

    pid = 0
    abandoned = False

    def __init__(self, result: Result) -> None:
        self.result = result

    def poll(self) -> Result:
        return self.result

    def stop(self, outcome: AttemptOutcome, reason: str) -> None:
        """Nothing runs: nothing to stop."""


def _deadline(since: float, claim: Claimed) -> float:
    """When the watchdog must kill a job whose lease was last renewed at ``since``: just
    before the lease can expire, so a reclaimed run never overlaps this copy."""
    lease = claim.lease.total_seconds()
    return since + lease - min(1.0, lease / 10)
