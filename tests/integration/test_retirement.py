"""Retirement: one clock (the tick's instant decides what retires; the database never drops
a day not over by its own clock, and leaves it for later), one way a run moves to the
history, one retention policy, and the days a first tick needs made by `migrate`. Real
processes, real PostgreSQL, exact counts."""

from __future__ import annotations

import datetime as dt
import random
import re
import subprocess
import sys
from typing import Any

import psycopg
import pytest

from conftest import Invoke, clean_env, count, make_invoke, snapshot
from cronjobs.db import sql
from cronjobs.db.store import Store
from cronjobs.tick import TickOptions, tick

DAY = dt.timedelta(days=1)
HOUR = dt.timedelta(hours=1)


def _define(cli: Invoke, name: str, *options: str, schedule: str = "0 0 1 1 *") -> None:
    result = cli("define", name, schedule, "--command", "true", *options)
    assert result.exit_code == 0, result.stderr


def _days(db: psycopg.Connection[Any]) -> list[dt.date]:
    """The days of job_runs_history's partitions."""
    return sorted(dt.datetime.strptime(name[-8:], "%Y%m%d").date() for (name,) in db.execute(
        "SELECT c.relname FROM pg_inherits AS i JOIN pg_class AS c ON c.oid = i.inhrelid "
        "WHERE i.inhparent = 'job_runs_history'::regclass AND c.relname ~ '_[0-9]{8}$'"))


# -- one retention policy ------------------------------------------------------------------------

@pytest.mark.parametrize("args", [
    ["prune", "--older-than", "30d"],
    ["prune", "--older-than", "30d", "--keep-last", "10", "--dry-run", "--json"],
    ["prune"],
    ["tick", "--retention", "30d"],
    ["worker", "--retention", "30d"],
])
def test_prune_and_tick_retention_are_gone_with_one_line_and_exit_2(
        cli: Invoke, db: psycopg.Connection[Any], args: list[str]) -> None:
    _define(cli, "job")
    before = snapshot(db)
    result = cli(*args)
    assert result.exit_code == 2, (result.stdout, result.stderr)
    (line,) = result.stderr.splitlines()
    assert line.startswith("error: ") and "is gone" in line
    assert "`cronjobs retention --succeeded 30d --failed 90d`" in line
    assert result.stdout == ""
    assert snapshot(db) == before


def test_the_retention_environment_variable_is_gone_too(cli: Invoke,
                                                        db: psycopg.Connection[Any]) -> None:
    before = snapshot(db)
    result = cli("tick", env={"CRONJOBS_RETENTION": "30d"})
    assert result.exit_code == 2
    assert result.stderr.splitlines() == [
        "error: --retention (CRONJOBS_RETENTION) is gone: every tick applies the one retention "
        "policy, dropping whole days; set it with `cronjobs retention --succeeded 30d "
        "--failed 90d` and remove --retention"]
    assert snapshot(db) == before


# -- migrate makes the days a first tick needs ---------------------------------------------------

def test_after_migrate_a_first_ticks_finishes_land_in_their_days(empty_database_url: str) -> None:
    invoke = make_invoke(["--database-url", empty_database_url])
    assert invoke("migrate").exit_code == 0
    for name in ("ok", "fails"):
        assert invoke("define", name, "0 0 1 1 *", "--command",
                      "true" if name == "ok" else "exit 3", "--max-attempts", "1").exit_code == 0
        assert invoke("trigger", name).exit_code == 0
    ticked = invoke("tick")
    assert ticked.exit_code == 0, ticked.stderr
    with psycopg.connect(empty_database_url, autocommit=True) as conn:
        assert dict(conn.execute("SELECT status, stage FROM job_runs").fetchall()) == {
            "succeeded": "history", "dead": "history"}
        # written once, in their days: none caught by the default partitions
        assert count(conn, "job_runs_history_default") == 0
        assert count(conn, "job_attempts_history_default") == 0
        assert count(conn, "job_attempts_history") == 2


# -- one clock -----------------------------------------------------------------------------------

def test_a_tick_ahead_of_the_database_leaves_the_days_it_may_not_drop(
        cli: Invoke, db: psycopg.Connection[Any], store: Store) -> None:
    _define(cli, "job")
    now = store.now()
    today = now.astimezone(dt.UTC).date()
    for day in (today - 2 * DAY, today, today + DAY):
        db.execute("SELECT cronjobs_add_history_day(%s)", (day,))
    # three days ahead: by the tick's clock all three days are over; by the database's, only
    # the first
    report = tick(store, TickOptions(worker="test", now=now + 3 * DAY, allow_future=True))
    assert (report.upkeep.dropped, report.upkeep.left, report.upkeep.error) == (1, 2, None)
    days = _days(db)
    assert today - 2 * DAY not in days and {today, today + DAY} <= set(days)
    assert db.execute("SELECT status, error FROM job_ticks").fetchall() == [("finished", None)]
    # the same through the command line, ticking again further ahead: exit 0
    result = cli("tick", "--now", (now + 10 * DAY).isoformat(), "--allow-future")
    assert result.exit_code == 0, result.stderr
    assert {today, today + DAY} <= set(_days(db))


def test_a_failed_upkeep_never_fails_a_tick_that_did_its_runs(
        cli: Invoke, db: psycopg.Connection[Any], caplog: pytest.LogCaptureFixture) -> None:
    _define(cli, "job")
    assert cli("trigger", "job").exit_code == 0
    # an old skip record, whose deletion the upkeep cannot do
    db.execute("INSERT INTO job_skips (definition_id, first_slot, last_slot, reason, "
               "decided_at) SELECT id, now(), now(), 'paused', now() - interval '60 days' "
               "FROM job_definitions")
    db.execute("CREATE FUNCTION refuse() RETURNS trigger LANGUAGE plpgsql AS "
               "$$ BEGIN RAISE EXCEPTION 'no deleting today'; END $$")
    db.execute("CREATE TRIGGER refuse BEFORE DELETE ON job_skips "
               "FOR EACH ROW EXECUTE FUNCTION refuse()")
    result = cli("tick")
    assert result.exit_code == 0, result.stderr
    (logged,) = [r for r in caplog.records if getattr(r, "action", None) == "retention"]
    assert logged.levelname == "WARNING" and "no deleting today" in logged.getMessage()
    assert db.execute("SELECT status FROM job_runs").fetchall() == [("succeeded",)]
    (status, error, succeeded), = db.execute(
        "SELECT status, error, succeeded FROM job_ticks").fetchall()
    assert (status, succeeded) == ("finished", 1)
    assert error == "upkeep: CronjobsError: database error: no deleting today"


def _tick_command(database_url: str, at: dt.datetime) -> list[str]:
    return [sys.executable, "-m", "cronjobs", "--database-url", database_url, "-q", "tick",
            "--now", at.isoformat(), "--allow-future", "--concurrency", "2"]


@pytest.mark.slow
def test_ticks_anywhere_in_a_year_sixteen_at_a_time_all_exit_0(
        cli: Invoke, db: psycopg.Connection[Any], store: Store, database_url: str) -> None:
    # Ticks at instants from half a year back to half a year ahead (DST changes in both
    # directions among them), sixteen processes at once: each decides what retires by its
    # own instant, racing the others' upkeep; the ones ahead of the database find days they
    # may not drop yet. Every one exits 0 and records itself finished, without an error.
    for name, zone in (("berlin", "Europe/Berlin"), ("new_york", "America/New_York")):
        _define(cli, name, "--tz", zone, schedule="30 2 * * *")
    _define(cli, "hourly", schedule="0 * * * *")
    now = store.now().replace(microsecond=0)
    start = now - 183 * DAY
    db.execute("UPDATE job_definitions SET cursor_at = %s, next_due_at = %s, "
               "schedule_since = %s", (start, start + HOUR, start))
    chooser = random.Random(1712)
    instants = sorted(start + dt.timedelta(minutes=chooser.randrange(366 * 24 * 60))
                      for _ in range(48))
    # every table dropped, noted (the days the ticks retire)
    db.execute("CREATE TABLE audit_dropped (name text NOT NULL)")
    db.execute("CREATE FUNCTION note_drops() RETURNS event_trigger LANGUAGE plpgsql AS $$ "
               "BEGIN INSERT INTO audit_dropped SELECT object_name "
               "FROM pg_event_trigger_dropped_objects() WHERE object_type = 'table'; END $$")
    db.execute("CREATE EVENT TRIGGER note_drops ON sql_drop EXECUTE FUNCTION note_drops()")
    env = clean_env()
    for wave in range(0, len(instants), 16):
        processes = [subprocess.Popen(_tick_command(database_url, at), env=env,
                                      stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                      text=True) for at in instants[wave:wave + 16]]
        outcomes = [(p.wait(timeout=600), p.communicate()[1]) for p in processes]
        assert [code for code, _ in outcomes] == [0] * len(processes), outcomes
        assert [err for _, err in outcomes if "upkeep failed" in err] == []
    # (the ticks far ahead deleted the older ones' records, whose start, by the database's
    # clock, is more than the ticks' retention before their instants)
    assert db.execute("SELECT count(*) FROM job_ticks WHERE status <> 'finished' "
                      "OR error IS NOT NULL").fetchone() == (0,)
    # the ticks retired days, but none the database's clock has not seen end; those the
    # ticks ahead made and found over by their own clocks are left for later
    today = store.now().astimezone(dt.UTC).date()
    dropped = [dt.datetime.strptime(name[-8:], "%Y%m%d").date() for (name,) in db.execute(
        "SELECT name FROM audit_dropped WHERE name ~ '^job_runs_history_[0-9]{8}$'")]
    assert dropped != [] and max(dropped) < today
    assert [day for day in _days(db) if day >= today] != []


@pytest.mark.slow
def test_a_month_through_the_cli_levels_off(cli: Invoke, db: psycopg.Connection[Any],
                                            store: Store) -> None:
    # Three hourly jobs, one tick an hour for thirty simulated days (ending two weeks ago),
    # the default retention (14 days of successes): past the first retirement (day 15) the
    # history holds as many runs at a given hour of every day, and no day over stays.
    for n in range(3):
        _define(cli, f"hourly-{n}", schedule="0 * * * *")
    today = store.now().astimezone(dt.UTC).date()
    start = dt.datetime.combine(today - 45 * DAY, dt.time(), dt.UTC)
    db.execute("UPDATE job_definitions SET cursor_at = %s, next_due_at = %s, "
               "schedule_since = %s", (start, start + HOUR, start))
    seen: dict[int, tuple[int, int, int]] = {}
    for hour in range(1, 30 * 24 + 1):
        at = start + hour * HOUR + dt.timedelta(minutes=1)
        result = cli("tick", "--now", at.isoformat(), "-q")
        assert result.exit_code == 0, (at, result.stderr)
        if at.hour == 12:
            day = at.date()
            days = _days(db)
            assert [d for d in days if d < day] == []  # nothing over stays
            seen[(day - start.date()).days] = (
                count(db, "job_runs"), len([d for d in days if d < day + 30 * DAY]),
                count(db, "job_runs_history_default"))
    # growing until the first retirement, level after
    assert seen[5][0] < seen[10][0] < seen[14][0]
    assert len({seen[d] for d in range(15, 30)}) == 1, seen
    runs, _, default = seen[29]
    # three runs an hour: those finished on days 15 .. 28 (retiring on days 29 .. 42), and
    # on day 29 to noon (hours 0 .. 12)
    assert runs == 3 * (14 * 24 + 13)
    assert default == 0
    assert count(db, "job_runs_queue") == 0


# -- one way a run moves to the history ---------------------------------------------------------

def test_every_way_a_run_ends_moves_it_the_same_way(
        cli: Invoke, db: psycopg.Connection[Any], store: Store) -> None:
    for name in ("finished", "lost", "cancelled", "removed"):
        _define(cli, name, "--max-attempts", "1")
        later = ["--in", "1h"] if name in ("cancelled", "removed") else []
        assert cli("trigger", name, *later).exit_code == 0
    runs = dict(db.execute("SELECT d.name, r.id FROM job_runs AS r JOIN job_definitions AS d "
                           "ON d.id = r.definition_id").fetchall())
    # a lost lease that was the run's last attempt: the state a crashed worker leaves
    db.execute("UPDATE job_runs SET status = 'running', attempt = 1, lease_owner = 'gone:1', "
               "lease_token = gen_random_uuid(), lease_expires_at = now() - interval '1 minute', "
               "heartbeat_at = now() - interval '2 minutes', "
               "started_at = now() - interval '2 minutes' WHERE id = %s", (runs["lost"],))
    assert cli("cancel", str(runs["cancelled"])).exit_code == 0
    assert cli("remove", "removed", "--yes").exit_code == 0
    assert cli("tick").exit_code == 0  # finishes one, reclaims one, upkeep moves one
    # each the same way: in the history, retiring after its retention from its end, its
    # attempts with it, and its job's last success or death at its end
    assert count(db, "job_runs_queue") == 0 and count(db, "job_attempts_queue") == 0
    rows = db.execute(
        "SELECT d.name, r.status, r.stage, r.retire_at = r.finished_at + cronjobs_keep("
        "r.status, d.keep_succeeded, d.keep_failed), d.last_succeeded_at = r.finished_at, "
        "d.last_failed_at = r.finished_at FROM job_runs AS r JOIN job_definitions AS d "
        "ON d.id = r.definition_id ORDER BY d.name").fetchall()
    assert rows == [("cancelled", "cancelled", "history", True, None, None),
                    ("finished", "succeeded", "history", True, True, None),
                    ("lost", "dead", "history", True, None, True),
                    ("removed", "cancelled", "history", True, None, None)]
    assert db.execute("SELECT r.id, a.outcome, a.stage, a.retire_at = r.retire_at "
                      "FROM job_attempts AS a JOIN job_runs AS r ON r.id = a.run_id "
                      "ORDER BY r.id").fetchall() == sorted([
        (runs["finished"], "succeeded", "history", True),
        (runs["lost"], "lost", "history", True)])


def test_one_statement_writes_a_run_into_the_history() -> None:
    # Every named query that moves a run to the history is finish_runs, but the upgrade's
    # move of a pre-version-11 history (move_legacy_runs: kept one retention from the
    # upgrade, by design). keep_before_retiring moves runs out of it; requeue_run back.
    writers = sorted(name for name, text in sql.queries().items()
                     if re.search(r"INSERT INTO job_runs\b[^;]*'history'", text)
                     or re.search(r"SET stage = (CASE [^;]*?)?'history'", text))
    assert writers == ["finish_runs", "move_legacy_runs"]
    # the upkeep has no move of its own: it hands the runs it finds to finish_runs
    assert "archive_finished" not in sql.queries()
