"""The queue of runs as the executor sees it: claim, heartbeat, finish, reclaim; a pass of the
executor in one round trip."""

from __future__ import annotations

import contextlib
import datetime as dt
from collections.abc import Callable, Sequence
from typing import Any

from psycopg.rows import class_row, tuple_row
from psycopg.types.json import Jsonb

from cronjobs.db.session import Queries, translated
from cronjobs.errors import (
    Conflict,
)
from cronjobs.models import (
    Claimed,
    ClaimKey,
    JobFailure,
    LeaseHeld,
    Outcome,
    Reclaimed,
)


class QueueStore(Queries):
    """The queue of runs as the executor sees it: claim, heartbeat, finish, reclaim; a pass of the
    executor in one round trip."""

    def pass_of_executor(self, outcomes: Sequence[Outcome], failing: Sequence[Outcome], *,
                         now: dt.datetime, worker: str, limit: int, tick_id: int | None,
                         run_ids: Sequence[int] | None = None, handlers: Sequence[str] = (),
                         outbox: Callable[[], None] | None = None,
                         after: ClaimKey | None = None
                         ) -> tuple[set[int], dict[int, JobFailure | None], list[Claimed]]:
        """One pass of a tick's executor in one transaction, sent at once and read when
        the commit is in (one round trip, one flush of the write-ahead log): count the
        failures of ``failing`` (:meth:`record_job_failure`, in the order given), record
        ``outcomes`` (:meth:`finish_runs`) and, with ``limit``, claim up to that many
        runs (:meth:`claim_runs`, from ``after`` when given: the drain's cursor).
        ``outbox``, when given, sends the notifications of the outcomes
        (NotificationStore.enqueue_deliveries) in the same transaction, before the
        outcomes are written: both commit, or neither. Returns the ids recorded, the
        failures counted and the runs claimed. When the claim conflicts with another
        worker's (see claim_runs), the whole transaction is undone and the outcomes are
        recorded on their own (``outbox`` is then called again, in that transaction)."""
        if limit > 0:
            def claim() -> Callable[[], list[Claimed]]:
                return self._claim_later(now=now, worker=worker, limit=limit, tick_id=tick_id,
                                         run_ids=run_ids, handlers=handlers, planned=True,
                                         after=after)
            with contextlib.suppress(Conflict):
                return self._pass(outcomes, failing, now=now, claim=claim,
                                  generic=self._generic(run_ids, after), outbox=outbox)
        if not outcomes and not failing:
            return set(), {}, []
        return self._pass(outcomes, failing, now=now, claim=None, generic=self._generic(None),
                          outbox=outbox)

    def _pass(self, outcomes: Sequence[Outcome], failing: Sequence[Outcome], *,
              now: dt.datetime, claim: Callable[[], Callable[[], list[Claimed]]] | None,
              generic: bool, outbox: Callable[[], None] | None
              ) -> tuple[set[int], dict[int, JobFailure | None], list[Claimed]]:
        with translated():
            with self.session.transaction_at_once():
                # SET LOCAL, until the transaction ends: the outcomes are written by id
                # too, never by reading a small table whole (see claim_plan)
                self._send("claim_plan", {"generic": generic}, prepare=True)
                counted = [(o.run_id, self._later("record_job_failure", {
                    "definition_id": None, "run_id": o.run_id, "token": o.token,
                    "error": o.error, "now": now},
                    class_row(JobFailure), prepare=True)) for o in failing]
                if outbox is not None:  # it locks the runs it writes for: before finish_runs
                    outbox()
                finished = (self._later("finish_runs", _finish_params(outcomes, now),
                                        tuple_row, prepare=True) if outcomes else None)
                claimed = claim() if claim is not None else None
            failures: dict[int, JobFailure | None] = {}
            for run_id, rows in counted:
                got = rows()
                failures[run_id] = got[0] if got else None
            recorded = {row[0] for row in finished()} if finished is not None else set()
            return recorded, failures, claimed() if claimed is not None else []

    def claim_runs(self, *, now: dt.datetime, worker: str, limit: int,
                   tick_id: int | None, run_ids: Sequence[int] | None = None,
                   handlers: Sequence[str] = (), after: ClaimKey | None = None
                   ) -> list[Claimed]:
        """Claim up to ``limit`` due runs: commands, and handler runs of ``handlers`` only
        (the ones this worker has loaded); with ``after``, only runs after that place in
        the claim's order (a drain's cursor: see ClaimLoop). Another worker claiming an
        exclusive run of the same job at the same moment makes the claim find nothing (the
        unique index refused the second one: try again later)."""
        try:
            # its own transaction, sent at once (BEGIN, the group locks, the plan, the
            # claim, COMMIT) and read when the commit is in: one round trip, as a lone
            # statement would be
            with translated():
                with self.session.transaction_at_once():
                    rows = self._claim_later(now=now, worker=worker, limit=limit,
                                             tick_id=tick_id, run_ids=run_ids,
                                             handlers=handlers, after=after)
                return rows()
        except Conflict:
            return []

    def _claim_later(self, *, now: dt.datetime, worker: str, limit: int,
                     tick_id: int | None, run_ids: Sequence[int] | None,
                     handlers: Sequence[str], planned: bool = False,
                     after: ClaimKey | None = None) -> Callable[[], list[Claimed]]:
        """Send the statements of a claim inside an open transaction (``planned``: one in
        which claim_plan was sent already); the claimed rows are read by calling the result
        (after the pipeline, when there is one). ``run_ids``: these runs only, by id
        (`trigger --run`)."""
        # The scheduled claim runs hundreds of times a tick: prepared, planned once (a
        # generic plan: the range scan, whatever the instant). A claim by id runs once, and
        # is planned for its ids: the primary key finds them, where a generic plan would
        # scan the queue for them.
        # A claim from a cursor is planned for its key too (the key a start of the range
        # scan): never prepared, in a transaction whose plans are not generic.
        scheduled = run_ids is None and after is None
        params = {"now": now, "worker": worker, "limit": limit, "tick_id": tick_id,
                  "handlers": list(handlers), "scan": claim_scan(limit),
                  "run_ids": None if run_ids is None else list(run_ids), **_after(after)}
        # SET LOCAL, until the transaction ends: the group locks are planned with it too
        # (without statistics on job_runs they could otherwise read the whole queue)
        if not planned:
            self._send("claim_plan", {"generic": self._generic(run_ids, after)}, prepare=True)
        # [group limit] lock_claimable_groups first, in the claim's transaction: the
        # claims of one limited group take turns, each counting what the one before
        # committed (see queries/queue.sql)
        self._send("lock_claimable_groups", {"now": now}, prepare=run_ids is None)
        # (in binary: half the time of parsing the rows' text, per run)
        return self._later("claim_runs", params, class_row(Claimed), binary=True,
                           prepare=scheduled)

    def claimable_backlog(self, *, now: dt.datetime, handlers: Sequence[str], limit: int,
                          after: ClaimKey | None = None) -> tuple[int, int]:
        """(handler runs, commands) a claim could take at ``now``, each counted up to
        ``limit`` together: the runs due, of commands and of ``handlers``, of jobs not
        paused (what ``--concurrency auto`` sizes a tick from); with ``after``, those
        after that place in the claim's order only (see claim_runs)."""
        with translated():
            with self.session.transaction_at_once():
                self._send("claim_plan", {"generic": False})
                rows = self._later("claimable_backlog", {
                    "now": now, "handlers": list(handlers), "limit": limit, **_after(after)},
                    tuple_row)
            handler_runs, commands = rows()[0]
            return int(handler_runs), int(commands)

    def _generic(self, run_ids: Sequence[int] | None, after: ClaimKey | None = None) -> bool:
        """Whether claim_plan asks for generic plans (for every statement of the
        transaction, prepared or not): when the connection prepares statements, and the
        claim is neither one by id nor one from a cursor."""
        return self.session.prepares() and run_ids is None and after is None

    def leases_expired(self, *, now: dt.datetime) -> bool:
        """Whether a running run's lease expired before ``now`` (no lock taken)."""
        return bool(self._values("leases_expired", {"now": now})[0])

    def reclaim_expired(self, *, now: dt.datetime, limit: int = 1000) -> list[Reclaimed]:
        """Runs whose lease expired before ``now`` go back to the queue (or die); their
        attempt is lost."""
        return self._rows("reclaim_expired", {"now": now, "limit": limit}, Reclaimed)

    def heartbeat(self, leases: Sequence[tuple[int, Any, dt.timedelta]], *, now: dt.datetime
                  ) -> dict[int, bool]:
        """Extend leases from ``now``; returns {run_id: cancel_requested} for the leases
        still held."""
        if not leases:
            return {}
        rows = self._rows("heartbeat", {
            "now": now,
            "ids": [run_id for run_id, _, _ in leases],
            "tokens": [token for _, token, _ in leases],
            "leases": [lease for _, _, lease in leases],
        }, LeaseHeld)
        return {row.id: row.cancel_requested for row in rows}

    def finish_runs(self, outcomes: Sequence[Outcome], *, now: dt.datetime) -> set[int]:
        """Record several attempts' outcomes in one statement, each only if this worker
        still holds its lease; returns the ids recorded. A success resets its job's count
        of consecutive failures (failures are counted by :meth:`record_job_failure`)."""
        if not outcomes:
            return set()
        return set(self._values("finish_runs", _finish_params(outcomes, now)))

    def move_ended(self, run_ids: Sequence[int], *, now: dt.datetime) -> set[int]:
        """Move runs that ended in the queue (cancelled, or dead when a lost lease was their
        last attempt) to the history with their attempts, as they are: the one way a run
        moves there (finish_runs, given their ids alone). Returns the ids moved (a run
        still waiting or running, or moved already, is left)."""
        if not run_ids:
            return set()
        return set(self._values("finish_runs", {
            "now": now, "outcomes": Jsonb([{"id": run_id} for run_id in run_ids])}))

    def record_job_failure(self, run_id: int, *, token: Any, error: str | None,
                           now: dt.datetime) -> JobFailure | None:
        """Count a failed attempt of the run this worker still holds (call it in the
        transaction that records the outcome, before :meth:`finish_runs`); None when the
        lease was lost: nothing was counted."""
        return self._row("record_job_failure", {
            "definition_id": None, "run_id": run_id, "token": token, "error": error,
            "now": now}, JobFailure)

    def record_reclaimed_failure(self, definition_id: int, *, error: str | None,
                                 now: dt.datetime) -> JobFailure:
        """Count the lost attempt of a run reclaimed in this same transaction."""
        return self._one("record_job_failure", {
            "definition_id": definition_id, "run_id": None, "token": None, "error": error,
            "now": now}, JobFailure)



def claim_scan(limit: int) -> int:
    """How many candidates a claim of ``limit`` runs reads (at most): two more than the
    batch make up for a few exclusive runs of one job, of which one per claim is taken
    (a long run of them is one job's backlog: one per claim whatever the scan). The range
    a claim scans is bounded by this, never by the length of the queue."""
    return limit + 2


def _after(key: ClaimKey | None) -> dict[str, Any]:
    """The parameters of a claim's start (claim_runs, claimable_backlog): after ``key``,
    or all NULL (from the front)."""
    return {"from_late": None if key is None else key.late,
            "from_at": None if key is None else key.eligible_at,
            "from_id": None if key is None else key.id}


def _finish_params(outcomes: Sequence[Outcome], now: dt.datetime) -> dict[str, Any]:
    """The parameters of finish_runs: the outcomes as one JSON array."""
    return {"now": now, "outcomes": Jsonb([{
        "id": o.run_id, "token": None if o.token is None else str(o.token),
        "status": o.status.value,
        "outcome": o.outcome.value, "exit_code": o.exit_code, "error": o.error,
        "output_tail": o.output_tail, "result": o.result,
        "retry_secs": o.retry_in.total_seconds() if o.retry_in else 0.0,
        "extra_attempts": o.extra_attempts} for o in outcomes])}
