"""Read-only reports: health, what is running, per-job figures, the dashboard's pages."""

from __future__ import annotations

import datetime as dt
from collections.abc import Sequence
from dataclasses import replace

from cronjobs.db.session import Queries
from cronjobs.reports import (
    DashboardJob,
    Health,
    HealthSchedule,
    JobHealth,
    JobStats,
    JobVerdict,
    RunningRun,
    StartLateness,
)


class ReportStore(Queries):
    """Read-only reports: health, what is running, per-job figures, the dashboard's pages."""

    def health(self, now: dt.datetime, *, count_jobs: bool = True) -> Health:
        """The installation's numbers at ``now``; ``jobs`` is None without ``count_jobs``."""
        return self._one("health", {"now": now, "count_jobs": count_jobs}, Health)

    def start_lateness(self, *, now: dt.datetime) -> StartLateness:
        """p50 and p99 start lateness of the runs started in the hour and in the day before
        ``now`` (a range of an index per partition: never the history whole)."""
        late = self._one("start_lateness", {
            "now": now, "hour": now - dt.timedelta(hours=1), "day": now - dt.timedelta(days=1)},
            StartLateness)
        return replace(late, at=now)

    def running_runs(self) -> list[RunningRun]:
        return self._rows("running_runs", None, RunningRun)

    def job_health(self) -> list[JobHealth]:
        """Every job's health as the definitions know it; cheap whatever the history."""
        return self._rows("job_health", None, JobHealth)

    def health_schedules(self, *, now: dt.datetime) -> list[HealthSchedule]:
        """The schedules the verdict evaluates at ``now``: those of the jobs that may be
        overdue."""
        return self._rows("health_schedules", {"now": now}, HealthSchedule)

    def job_problems(self, *, now: dt.datetime,
                     befores: Sequence[tuple[HealthSchedule, dt.datetime | None,
                                             str | None]],
                     cap: int | None, every: bool = False) -> list[JobVerdict]:
        """The jobs with a problem at ``now``, the most serious first, at most ``cap``
        (None: all), each row with the counts of all; ``befores``: per schedule of
        health_schedules, the slot before its latest (or why it cannot be evaluated).
        With ``every``, also the jobs whose last success was read exactly."""
        return self._rows("job_problems", {
            "now": now, "every": every, "cap": cap,
            "schedules": [k.schedule for k, _, _ in befores],
            "timezones": [k.timezone for k, _, _ in befores],
            "names": [k.name for k, _, _ in befores],
            "befores": [before for _, before, _ in befores],
            "errors": [error for _, _, error in befores]}, JobVerdict)

    def last_success(self, definition_id: int) -> dt.datetime | None:
        """When the job's latest success finished, exactly (a probe of each partition)."""
        values = self._values("last_success", {"definition_id": definition_id})
        return values[0] if values else None

    def job_stats(self, *, since: dt.datetime) -> list[JobStats]:
        """Per job numbers; runs by status and retries count the runs not finished yet and
        those finished since ``since``."""
        return self._rows("job_stats", {"since": since}, JobStats)

    def dashboard_jobs(self, *, after: str, search: str | None, limit: int, strip: int
                       ) -> list[DashboardJob]:
        """A page of jobs in name order after ``after``, each with its ``strip`` latest runs
        (``run_ids``, ``run_statuses``, ``run_slots``, ``run_times``: oldest first)."""
        return self._rows("dashboard_jobs", {"after": after, "search": search,
                                             "limit": limit, "strip": strip}, DashboardJob)

    def count_jobs(self, *, search: str | None) -> int:
        values = self._values("count_jobs", {"search": search})
        return int(values[0]) if values else 0

