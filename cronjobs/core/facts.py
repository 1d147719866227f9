"""The facts about a job and a run, worked out in one place: every view (the CLI's text and
``--json``, the Python client, the dashboard) shows these and derives none of its own.

A run's facts:

- **state**: its status (``scheduled``, ``queued``, ``running``, ``failed`` — waiting to
  retry —, ``succeeded``, ``dead``, ``cancelled``).
- **attempts used / allowed**: an attempt stopped by a stopped tick (``interrupted``) uses
  none of them. The run row numbers every attempt (``attempt``) and grants one more
  (``max_attempts``) per interruption, so both are counted without the interruptions.
- **acknowledgement**: applies to the death it acknowledged. A run that died, was retried
  (which acknowledges) and died again is unacknowledged: ``acknowledged`` is false and
  ``acknowledged_at``/``acknowledged_by`` are None, whatever the row still holds. A dead run
  of a removed job needs no acknowledgement (``needs_acknowledgement`` is false): removing
  the job settled it, as `status --check` counts it.
- **its job's removal**: ``job_removed_at``, when the job it belongs to was removed (None
  while that job is defined); every view marks such a run.
- **lateness**: how long after its slot a scheduled run's first attempt started (None for a
  run not started, or not started by its schedule); ``late`` past :data:`LATE`.
- **result**: what its handler returned (JSON), None for none.

A job's facts:

- **state**: ``active``, ``paused``, ``invalid`` (its stored schedule cannot be evaluated) or
  ``removed``.
- **next fire time**: the first slot the tick will *run*: None while paused without an end,
  the first slot after the pause's end when it has one, None for an invalid or removed job.
"""

from __future__ import annotations

import datetime as dt
import itertools
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from cronjobs import cron as schedules
from cronjobs.db.store import Store
from cronjobs.errors import ScheduleError
from cronjobs.models import (
    RUN_PENDING,
    AttemptOutcome,
    Definition,
    JobState,
    Run,
    RunStatus,
    Trigger,
)
from cronjobs.models import job_state as models_job_state
from cronjobs.reports import Attempt, JobRun
from cronjobs.timefmt import in_zone
from cronjobs.validation import mask_url

LATE = dt.timedelta(minutes=1)  # a scheduled run whose first attempt started later is late


@dataclass(frozen=True)
class AttemptInfo:
    """One attempt of a run.

    ``number`` counts every attempt of the run, interrupted ones included (as
    ``cronjobs show`` lists them); ``counted`` says whether it used one of the run's
    attempts (an interruption does not)."""

    number: int
    outcome: str  # running, succeeded, failed, timed_out, lost, interrupted, cancelled
    counted: bool
    worker: str
    started_at: dt.datetime
    finished_at: dt.datetime | None
    duration: dt.timedelta | None  # None while it runs
    exit_code: int | None
    error: str | None
    output_tail: str | None  # the last 64 KiB it printed


@dataclass(frozen=True)
class RunInfo:
    """One run of a job, as every view shows it (see the module's docstring for the rules)."""

    id: int
    job: str
    job_removed_at: dt.datetime | None  # its job was removed then (None: it is defined)
    state: str  # scheduled, queued, running, failed (waiting to retry), succeeded, dead, cancelled
    trigger: str  # schedule, manual, retry, backfill
    scheduled_for: dt.datetime  # its slot (for a manual run: when it was asked for)
    payload: dict[str, Any] | None  # its own payload (None: the job's)
    attempts_used: int
    attempts_allowed: int
    interrupted_attempts: int  # stopped by a stopped tick: counted in neither number
    next_attempt_at: dt.datetime | None  # when a waiting run becomes due (None otherwise)
    started_at: dt.datetime | None  # its latest attempt's start
    finished_at: dt.datetime | None
    lateness: dt.timedelta | None
    late: bool
    exit_code: int | None
    error: str | None
    result: Any
    output_tail: str | None  # its latest attempt's output (the last 64 KiB)
    acknowledged: bool
    acknowledged_at: dt.datetime | None
    acknowledged_by: str | None
    needs_acknowledgement: bool  # dead and not acknowledged: keeps `status --check` red
    cancel_requested_at: dt.datetime | None
    held_by: str | None  # the worker running it
    lease_expires_at: dt.datetime | None
    retry_of: int | None  # the run whose slot a `retry --force` ran again
    retry_count: int  # times an operator retried it
    retried_at: dt.datetime | None
    attempts: tuple[AttemptInfo, ...]


@dataclass(frozen=True)
class JobInfo:
    """One job, as every view shows it (see the module's docstring for the rules)."""

    name: str
    schedule: str
    timezone: str
    description: str | None  # the schedule in words (None for an invalid job)
    kind: str  # handler or command
    handler: str | None
    command: str | None
    target: str  # what it runs, in words ("command: ..." or "handler: ...")
    payload: dict[str, Any]
    state: str  # active, paused, invalid, removed
    removed_at: dt.datetime | None
    paused: bool
    paused_at: dt.datetime | None
    paused_until: dt.datetime | None
    pause_note: str | None
    problem: str | None  # why it is invalid
    next_fire_at: dt.datetime | None
    catchup: str
    overlap: str
    max_attempts: int
    timeout: dt.timedelta | None
    group: str | None
    notify: tuple[str, ...]  # its webhook receivers, masked (secrets)
    notify_on: tuple[str, ...]  # dead, failure, recovery
    source: str | None  # the `apply` source that owns it (None: made by hand)
    consecutive_failures: int
    last_run_state: str | None
    last_run_at: dt.datetime | None
    created_at: dt.datetime
    updated_at: dt.datetime


# -- runs ---------------------------------------------------------------------------------------

def acknowledged(run: Run) -> bool:
    """A dead run somebody acknowledged since it (last) died."""
    return run.status == RunStatus.DEAD and not run.unacknowledged


def lateness(run: Run, first_started_at: dt.datetime | None) -> dt.timedelta | None:
    """How long after its slot a scheduled run's first attempt started."""
    if run.trigger != Trigger.SCHEDULE or first_started_at is None:
        return None
    return max(first_started_at - run.scheduled_for, dt.timedelta(0))


def interrupted(attempts: Iterable[Attempt]) -> int:
    """How many of a run's attempts a stopped tick interrupted (they use no attempt)."""
    return sum(1 for a in attempts if a.outcome == AttemptOutcome.INTERRUPTED)


def attempts_used(attempt: int, run_id: int, attempts: Iterable[Attempt]) -> int:
    """The attempts run ``run_id`` used, whose latest attempt is number ``attempt``."""
    return attempt - interrupted(a for a in attempts if a.run_id == run_id)


def attempt_info(a: Attempt) -> AttemptInfo:
    return AttemptInfo(
        number=a.attempt, outcome=a.outcome, counted=a.outcome != AttemptOutcome.INTERRUPTED,
        worker=a.worker, started_at=a.started_at, finished_at=a.finished_at,
        duration=(a.finished_at - a.started_at) if a.finished_at is not None else None,
        exit_code=a.exit_code, error=a.error, output_tail=a.output_tail)


def run_info(run: Run, job: str, attempts: Sequence[Attempt], *,
             job_removed_at: dt.datetime | None = None) -> RunInfo:
    """The facts of ``run`` of job ``job`` (removed at ``job_removed_at``, None while it is
    defined), whose attempts are ``attempts``."""
    stopped = interrupted(attempts)
    first = min((a.started_at for a in attempts), default=run.started_at)
    late_by = lateness(run, first)
    acked = acknowledged(run)
    return RunInfo(
        id=run.id, job=job, job_removed_at=job_removed_at, state=run.status,
        trigger=run.trigger, scheduled_for=run.scheduled_for, payload=run.payload,
        attempts_used=run.attempt - stopped,
        attempts_allowed=run.max_attempts - stopped,
        interrupted_attempts=stopped,
        next_attempt_at=run.eligible_at if run.status in RUN_PENDING else None,
        started_at=run.started_at, finished_at=run.finished_at,
        lateness=late_by, late=late_by is not None and late_by > LATE,
        exit_code=run.exit_code, error=run.error, result=run.result,
        output_tail=run.output_tail,
        acknowledged=acked,
        acknowledged_at=run.acknowledged_at if acked else None,
        acknowledged_by=run.acknowledged_by if acked else None,
        needs_acknowledgement=run.unacknowledged and job_removed_at is None,
        cancel_requested_at=run.cancel_requested_at,
        held_by=run.lease_owner if run.status == RunStatus.RUNNING else None,
        lease_expires_at=run.lease_expires_at if run.status == RunStatus.RUNNING else None,
        retry_of=run.retry_of, retry_count=run.retry_count, retried_at=run.retried_at,
        attempts=tuple(attempt_info(a) for a in attempts))


def load_runs(store: Store, runs: Iterable[JobRun]) -> list[RunInfo]:
    """The facts of several runs (each with its job), their attempts read in one query."""
    listed = list(runs)
    found: dict[int, list[Attempt]] = {}
    if listed:
        for attempt in store.runs.attempts_of(listed):
            found.setdefault(attempt.run_id, []).append(attempt)
    return [run_info(run, run.job, found.get(run.id, ()), job_removed_at=run.job_removed_at)
            for run in listed]


def load_run(store: Store, run: JobRun) -> RunInfo:
    """The facts of one run."""
    return run_info(run, run.job, store.runs.attempts_of_run(run.id),
                    job_removed_at=run.job_removed_at)


def run_words(r: RunInfo, now: dt.datetime) -> str:
    """What a run's state means for its slot, in words (explain, the dashboard's timeline):
    never "ran" for one that did not."""
    of = f"{r.attempts_used} of {r.attempts_allowed}"
    error = f": {r.error}" if r.error else ""
    started = r.attempts_used > 0 or r.interrupted_attempts > 0
    due = r.next_attempt_at
    if r.state == RunStatus.SCHEDULED:
        return (f"scheduled manually for {in_zone(due, dt.UTC) if due else '-'} (a one-off run: "
                "the overlap policy applies then; `cronjobs cancel` drops it)")
    if r.state == RunStatus.QUEUED:
        when = ("due now" if due is None or due <= now else f"eligible at {in_zone(due, dt.UTC)}")
        if not started:
            head = "queued, not started yet"
        elif r.attempts_used == 0:
            head = f"queued again after an interrupted attempt ({of} used)"
        else:
            head = f"queued again after attempt {of}"
        return f"{head} ({when})"
    if r.state == RunStatus.RUNNING:
        stop = "; asked to stop" if r.cancel_requested_at is not None else ""
        return f"running attempt {of} on {r.held_by}{stop}"
    if r.state == RunStatus.FAILED:
        return (f"attempt {of} failed; the next attempt is due at "
                f"{in_zone(due, dt.UTC) if due else '-'}" + error)
    if r.state == RunStatus.SUCCEEDED:
        return f"succeeded (attempt {of})"
    if r.state == RunStatus.DEAD:
        return f"dead after attempt {of}{error}" + ("; acknowledged" if r.acknowledged else "")
    if not started:
        return "cancelled before it started" + error
    return f"cancelled after attempt {of}" + error


# -- jobs ---------------------------------------------------------------------------------------

def problem(definition: Definition) -> str | None:
    """Why a stored definition cannot be evaluated (e.g. broken by a direct SQL write)."""
    if definition.invalid_reason is not None:
        return definition.invalid_reason
    try:
        sched = schedules.parse(definition.schedule, definition.timezone,
                                hash_key=definition.name)
        sched.next_after(definition.cursor_at)
    except ScheduleError as exc:
        return exc.message
    return None


def upcoming_from(definition: Definition, now: dt.datetime) -> dt.datetime | None:
    """Where the slots the tick will run start (exclusive): after now and after the cursor
    (the slots up to it are decided already), and after a pause's end; None while the job
    is paused without an end, or removed."""
    if definition.removed_at is not None:
        return None
    start = max(now, definition.cursor_at)
    if definition.paused_at is not None:
        if definition.paused_until is None:
            return None
        start = max(start, definition.paused_until)
    return start


def next_fire_times(definition: Definition, now: dt.datetime, count: int
                    ) -> tuple[dt.datetime, ...]:
    """The next ``count`` slots the tick will run (see :func:`upcoming_from`); none for an
    invalid job."""
    start = upcoming_from(definition, now)
    if start is None or problem(definition) is not None:
        return ()
    sched = schedules.parse(definition.schedule, definition.timezone, hash_key=definition.name)
    return tuple(itertools.islice(sched.iter_after(start), count))


def job_state(definition: Definition, why_invalid: str | None) -> JobState:
    """Its state, a schedule that cannot be evaluated (``why_invalid``) counting as
    invalid (:func:`cronjobs.models.job_state`)."""
    return models_job_state(removed=definition.removed_at is not None,
                            invalid=why_invalid is not None,
                            paused=definition.paused_at is not None)


def job_info(definition: Definition, now: dt.datetime, *, description: str | None,
             last_run_state: str | None = None,
             last_run_at: dt.datetime | None = None) -> JobInfo:
    """The facts of a job at ``now``. ``description`` is its schedule in words
    (:func:`cronjobs.core.definitions.job_info` passes it: the words are off the tick's
    start-up path, which reads run facts through explain)."""
    why = problem(definition)
    upcoming = next_fire_times(definition, now, 1)
    d = definition
    return JobInfo(
        name=d.name, schedule=d.schedule, timezone=d.timezone,
        kind=d.kind, handler=d.handler, command=d.command, target=d.target,
        payload=d.payload, state=job_state(d, why), removed_at=d.removed_at,
        paused=d.paused_at is not None,
        paused_at=d.paused_at, paused_until=d.paused_until, pause_note=d.pause_note,
        description=description if why is None else None,
        problem=why, next_fire_at=upcoming[0] if upcoming else None,
        catchup=d.catchup, overlap=d.overlap, max_attempts=d.max_attempts,
        timeout=d.timeout, group=d.group_name,
        notify=tuple(mask_url(url) for url in d.notify_urls), notify_on=d.notify_on,
        source=d.source,
        consecutive_failures=d.consecutive_failures, last_run_state=last_run_state,
        last_run_at=last_run_at, created_at=d.created_at, updated_at=d.updated_at)
