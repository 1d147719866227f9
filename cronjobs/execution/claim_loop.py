"""The claim loop (river's producer): how many runs to claim and when — the free capacity,
gathering free slots into batches, backing off while nothing is due — where each claim
starts (the drain's cursor), and starting what was claimed, each run in the mode it calls
for (:mod:`cronjobs.execution.runners`). The claim itself shares its transaction with the
pass's outcomes (see :class:`~cronjobs.execution.completer.Completer`).

The cursor: a claim reads the queue's claim index in its order from the front, over the
entries of the runs claimed since (their old row versions). Vacuum, or the next scan once
no snapshot can still see them, removes those entries; while a transaction holds an older
snapshot, neither can, and each claim of a drain would read every run claimed since that
snapshot began: a drain slows down as it goes. So once a claim from the front is slow (see
SLOW: for the runs its pass wrote), a drain remembers the place (ClaimKey) of the last run
it claimed and starts its next claims after it (each such claim is planned for its key: a
millisecond or so, which a fast claim from the front is not worth). What lies behind the
cursor is never lost: runs skipped there (locked by another claim, an exclusive run's job
running, a group full, a job paused) and runs due since with an earlier place are found by
a claim from the front, which a drain makes whenever a claim from the cursor came back
short (so a drain ends only after a claim from the front found too little), and in any
case once FRONT_EVERY times as long as its last claim from the front took has passed
(looking from the front costs a drain a twentieth of its time at most, and a run skipped
behind the cursor waits that long at most)."""

from __future__ import annotations

import dataclasses
import datetime as dt
import fnmatch
import logging
import threading
import time

from cronjobs.clock import Clock
from cronjobs.errors import CronjobsError
from cronjobs.execution import sizing
from cronjobs.execution.context import JobContext
from cronjobs.execution.lease_keeper import LeaseKeeper
from cronjobs.execution.observe import Observer
from cronjobs.execution.options import TickOptions
from cronjobs.execution.outcome import UnrunnableRun, lease_of, unrunnable
from cronjobs.execution.runners import NotStarted, Work, failed
from cronjobs.execution.runners.dispatch import Runners
from cronjobs.execution.state import Active, Database, ExecReport, deadline
from cronjobs.models import Claimed, ClaimKey, Kind

log = logging.getLogger(__name__)

POLL = 0.05  # longest wait between checks of running jobs (a finished job wakes it)
CLAIM_RETRY = (0.05, 1.0)  # wait after a claim that found less than capacity: first, most
# While jobs still run, a free slot waits up to this long for half of the slots to be free,
# so that short jobs are claimed in batches (a pass costs about the same for 1 run or 50)
GATHER = 0.005
# The cursor (the module's docstring): a drain claims from it after a slow claim from the
# front, until FRONT_EVERY times as long as that one took. Slow: longer than SLOW seconds,
# or longer than SLOW_FLOOR and SLOW_PER_ROW seconds per run the pass wrote (outcomes and
# claims). A pass of 64 outcomes and 64 claims takes about 20 ms on 2 busy cores with
# nothing held (0.16 ms a run), one of 8 and 8 about 6 ms (0.4 ms a run); a held snapshot
# makes each claim from the front read every run claimed since it began, and the passes of
# 8 and 8 took 14, 24, then 35 ms in a 2-minute hold. The cursor's claims are each planned
# for their key (a millisecond or so): at a flat 20 ms, big ordinary passes switched to
# them, and that slowed ordinary drains by about 10 %.
SLOW = 0.1
SLOW_FLOOR = 0.01
SLOW_PER_ROW = 0.001
FRONT_EVERY = 20


def slow(took: float, written: int) -> bool:
    """Whether a pass from the front that took ``took`` seconds and wrote ``written`` runs
    (outcomes and claims) says the front of the claim index is slow to read."""
    return took > SLOW or (took > SLOW_FLOOR and took > SLOW_PER_ROW * max(written, 1))


class ClaimLoop:
    """When to claim, how many, and starting what was claimed."""

    def __init__(self, db: Database, options: TickOptions, active: dict[int, Active],
                 report: ExecReport, runners: Runners, leases: LeaseKeeper,
                 observer: Observer, *, due_at: dt.datetime | None, clock: Clock,
                 handlers: tuple[str, ...], nudged: threading.Event | None = None) -> None:
        self.db = db
        self.clock = clock
        self.handlers = handlers  # the handlers this tick has (only their runs are claimed)
        self.options = options
        self.active = active
        self.report = report
        self.runners = runners
        self.leases = leases
        self.observer = observer
        self.due_at = due_at  # the instant this tick materialised up to
        self.started = time.monotonic()  # when the executor started running (--max-runtime)
        self.claiming = True
        self.nudged = nudged  # set when runs were queued: claim at once (see due())
        self._abandoned = False  # an in-process handler was given up on while running
        self._next_claim = 0.0  # monotonic time of the next claim
        self._retry = CLAIM_RETRY[0]
        self._waited = False  # waited for runs other ticks were materialising
        self._gathering: float | None = None  # since when a free slot waits (GATHER)
        # the runs run at once: --concurrency N, or sized by size() (--concurrency auto)
        self.concurrency = options.concurrency or sizing.FLOOR
        self._cores = sizing.cores()
        self._sized_at: float | None = None  # monotonic time of the last count (auto)
        self._saturated = False  # the last count reached its limit (auto)
        # the cursor: the place of the last run claimed, when that claim filled its slots
        self.cursor: ClaimKey | None = None
        self._after: ClaimKey | None = None  # where the claim under way started (None: front)
        self._front_at = 0.0  # monotonic time from which the next claim is from the front

    # -- capacity and back-off ------------------------------------------------------------

    def size(self, now: float) -> None:
        """``--concurrency auto``: size the tick from the runs due now (the rule is in
        :mod:`cronjobs.execution.sizing`); only ever upwards within a tick."""
        if self.options.concurrency is not None or self.options.run_ids is not None:
            return
        self._sized_at = now
        at = self.clock.now()
        # (from the cursor: what lies ahead of the drain)
        handler_runs, commands = self.db.call(lambda s: s.queue.claimable_backlog(
            now=at, handlers=self.handlers, limit=sizing.MAX_THREADS, after=self.cursor))
        # counted up to the limit: a count that reached it cannot grow the size any more
        self._saturated = handler_runs + commands >= sizing.MAX_THREADS
        backlog = sizing.Backlog.of(handlers=handler_runs, commands=commands,
                                    in_process=self.options.in_process)
        size = sizing.auto_concurrency(backlog, cores=self._cores)
        if size > self.concurrency:
            log.debug("concurrency %s", size, extra={
                "action": "size", "concurrency": size, "due_threads": backlog.threads,
                "due_processes": backlog.processes})
            self.concurrency = size
        self.report.concurrency = max(self.report.concurrency, self.concurrency)

    def _resize(self, now: float) -> None:
        """After a claim that filled every free slot: count the backlog again (at most once
        a RESIZE_EVERY), in case more came due than the tick was sized for."""
        if (self._sized_at is not None and not self._saturated
                and now - self._sized_at >= sizing.RESIZE_EVERY
                and self.concurrency < sizing.thread_cap(self._cores)):
            self.size(now)

    def stop(self) -> None:
        """Claim no more."""
        self.claiming = False

    def abandoned(self) -> None:
        """An in-process handler was given up on while running: claim no more (the tick
        exits as soon as its other runs end, ending the abandoned thread with it)."""
        self._abandoned = True

    @property
    def gave_up(self) -> bool:
        """Whether an in-process handler was given up on while running (its thread may
        still run)."""
        return self._abandoned

    def capacity_left(self) -> int:
        if self.options.max_runs is None:
            return 1 << 30
        return max(0, self.options.max_runs - self.report.claimed)

    def check(self, now: float) -> None:
        """Stop claiming past --max-runtime, at --max-runs, or after an abandoned run."""
        if self.claiming and (now - self.started >= self.options.max_runtime
                              or self.capacity_left() == 0 or self._abandoned):
            self.claiming = False

    def free_slots(self, now: float) -> int:
        """The slots to claim for now: none while jobs still run and fewer than half of
        the slots are free, for up to GATHER (so that short jobs come in batches)."""
        if not self.claiming:
            return 0
        concurrency = self.concurrency
        free = concurrency - len(self.active)
        if 0 < free < (concurrency + 1) // 2 and self.active:
            if self._gathering is None:
                self._gathering = now
            if now - self._gathering < GATHER:
                return 0
        return free

    def due(self, now: float, free: int) -> bool:
        """Whether to claim ``free`` slots now: at the end of the back-off, or at once when
        runs were queued since the last claim (``nudged``, cleared before the claim sees
        them: one queued after it sets it again)."""
        if free <= 0:
            return False
        if self.nudged is not None and self.nudged.is_set():
            self.nudged.clear()
            self._next_claim, self._retry = now, CLAIM_RETRY[0]
        if now >= self._next_claim:
            self._gathering = None
            return True
        return False

    def limit(self, free: int) -> int:
        return min(free, self.capacity_left())

    def after(self, now: float) -> ClaimKey | None:
        """Where the claim about to be made starts: after the cursor, or from the front
        (None) when there is none, when it is time to look there again, or for a
        `trigger --run` (by id)."""
        self._after = None
        if (self.cursor is not None and now < self._front_at
                and self.options.run_ids is None):
            self._after = self.cursor
        return self._after

    def claimed(self, got: int, free: int, now: float, *, running: bool,
                last: ClaimKey | None = None, took: float = 0.0, written: int = 0) -> bool:
        """After a claim for ``free`` slots that got ``got`` runs, the last of them at
        ``last`` in the claim's order, in a pass that took ``took`` seconds and wrote
        ``written`` runs (outcomes and claims; 0: ``got``): where and when to claim next.
        False when the tick is done: nothing is due, nothing runs, nothing is on its way,
        and the claim that found it was one from the front."""
        if self._after is None:  # a claim from the front: was it slow?
            self._front_at = (now + FRONT_EVERY * took if slow(took, written or got)
                              else now)
        if got >= free:
            self.cursor = last
            self._retry = CLAIM_RETRY[0]
            self._resize(now)
            return True
        self.cursor = None
        if self._after is not None:
            # short from the cursor: what lies behind it is looked for at once, from the
            # front
            self._after = None
            return True
        # Nothing more is due now. Stay while runs are still being materialised by other
        # ticks (they will be due in a moment, so look again soon rather than later). Once
        # they are done, claim once more before leaving: what they committed while this
        # claim ran is only visible to the next one.
        if not running:
            if self._others_materialising():
                self._waited, self._retry = True, CLAIM_RETRY[0]
            elif self._waited:
                self._waited, self._retry = False, 0.0
            else:
                return False
        self._next_claim = now + self._retry
        self._retry = min(max(self._retry * 2, CLAIM_RETRY[0]), CLAIM_RETRY[1])
        return True

    def wait(self, now: float, free: int) -> float:
        """How long the loop may wait for a job to end before it looks again."""
        wait = POLL
        if self.claiming and free > 0:
            wait = max(0.0, min(wait, self._next_claim - now))
        if self.claiming and self._gathering is not None:
            wait = max(0.0, min(wait, self._gathering + GATHER - now))
        return wait

    def _others_materialising(self) -> bool:
        """Whether definitions are due but locked: another tick is materialising them."""
        due_at = self.due_at
        if self.options.run_ids is not None or due_at is None:
            return False
        return bool(self.db.call(lambda s: s.materialise.definitions_due(now=due_at)))

    # -- starting -------------------------------------------------------------------------

    def start(self, claim: Claimed, claimed_at: float) -> Active:
        """Start ``claim``, whose lease was taken at monotonic time ``claimed_at`` (or
        later). A run that cannot start fails alone, with the reason recorded on it on the
        next pass; the rest of the batch runs."""
        try:
            return self._start(claim, claimed_at)
        except Exception as exc:  # one run's problem is that run's alone
            return self._cannot_start(claim, exc)

    def _start(self, claim: Claimed, claimed_at: float) -> Active:
        refusal = self._refusal(claim)
        if refusal is not None:
            log.warning("run %s: %s", claim.id, refusal,
                        extra={"action": "refuse", "run_id": claim.id, "job": claim.name})
            dead = dataclasses.replace(claim, max_attempts=claim.attempt)  # no retry
            # recorded with the other outcomes on the next pass
            return Active(dead, NotStarted(failed(refusal)), time.monotonic())
        problem = unrunnable(claim)
        if problem is not None:
            raise UnrunnableRun(problem)
        runner = self.runners.for_kind(claim.kind)
        context = JobContext(run_id=claim.id, job=claim.name, scheduled_for=claim.scheduled_for,
                             attempt=claim.attempt, payload=dict(claim.payload or {}),
                             traceparent=self.observer.started(claim))
        work = Work(context=context, kind=claim.kind, command=claim.command,
                    handler=claim.handler, apps=self.options.apps,
                    timeout=claim.timeout.total_seconds() if claim.timeout else None,
                    kill_grace=min(10.0, self.options.grace))
        if log.isEnabledFor(logging.INFO):
            log.info("run %s started (attempt %s of %s)", claim.id, claim.attempt,
                     claim.max_attempts, extra={"action": "claim", "run_id": claim.id,
                                                "job": claim.name, "attempt": claim.attempt})
        ends = deadline(claimed_at, claim)
        if runner.in_process:
            # the watchdog knows this tick's deadline before the handler can start
            self.leases.watch_self(ends)
        return Active(claim, runner.start(work, ends), claimed_at, in_process=runner.in_process)

    def _refusal(self, claim: Claimed) -> str | None:
        """Why this worker will not run ``claim`` (a security setting), or None."""
        if claim.kind != Kind.COMMAND:
            return None
        if self.options.handlers_only:
            return "refused: this worker runs registered Python handlers only (--handlers-only)"
        command = claim.command or ""
        if self.options.allowed_commands and not any(
                fnmatch.fnmatchcase(command, pattern) for pattern in self.options.allowed_commands):
            return "refused: the command is not on this worker's allow-list (--allow-command)"
        return None

    def _cannot_start(self, claim: Claimed, exc: Exception) -> Active:
        """``claim`` could not be started (a row written around the CLI's checks, or the
        system refused)."""
        reason = exc.message if isinstance(exc, CronjobsError) else f"{type(exc).__name__}: {exc}"
        error = f"could not start: {reason}"[:1000]
        log.error("run %s: %s", claim.id, error,
                  extra={"action": "start", "run_id": claim.id, "job": claim.name})
        # the row itself is wrong (a retry would meet it again): dead at once; the system
        # refused (out of processes...): retried as any failed attempt
        row = isinstance(exc, (UnrunnableRun, ValueError, TypeError))
        failing = dataclasses.replace(claim, max_attempts=claim.attempt if row
                                      else claim.max_attempts, lease=lease_of(claim))
        return Active(failing, NotStarted(failed(error)), time.monotonic())
