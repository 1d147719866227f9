"""Frozen rows and the enums that mirror the schema's CHECK constraints."""

from __future__ import annotations

import datetime as dt
import threading
from dataclasses import dataclass, field, fields
from enum import StrEnum
from typing import Any, dataclass_transform


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
    QUEUED = "queued"
    RUNNING = "running"
    FAILED = "failed"
    SUCCEEDED = "succeeded"
    DEAD = "dead"
    CANCELLED = "cancelled"


class AttemptOutcome(StrEnum):
    RUNNING = "running"
    SUCCEEDED = "succeeded"
    FAILED = "failed"
    TIMED_OUT = "timed_out"
    LOST = "lost"
    INTERRUPTED = "interrupted"
    CANCELLED = "cancelled"


class TickStatus(StrEnum):
    RUNNING = "running"
    FINISHED = "finished"
    FAILED = "failed"
    INTERRUPTED = "interrupted"


class SkipReason(StrEnum):
    MISSED_DEADLINE = "missed_deadline"
    COALESCED = "coalesced"
    CATCHUP_NONE = "catchup_none"
    CATCHUP_LIMIT = "catchup_limit"
    OVERLAP = "overlap"
    PAUSED = "paused"
    INVALID = "invalid"
    SUPERSEDED = "superseded"


_completing = threading.Lock()
_field_names: dict[type[Any], tuple[str, ...]] = {}


@dataclass_transform(frozen_default=True, field_specifiers=(field,))
class Record:
    """Base of the rows below: each one is a frozen dataclass, made one when it is first
    instantiated (or its fields are asked for) rather than when this module is imported.

    Generating a dataclass's methods compiles them, about half a millisecond per class;
    `cronjobs tick` imports every row class but on an empty tick builds none of them. Once
    made, a row is a plain frozen dataclass (``dataclasses.replace`` and ``fields`` work on
    it); before that, ``field_names`` is the way to ask for its fields. A row class must
    derive from this one directly.
    """

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        cls = type(self)
        _complete(cls)
        cls.__init__(self, *args, **kwargs)  # the generated one, from now on


def field_names(cls: type[Any]) -> tuple[str, ...]:
    """The fields of a row class (a dataclass, or a Record not yet made one), in order."""
    names = _field_names.get(cls)
    if names is None:
        if issubclass(cls, Record):
            _complete(cls)
        names = _field_names[cls] = tuple(f.name for f in fields(cls))
    return names


def _complete(cls: type[Record]) -> None:
    with _completing:
        if "__dataclass_fields__" not in cls.__dict__:
            if cls.__base__ is not Record:
                raise TypeError(f"{cls.__qualname__} must derive from Record directly")
            dataclass(frozen=True)(cls)


class DefinitionSpec(Record):
    """What `cronjobs define` asks for: the whole desired definition of one job."""

    name: str
    schedule: str
    timezone: str = "UTC"
    kind: Kind = Kind.HANDLER
    handler: str | None = None
    command: str | None = None
    payload: dict[str, Any] = field(default_factory=dict)
    catchup: Catchup = Catchup.LATEST
    catchup_limit: int = 100
    starting_deadline: dt.timedelta | None = None
    overlap: Overlap = Overlap.SKIP
    max_attempts: int = 3
    backoff: dt.timedelta = dt.timedelta(seconds=30)
    backoff_max: dt.timedelta = dt.timedelta(hours=1)
    timeout: dt.timedelta | None = dt.timedelta(hours=1)
    lease: dt.timedelta = dt.timedelta(seconds=60)
    alert_command: str | None = None
    alert_on_failure: bool = False
    pause_after_failures: int | None = None


class Definition(Record):
    """A row of job_definitions."""

    id: int
    name: str
    schedule: str
    timezone: str
    kind: str
    handler: str | None
    command: str | None
    payload: dict[str, Any]
    catchup: str
    catchup_limit: int
    starting_deadline: dt.timedelta | None
    overlap: str
    max_attempts: int
    backoff: dt.timedelta
    backoff_max: dt.timedelta
    timeout: dt.timedelta | None
    lease: dt.timedelta
    alert_command: str | None
    alert_on_failure: bool
    pause_after_failures: int | None
    consecutive_failures: int
    paused_at: dt.datetime | None
    paused_until: dt.datetime | None
    pause_note: str | None
    invalid_reason: str | None
    removed_at: dt.datetime | None
    cursor_at: dt.datetime
    next_due_at: dt.datetime | None
    schedule_since: dt.datetime
    created_at: dt.datetime
    updated_at: dt.datetime

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
    def state(self) -> str:
        if self.removed_at is not None:
            return "removed"
        if self.invalid_reason is not None:
            return "invalid"
        if self.paused_at is not None:
            return "paused"
        return "active"


class Run(Record):
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

    @property
    def unacknowledged(self) -> bool:
        """A dead run nobody acknowledged since it died (it keeps `status --check` red)."""
        return self.status == "dead" and (
            self.acknowledged_at is None
            or (self.finished_at is not None and self.acknowledged_at < self.finished_at))


class Attempt(Record):
    """A row of job_attempts."""

    id: int
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


class DefinitionSummary(Record):
    """A definition with its latest run, as `cronjobs list` shows it."""

    definition: Definition
    last_run_status: str | None
    last_run_at: dt.datetime | None


class Skip(Record):
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


class DueDefinition(Record):
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


class NewRun(Record):
    """A run about to be materialised."""

    definition_id: int
    scheduled_for: dt.datetime
    trigger: Trigger
    max_attempts: int
    eligible_at: dt.datetime
    exclusive: bool = True


class NewSkip(Record):
    """Slots decided not to run: one slot, or a range of them."""

    definition_id: int
    first_slot: dt.datetime
    last_slot: dt.datetime
    slot_count: int | None
    reason: SkipReason
    detail: str | None = None


class Advance(Record):
    """A definition's cursor moving forward after its slots were decided."""

    definition_id: int
    cursor_at: dt.datetime
    next_due_at: dt.datetime | None
    invalid_reason: str | None = None
    resumed: bool = False


class Claimed(Record):
    """A run this worker just claimed, with what it needs to run it."""

    id: int
    definition_id: int
    scheduled_for: dt.datetime
    trigger: str
    attempt: int
    max_attempts: int
    lease_token: Any
    lease_owner: str
    started_at: dt.datetime
    payload: dict[str, Any]
    name: str
    kind: str
    command: str | None
    handler: str | None
    timeout: dt.timedelta | None
    lease: dt.timedelta
    backoff: dt.timedelta
    backoff_max: dt.timedelta


class Outcome(Record):
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
