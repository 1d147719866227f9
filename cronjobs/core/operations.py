"""What an operator does to runs: retry, trigger, cancel, acknowledge, and look at them
(runs, show)."""

from __future__ import annotations

import datetime as dt
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from cronjobs.core import facts
from cronjobs.core.definitions import get
from cronjobs.core.facts import RunInfo
from cronjobs.core.materialise import exclusive
from cronjobs.db.store import Store
from cronjobs.errors import JobNotFound, Refused, RunNotFound, UsageError
from cronjobs.models import RUN_PENDING, Overlap, Run, RunStatus, Trigger, status_phrase
from cronjobs.reports import Attempt, Delivery, JobRun
from cronjobs.timefmt import in_zone
from cronjobs.validation import check_name, check_payload

MAX_RUN_ID = 2**63 - 1
RETRYABLE = (RunStatus.FAILED, RunStatus.DEAD, RunStatus.CANCELLED)


@dataclass(frozen=True)
class Acknowledged:
    """What `cronjobs ack` did: the runs it acknowledged now, and (for one run) whether it
    had been acknowledged already."""

    job: str
    runs: tuple[RunInfo, ...]
    already: bool = False


@dataclass(frozen=True)
class RunDetail:
    """A run as `show` shows it: its row, its facts (:mod:`cronjobs.core.facts`), its
    attempts and its webhook notifications."""

    run: Run
    job: str
    info: RunInfo
    attempts: tuple[Attempt, ...]
    deliveries: tuple[Delivery, ...] = ()  # its webhook notifications


def check_run_id(run_id: int) -> int:
    if not 1 <= run_id <= MAX_RUN_ID:
        raise RunNotFound(f"no run with id {run_id} (run ids are positive integers)")
    return run_id


def _no_run(run_id: int) -> RunNotFound:
    return RunNotFound(f"no run with id {run_id}", advice=" (see `cronjobs runs`)",
                       python=f"no run with id {run_id} (see Client.runs())")


def _locked_run(store: Store, run_id: int) -> tuple[JobRun, str]:
    found = store.runs.run_by_id(check_run_id(run_id), for_update=True)
    if found is None:
        raise _no_run(run_id)
    return found, found.job


def retry(store: Store, run_id: int, *, attempts: int = 1, force: bool = False,
          by: str | None = None, now: dt.datetime | None = None) -> Run:
    """Send a failed, dead or cancelled run back to the queue now with ``attempts`` more
    attempts, keeping its history (a dead run is acknowledged, by ``by``). A run that
    succeeded is only run again with ``force``, as a new run of the same slot (trigger
    ``retry``)."""
    if not 1 <= attempts <= 100:
        raise UsageError(f"invalid --attempts {attempts}: must be between 1 and 100",
                         python=f"invalid attempts={attempts}: must be between 1 and 100")
    with store.transaction():
        run, job = _locked_run(store, run_id)
        now = now if now is not None else store.now()
        status = RunStatus(run.status)
        if run.job_removed_at is not None:
            when = in_zone(run.job_removed_at, dt.UTC)
            raise Refused(f"run {run.id} of {job!r} cannot run again: its job was removed at "
                          f"{when}", advice=f" (`cronjobs define {job} ...` defines it again)",
                          python=f"run {run.id} of {job!r} cannot run again: its job was "
                          f"removed at {when} (Client.define() defines it again)")
        if status in RETRYABLE:
            store.notifications.notify_runs(job)  # on commit, as for trigger
            return store.runs.requeue_run(run.id, attempts=attempts, by=by, now=now)
        if status == RunStatus.SUCCEEDED:
            if not force:
                raise Refused(f"run {run.id} of {job!r} succeeded",
                              advice="; use --force to run its slot again as a new run",
                              python=f"run {run.id} of {job!r} succeeded; pass force=True to "
                              "run its slot again as a new run")
            definition = get(store, job)
            store.notifications.notify_runs(job)
            return store.runs.insert_manual_run(
                definition_id=run.definition_id, scheduled_for=run.scheduled_for,
                trigger=Trigger.RETRY, payload=run.payload, max_attempts=attempts,
                exclusive=exclusive(definition), now=now, retry_of=run.id)
        raise Refused(f"run {run.id} of {job!r} {status_phrase(status)}: there is nothing to "
                      "retry (cancel it first if it must stop)",
                      python=f"run {run.id} of {job!r} {status_phrase(status)}: there is "
                      "nothing to retry (Client.cancel() it first if it must stop)")


def trigger(store: Store, name: str, *, payload: dict[str, Any] | None = None,
            force: bool = False, now: dt.datetime | None = None,
            at: dt.datetime | None = None, after: dt.timedelta | None = None) -> Run:
    """A run of job ``name`` now, outside its schedule (picked up by the next tick). The
    job's overlap policy applies unless ``force``: with ``skip`` a busy job refuses, with
    ``queue`` one run may wait, with ``replace`` the running run is asked to stop.

    With ``at`` (an instant) or ``after`` (a duration from now): one run for that later
    time instead, which waits as ``scheduled`` (cancellable) and meets the overlap policy
    when it becomes due (the tick then queues it or cancels it, saying why)."""
    check_name(name)
    if payload is not None:
        check_payload(payload)
    if at is not None or after is not None:
        return _trigger_later(store, name, payload=payload, force=force, now=now, at=at,
                              after=after)
    with store.transaction():
        definition = get(store, name, for_update=True)
        now = now if now is not None else store.now()
        active = store.materialise.active_runs([definition.id], now=now)
        running, waiting = active.get(definition.id, (0, 0))
        policy = Overlap(definition.overlap)
        if not force:
            busy = running > 0 or waiting > 0
            if policy == Overlap.SKIP and busy:
                raise Refused(f"{name!r} has {running} running and {waiting} waiting run(s) and "
                              "its overlap policy is 'skip'",
                              advice=": use --force to run it anyway",
                              python=f"{name!r} has {running} running and {waiting} waiting "
                              "run(s) and its overlap policy is 'skip': pass force=True to "
                              "run it anyway")
            if policy == Overlap.QUEUE and waiting > 0:
                raise Refused(f"{name!r} already has a run waiting and its overlap policy is "
                              "'queue'", advice=": use --force to add another",
                              python=f"{name!r} already has a run waiting and its overlap "
                              "policy is 'queue': pass force=True to add another")
            if policy == Overlap.REPLACE and running > 0:
                store.definitions.request_cancel_running([definition.id], now=now)
        run = store.runs.insert_manual_run(
            definition_id=definition.id, scheduled_for=now, trigger=Trigger.MANUAL,
            payload=payload, max_attempts=definition.max_attempts,
            exclusive=exclusive(definition) and not force, now=now)
        store.notifications.notify_runs(name)  # a `cronjobs worker` claims it at once
        return run


def _trigger_later(store: Store, name: str, *, payload: dict[str, Any] | None, force: bool,
                   now: dt.datetime | None, at: dt.datetime | None,
                   after: dt.timedelta | None) -> Run:
    if at is not None and after is not None:
        raise UsageError("--at and --in cannot be used together: give the time or the delay",
                         python="at and after cannot be used together: give the time or "
                         "the delay")
    if force:
        raise UsageError("--force cannot be used with --at or --in: a run for later meets "
                         "the job's overlap policy when it becomes due",
                         python="force=True cannot be used with at or after: a run for "
                         "later meets the job's overlap policy when it becomes due")
    with store.transaction():
        definition = get(store, name, for_update=True)
        now = now if now is not None else store.now()
        when = at if at is not None else now + (after or dt.timedelta(0))
        if when <= now:
            raise UsageError(f"invalid --at {when.isoformat()}: it is already past (trigger "
                             "without --at runs it now)",
                             python=f"invalid at={when.isoformat()}: it is already past "
                             "(trigger without at runs it now)")
        return store.materialise.insert_one_off_run(
            definition_id=definition.id, at=when, payload=payload,
            max_attempts=definition.max_attempts, exclusive=exclusive(definition), now=now)


def cancel(store: Store, run_id: int, *, now: dt.datetime | None = None) -> Run:
    """Cancel a waiting run now; ask a running run to stop (its holder stops it at the next
    heartbeat, wherever it runs)."""
    with store.transaction():
        run, job = _locked_run(store, run_id)
        now = now if now is not None else store.now()
        status = RunStatus(run.status)
        if status in RUN_PENDING:
            cancelled = store.runs.cancel_waiting_run(run.id, now=now)
            if cancelled is not None:  # to the history at once, the way every run goes
                store.queue.move_ended([run.id], now=now)
                moved = store.runs.run_by_id(run.id)
                cancelled = moved if moved is not None else cancelled
        elif status == RunStatus.RUNNING:
            cancelled = store.runs.request_cancel_run(run.id, now=now)
        else:
            raise Refused(f"run {run.id} of {job!r} {status_phrase(status)}: it has already "
                          "finished")
        if cancelled is None:  # pragma: no cover - the row is locked
            raise Refused(f"run {run.id} changed while it was being cancelled")
        return cancelled


def acknowledge(store: Store, run_id: int, *, by: str | None = None,
                now: dt.datetime | None = None) -> Acknowledged:
    """A person saw dead run ``run_id``: it no longer keeps `status --check` red.
    Acknowledging it again changes nothing. Only a dead run can be acknowledged: a failed
    run is still to be retried, and the other states are not failures."""
    with store.transaction():
        run, job = _locked_run(store, run_id)
        if run.status != RunStatus.DEAD:
            raise Refused(f"run {run.id} of {job!r} {status_phrase(run.status)}: only a dead "
                          "run can be acknowledged", advice=" (see `cronjobs runs --status dead`)",
                          python=f"run {run.id} of {job!r} {status_phrase(run.status)}: only "
                          "a dead run can be acknowledged (see Client.runs(states=['dead']))")
        if not run.unacknowledged:
            return Acknowledged(job, (facts.load_run(store, run),), already=True)
        done = store.runs.acknowledge_run(run.id, by=by,
                                     now=now if now is not None else store.now())
        if done is None:  # pragma: no cover - the row is locked
            raise Refused(f"run {run.id} changed while it was being acknowledged")
        return Acknowledged(job, (facts.load_run(
            store, JobRun.named(done, job, run.job_removed_at)),))


def acknowledge_all(store: Store, name: str, *, by: str | None = None,
                    now: dt.datetime | None = None, dry_run: bool = False) -> Acknowledged:
    """Acknowledge every dead run of job ``name`` that nobody acknowledged yet
    (``dry_run``: say which; the same statements, undone)."""
    with store.transaction(rollback=dry_run):
        definition = get(store, name, for_update=True)
        at = now if now is not None else store.now()
        done = store.runs.acknowledge_dead_runs(definition.id, by=by, now=at)
        return Acknowledged(name, tuple(facts.load_runs(
            store, (JobRun.of(r, definition) for r in done))))


def list_runs(store: Store, *, name: str | None = None, statuses: Sequence[str] = (),
              since: dt.datetime | None = None, limit: int = 50) -> list[RunInfo]:
    """Runs with their facts, newest first; ``name`` may be a removed job's (its history
    stays readable)."""
    if name is not None:
        check_name(name)
        if not store.definitions.definition_history(name):
            raise JobNotFound(f"no job named {name!r}, now or before",
                              advice=" (see `cronjobs list`)",
                              python=f"no job named {name!r}, now or before (see "
                              "Client.jobs())")
    if not 1 <= limit <= 10_000:
        raise UsageError(f"invalid --limit {limit}: must be between 1 and 10000",
                         python=f"invalid limit={limit}: must be between 1 and 10000")
    unknown = sorted(set(statuses) - set(RunStatus))
    if unknown:
        raise UsageError(f"invalid --status {unknown[0]!r}: must be one of "
                         f"{', '.join(RunStatus)}",
                         python=f"invalid state {unknown[0]!r}: must be one of "
                         f"{', '.join(RunStatus)}")
    return facts.load_runs(store, store.runs.list_runs(
        name=name, statuses=list(statuses) or None, since=since, limit=limit))


def run_info(store: Store, run_id: int) -> RunInfo:
    """The facts of one run (:mod:`cronjobs.core.facts`): what `show` shows of it."""
    return show(store, run_id).info


def show(store: Store, run_id: int) -> RunDetail:
    """One run with its facts, attempts and webhook notifications."""
    run = store.runs.run_by_id(check_run_id(run_id))
    if run is None:
        raise _no_run(run_id)
    attempts = tuple(store.runs.attempts_of_run(run.id))
    return RunDetail(run, run.job, facts.run_info(run, run.job, attempts,
                                                  job_removed_at=run.job_removed_at), attempts,
                     tuple(store.notifications.deliveries_of_run(run.id)))
