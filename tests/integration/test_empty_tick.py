"""The statements that let an empty tick skip the transactions that lock and decide: each
says yes exactly when the locking statement after it would find something."""

from __future__ import annotations

import datetime as dt
import json
from typing import Any

import psycopg

from conftest import Invoke
from cronjobs.db.store import Store


def _db_now(db: psycopg.Connection[Any]) -> dt.datetime:
    row = db.execute("SELECT now()").fetchone()
    assert row is not None
    return row[0].astimezone(dt.UTC)


def test_anything_to_materialise_sees_each_kind_of_work(
        cli: Invoke, db: psycopg.Connection[Any], store: Store) -> None:
    assert cli("define", "yearly", "0 0 1 1 *", "--command", "true").exit_code == 0
    now = _db_now(db)
    assert store.materialise.anything_to_materialise(now=now) is False
    # a slot due
    db.execute("UPDATE job_definitions SET next_due_at = %s", (now - dt.timedelta(minutes=1),))
    assert store.materialise.anything_to_materialise(now=now) is True
    # no next slot (a definition inserted with SQL)
    db.execute("UPDATE job_definitions SET next_due_at = NULL")
    assert store.materialise.anything_to_materialise(now=now) is True
    # ... unless it is invalid, or removed
    db.execute("UPDATE job_definitions SET invalid_reason = 'broken'")
    assert store.materialise.anything_to_materialise(now=now) is False
    db.execute("UPDATE job_definitions SET invalid_reason = NULL, removed_at = %s", (now,))
    assert store.materialise.anything_to_materialise(now=now) is False
    db.execute("UPDATE job_definitions SET removed_at = NULL, next_due_at = %s",
               (now + dt.timedelta(days=1),))
    # a one-off run whose time has come, not before
    at = now + dt.timedelta(hours=1)
    made = cli("trigger", "yearly", "--at", at.isoformat(), "--json")
    assert made.exit_code == 0, made.stderr
    assert json.loads(made.stdout)["status"] == "scheduled"
    assert store.materialise.anything_to_materialise(now=now) is False
    assert store.materialise.anything_to_materialise(now=at) is True


def test_leases_expired_sees_a_lease_that_ran_out(
        cli: Invoke, db: psycopg.Connection[Any], store: Store) -> None:
    assert cli("define", "yearly", "0 0 1 1 *", "--command", "true").exit_code == 0
    assert cli("trigger", "yearly").exit_code == 0
    now = _db_now(db)
    assert store.queue.leases_expired(now=now) is False  # queued, not running
    db.execute("UPDATE job_runs_queue SET status = 'running', attempt = 1, "
               "lease_owner = 'w', lease_token = gen_random_uuid(), started_at = %s, "
               "heartbeat_at = %s, lease_expires_at = %s",
               (now, now, now + dt.timedelta(minutes=1)))
    assert store.queue.leases_expired(now=now) is False  # live
    assert store.queue.leases_expired(now=now + dt.timedelta(minutes=2)) is True
    # and the tick that sees it reclaims it
    result = cli("tick", "--now", (now + dt.timedelta(minutes=2)).isoformat(),
                 "--allow-future", "--max-runs", "0", "--json")
    assert result.exit_code == 0, result.stderr
    assert json.loads(result.stdout)["counts"]["reclaimed"] == 1
