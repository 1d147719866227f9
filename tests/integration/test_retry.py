"""The one retry home (cronjobs.db.retry): which database errors are transient, a call
repeated through a lost connection, and the holder's failure count fenced by its lease."""

from __future__ import annotations

import datetime as dt
from typing import Any

import psycopg
import pytest
from psycopg import errors as pgerrors
from psycopg.conninfo import make_conninfo

from conftest import Invoke
from cronjobs.db.connect import connect
from cronjobs.db.retry import DEFAULT, retrying
from cronjobs.db.store import Store
from cronjobs.errors import DatabaseUnavailable
from cronjobs.models import AttemptOutcome, Claimed, Outcome, RunStatus


def _one_claimed_run(cli: Invoke, store: Store, pause_after: str) -> Claimed:
    assert cli("define", "flaky", "0 0 1 1 *", "--command", "false",
               "--pause-after-failures", pause_after).exit_code == 0
    assert cli("backfill", "--yes", "flaky", "--from", "2021-01-01T00:00:00Z",
               "--to", "2021-01-01T00:00:00Z").exit_code == 0
    claims = store.queue.claim_runs(now=store.now(), worker="a", limit=10, tick_id=None)
    assert len(claims) == 1
    return claims[0]


def _failed(claim: Claimed, token: Any) -> Outcome:
    return Outcome(claim.id, token, RunStatus.FAILED, AttemptOutcome.FAILED, 1, "exit code 1",
                   "", None, dt.timedelta(minutes=5))


def _record(store: Store, claim: Claimed, token: Any) -> tuple[Any, set[int]]:
    """What the executor does after a failed attempt: count it and record it, fenced, in one
    transaction."""
    with store.transaction():
        now = store.now()
        counted = store.queue.record_job_failure(claim.id, token=token, error="exit code 1",
                                                 now=now)
        return counted, store.queue.finish_runs([_failed(claim, token)], now=now)


def _definition(db: psycopg.Connection[Any]) -> tuple[Any, ...] | None:
    return db.execute("SELECT consecutive_failures, paused_at IS NOT NULL, pause_note "
                      "FROM job_definitions").fetchone()


def test_a_stale_holder_counts_no_failure(cli: Invoke, store: Store,
                                          db: psycopg.Connection[Any]) -> None:
    claim = _one_claimed_run(cli, store, "1")
    # worker b took the run over (a's lease expired, b reclaimed and claimed it)
    new_token = db.execute("UPDATE job_runs SET lease_owner = 'b', "
                           "lease_token = gen_random_uuid() RETURNING lease_token").fetchone()
    assert new_token is not None
    before = db.execute("SELECT * FROM job_attempts").fetchall()

    assert _record(store, claim, claim.lease_token) == (None, set())
    assert _definition(db) == (0, False, None)
    assert db.execute("SELECT status, lease_owner, error FROM job_runs").fetchall() == [
        ("running", "b", None)]
    assert db.execute("SELECT * FROM job_attempts").fetchall() == before

    # the holder's own failure counts (and pauses this job, as it asks after one)
    counted, recorded = _record(store, claim, new_token[0])
    assert counted is not None
    assert (counted.name, counted.just_paused) == ("flaky", True)
    assert recorded == {claim.id}
    assert _definition(db) == (
        1, True, "paused after 1 consecutive failures (last: exit code 1)")



def test_a_reclaimed_lost_attempt_counts_against_its_job(cli: Invoke, store: Store,
                                                         db: psycopg.Connection[Any]) -> None:
    # the same count as a holder's failure, for the attempt a reclaim took over: fenced by
    # the takeover in the same transaction, not by a lease token
    claim = _one_claimed_run(cli, store, "1")
    db.execute("UPDATE job_runs SET lease_expires_at = now() - interval '1 minute'")
    with store.transaction():
        now = store.now()
        [reclaimed] = store.queue.reclaim_expired(now=now)
        counted = store.queue.record_reclaimed_failure(reclaimed.definition_id,
                                                       error=reclaimed.error, now=now)
    assert reclaimed.id == claim.id
    assert (counted.name, counted.just_paused) == ("flaky", True)
    assert _definition(db) == (
        1, True, f"paused after 1 consecutive failures (last: {reclaimed.error})")

def test_a_fenced_write_repeated_after_its_commit_changes_nothing(
        cli: Invoke, store: Store, db: psycopg.Connection[Any]) -> None:
    """As when the connection is lost after the commit, before its answer: the policy runs
    the whole transaction again."""
    claim = _one_claimed_run(cli, store, "5")
    counted, recorded = _record(store, claim, claim.lease_token)
    assert counted is not None
    assert recorded == {claim.id}
    assert _record(store, claim, claim.lease_token) == (None, set())
    assert _definition(db) == (1, False, None)
    assert db.execute("SELECT status, attempt FROM job_runs").fetchall() == [("failed", 1)]
    assert db.execute("SELECT outcome FROM job_attempts").fetchall() == [("failed",)]


def _terminated(database_url: str, db: psycopg.Connection[Any]) -> Store:
    store = Store(connect(database_url))
    db.execute("SELECT pg_terminate_backend(%s)", (store.conn.info.backend_pid,))
    return store


def test_transient_errors(database_url: str, db: psycopg.Connection[Any]) -> None:
    store = _terminated(database_url, db)
    with pytest.raises(DatabaseUnavailable) as lost:
        store.now()  # terminated by an administrator
    assert DEFAULT.transient(lost.value)
    with pytest.raises(DatabaseUnavailable) as closed:
        store.now()  # the connection is gone
    assert DEFAULT.transient(closed.value)
    assert DEFAULT.transient(pgerrors.SerializationFailure("could not serialize"))
    assert DEFAULT.transient(pgerrors.DeadlockDetected("deadlock detected"))
    assert DEFAULT.transient(pgerrors.AdminShutdown("terminating connection"))


def test_what_is_never_retried(database_url: str, db: psycopg.Connection[Any]) -> None:
    db.execute("SET statement_timeout = '10ms'")
    with pytest.raises(pgerrors.QueryCanceled) as timeout:
        db.execute("SELECT pg_sleep(1)")
    assert not DEFAULT.transient(timeout.value)
    db.execute("RESET statement_timeout")
    with pytest.raises(pgerrors.UniqueViolation) as conflict:
        db.execute("CREATE TEMP TABLE t (i int PRIMARY KEY); INSERT INTO t VALUES (1), (1)")
    assert not DEFAULT.transient(conflict.value)
    with pytest.raises(psycopg.OperationalError) as missing:
        psycopg.connect(make_conninfo(database_url, dbname="cronjobs_no_such_database"))
    assert not DEFAULT.transient(missing.value)
    assert not DEFAULT.transient(ValueError("not a database error"))


def test_a_call_is_repeated_through_a_lost_connection(
        database_url: str, db: psycopg.Connection[Any]) -> None:
    stores = [_terminated(database_url, db)]
    calls: list[int] = []

    def now() -> dt.datetime:
        calls.append(len(stores))
        return stores[-1].now()

    def reconnect() -> None:
        stores.append(Store(connect(database_url, retry_for=0)))

    assert isinstance(retrying(now, between=reconnect), dt.datetime)
    assert calls == [1, 2]  # failed on the terminated connection, then one reconnect
    for store in stores:
        store.close()


def test_a_permanent_error_or_a_stop_request_is_not_retried(
        database_url: str, db: psycopg.Connection[Any]) -> None:
    calls: list[str] = []

    def timeout() -> None:
        calls.append("timeout")
        with psycopg.connect(database_url, options="-c statement_timeout=10ms") as conn:
            conn.execute("SELECT pg_sleep(1)")

    with pytest.raises(pgerrors.QueryCanceled):
        retrying(timeout)
    store = _terminated(database_url, db)

    def lost() -> None:
        calls.append("lost")
        store.now()

    with pytest.raises(DatabaseUnavailable):
        retrying(lost, give_up=lambda: True)
    assert calls == ["timeout", "lost"]
    store.close()
