"""``cronjobs status``: one screen of health, with a dead-man's switch for the tick itself
(``cronjobs metrics`` and the dashboard's ``/healthz`` read the same, see core/metrics.py)."""

from __future__ import annotations

import dataclasses
import datetime as dt
from dataclasses import dataclass, field

from cronjobs import cron as schedules
from cronjobs.core.groups import waiting_for_groups
from cronjobs.db.store import Store
from cronjobs.errors import ScheduleError
from cronjobs.models import WaitingRuns
from cronjobs.reports import GroupUsage, Health, JobStats, RunningRun

TICK = dt.timedelta(microseconds=1)
# How far back a job's runs by status and retries count (metrics): a window, so that the
# cost of a status or a scrape does not grow with the history kept.
RECENT = dt.timedelta(days=1)


@dataclass(frozen=True)
class Thresholds:
    max_tick_age: dt.timedelta = dt.timedelta(minutes=5)
    max_backlog_age: dt.timedelta = dt.timedelta(minutes=5)


@dataclass
class Status:
    now: dt.datetime
    numbers: Health
    running: list[RunningRun]
    # every job's numbers (invalid_reason also set when its schedule cannot be evaluated)
    jobs: list[JobStats]
    # why a job is overdue (its last success is older than its schedule allows), by name
    overdue: dict[str, str] = field(default_factory=dict)
    problems: list[str] = field(default_factory=list)
    # due handler runs whose handler no recent tick loaded
    waiting: list[WaitingRuns] = field(default_factory=list)
    # groups whose due runs wait for a free slot (their limit is reached)
    groups: list[GroupUsage] = field(default_factory=list)

    @property
    def healthy(self) -> bool:
        return not self.problems

    @property
    def dead_unacknowledged(self) -> int:
        return sum(job.dead_unacknowledged for job in self.jobs)


def status(store: Store, thresholds: Thresholds = Thresholds(), *,
           now: dt.datetime | None = None) -> Status:
    """Gather the health of the whole installation, and what is wrong with it, at ``now``
    (default: the database's clock)."""
    now = now if now is not None else store.now()
    numbers = store.reports.health(now)
    running = store.reports.running_runs()
    judged = [_job(row, now) for row in store.reports.job_stats(since=now - RECENT)]
    jobs = [job for job, _ in judged]
    overdue = {job.name: why for job, why in judged if why is not None}
    result = Status(now, numbers, running, jobs, overdue)
    result.waiting = waiting_for_handlers(store, now, thresholds.max_tick_age)
    result.groups = waiting_for_groups(store, now)
    last_tick = numbers.last_tick_at
    if last_tick is None:
        result.problems.append("no tick has ever run: is `cronjobs tick` in a crontab or a "
                               "Kubernetes CronJob?")
    elif now - last_tick > thresholds.max_tick_age:
        result.problems.append(f"no tick for {_age(now - last_tick)} (threshold "
                               f"{_age(thresholds.max_tick_age)}): is the crontab or CronJob "
                               "still running?")
    oldest = numbers.backlog_oldest
    if oldest is not None and now - oldest > thresholds.max_backlog_age:
        result.problems.append(f"{numbers.backlog} due run(s) unclaimed, the oldest for "
                               f"{_age(now - oldest)}")
    for wait in result.waiting:
        if now - wait.oldest > thresholds.max_backlog_age:
            result.problems.append(
                f"{wait.runs} due run(s) wait for handler {wait.handler!r}, the oldest "
                f"for {_age(now - wait.oldest)}: no tick of the last "
                f"{_age(thresholds.max_tick_age)} registers it (try --app MODULE on a tick)")
    for run in running:
        if run.lease_expires_at < now:
            result.problems.append(f"run {run.id} of {run.job!r}: lease expired "
                                   f"{_age(now - run.lease_expires_at)} ago (worker "
                                   f"{run.lease_owner}); the next tick reclaims it")
    for job in jobs:
        if job.dead_unacknowledged:
            # Red until a person acts, however long ago the run died.
            latest = job.latest_dead_id
            result.problems.append(
                f"job {job.name!r}: {job.dead_unacknowledged} dead run(s) not "
                f"acknowledged (latest: run {latest}); see `cronjobs show {latest}`, then "
                f"`cronjobs retry {latest}` or `cronjobs ack --all {job.name}`")
        if job.invalid_reason:
            result.problems.append(f"job {job.name!r} is invalid: {job.invalid_reason}")
        if job.name in overdue:
            result.problems.append(f"job {job.name!r}: {overdue[job.name]}")
    return result


def waiting_for_handlers(store: Store, now: dt.datetime, recent: dt.timedelta,
                         definition_id: int | None = None) -> list[WaitingRuns]:
    """Due handler runs (of one definition, or all) that wait for a handler that no tick
    started in the last ``recent`` has loaded, per handler."""
    return store.reports.waiting_for_handlers(now=now, handlers=None, since=now - recent,
                                      definition_id=definition_id)


def _job(row: JobStats, now: dt.datetime) -> tuple[JobStats, str | None]:
    """A job's numbers (with ``invalid_reason`` set when its schedule cannot be evaluated),
    and why it is overdue: its last success is older than its schedule allows (or None)."""
    if row.invalid_reason or row.paused_at is not None:
        return row, None
    try:
        sched = schedules.parse(row.schedule, row.timezone, hash_key=row.name)
        latest = sched.latest_at_or_before(now)
        before = sched.latest_at_or_before(latest - TICK) if latest is not None else None
    except ScheduleError as exc:
        return dataclasses.replace(row, invalid_reason=exc.message), None
    since = max(row.created_at, row.schedule_since)
    last = row.last_success_at
    # The slot before the latest has had a whole period to succeed; the latest may still run.
    if before is not None and before > since and (last is None or last < before):
        shown = "never succeeded" if last is None else f"last success {_age(now - last)} ago"
        return row, f"{shown}; expected a success since the slot of {before.isoformat()}"
    return row, None


def _age(delta: dt.timedelta) -> str:
    seconds = int(delta.total_seconds())
    if seconds < 120:
        return f"{seconds}s"
    if seconds < 7200:
        return f"{seconds // 60}m"
    if seconds < 172800:
        return f"{seconds // 3600}h{(seconds % 3600) // 60:02d}m"
    return f"{seconds // 86400}d"
