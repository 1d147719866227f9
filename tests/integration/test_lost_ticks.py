"""A tick that went away before recording its end (killed, or its database unreachable
when it finished) is closed as lost by the next tick, and `status` shows it.

The row such a crash leaves behind is seeded with SQL, and one tick runs at a pinned
instant: no waiting, no real crash needed (the crash itself is the acceptance tests')."""

from __future__ import annotations

import datetime as dt
import json
from typing import Any

import psycopg

from conftest import Invoke

HOUR = dt.timedelta(hours=1)


def _seed_tick(db: psycopg.Connection[Any], worker: str, tick_at: dt.datetime) -> int:
    row = db.execute("INSERT INTO job_ticks (worker, tick_at, started_at) VALUES (%s, %s, %s) "
                     "RETURNING id", (worker, tick_at, tick_at)).fetchone()
    assert row is not None
    return int(row[0])


def test_the_next_tick_closes_a_lost_tick(cli: Invoke, db: psycopg.Connection[Any]) -> None:
    now_row = db.execute("SELECT date_trunc('second', now())").fetchone()
    assert now_row is not None
    instant: dt.datetime = now_row[0] - dt.timedelta(minutes=1)  # the next tick's, pinned
    lost = _seed_tick(db, "host-a:4242", instant - 3 * HOUR)
    # still running something: its lease is live at the instant
    busy = _seed_tick(db, "host-b:7", instant - 3 * HOUR)
    assert cli("define", "long", "0 0 1 1 *", "--command", "true").exit_code == 0
    db.execute("""
        INSERT INTO job_runs (definition_id, scheduled_for, trigger, status, max_attempts,
                              attempt, eligible_at, started_at, lease_owner, lease_token,
                              lease_expires_at, heartbeat_at, tick_id)
        SELECT id, %(at)s, 'manual', 'running', 1, 1, %(at)s, %(at)s, 'host-b:7',
               gen_random_uuid(), %(now)s + interval '1 minute', %(now)s, %(busy)s
        FROM job_definitions WHERE name = 'long'""",
               {"at": instant - 3 * HOUR, "now": instant, "busy": busy})
    # started a moment ago: it may be materialising, not lost
    recent = _seed_tick(db, "host-c:9", instant - dt.timedelta(minutes=10))
    # a live tick given an old --now: its row was written a moment ago
    pinned = _seed_tick(db, "host-d:3", instant - 3 * HOUR)
    db.execute("UPDATE job_ticks SET started_at = %s WHERE id = %s",
               (instant - dt.timedelta(minutes=1), pinned))

    result = cli("tick", "--now", instant.isoformat(), "--json")
    assert result.exit_code == 0, result.stderr
    report = json.loads(result.stdout)
    assert report["lost_ticks_closed"] == [
        {"tick_id": lost, "worker": "host-a:4242",
         "tick_at": (instant - 3 * HOUR).astimezone(dt.UTC).isoformat()}]
    assert "host-a:4242" in result.stderr  # logged, naming the worker

    rows = {r[0]: r[1:] for r in db.execute(
        "SELECT id, status, finished_at, error FROM job_ticks ORDER BY id")}
    status, finished_at, error = rows[lost]
    assert (status, finished_at) == ("lost", instant)
    assert "worker host-a:4242" in error and "without recording its end" in error
    assert rows[busy][0] == "running"
    assert rows[recent][0] == "running"
    assert rows[pinned][0] == "running"
    ticks = [r for r in rows.values() if r[0] == "finished"]
    assert len(ticks) == 1  # the tick itself

    # a second tick at the same instant finds nothing more to close
    again = json.loads(cli("tick", "--now", instant.isoformat(), "--json").stdout)
    assert again["lost_ticks_closed"] == []

    shown = json.loads(cli("status", "--json").stdout)
    assert shown["lost_ticks"] == {
        "last_day": 1,
        "latest": {"worker": "host-a:4242",
                   "at": (instant - 3 * HOUR).astimezone(dt.UTC).isoformat()}}
    text = cli("status").stdout
    assert "lost ticks      1 in the last day (latest: worker host-a:4242" in text


def test_a_lost_tick_is_not_closed_before_its_time(cli: Invoke,
                                                   db: psycopg.Connection[Any]) -> None:
    now_row = db.execute("SELECT date_trunc('second', now())").fetchone()
    assert now_row is not None
    instant: dt.datetime = now_row[0] - dt.timedelta(minutes=1)
    tick = _seed_tick(db, "host-a:1", instant - HOUR + dt.timedelta(seconds=1))
    report = json.loads(cli("tick", "--now", instant.isoformat(), "--json").stdout)
    assert report["lost_ticks_closed"] == []
    # one hour after it started, holding nothing, it is lost
    later = instant + dt.timedelta(seconds=1)
    report = json.loads(cli("tick", "--now", later.isoformat(), "--allow-future",
                            "--json").stdout)
    assert [t["tick_id"] for t in report["lost_ticks_closed"]] == []
    later += dt.timedelta(seconds=1)
    report = json.loads(cli("tick", "--now", later.isoformat(), "--allow-future",
                            "--json").stdout)
    assert [t["tick_id"] for t in report["lost_ticks_closed"]] == [tick]
