"""``cronjobs status`` (one screen of health, with a dead-man's switch for the tick itself)
and ``cronjobs metrics`` (the Prometheus text format)."""

from __future__ import annotations

import dataclasses
import datetime as dt
from dataclasses import dataclass, field

from cronjobs import cron as schedules
from cronjobs.db.store import Store
from cronjobs.errors import ScheduleError
from cronjobs.models import Health, JobStats, RunningRun, WaitingRuns

TICK = dt.timedelta(microseconds=1)


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
    numbers = store.health(now)
    running = store.running_runs()
    judged = [_job(row, now) for row in store.job_stats()]
    jobs = [job for job, _ in judged]
    overdue = {job.name: why for job, why in judged if why is not None}
    result = Status(now, numbers, running, jobs, overdue)
    result.waiting = waiting_for_handlers(store, now, thresholds.max_tick_age)
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
    return store.waiting_for_handlers(now=now, handlers=None, since=now - recent,
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


# -- metrics ----------------------------------------------------------------------------------

def metrics(store: Store, *, now: dt.datetime | None = None) -> str:
    """The Prometheus text exposition format, for the textfile collector or a push gateway."""
    st = status(store, now=now)
    n = st.numbers
    out: list[str] = []

    def metric(name: str, kind: str, help_text: str,
               samples: list[tuple[dict[str, str], float]]) -> None:
        out.append(f"# HELP {name} {help_text}")
        out.append(f"# TYPE {name} {kind}")
        for labels, value in samples:
            label = ",".join(f'{k}="{_escape(v)}"' for k, v in labels.items())
            out.append(f"{name}{{{label}}} {_number(value)}" if label
                       else f"{name} {_number(value)}")

    def ts(value: dt.datetime | None) -> float:
        return value.timestamp() if value is not None else 0.0

    metric("cronjobs_last_tick_timestamp_seconds", "gauge",
           "When the last tick started (0: never).", [({}, ts(n.last_tick_at))])
    metric("cronjobs_ticks_last_hour", "gauge", "Ticks started in the last hour.",
           [({}, n.ticks_last_hour)])
    metric("cronjobs_lost_ticks_last_day", "gauge",
           "Ticks closed as lost in the last day: they went away without recording their end.",
           [({}, n.lost_ticks_last_day)])
    metric("cronjobs_backlog_runs", "gauge", "Runs due but not claimed yet.",
           [({}, n.backlog)])
    oldest = n.backlog_oldest
    metric("cronjobs_backlog_oldest_seconds", "gauge",
           "Age of the oldest due, unclaimed run (0: none).",
           [({}, (st.now - oldest).total_seconds() if oldest else 0.0)])
    metric("cronjobs_handler_waiting_runs", "gauge",
           "Due runs waiting for a handler that no recent tick has loaded (see --app).",
           [({"handler": w.handler}, w.runs) for w in st.waiting])
    metric("cronjobs_running_runs", "gauge", "Runs held by a worker.", [({}, n.running)])
    metric("cronjobs_job_last_success_timestamp_seconds", "gauge",
           "When the job's last successful run finished (0: never).",
           [({"job": j.name}, ts(j.last_success_at)) for j in st.jobs])
    metric("cronjobs_job_last_duration_seconds", "gauge", "Duration of the job's last run.",
           [({"job": j.name}, j.last_duration.total_seconds()) for j in st.jobs
            if j.last_duration is not None])
    metric("cronjobs_job_lateness_seconds", "gauge",
           "Start of the first attempt of the job's last finished scheduled run minus its "
           "slot (backfilled, manual and retried runs do not count).",
           [({"job": j.name}, max(0.0, j.last_lateness.total_seconds()))
            for j in st.jobs if j.last_lateness is not None])
    metric("cronjobs_job_runs", "gauge", "The job's runs kept in the history, by status.",
           [({"job": j.name, "status": status_}, count)
            for j in st.jobs for status_, count in sorted(j.runs_by_status.items())])
    metric("cronjobs_job_retries", "gauge", "Attempts beyond the first, over the kept history.",
           [({"job": j.name}, j.retries) for j in st.jobs])
    metric("cronjobs_job_dead_runs", "gauge", "The job's dead runs in the kept history.",
           [({"job": j.name}, j.runs_by_status.get("dead", 0)) for j in st.jobs])
    metric("cronjobs_job_dead_unacknowledged_runs", "gauge",
           "The job's dead runs nobody acknowledged yet (`cronjobs ack`).",
           [({"job": j.name}, j.dead_unacknowledged) for j in st.jobs])
    metric("cronjobs_job_overdue", "gauge",
           "1 when the job's last success is older than its schedule allows.",
           [({"job": j.name}, 1.0 if j.name in st.overdue else 0.0) for j in st.jobs])
    return "\n".join(out) + "\n"


def _escape(value: str) -> str:
    return value.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")


def _number(value: float) -> str:
    return repr(float(value)) if not float(value).is_integer() else str(int(value))
