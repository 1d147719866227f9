"""``cronjobs status``: one screen of health, with a dead-man's switch for the tick itself
(``cronjobs metrics`` and the dashboard's ``/healthz`` read the same, see core/metrics.py)."""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass, field, replace
from typing import Any

from cronjobs import cron as schedules
from cronjobs.core import facts
from cronjobs.core.groups import waiting_for_groups
from cronjobs.core.thresholds import Thresholds
from cronjobs.db.store import Store
from cronjobs.durations import age, precise
from cronjobs.errors import ScheduleError
from cronjobs.models import WaitingRuns
from cronjobs.reports import (
    GroupUsage,
    Health,
    HealthSchedule,
    HistoryStorage,
    HotTable,
    JobHealth,
    JobVerdict,
    RunningRun,
    StartLateness,
    XminHolder,
)
from cronjobs.timefmt import in_zone, iso

TICK = dt.timedelta(microseconds=1)


# The storage's health (docs/explanation/storage.md, "Storage health"): how many of what
# holds vacuum back are shown; how many rows of a default partition are counted (one page or
# a few).
XMIN_HOLDERS_SHOWN = 5
DEFAULT_ROWS_CAP = 1000
# A hot table whose dead rows exceed a tenth of --max-dead-tuples and this many times its
# live rows is a problem too: vacuum is far behind a small queue.
DEAD_PER_LIVE = 4
# Rows in a default partition are a warning; a problem once the oldest finished this long ago
# (the tick makes each day's partition ahead of need: a row there means it did not).
DEFAULT_ROWS_GRACE = dt.timedelta(days=1)

# How many jobs' problems a verdict on the jobs with a problem lists (/healthz, the banner,
# /metrics beyond its per-job limit): the most serious first (dead runs nobody acknowledged,
# invalid jobs, then the jobs longest without a success). The others are counted, never
# listed: Status.more_problems, and /healthz's "more_problems". `cronjobs status` lists
# every one.
JOB_PROBLEMS_SHOWN = 20


@dataclass(frozen=True)
class Storage:
    """The storage's own health at an instant: the hot tables (job_runs_queue first), what
    holds vacuum back (oldest first, at most XMIN_HOLDERS_SHOWN), the history's partitions
    and sizes."""

    now: dt.datetime
    hot: list[HotTable]
    holders: list[XminHolder]
    history: HistoryStorage
    # the history's bytes by pg_total_relation_size (else estimated from pg_class.relpages)
    exact_sizes: bool = True

    @property
    def oldest_holder(self) -> XminHolder | None:
        return self.holders[0] if self.holders else None

    def held_for(self, holder: XminHolder) -> dt.timedelta | None:
        """How long ``holder`` has held its transaction (None when PostgreSQL does not
        say)."""
        return None if holder.since is None else max(dt.timedelta(0), self.now - holder.since)

    @property
    def retention_lag(self) -> dt.timedelta | None:
        """How long ago the oldest history partition's last run was due to retire (None: no
        partition, or it is not due yet)."""
        until = self.history.oldest_until
        return self.now - until if until is not None and until < self.now else None


@dataclass(frozen=True)
class Problem:
    """One thing wrong, as `status --check`, /healthz and the dashboard's banner report it:
    ``text`` is the line they print; ``job`` and ``run`` are what it concerns (the banner
    links to them), and ``acknowledge`` says that acknowledging the job's dead runs clears
    it. ``advice`` is what to type at a terminal, as it follows ``what`` in the line (the
    command line prints both; the banner shows ``what`` alone, and offers its own links and
    buttons), as the errors keep theirs (CronjobsError.advice)."""

    what: str
    advice: str | None = None
    job: str | None = None
    run: int | None = None
    acknowledge: bool = False

    @property
    def text(self) -> str:
        return self.what if self.advice is None else self.what + self.advice


@dataclass(frozen=True)
class JobCounts:
    """How many jobs have a problem, of each kind, counted in the database (whether or not
    the verdict lists them all)."""

    jobs: int = 0  # jobs with at least one problem
    dead_jobs: int = 0  # jobs with dead runs nobody acknowledged
    dead_runs: int = 0  # those runs
    invalid: int = 0
    overdue: int = 0

    @property
    def problems(self) -> int:
        """The problems of jobs, as lines: one per kind per job."""
        return self.dead_jobs + self.invalid + self.overdue


@dataclass
class Status:
    now: dt.datetime
    numbers: Health
    running: list[RunningRun]
    # every job's numbers (invalid_reason also set when its schedule cannot be evaluated)
    jobs: list[JobHealth]
    # why a job is overdue (its last success is older than its schedule allows), by name
    overdue: dict[str, str] = field(default_factory=dict)
    # what is wrong, in the order `status` prints it (``problems`` holds their lines)
    issues: list[Problem] = field(default_factory=list)
    # due handler runs whose handler no recent tick loaded
    waiting: list[WaitingRuns] = field(default_factory=list)
    # groups whose due runs wait for a free slot (their limit is reached)
    groups: list[GroupUsage] = field(default_factory=list)
    # the storage's own health (None only for a Status built by hand)
    storage: Storage | None = None
    # worth a look, but not a problem: `status --check` stays green
    warnings: list[str] = field(default_factory=list)
    # p50 / p99 start lateness over the last hour and day (None only for one built by hand)
    lateness: StartLateness | None = None
    # the jobs with a problem, counted in the database (None only for one built by hand)
    counts: JobCounts | None = None
    # problems of jobs not in ``issues`` (beyond JOB_PROBLEMS_SHOWN jobs): counted only
    more_problems: int = 0

    @property
    def problems(self) -> list[str]:
        return [issue.text for issue in self.issues]

    @property
    def healthy(self) -> bool:
        return not self.issues and not self.more_problems

    @property
    def problem_count(self) -> int:
        """Every problem, those listed and those only counted."""
        return len(self.issues) + self.more_problems

    @property
    def dead_unacknowledged(self) -> int:
        if self.counts is not None:
            return self.counts.dead_runs
        return sum(job.dead_unacknowledged for job in self.jobs)

    @property
    def overdue_jobs(self) -> int:
        return self.counts.overdue if self.counts is not None else len(self.overdue)


def status(store: Store, thresholds: Thresholds = Thresholds(), *,
           now: dt.datetime | None = None, exact_sizes: bool = True,
           every_job: bool = True, shown: int | None = JOB_PROBLEMS_SHOWN,
           lateness: StartLateness | None = None, count_jobs: bool = True) -> Status:
    """Gather the health of the whole installation, and what is wrong with it, at ``now``
    (default: the database's clock). ``exact_sizes``: see :func:`storage`. Without
    ``every_job``, ``jobs`` holds only the jobs with a problem, at most ``shown`` of them
    (None: all), the most serious first: the same verdict, judged in the database, whose
    cost does not grow with the jobs (/healthz, /metrics); the problems of the others are
    counted (``more_problems``). ``lateness``: the start lateness as worked out a little
    earlier (the server keeps it for a minute: its cost follows the runs of the day, see
    web/site.py), judged as it is; None: worked out at ``now``. Without ``count_jobs``,
    ``numbers.jobs`` is None (a count no verdict judges: /healthz and the banner skip it)."""
    now = now if now is not None else store.now()
    if shown is not None and shown < 1:
        raise ValueError("shown: at least one job's problems are listed")
    numbers = store.reports.health(now, count_jobs=count_jobs)
    running = store.reports.running_runs()
    if running:  # their attempts as every view counts them (an interruption uses none)
        attempts = store.runs.attempts_of_runs([r.id for r in running])
        running = [replace(r, attempt=facts.attempts_used(r.attempt, r.id, attempts))
                   for r in running]
    verdicts = judge_jobs(store, now, cap=None if every_job else shown, every=every_job)
    counts = _counts(verdicts)
    if every_job:
        judged = {v.id: v for v in verdicts}
        jobs = [_as_health(judged[row.id]) if row.id in judged else row
                for row in store.reports.job_health()]
    else:
        jobs = sorted((_as_health(v) for v in verdicts if v.problem), key=lambda j: j.name)
    overdue = {v.name: _overdue_text(v.last_success_at, v.overdue_since, now)
               for v in sorted(verdicts, key=lambda v: v.name)
               if v.overdue and v.overdue_since is not None}
    result = Status(now, numbers, running, jobs, overdue, counts=counts)
    result.waiting = waiting_for_handlers(store, now, thresholds.max_tick_age)
    result.groups = waiting_for_groups(store, now)
    last_tick = numbers.last_tick_at
    found = result.issues
    if last_tick is None:
        found.append(Problem("no tick has ever run",
                             advice=": is `cronjobs tick` in a crontab or a Kubernetes "
                                    "CronJob?"))
    elif now - last_tick > thresholds.max_tick_age:
        found.append(Problem(f"no tick for {age(now - last_tick)} (threshold "
                             f"{age(thresholds.max_tick_age)}): is the crontab or CronJob "
                             "still running?"))
    oldest = numbers.backlog_oldest
    if oldest is not None and now - oldest > thresholds.max_backlog_age:
        found.append(Problem(f"{numbers.backlog} due run(s) unclaimed, the oldest for "
                             f"{age(now - oldest)}"))
    for wait in result.waiting:
        if now - wait.oldest > thresholds.max_backlog_age:
            found.append(Problem(
                f"{wait.runs} due run(s) wait for handler {wait.handler!r}, the oldest "
                f"for {age(now - wait.oldest)}: no tick of the last "
                f"{age(thresholds.max_tick_age)} registers it",
                advice=" (try --app MODULE on a tick)"))
    for run in running:
        if run.lease_expires_at < now:
            found.append(Problem(f"run {run.id} of {run.job!r}: lease expired "
                                 f"{age(now - run.lease_expires_at)} ago (worker "
                                 f"{run.lease_owner}); the next tick reclaims it",
                                 job=run.job, run=run.id))
    for job in jobs:  # in name order
        if job.dead_unacknowledged:
            # Red until a person acts, however long ago the run died.
            latest = job.latest_dead_id
            found.append(Problem(
                f"job {job.name!r}: {job.dead_unacknowledged} dead run(s) not "
                f"acknowledged (latest: run {latest})",
                advice=f"; see `cronjobs show {latest}`, then `cronjobs retry {latest}` or "
                       f"`cronjobs ack --all {job.name}`",
                job=job.name, run=latest, acknowledge=True))
        if job.invalid_reason:
            found.append(Problem(f"job {job.name!r} is invalid: {job.invalid_reason}",
                                 job=job.name))
        if job.name in overdue:
            found.append(Problem(f"job {job.name!r}: {overdue[job.name]}", job=job.name))
    listed = sum(bool(job.dead_unacknowledged) + bool(job.invalid_reason)
                 + (job.name in overdue) for job in jobs)
    result.more_problems = counts.problems - listed
    result.lateness = (lateness if lateness is not None
                       else store.reports.start_lateness(now=now))
    found += [Problem(text) for text in judge_lateness(result.lateness, thresholds)]
    result.storage = storage(store, now, exact_sizes=exact_sizes)
    problems, warnings = judge_storage(result.storage, thresholds)
    found += [Problem(text) for text in problems]
    result.warnings += warnings
    return result


def judge_lateness(late: StartLateness, thresholds: Thresholds) -> list[str]:
    """A problem when the p99 start lateness of the last hour is above --max-lateness (equal
    is fine; no run started in the hour: nothing to judge)."""
    limit = thresholds.max_lateness
    if limit is None or late.hour_p99 is None or late.hour_p99 <= limit.total_seconds():
        return []
    return [f"runs start late: p99 {precise(late.hour_p99)} over the last hour "
            f"({late.hour_runs} run(s); threshold {precise(limit.total_seconds())})"]


def lateness_json(late: StartLateness) -> dict[str, Any]:
    """Start lateness as `status --json` and /healthz show it: per window, the runs started
    and p50 / p99 in seconds (None: no run started), and the instant the windows end at
    (``as_of``: /healthz's may be up to a minute older than its ``checked_at``)."""
    return {"as_of": iso(late.at),
            "last_hour": {"runs": late.hour_runs, "p50_seconds": late.hour_p50,
                          "p99_seconds": late.hour_p99},
            "last_day": {"runs": late.day_runs, "p50_seconds": late.day_p50,
                         "p99_seconds": late.day_p99}}


def storage(store: Store, now: dt.datetime, *, exact_sizes: bool = True) -> Storage:
    """The storage's own health at ``now``: catalogs and statistics views, and an index probe
    or two; never a scan of the history. ``exact_sizes``: the sizes by
    pg_total_relation_size (about 0.1 ms a partition), else estimated from the catalog's
    page counts (/healthz)."""
    return Storage(now, store.storage.hot_tables(),
                   store.storage.xmin_holders(limit=XMIN_HOLDERS_SHOWN),
                   store.storage.history_storage(cap=DEFAULT_ROWS_CAP, exact=exact_sizes),
                   exact_sizes)


def judge_storage(st: Storage, thresholds: Thresholds) -> tuple[list[str], list[str]]:
    """(problems, warnings) of the storage (the rules of docs/explanation/storage.md, "Storage
    health")."""
    problems: list[str] = []
    warnings: list[str] = []
    oldest = st.oldest_holder
    held = st.held_for(oldest) if oldest is not None else None
    for table in st.hot:
        floor = thresholds.max_dead_tuples // 10
        if table.dead > thresholds.max_dead_tuples or (
                table.dead > floor and table.dead > DEAD_PER_LIVE * table.live):
            vacuumed = max((t for t in (table.last_autovacuum, table.last_vacuum)
                            if t is not None), default=None)
            when = (f"last vacuumed {age(st.now - vacuumed)} ago" if vacuumed is not None
                    else "never vacuumed")
            why = (f"vacuum cannot remove them while {describe_holder(oldest)} holds its "
                   "snapshot" if oldest is not None and held is not None
                   and held > dt.timedelta(minutes=1)
                   else "is autovacuum running? (see docs/explanation/storage.md)")
            problems.append(
                f"{table.name}: {table.dead} dead row versions beside {table.live} live "
                f"(threshold {thresholds.max_dead_tuples}, or {floor} and {DEAD_PER_LIVE}x "
                f"the live rows); {when}; {why}")
    for holder in st.holders:
        held_age = st.held_for(holder)
        if held_age is not None and held_age > thresholds.max_xmin_age:
            problems.append(
                f"{describe_holder(holder)} has held back vacuum for {age(held_age)} "
                f"({holder.xid_age} transactions; threshold {age(thresholds.max_xmin_age)})"
                + (f": {holder.query!r}" if holder.query else ""))
        elif held_age is None and holder.kind == "replication_slot" and holder.state == "inactive":
            warnings.append(f"{describe_holder(holder)} holds back vacuum "
                            f"({holder.xid_age} transactions) and nothing uses it")
    lag = st.retention_lag
    history = st.history
    if lag is not None and lag > thresholds.max_retention_lag:
        problems.append(
            f"the oldest history partition, {history.oldest_partition}, retired "
            f"{age(lag)} ago and is still there (threshold "
            f"{age(thresholds.max_retention_lag)}): is the tick's retention running?")
    rows = history.default_runs + history.default_attempts
    if rows:
        shown = (f"{history.default_runs}" + ("+" if history.default_runs >= DEFAULT_ROWS_CAP
                                              else "")
                 + f" run(s) and {history.default_attempts}"
                 + ("+" if history.default_attempts >= DEFAULT_ROWS_CAP else "")
                 + " attempt(s)")
        first = history.default_oldest_finished_at
        text = (f"{shown} in the history's default partitions (no partition for their "
                "retirement day)")
        if first is not None and st.now - first > DEFAULT_ROWS_GRACE:
            problems.append(f"{text}, the oldest finished {age(st.now - first)} ago: does "
                            "the tick make the history's partitions?")
        else:
            warnings.append(text)
    return problems, warnings


def describe_holder(holder: XminHolder) -> str:
    """Who holds back vacuum, in a few words (never the query)."""
    if holder.kind == "prepared":
        return f"prepared transaction {holder.name!r} (owner {holder.usename})"
    if holder.kind.startswith("replication_slot"):
        scope = " (system catalogs only)" if holder.kind == "replication_slot_catalog" else ""
        return f"replication slot {holder.name!r}{scope}"
    who = ", ".join(part for part in (
        f"application {holder.application_name!r}" if holder.application_name else None,
        f"user {holder.usename}" if holder.usename else None,
        f"from {holder.client_addr}" if holder.client_addr else None,
        holder.state) if part)
    return f"session pid {holder.pid}" + (f" ({who})" if who else "")


def waiting_for_handlers(store: Store, now: dt.datetime, recent: dt.timedelta,
                         definition_id: int | None = None) -> list[WaitingRuns]:
    """Due handler runs (of one definition, or all) that wait for a handler that no tick
    started in the last ``recent`` has loaded, per handler."""
    return store.ticks.waiting_for_handlers(now=now, handlers=None, since=now - recent,
                                    definition_id=definition_id)


def judge_jobs(store: Store, now: dt.datetime, *, cap: int | None,
               every: bool = False) -> list[JobVerdict]:
    """What is wrong with which job at ``now``, the most serious first (at most ``cap``;
    None: all), each with the counts of all. The schedules of the jobs that may be overdue
    are evaluated here, once each (many jobs share one; a schedule with an H field is one
    per job); the database judges the jobs with them (``job_problems``): no row per job
    comes back unless something is wrong with it. ``every``: also the jobs whose last
    success was read exactly."""
    befores = [(key, *_before(key, now)) for key in store.reports.health_schedules(now=now)]
    return store.reports.job_problems(now=now, befores=befores, cap=cap, every=every)


def _before(key: HealthSchedule, now: dt.datetime) -> tuple[dt.datetime | None, str | None]:
    """The schedule's slot before its latest at or before ``now`` (None: it has none), or
    why it cannot be evaluated."""
    before = _slot_before_latest(key.schedule, key.timezone, key.name, now)
    return (None, before.message) if isinstance(before, ScheduleError) else (before, None)


def _counts(verdicts: list[JobVerdict]) -> JobCounts:
    if not verdicts:
        return JobCounts()
    v = verdicts[0]
    return JobCounts(v.jobs_with_problems, v.dead_jobs, v.dead_runs, v.invalid_jobs,
                     v.overdue_jobs)


def _as_health(v: JobVerdict) -> JobHealth:
    return JobHealth(v.id, v.name, v.schedule, v.timezone, v.created_at, v.schedule_since,
                     v.paused_at, v.invalid_reason, v.last_success_at,
                     v.dead_unacknowledged, v.latest_dead_id, v.cursor_at, v.next_due_at)


def _overdue_text(last: dt.datetime | None, before: dt.datetime, now: dt.datetime) -> str:
    """Why a job is overdue: the slot before its latest (``before``) has had a whole period
    to succeed (the latest may still run)."""
    shown = "never succeeded" if last is None else f"last success {age(now - last)} ago"
    return f"{shown}; expected a success since the slot of {in_zone(before, dt.UTC)}"


def _slot_before_latest(schedule: str, timezone: str, name: str | None, now: dt.datetime
                        ) -> dt.datetime | ScheduleError | None:
    """The schedule's slot before its latest at or before ``now`` (None: it has none), or
    why it cannot be evaluated (``name``: the job's, for an H field)."""
    try:
        sched = schedules.parse(schedule, timezone, hash_key=name or "")
        latest = sched.latest_at_or_before(now)
        return sched.latest_at_or_before(latest - TICK) if latest is not None else None
    except ScheduleError as exc:
        return exc


def storage_json(st: Storage) -> dict[str, Any]:
    """The storage's figures as `status --json` and /healthz show them (here, in core, as
    the dashboard cannot import the CLI's rendering). Sizes in bytes, ages in seconds."""
    history = st.history

    def at(value: dt.datetime | None) -> str | None:
        return None if value is None else value.astimezone(dt.UTC).isoformat()

    def holder(h: XminHolder) -> dict[str, Any]:
        held = st.held_for(h)
        return {"kind": h.kind, "pid": h.pid, "name": h.name, "usename": h.usename,
                "application_name": h.application_name, "client_addr": h.client_addr,
                "state": h.state, "query": h.query, "xid_age": h.xid_age,
                "since": at(h.since),
                "age_seconds": round(held.total_seconds(), 3) if held is not None else None}

    lag = st.retention_lag
    return {
        "hot_tables": [{"table": t.name, "live_tuples": t.live, "dead_tuples": t.dead,
                        "last_autovacuum": at(t.last_autovacuum),
                        "last_vacuum": at(t.last_vacuum),
                        "autovacuum_count": t.autovacuum_count} for t in st.hot],
        "oldest_xmin_holder": holder(st.holders[0]) if st.holders else None,
        "xmin_holders": [holder(h) for h in st.holders],
        "history": {
            "run_partitions": history.run_partitions,
            "attempt_partitions": history.attempt_partitions,
            "oldest_partition": history.oldest_partition,
            "oldest_day": (history.oldest_from.astimezone(dt.UTC).date().isoformat()
                           if history.oldest_from is not None else None),
            "oldest_from": at(history.oldest_from),
            "oldest_until": at(history.oldest_until),
            "retention_lag_seconds": int(lag.total_seconds()) if lag is not None else None,
            "default_partition_rows": {"runs": history.default_runs,
                                       "attempts": history.default_attempts,
                                       "capped_at": DEFAULT_ROWS_CAP},
            "default_oldest_finished_at": at(history.default_oldest_finished_at),
        },
        "bytes": {"queue": history.queue_bytes, "history": history.history_bytes,
                  "kept": history.kept_bytes, "exact": st.exact_sizes},
    }
