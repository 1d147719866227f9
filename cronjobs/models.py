"""The rows the engine decides on and writes — definitions, runs, attempts' outcomes,
skips, ticks, leases — as frozen dataclasses, and the enums that mirror the schema's CHECK
constraints. The read-only views built for operators (`status`, `list`, `show`, the
dashboard) are :mod:`cronjobs.reports`."""

from __future__ import annotations

import datetime as dt
import uuid
from dataclasses import dataclass
from enum import StrEnum
from typing import Any, NamedTuple


class Kind(StrEnum):
    HANDLER = "handler"
    COMMAND = "command"


class Catchup(StrEnum):
    LATEST = "latest"
    ALL = "all"
    NONE = "none"


class Overlap(StrEnum):
    SKIP = "skip"
    QUEUE = "queue"
    ALLOW = "allow"
    REPLACE = "replace"


class Trigger(StrEnum):
    SCHEDULE = "schedule"
    MANUAL = "manual"
    RETRY = "retry"
    BACKFILL = "backfill"


class RunStatus(StrEnum):
    SCHEDULED = "scheduled"  # a one-off run waiting for its time (trigger --at)
    QUEUED = "queued"
    RUNNING = "running"
    FAILED = "failed"
    SUCCEEDED = "succeeded"
    DEAD = "dead"
    CANCELLED = "cancelled"


# What a run's status says of it, stated once (every view and operation asks these):
# waiting in the queue for a worker (the SQL function cronjobs_run_waits, the claim's index);
# to run later (a one-off run waiting for its time too: it has a next attempt); finished
# for good (it leaves the queue).
RUN_WAITS = frozenset({RunStatus.QUEUED, RunStatus.FAILED})
RUN_PENDING = frozenset({RunStatus.SCHEDULED, RunStatus.QUEUED, RunStatus.FAILED})
RUN_FINAL = frozenset({RunStatus.SUCCEEDED, RunStatus.DEAD, RunStatus.CANCELLED})


class JobState(StrEnum):
    """A job's state, as every view shows it (:func:`job_state`)."""

    ACTIVE = "active"
    PAUSED = "paused"
    INVALID = "invalid"  # its stored schedule cannot be evaluated
    REMOVED = "removed"  # removed by `apply` (its history stays)


def job_state(*, removed: bool, invalid: bool, paused: bool) -> JobState:
    """A job's state, the one rule: removed over invalid over paused over active."""
    if removed:
        return JobState.REMOVED
    if invalid:
        return JobState.INVALID
    if paused:
        return JobState.PAUSED
    return JobState.ACTIVE


# How a run in each status reads in a sentence: "run 4 of backup succeeded".
STATUS_PHRASES: dict[str, str] = {
    RunStatus.SCHEDULED: "is scheduled", RunStatus.QUEUED: "is queued",
    RunStatus.RUNNING: "is running", RunStatus.FAILED: "failed",
    RunStatus.SUCCEEDED: "succeeded", RunStatus.DEAD: "is dead",
    RunStatus.CANCELLED: "was cancelled",
}


def status_phrase(status: str) -> str:
    """``succeeded``, ``is running``: a run's status as the rest of a sentence."""
    return STATUS_PHRASES.get(status, f"is {status}")


class AttemptOutcome(StrEnum):
    RUNNING = "running"
    SUCCEEDED = "succeeded"
    FAILED = "failed"
    TIMED_OUT = "timed_out"
    LOST = "lost"
    INTERRUPTED = "interrupted"
    CANCELLED = "cancelled"


class NotifyEvent(StrEnum):
    """What a webhook notification is about (job_notifications.event, --notify-on)."""

    DEAD = "dead"  # a run exhausted its attempts
    FAILURE = "failure"  # any failed attempt (a retry may follow)
    RECOVERY = "recovery"  # a success after the job's previous run had failed or died


class DeliveryStatus(StrEnum):
    """Where a webhook notification stands (job_notifications.status, the outbox)."""

    PENDING = "pending"  # in the outbox: tried again later, until its deadline
    SENT = "sent"  # the receiver took it (a 2xx)
    FAILED = "failed"  # refused for good (an HTTP 4xx but 408, 425, 429): not tried again
    EXPIRED = "expired"  # its deadline passed before a receiver took it: given up


class TickStatus(StrEnum):
    RUNNING = "running"
    FINISHED = "finished"
    FAILED = "failed"
    INTERRUPTED = "interrupted"
    LOST = "lost"  # it went away before recording its end; closed by a later tick


class SkipReason(StrEnum):
    MISSED_DEADLINE = "missed_deadline"
    COALESCED = "coalesced"
    CATCHUP_NONE = "catchup_none"
    CATCHUP_LIMIT = "catchup_limit"
    OVERLAP = "overlap"
    PAUSED = "paused"
    INVALID = "invalid"
    SUPERSEDED = "superseded"


@dataclass(frozen=True)
class DefinitionSpec:
    """What `cronjobs define` asks for: the whole desired definition of one job, a
    job_definitions row's columns that are no state (built by ``core.spec.build_spec``,
    which applies the defaults of ``core.spec.FIELDS``)."""

    name: str
    schedule: str
    timezone: str
    kind: Kind
    handler: str | None
    command: str | None
    payload: dict[str, Any]
    catchup: Catchup
    catchup_limit: int
    starting_deadline: dt.timedelta | None
    overlap: Overlap
    max_attempts: int
    backoff: dt.timedelta
    backoff_max: dt.timedelta
    timeout: dt.timedelta | None
    lease: dt.timedelta
    alert_command: str | None
    alert_on_failure: bool
    pause_after_failures: int | None
    group_name: str | None  # the group whose limit applies to its runs
    notify_urls: tuple[str, ...]  # webhook receivers (secrets: shown masked, by
    # cronjobs.validation.mask_url)
    notify_on: tuple[NotifyEvent, ...]
    # how long its finished runs are kept: succeeded and cancelled ones, dead ones
    # (None: the global retention, `cronjobs retention`)
    keep_succeeded: dt.timedelta | None
    keep_failed: dt.timedelta | None


@dataclass(frozen=True)
class Definition(DefinitionSpec):
    """A row of job_definitions: its definition (the columns of DefinitionSpec, which
    ``define`` writes) and the job's state (the columns below)."""

    id: int
    consecutive_failures: int
    paused_at: dt.datetime | None
    paused_until: dt.datetime | None
    pause_note: str | None
    invalid_reason: str | None
    removed_at: dt.datetime | None
    source: str | None  # NULL: made by hand; else the `apply` source that owns it
    cursor_at: dt.datetime
    next_due_at: dt.datetime | None
    schedule_since: dt.datetime
    created_at: dt.datetime
    updated_at: dt.datetime
    last_succeeded_at: dt.datetime | None  # to within a minute (see schema.sql)
    last_failed_at: dt.datetime | None

    def __post_init__(self) -> None:  # text columns arrive as text, text[] ones as lists
        object.__setattr__(self, "kind", Kind(self.kind))
        object.__setattr__(self, "catchup", Catchup(self.catchup))
        object.__setattr__(self, "overlap", Overlap(self.overlap))
        object.__setattr__(self, "notify_urls", tuple(self.notify_urls or ()))
        object.__setattr__(self, "notify_on", tuple(NotifyEvent(e) for e in self.notify_on or ()))

    @property
    def paused(self) -> bool:
        return self.paused_at is not None

    @property
    def target(self) -> str:
        """What the job runs, as shown to users."""
        if self.kind == Kind.COMMAND:
            return f"command: {self.command}"
        return f"handler: {self.handler}"

    @property
    def state(self) -> JobState:
        """Its state as stored (:func:`cronjobs.core.facts.job_info` also finds a schedule
        that cannot be evaluated invalid)."""
        return job_state(removed=self.removed_at is not None,
                         invalid=self.invalid_reason is not None,
                         paused=self.paused_at is not None)


@dataclass(frozen=True)
class UpsertedDefinition(Definition):
    """A definition as ``upsert_definition`` (`define`) wrote it: whether the row is new."""

    created: bool


@dataclass(frozen=True)
class Run:
    """A row of job_runs."""

    id: int
    definition_id: int
    scheduled_for: dt.datetime
    trigger: str
    status: str
    payload: dict[str, Any] | None
    attempt: int
    max_attempts: int
    exclusive: bool
    eligible_at: dt.datetime
    lease_owner: str | None
    lease_token: Any
    lease_expires_at: dt.datetime | None
    heartbeat_at: dt.datetime | None
    cancel_requested_at: dt.datetime | None
    started_at: dt.datetime | None
    finished_at: dt.datetime | None
    exit_code: int | None
    error: str | None
    output_tail: str | None
    result: Any
    retry_count: int
    retried_at: dt.datetime | None
    retry_of: int | None
    tick_id: int | None
    created_at: dt.datetime
    updated_at: dt.datetime
    acknowledged_at: dt.datetime | None
    acknowledged_by: str | None
    output_bytes: int | None  # bytes the current attempt printed so far (live)
    stage: str  # where the row lives: 'queue' (not finished), 'history' or 'kept'
    retire_at: dt.datetime | None  # when retention drops it (None while unfinished)

    @property
    def unacknowledged(self) -> bool:
        """A dead run nobody acknowledged since it died (:func:`dead_unacknowledged`)."""
        return dead_unacknowledged(self.status, self.acknowledged_at, self.finished_at)


def dead_unacknowledged(status: str, acknowledged_at: dt.datetime | None,
                        finished_at: dt.datetime | None) -> bool:
    """A dead run nobody acknowledged since it died (it keeps `status --check` red): an
    acknowledgement applies to the death it acknowledged. The Python twin of the SQL
    function every query calls, cronjobs_run_dead_unacknowledged (schema.sql); a test
    checks that the two agree."""
    return status == RunStatus.DEAD and (
        acknowledged_at is None
        or (finished_at is not None and acknowledged_at < finished_at))


@dataclass(frozen=True)
class NotifyConfig:
    """A job's webhook receivers (``notify_config``): secrets, shown masked."""

    id: int
    name: str
    notify_urls: list[str]
    notify_on: list[str]


@dataclass(frozen=True)
class Outgoing:
    """A delivery of the outbox its taker is to try (``enqueue_deliveries``,
    ``claim_deliveries``): the receiver in full (a secret) and the document to POST."""

    id: int
    delivery_id: uuid.UUID  # the Cronjobs-Delivery-Id header: receivers dedupe by it
    run_id: int
    url: str
    body: str
    rounds: int  # times taken before this one
    expires_at: dt.datetime


@dataclass(frozen=True)
class NewDelivery:
    """A notification of a run to one receiver, for the outbox."""

    run_id: int
    attempt: int
    event: str
    target: str  # the receiver, masked
    url: str
    body: str
    # the lease of the run's holder, which fences the write (enqueue_deliveries); None for
    # a run reclaimed in the same transaction
    lease_token: uuid.UUID | None = None


@dataclass(frozen=True)
class DeliveryOutcome:
    """How one round of tries of a delivery went."""

    id: int
    sent: bool
    retry: bool  # not sent, and a later round may do better
    tries: int
    http_status: int | None
    error: str | None


@dataclass(frozen=True)
class DueOneOff:
    """A one-off run whose time has come (``due_one_off_runs``), with its job's overlap."""

    id: int
    definition_id: int
    scheduled_for: dt.datetime
    name: str
    overlap: str


@dataclass(frozen=True)
class DueDefinition:
    """What deciding a definition's due slots reads of its row: a lighter row than
    Definition for the tick, which loads thousands at a time. The fields are in the order
    of the columns the store selects (``due_definitions``)."""

    id: int
    name: str
    schedule: str
    timezone: str
    catchup: str
    catchup_limit: int
    starting_deadline: dt.timedelta | None
    overlap: str
    max_attempts: int
    paused_at: dt.datetime | None
    paused_until: dt.datetime | None
    pause_note: str | None
    cursor_at: dt.datetime
    next_due_at: dt.datetime | None


@dataclass(frozen=True)
class NewRun:
    """A run about to be materialised."""

    definition_id: int
    scheduled_for: dt.datetime
    trigger: Trigger
    max_attempts: int
    eligible_at: dt.datetime
    exclusive: bool = True


@dataclass(frozen=True)
class NewSkip:
    """Slots decided not to run: one slot, or a range of them."""

    definition_id: int
    first_slot: dt.datetime
    last_slot: dt.datetime
    slot_count: int | None
    reason: SkipReason
    detail: str | None = None


@dataclass(frozen=True)
class Advance:
    """A definition's cursor moving forward after its slots were decided."""

    definition_id: int
    cursor_at: dt.datetime
    next_due_at: dt.datetime | None
    invalid_reason: str | None = None
    resumed: bool = False


def _member(enum: type[StrEnum], value: Any) -> Any:
    """``value`` as a member of ``enum``, or as it is when it is none."""
    try:
        return enum(value)
    except ValueError:
        return value


class ClaimKey(NamedTuple):
    """A run's place in the claim's order (job_runs_queue_claim_idx): backfilled runs after
    every other, then by eligible_at and id. Ordered as tuples are."""

    late: bool
    eligible_at: dt.datetime
    id: int


@dataclass(frozen=True)
class Claimed:
    """A run this worker just claimed, with what it needs to run it."""

    id: int
    definition_id: int
    scheduled_for: dt.datetime
    trigger: Trigger
    attempt: int
    max_attempts: int
    eligible_at: dt.datetime  # (with trigger and id: its place in the claim's order)
    lease_token: Any
    lease_owner: str
    started_at: dt.datetime
    payload: dict[str, Any]
    name: str
    kind: Kind
    command: str | None
    handler: str | None
    timeout: dt.timedelta | None
    lease: dt.timedelta
    backoff: dt.timedelta
    backoff_max: dt.timedelta
    # whether the job has webhook receivers (looked up only then: see execution/observe.py)
    notifies: bool

    def __post_init__(self) -> None:  # the columns arrive as text
        # (a value the schema's CHECK refuses, in a row written with it dropped, stays as
        # it is: that run fails alone, see execution/outcome.py, never its whole batch)
        object.__setattr__(self, "kind", _member(Kind, self.kind))
        object.__setattr__(self, "trigger", _member(Trigger, self.trigger))

    @property
    def key(self) -> ClaimKey:
        """Its place in the claim's order."""
        return ClaimKey(self.trigger == Trigger.BACKFILL, self.eligible_at, self.id)


@dataclass(frozen=True)
class Outcome:
    """How one attempt ended, as recorded: the run's next status and the attempt's details."""

    run_id: int
    token: Any  # the lease token the attempt ran under (the fence)
    status: RunStatus
    outcome: AttemptOutcome
    exit_code: int | None
    error: str | None
    output_tail: str | None
    result: Any
    retry_in: dt.timedelta | None = None
    extra_attempts: int = 0


@dataclass(frozen=True)
class TickStarted:
    """A tick's row just inserted: its id and its instant, and the earlier ticks it closed
    as lost (ids, workers, instants; None for none)."""

    id: int
    tick_at: dt.datetime
    lost_ids: list[int] | None
    lost_workers: list[str] | None
    lost_tick_ats: list[dt.datetime] | None


@dataclass(frozen=True)
class LeaseHeld:
    """A lease a heartbeat renewed, and whether the run was asked to stop."""

    id: int
    cancel_requested: bool


@dataclass(frozen=True)
class Reclaimed:
    """A run whose expired lease a tick took over: back to the queue, or dead."""

    id: int
    status: RunStatus
    definition_id: int
    lease_owner: str | None
    error: str | None
    scheduled_for: dt.datetime
    attempt: int
    job: str

    def __post_init__(self) -> None:  # the column arrives as text
        object.__setattr__(self, "status", RunStatus(self.status))


@dataclass(frozen=True)
class JobFailure:
    """A failed attempt counted against its job: what alerting needs to know."""

    name: str
    alert_command: str | None
    alert_on_failure: bool
    just_paused: bool
    pause_note: str | None


@dataclass(frozen=True)
class WaitingRuns:
    """Due runs of a handler that no tick (or not this one) has loaded: they wait, attempts
    untouched."""

    handler: str
    runs: int
    oldest: dt.datetime


@dataclass(frozen=True)
class LostTick:
    """A tick that went away before recording its end, closed by a later one."""

    id: int
    worker: str
    tick_at: dt.datetime
