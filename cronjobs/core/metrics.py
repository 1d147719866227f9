"""``cronjobs metrics`` and the dashboard's ``/metrics``: the health of ``cronjobs status``
in the Prometheus text exposition format, written by Prometheus' own client library.

Every number comes from indexed queries whose cost does not grow with the history: a job's
runs by status and its retries count the runs that finished in the last 24 hours and those
not finished yet, never the whole history (see ``job_stats`` in db/queries/reports.sql).

Per-job series in detail (last duration, lateness, runs by status, retries) cost a few
index probes per job and per day of history: by default (``auto``) they are written for up
to PER_JOB_AUTO jobs. Beyond that, or with ``per_job=False``, the per-job series are
written only for the jobs that have a problem (overdue, or dead runs nobody acknowledged),
at most PER_JOB_AUTO of them (the most serious first), beside the totals, which count
every job.

Only this module imports ``prometheus_client``: `cronjobs tick` never loads it.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterable, Iterator
from typing import Any

from prometheus_client.core import GaugeMetricFamily, Metric
from prometheus_client.exposition import CONTENT_TYPE_LATEST, generate_latest
from prometheus_client.registry import Collector, CollectorRegistry

from cronjobs.core.health import DEFAULT_ROWS_CAP, Status, Storage, status
from cronjobs.db.store import Store
from cronjobs.reports import GroupUsage, JobHealth, JobStats, StartLateness

CONTENT_TYPE = CONTENT_TYPE_LATEST


# `auto`: per-job series in detail up to this many jobs
PER_JOB_AUTO = 1_000
# How far back a job's runs by status and retries count: a window, so that the cost of a
# scrape does not grow with the history kept.
RECENT = dt.timedelta(days=1)


def metrics(store: Store, *, now: dt.datetime | None = None,
            per_job: bool | None = None, lateness: StartLateness | None = None) -> str:
    """The exposition text for the state of the installation at ``now`` (default: the
    database's clock). ``per_job``: the per-job series in detail (None: for up to
    PER_JOB_AUTO jobs). ``lateness``: see :func:`~cronjobs.core.health.status`."""
    registry = CollectorRegistry(auto_describe=False)
    # the jobs with a problem, if any: all of them when every job is in detail
    st = status(store, now=now, every_job=False,
                shown=None if per_job else PER_JOB_AUTO, lateness=lateness)
    groups = [g for g in store.groups.group_usage(now=st.now) if g.max_running is not None]
    counted = st.numbers.jobs
    assert counted is not None  # noqa: S101 - status() counts them unless told not to
    detailed = per_job if per_job is not None else counted <= PER_JOB_AUTO
    stats = store.reports.job_stats(since=st.now - RECENT) if detailed else None
    registry.register(_Snapshot(st, groups, stats))
    return generate_latest(registry).decode("utf-8")


class _Snapshot(Collector):
    """One status, as gauges (each scrape builds a new one: nothing is kept between)."""

    def __init__(self, st: Status, groups: list[GroupUsage],
                 stats: list[JobStats] | None) -> None:
        self.st = st
        self.groups = groups  # the groups that have a limit
        self.stats = stats  # the per-job figures in detail, when asked for

    def collect(self) -> Iterator[Metric]:
        st = self.st
        n = st.numbers
        jobs = st.jobs
        oldest = n.backlog_oldest
        yield _gauge("cronjobs_last_tick_timestamp_seconds",
                     "When the last tick started (0: never).", [({}, _ts(n.last_tick_at))])
        yield _gauge("cronjobs_ticks_last_hour", "Ticks started in the last hour.",
                     [({}, n.ticks_last_hour)])
        yield _gauge("cronjobs_lost_ticks_last_day",
                     "Ticks closed as lost in the last day: they went away without recording "
                     "their end.", [({}, n.lost_ticks_last_day)])
        yield _gauge("cronjobs_backlog_runs", "Runs due but not claimed yet.",
                     [({}, n.backlog)])
        yield _gauge("cronjobs_backlog_oldest_seconds",
                     "Age of the oldest due, unclaimed run (0: none).",
                     [({}, (st.now - oldest).total_seconds() if oldest else 0.0)])
        yield _gauge("cronjobs_handler_waiting_runs",
                     "Due runs waiting for a handler that no recent tick has loaded (see --app).",
                     [({"handler": w.handler}, w.runs) for w in st.waiting])
        yield _gauge("cronjobs_running_runs", "Runs held by a worker.", [({}, n.running)])
        late = st.lateness
        if late is not None:
            windows = (("1h", late.hour_runs, late.hour_p50, late.hour_p99),
                       ("1d", late.day_runs, late.day_p50, late.day_p99))
            yield _gauge("cronjobs_start_lateness_seconds",
                         "Start lateness (started_at - scheduled_for) of the scheduled and "
                         "manual runs whose first attempt started in the window, by quantile "
                         "(no series: no run started).",
                         [({"window": w, "quantile": q}, v) for w, _, p50, p99 in windows
                          for q, v in (("0.5", p50), ("0.99", p99)) if v is not None])
            yield _gauge("cronjobs_started_runs",
                         "The runs cronjobs_start_lateness_seconds counts, by window.",
                         [({"window": w}, runs) for w, runs, _, _ in windows])
        yield _gauge("cronjobs_healthy",
                     "1 when `cronjobs status --check` finds nothing wrong, else 0.",
                     [({}, 1.0 if st.healthy else 0.0)])
        yield _gauge("cronjobs_jobs", "Jobs defined (not removed).", [({}, n.jobs)])
        yield _gauge("cronjobs_jobs_overdue",
                     "Jobs whose last success is older than their schedule allows.",
                     [({}, st.overdue_jobs)])
        yield _gauge("cronjobs_dead_unacknowledged_runs",
                     "Dead runs nobody acknowledged yet (`cronjobs ack`), of all jobs.",
                     [({}, st.dead_unacknowledged)])
        yield _gauge("cronjobs_job_series_detailed",
                     "1 when every job has its series in detail; 0 when only the jobs with a "
                     "problem do (more than the per-job limit: see --per-job).",
                     [({}, 1.0 if self.stats is not None else 0.0)])
        # every job in detail, or only those with a problem
        stats = self.stats or []
        shown: list[JobHealth] = list(stats) if self.stats is not None else [
            j for j in jobs if j.name in st.overdue or j.dead_unacknowledged]
        yield _gauge("cronjobs_job_last_success_timestamp_seconds",
                     "When the job's last successful run finished (0: never).",
                     [({"job": j.name}, _ts(j.last_success_at))
                      for j in (stats if self.stats is not None else shown)])
        yield _gauge("cronjobs_job_last_duration_seconds", "Duration of the job's last run.",
                     [({"job": j.name}, j.last_duration.total_seconds()) for j in stats
                      if j.last_duration is not None])
        yield _gauge("cronjobs_job_lateness_seconds",
                     "Start of the first attempt of the job's last finished scheduled run "
                     "minus its slot (backfilled, manual and retried runs do not count).",
                     [({"job": j.name}, max(0.0, j.last_lateness.total_seconds()))
                      for j in stats if j.last_lateness is not None])
        yield _gauge("cronjobs_job_runs",
                     "The job's runs not finished yet, and those that finished in the last "
                     "24 hours, by status.",
                     [({"job": j.name, "status": s}, count)
                      for j in stats for s, count in sorted(j.runs_by_status.items())])
        yield _gauge("cronjobs_job_retries",
                     "Attempts beyond the first, of the job's runs counted by cronjobs_job_runs.",
                     [({"job": j.name}, j.retries) for j in stats])
        yield _gauge("cronjobs_job_dead_runs",
                     "The job's runs that died in the last 24 hours.",
                     [({"job": j.name}, j.runs_by_status.get("dead", 0)) for j in stats])
        yield _gauge("cronjobs_job_dead_unacknowledged_runs",
                     "The job's dead runs nobody acknowledged yet (`cronjobs ack`).",
                     [({"job": j.name}, j.dead_unacknowledged) for j in shown])
        yield _gauge("cronjobs_job_overdue",
                     "1 when the job's last success is older than its schedule allows.",
                     [({"job": j.name}, 1.0 if j.name in st.overdue else 0.0) for j in shown])
        yield _gauge("cronjobs_group_max_running",
                     "The group's limit: at most this many of its runs at once.",
                     [({"group": g.name}, g.max_running or 0) for g in self.groups])
        yield _gauge("cronjobs_group_running_runs", "The group's runs held by a worker.",
                     [({"group": g.name}, g.running) for g in self.groups])
        yield _gauge("cronjobs_group_waiting_runs",
                     "The group's due runs not running (waiting for a free slot when it is "
                     "full).",
                     [({"group": g.name}, g.waiting) for g in self.groups])
        if st.storage is not None:
            yield from _storage(st.storage)


def _storage(st: Storage) -> Iterator[Metric]:
    """The storage's own health (docs/explanation/storage.md, "Storage health")."""
    yield _gauge("cronjobs_table_dead_tuples",
                 "Dead row versions in a hot table (pg_stat_user_tables.n_dead_tup).",
                 [({"table": t.name}, t.dead) for t in st.hot])
    yield _gauge("cronjobs_table_live_tuples",
                 "Live rows in a hot table (pg_stat_user_tables.n_live_tup).",
                 [({"table": t.name}, t.live) for t in st.hot])
    yield _gauge("cronjobs_table_last_autovacuum_timestamp_seconds",
                 "When autovacuum last vacuumed a hot table (0: never).",
                 [({"table": t.name}, _ts(t.last_autovacuum)) for t in st.hot])
    oldest = st.oldest_holder
    held = st.held_for(oldest) if oldest is not None else None
    yield _gauge("cronjobs_xmin_holder_age_seconds",
                 "How long the oldest transaction holding back vacuum has been open (0: none, "
                 "or not known, as for a replication slot).",
                 [({}, held.total_seconds() if held is not None else 0.0)])
    yield _gauge("cronjobs_xmin_holder_xid_age",
                 "Age in transactions of the oldest xmin holding back vacuum (0: none).",
                 [({}, oldest.xid_age if oldest is not None else 0)])
    yield _gauge("cronjobs_xmin_holder_info",
                 "Who holds back vacuum the longest (1; no sample when nothing does).",
                 [({"kind": oldest.kind, "pid": str(oldest.pid or ""),
                    "name": oldest.name or "", "usename": oldest.usename or "",
                    "application_name": oldest.application_name or "",
                    "client_addr": oldest.client_addr or "", "state": oldest.state or ""}, 1)]
                 if oldest is not None else [])
    h = st.history
    yield _gauge("cronjobs_history_partitions",
                 "The history's daily partitions (the default partition not counted).",
                 [({"table": "job_runs"}, h.run_partitions),
                  ({"table": "job_attempts"}, h.attempt_partitions)])
    yield _gauge("cronjobs_history_oldest_partition_end_timestamp_seconds",
                 "The end of the oldest history partition's day: retention drops it after "
                 "this instant (0: no partition).", [({}, _ts(h.oldest_until))])
    yield _gauge("cronjobs_history_default_partition_rows",
                 f"Rows in the history's default partition (counted up to {DEFAULT_ROWS_CAP}; "
                 "should be 0).",
                 [({"table": "job_runs"}, h.default_runs),
                  ({"table": "job_attempts"}, h.default_attempts)])
    yield _gauge("cronjobs_storage_bytes",
                 "Bytes on disk of job_runs and job_attempts (tables, indexes, TOAST), by "
                 "stage: queue, history, kept.",
                 [({"stage": "queue"}, h.queue_bytes), ({"stage": "history"}, h.history_bytes),
                  ({"stage": "kept"}, h.kept_bytes)])


def _gauge(name: str, documentation: str,
           samples: Iterable[tuple[dict[str, str], Any]]) -> GaugeMetricFamily:
    samples = list(samples)
    labels = sorted({key for sample_labels, _ in samples for key in sample_labels})
    family = GaugeMetricFamily(name, documentation, labels=labels)
    for sample_labels, value in samples:
        family.add_metric([sample_labels[key] for key in labels], float(value))
    return family


def _ts(value: dt.datetime | None) -> float:
    return value.timestamp() if value is not None else 0.0
