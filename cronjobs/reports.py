"""Read-only views for operators: the rows of the queries behind `status`, `metrics`,
`list`, `show`, `logs`, `explain`, `group` and the dashboard. The engine decides nothing on
them and writes none of them; its own rows, the ones it decides on and writes, are
:mod:`cronjobs.models`. Both are frozen dataclasses built by psycopg's ``class_row``."""

from __future__ import annotations

import datetime as dt
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from cronjobs.models import Definition, JobState, Run, job_state


@dataclass(frozen=True)
class Attempt:
    """A row of job_attempts; or the attempt running now, read from its run (its row is
    written when it ends: ``id`` is None until then)."""

    id: int | None
    run_id: int
    attempt: int
    worker: str
    lease_token: Any
    started_at: dt.datetime
    finished_at: dt.datetime | None
    outcome: str
    exit_code: int | None
    error: str | None
    output_tail: str | None
    stage: str  # its run's (see Run)
    retire_at: dt.datetime | None


@dataclass(frozen=True)
class GroupUsage:
    """A group of jobs: its limit (None: none), its jobs, its runs holding a lease, and its
    due runs that wait."""

    name: str
    max_running: int | None
    jobs: int
    running: int
    waiting: int

    @property
    def full(self) -> bool:
        """No free slot: its waiting runs wait for the group."""
        return self.max_running is not None and self.running >= self.max_running


@dataclass(frozen=True)
class Delivery:
    """A row of job_notifications: one webhook notification about a run to one receiver,
    and where it stands (``status``: pending, sent, failed, expired)."""

    id: int
    run_id: int
    attempt: int  # the run's attempt it is about
    event: str
    target: str  # the receiver's URL, masked
    status: str
    tries: int  # HTTP requests so far
    http_status: int | None  # of the last one
    error: str | None  # of the last one
    sent_at: dt.datetime  # the last try (when it was delivered, for 'sent')
    delivery_id: uuid.UUID | None  # the Cronjobs-Delivery-Id header (None: before the outbox)
    rounds: int  # delivery attempts so far (each a short series of tries)
    next_attempt_at: dt.datetime | None  # pending: when it is tried again
    expires_at: dt.datetime | None  # pending: when it is given up

    def standing(self, at: Callable[[dt.datetime | None], str]) -> str:
        """Where it stands, in words (``show`` and the dashboard's run page), its times
        written by ``at``."""
        tries = f"{self.tries} tr{'y' if self.tries == 1 else 'ies'}"
        rounds = f"{self.rounds} attempt{'' if self.rounds == 1 else 's'}"
        last = (f"HTTP {self.http_status}" if self.http_status is not None else "")
        if self.error and self.error != last:
            last = f"{last}: {self.error}" if last else self.error
        if self.status == "sent":
            return (f"sent {at(self.sent_at)} after {tries}"
                    + (f" in {rounds}" if self.rounds > 1 else "")
                    + (f", {last}" if last else ""))
        if self.status == "pending":
            return (f"pending, {rounds} ({tries}) so far, next attempt "
                    f"{at(self.next_attempt_at)}, given up {at(self.expires_at)}"
                    + (f"; last error: {last}" if last else ""))
        if self.status == "expired":
            return (f"expired {at(self.sent_at)} (given up at its deadline) after {rounds} "
                    f"({tries})" + (f"; last error: {last}" if last else ""))
        return (f"failed {at(self.sent_at)} after {tries}, not tried again"
                + (f"; last error: {last}" if last else ""))


@dataclass(frozen=True)
class ListedDefinition(Definition):
    """A definition as ``list_definitions`` returns it: with its latest run."""

    last_run_status: str | None
    last_run_at: dt.datetime | None


@dataclass(frozen=True)
class LiveOutput:
    """What ``cronjobs logs`` reads of a run (``live_output``)."""

    id: int
    status: str
    attempt: int
    max_attempts: int
    output_tail: str | None
    output_bytes: int | None
    error: str | None
    exit_code: int | None
    eligible_at: dt.datetime
    finished_at: dt.datetime | None
    job: str


@dataclass(frozen=True)
class DashboardJob(Definition):
    """A definition as ``dashboard_jobs`` returns it: with its latest runs, oldest first
    (each array None when it has none)."""

    run_ids: list[int] | None
    run_statuses: list[str] | None
    run_slots: list[dt.datetime] | None
    run_times: list[dt.datetime] | None


@dataclass(frozen=True)
class JobRun(Run):
    """A run with its job's name, and when that job was removed (None: it was not): every
    view marks a removed job's runs (``run_by_id``, ``list_runs``, :meth:`of`)."""

    job: str
    job_removed_at: dt.datetime | None

    @classmethod
    def of(cls, run: Run, definition: Definition) -> JobRun:
        """``run`` of the job ``definition`` (the definition it belongs to)."""
        return cls.named(run, definition.name, definition.removed_at)

    @classmethod
    def named(cls, run: Run, job: str, removed_at: dt.datetime | None) -> JobRun:
        """``run`` of job ``job``, removed at ``removed_at`` (None: it was not)."""
        return cls(**vars(run), job=job, job_removed_at=removed_at)


@dataclass(frozen=True)
class DefinitionSummary:
    """A definition with its latest run, as `cronjobs list` shows it."""

    definition: Definition
    last_run_status: str | None
    last_run_at: dt.datetime | None


@dataclass(frozen=True)
class Skip:
    """A row of job_skips: slots decided but not run, and why."""

    id: int
    definition_id: int
    first_slot: dt.datetime
    last_slot: dt.datetime
    slot_count: int | None
    reason: str
    detail: str | None
    tick_id: int | None
    decided_at: dt.datetime


@dataclass(frozen=True)
class Health:
    """The installation's numbers at an instant (``status``, ``metrics``)."""

    last_tick_at: dt.datetime | None
    last_tick_worker: str | None
    last_tick_status: str | None
    ticks_last_hour: int
    backlog: int
    backlog_oldest: dt.datetime | None
    running: int
    failed_last_day: int
    dead_last_day: int
    jobs: int | None  # None: not counted (the server's verdict, which shows no count)
    lost_ticks_last_day: int
    last_lost_tick_worker: str | None
    last_lost_tick_at: dt.datetime | None


@dataclass(frozen=True)
class StartLateness:
    """How late runs started (started_at - scheduled_for, in seconds) over the last hour and
    the last day before an instant: p50 and p99 of the runs started in each (None: no run
    started). Scheduled and manual runs, on their first attempt (see start_lateness in
    db/queries/reports.sql)."""

    hour_runs: int
    hour_p50: float | None
    hour_p99: float | None
    day_runs: int
    day_p50: float | None
    day_p99: float | None
    # the instant the windows end at (what the figures are "as of"); not part of the figures
    at: dt.datetime | None = field(default=None, compare=False)


@dataclass(frozen=True)
class RunningRun:
    """A run held by a worker, as ``status`` lists it."""

    id: int
    job: str
    attempt: int
    lease_owner: str | None
    started_at: dt.datetime | None
    heartbeat_at: dt.datetime | None
    lease_expires_at: dt.datetime
    cancel_requested_at: dt.datetime | None
    job_removed_at: dt.datetime | None  # its job was removed (and asked it to stop) then


@dataclass(frozen=True)
class JobHealth:
    """One job's health for ``status`` and ``/healthz`` (``job_health``): what the
    definition knows, and its dead runs nobody acknowledged. ``last_success_at`` is
    job_definitions.last_succeeded_at: to within LAST_SUCCESS_PRECISION of the truth."""

    id: int
    name: str
    schedule: str
    timezone: str
    created_at: dt.datetime
    schedule_since: dt.datetime
    paused_at: dt.datetime | None
    invalid_reason: str | None
    last_success_at: dt.datetime | None
    dead_unacknowledged: int
    latest_dead_id: int | None
    cursor_at: dt.datetime  # every slot up to it is decided (materialisation)
    next_due_at: dt.datetime | None  # its first slot after the cursor

    @property
    def state(self) -> JobState:
        """Its state (a job of the verdict is never removed; ``invalid_reason`` is also set
        when its schedule cannot be evaluated)."""
        return job_state(removed=False, invalid=self.invalid_reason is not None,
                         paused=self.paused_at is not None)


# A finish writes a job's last_succeeded_at at most once a minute (finish_runs): its latest
# success finished no earlier than it, and less than this after it.
LAST_SUCCESS_PRECISION = dt.timedelta(minutes=1)


@dataclass(frozen=True)
class HealthSchedule:
    """A schedule the verdict evaluates (``health_schedules``): ``name`` only for one with
    an H field, whose slots differ per job."""

    schedule: str
    timezone: str
    name: str | None


@dataclass(frozen=True)
class JobVerdict(JobHealth):
    """One job the verdict judged (``job_problems``), with its last success exact where the
    definition's left the answer open; and, on every row, the counts of all the jobs with
    a problem (not only the rows returned)."""

    # the slot before the job's latest, when its last success is older (else None)
    overdue_since: dt.datetime | None
    overdue: bool
    problem: bool
    jobs_with_problems: int
    dead_jobs: int
    dead_runs: int
    invalid_jobs: int
    overdue_jobs: int


@dataclass(frozen=True)
class JobStats(JobHealth):
    """One job's numbers for ``metrics`` in detail (``job_stats``): its last success exact,
    its last run's duration and lateness, its recent runs by status."""

    last_duration: dt.timedelta | None
    last_lateness: dt.timedelta | None
    runs_by_status: dict[str, int]
    retries: int


@dataclass(frozen=True)
class HotTable:
    """A hot table (job_runs_queue, job_attempts_queue) as the statistics views see it
    (``hot_tables``)."""

    name: str
    live: int
    dead: int
    last_autovacuum: dt.datetime | None
    last_vacuum: dt.datetime | None
    autovacuum_count: int


@dataclass(frozen=True)
class XminHolder:
    """Something that holds back vacuum (``xmin_holders``). ``kind``: 'session',
    'prepared' (a prepared transaction: ``name`` is its gid), 'replication_slot' or
    'replication_slot_catalog' (``name`` is the slot's; the latter holds back the system
    catalogs only). ``query``: the first 80 characters of a session's query. ``since``:
    when its transaction began (None when PostgreSQL does not say: slots, WAL senders)."""

    kind: str
    pid: int | None
    name: str | None
    usename: str | None
    application_name: str | None
    client_addr: str | None
    state: str | None
    query: str | None
    xid_age: int
    since: dt.datetime | None


@dataclass(frozen=True)
class HistoryStorage:
    """The partitions of job_runs and job_attempts (``history_storage``): the history's days,
    the oldest of them, the bytes of each stage, and the rows in the default partitions
    (counted up to a cap)."""

    run_partitions: int
    attempt_partitions: int
    oldest_partition: str | None
    oldest_from: dt.datetime | None
    oldest_until: dt.datetime | None
    queue_bytes: int
    history_bytes: int
    kept_bytes: int
    default_runs: int
    default_attempts: int
    default_oldest_finished_at: dt.datetime | None


@dataclass(frozen=True)
class ForecastGroup:
    """Jobs the forecast reads together (``forecast_jobs``): those sharing a schedule as
    written, a zone, a kind and a pause (with H, each job's name then decides its fields).
    ``paused_at``: the latest pause among them (None: none is paused)."""

    schedule: str
    timezone: str
    kind: str
    paused_at: dt.datetime | None
    paused_until: dt.datetime | None
    names: list[str]
    ids: list[int]


@dataclass(frozen=True)
class OneOffRun:
    """A one-off run (`trigger --at`) waiting for its time (``forecast_one_off_runs``)."""

    definition_id: int
    name: str
    kind: str
    at: dt.datetime


@dataclass(frozen=True)
class BurstRate:
    """How fast one run mode (a job kind) drained the slots many runs shared
    (``run_capacity``): ``bursts`` such slots, ``runs`` runs in them (``largest`` in the
    biggest), started over ``seconds`` in all (from each slot's first start to its last)."""

    kind: str
    bursts: int
    runs: int
    largest: int
    seconds: float | None


@dataclass(frozen=True)
class TypicalRunTime:
    """A job's median run time over its last succeeded runs (``typical_run_times``)."""

    definition_id: int
    name: str
    runs: int
    seconds: float
