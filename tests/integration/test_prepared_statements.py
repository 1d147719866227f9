"""Server-side prepared statements: the executor's pass uses them on a connection of its own
to PostgreSQL (auto), or as --prepared-statements / CRONJOBS_PREPARED_STATEMENTS says, and so
does the dashboard's pool, for every statement. Through a transaction pooler auto turns them
off: tests/acceptance/test_pgbouncer.py."""

from __future__ import annotations

import subprocess
import sys
from typing import Any

import psycopg
import pytest
from psycopg.conninfo import make_conninfo

from conftest import clean_env, make_invoke, run_cronjobs, snapshot
from cronjobs.db.connect import SESSION_MARKER, connect, connection_kwargs
from cronjobs.web.site import Settings, Site

ONLY_WHEN_ASKED = 2**31  # the threshold connect() sets: prepared only when a call asks


@pytest.mark.parametrize(("mode", "threshold"),
                         [("auto", ONLY_WHEN_ASKED), ("on", ONLY_WHEN_ASKED), ("off", None)])
def test_a_direct_connection_allows_them_unless_told_off(
        database_url: str, mode: str, threshold: int | None) -> None:
    # (the user's own startup options still apply beside the marker auto mode sends)
    url = make_conninfo(database_url, options="-c work_mem=8MB")
    conn = connect(url, retry_for=0, prepared=mode)
    try:
        assert conn.prepare_threshold == threshold
        row = conn.execute("SHOW work_mem").fetchone()
        assert row == ("8MB",)
    finally:
        conn.close()


@pytest.mark.parametrize("mode", ["on", "off"])
def test_ticks_run_every_run_once_either_way(
        database_url: str, db: psycopg.Connection[Any], mode: str) -> None:
    # 3 ticks at once over 300 queued runs (backfilled minutes), 4 handlers each: each
    # run once, prepared statements or not
    env = {"CRONJOBS_DATABASE_URL": database_url, "CRONJOBS_PREPARED_STATEMENTS": mode}
    assert run_cronjobs("define", "each", "* * * * *", "--command", "true", "--overlap",
                        "allow", env=env).returncode == 0
    backfill = run_cronjobs("backfill", "--yes", "each", "--from", "2026-01-01T00:00:00Z", "--to",
                            "2026-01-01T04:59:00Z", env=env)
    assert backfill.returncode == 0, backfill.stderr
    procs = [subprocess.Popen([sys.executable, "-m", "cronjobs", "tick", "--concurrency", "4"],
                              env=clean_env(**env), stdout=subprocess.DEVNULL,
                              stderr=subprocess.PIPE, text=True) for _ in range(3)]
    for proc in procs:
        _, err = proc.communicate(timeout=120)
        assert proc.returncode == 0, err
    rows = db.execute("SELECT status, count(*), sum(attempt) FROM job_runs "
                      "WHERE trigger = 'backfill' GROUP BY 1").fetchall()
    assert rows == [("succeeded", 300, 300)]
    # (the backfilled runs' attempts: when a minute begins between `define` and the ticks,
    # they also run that minute's scheduled run, rightly)
    attempts = db.execute("SELECT count(*), count(DISTINCT a.run_id) FROM job_attempts AS a "
                          "JOIN job_runs AS r ON r.id = a.run_id "
                          "WHERE r.trigger = 'backfill' AND a.outcome = 'succeeded'"
                          ).fetchone()
    assert attempts == (300, 300)


@pytest.mark.parametrize("where", ["option", "environment"])
def test_a_bad_value_is_a_usage_error_that_writes_nothing(
        database_url: str, db: psycopg.Connection[Any], where: str) -> None:
    before = snapshot(db)
    invoke = make_invoke(["--database-url", database_url])
    args = ["define", "job", "0 3 * * *", "--command", "true"]
    if where == "option":
        result = invoke("--prepared-statements", "sometimes", *args)
        assert result.stderr == ("error: invalid --prepared-statements: 'sometimes' "
                                 "(expected auto, on or off)\n")
    else:
        result = invoke(*args, env={"CRONJOBS_PREPARED_STATEMENTS": "sometimes"})
        assert result.stderr == ("error: invalid CRONJOBS_PREPARED_STATEMENTS: 'sometimes' "
                                 "(expected auto, on or off)\n")
    assert result.exit_code == 2
    assert snapshot(db) == before


@pytest.mark.parametrize(("mode", "threshold"), [("auto", 0), ("on", 0), ("off", None)])
def test_the_dashboards_pool_prepares_every_statement_unless_told_off(
        database_url: str, mode: str, threshold: int | None) -> None:
    # `cronjobs serve` runs every statement of a request prepared (its verdict at every
    # /healthz above all): planned once per connection, not at every request
    site = Site(Settings(conninfo=database_url, prepared=mode))
    site.pool.open(wait=True)
    try:
        with site.store() as store:
            assert store.conn.prepare_threshold == threshold
            site.verdict(store, fresh=True)
            site.verdict(store, fresh=True)
            row = store.conn.execute("SELECT count(*) FROM pg_prepared_statements "
                                     "WHERE from_sql IS FALSE").fetchone()
            # the verdict's statements run their generic plan, planned once: health's
            # (the numbers) among them, which PostgreSQL left to choose planned again at
            # every execution
            plans = store.conn.execute(
                "SELECT generic_plans, custom_plans FROM pg_prepared_statements "
                "WHERE statement LIKE '%%AS last_tick_at%%' "
                "AND statement NOT LIKE '%%pg_prepared_statements%%'").fetchall()  # (this)
        assert row is not None
        assert (row[0] > 5) == (threshold is not None), row
        assert plans == ([(2, 0)] if threshold is not None else []), plans
    finally:
        site.pool.close()


def test_each_pooled_connection_sends_a_marker_of_its_own(database_url: str) -> None:
    # (a transaction pooler that passed startup options on could hand one connection's
    # session to another: only a marker of its own proves the session is the connection's)
    markers = {connection_kwargs(database_url, prepared="auto")["options"] for _ in range(3)}
    assert len(markers) == 3
    assert all(SESSION_MARKER in m for m in markers)
    assert SESSION_MARKER not in str(connection_kwargs(database_url, prepared="off")["options"])
