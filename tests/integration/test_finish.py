"""Recording outcomes: several attempts in one statement, each fenced by its lease token,
and a tick that waits for runs other ticks are still materialising."""

from __future__ import annotations

import datetime as dt
import json
import subprocess
import sys
import threading
import time
from typing import Any

import psycopg

from conftest import Invoke, wait_for
from cronjobs.db.store import Store
from cronjobs.models import AttemptOutcome, Outcome, RunStatus


def _queued_runs(cli: Invoke, name: str, *options: str) -> None:
    assert cli("define", name, "0 0 1 1 *", "--command", "true", "--overlap", "allow",
               *options).exit_code == 0
    assert cli("backfill", "--yes", name, "--from", "2021-01-01T00:00:00Z",
               "--to", "2023-01-01T00:00:00Z").exit_code == 0


def test_outcomes_are_recorded_together_and_fenced(cli: Invoke, store: Store,
                                                   db: psycopg.Connection[Any]) -> None:
    _queued_runs(cli, "work")
    now = store.now()
    claims = store.queue.claim_runs(now=now, worker="w", limit=10, tick_id=None)
    assert len(claims) == 3
    first, second, third = claims
    db.execute("UPDATE job_definitions SET consecutive_failures = 2")
    # the third run was taken over meanwhile: its old token no longer fences anything
    db.execute("UPDATE job_runs SET lease_token = gen_random_uuid() WHERE id = %s",
               (third.id,))
    recorded = store.queue.finish_runs([
        Outcome(first.id, first.lease_token, RunStatus.SUCCEEDED, AttemptOutcome.SUCCEEDED,
                0, None, "ok\n", {"n": 1}),
        Outcome(second.id, second.lease_token, RunStatus.FAILED, AttemptOutcome.FAILED, 3,
                "exit code 3", "", None, dt.timedelta(minutes=5)),
        Outcome(third.id, third.lease_token, RunStatus.SUCCEEDED, AttemptOutcome.SUCCEEDED,
                0, None, "", None),
    ], now=now)
    assert recorded == {first.id, second.id}
    rows = db.execute("SELECT id, status, exit_code, error, result, eligible_at > now() "
                      "FROM job_runs ORDER BY id").fetchall()
    assert rows == [(first.id, "succeeded", 0, None, {"n": 1}, False),
                    (second.id, "failed", 3, "exit code 3", None, True),
                    (third.id, "running", None, None, None, False)]
    # each attempt as readers see it; the running one has no row of its own until it ends
    assert [(a.run_id, a.outcome, a.output_tail) for a in store.runs.attempts_of_runs(
        [first.id, second.id, third.id])] == [(first.id, "succeeded", "ok\n"),
                                              (second.id, "failed", ""),
                                              (third.id, "running", None)]
    assert db.execute("SELECT run_id, outcome, output_tail FROM job_attempts ORDER BY run_id"
                      ).fetchall() == [(first.id, "succeeded", "ok\n"),
                                       (second.id, "failed", "")]
    # a success ends the job's run of failures
    assert db.execute("SELECT consecutive_failures FROM job_definitions").fetchone() == (0,)
    # recording again changes nothing: the leases are spent
    assert store.queue.finish_runs([
        Outcome(first.id, first.lease_token, RunStatus.FAILED, AttemptOutcome.FAILED, 1,
                "late", "", None)], now=now) == set()
    assert store.queue.finish_runs([], now=now) == set()


def test_outcomes_are_kept_when_the_claim_beside_them_conflicts(
        cli: Invoke, store: Store, database_url: str, db: psycopg.Connection[Any]) -> None:
    _queued_runs(cli, "other")  # three runs, overlap allow
    done = store.queue.claim_runs(now=store.now(), worker="w", limit=1, tick_id=None)[0]
    _queued_runs(cli, "single", "--overlap", "queue")  # exclusive: one running at a time
    first, second = (row[0] for row in db.execute(
        "SELECT r.id FROM job_runs AS r JOIN job_definitions AS d ON d.id = r.definition_id "
        "WHERE d.name = 'single' ORDER BY r.id LIMIT 2"))
    db.execute("UPDATE job_runs SET eligible_at = now() + interval '1 hour' "
               "WHERE status = 'queued' AND id <> %s", (second,))
    outcome = Outcome(done.id, done.lease_token, RunStatus.SUCCEEDED, AttemptOutcome.SUCCEEDED,
                      0, None, "", None)
    result: list[Any] = []
    with psycopg.connect(database_url) as other:
        # Another worker is claiming `first` of the same job, not yet committed: our claim
        # cannot see it, takes `second`, and the unique index refuses it at that commit.
        other.execute("UPDATE job_runs SET status = 'running', attempt = 1, "
                      "lease_owner = 'x', lease_token = gen_random_uuid(), "
                      "lease_expires_at = now() + interval '1 minute' WHERE id = %s", (first,))
        worker = threading.Thread(target=lambda: result.append(store.queue.pass_of_executor(
            [outcome], (), now=store.now(), worker="w", limit=5, tick_id=None)))
        worker.start()
        wait_for(lambda: db.execute(
            "SELECT count(*) FROM pg_stat_activity WHERE wait_event_type = 'Lock' "
            "AND datname = current_database()").fetchone() == (1,), "our claim to wait")
        other.commit()
        worker.join(30)
    assert result == [({done.id}, {}, [])]  # nothing claimed, the outcome recorded all the same
    assert db.execute("SELECT status FROM job_runs WHERE id = %s", (done.id,)
                      ).fetchone() == ("succeeded",)
    assert db.execute("SELECT status FROM job_runs WHERE id = %s", (second,)
                      ).fetchone() == ("queued",)


def test_a_claim_of_its_own_that_conflicts_claims_nothing(
        cli: Invoke, store: Store, database_url: str, db: psycopg.Connection[Any]) -> None:
    # as above, for a claim sent alone (its own transaction, in one round trip)
    _queued_runs(cli, "single", "--overlap", "queue")
    first, second = (row[0] for row in db.execute(
        "SELECT id FROM job_runs ORDER BY id LIMIT 2"))
    db.execute("UPDATE job_runs SET eligible_at = now() + interval '1 hour' "
               "WHERE status = 'queued' AND id <> %s", (second,))
    result: list[Any] = []
    with psycopg.connect(database_url) as other:
        other.execute("UPDATE job_runs SET status = 'running', attempt = 1, "
                      "lease_owner = 'x', lease_token = gen_random_uuid(), "
                      "lease_expires_at = now() + interval '1 minute' WHERE id = %s", (first,))
        worker = threading.Thread(target=lambda: result.append(store.queue.claim_runs(
            now=store.now(), worker="w", limit=5, tick_id=None)))
        worker.start()
        wait_for(lambda: db.execute(
            "SELECT count(*) FROM pg_stat_activity WHERE wait_event_type = 'Lock' "
            "AND datname = current_database()").fetchone() == (1,), "our claim to wait")
        other.commit()
        worker.join(30)
    assert result == [[]]
    assert db.execute("SELECT status FROM job_runs WHERE id = %s", (second,)
                      ).fetchone() == ("queued",)
    # and the connection is usable again
    assert [c.id for c in store.queue.claim_runs(now=store.now() + dt.timedelta(hours=2),
                                           worker="w", limit=5, tick_id=None)] == []


def test_a_tick_waits_for_runs_another_tick_is_materialising(
        cli: Invoke, database_url: str, db: psycopg.Connection[Any]) -> None:
    assert cli("define", "every", "* * * * *", "--command", "true").exit_code == 0
    # (seeding: it sets the cursor back, as the db fixture may)
    with psycopg.connect(database_url, options="-c cronjobs.rewind_cursor=on") as other:
        # "another tick": it holds the due definition while it materialises it
        minute = other.execute("SELECT date_trunc('minute', now())").fetchone()[0]  # type: ignore[index]
        other.execute("UPDATE job_definitions SET cursor_at = %s, next_due_at = %s",
                      (minute - dt.timedelta(seconds=30), minute))
        other.commit()
        other.execute("SELECT id FROM job_definitions FOR UPDATE")
        tick = subprocess.Popen(
            [sys.executable, "-m", "cronjobs", "--database-url", database_url, "tick",
             "--json"], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        deadline = time.monotonic() + 60
        while db.execute("SELECT count(*) FROM job_ticks").fetchone() == (0,):
            assert time.monotonic() < deadline and tick.poll() is None
            time.sleep(0.05)
        time.sleep(0.5)  # it materialised nothing (all locked) and has nothing to claim
        assert tick.poll() is None  # ... yet it is still there
        other.execute("""
            INSERT INTO job_runs (definition_id, scheduled_for, trigger, max_attempts,
                                  eligible_at, exclusive)
            SELECT id, %s, 'schedule', 3, %s, true FROM job_definitions""", (minute, minute))
        other.execute("UPDATE job_definitions SET cursor_at = now(), "
                      "next_due_at = %s", (minute + dt.timedelta(minutes=1),))
        other.commit()
    out, err = tick.communicate(timeout=60)
    assert tick.returncode == 0, err
    counts = json.loads(out)["counts"]
    assert (counts["materialised"], counts["claimed"], counts["succeeded"]) == (0, 1, 1)


def test_a_claimed_run_says_whether_its_job_has_webhook_receivers(
        cli: Invoke, store: Store) -> None:
    # (the tick looks receivers up only for the jobs that have some)
    _queued_runs(cli, "quiet")
    _queued_runs(cli, "loud", "--notify", "https://hooks.example.com/x")
    claims = store.queue.claim_runs(now=store.now(), worker="w", limit=10, tick_id=None)
    assert sorted((c.name, c.notifies) for c in claims) == (
        [("loud", True)] * 3 + [("quiet", False)] * 3)


def test_a_retry_delay_and_a_result_survive_the_record(
        cli: Invoke, store: Store, db: psycopg.Connection[Any]) -> None:
    # (the outcomes travel as one JSON document: intervals, results and nulls intact)
    _queued_runs(cli, "retried", "--max-attempts", "3")
    now = store.now()
    first, second, _ = store.queue.claim_runs(now=now, worker="w", limit=10, tick_id=None)
    recorded = store.queue.finish_runs([
        Outcome(first.id, first.lease_token, RunStatus.FAILED, AttemptOutcome.FAILED, 3,
                "boom", "tail\n", None, dt.timedelta(seconds=90.5)),
        Outcome(second.id, second.lease_token, RunStatus.SUCCEEDED,
                AttemptOutcome.SUCCEEDED, 0, None, "", {"rows": [1, None, "é"]}),
    ], now=now)
    assert recorded == {first.id, second.id}
    assert db.execute("SELECT status, CASE WHEN status = 'failed' THEN eligible_at - %s END, "
                      "exit_code, error, result FROM job_runs WHERE id = ANY(%s) ORDER BY id",
                      (now, [first.id, second.id])
                      ).fetchall() == [
        ("failed", dt.timedelta(seconds=90.5), 3, "boom", None),
        ("succeeded", None, 0, None, {"rows": [1, None, "é"]})]


def test_a_new_attempt_starts_with_no_output(cli: Invoke, store: Store,
                                            db: psycopg.Connection[Any]) -> None:
    # the first attempt printed and failed; until the second prints, `logs` of the running
    # run shows nothing (not the first attempt's output as if it were the second's)
    assert cli("define", "flaky", "0 0 1 1 *", "--command", "true", "--max-attempts", "2",
               "--backoff", "1s").exit_code == 0
    assert cli("trigger", "flaky").exit_code == 0
    now = store.now()
    [first] = store.queue.claim_runs(now=now, worker="w", limit=1, tick_id=None)
    live = [(first.id, first.lease_token, "attempt one\n", 12)]
    assert store.notifications.write_live_output(live) == {first.id}
    assert store.queue.finish_runs([Outcome(first.id, first.lease_token, RunStatus.FAILED,
                                      AttemptOutcome.FAILED, 1, "exit code 1",
                                      "attempt one\n", None, dt.timedelta(0))],
                             now=now) == {first.id}
    [second] = store.queue.claim_runs(now=now + dt.timedelta(seconds=1), worker="w", limit=1,
                                tick_id=None)
    assert (second.id, second.attempt) == (first.id, 2)
    live = store.notifications.live_output(second.id)
    assert live is not None
    assert (live.status, live.attempt, live.output_tail, live.output_bytes) == (
        "running", 2, None, None)
    # the first attempt's output stays with the first attempt
    assert [(a.attempt, a.output_tail) for a in store.runs.attempts_of_run(first.id)] == [
        (1, "attempt one\n"), (2, None)]
    assert db.execute("SELECT attempt, output_tail FROM job_attempts ORDER BY attempt"
                      ).fetchall() == [(1, "attempt one\n")]  # the running one has no row yet
