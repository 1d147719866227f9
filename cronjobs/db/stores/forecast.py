"""The forecast's reads: the jobs it expands, the one-off runs waiting for their time, and
the capacity the history shows (how fast bursts of runs started, each job's run time)."""

from __future__ import annotations

import datetime as dt
from collections.abc import Collection

from cronjobs.db.session import Queries
from cronjobs.reports import BurstRate, ForecastGroup, OneOffRun, TypicalRunTime


class ForecastStore(Queries):
    """The forecast's reads: the jobs it expands, the one-off runs waiting for their time,
    and the capacity the history shows."""

    def forecast_jobs(self) -> list[ForecastGroup]:
        """Every job not removed and not marked invalid, paused or not, in groups that
        share a schedule as written, a zone, a kind and a pause (H: one job a group)."""
        return self._rows("forecast_jobs", None, ForecastGroup)

    def one_off_runs(self, *, start: dt.datetime, end: dt.datetime) -> list[OneOffRun]:
        """The one-off runs waiting for a time in [start, end)."""
        return self._rows("forecast_one_off_runs", {"start": start, "end": end}, OneOffRun)

    def burst_rates(self, *, since: dt.datetime) -> list[BurstRate]:
        """Per job kind, how fast the runs of shared slots started (scheduled runs finished
        since ``since``, first attempts)."""
        return self._rows("run_capacity", {"since": since}, BurstRate)

    def typical_run_times(self, ids: Collection[int]) -> list[TypicalRunTime]:
        """The median run time of each of these jobs over its last 20 successes (jobs
        without one are left out)."""
        return self._rows("typical_run_times", {"ids": list(ids)}, TypicalRunTime)
