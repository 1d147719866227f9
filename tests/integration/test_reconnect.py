"""A session that reconnects itself: the executor, handed a store opened with a way to
connect, goes on through a lost connection (the retry policy calls ``store.reconnect()``
between two attempts); nothing hands it a new store."""

from __future__ import annotations

from typing import Any

import psycopg

from conftest import Invoke, one_run
from cronjobs.clock import Clock
from cronjobs.db.connect import connect
from cronjobs.db.store import Store
from cronjobs.execution.executor import Executor
from cronjobs.tick import TickOptions


def _reconnecting(database_url: str) -> Store:
    return Store(connect(database_url), connect=lambda: connect(database_url, retry_for=0))


def _terminate(db: psycopg.Connection[Any], store: Store) -> int:
    pid = store.conn.info.backend_pid
    db.execute("SELECT pg_terminate_backend(%s)", (pid,))
    return pid


def test_the_executor_runs_its_runs_after_its_connection_was_lost(
        cli: Invoke, database_url: str, db: psycopg.Connection[Any]) -> None:
    one_run(cli, "steady", "--command", "echo steady")
    store = _reconnecting(database_url)
    try:
        executor = Executor(store, TickOptions(worker="test"), clock=Clock(store.now()))
        lost = _terminate(db, store)  # its first call (the reclaim) meets the lost connection
        report = executor.run()
        assert (report.claimed, report.succeeded, report.lost) == (1, 1, 0)
        assert store.conn.info.backend_pid != lost
    finally:
        store.close()
    assert db.execute("SELECT status, output_tail FROM job_runs").fetchall() == [
        ("succeeded", "steady\n")]
