"""The storage of runs (schema.sql): a small queue of unfinished runs, a history partitioned
by retirement day, the kept runs; retention by dropping whole days; exactly-once whatever
moves and retires. Real processes, real PostgreSQL, exact counts."""

from __future__ import annotations

import datetime as dt
import subprocess
import sys
from typing import Any

import psycopg

from conftest import Invoke, count
from cronjobs.core.retention import ensure_partitions, upkeep
from cronjobs.db.store import Store

DAY = dt.timedelta(days=1)


def _where(db: psycopg.Connection[Any], table: str = "job_runs") -> list[tuple[Any, ...]]:
    """(id, status, partition) of every row of the table, by id."""
    key = "id" if table == "job_runs" else "run_id"
    return db.execute(f"SELECT {key}, tableoid::regclass::text FROM {table} "  # noqa: S608
                      "ORDER BY 1").fetchall()


def _define(cli: Invoke, name: str, *options: str) -> None:
    result = cli("define", name, "* * * * *", "--command", "true", *options)
    assert result.exit_code == 0, result.stderr


def test_a_finished_run_moves_to_its_retirement_day_with_its_attempts(
        cli: Invoke, db: psycopg.Connection[Any], store: Store) -> None:
    _define(cli, "once", "--max-attempts", "1")
    assert cli("trigger", "once").exit_code == 0
    result = cli("tick")
    assert result.exit_code == 0, result.stderr
    (run_id, status, finished, retire, partition), = db.execute(
        "SELECT id, status, finished_at, retire_at, tableoid::regclass::text FROM job_runs"
    ).fetchall()
    assert status == "succeeded"
    # the tick made the days its finishes retire on first: no run falls to the default
    assert retire == finished + 14 * DAY
    assert partition == f"job_runs_history_{retire.astimezone(dt.UTC):%Y%m%d}"
    assert count(db, "job_runs_queue") == 0
    assert db.execute("SELECT tableoid::regclass::text, retire_at FROM job_attempts "
                      "WHERE run_id = %s", (run_id,)).fetchall() == [
        (f"job_attempts_history_{retire.astimezone(dt.UTC):%Y%m%d}", retire)]
    # the job's last success, for retention to keep (within a minute)
    last = db.execute("SELECT last_succeeded_at FROM job_definitions").fetchone()
    assert last == (finished,)
    # and every reader still finds it
    shown = cli("show", str(run_id), "--json")
    assert shown.exit_code == 0 and '"status": "succeeded"' in shown.stdout
    assert str(run_id) in cli("runs", "once").stdout


def test_a_dead_run_is_kept_for_the_failure_retention_and_a_retry_brings_it_back(
        cli: Invoke, db: psycopg.Connection[Any]) -> None:
    _define(cli, "fails", "--max-attempts", "1")
    db.execute("UPDATE job_definitions SET command = 'exit 3'")
    assert cli("trigger", "fails").exit_code == 0
    assert cli("tick").exit_code == 0
    (run_id, status, finished, retire, stage), = db.execute(
        "SELECT id, status, finished_at, retire_at, stage FROM job_runs").fetchall()
    assert (status, stage, retire) == ("dead", "history", finished + 90 * DAY)
    assert db.execute("SELECT last_failed_at FROM job_definitions").fetchone() == (finished,)
    # a retry sends it back to the queue, attempts and all, and it runs again
    db.execute("UPDATE job_definitions SET command = 'true'")
    assert cli("retry", str(run_id)).exit_code == 0
    assert db.execute("SELECT stage, retire_at, status FROM job_runs").fetchall() == [
        ("queue", None, "queued")]
    assert db.execute("SELECT stage FROM job_attempts").fetchall() == [("queue",)]
    assert cli("tick").exit_code == 0
    assert db.execute("SELECT stage, status, attempt FROM job_runs").fetchall() == [
        ("history", "succeeded", 2)]
    assert db.execute("SELECT stage, attempt, outcome FROM job_attempts ORDER BY attempt"
                      ).fetchall() == [("history", 1, "failed"), ("history", 2, "succeeded")]


def test_a_cancelled_run_moves_at_once_and_a_removed_jobs_runs_at_the_next_upkeep(
        cli: Invoke, db: psycopg.Connection[Any], store: Store) -> None:
    # (an operator's cancel moved the run at the next upkeep before: now at once, the way
    # every run goes; the runs a removal cancels still wait for the upkeep)
    _define(cli, "waits")
    assert cli("trigger", "waits", "--in", "1h").exit_code == 0
    (run_id,) = db.execute("SELECT id FROM job_runs").fetchone() or ()
    cancelled = cli("cancel", str(run_id), "--json")
    assert cancelled.exit_code == 0, cancelled.stderr
    (stage, status, finished, retire), = db.execute(
        "SELECT stage, status, finished_at, retire_at FROM job_runs").fetchall()
    assert (stage, status, retire) == ("history", "cancelled", finished + 14 * DAY)
    _define(cli, "goes")
    assert cli("trigger", "goes", "--in", "1h").exit_code == 0
    (gone_id,) = db.execute("SELECT id FROM job_runs_queue").fetchone() or ()
    assert cli("remove", "goes", "--yes").exit_code == 0
    assert db.execute("SELECT id, stage FROM job_runs ORDER BY id").fetchall() == [
        (run_id, "history"), (gone_id, "queue")]
    report = upkeep(store, now=store.now())
    assert report.archived == 1
    (stage, status, finished, retire), = db.execute(
        "SELECT stage, status, finished_at, retire_at FROM job_runs WHERE id = %s",
        (gone_id,)).fetchall()
    assert (stage, status, retire) == ("history", "cancelled", finished + 14 * DAY)


def _history(db: psycopg.Connection[Any], job: str, status: str, finished: dt.datetime,
             retire: dt.datetime, *, acknowledged: bool = False) -> int:
    row = db.execute(
        "INSERT INTO job_runs (definition_id, scheduled_for, trigger, status, max_attempts, "
        "eligible_at, attempt, started_at, finished_at, acknowledged_at, stage, retire_at) "
        "SELECT id, %(f)s, 'manual', %(s)s, 1, %(f)s, 1, %(f)s, %(f)s, "
        "CASE WHEN %(a)s THEN %(f)s END, 'history', %(r)s FROM job_definitions "
        "WHERE name = %(j)s RETURNING id",
        {"f": finished, "s": status, "a": acknowledged, "r": retire, "j": job}).fetchone()
    assert row is not None
    db.execute("INSERT INTO job_attempts (run_id, attempt, worker, lease_token, started_at, "
               "finished_at, outcome, stage, retire_at) VALUES (%s, 1, 'w', "
               "gen_random_uuid(), %s, %s, 'succeeded', 'history', %s)",
               (row[0], finished, finished, retire))
    return int(row[0])


def test_retirement_drops_whole_days_and_keeps_what_must_outlive_them(
        cli: Invoke, db: psycopg.Connection[Any], store: Store) -> None:
    for name in ("steady", "stopped", "broken", "fixed"):
        _define(cli, name)
    now = store.now()
    today = now.astimezone(dt.UTC).date()
    gone_day = today - 2 * DAY  # its day retired: dropped
    live_day = today + 5 * DAY
    for day in (gone_day, live_day):
        db.execute("SELECT cronjobs_add_history_day(%s)", (day,))
    old = dt.datetime.combine(gone_day, dt.time(12), dt.UTC)
    new = dt.datetime.combine(live_day, dt.time(12), dt.UTC)
    finished_old, finished_new = now - 20 * DAY, now - 9 * DAY
    runs = {
        # steady: an old success, and a newer one still within its retention
        "steady-old": _history(db, "steady", "succeeded", finished_old, old),
        "steady-new": _history(db, "steady", "succeeded", finished_new, new),
        # stopped: its only success is old: kept as its latest
        "stopped": _history(db, "stopped", "succeeded", finished_old, old),
        # broken: a dead run nobody acknowledged: kept; fixed: acknowledged: retires
        "broken": _history(db, "broken", "dead", finished_old, old),
        "fixed": _history(db, "fixed", "dead", finished_old - DAY, old, acknowledged=True),
        "fixed-latest": _history(db, "fixed", "dead", finished_new, new, acknowledged=True),
        # a row the default partition caught (its day was never made), retired row by row
        "default": _history(db, "steady", "succeeded", finished_old - DAY, now - 3 * DAY),
    }
    for name, column, run in (("steady", "last_succeeded_at", "steady-new"),
                              ("stopped", "last_succeeded_at", "stopped"),
                              ("broken", "last_failed_at", "broken"),
                              ("fixed", "last_failed_at", "fixed-latest")):
        db.execute(f"UPDATE job_definitions SET {column} = r.finished_at "  # noqa: S608
                   "FROM job_runs AS r WHERE r.id = %s AND job_definitions.name = %s",
                   (runs[run], name))
    assert db.execute("SELECT count(*) FROM job_runs_history_default").fetchone() == (1,)

    report = upkeep(store, now=now)
    assert (report.kept, report.dropped, report.retired_rows) == (2, 1, 1)
    partitions = {name for (name,) in db.execute(
        "SELECT c.relname FROM pg_inherits AS i JOIN pg_class AS c ON c.oid = i.inhrelid "
        "WHERE i.inhparent = 'job_runs_history'::regclass")}
    assert f"job_runs_history_{gone_day:%Y%m%d}" not in partitions
    assert f"job_runs_history_{live_day:%Y%m%d}" in partitions
    left = dict(db.execute("SELECT id, stage FROM job_runs").fetchall())
    assert left == {runs["stopped"]: "kept", runs["broken"]: "kept",
                    runs["steady-new"]: "history", runs["fixed-latest"]: "history"}
    # their attempts went with them, and retired with them
    assert dict(db.execute("SELECT run_id, stage FROM job_attempts").fetchall()) == left
    # the job pages still show them
    assert str(runs["stopped"]) in cli("runs", "stopped").stdout

    # acknowledged, a dead run no longer needs keeping once a later one died; a kept
    # success goes once its job succeeds again (the upkeep looks at the kept runs when a
    # day retires: once a day)
    assert cli("ack", str(runs["broken"])).exit_code == 0
    db.execute("UPDATE job_definitions SET last_failed_at = now() WHERE name = 'broken'")
    db.execute("UPDATE job_definitions SET last_succeeded_at = now() WHERE name = 'stopped'")
    assert store.retention.release_kept(before=now) == 2
    assert dict(db.execute("SELECT id, stage FROM job_runs").fetchall()) == {
        runs["steady-new"]: "history", runs["fixed-latest"]: "history"}
    # a second upkeep finds nothing to do
    again = upkeep(store, now=now)
    assert (again.kept, again.dropped, again.retired_rows, again.released) == (0, 0, 0, 0)


def test_a_day_made_late_takes_in_the_runs_the_default_partition_caught(
        cli: Invoke, db: psycopg.Connection[Any], store: Store) -> None:
    _define(cli, "early")
    now = store.now()
    day = now.astimezone(dt.UTC).date() + 200 * DAY  # not among the days made ahead
    retire = dt.datetime.combine(day, dt.time(6), dt.UTC)
    run_id = _history(db, "early", "succeeded", now, retire)
    assert _where(db) == [(run_id, "job_runs_history_default")]
    db.execute("SELECT cronjobs_add_history_day(%s)", (day,))
    assert _where(db) == [(run_id, f"job_runs_history_{day:%Y%m%d}")]
    assert _where(db, "job_attempts") == [(run_id, f"job_attempts_history_{day:%Y%m%d}")]
    # made again: nothing changes; made by the upkeep for the retentions in use
    db.execute("SELECT cronjobs_add_history_day(%s)", (day,))
    assert ensure_partitions(store, now=now) == 2 * 4  # (14 and 90 days, 4 days each)
    assert ensure_partitions(store, now=now) == 0


def test_only_a_past_day_can_be_dropped(db: psycopg.Connection[Any], store: Store) -> None:
    # (a day not over by the database's clock was an error: it is left, and said so)
    today = store.now().astimezone(dt.UTC).date()
    for day in (today - DAY, today):
        db.execute("SELECT cronjobs_add_history_day(%s)", (day,))
    assert db.execute("SELECT cronjobs_drop_history_day(%s)", (today,)).fetchone() == (False,)
    assert db.execute("SELECT cronjobs_drop_history_day(%s)", (today - DAY,)).fetchone() == (
        True,)
    assert store.retention.history_partitions()["job_runs_history"] == [today]


def test_backfill_refuses_slots_whose_runs_retention_may_have_dropped(
        cli: Invoke, db: psycopg.Connection[Any]) -> None:
    _define(cli, "hourly")
    window = ("--from", "2026-01-01T00:00:00Z", "--to", "2026-01-01T02:00:00Z")
    db.execute("UPDATE cronjobs_retention SET retired_before = '2026-02-01T00:00:00Z'")
    before = count(db, "job_runs")
    result = cli("backfill", "--yes", "hourly", *window)
    assert result.exit_code == 2
    assert "retention has dropped runs of hourly from before 2026-01-18" in result.stderr
    assert len(result.stderr.strip().splitlines()) == 1
    assert count(db, "job_runs") == before
    # nothing retired before those slots could have run: they are the operator's to decide
    db.execute("UPDATE cronjobs_retention SET retired_before = NULL")
    assert cli("backfill", "--yes", "hourly", *window).exit_code == 0
    assert count(db, "job_runs") == before + 121


def test_backfill_never_makes_a_slot_whose_run_moved_to_the_history_again(
        cli: Invoke, db: psycopg.Connection[Any]) -> None:
    _define(cli, "daily")
    window = ("--from", "2026-01-01T00:00:00Z", "--to", "2026-01-01T00:02:00Z")
    assert cli("backfill", "--yes", "daily", *window).exit_code == 0
    assert cli("tick").exit_code == 0
    assert db.execute("SELECT stage, count(*) FROM job_runs WHERE trigger = 'backfill' "
                      "GROUP BY stage").fetchall() == [("history", 3)]
    again = cli("backfill", "--yes", "daily", *window, "--json")
    assert again.exit_code == 0, again.stderr
    assert '"created": 0' in again.stdout
    assert count(db, "job_runs") == 3 + db.execute(
        "SELECT count(*) FROM job_runs WHERE trigger <> 'backfill'").fetchone()[0]  # type: ignore[index]


# -- exactly once, whatever moves and retires -------------------------------------------------

AUDIT = """
CREATE TABLE audit_made (definition_id bigint, scheduled_for timestamptz, trigger text);
CREATE FUNCTION audit_made() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO audit_made VALUES (NEW.definition_id, NEW.scheduled_for, NEW.trigger);
    RETURN NULL;
END $$;
-- every run ever made: a slot becomes a run in the queue (a retry's return to the queue
-- would be an insert too, and there is none here)
CREATE TRIGGER audit_made AFTER INSERT ON job_runs_queue
    FOR EACH ROW EXECUTE FUNCTION audit_made();
"""

JOBS = 8
MINUTES = 20
TICKERS = 4


def test_concurrent_ticks_race_the_move_and_the_retirement_and_each_slot_runs_once(
        cli: Invoke, db: psycopg.Connection[Any], database_url: str) -> None:
    # Every-minute jobs over 40 minutes three days ago (ticks with a pinned clock, which
    # also pins their finishes: retention of one day makes those runs retire two days ago).
    # Four processes tick through the minutes at once, racing each other's materialisation
    # and their finishes' moves to the history; a fifth runs the upkeep at the real time
    # over and over, dropping the days of the runs the others just finished and deleting
    # those the default partition caught. Every slot is made into a run exactly once.
    db.execute(AUDIT)
    db.execute("UPDATE cronjobs_retention SET succeeded = '1 day', failed = '1 day'")
    start = (db.execute("SELECT date_trunc('minute', now()) - interval '3 days'")
             .fetchone() or (None,))[0]
    assert start is not None
    for n in range(JOBS):
        result = cli("define", f"job-{n}", "* * * * *", "--command", "true",
                     "--catchup", "all", "--overlap", "allow")
        assert result.exit_code == 0, result.stderr
    # the jobs start at `start`: their cursors go back there
    db.execute("UPDATE job_definitions SET cursor_at = %s, next_due_at = %s + interval "
               "'1 minute', schedule_since = %s", (start, start, start))
    # half the days those runs retire on are made (dropped whole); the rest fall to the
    # default partition (retired row by row)
    db.execute("SELECT cronjobs_add_history_day((%s + interval '1 day')::date)", (start,))

    def tick(at: dt.datetime) -> list[str]:
        return [sys.executable, "-m", "cronjobs", "--database-url", database_url, "tick",
                "--now", at.isoformat(), "--concurrency", "4"]

    upkeep_loop = (
        "import sys, time, psycopg\n"
        "from cronjobs.db.store import Store\n"
        "from cronjobs.core.retention import upkeep\n"
        "store = Store(psycopg.connect(sys.argv[1], autocommit=True))\n"
        "done = total = 0\n"
        "while not done:\n"
        "    report = upkeep(store, now=store.now())\n"
        "    total += report.dropped + report.retired_rows\n"
        "    done = store.conn.execute('SELECT count(*) FROM audit_made').fetchone()[0] >= "
        "int(sys.argv[2]) and store.conn.execute('SELECT count(*) FROM job_runs_queue')"
        ".fetchone()[0] == 0\n"
        "    time.sleep(0.05)\n"
        "report = upkeep(store, now=store.now())\n"
        "print(total + report.dropped + report.retired_rows)\n")
    retiring = subprocess.Popen([sys.executable, "-c", upkeep_loop, database_url,
                                 str(JOBS * MINUTES)],
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    tickers = []
    for _ in range(TICKERS):
        script = "; ".join(" ".join(map(_quote, tick(start + dt.timedelta(minutes=m, seconds=1))))
                           + " >/dev/null" for m in range(1, MINUTES + 1))
        tickers.append(subprocess.Popen(["bash", "-c", "set -e; " + script],
                                        stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                        text=True))
    outputs = [p.communicate(timeout=600) for p in tickers]
    problems = [line for _, err in outputs for line in err.splitlines()
                if not line.startswith("tick: ")]
    assert [p.returncode for p in tickers] == [0] * TICKERS, problems
    out, err = retiring.communicate(timeout=300)
    assert retiring.returncode == 0, err
    assert int(out) > 0  # it did retire runs while the ticks went on

    made = db.execute("SELECT definition_id, scheduled_for, count(*) FROM audit_made "
                      "GROUP BY 1, 2 HAVING count(*) > 1").fetchall()
    assert made == []  # 0 duplicates
    assert db.execute("SELECT count(*), count(DISTINCT (definition_id, scheduled_for)) "
                      "FROM audit_made WHERE trigger = 'schedule'").fetchone() == (
        JOBS * MINUTES, JOBS * MINUTES)
    # every one of them ran and retired: nothing is left but nothing was lost on the way
    assert count(db, "job_runs_queue") == 0
    assert db.execute("SELECT count(*) FROM job_skips").fetchone() == (0,)
    # ticks at those instants again make nothing: the slots were decided, whether their
    # runs still exist or not
    for minute in (1, MINUTES // 2, MINUTES):
        result = subprocess.run(tick(start + dt.timedelta(minutes=minute, seconds=2)),
                                capture_output=True, text=True, timeout=120, check=False)
        assert result.returncode == 0, result.stderr
    assert count(db, "audit_made") == JOBS * MINUTES


def _quote(text: str) -> str:
    return "'" + text.replace("'", "'\\''") + "'"
