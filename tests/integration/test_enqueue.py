"""cronjobs.enqueue: runs written in the application's own transaction, with idempotency keys
and priorities, by the SQL function every caller shares (cronjobs_add_runs)."""

from __future__ import annotations

import asyncio
import datetime as dt
import json
import select
from typing import Any

import psycopg
import pytest

import cronjobs
from conftest import Invoke, count, snapshot
from cronjobs.core.retention import upkeep
from cronjobs.db.store import Store
from cronjobs.errors import JobNotFound, UsageError
from cronjobs.models import AttemptOutcome, Outcome, RunStatus


def _define(cli: Invoke, name: str, *options: str) -> None:
    result = cli("define", name, "0 0 1 1 *", "--command", "true", "--overlap", "allow",
                 *options)
    assert result.exit_code == 0, result.stderr


def _claim(store: Store, limit: int = 100) -> list[Any]:
    return store.queue.claim_runs(now=store.now(), worker="w", limit=limit, tick_id=None,
                                  handlers=[])


def _finish(store: Store, claimed: list[Any], at: dt.datetime | None = None) -> None:
    outcomes = [Outcome(c.id, c.lease_token, RunStatus.SUCCEEDED, AttemptOutcome.SUCCEEDED,
                        0, None, None, None) for c in claimed]
    assert len(store.queue.finish_runs(outcomes, now=at or store.now())) == len(outcomes)


def test_a_rolled_back_transaction_leaves_no_run_a_committed_one_is_claimable(
        cli: Invoke, database_url: str, store: Store, db: psycopg.Connection[Any]) -> None:
    _define(cli, "send_receipt")
    with psycopg.connect(database_url) as app:
        run = cronjobs.enqueue(app, "send_receipt", {"order": 1})
        assert (run.job, run.status, run.origin, run.payload) == (
            "send_receipt", "queued", "enqueue", {"order": 1})
        assert count(db, "job_runs") == 0  # not committed: nobody else sees it
        app.rollback()
        assert count(db, "job_runs") == 0
        kept = cronjobs.enqueue(app, "send_receipt", {"order": 2})
        app.commit()
    assert [c.id for c in _claim(store)] == [kept.id]


def test_an_autocommit_connection_commits_at_once(cli: Invoke, database_url: str,
                                                  db: psycopg.Connection[Any]) -> None:
    _define(cli, "send_receipt")
    with psycopg.connect(database_url, autocommit=True) as app:
        cronjobs.enqueue(app, "send_receipt")
        assert count(db, "job_runs") == 1


def test_a_key_returns_its_run_while_it_waits_runs_and_for_its_window_after(
        cli: Invoke, database_url: str, store: Store, db: psycopg.Connection[Any]) -> None:
    _define(cli, "send_receipt", "--key-window", "2h")
    with psycopg.connect(database_url, autocommit=True) as app:
        first = cronjobs.enqueue(app, "send_receipt", {"n": 1}, key="order-7")
        # waiting: the same run, as it was (the repeat's payload is not taken)
        again = cronjobs.enqueue(app, "send_receipt", {"n": 2}, key="order-7")
        assert (again.id, again.payload) == (first.id, {"n": 1})
        claimed = _claim(store)
        assert [c.id for c in claimed] == [first.id]
        # running
        assert cronjobs.enqueue(app, "send_receipt", key="order-7").status == "running"
        finished_at = store.now()
        _finish(store, claimed, finished_at)
        assert db.execute("SELECT stage, key FROM job_runs").fetchall() == [
            ("history", "order-7")]
        # finished, in the history: the same run, for the window
        within = finished_at + dt.timedelta(hours=2) - dt.timedelta(seconds=1)
        repeat = cronjobs.enqueue(app, "send_receipt", key="order-7", now=within)
        assert (repeat.id, repeat.status) == (first.id, "succeeded")
        assert count(db, "job_runs") == 1
        # after the window: a new run takes the key
        after = finished_at + dt.timedelta(hours=2)
        fresh = cronjobs.enqueue(app, "send_receipt", key="order-7", now=after)
        assert fresh.id != first.id and fresh.status == "queued"
        assert db.execute("SELECT run_id, expires_at FROM job_run_keys").fetchall() == [
            (fresh.id, None)]
        # another job's key of the same name is another key
        _define(cli, "other")
        assert cronjobs.enqueue(app, "other", key="order-7").id not in (first.id, fresh.id)


def test_replace_gives_a_run_that_has_not_started_the_new_values(
        cli: Invoke, database_url: str, store: Store) -> None:
    _define(cli, "send_receipt")
    with psycopg.connect(database_url, autocommit=True) as app:
        first = cronjobs.enqueue(app, "send_receipt", {"n": 1}, key="k")
        later = store.now() + dt.timedelta(hours=1)
        replaced = cronjobs.enqueue(app, "send_receipt", {"n": 2}, key="k", priority=5,
                                    at=later, replace=True)
        assert (replaced.id, replaced.payload, replaced.priority, replaced.status) == (
            first.id, {"n": 2}, 5, "scheduled")
        assert replaced.run_at == later
        # once it started, a replace keeps it as it is
        cronjobs.enqueue(app, "send_receipt", {"n": 3}, key="k", replace=True)
        claimed = _claim(store)
        assert [c.id for c in claimed] == [first.id]
        running = cronjobs.enqueue(app, "send_receipt", {"n": 4}, key="k", replace=True)
        assert (running.id, running.payload, running.status) == (first.id, {"n": 3},
                                                                  "running")


def test_a_batch_is_one_statement_in_order_and_a_key_given_twice_is_one_run(
        cli: Invoke, database_url: str, db: psycopg.Connection[Any]) -> None:
    _define(cli, "a")
    _define(cli, "b", "--priority", "3")
    runs = [{"job": "a", "payload": {"i": i}} for i in range(1000)]
    runs[10] = {"job": "b", "key": "x"}
    runs[20] = {"job": "b", "key": "x", "payload": {"later": True}}
    with psycopg.connect(database_url) as app:
        made = cronjobs.enqueue_many(app, runs)
        app.commit()
    assert len(made) == 1000 and made[10].id == made[20].id and made[20].payload is None
    assert [m.payload for m in made[:3]] == [{"i": 0}, {"i": 1}, {"i": 2}]
    assert made[10].priority == 3 and made[0].priority == 0
    assert count(db, "job_runs") == 999
    assert cronjobs.enqueue_many(db, []) == []


def test_bad_input_writes_nothing(cli: Invoke, database_url: str,
                                  db: psycopg.Connection[Any]) -> None:
    _define(cli, "send_receipt")
    before = snapshot(db)
    past = dt.datetime.now(dt.UTC) - dt.timedelta(days=2)
    cases: list[tuple[dict[str, Any], type[Exception], str]] = [
        ({"job": "nope"}, JobNotFound, "no job named 'nope'"),
        ({"job": "send_receipt", "payload": [1]}, UsageError, "not a JSON object"),
        ({"job": "send_receipt", "key": "k" * 201}, UsageError, "201 characters long"),
        ({"job": "send_receipt", "key": ""}, UsageError, "0 characters long"),
        ({"job": "send_receipt", "priority": 101}, UsageError, "not between -100 and 100"),
        ({"job": "send_receipt", "at": past}, UsageError, "more than a day in the past"),
        ({"job": "send_receipt", "at": dt.datetime(2030, 1, 1)}, UsageError,
         "time zone"),
        ({"job": "send_receipt", "payload": {"x": object()}}, UsageError, "not JSON"),
        ({"job": "send_receipt", "when": 1}, UsageError, "unknown field 'when'"),
    ]
    with psycopg.connect(database_url, autocommit=True) as app:
        for run, error, message in cases:
            with pytest.raises(error, match=message):
                cronjobs.enqueue_many(app, [{"job": "send_receipt"}, run])
        # the SQL function says the same to any caller, with its own SQLSTATE
        with pytest.raises(psycopg.Error) as raised:
            app.execute("SELECT cronjobs_enqueue('nope')")
        assert raised.value.sqlstate == "CJ002"
        with pytest.raises(psycopg.errors.InvalidParameterValue, match="not an object"):
            app.execute("SELECT cronjobs_enqueue('send_receipt', '\"x\"')")
        with pytest.raises(TypeError, match="cannot enqueue on a"):
            cronjobs.enqueue(object(), "send_receipt")
    assert snapshot(db) == before


def test_a_run_for_later_waits_as_scheduled_and_is_queued_at_its_time(
        cli: Invoke, database_url: str, store: Store) -> None:
    _define(cli, "send_receipt", "--overlap", "skip")
    at = store.now() + dt.timedelta(minutes=30)
    with psycopg.connect(database_url, autocommit=True) as app:
        later = cronjobs.enqueue(app, "send_receipt", at=at)
        cronjobs.enqueue(app, "send_receipt")  # waiting when the later one comes due
    assert later.status == "scheduled"
    tick = cli("tick", "--now", (at + dt.timedelta(seconds=1)).isoformat(), "--allow-future",
               "--json")
    assert tick.exit_code == 0, tick.stderr
    # an enqueued run is never held back by the overlap policy: both ran
    assert json.loads(tick.stdout)["counts"]["succeeded"] == 2


def test_the_claim_takes_higher_priorities_first_then_the_oldest_due(
        cli: Invoke, database_url: str, store: Store) -> None:
    _define(cli, "low", "--priority", "-5")
    _define(cli, "high", "--priority", "7")
    _define(cli, "plain")
    start = store.now() - dt.timedelta(minutes=10)
    with psycopg.connect(database_url, autocommit=True) as app:
        old_low = cronjobs.enqueue(app, "low", at=start)
        plain = cronjobs.enqueue(app, "plain", at=start + dt.timedelta(minutes=1))
        high = cronjobs.enqueue(app, "high", at=start + dt.timedelta(minutes=2))
        boosted = cronjobs.enqueue(app, "low", priority=7, at=start + dt.timedelta(minutes=1))
    triggered = cli("trigger", "plain", "--priority", "50", "--json")
    assert triggered.exit_code == 0, triggered.stderr
    manual = json.loads(triggered.stdout)
    assert (manual["priority"], manual["trigger"]) == (50, "manual")
    claimed = [c.id for _ in range(5) for c in _claim(store, limit=1)]
    assert claimed == [manual["id"], boosted.id, high.id, plain.id, old_low.id]


def test_a_listening_worker_is_woken_once_per_statement_at_commit(
        cli: Invoke, database_url: str) -> None:
    _define(cli, "send_receipt")
    with psycopg.connect(database_url, autocommit=True) as listener, \
            psycopg.connect(database_url) as app:
        listener.execute("LISTEN cronjobs_runs")
        cronjobs.enqueue_many(app, [{"job": "send_receipt"}] * 50)
        assert _notifications(listener) == []  # not before the commit
        app.commit()
        assert _notifications(listener) == ["send_receipt"]
        cronjobs.enqueue(app, "send_receipt")
        app.rollback()
        assert _notifications(listener) == []


def _notifications(conn: psycopg.Connection[Any]) -> list[str]:
    select.select([conn.fileno()], [], [], 0.5)
    return [n.payload for n in conn.notifies(timeout=0.5, stop_after=100)]


def test_runs_show_and_json_say_key_priority_and_origin(cli: Invoke, database_url: str
                                                        ) -> None:
    _define(cli, "send_receipt", "--priority", "4")
    with psycopg.connect(database_url, autocommit=True) as app:
        run = cronjobs.enqueue(app, "send_receipt", key="order-9")
        cronjobs.enqueue(app, "send_receipt", key="order-10")
    listed = cli("runs", "--key", "order-9", "--json")
    assert listed.exit_code == 0, listed.stderr
    [found] = json.loads(listed.stdout)
    assert (found["id"], found["key"], found["priority"], found["trigger"]) == (
        run.id, "order-9", 4, "enqueue")
    shown = cli("show", str(run.id))
    assert "  key         order-9" in shown.stdout
    assert "  priority    4" in shown.stdout
    assert "(enqueue)" in shown.stdout
    assert cli("runs", "--key", "nothing").stdout.strip() == "no runs"


def test_expired_keys_are_pruned_by_the_upkeep(cli: Invoke, database_url: str,
                                                store: Store,
                                                db: psycopg.Connection[Any]) -> None:
    _define(cli, "send_receipt", "--key-window", "1h")
    with psycopg.connect(database_url, autocommit=True) as app:
        cronjobs.enqueue_many(app, [{"job": "send_receipt", "key": str(n)} for n in range(3)])
    now = store.now()
    _finish(store, _claim(store, limit=2), now)
    assert upkeep(store, now=now + dt.timedelta(minutes=59)).keys == 0
    assert upkeep(store, now=now + dt.timedelta(hours=1)).keys == 2
    # the key whose run still waits stays
    assert db.execute("SELECT key FROM job_run_keys").fetchall() == [("2",)]


def test_enqueue_async_on_a_psycopg_async_connection(cli: Invoke, database_url: str,
                                                     db: psycopg.Connection[Any]) -> None:
    _define(cli, "send_receipt")

    async def enqueue() -> list[int]:
        async with await psycopg.AsyncConnection.connect(database_url) as app:
            one = await cronjobs.enqueue_async(app, "send_receipt", key="a")
            many = await cronjobs.enqueue_many_async(app, [{"job": "send_receipt",
                                                            "key": "a"}])
            await app.rollback()
            kept = await cronjobs.enqueue_async(app, "send_receipt", key="a")
            await app.commit()
            return [one.id, many[0].id, kept.id]

    one, again, kept = asyncio.run(enqueue())
    assert one == again != kept
    assert db.execute("SELECT id FROM job_runs").fetchall() == [(kept,)]
