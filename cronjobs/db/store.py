"""The only code that runs SQL: one typed method per named query in ``sql/queries.sql``.

psycopg errors are translated here into the cronjobs error tree, so nothing above this
module needs to know about psycopg exceptions.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import logging
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any, LiteralString, TypeVar

import psycopg
from psycopg import errors as pgerrors
from psycopg.pq import TransactionStatus
from psycopg.rows import RowFactory, args_row, class_row, tuple_row
from psycopg.types.json import Jsonb

from cronjobs.db import sql
from cronjobs.db.config import scrub
from cronjobs.db.observe import ObserveQueries
from cronjobs.errors import (
    Conflict,
    CronjobsError,
    DatabaseUnavailable,
    InvalidDefinition,
    SchemaNotReady,
)
from cronjobs.models import (
    Advance,
    Claimed,
    Definition,
    DefinitionSpec,
    DueDefinition,
    DueOneOff,
    JobFailure,
    LeaseHeld,
    LostTick,
    NewRun,
    NewSkip,
    Outcome,
    Pruned,
    Reclaimed,
    Run,
    SkipReason,
    TickStarted,
    Trigger,
    WaitingRuns,
)

if TYPE_CHECKING:  # the classes themselves: in the methods that return them
    from cronjobs.reports import (
        Attempt,
        DashboardJob,
        DefinitionSummary,
        GroupUsage,
        Health,
        JobStats,
        RunningRun,
        Skip,
    )

log = logging.getLogger(__name__)

T = TypeVar("T")


def claim_scan(limit: int) -> int:
    """How many candidates a claim of ``limit`` runs reads (at most): two more than the
    batch make up for a few exclusive runs of one job, of which one per claim is taken
    (a long run of them is one job's backlog: one per claim whatever the scan). The range
    a claim scans is bounded by this, never by the length of the queue."""
    return limit + 2


class Store(ObserveQueries):
    """Typed access to the cronjobs tables over one autocommit connection.

    Statements run in autocommit mode unless wrapped in ``with store.transaction():``.
    """

    def __init__(self, conn: psycopg.Connection[Any]) -> None:
        self.conn = conn

    # -- plumbing -----------------------------------------------------------------------

    @contextmanager
    def transaction(self, *, rollback: bool = False) -> Iterator[None]:
        """A transaction (a savepoint when nested); ``rollback`` undoes it in any case."""
        with _translated(), self.conn.transaction(force_rollback=rollback):
            yield

    def _rows(self, name: str, params: Mapping[str, Any] | None, cls: type[T]) -> list[T]:
        """The rows of a named query, each a frozen dataclass whose fields are the
        query's columns (psycopg's ``class_row``)."""
        with _translated(), self.conn.cursor(row_factory=class_row(cls)) as cur:
            cur.execute(sql.query(name), params)
            return cur.fetchall()

    def _row(self, name: str, params: Mapping[str, Any] | None, cls: type[T]) -> T | None:
        rows = self._rows(name, params, cls)
        return rows[0] if rows else None

    def _one(self, name: str, params: Mapping[str, Any] | None, cls: type[T]) -> T:
        """The row a query always returns."""
        row = self._row(name, params, cls)
        if row is None:
            raise CronjobsError(f"query {name!r} returned no row")
        return row

    def _values(self, name: str, params: Mapping[str, Any] | None = None) -> list[Any]:
        """The first column of every row of a one-column query."""
        with _translated(), self.conn.cursor(row_factory=tuple_row) as cur:
            cur.execute(sql.query(name), params)
            return [row[0] for row in cur.fetchall()] if cur.description is not None else []

    @contextmanager
    def pipeline(self) -> Iterator[None]:
        """Statements run inside go to the server without waiting for their answers (the
        server runs them in order, in the same transaction), so that the caller can work
        meanwhile; the block ends when every answer is in. An error surfaces at the latest
        there."""
        with _translated(), self.conn.pipeline():
            yield

    @contextmanager
    def _transaction_at_once(self) -> Iterator[None]:
        """A transaction whose statements go out together and are answered together: BEGIN,
        what the block sends, COMMIT and one Sync, so one round trip. (psycopg's
        transaction() inside a pipeline waits for the server at its start and at its end:
        three round trips more, most of a short pass's cost.) Any error undoes it. Inside
        a transaction already (a caller's), a savepoint as transaction() makes."""
        if self.conn.info.transaction_status != TransactionStatus.IDLE:
            with self.conn.pipeline(), self.conn.transaction():
                yield
            return
        try:
            with self.conn.pipeline():
                self._send("begin")
                yield
                self._send("commit")
        except BaseException:
            # (an error skipped the rest, COMMIT included, up to the Sync: the transaction
            # is open and failed)
            if self.conn.info.transaction_status in (TransactionStatus.INTRANS,
                                                     TransactionStatus.INERROR):
                with contextlib.suppress(psycopg.Error):
                    self.conn.rollback()
            raise

    def _send(self, name: str, params: Mapping[str, Any] | None = None, *,
              prepare: bool = False) -> None:
        """Run a statement whose answer is only whether it worked (``prepare``: see
        :meth:`_later`)."""
        with _translated(), self.conn.cursor() as cur:
            cur.execute(sql.query(name), params, prepare=prepare)

    def _binary(self, name: str, params: Mapping[str, Any], row_factory: RowFactory[T]
                ) -> list[T]:
        """Rows in binary, made by ``row_factory``: cheaper than text and dicts for the
        thousands of rows of a materialising tick."""
        return self._later(name, params, row_factory, binary=True)()

    def _later(self, name: str, params: Mapping[str, Any], row_factory: RowFactory[T],
               *, binary: bool = False, prepare: bool = False) -> Callable[[], list[T]]:
        """``_rows`` of a statement sent now, read by calling the result: inside
        ``pipeline()``, after the block, so that nothing waits for them before.

        ``prepare``: run it as a server-side prepared statement, planned once per
        connection instead of at every execution, when the connection allows them (see
        connect.py: never through a transaction pooler). Only the executor's pass asks for
        it, for the statements it runs hundreds of times a tick, each time after
        claim_plan's settings: a plan the server caches is made under them (the cache
        does not plan again when settings change, so a statement also run elsewhere is
        prepared only here)."""
        with _translated():
            cur = self.conn.cursor(row_factory=row_factory, binary=binary)
            cur.execute(sql.query(name), params, prepare=prepare)

        def rows() -> list[T]:
            with _translated(), cur:
                return cur.fetchall()

        return rows

    def _prepares(self) -> bool:
        """Whether this connection runs statements asked to be prepared as prepared
        statements (connect.py decides)."""
        return self.conn.prepare_threshold is not None

    def _count(self, name: str, params: Mapping[str, Any] | None = None) -> int:
        with _translated(), self.conn.cursor() as cur:
            cur.execute(sql.query(name), params)
            return cur.rowcount

    def run_script(self, script: LiteralString) -> None:
        """Run a multi-statement SQL script (schema or migration) as it is."""
        with _translated():
            self.conn.execute(script)

    def close(self) -> None:
        self.conn.close()

    # -- clock and schema ---------------------------------------------------------------

    def now(self) -> dt.datetime:
        value: dt.datetime = self._values("now")[0]
        return value.astimezone(dt.UTC)

    def session_setting(self, name: str) -> str | None:
        value: str | None = self._values("session_setting", {"name": name})[0]
        return value

    def migrations_table_exists(self) -> bool:
        return bool(self._values("migrations_table_exists")[0])

    def schema_version(self) -> int:
        return int(self._values("schema_version")[0])

    def installed_version(self) -> int | None:
        """The schema version, or None when the database has no cronjobs schema: the check
        on connecting, in one statement. Not inside a transaction (where a missing table
        would abort it); ``migrations_table_exists`` serves there."""
        try:
            return self.schema_version()
        except SchemaNotReady:
            return None

    def lock_migrations(self) -> None:
        self._send("migration_lock")

    def record_migration(self, version: int, name: str) -> None:
        self._send("record_migration", {"version": version, "name": name})

    # -- definitions --------------------------------------------------------------------

    def upsert_definition(
        self, spec: DefinitionSpec, *, now: dt.datetime, next_due_at: dt.datetime | None,
        source: str | None = None,
    ) -> tuple[Definition, bool] | None:
        """Insert or update; returns (definition, created) or None when nothing changed.
        ``source`` is recorded on a new definition only."""
        from cronjobs.reports import UpsertedDefinition  # noqa: PLC0415 - see reports.py
        params = {
            "source": source,
            "name": spec.name,
            "schedule": spec.schedule,
            "timezone": spec.timezone,
            "kind": spec.kind.value,
            "handler": spec.handler,
            "command": spec.command,
            "payload": Jsonb(spec.payload),
            "catchup": spec.catchup.value,
            "catchup_limit": spec.catchup_limit,
            "starting_deadline": spec.starting_deadline,
            "overlap": spec.overlap.value,
            "max_attempts": spec.max_attempts,
            "backoff": spec.backoff,
            "backoff_max": spec.backoff_max,
            "timeout": spec.timeout,
            "lease": spec.lease,
            "alert_command": spec.alert_command,
            "alert_on_failure": spec.alert_on_failure,
            "pause_after_failures": spec.pause_after_failures,
            "group_name": spec.group_name,
            "notify_urls": list(spec.notify_urls),
            "notify_on": [event.value for event in spec.notify_on],
            "now": now,
            "next_due_at": next_due_at,
        }
        row = self._row("upsert_definition", params, UpsertedDefinition)
        return (row, row.created) if row is not None else None

    def definition_by_name(self, name: str, *, for_update: bool = False) -> Definition | None:
        query = "definition_by_name_for_update" if for_update else "definition_by_name"
        return self._row(query, {"name": name}, Definition)

    def list_definitions(self) -> list[DefinitionSummary]:
        from cronjobs.reports import DefinitionSummary, ListedDefinition  # noqa: PLC0415 - see reports.py
        return [DefinitionSummary(row, row.last_run_status, row.last_run_at)
                for row in self._rows("list_definitions", None, ListedDefinition)]

    def recent_runs(self, definition_id: int, limit: int) -> list[Run]:
        return self._rows("recent_runs", {"definition_id": definition_id, "limit": limit}, Run)

    def pause_definition(
        self, definition_id: int, *, now: dt.datetime, until: dt.datetime | None, note: str | None
    ) -> Definition:
        params = {"id": definition_id, "now": now, "until": until, "note": note}
        return self._one("pause_definition", params, Definition)

    def resume_definition(
        self, definition_id: int, *, now: dt.datetime, next_due_at: dt.datetime | None
    ) -> Definition:
        params = {"id": definition_id, "now": now, "next_due_at": next_due_at}
        return self._one("resume_definition", params, Definition)

    def record_skip(
        self,
        definition_id: int,
        *,
        first_slot: dt.datetime,
        last_slot: dt.datetime,
        slot_count: int,
        reason: SkipReason,
        detail: str | None,
        now: dt.datetime,
        tick_id: int | None = None,
    ) -> None:
        self._send(
            "record_skip",
            {
                "definition_id": definition_id,
                "first_slot": first_slot,
                "last_slot": last_slot,
                "slot_count": slot_count,
                "reason": reason.value,
                "detail": detail,
                "tick_id": tick_id,
                "now": now,
            },
        )

    def remove_definition(self, definition_id: int, *, now: dt.datetime) -> tuple[Definition, int]:
        """Mark removed; cancel its waiting runs and ask its running runs to stop."""
        row = self._one("remove_definition", {"id": definition_id, "now": now}, Definition)
        reason = "job removed"
        cancelled = self._count(
            "cancel_waiting_runs", {"definition_id": definition_id, "now": now, "reason": reason}
        )
        self.request_cancel_running([definition_id], now=now)
        return row, cancelled

    def request_cancel_running(self, definition_ids: list[int], *, now: dt.datetime) -> int:
        params = {"definition_ids": definition_ids, "now": now}
        return self._count("request_cancel_running_of", params)

    # -- ticks and materialisation ------------------------------------------------------

    def insert_tick(self, *, worker: str, now: dt.datetime | None, lost_after: dt.timedelta,
                    handlers: Sequence[str] = ()
                    ) -> tuple[int, dt.datetime, list[LostTick]]:
        """Record a tick starting at ``now`` (None: the database clock's now), with the
        handlers it can run, and close as lost the ticks that went away before recording
        their end (still running, started more than ``lost_after`` before the instant,
        holding no live lease); returns its id, its instant and the ticks it closed."""
        row = self._one("insert_tick", {"worker": worker, "now": now, "lost_after": lost_after,
                                        "handlers": list(handlers)}, TickStarted)
        lost = [LostTick(i, w, at) for i, w, at in zip(
            row.lost_ids or [], row.lost_workers or [], row.lost_tick_ats or [], strict=True)]
        return row.id, row.tick_at.astimezone(dt.UTC), lost

    def finish_tick(self, tick_id: int, *, status: str, counts: Mapping[str, int],
                    now: dt.datetime, error: str | None = None) -> None:
        names = ("materialised", "skipped", "reclaimed", "claimed", "succeeded", "failed")
        params: dict[str, Any] = {name: counts.get(name, 0) for name in names}
        params |= {"id": tick_id, "status": status, "error": error, "now": now}
        self._send("finish_tick", params)

    def due_definitions(self, *, now: dt.datetime, limit: int) -> list[DueDefinition]:
        return self._binary("due_definitions", {"now": now, "limit": limit},
                            args_row(DueDefinition))

    def unscheduled_definitions(self, *, limit: int) -> list[DueDefinition]:
        return self._binary("unscheduled_definitions", {"limit": limit},
                            args_row(DueDefinition))

    def active_runs(self, definition_ids: list[int], *, now: dt.datetime
                    ) -> dict[int, tuple[int, int]]:
        """{definition_id: (running with a lease live at ``now``, waiting)}"""
        rows = self._binary("active_runs", {"definition_ids": definition_ids, "now": now},
                            tuple_row)
        return {definition_id: (running, waiting) for definition_id, running, waiting in rows}

    def insert_runs(self, runs: Sequence[NewRun], *, now: dt.datetime,
                    tick_id: int | None) -> list[tuple[int, dt.datetime]]:
        """Insert runs; slots that already have one are left alone. Returns the
        (definition_id, scheduled_for) of the new ones."""
        return self.send_runs(runs, now=now, tick_id=tick_id)()

    def send_runs(self, runs: Sequence[NewRun], *, now: dt.datetime, tick_id: int | None
                  ) -> Callable[[], list[tuple[int, dt.datetime]]]:
        """``insert_runs``, the new runs read when the returned function is called (inside
        ``pipeline()``: after the block)."""
        if not runs:
            return list  # nothing sent, nothing new: []
        params = {
            "definition_ids": [r.definition_id for r in runs],
            "slots": [r.scheduled_for for r in runs],
            "triggers": [r.trigger.value for r in runs],
            "max_attempts": [r.max_attempts for r in runs],
            "exclusive": [r.exclusive for r in runs],
            "eligible": [r.eligible_at for r in runs],
            "now": now,
            "tick_id": tick_id,
        }
        return self._later("insert_runs", params, tuple_row, binary=True)

    def insert_skips(self, skips: Sequence[NewSkip], *, now: dt.datetime,
                     tick_id: int | None) -> None:
        if not skips:
            return
        self._send("insert_skips", {
            "definition_ids": [s.definition_id for s in skips],
            "first_slots": [s.first_slot for s in skips],
            "last_slots": [s.last_slot for s in skips],
            "slot_counts": [s.slot_count for s in skips],
            "reasons": [s.reason.value for s in skips],
            "details": [s.detail for s in skips],
            "now": now,
            "tick_id": tick_id,
        })

    def advance_definitions(self, advances: Sequence[Advance]) -> None:
        if not advances:
            return
        self._send("advance_definitions", {
            "ids": [a.definition_id for a in advances],
            "cursors": [a.cursor_at for a in advances],
            "next_dues": [a.next_due_at for a in advances],
            "invalid_reasons": [a.invalid_reason for a in advances],
            "resumed": [a.resumed for a in advances],
        })

    def runs_between(self, definition_id: int, start: dt.datetime, end: dt.datetime
                     ) -> list[Run]:
        params = {"definition_id": definition_id, "start": start, "end": end}
        return self._rows("runs_between", params, Run)

    def skips_between(self, definition_id: int, start: dt.datetime, end: dt.datetime
                      ) -> list[Skip]:
        from cronjobs.reports import Skip  # noqa: PLC0415 - see reports.py
        params = {"definition_id": definition_id, "start": start, "end": end}
        return self._rows("skips_between", params, Skip)

    # -- execution ----------------------------------------------------------------------

    def finish_and_claim(self, outcomes: Sequence[Outcome], *, now: dt.datetime,
                         worker: str, limit: int, tick_id: int | None,
                         run_ids: Sequence[int] | None = None, handlers: Sequence[str] = ()
                         ) -> tuple[set[int], list[Claimed]]:
        """:meth:`finish_runs` and :meth:`claim_runs` in one transaction: see
        :meth:`pass_of_executor`."""
        recorded, _, claims = self.pass_of_executor(
            outcomes, (), now=now, worker=worker, limit=limit, tick_id=tick_id,
            run_ids=run_ids, handlers=handlers)
        return recorded, claims

    def pass_of_executor(self, outcomes: Sequence[Outcome], failing: Sequence[Outcome], *,
                         now: dt.datetime, worker: str, limit: int, tick_id: int | None,
                         run_ids: Sequence[int] | None = None, handlers: Sequence[str] = ()
                         ) -> tuple[set[int], dict[int, JobFailure | None], list[Claimed]]:
        """One pass of a tick's executor in one transaction, sent at once and read when
        the commit is in (one round trip, one flush of the write-ahead log): count the
        failures of ``failing`` (:meth:`record_job_failure`, in the order given), record
        ``outcomes`` (:meth:`finish_runs`) and, with ``limit``, claim up to that many
        runs (:meth:`claim_runs`). Returns the ids recorded, the failures counted and the
        runs claimed. When the claim conflicts with another worker's (see claim_runs), the
        whole transaction is undone and the outcomes are recorded on their own."""
        if limit > 0:
            def claim() -> Callable[[], list[Claimed]]:
                return self._claim_later(now=now, worker=worker, limit=limit, tick_id=tick_id,
                                         run_ids=run_ids, handlers=handlers, planned=True)
            with contextlib.suppress(Conflict):
                return self._pass(outcomes, failing, now=now, claim=claim)
        if not outcomes and not failing:
            return set(), {}, []
        return self._pass(outcomes, failing, now=now, claim=None)

    def _pass(self, outcomes: Sequence[Outcome], failing: Sequence[Outcome], *,
              now: dt.datetime, claim: Callable[[], Callable[[], list[Claimed]]] | None
              ) -> tuple[set[int], dict[int, JobFailure | None], list[Claimed]]:
        with _translated():
            with self._transaction_at_once():
                # SET LOCAL, until the transaction ends: the outcomes are written by id
                # too, never by reading a small table whole (see claim_plan)
                self._send("claim_plan", {"generic": self._prepares()}, prepare=True)
                counted = [(o.run_id, self._later("record_job_failure", {
                    "run_id": o.run_id, "token": o.token, "error": o.error, "now": now},
                    class_row(JobFailure), prepare=True)) for o in failing]
                finished = (self._later("finish_runs", _finish_params(outcomes, now),
                                        tuple_row, prepare=True) if outcomes else None)
                claimed = claim() if claim is not None else None
            failures: dict[int, JobFailure | None] = {}
            for run_id, rows in counted:
                got = rows()
                failures[run_id] = got[0] if got else None
            recorded = {row[0] for row in finished()} if finished is not None else set()
            return recorded, failures, claimed() if claimed is not None else []

    def definitions_due(self, *, now: dt.datetime) -> bool:
        """Whether a definition still has a slot due at ``now`` (after this tick's
        materialisation: one that another tick is materialising right now)."""
        return bool(self._values("definitions_due", {"now": now})[0])

    def reclaim_expired(self, *, now: dt.datetime, limit: int = 1000) -> list[Reclaimed]:
        """Runs whose lease expired before ``now`` go back to the queue (or die); their
        attempt is lost."""
        return self._rows("reclaim_expired", {"now": now, "limit": limit}, Reclaimed)

    def claim_runs(self, *, now: dt.datetime, worker: str, limit: int,
                   tick_id: int | None, run_ids: Sequence[int] | None = None,
                   handlers: Sequence[str] = ()) -> list[Claimed]:
        """Claim up to ``limit`` due runs: commands, and handler runs of ``handlers`` only
        (the ones this worker has loaded). Another worker claiming an exclusive run of the
        same job at the same moment makes the claim find nothing (the unique index refused
        the second one: try again later)."""
        try:
            # its own transaction, sent at once (BEGIN, the group locks, the plan, the
            # claim, COMMIT) and read when the commit is in: one round trip, as a lone
            # statement would be
            with _translated():
                with self._transaction_at_once():
                    rows = self._claim_later(now=now, worker=worker, limit=limit,
                                             tick_id=tick_id, run_ids=run_ids,
                                             handlers=handlers)
                return rows()
        except Conflict:
            return []

    def _claim_later(self, *, now: dt.datetime, worker: str, limit: int,
                     tick_id: int | None, run_ids: Sequence[int] | None,
                     handlers: Sequence[str], planned: bool = False
                     ) -> Callable[[], list[Claimed]]:
        """Send the statements of a claim inside an open transaction (``planned``: one in
        which claim_plan was sent already); the claimed rows are read by calling the result
        (after the pipeline, when there is one)."""
        params = {"now": now, "worker": worker, "limit": limit, "tick_id": tick_id,
                  "handlers": list(handlers)}
        # [group limit] lock_claimable_groups first, in the claim's transaction: the
        # claims of one limited group take turns, each counting what the one before
        # committed (see queries.sql)
        if run_ids is not None:  # `trigger --run`: these runs only, by id
            self._send("lock_claimable_groups", {"now": now})
            return self._later("claim_runs_by_id", params | {"run_ids": list(run_ids)},
                               class_row(Claimed), binary=True)
        # SET LOCAL, until the transaction ends: the group locks are planned with it too
        # (without statistics on job_runs they could otherwise read the whole queue)
        if not planned:
            self._send("claim_plan", {"generic": self._prepares()}, prepare=True)
        self._send("lock_claimable_groups", {"now": now}, prepare=True)
        # (in binary: half the time of parsing the rows' text, per run)
        return self._later("claim_runs", params | {"scan": claim_scan(limit)},
                           class_row(Claimed), binary=True, prepare=True)

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

    def record_job_failure(self, run_id: int, *, token: Any, error: str | None,
                           now: dt.datetime) -> JobFailure | None:
        """Count a failed attempt of the run this worker still holds (call it in the
        transaction that records the outcome, before :meth:`finish_runs`); None when the
        lease was lost: nothing was counted."""
        return self._row("record_job_failure", {"run_id": run_id, "token": token,
                                                 "error": error, "now": now}, JobFailure)

    def record_reclaimed_failure(self, definition_id: int, *, error: str | None,
                                 now: dt.datetime) -> JobFailure:
        """Count the lost attempt of a run reclaimed in this same transaction."""
        return self._one("record_reclaimed_failure", {
            "definition_id": definition_id, "error": error, "now": now}, JobFailure)

    # -- operating ------------------------------------------------------------------------

    def run_by_id(self, run_id: int, *, for_update: bool = False) -> tuple[Run, str] | None:
        from cronjobs.reports import JobRun  # noqa: PLC0415 - see reports.py
        query = "run_by_id_for_update" if for_update else "run_by_id"
        row = self._row(query, {"id": run_id}, JobRun)
        return (row, row.job) if row is not None else None

    def attempts_of_run(self, run_id: int) -> list[Attempt]:
        from cronjobs.reports import Attempt  # noqa: PLC0415 - see reports.py
        return self._rows("attempts_of_run", {"run_id": run_id}, Attempt)

    def attempts_of_runs(self, run_ids: Sequence[int]) -> list[Attempt]:
        """The attempts of several runs (by run, then attempt): one query for a page."""
        from cronjobs.reports import Attempt  # noqa: PLC0415 - see reports.py
        return self._rows("attempts_of_runs", {"run_ids": list(run_ids)}, Attempt)

    def requeue_run(self, run_id: int, *, attempts: int, now: dt.datetime,
                    by: str | None = None) -> Run:
        return self._one("requeue_run", {"id": run_id, "attempts": attempts, "by": by,
                                         "now": now}, Run)

    def acknowledge_run(self, run_id: int, *, by: str | None, now: dt.datetime) -> Run | None:
        return self._row("acknowledge_run", {"id": run_id, "by": by, "now": now}, Run)

    def acknowledge_dead_runs(self, definition_id: int, *, by: str | None, now: dt.datetime
                              ) -> list[Run]:
        rows = self._rows("acknowledge_dead_runs", {"definition_id": definition_id, "by": by,
                                                    "now": now}, Run)
        return sorted(rows, key=lambda run: run.id)

    def insert_manual_run(self, *, definition_id: int, scheduled_for: dt.datetime,
                          trigger: Trigger, payload: dict[str, Any] | None, max_attempts: int,
                          exclusive: bool, now: dt.datetime, retry_of: int | None = None
                          ) -> Run:
        return self._one("insert_manual_run", {
            "now": now, "definition_id": definition_id, "scheduled_for": scheduled_for,
            "trigger": trigger.value, "payload": Jsonb(payload) if payload is not None else None,
            "max_attempts": max_attempts, "exclusive": exclusive, "retry_of": retry_of,
        }, Run)

    def cancel_waiting_run(self, run_id: int, *, now: dt.datetime) -> Run | None:
        return self._row("cancel_waiting_run", {"id": run_id, "now": now}, Run)

    def request_cancel_run(self, run_id: int, *, now: dt.datetime) -> Run | None:
        return self._row("request_cancel_run", {"id": run_id, "now": now}, Run)

    def list_runs(self, *, name: str | None, statuses: Sequence[str] | None,
                  since: dt.datetime | None, limit: int) -> list[tuple[Run, str]]:
        from cronjobs.reports import JobRun  # noqa: PLC0415 - see reports.py
        rows = self._rows("list_runs", {"name": name, "statuses": list(statuses) if statuses
                                        else None, "since": since, "limit": limit}, JobRun)
        return [(row, row.job) for row in rows]

    def health(self, now: dt.datetime) -> Health:
        from cronjobs.reports import Health  # noqa: PLC0415 - see reports.py
        return self._one("health", {"now": now}, Health)

    def waiting_for_handlers(self, *, now: dt.datetime, handlers: Sequence[str] | None,
                             since: dt.datetime | None = None,
                             definition_id: int | None = None) -> list[WaitingRuns]:
        """Due handler runs waiting for a handler that is missing, per handler (``handler``,
        ``runs``, ``oldest``): missing from ``handlers``, or with None, registered by no tick
        started after ``since``."""
        return self._rows("waiting_for_handlers", {
            "now": now, "handlers": list(handlers) if handlers is not None else None,
            "since": since, "definition_id": definition_id}, WaitingRuns)

    def running_runs(self) -> list[RunningRun]:
        from cronjobs.reports import RunningRun  # noqa: PLC0415 - see reports.py
        return self._rows("running_runs", None, RunningRun)

    def job_stats(self, *, since: dt.datetime) -> list[JobStats]:
        """Per job numbers; runs by status and retries count the runs not finished yet and
        those finished since ``since``."""
        from cronjobs.reports import JobStats  # noqa: PLC0415 - see reports.py
        return self._rows("job_stats", {"since": since}, JobStats)

    def dashboard_jobs(self, *, after: str, search: str | None, limit: int, strip: int
                       ) -> list[DashboardJob]:
        """A page of jobs in name order after ``after``, each with its ``strip`` latest runs
        (``run_ids``, ``run_statuses``, ``run_slots``, ``run_times``: oldest first)."""
        from cronjobs.reports import DashboardJob  # noqa: PLC0415 - see reports.py
        return self._rows("dashboard_jobs", {"after": after, "search": search,
                                             "limit": limit, "strip": strip}, DashboardJob)

    def count_jobs(self, *, search: str | None) -> int:
        values = self._values("count_jobs", {"search": search})
        return int(values[0]) if values else 0

    def prune_runs(self, *, cutoff: dt.datetime, keep_last: int, batch: int,
                   after: tuple[dt.datetime, int] | None = None
                   ) -> tuple[int, tuple[dt.datetime, int] | None]:
        """One batch: (runs deleted, the position of the last one, to give as ``after`` to
        the next batch; None when none was deleted)."""
        after_at, after_id = after or (dt.datetime.min.replace(tzinfo=dt.UTC), 0)
        rows = self._rows("prune_runs", {"cutoff": cutoff, "keep_last": keep_last,
                                         "batch": batch, "after_at": after_at,
                                         "after_id": after_id}, Pruned)
        last = max(((row.finished_at, row.id) for row in rows), default=None)
        return len(rows), last

    def count_prunable_runs(self, *, cutoff: dt.datetime, keep_last: int) -> int:
        return int(self._values("count_prunable_runs", {"cutoff": cutoff,
                                                        "keep_last": keep_last})[0])

    def prune_skips(self, *, cutoff: dt.datetime, batch: int) -> int:
        return len(self._values("prune_skips", {"cutoff": cutoff, "batch": batch}))

    def prune_ticks(self, *, cutoff: dt.datetime, batch: int) -> int:
        return len(self._values("prune_ticks", {"cutoff": cutoff, "batch": batch}))

    # -- notifications (the worker) --------------------------------------------------------

    def listen_for_triggers(self) -> None:
        self._send("listen_trigger")

    def notify_trigger(self) -> None:
        self._send("notify_trigger")

    def wait_for_notification(self, timeout: float) -> bool:
        """Whether a notification arrived within ``timeout`` seconds."""
        with _translated():
            for _ in self.conn.notifies(timeout=timeout, stop_after=1):
                return True
        return False

    def definition_history(self, name: str) -> list[Definition]:
        return self._rows("definition_history", {"name": name}, Definition)

    # -- one-off runs (trigger --at) ---------------------------------------------------------

    def insert_one_off_run(self, *, definition_id: int, at: dt.datetime,
                           payload: dict[str, Any] | None, max_attempts: int, exclusive: bool,
                           now: dt.datetime) -> Run:
        return self._one("insert_one_off_run", {
            "definition_id": definition_id, "at": at, "max_attempts": max_attempts,
            "payload": Jsonb(payload) if payload is not None else None,
            "exclusive": exclusive, "now": now}, Run)

    def due_one_off_runs(self, *, now: dt.datetime, limit: int) -> list[DueOneOff]:
        return self._rows("due_one_off_runs", {"now": now, "limit": limit}, DueOneOff)

    def release_one_off_runs(self, releases: Sequence[tuple[int, bool, str | None]], *,
                             now: dt.datetime) -> int:
        """(run id, exclusive, error): queued when error is None, else cancelled."""
        return self._count("release_one_off_runs", {
            "ids": [r[0] for r in releases], "exclusive": [r[1] for r in releases],
            "errors": [r[2] for r in releases], "now": now})

    def one_off_runs_of(self, definition_id: int) -> list[Run]:
        return self._rows("one_off_runs_of", {"definition_id": definition_id}, Run)

    # -- groups (limits across jobs) ----------------------------------------------------------

    def set_group_limit(self, name: str, *, max_running: int, now: dt.datetime) -> None:
        self._send("set_group_limit", {"name": name, "max_running": max_running, "now": now})

    def remove_group_limit(self, name: str) -> bool:
        return bool(self._values("remove_group_limit", {"name": name}))

    def group_usage(self, *, now: dt.datetime, name: str | None = None) -> list[GroupUsage]:
        from cronjobs.reports import GroupUsage  # noqa: PLC0415 - see reports.py
        return self._rows("group_usage", {"now": now, "name": name}, GroupUsage)

    def group_jobs(self, name: str) -> list[str]:
        return [str(value) for value in self._values("group_jobs", {"name": name})]

    # -- jobs as code (apply) ---------------------------------------------------------------

    def lock_apply(self) -> None:
        self._send("apply_lock")

    def adopt_definition(self, definition_id: int, *, source: str, now: dt.datetime
                         ) -> Definition:
        return self._one("adopt_definition", {"id": definition_id, "source": source,
                                              "now": now}, Definition)


def _finish_params(outcomes: Sequence[Outcome], now: dt.datetime) -> dict[str, Any]:
    """The parameters of finish_runs: the outcomes as one JSON array."""
    return {"now": now, "outcomes": Jsonb([{
        "id": o.run_id, "token": None if o.token is None else str(o.token),
        "status": o.status.value,
        "outcome": o.outcome.value, "exit_code": o.exit_code, "error": o.error,
        "output_tail": o.output_tail, "result": o.result,
        "retry_secs": o.retry_in.total_seconds() if o.retry_in else 0.0,
        "extra_attempts": o.extra_attempts} for o in outcomes])}


@contextmanager
def _translated() -> Iterator[None]:
    """Translate psycopg errors into the cronjobs error tree."""
    try:
        yield
    except CronjobsError:
        raise
    except pgerrors.UndefinedTable as exc:
        raise SchemaNotReady(f"{_first_line(exc)}: run `cronjobs migrate`") from exc
    except pgerrors.UniqueViolation as exc:
        raise Conflict(f"conflict: {_first_line(exc)}") from exc
    except pgerrors.IntegrityError as exc:
        raise InvalidDefinition(f"rejected by the database: {_first_line(exc)}") from exc
    except psycopg.OperationalError as exc:
        raise DatabaseUnavailable(f"database error: {_first_line(exc)}") from exc
    except psycopg.Error as exc:
        raise CronjobsError(f"database error: {_first_line(exc)}") from exc


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    return scrub(text[0]) if text else type(exc).__name__
