"""The thresholds of health: how old, how far behind, how many is a problem (`status
--check`, the dashboard's /healthz). Apart from core.health, which judges by them, so that
the command line's options can build them without importing what status reads."""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass


@dataclass(frozen=True)
class Thresholds:
    max_tick_age: dt.timedelta = dt.timedelta(minutes=5)
    max_backlog_age: dt.timedelta = dt.timedelta(minutes=5)
    # dead row versions in a hot table (job_runs_queue, job_attempts_queue)
    max_dead_tuples: int = 100_000
    # the age of the oldest transaction holding back vacuum
    max_xmin_age: dt.timedelta = dt.timedelta(hours=1)
    # how long after its last retirement instant the oldest history partition may remain
    max_retention_lag: dt.timedelta = dt.timedelta(days=2)
    # the p99 start lateness of the last hour's runs (None: not judged)
    max_lateness: dt.timedelta | None = None
