"""An attempt's row is written once, when the attempt ends: the claim writes none (the
running attempt is its run's row: attempt, lease_owner, lease_token, started_at), the
finish or the reclaim writes it. Readers see the running attempt all the same, and an
attempt opened by an older cronjobs (which wrote its row at the claim) ends with one row."""

from __future__ import annotations

import datetime as dt
from typing import Any

import psycopg

from conftest import Invoke
from cronjobs.db.store import Store
from cronjobs.models import AttemptOutcome, Claimed, Outcome, RunStatus


def _claimed(cli: Invoke, store: Store, *options: str) -> Claimed:
    assert cli("define", "work", "0 0 1 1 *", "--command", "true", *options).exit_code == 0
    assert cli("trigger", "work").exit_code == 0
    (claim,) = store.queue.claim_runs(now=store.now(), worker="w1", limit=5, tick_id=None)
    return claim


def _rows(db: psycopg.Connection[Any]) -> list[tuple[Any, ...]]:
    return db.execute("SELECT tableoid::regclass::text, attempt, worker, outcome "
                      "FROM job_attempts ORDER BY attempt").fetchall()


def _open_as_before(db: psycopg.Connection[Any], claim: Claimed) -> None:
    """The row an older cronjobs wrote at the claim."""
    db.execute("INSERT INTO job_attempts (run_id, attempt, worker, lease_token, started_at) "
               "SELECT id, attempt, lease_owner, lease_token, started_at FROM job_runs "
               "WHERE id = %s", (claim.id,))


def test_the_claim_writes_no_attempt_row_and_readers_see_the_running_attempt(
        cli: Invoke, store: Store, db: psycopg.Connection[Any]) -> None:
    claim = _claimed(cli, store)
    assert _rows(db) == []
    (running,) = store.runs.attempts_of_run(claim.id)
    assert (running.id, running.attempt, running.worker, running.outcome,
            running.lease_token, running.started_at, running.finished_at) == (
        None, 1, "w1", "running", claim.lease_token, claim.started_at, None)
    assert store.queue.finish_runs([Outcome(
        claim.id, claim.lease_token, RunStatus.SUCCEEDED, AttemptOutcome.SUCCEEDED, 0, None,
        "ok\n", None)], now=store.now()) == {claim.id}
    history = _rows(db)
    assert len(history) == 1
    assert history[0][1:] == (1, "w1", "succeeded")
    assert history[0][0].startswith("job_attempts_history")
    (ended,) = store.runs.attempts_of_run(claim.id)
    assert (ended.attempt, ended.outcome, ended.output_tail) == (1, "succeeded", "ok\n")
    assert ended.id is not None


def test_a_retry_and_a_lost_lease_write_each_attempt_once(
        cli: Invoke, store: Store, db: psycopg.Connection[Any]) -> None:
    claim = _claimed(cli, store, "--max-attempts", "3")
    now = store.now()
    assert store.queue.finish_runs([Outcome(
        claim.id, claim.lease_token, RunStatus.FAILED, AttemptOutcome.FAILED, 3, "exit code 3",
        "", None, dt.timedelta(0))], now=now) == {claim.id}
    assert _rows(db) == [("job_attempts_queue", 1, "w1", "failed")]
    # the second attempt's worker dies: its lease runs out and another tick takes it over
    (second,) = store.queue.claim_runs(now=now + dt.timedelta(seconds=1), worker="w2",
                                       limit=5, tick_id=None)
    assert second.attempt == 2
    assert [a.outcome for a in store.runs.attempts_of_run(claim.id)] == ["failed", "running"]
    reclaimed = store.queue.reclaim_expired(now=now + dt.timedelta(hours=1))
    assert [r.id for r in reclaimed] == [claim.id]
    assert _rows(db) == [("job_attempts_queue", 1, "w1", "failed"),
                         ("job_attempts_queue", 2, "w2", "lost")]
    (third,) = store.queue.claim_runs(now=now + dt.timedelta(hours=1), worker="w3", limit=5,
                                      tick_id=None)
    assert store.queue.finish_runs([Outcome(
        third.id, third.lease_token, RunStatus.SUCCEEDED, AttemptOutcome.SUCCEEDED, 0, None,
        "", None)], now=now + dt.timedelta(hours=1)) == {claim.id}
    assert [row[1:] for row in _rows(db)] == [(1, "w1", "failed"), (2, "w2", "lost"),
                                              (3, "w3", "succeeded")]
    assert {row[0] for row in _rows(db)} == {
        db.execute("SELECT tableoid::regclass::text FROM job_runs").fetchone()[0]  # type: ignore[index]
        .replace("job_runs", "job_attempts")}


def test_an_attempt_an_older_cronjobs_opened_ends_with_one_row(
        cli: Invoke, store: Store, db: psycopg.Connection[Any]) -> None:
    claim = _claimed(cli, store, "--max-attempts", "3")
    _open_as_before(db, claim)
    # read once, from its row
    assert [(a.attempt, a.outcome) for a in store.runs.attempts_of_run(claim.id)] == [
        (1, "running")]
    now = store.now()
    # a retry: the row is completed, not written twice
    assert store.queue.finish_runs([Outcome(
        claim.id, claim.lease_token, RunStatus.FAILED, AttemptOutcome.FAILED, 3, "exit code 3",
        "", None, dt.timedelta(0))], now=now) == {claim.id}
    assert _rows(db) == [("job_attempts_queue", 1, "w1", "failed")]
    # a lost lease, the same
    (second,) = store.queue.claim_runs(now=now + dt.timedelta(seconds=1), worker="w2",
                                       limit=5, tick_id=None)
    _open_as_before(db, second)
    store.queue.reclaim_expired(now=now + dt.timedelta(hours=1))
    assert _rows(db) == [("job_attempts_queue", 1, "w1", "failed"),
                         ("job_attempts_queue", 2, "w2", "lost")]
    # and the end: one row per attempt in the history
    (third,) = store.queue.claim_runs(now=now + dt.timedelta(hours=1), worker="w3", limit=5,
                                      tick_id=None)
    _open_as_before(db, third)
    assert store.queue.finish_runs([Outcome(
        third.id, third.lease_token, RunStatus.SUCCEEDED, AttemptOutcome.SUCCEEDED, 0, None,
        "done\n", None)], now=now + dt.timedelta(hours=1)) == {claim.id}
    assert [row[1:] for row in _rows(db)] == [(1, "w1", "failed"), (2, "w2", "lost"),
                                              (3, "w3", "succeeded")]
    assert [(a.attempt, a.outcome, a.output_tail) for a in store.runs.attempts_of_run(
        claim.id)] == [(1, "failed", ""), (2, "lost", None), (3, "succeeded", "done\n")]
