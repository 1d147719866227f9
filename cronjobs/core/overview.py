"""What the dashboard shows, gathered by the functions the commands use: the jobs table (one
page of jobs, each with its state, next fire time and latest runs, read with one indexed
query whatever the size of the history) and a job's page (`describe`, `explain` of the last
24 hours as a timeline, its latest runs with their attempts)."""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass

from cronjobs.core.definitions import Description, describe, job_info
from cronjobs.core.explain import REASONS, Explained, explain
from cronjobs.core.facts import JobInfo
from cronjobs.db.store import Store
from cronjobs.errors import UsageError
from cronjobs.models import Definition, Run
from cronjobs.reports import Attempt, DashboardJob
from cronjobs.validation import check_name, check_text

PAGE = 50  # jobs per page
STRIP = 20  # latest runs shown per job
MAX_SEARCH = 128
TIMELINE_ROWS = 300  # the newest rows of a job's timeline shown
# the most runs a job's timeline reads, as many as the rows it shows: a job that ran more
# often in the last 24 hours (every 4 minutes or more often, backfills, bursts of manual
# runs) shows the span of its newest TIMELINE_RUNS runs instead, so that the page costs
# the same whatever the job's history holds
TIMELINE_RUNS = TIMELINE_ROWS


@dataclass(frozen=True)
class Mark:
    """One of a job's latest runs, as a coloured mark of the strip."""

    id: int
    status: str
    slot: dt.datetime
    at: dt.datetime  # when it finished, else started, else became eligible


@dataclass(frozen=True)
class JobLine:
    definition: Definition
    info: JobInfo  # its facts: state, next fire time, last run (cronjobs.core.facts)
    marks: tuple[Mark, ...]  # oldest first

    @property
    def problem(self) -> str | None:
        """Why the schedule cannot be evaluated."""
        return self.info.problem

    @property
    def last(self) -> Mark | None:
        return self.marks[-1] if self.marks else None


@dataclass(frozen=True)
class Overview:
    now: dt.datetime
    jobs: tuple[JobLine, ...]
    total: int  # jobs matching the search, on every page
    search: str | None
    after: str
    next_after: str | None  # the `after` of the next page, None on the last


def overview(store: Store, *, after: str = "", search: str | None = None,
             limit: int = PAGE, strip: int = STRIP) -> Overview:
    """One page of the jobs table: the jobs named after ``after`` (in name order) whose
    name contains ``search``. (The installation's numbers the page shows beside them are
    its health verdict's: read once for the banner, not once more here.)"""
    if after:
        check_name(after, what="page start")
    search = check_text(search.strip(), what="search", limit=MAX_SEARCH) if search else None
    if not 1 <= limit <= 1000 or not 1 <= strip <= 100:
        raise UsageError("invalid page size")
    search = search or None
    now = store.now()
    rows = store.reports.dashboard_jobs(after=after, search=search, limit=limit + 1, strip=strip)
    more = len(rows) > limit
    rows = rows[:limit]
    jobs = tuple(_line(row, now) for row in rows)
    return Overview(now, jobs, store.reports.count_jobs(search=search),
                    search, after, jobs[-1].definition.name if more and jobs else None)


def _line(row: DashboardJob, now: dt.datetime) -> JobLine:
    marks = tuple(Mark(*fields) for fields in zip(
        row.run_ids or (), row.run_statuses or (), row.run_slots or (),
        row.run_times or (), strict=True))
    last = marks[-1] if marks else None
    info = job_info(row, now, last_run_state=last.status if last is not None else None,
                          last_run_at=last.at if last is not None else None)
    return JobLine(row, info, marks)


@dataclass(frozen=True)
class Moment:
    """A row of a job's timeline: one run, or consecutive slots with the same fate."""

    first_slot: dt.datetime
    last_slot: dt.datetime
    slots: int | None
    outcome: str  # a run's status, "skipped", "pending", "not-a-slot" or "unknown"
    why: str | None  # the reason in words, for skipped slots
    detail: str | None
    run: Run | None
    late: dt.timedelta | None  # how late a scheduled run's first attempt started, if late


@dataclass(frozen=True)
class JobPage:
    description: Description
    now: dt.datetime
    start: dt.datetime
    timeline: tuple[Moment, ...]  # newest first
    hidden: int  # older timeline rows not shown
    cut: bool  # whether the timeline starts after 24 hours ago (see TIMELINE_RUNS)
    attempts: dict[int, tuple[Attempt, ...]]  # of the latest runs, by run id


def job_page(store: Store, name: str, *, runs: int = STRIP, upcoming: int = 8) -> JobPage:
    """A job's page: its definition and next slots, what became of each slot of the last 24
    hours (runs, skips and why, lateness) or, for a job that ran more than TIMELINE_RUNS
    times in them, of the span of its newest TIMELINE_RUNS runs, and its latest runs with
    their attempts."""
    description = describe(store, name, count=upcoming, runs=runs)
    end = store.now()
    day = end - dt.timedelta(days=1)
    start = store.runs.timeline_start(name, start=day, end=end, runs=TIMELINE_RUNS)
    explanation = explain(store, name, start=max(day, start or day), end=end)
    moments = _moments(explanation.rows)
    shown = tuple(reversed(moments[-TIMELINE_ROWS:]))
    found: dict[int, list[Attempt]] = {}
    for attempt in store.runs.attempts_of_runs([r.id for r in description.recent_runs]):
        found.setdefault(attempt.run_id, []).append(attempt)
    return JobPage(description, explanation.end, explanation.start, shown,
                   max(0, len(moments) - TIMELINE_ROWS), start is not None and start > day,
                   {run_id: tuple(attempts) for run_id, attempts in found.items()})


def _moments(rows: tuple[Explained, ...]) -> list[Moment]:
    moments: list[Moment] = []
    for row in rows:
        why = REASONS.get(row.reason, row.reason) if row.reason else None
        previous = moments[-1] if moments else None
        if (row.run is None and previous is not None and previous.run is None
                and (previous.outcome, previous.why, previous.detail)
                == (row.outcome, why, row.detail)):
            count = (None if previous.slots is None or row.slot_count is None
                     else previous.slots + row.slot_count)
            moments[-1] = Moment(previous.first_slot, row.last_slot, count, row.outcome, why,
                                 row.detail, None, None)
            continue
        late = row.info.lateness if row.info is not None and row.info.late else None
        moments.append(Moment(row.first_slot, row.last_slot, row.slot_count, row.outcome, why,
                              row.detail, row.run, late))
    return moments
