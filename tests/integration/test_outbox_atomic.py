"""A run's notifications commit with its outcome, in one transaction: a database that
refuses the notification refuses the outcome too (it is recorded later, with its
notification), a transaction the retry policy repeats writes its notification once, the
reclaimer's takeover and its notification commit together, and a tick killed while its
outcome is being committed (a real process, SIGKILL) leaves the outcome and its
notification both, or neither. Time is pinned (`tick --now`), never slept through."""

from __future__ import annotations

import datetime as dt
import os
import signal
import subprocess
import sys
from typing import Any

import psycopg
import test_outbox
from test_outbox import SECRET, Receiver, _outbox, _tick

from conftest import Invoke, clean_env, one_run, wait_for
from cronjobs.db.store import Store
from cronjobs.execution.outbox import Ending, TickOutbox
from cronjobs.models import Claimed, RunStatus

receiver = test_outbox.receiver  # the fixtures of test_outbox (a webhook receiver, short tries)
quick = test_outbox.quick


def _instant(db: psycopg.Connection[Any]) -> dt.datetime:
    row = db.execute("SELECT now()").fetchone()
    assert row is not None
    value: dt.datetime = row[0]
    return value


def _run(db: psycopg.Connection[Any], name: str) -> tuple[int, str, Any, dt.datetime | None]:
    """(id, status, lease token, lease end) of the one run of job ``name``."""
    row = db.execute(
        "SELECT r.id, r.status, r.lease_token, r.lease_expires_at FROM job_runs AS r "
        "JOIN job_definitions AS d ON d.id = r.definition_id WHERE d.name = %s",
        (name,)).fetchone()
    assert row is not None
    return row[0], row[1], row[2], row[3]


def _failures(db: psycopg.Connection[Any], name: str) -> int:
    row = db.execute("SELECT consecutive_failures FROM job_definitions WHERE name = %s",
                     (name,)).fetchone()
    assert row is not None
    return int(row[0])


def _refuse_notifications_of(db: psycopg.Connection[Any], run_id: int) -> None:
    """The outbox refuses any notification of run ``run_id`` (an error that no retry
    helps)."""
    db.execute(
        "CREATE FUNCTION refuse_notice() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN "
        "IF NEW.run_id = " + str(int(run_id)) + " THEN "
        "RAISE EXCEPTION 'the outbox refuses this one'; END IF; RETURN NEW; END $$")
    db.execute("CREATE TRIGGER refuse_notice BEFORE INSERT ON job_notifications "
               "FOR EACH ROW EXECUTE FUNCTION refuse_notice()")


def _accept_notifications(db: psycopg.Connection[Any]) -> None:
    db.execute("DROP TRIGGER refuse_notice ON job_notifications")


def test_an_outcome_is_not_recorded_without_its_notification(
        cli: Invoke, db: psycopg.Connection[Any], receiver: Receiver, quick: None) -> None:
    receiver.answer = 200
    one_run(cli, "refused", "--command", "exit 3", "--max-attempts", "1",
            "--notify", receiver.url)
    one_run(cli, "fine", "--command", "exit 4", "--max-attempts", "1",
            "--notify", receiver.url)
    refused, *_ = _run(db, "refused")
    fine, *_ = _run(db, "fine")
    _refuse_notifications_of(db, refused)
    start = _instant(db)
    _tick(cli, start)
    # the run whose notification was refused: its outcome was not recorded either (nor
    # its failure counted); it is still running on its lease
    _, status, token, lease_end = _run(db, "refused")
    assert (status, _failures(db, "refused")) == ("running", 0)
    assert token is not None and lease_end is not None
    # the other run of the same pass: recorded, with its notification, delivered
    assert _run(db, "fine")[1] == "dead"
    assert _failures(db, "fine") == 1
    assert [(d["run_id"], d["status"]) for d in _outbox(db)] == [(fine, "sent")]
    assert [body["run_id"] for _, body in receiver.requests] == [fine]

    # the next try (the lease ended: a later tick takes the run over) records the outcome
    # and its notification together
    _accept_notifications(db)
    _tick(cli, lease_end + dt.timedelta(seconds=1))
    assert _run(db, "refused")[1] == "dead"
    assert _failures(db, "refused") == 1
    assert sorted((d["run_id"], d["status"]) for d in _outbox(db)) == sorted([
        (fine, "sent"), (refused, "sent")])
    assert sorted(body["run_id"] for _, body in receiver.requests) == sorted([fine, refused])
    assert [body["event"] for _, body in receiver.requests] == ["dead", "dead"]


def test_a_transaction_repeated_by_the_retry_policy_writes_its_notification_once(
        cli: Invoke, db: psycopg.Connection[Any], receiver: Receiver, quick: None) -> None:
    receiver.answer = 200
    one_run(cli, "backup", "--command", "exit 3", "--max-attempts", "1",
            "--notify", receiver.url)
    # the first write to the outbox fails as a serialization failure does: the policy
    # repeats the whole transaction (outcome, failure count, notification)
    db.execute("CREATE SEQUENCE outbox_writes")
    db.execute(
        "CREATE FUNCTION fail_once() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN "
        "IF nextval('outbox_writes') = 1 THEN "
        "RAISE EXCEPTION 'conflict' USING ERRCODE = 'serialization_failure'; END IF; "
        "RETURN NEW; END $$")
    db.execute("CREATE TRIGGER fail_once BEFORE INSERT ON job_notifications "
               "FOR EACH ROW EXECUTE FUNCTION fail_once()")
    _tick(cli, _instant(db))
    row = db.execute("SELECT last_value FROM outbox_writes").fetchone()
    assert row is not None and row[0] == 2  # written twice, the first undone
    run_id, status, *_ = _run(db, "backup")
    assert (status, _failures(db, "backup")) == ("dead", 1)
    assert [(d["run_id"], d["status"]) for d in _outbox(db)] == [(run_id, "sent")]
    assert len(receiver.requests) == 1


def test_a_reclaimed_run_and_its_notification_commit_together(
        cli: Invoke, db: psycopg.Connection[Any], store: Store, receiver: Receiver,
        quick: None) -> None:
    receiver.answer = 200
    one_run(cli, "backup", "--command", "exit 3", "--max-attempts", "1",
            "--notify", receiver.url)
    start = _instant(db)
    # what a tick that died holding the run leaves behind
    (claim,) = store.queue.claim_runs(now=start, worker="dead-tick", limit=1, tick_id=None)
    end = start + claim.lease
    _refuse_notifications_of(db, claim.id)
    result = cli("tick", "--now", (end + dt.timedelta(seconds=1)).isoformat(),
                 "--allow-future")
    assert result.exit_code != 0  # the takeover could not be recorded
    assert SECRET not in result.stdout + result.stderr
    # nothing of it was: the run is still the dead tick's, nothing counted or notified
    run_id, status, token, lease_end = _run(db, "backup")
    assert (run_id, status, token, lease_end) == (claim.id, "running", claim.lease_token, end)
    assert (_failures(db, "backup"), _outbox(db), receiver.requests) == (0, [], [])

    _accept_notifications(db)
    _tick(cli, end + dt.timedelta(seconds=2))
    assert _run(db, "backup")[1:3] == ("dead", None)
    assert _failures(db, "backup") == 1
    assert [(d["run_id"], d["status"]) for d in _outbox(db)] == [(claim.id, "sent")]
    assert [(b["run_id"], b["event"]) for _, b in receiver.requests] == [(claim.id, "dead")]


_TICK = """
import sys
from cronjobs.cli import run
sys.argv = ["cronjobs", *sys.argv[1:]]
run()
"""


def test_a_tick_killed_while_it_commits_an_outcome_loses_no_notification(
        cli: Invoke, db: psycopg.Connection[Any], receiver: Receiver, database_url: str,
        quick: None) -> None:
    receiver.answer = 200
    one_run(cli, "backup", "--command", "exit 3", "--max-attempts", "1",
            "--notify", receiver.url)
    # the run's move to the history waits 3 s in the database, inside the transaction that
    # records it: long enough to kill the tick that sent it
    db.execute(
        "CREATE FUNCTION slow_history() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN "
        "PERFORM pg_sleep(3); RETURN NULL; END $$")
    db.execute("CREATE TRIGGER slow_history AFTER INSERT ON job_runs FOR EACH ROW "
               "WHEN (NEW.status = 'dead') EXECUTE FUNCTION slow_history()")
    start = _instant(db)
    tick = subprocess.Popen([sys.executable, "-c", _TICK, "tick", "--now", start.isoformat(),
                             "--allow-future"],
                            env=clean_env(CRONJOBS_DATABASE_URL=database_url),
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        def sleeping() -> int | None:
            row = db.execute("SELECT pid FROM pg_stat_activity WHERE wait_event = 'PgSleep' "
                             "AND pid <> pg_backend_pid()").fetchone()
            return None if row is None else int(row[0])
        wait_for(sleeping, "the outcome's transaction under way")
        backend = sleeping()
        os.kill(tick.pid, signal.SIGKILL)
    finally:
        tick.kill()
        tick.wait(timeout=30)
    assert tick.returncode == -signal.SIGKILL
    # the server ends what it was sent (commits it, or undoes it all) on its own
    wait_for(lambda: db.execute("SELECT count(*) FROM pg_stat_activity WHERE pid = %s",
                                (backend,)).fetchone() == (0,), "the killed tick's session")
    db.execute("DROP TRIGGER slow_history ON job_runs")
    run_id, status, _, lease_end = _run(db, "backup")
    notices = _outbox(db)
    # both or neither
    assert (status == "dead") == (len(notices) == 1), (status, notices)
    assert len(notices) <= 1 and receiver.requests == []
    if status == "dead":  # committed: the notification waits for the dead tick's claim
        assert notices[0]["status"] == "pending" and notices[0]["claim_token"] is not None
        _tick(cli, notices[0]["next_attempt_at"])
    else:  # undone: the run is taken over when its lease ends, and notified then
        assert lease_end is not None
        _tick(cli, lease_end + dt.timedelta(seconds=1))
    assert _run(db, "backup")[1] == "dead"
    assert [(d["run_id"], d["status"]) for d in _outbox(db)] == [(run_id, "sent")]
    assert [(b["run_id"], b["event"]) for _, b in receiver.requests] == [(run_id, "dead")]


def test_a_success_after_a_death_recorded_in_the_same_transaction_is_a_recovery(
        cli: Invoke, db: psycopg.Connection[Any], store: Store) -> None:
    """The notifications are decided before the transaction that records the outcomes
    writes: a death it records is the previous run of a success it records too."""
    result = cli("define", "flaky", "0 0 1 1 *", "--command", "true", "--overlap", "allow",
                 "--notify", "http://127.0.0.1:9/hook", "--notify-on", "recovery")
    assert result.exit_code == 0, result.stderr
    result = cli("backfill", "--yes", "flaky", "--from", "2020-01-01T00:00:00Z",
                 "--to", "2021-01-01T00:00:00Z")
    assert result.exit_code == 0, result.stderr
    first, second = sorted(store.queue.claim_runs(now=_instant(db), worker="w", limit=2,
                                                  tick_id=None), key=lambda c: c.id)

    def ending(claim: Claimed, status: RunStatus) -> Ending:
        return Ending(claim.definition_id, claim.id, claim.name, claim.scheduled_for, 1, 1,
                      status, None, None, None, claim.lease_token)

    outbox = TickOutbox(store, store.now)
    assert outbox.notifications(store, [ending(second, RunStatus.SUCCEEDED)]) == []
    (delivery,) = outbox.notifications(store, [ending(first, RunStatus.DEAD),
                                           ending(second, RunStatus.SUCCEEDED)])
    assert (delivery.run_id, delivery.event, delivery.lease_token) == (
        second.id, "recovery", second.lease_token)
    assert outbox.notifications(store, [ending(first, RunStatus.SUCCEEDED),
                                    ending(second, RunStatus.SUCCEEDED)]) == []
