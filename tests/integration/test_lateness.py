"""Start lateness as a service level: p50 and p99 of started_at - scheduled_for over the last
hour and the last day, in `status` (and `--check --max-lateness`), /metrics, /healthz and the
dashboard. Runs seeded with SQL in every partition, the clock pinned."""

from __future__ import annotations

import datetime as dt
import json
import time
from typing import Any

import psycopg
import pytest
from starlette.testclient import TestClient

from conftest import Invoke
from cronjobs.core.health import status
from cronjobs.core.metrics import metrics
from cronjobs.core.thresholds import Thresholds
from cronjobs.db.store import Store
from cronjobs.web.app import create_app
from cronjobs.web.site import Settings

NOW = dt.datetime(2030, 1, 1, 12, 0, tzinfo=dt.UTC)

# One run per row: (partition, trigger, attempt, started seconds before NOW, lateness in
# seconds). The last hour holds 101 counted runs late by 0 … 100 s; earlier in the day 99
# more, late by 200 … 298 s; and runs that must not count.
HOUR = [("history", "schedule", 1, 30 + i, float(i)) for i in range(1, 100)] + [
    ("kept", "manual", 1, 10, 0.0),  # the kept runs count, and manual runs
    ("queue", "schedule", 1, 5, 100.0),  # and the runs still running
]
EARLIER = [("history", "schedule", 1, 7200 + 60 * i, 200.0 + i) for i in range(99)]
IGNORED = [
    ("history", "backfill", 1, 60, 5000.0),  # late on purpose
    ("history", "schedule", 2, 60, 5000.0),  # retried: its start is the retry's
    ("history", "schedule", 1, 86_400 + 60, 5000.0),  # started more than a day ago
    ("history", "schedule", 1, -60, 5000.0),  # after the pinned instant
]


def _seed(db: psycopg.Connection[Any], runs: list[tuple[str, str, int, float, float]], *,
          now: dt.datetime, job_name: str = "late") -> None:
    (job,) = db.execute(
        "INSERT INTO job_definitions (name, schedule, kind, command, cursor_at, next_due_at) "
        "VALUES (%s, '* * * * *', 'command', 'true', %s, %s) RETURNING id",
        (job_name, now, now + dt.timedelta(days=365))).fetchone() or (0,)
    for stage, trigger, attempt, ago, late in runs:
        started = now - dt.timedelta(seconds=ago)
        running = stage == "queue"
        db.execute(
            "INSERT INTO job_runs (definition_id, scheduled_for, trigger, status, attempt, "
            "max_attempts, eligible_at, started_at, finished_at, lease_owner, lease_token, "
            "lease_expires_at, stage, retire_at) "
            "VALUES (%(job)s, %(slot)s, %(trigger)s, %(status)s, %(attempt)s, 3, %(slot)s, "
            "%(started)s, %(finished)s, %(owner)s, %(token)s, %(lease)s, %(stage)s, "
            "%(retire)s)",
            {"job": job, "slot": started - dt.timedelta(seconds=late), "trigger": trigger,
             "status": "running" if running else "succeeded", "attempt": attempt,
             "started": started,
             "finished": None if running else started + dt.timedelta(seconds=1),
             "owner": "w" if running else None,
             "token": "00000000-0000-0000-0000-000000000001" if running else None,
             "lease": now + dt.timedelta(minutes=1) if running else None,
             "stage": stage,
             "retire": None if running else now + dt.timedelta(days=14)})


@pytest.fixture
def seeded(db: psycopg.Connection[Any]) -> psycopg.Connection[Any]:
    _seed(db, HOUR + EARLIER + IGNORED, now=NOW)
    return db


def test_the_percentiles_are_exact(store: Store, seeded: psycopg.Connection[Any]) -> None:
    late = store.reports.start_lateness(now=NOW)
    # the hour: 0 … 100 s, 101 runs (percentile_cont: p99 at position 99 of 0 … 100)
    assert (late.hour_runs, late.hour_p50, late.hour_p99) == (101, 50.0, 99.0)
    # the day: 0 … 100 and 200 … 298, 200 runs: p50 between the 100th and 101st (99, 100),
    # p99 at 0.99 x 199 = 197.01, between 296 and 297
    assert (late.day_runs, late.day_p50) == (200, 99.5)
    assert late.day_p99 == pytest.approx(296.01, abs=1e-9)


def test_nothing_started_is_none_not_zero(store: Store) -> None:
    late = store.reports.start_lateness(now=NOW)
    assert (late.hour_runs, late.hour_p50, late.hour_p99, late.day_runs, late.day_p50,
            late.day_p99) == (0, None, None, 0, None, None)
    assert status(store, Thresholds(max_lateness=dt.timedelta(seconds=1)),
                  now=NOW).lateness == late
    assert not [p for p in status(store, Thresholds(max_lateness=dt.timedelta(seconds=1)),
                                  now=NOW).problems if p.startswith("runs start late")]


def _late_problems(store: Store, limit: dt.timedelta | None) -> list[str]:
    st = status(store, Thresholds(max_lateness=limit), now=NOW)
    return [p for p in st.problems if p.startswith("runs start late")]


def test_the_threshold_edge(store: Store, seeded: psycopg.Connection[Any]) -> None:
    assert _late_problems(store, None) == []  # off by default
    assert _late_problems(store, dt.timedelta(seconds=99)) == []  # equal: fine
    assert _late_problems(store, dt.timedelta(seconds=98)) == [
        "runs start late: p99 1m39s over the last hour (101 run(s); threshold 1m38s)"]


def test_metrics_carry_the_percentiles(store: Store, seeded: psycopg.Connection[Any]) -> None:
    text = metrics(store, now=NOW)
    for line in ('cronjobs_start_lateness_seconds{quantile="0.5",window="1h"} 50.0',
                 'cronjobs_start_lateness_seconds{quantile="0.99",window="1h"} 99.0',
                 'cronjobs_start_lateness_seconds{quantile="0.5",window="1d"} 99.5',
                 'cronjobs_started_runs{window="1h"} 101.0',
                 'cronjobs_started_runs{window="1d"} 200.0'):
        assert line in text.splitlines(), line


def _healthy_now(db: psycopg.Connection[Any]) -> dt.datetime:
    """Seed the runs around the database's clock, with a tick just now (so that the
    lateness is all there is to judge)."""
    (now,) = db.execute("SELECT now()").fetchone() or (NOW,)
    db.execute("INSERT INTO job_ticks (worker, tick_at, started_at, status) "
               "VALUES ('w', now(), now(), 'finished')")
    _seed(db, HOUR + EARLIER, now=now)
    # (the running run's lease holds: nothing else is a problem)
    return now


def test_status_check_turns_red_past_max_lateness(cli: Invoke,
                                                  db: psycopg.Connection[Any]) -> None:
    _healthy_now(db)
    shown = cli("status")
    assert shown.exit_code == 0, shown.stderr
    assert ("start lateness  last hour p50 50s, p99 1m39s (101 run(s)); last day p50 1m40s"
            ", p99 4m56s (200 run(s))") in shown.stdout.splitlines()
    data = json.loads(cli("status", "--json").stdout)["start_lateness"]
    assert data["last_hour"] == {"runs": 101, "p50_seconds": 50.0, "p99_seconds": 99.0}
    assert (data["last_day"]["runs"], data["last_day"]["p50_seconds"]) == (200, 99.5)
    assert cli("status", "--check").exit_code == 0
    assert cli("status", "--check", "--max-lateness", "99s").exit_code == 0
    red = cli("status", "--check", "--max-lateness", "98s")
    assert red.exit_code == 3
    assert ("problem: runs start late: p99 1m39s over the last hour (101 run(s); threshold "
            "1m38s)") in red.stderr.splitlines()


@pytest.mark.parametrize("bad", ["0s", "soon", "-5s", "40d"])
def test_a_bad_max_lateness_is_refused(cli: Invoke, bad: str) -> None:
    result = cli("status", "--check", "--max-lateness", bad)
    assert result.exit_code == 2
    assert result.stdout == ""
    assert "--max-lateness" in result.stderr


def test_healthz_and_the_dashboard_show_it(database_url: str,
                                           db: psycopg.Connection[Any]) -> None:
    _healthy_now(db)
    strict = Thresholds(max_lateness=dt.timedelta(seconds=98))
    app = create_app(Settings(conninfo=database_url, thresholds=strict))
    with TestClient(app, raise_server_exceptions=False) as client:
        answer = client.get("/healthz")
        assert answer.status_code == 503
        assert answer.json()["problems"] == [
            "runs start late: p99 1m39s over the last hour (101 run(s); threshold 1m38s)"]
        assert answer.json()["start_lateness"]["last_hour"]["p99_seconds"] == 99.0
        page = client.get("/").text
        assert 'data-card="lateness"' in page
        assert "Start lateness p99, 1 h</span><span class=\"value\">1m39s</span>" in page
        assert "p50 50s · 24 h p50 1m40s, p99 4m56s" in page
    lenient = Thresholds(max_lateness=dt.timedelta(seconds=99))
    with TestClient(create_app(Settings(conninfo=database_url, thresholds=lenient))) as ok:
        assert ok.get("/healthz").status_code == 200


def test_the_server_keeps_the_figures_and_refreshes_them_off_the_request(
        database_url: str, db: psycopg.Connection[Any]) -> None:
    """Their cost follows the runs of the day, so a probe does not pay it: the server keeps
    the figures for `lateness_for`, and once they are older a refresh runs in a thread of
    its own while the requests answer with the kept figures (``as_of`` says when)."""
    now = _healthy_now(db)
    app = create_app(Settings(conninfo=database_url, lateness_for=dt.timedelta(seconds=1)))
    with TestClient(app) as client:
        first = client.get("/healthz").json()
        late = first["start_lateness"]
        assert late["last_hour"]["runs"] == 101
        # the first request worked them out
        assert _at(late["as_of"]) == _at(first["checked_at"])
        # one more run started in the hour, now the figures are kept
        _seed(db, [("history", "schedule", 1, 1, 0.0)], now=now, job_name="later")
        time.sleep(1.1)  # the kept figures are now older than lateness_for
        stale = client.get("/healthz").json()
        # this request answers with the kept figures and starts the refresh
        assert stale["start_lateness"] == late
        fresh = late
        for _ in range(100):  # the refresh, off the request path
            fresh = client.get("/healthz").json()["start_lateness"]
            if fresh["as_of"] != late["as_of"]:
                break
            time.sleep(0.1)
        assert _at(fresh["as_of"]) > _at(late["as_of"])
        assert fresh["last_hour"]["runs"] == 102
        assert fresh["last_day"]["runs"] == 201
        # /metrics shows the same kept figures
        assert 'cronjobs_started_runs{window="1h"} 102.0' in client.get("/metrics").text


def test_status_works_the_figures_out_at_its_own_instant(cli: Invoke,
                                                          db: psycopg.Connection[Any]) -> None:
    _healthy_now(db)
    data = json.loads(cli("status", "--json").stdout)
    assert _at(data["start_lateness"]["as_of"]) == _at(data["now"])


def _at(text: str) -> dt.datetime:
    return dt.datetime.fromisoformat(text)
