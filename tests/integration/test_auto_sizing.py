"""--concurrency auto inside a tick: the executor's claim loop sizes itself from the runs due
when it starts, and again (upwards, at most every RESIZE_EVERY) after a claim that filled
every free slot; an explicit --concurrency is never changed. Real store, runs seeded with
SQL, the claim loop's own clock (monotonic seconds) passed in."""

from __future__ import annotations

from typing import Any

import psycopg

from cronjobs.clock import Clock
from cronjobs.db.store import Store
from cronjobs.execution.executor import Executor
from cronjobs.execution.options import TickOptions
from cronjobs.execution.sizing import FLOOR, RESIZE_EVERY, cores, thread_cap


def _queue(db: psycopg.Connection[Any], count: int, *, kind: str = "handler") -> None:
    """``count`` runs due now of one job (a no-op handler, or a command)."""
    db.execute(
        "INSERT INTO job_definitions (name, schedule, kind, handler, command, overlap, "
        "cursor_at, next_due_at) VALUES (%(name)s, '0 0 1 1 *', %(kind)s, %(handler)s, "
        "%(command)s, 'allow', now(), now() + interval '300 days') "
        "ON CONFLICT DO NOTHING",
        {"name": f"sized-{kind}", "kind": kind, "handler": "noop" if kind == "handler" else None,
         "command": "true" if kind == "command" else None})
    db.execute(
        "INSERT INTO job_runs (definition_id, scheduled_for, trigger, max_attempts, exclusive, "
        "eligible_at) SELECT d.id, now() - g * interval '1 minute', 'schedule', 1, false, "
        "now() - interval '1 second' FROM generate_series(1, %(count)s) AS g, "
        "job_definitions AS d WHERE d.name = %(name)s",
        {"count": count, "name": f"sized-{kind}"})


def _executor(store: Store, **options: Any) -> Executor:
    return Executor(store, TickOptions(worker="sizing-test", **options),
                    clock=Clock(store.now()), handlers=("noop",))


def test_a_tick_grows_when_more_comes_due(store: Store, db: psycopg.Connection[Any]) -> None:
    claims = _executor(store, in_process=True).claims
    claims.size(0.0)  # nothing due yet
    assert (claims.concurrency, claims.report.concurrency) == (FLOOR, FLOOR)
    _queue(db, 30)
    # a claim that filled every slot, too soon after the last count: no new count
    assert claims.claimed(FLOOR, FLOOR, RESIZE_EVERY / 2, running=True)
    assert claims.concurrency == FLOOR
    assert claims.claimed(FLOOR, FLOOR, RESIZE_EVERY, running=True)
    assert (claims.concurrency, claims.report.concurrency) == (30, 30)
    # a claim that found less than it asked for: nothing more is due, no count
    _queue(db, 1000)
    assert claims.claimed(3, 10, 3 * RESIZE_EVERY, running=True)
    assert claims.concurrency == 30
    assert claims.claimed(10, 10, 4 * RESIZE_EVERY, running=True)
    assert claims.concurrency == thread_cap(cores())


def test_it_never_shrinks_within_a_tick(store: Store, db: psycopg.Connection[Any]) -> None:
    _queue(db, 20)
    claims = _executor(store, in_process=True).claims
    claims.size(0.0)
    assert claims.concurrency == 20
    db.execute("DELETE FROM job_runs")
    claims.size(1.0)
    assert claims.concurrency == 20


def test_processes_are_held_to_their_cap(store: Store, db: psycopg.Connection[Any]) -> None:
    _queue(db, 100)  # handlers in processes of their own (not --in-process)
    claims = _executor(store).claims
    claims.size(0.0)
    assert claims.concurrency == max(FLOOR, 2 * cores())


def test_an_explicit_concurrency_is_never_changed(store: Store,
                                                  db: psycopg.Connection[Any]) -> None:
    _queue(db, 100)
    claims = _executor(store, in_process=True, concurrency=2).claims
    claims.size(0.0)
    assert claims.claimed(2, 2, 10.0, running=True)
    assert claims.concurrency == 2
