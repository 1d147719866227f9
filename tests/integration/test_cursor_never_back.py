"""A job's cursor never moves back, whoever writes it: define, apply, resume, a job defined
again under a removed one's name, the tick, an upgrade; and the database refuses a write
that would. Exactly one run per slot across schedule edits, ticks that ran ahead, a clock
that steps back, pauses, and concurrent ticks racing edits and the move to the history —
counted over job_runs (the queue, the history and the kept runs)."""

from __future__ import annotations

import datetime as dt
import json
import random
import subprocess
import sys
from collections import Counter
from pathlib import Path
from typing import Any

import psycopg
import pytest

from conftest import Invoke, count
from cronjobs import cron as schedules
from cronjobs.db import sql
from cronjobs.db.migrate import migrate
from cronjobs.db.store import Store
from cronjobs.errors import CursorMovedBack
from cronjobs.models import Advance

MINUTE = dt.timedelta(minutes=1)
EVERY_MINUTE = ("* * * * *", "*/1 * * * *", "0-59 * * * *")  # one meaning, three texts
JOB = ("--command", "true", "--catchup", "all", "--catchup-limit", "10000", "--overlap",
       "allow")


def _define(cli: Invoke, name: str, schedule: str, *options: str) -> None:
    result = cli("define", name, schedule, *JOB, *options)
    assert result.exit_code == 0, result.stderr


def _every_minute(cli: Invoke, db: psycopg.Connection[Any]) -> dt.datetime:
    """Job ``every`` (every minute, every slot run); returns its cursor: the first slot it
    runs is the first after it."""
    _define(cli, "every", "* * * * *")
    return _cursor(db, "every")[0]


def _tick(cli: Invoke, at: dt.datetime) -> None:
    result = cli("tick", "--now", at.isoformat(), "--allow-future", "--concurrency", "2")
    assert result.exit_code == 0, result.stderr


def _cursor(db: psycopg.Connection[Any], name: str) -> tuple[dt.datetime, dt.datetime]:
    row = db.execute("SELECT cursor_at, next_due_at FROM job_definitions "
                     "WHERE name = %s AND removed_at IS NULL", (name,)).fetchone()
    assert row is not None
    return row[0], row[1]


def _runs(db: psycopg.Connection[Any]) -> Counter[tuple[str, dt.datetime]]:
    """Scheduled runs per (job name, slot), over every definition of the name."""
    return Counter(db.execute(
        "SELECT d.name, r.scheduled_for FROM job_runs AS r "
        "JOIN job_definitions AS d ON d.id = r.definition_id "
        "WHERE r.trigger = 'schedule'").fetchall())


def _slots(schedule: str, after: dt.datetime, until: dt.datetime) -> list[dt.datetime]:
    return list(schedules.parse(schedule, "UTC").between(after, until))


def _assert_ran_once(db: psycopg.Connection[Any], name: str,
                     expected: list[dt.datetime]) -> None:
    runs = _runs(db)
    mine = {slot: n for (job, slot), n in runs.items() if job == name}
    assert [slot for slot, n in mine.items() if n > 1] == []
    assert sorted(mine) == expected
    assert sum(mine.values()) == len(expected)


# -- exactly one run per slot -------------------------------------------------------------


def test_a_schedule_edit_after_ticks_ran_ahead_runs_no_slot_twice(
        cli: Invoke, db: psycopg.Connection[Any]) -> None:
    start = _every_minute(cli, db)
    ahead = start + 6 * MINUTE
    _tick(cli, ahead)
    expected = _slots("* * * * *", start, ahead)
    assert len(expected) == 6
    _assert_ran_once(db, "every", expected)
    # the runs have moved to the history: the queue's slot key no longer sees them
    assert count(db, "job_runs_queue") == 0
    assert count(db, "job_runs_history") == 6
    # the same job in new words, at the database's clock (behind the cursor)
    result = cli("define", "every", "*/1 * * * *", *JOB, "--json")
    assert result.exit_code == 0, result.stderr
    assert json.loads(result.stdout)["outcome"] == "updated"
    assert _cursor(db, "every") == (ahead, ahead.replace(second=0, microsecond=0) + MINUTE)
    (since,) = db.execute("SELECT schedule_since FROM job_definitions").fetchone() or ()
    assert since == ahead  # the new schedule takes over where the old one left off
    _tick(cli, ahead)
    _assert_ran_once(db, "every", expected)
    assert count(db, "job_skips") == 0  # nothing superseded: every slot had been decided
    _tick(cli, ahead + 2 * MINUTE)
    _assert_ran_once(db, "every", _slots("* * * * *", start, ahead + 2 * MINUTE))


def test_a_clock_that_steps_back_with_an_edit_between_runs_no_slot_twice(
        cli: Invoke, db: psycopg.Connection[Any]) -> None:
    start = _every_minute(cli, db)
    _tick(cli, start + 10 * MINUTE)
    # the clock steps back by minutes: a tick behind the cursor decides nothing
    _tick(cli, start + 4 * MINUTE)
    assert _cursor(db, "every")[0] == start + 10 * MINUTE
    # a zone edit while the clock is behind the cursor (the database's now is too)
    _define(cli, "every", "* * * * *", "--tz", "Etc/UTC")
    assert _cursor(db, "every")[0] == start + 10 * MINUTE
    _tick(cli, start + 7 * MINUTE)
    _define(cli, "every", "0-59 * * * *", "--tz", "Etc/UTC")
    _tick(cli, start + 9 * MINUTE)
    _tick(cli, start + 12 * MINUTE)
    expected = _slots("* * * * *", start, start + 12 * MINUTE)
    assert len(expected) == 12
    _assert_ran_once(db, "every", expected)
    assert count(db, "job_skips") == 0


def test_pause_and_resume_behind_the_cursor_run_no_slot_twice(
        cli: Invoke, db: psycopg.Connection[Any]) -> None:
    start = _every_minute(cli, db)
    _tick(cli, start + 3 * MINUTE)
    assert cli("pause", "every").exit_code == 0
    _tick(cli, start + 8 * MINUTE)  # slots 4-8: paused
    # resumed at the database's clock, behind the cursor: it stays, nothing is replayed
    assert cli("resume", "every").exit_code == 0
    assert _cursor(db, "every") == (start + 8 * MINUTE,
                                    (start + 9 * MINUTE).replace(second=0, microsecond=0))
    _tick(cli, start + 5 * MINUTE)  # and the clock steps back
    _define(cli, "every", "*/1 * * * *")
    _tick(cli, start + 11 * MINUTE)
    every = _slots("* * * * *", start, start + 11 * MINUTE)
    ran = every[:3] + every[8:]
    _assert_ran_once(db, "every", ran)
    skips = db.execute("SELECT first_slot, last_slot, slot_count, reason FROM job_skips"
                       ).fetchall()
    assert skips == [(every[3], every[7], 5, "paused")]


def test_concurrent_ticks_racing_edits_and_the_history_run_each_slot_once(
        cli: Invoke, db: psycopg.Connection[Any], database_url: str) -> None:
    # 3 rounds of 16 `cronjobs tick --now ...` processes at assorted instants (some behind
    # the cursors), each round beside `cronjobs define` processes giving the jobs their
    # schedule in other words; the ticks run the jobs, whose runs move to the history.
    names = [f"job{i}" for i in range(4)]
    for name in names:
        _define(cli, name, "* * * * *")
    starts = {name: _cursor(db, name)[0] for name in names}
    # an hour ahead of the database's clock, which never catches up during the test: every
    # slot from the cursors on is for the ticks to decide (none is superseded by an edit)
    base = max(starts.values()) + dt.timedelta(hours=1)
    _tick(cli, base)
    rng = random.Random(17)
    exe = [sys.executable, "-m", "cronjobs", "--database-url", database_url]
    end = base
    for round_ in range(3):
        instants = [base + dt.timedelta(minutes=5 * round_ + rng.randint(-4, 6),
                                        seconds=rng.randint(0, 59)) for _ in range(16)]
        end = max(end, *instants)
        edits = [[*exe, "define", name, EVERY_MINUTE[(round_ + i) % 3], *JOB]
                 for i, name in enumerate(names)]
        ticks = [[*exe, "tick", "--now", at.isoformat(), "--allow-future", "--concurrency",
                  "2", "--max-runs", "10"] for at in instants]
        commands = ticks[:8] + edits + ticks[8:]
        procs = [subprocess.Popen(c, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                  text=True) for c in commands]
        outputs = [p.communicate(timeout=300) for p in procs]
        assert [p.returncode for p in procs] == [0] * len(procs), outputs
    _tick(cli, end)
    for name in names:
        cursor, next_due = _cursor(db, name)
        assert cursor <= end < next_due  # every slot up to `end` decided
        _assert_ran_once(db, name, _slots("* * * * *", starts[name], end))
    assert count(db, "job_skips") == 0
    assert count(db, "job_definitions") == len(names)  # edits update, never re-create


# -- every writer -------------------------------------------------------------------------


def test_apply_continues_a_changed_schedule_from_the_cursor(
        cli: Invoke, db: psycopg.Connection[Any], tmp_path: Path) -> None:
    path = tmp_path / "jobs.toml"
    declared = ('source = "ops"\n[jobs.every]\nschedule = "{}"\ncommand = "true"\n'
                'catchup = "all"\noverlap = "allow"\n')
    path.write_text(declared.format("* * * * *"))
    assert cli("apply", str(path)).exit_code == 0
    start, _ = _cursor(db, "every")
    _tick(cli, start + 5 * MINUTE)
    path.write_text(declared.format("*/1 * * * *"))
    result = cli("apply", str(path))
    assert result.exit_code == 0, result.stderr
    assert _cursor(db, "every")[0] == start + 5 * MINUTE
    _tick(cli, start + 5 * MINUTE)
    _tick(cli, start + 7 * MINUTE)
    _assert_ran_once(db, "every", _slots("* * * * *", start, start + 7 * MINUTE))


def test_a_job_defined_again_continues_where_its_removed_namesake_left_off(
        cli: Invoke, db: psycopg.Connection[Any]) -> None:
    start = _every_minute(cli, db)
    _tick(cli, start + 6 * MINUTE)
    assert cli("remove", "every").exit_code == 0
    # defined again (another schedule text), the database's clock behind the old cursor
    result = cli("define", "every", "*/1 * * * *", *JOB, "--json")
    assert result.exit_code == 0, result.stderr
    defined = json.loads(result.stdout)
    assert defined["outcome"] == "created"
    first_next = (start + 7 * MINUTE).replace(second=0, microsecond=0)
    assert _cursor(db, "every") == (start + 6 * MINUTE, first_next)
    assert defined["next"][0]["utc"] == first_next.isoformat()  # what the tick will run
    _tick(cli, start + 6 * MINUTE)
    _tick(cli, start + 8 * MINUTE)
    _assert_ran_once(db, "every", _slots("* * * * *", start, start + 8 * MINUTE))
    old, new = db.execute("SELECT id FROM job_definitions ORDER BY id").fetchall()
    per_definition = Counter(r[0] for r in db.execute(
        "SELECT definition_id FROM job_runs WHERE trigger = 'schedule'"))
    assert per_definition == {old[0]: 6, new[0]: 2}


def test_the_tick_behind_the_cursor_keeps_it(cli: Invoke, db: psycopg.Connection[Any],
                                             store: Store) -> None:
    start = _every_minute(cli, db)
    _tick(cli, start + 5 * MINUTE)
    before = _cursor(db, "every")
    _tick(cli, start + 2 * MINUTE)
    assert _cursor(db, "every") == before
    # the tick's own statement, asked to move it back, is refused by the database
    (job_id,) = db.execute("SELECT id FROM job_definitions").fetchone() or ()
    with pytest.raises(CursorMovedBack, match="would move back") as refused, \
            store.transaction():
        store.materialise.advance_definitions(
            [Advance(job_id, start + 2 * MINUTE, start + 3 * MINUTE)])
    assert refused.value.exit_code == 1
    assert _cursor(db, "every") == before


# -- the database refuses ------------------------------------------------------------------


def test_the_database_refuses_a_cursor_that_moves_back(cli: Invoke, database_url: str) -> None:
    _define(cli, "every", "* * * * *")
    with psycopg.connect(database_url, autocommit=True) as conn:
        with pytest.raises(psycopg.Error, match="would move back") as refused:
            conn.execute("UPDATE job_definitions SET cursor_at = cursor_at - interval '1 minute'")
        assert refused.value.sqlstate == "CJ001"
        # forward, and any other column, are fine
        conn.execute("UPDATE job_definitions SET cursor_at = cursor_at + interval '1 minute', "
                     "catchup = 'latest'")
        # a session that seeds history on purpose says so
        conn.execute("SET cronjobs.rewind_cursor = on")
        conn.execute("UPDATE job_definitions SET cursor_at = cursor_at - interval '1 hour'")
        conn.execute("RESET cronjobs.rewind_cursor")
        with pytest.raises(psycopg.Error, match="would move back"):
            conn.execute("UPDATE job_definitions SET cursor_at = cursor_at - interval '1 us'")


def test_the_database_refuses_a_namesake_starting_before_the_removed_job(
        cli: Invoke, database_url: str) -> None:
    _define(cli, "every", "* * * * *")
    _tick(cli, dt.datetime.now(dt.UTC) + dt.timedelta(hours=1))
    assert cli("remove", "every").exit_code == 0
    insert = ("INSERT INTO job_definitions (name, schedule, kind, command, cursor_at) "
              "VALUES (%s, '* * * * *', 'command', 'true', {})")
    with psycopg.connect(database_url, autocommit=True) as conn:
        with pytest.raises(psycopg.Error, match="where a job of that name left off"
                           ) as refused:
            conn.execute(insert.format("now()"), ("every",))
        assert refused.value.sqlstate == "CJ001"
        conn.execute(insert.format("now()"), ("another",))  # a name of its own: from now
        # nor may a job take that name over by renaming
        with pytest.raises(psycopg.Error, match="where a job of that name left off"):
            conn.execute("UPDATE job_definitions SET name = 'every' WHERE name = 'another'")
        conn.execute(insert.format("now() + interval '2 hours'"), ("every",))
    assert count_names(database_url) == {"every": 2, "another": 1}


def count_names(url: str) -> dict[str, int]:
    with psycopg.connect(url) as conn:
        return dict(Counter(r[0] for r in conn.execute("SELECT name FROM job_definitions")))


def test_the_upgrade_moves_a_namesake_forward_to_where_the_removed_job_left_off(
        empty_database_url: str) -> None:
    with psycopg.connect(empty_database_url, autocommit=True) as conn:
        store = Store(conn)
        with store.transaction():
            for migration in sql.migrations():
                if migration.version >= 17:
                    break
                store.run_script(migration.sql)
                if migration.version != 1:
                    store.schema.record_migration(migration.version, migration.name)
            store.schema.record_migration(1, "initial")
        # made before this version: a job defined again after the clock stepped back
        conn.execute(
            "INSERT INTO job_definitions (name, schedule, kind, command, cursor_at, "
            "next_due_at, removed_at) VALUES "
            "('every', '* * * * *', 'command', 'true', '2026-05-01 12:10Z', NULL, "
            " '2026-05-01 12:10Z'), "
            "('every', '* * * * *', 'command', 'true', '2026-05-01 12:04Z', "
            " '2026-05-01 12:05Z', NULL), "
            "('other', '* * * * *', 'command', 'true', '2026-05-01 12:04Z', "
            " '2026-05-01 12:05Z', NULL)")
        migrate(store)
        rows = conn.execute("SELECT name, cursor_at FROM job_definitions "
                            "WHERE removed_at IS NULL ORDER BY name").fetchall()
        at = dt.datetime(2026, 5, 1, 12, tzinfo=dt.UTC)
        assert rows == [("every", at + 10 * MINUTE), ("other", at + 4 * MINUTE)]
        with pytest.raises(psycopg.Error, match="would move back"):
            conn.execute("UPDATE job_definitions SET cursor_at = '2026-05-01 12:00Z'")
