"""Per-job health at scale: status and /healthz judge every job from the definitions and
the few dead runs nobody acknowledged; /metrics writes every job's series in detail only up
to a limit, and otherwise the jobs with a problem."""

from __future__ import annotations

import datetime as dt
from typing import Any

import psycopg

from conftest import Invoke
from cronjobs.core.health import status
from cronjobs.core.metrics import metrics
from cronjobs.db.store import Store


def _define(cli: Invoke, name: str, schedule: str = "* * * * *") -> None:
    result = cli("define", name, schedule, "--command", "true")
    assert result.exit_code == 0, result.stderr


def test_a_last_success_known_to_a_minute_is_read_exactly_when_it_decides(
        cli: Invoke, db: psycopg.Connection[Any], store: Store) -> None:
    # An every-minute job whose last success finished 30 s after the slot before the
    # latest, while the definition, written at most once a minute, still says 20 s before
    # it: the definition alone would call the job overdue; the exact read does not.
    _define(cli, "minutely")
    now = dt.datetime(2026, 11, 25, 12, 0, 40, tzinfo=dt.UTC)
    before = dt.datetime(2026, 11, 25, 11, 59, tzinfo=dt.UTC)  # the slot before 12:00
    db.execute("UPDATE job_definitions SET created_at = %s, schedule_since = %s, "
               "last_succeeded_at = %s", (now - dt.timedelta(hours=1),
                                          now - dt.timedelta(hours=1),
                                          before - dt.timedelta(seconds=20)))
    db.execute("INSERT INTO job_runs (definition_id, scheduled_for, trigger, status, "
               "max_attempts, eligible_at, attempt, started_at, finished_at, stage, retire_at) "
               "SELECT id, %(slot)s, 'schedule', 'succeeded', 1, %(slot)s, 1, %(slot)s, "
               "%(done)s, 'history', %(done)s + interval '14 days' FROM job_definitions",
               {"slot": before, "done": before + dt.timedelta(seconds=30)})
    st = status(store, now=now)
    assert st.overdue == {}
    (job,) = st.jobs
    assert job.last_success_at == before + dt.timedelta(seconds=30)
    # without that run, it is overdue, as the definition said
    db.execute("DELETE FROM job_runs")
    st = status(store, now=now)
    assert list(st.overdue) == ["minutely"]
    assert "expected a success since the slot of 2026-11-25 11:59 UTC" in (
        st.overdue["minutely"])


def test_metrics_write_every_job_in_detail_up_to_the_limit_else_the_jobs_with_a_problem(
        cli: Invoke, db: psycopg.Connection[Any], store: Store) -> None:
    for name in ("fine", "broken", "late"):
        _define(cli, name, "0 0 1 1 *" if name != "late" else "* * * * *")
    db.execute("UPDATE job_definitions SET created_at = now() - interval '1 day', "
               "schedule_since = now() - interval '1 day'")
    db.execute("INSERT INTO job_runs (definition_id, scheduled_for, trigger, status, "
               "max_attempts, eligible_at, attempt, started_at, finished_at, stage, retire_at) "
               "SELECT id, now(), 'manual', 'dead', 1, now(), 1, now(), now(), 'history', "
               "now() + interval '90 days' FROM job_definitions WHERE name = 'broken'")
    detailed = metrics(store)  # 3 jobs: every one in detail
    off = metrics(store, per_job=False)
    assert "cronjobs_job_series_detailed 1.0" in detailed
    assert "cronjobs_job_series_detailed 0.0" in off
    for text in (detailed, off):
        assert "cronjobs_jobs 3.0" in text
        assert "cronjobs_jobs_overdue 1.0" in text
        assert "cronjobs_dead_unacknowledged_runs 1.0" in text
        assert 'cronjobs_job_dead_unacknowledged_runs{job="broken"} 1.0' in text
        assert 'cronjobs_job_overdue{job="late"} 1.0' in text
    assert 'cronjobs_job_overdue{job="fine"} 0.0' in detailed
    assert 'job="fine"' not in off  # nothing wrong with it: no series of its own
    assert 'cronjobs_job_runs{job="broken",status="dead"} 1.0' in detailed
    assert "cronjobs_job_runs{" not in off
    # the command and the server take it as an option
    result = cli("metrics", "--per-job", "off")
    assert result.exit_code == 0, result.stderr
    assert "cronjobs_job_series_detailed 0.0" in result.stdout
    bad = cli("metrics", "--per-job", "sometimes")
    assert bad.exit_code == 2 and "--per-job" in bad.stderr


def test_a_verdict_lists_the_problems_of_20_jobs_the_most_serious_first_and_counts_all(
        cli: Invoke, db: psycopg.Connection[Any], store: Store) -> None:
    # 24 jobs with dead runs nobody acknowledged (two each for the first 4), 1 invalid and
    # 5 overdue: 30 jobs with a problem, 30 problems.
    for i in range(30):
        _define(cli, f"job{i:02d}", "* * * * *" if i >= 25 else "0 0 1 1 *")
    db.execute("UPDATE job_definitions SET created_at = now() - interval '1 day', "
               "schedule_since = now() - interval '1 day'")
    db.execute("UPDATE job_definitions SET invalid_reason = 'bad handler' "
               "WHERE name = 'job24'")
    db.execute("INSERT INTO job_runs (definition_id, scheduled_for, trigger, status, "
               "max_attempts, eligible_at, attempt, started_at, finished_at, stage, retire_at) "
               "SELECT d.id, now() - g * interval '1 minute', 'manual', 'dead', 1, now(), 1, "
               "now(), now(), 'history', now() + interval '90 days' "
               "FROM job_definitions AS d CROSS JOIN generate_series(1, 2) AS g "
               "WHERE d.name < 'job24' AND (g = 1 OR d.name < 'job04') ORDER BY d.name DESC, g")
    def of_jobs(problems: list[str]) -> list[str]:  # (no tick has run, either)
        return [p for p in problems if p.startswith("job '")]

    everything = status(store)  # `cronjobs status`: every problem listed
    assert len(of_jobs(everything.problems)) == 30 and everything.more_problems == 0
    assert len(everything.jobs) == 30
    assert everything.dead_unacknowledged == 28
    assert sorted(everything.overdue) == [f"job{i}" for i in range(25, 30)]
    st = status(store, every_job=False)
    assert not st.healthy
    assert st.counts is not None
    assert (st.counts.jobs, st.counts.dead_jobs, st.counts.dead_runs, st.counts.invalid,
            st.counts.overdue) == (30, 24, 28, 1, 5)
    # the 20 jobs whose latest run died last (they were inserted from job23 down), by name
    assert [j.name for j in st.jobs] == [f"job{i:02d}" for i in range(20)]
    assert len(of_jobs(st.problems)) == 20 and st.more_problems == 10
    assert st.problem_count == len(everything.problems) == 31
    assert of_jobs(st.problems) == [p for p in of_jobs(everything.problems)
                                    if p.split("'")[1] < "job20"]
    assert st.dead_unacknowledged == 28 and st.overdue_jobs == 5
    assert st.overdue == {}  # counted, not listed
    # a cap of 26: the dead, then the invalid, then the overdue longest without a success
    db.execute("UPDATE job_definitions SET last_succeeded_at = now() - interval '2 hours' "
               "WHERE name = 'job25'")
    st = status(store, every_job=False, shown=26)
    assert [j.name for j in st.jobs][-2:] == ["job24", "job26"]  # job25 succeeded once
    assert st.more_problems == 4
    assert st.overdue_jobs == 5 and list(st.overdue) == ["job26"]
    # the exit code of `status --check` and the metrics count every problem
    check = cli("status", "--check", "--json")
    assert check.exit_code == 3
    assert check.stderr.count("problem: job '") == 30
    text = metrics(store, per_job=False)
    assert "cronjobs_jobs_overdue 5.0" in text
    assert "cronjobs_dead_unacknowledged_runs 28.0" in text
    assert "cronjobs_healthy 0.0" in text
