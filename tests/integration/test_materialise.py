"""Materialisation against a real PostgreSQL: exactly one run per slot, every other slot
recorded with its reason, whatever the ticks do."""

from __future__ import annotations

import datetime as dt
import json
import random
import subprocess
import sys
from collections import Counter
from typing import Any

import psycopg
import pytest

from conftest import Invoke, count, snapshot
from cronjobs import cron as schedules
from cronjobs.core.materialise import materialise
from cronjobs.core.operations import trigger
from cronjobs.db.store import Store
from cronjobs.errors import CronjobsError
from cronjobs.tick import TickOptions, tick

START = dt.datetime(2026, 3, 28, 12, 0, tzinfo=dt.UTC)  # spans Europe's spring-forward night

JOBS = [
    ("every_minute", "* * * * *", "UTC", "all"),
    ("five", "*/5 * * * *", "UTC", "latest"),
    ("hourly", "0 * * * *", "Europe/Berlin", "all"),
    ("nightly_berlin", "30 2 * * *", "Europe/Berlin", "latest"),
    ("hashed", "H/7 * * * *", "UTC", "all"),
    ("weekday_ny", "0 9 * * mon-fri", "America/New_York", "none"),
    ("quarter", "15,45 * * * *", "Australia/Lord_Howe", "all"),
    ("wild_night", "*/20 2 * * *", "Europe/Berlin", "all"),
]


def _seed(cli: Invoke, db: psycopg.Connection[Any]) -> None:
    for name, expr, zone, catchup in JOBS:
        result = cli("define", name, expr, "--tz", zone, "--catchup", catchup,
                     "--catchup-limit", "10000", "--command", "true", "--overlap", "allow")
        assert result.exit_code == 0, result.stderr
    db.execute("UPDATE job_definitions SET cursor_at = %s, next_due_at = NULL", (START,))


def _instants(seed: int) -> list[dt.datetime]:
    rng = random.Random(seed)
    t = START
    out = []
    while t < START + dt.timedelta(days=1):
        step = rng.choice([1, 1, 1, 7, 13, 59, 180])  # minutes; 180 = a late tick
        t += dt.timedelta(minutes=step, seconds=rng.randint(0, 59))
        out.append(t)
        if rng.random() < 0.1:
            out.append(t)  # the same instant twice
        if rng.random() < 0.1:
            out.append(t - dt.timedelta(minutes=rng.randint(1, 90)))  # clock went backwards
    return out


def _assert_every_slot_decided_once(db: psycopg.Connection[Any], end: dt.datetime) -> None:
    defs = {row[0]: row[1:] for row in db.execute(
        "SELECT id, name, schedule, timezone, cursor_at FROM job_definitions")}
    runs = Counter(db.execute(
        "SELECT definition_id, scheduled_for FROM job_runs WHERE trigger = 'schedule'"
    ).fetchall())
    assert all(n == 1 for n in runs.values())
    skips = db.execute("SELECT definition_id, first_slot, last_slot, slot_count, reason "
                       "FROM job_skips").fetchall()
    for def_id, (name, expr, zone, cursor) in defs.items():
        sched = schedules.parse(expr, zone, hash_key=name)
        assert START <= cursor <= end, name
        assert sched.next_after(cursor) > end, name  # nothing left undecided up to `end`
        slots = list(sched.between(START, end))
        mine = [s for s in skips if s[0] == def_id]
        covered: Counter[dt.datetime] = Counter()
        for _, first, last, slot_count, _reason in mine:
            inside = [s for s in slots if first <= s <= last]
            assert inside, (name, first, last)
            if slot_count is not None:
                assert slot_count == len(inside), (name, first, last)
            covered.update(inside)
        for slot in slots:
            ran = runs.get((def_id, slot), 0)
            assert ran + covered[slot] == 1, (name, slot, ran, covered[slot])
        extra = {s for (d, s) in runs if d == def_id} - set(slots)
        assert not extra, (name, extra)


def test_concurrent_ticks_over_a_simulated_day(cli: Invoke, db: psycopg.Connection[Any],
                                               database_url: str) -> None:
    _seed(cli, db)
    script = (
        "import sys, json, datetime as dt, psycopg\n"
        "from cronjobs.db.store import Store\n"
        "from cronjobs.tick import TickOptions, tick\n"
        "store = Store(psycopg.connect(sys.argv[1], autocommit=True))\n"
        "for t in json.loads(sys.argv[2]):\n"
        "    tick(store, TickOptions(now=dt.datetime.fromisoformat(t), max_runs=0,\n"
        "                            worker='w' + sys.argv[3]))\n"
    )
    sequences = [_instants(seed) for seed in range(8)]
    end = max(max(seq) for seq in sequences)
    procs = [subprocess.Popen(
        [sys.executable, "-c", script, database_url, json.dumps([t.isoformat() for t in seq]),
         str(i)], stderr=subprocess.PIPE, text=True) for i, seq in enumerate(sequences)]
    errors = [p.communicate(timeout=300)[1] for p in procs]
    assert [p.returncode for p in procs] == [0] * 8, errors
    # One last tick at the end makes every definition's cursor reach `end`.
    tick(Store(db), TickOptions(now=end, max_runs=0))
    _assert_every_slot_decided_once(db, end)
    assert count(db, "job_ticks") == sum(len(s) for s in sequences) + 1


BULK = ("INSERT INTO job_definitions (name, schedule, timezone, kind, command, cursor_at, "
        "next_due_at) SELECT 'bulk-' || i, (ARRAY['* * * * *', '*/2 * * * *', 'H * * * *', "
        "'0,30 2 * * *', '7 3 * * *'])[1 + i %% 5], (ARRAY['UTC', 'Europe/Berlin', "
        "'Asia/Kolkata'])[1 + i %% 3], 'command', 'true', %(start)s, %(start)s "
        "FROM generate_series(1, %(n)s) AS i")


def test_small_batches_in_small_parts_decide_every_slot_once(
        cli: Invoke, db: psycopg.Connection[Any], store: Store) -> None:
    # Batches of 7 definitions decided and written 3 at a time, over a simulated day of
    # irregular ticks: every batch splits into parts, and every slot is decided once.
    _seed(cli, db)
    db.execute(BULK, {"start": START, "n": 40})
    instants = _instants(3)
    for t in instants:
        materialise(store, t, batch=7, part=3)
    end = max(instants)
    materialise(store, end, batch=7, part=3)
    _assert_every_slot_decided_once(db, end)


def test_a_batch_reports_runs_that_existed_and_is_written_whole_or_not_at_all(
        db: psycopg.Connection[Any], store: Store) -> None:
    db.execute(BULK, {"start": START, "n": 12})
    db.execute("UPDATE job_definitions SET schedule = '* * * * *', overlap = 'allow', "
               "next_due_at = %s", (START + dt.timedelta(minutes=1),))
    # A run of the 11th definition's slot is there already (parts of 2: the sixth part).
    db.execute("INSERT INTO job_runs (definition_id, scheduled_for, trigger, max_attempts, "
               "eligible_at) SELECT id, %(slot)s, 'schedule', 3, %(slot)s "
               "FROM job_definitions WHERE name = 'bulk-11'",
               {"slot": START + dt.timedelta(minutes=1)})
    now = START + dt.timedelta(minutes=1, seconds=5)
    report = materialise(store, now, batch=5, part=2)
    assert (report.definitions, report.materialised) == (12, 11)
    assert [d.job for d in report.decisions if d.outcome == "exists"] == ["bulk-11"]
    assert count(db, "job_runs") == 12
    # A part that fails (the 5th of 6) undoes the whole batch, the parts before it too.
    db.execute("CREATE FUNCTION refuse() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN "
               "IF (SELECT name FROM job_definitions WHERE id = NEW.definition_id) "
               "= 'bulk-9' THEN RAISE EXCEPTION 'refused'; END IF; RETURN NEW; END $$")
    db.execute("CREATE TRIGGER refuse BEFORE INSERT ON job_runs "
               "FOR EACH ROW EXECUTE FUNCTION refuse()")
    before = snapshot(db)
    with pytest.raises(CronjobsError, match="refused"):
        materialise(store, now + dt.timedelta(minutes=1), batch=12, part=2)
    assert snapshot(db) == before
    db.execute("DROP TRIGGER refuse ON job_runs")
    report = materialise(store, now + dt.timedelta(minutes=1), batch=12, part=2)
    assert report.materialised == 12


@pytest.mark.smoke
def test_concurrent_cli_ticks_at_the_same_instant(cli: Invoke, db: psycopg.Connection[Any],
                                                  database_url: str) -> None:
    _seed(cli, db)
    now = START + dt.timedelta(hours=3, seconds=5)
    exe = [sys.executable, "-m", "cronjobs", "--database-url", database_url, "tick", "--now",
           now.isoformat(), "--max-runs", "0", "--json"]
    procs = [subprocess.Popen(exe, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
             for _ in range(8)]
    outputs = [p.communicate(timeout=120) for p in procs]
    assert [p.returncode for p in procs] == [0] * 8, outputs
    reports = [json.loads(out) for out, _ in outputs]
    total = sum(r["counts"]["materialised"] for r in reports)
    assert total == count(db, "job_runs")
    _assert_every_slot_decided_once(db, now)


def test_dry_run_writes_nothing(cli: Invoke, db: psycopg.Connection[Any]) -> None:
    _seed(cli, db)
    before = snapshot(db)
    result = cli("tick", "--now", (START + dt.timedelta(hours=1)).isoformat(), "--dry-run")
    assert result.exit_code == 0, result.stderr
    assert "every_minute" in result.stdout
    assert "dry run (nothing written)" in result.stderr
    assert snapshot(db) == before


def test_tick_summary_and_json(cli: Invoke, db: psycopg.Connection[Any]) -> None:
    _seed(cli, db)
    now = (START + dt.timedelta(minutes=2, seconds=3)).isoformat()
    result = cli("tick", "--now", now, "--max-runs", "0")
    assert result.exit_code == 0, result.stderr
    assert result.stdout == ""
    assert result.stderr.startswith("tick: materialised ")
    again = cli("tick", "--now", now, "--max-runs", "0", "--json")
    report = json.loads(again.stdout)
    assert report["counts"]["materialised"] == 0  # decided already: nothing twice


@pytest.mark.parametrize(
    ("overlap", "expected_runs", "reason"),
    [("skip", 1, "overlap"), ("queue", 2, None), ("allow", 3, None), ("replace", 3, None)],
)
def test_overlap_against_a_live_running_run(cli: Invoke, db: psycopg.Connection[Any],
                                            overlap: str, expected_runs: int,
                                            reason: str | None) -> None:
    assert cli("define", "slow", "0 * * * *", "--command", "true", "--overlap", overlap,
               "--catchup", "all").exit_code == 0
    db.execute("UPDATE job_definitions SET cursor_at = %s, next_due_at = NULL", (START,))
    store = Store(db)
    tick(store, TickOptions(now=START + dt.timedelta(hours=1, seconds=1), max_runs=0))
    # The first run is running, with a live lease.
    db.execute("UPDATE job_runs SET status = 'running', attempt = 1, lease_owner = 'w', "
               "lease_token = gen_random_uuid(), lease_expires_at = now() + interval '1 hour'")
    tick(store, TickOptions(now=START + dt.timedelta(hours=2, seconds=1), max_runs=0))
    tick(store, TickOptions(now=START + dt.timedelta(hours=3, seconds=1), max_runs=0))
    assert count(db, "job_runs") == expected_runs
    reasons = [r[0] for r in db.execute("SELECT reason FROM job_skips")]
    if reason:
        assert set(reasons) == {reason}
    cancel = db.execute("SELECT count(*) FROM job_runs WHERE cancel_requested_at IS NOT NULL"
                        ).fetchone()
    assert cancel == ((1,) if overlap == "replace" else (0,))


def test_a_run_triggered_after_the_slot_came_due_does_not_skip_it(
        cli: Invoke, db: psycopg.Connection[Any]) -> None:
    """Defined at 00:59:50, triggered at 01:00:30, ticked at 01:00:31: the 01:00 slot came
    due before the manual run was asked for, so the manual run is not a previous run that
    holds it back: both run (one after the other), nothing is skipped."""
    assert cli("define", "hello", "* * * * *", "--command", "true").exit_code == 0
    row = db.execute("SELECT date_trunc('minute', now()) - interval '1 minute'").fetchone()
    assert row is not None
    slot: dt.datetime = row[0]
    db.execute("UPDATE job_definitions SET cursor_at = %s, next_due_at = %s, "
               "created_at = %s, schedule_since = %s",
               (slot - dt.timedelta(seconds=10), slot, slot - dt.timedelta(seconds=10),
                slot - dt.timedelta(seconds=10)))
    store = Store(db)
    trigger(store, "hello", now=slot + dt.timedelta(seconds=30))
    report = tick(store, TickOptions(now=slot + dt.timedelta(seconds=31)))
    assert (report.materialise.materialised, report.materialise.skipped_slots) == (1, 0)
    runs = sorted(db.execute("SELECT trigger, scheduled_for, status FROM job_runs"))
    assert runs == [("manual", slot + dt.timedelta(seconds=30), "succeeded"),
                    ("schedule", slot, "succeeded")]
    assert count(db, "job_skips") == 0


def test_a_dead_worker_never_blocks_its_schedule(cli: Invoke,
                                                 db: psycopg.Connection[Any]) -> None:
    assert cli("define", "stuck", "0 * * * *", "--command", "true").exit_code == 0
    db.execute("UPDATE job_definitions SET cursor_at = %s, next_due_at = NULL", (START,))
    store = Store(db)
    tick(store, TickOptions(now=START + dt.timedelta(hours=1, seconds=1), max_runs=0))
    # its worker died: the lease expired long before the next tick's instant (leases are
    # on the tick's clock, like every other decision)
    db.execute("UPDATE job_runs SET status = 'running', attempt = 1, lease_owner = 'gone', "
               "lease_token = gen_random_uuid(), lease_expires_at = %s",
               (START + dt.timedelta(hours=1, minutes=1),))
    tick(store, TickOptions(now=START + dt.timedelta(hours=2, seconds=1), max_runs=0))
    statuses = sorted(r[0] for r in db.execute("SELECT status FROM job_runs"))
    # the expired one was reclaimed (back to the queue); the new slot was materialised
    assert statuses == ["queued", "queued"]
    assert count(db, "job_skips") == 0


def test_schedule_change_pause_and_explain(cli: Invoke, db: psycopg.Connection[Any]) -> None:
    assert cli("define", "report", "0 * * * *", "--command", "true").exit_code == 0
    db.execute("UPDATE job_definitions SET cursor_at = %s, next_due_at = NULL, "
               "created_at = %s, schedule_since = %s", (START, START, START))
    store = Store(db)
    tick(store, TickOptions(now=START + dt.timedelta(hours=3, seconds=1), max_runs=0))
    data = json.loads(cli("explain", "report", "--from", START.isoformat(), "--to",
                          (START + dt.timedelta(hours=3)).isoformat(), "--json").stdout)
    outcomes = [(s["first_slot"][11:16], s["last_slot"][11:16], s["slot_count"], s["outcome"],
                 s["reason"]) for s in data["slots"]]
    # the two coalesced slots fold into one entry with its count
    assert outcomes == [("12:00", "12:00", 1, "not-a-slot", None),
                        ("13:00", "14:00", 2, "skipped", "coalesced"),
                        ("15:00", "15:00", 1, "queued", None)]
    human = cli("explain", "report", "--from", START.isoformat(), "--to",
                (START + dt.timedelta(hours=3)).isoformat())
    assert "coalesced by catch-up" in human.stdout


def test_invalid_definition_is_skipped_and_others_proceed(cli: Invoke,
                                                          db: psycopg.Connection[Any]) -> None:
    assert cli("define", "good", "0 * * * *", "--command", "true").exit_code == 0
    assert cli("define", "bad", "0 * * * *", "--command", "true").exit_code == 0
    db.execute("UPDATE job_definitions SET cursor_at = %s, next_due_at = %s",
               (START, START + dt.timedelta(hours=1)))
    db.execute("UPDATE job_definitions SET timezone = 'Atlantis/Capital' WHERE name = 'bad'")
    result = cli("tick", "--now", (START + dt.timedelta(hours=1, seconds=5)).isoformat(),
                 "--max-runs", "0")
    assert result.exit_code == 0, result.stderr
    assert "invalid definitions: bad" in result.stderr
    assert count(db, "job_runs") == 1
    listed = {e["name"]: e for e in json.loads(cli("list", "--json").stdout)}
    assert listed["bad"]["state"] == "invalid"
    assert "unknown time zone" in listed["bad"]["invalid_reason"]
    reasons = db.execute("SELECT reason, detail FROM job_skips").fetchall()
    assert [r[0] for r in reasons] == ["invalid"]


def test_backfill(cli: Invoke, db: psycopg.Connection[Any]) -> None:
    assert cli("define", "daily", "0 6 * * *", "--command", "true").exit_code == 0
    result = cli("backfill", "--yes", "daily", "--from", "2026-01-01T00:00:00Z", "--to",
                 "2026-01-05T23:59:00Z", "--json")
    assert result.exit_code == 0, result.stderr
    data = json.loads(result.stdout)
    assert (len(data["slots"]), data["created"], data["existing"]) == (5, 5, 0)
    again = json.loads(cli("backfill", "--yes", "daily", "--from", "2026-01-03T00:00:00Z", "--to",
                           "2026-01-07T00:00:00Z", "--json").stdout)
    assert (again["created"], again["existing"]) == (1, 3)
    assert count(db, "job_runs") == 6
    # a range ending after now ends at now: never a future slot (a dry run: nothing written)
    future = cli("backfill", "daily", "--from", "2026-01-01T00:00:00Z", "--to", "2999-01-01",
                 "--dry-run", "--max-runs", "10000", "--json")
    assert future.exit_code == 0, future.stderr
    now = db.execute("SELECT now()").fetchone()[0]  # type: ignore[index]
    slots = [dt.datetime.fromisoformat(s) for s in json.loads(future.stdout)["slots"]]
    assert slots[-1] <= now < slots[-1] + dt.timedelta(days=1)
    assert count(db, "job_runs") == 6
    late = cli("backfill", "daily", "--from", "2999-01-01", "--to", "2999-01-02")
    assert late.exit_code == 2
    assert "backfill is for the past" in late.stderr
    assert count(db, "job_runs") == 6


def test_schedule_change_records_undecided_slots(cli: Invoke,
                                                 db: psycopg.Connection[Any]) -> None:
    assert cli("define", "moving", "* * * * *", "--command", "true").exit_code == 0
    db.execute("UPDATE job_definitions SET cursor_at = now() - interval '5 minutes'")
    assert cli("define", "moving", "0 3 * * *", "--command", "true").exit_code == 0
    reason, slots = db.execute("SELECT reason, slot_count FROM job_skips").fetchone() or ()
    assert reason == "superseded"
    assert slots in (5, 6)


def _explain_reasons(cli: Invoke, name: str, start: dt.datetime, end: dt.datetime
                     ) -> list[tuple[str, str | None, int]]:
    result = cli("explain", name, "--from", start.isoformat(), "--to", end.isoformat(),
                 "--json")
    assert result.exit_code == 0, result.stderr
    return [(s["outcome"], s["reason"], s["slot_count"])
            for s in json.loads(result.stdout)["slots"]]


@pytest.mark.parametrize(
    ("options", "prepare", "expected"),
    [
        # consecutive slots skipped for one reason fold into one entry, with their count
        (["--starting-deadline", "10m"], None, [("skipped", "missed_deadline", 3)]),
        (["--catchup", "none"], None, [("skipped", "catchup_none", 3)]),
        (["--catchup", "all", "--catchup-limit", "1"], None,
         [("skipped", "catchup_limit", 2), ("queued", None, 1)]),
        ([], "UPDATE job_definitions SET paused_at = %(start)s",
         [("skipped", "paused", 3)]),
        ([], "INSERT INTO job_runs (definition_id, scheduled_for, trigger, status, attempt, "
             "max_attempts, eligible_at, lease_owner, lease_token, lease_expires_at) "
             "SELECT id, %(start)s, 'manual', 'running', 1, 1, %(start)s, 'w', "
             "gen_random_uuid(), now() + interval '1 hour' FROM job_definitions",
         [("running", None, 1), ("skipped", "coalesced", 2), ("skipped", "overlap", 1)]),
    ],
)
def test_explain_answers_why(cli: Invoke, db: psycopg.Connection[Any], options: list[str],
                             prepare: str | None,
                             expected: list[tuple[str, str | None, int]]) -> None:
    assert cli("define", "why", "0 * * * *", "--command", "true", *options).exit_code == 0
    db.execute("UPDATE job_definitions SET cursor_at = %s, next_due_at = NULL, "
               "created_at = %s, schedule_since = %s", (START, START, START))
    if prepare:
        db.execute(prepare, {"start": START})  # type: ignore[arg-type]
    tick(Store(db), TickOptions(now=START + dt.timedelta(hours=3, minutes=30), max_runs=0))
    reasons = _explain_reasons(cli, "why", START + dt.timedelta(minutes=1),
                               START + dt.timedelta(hours=3, minutes=30))
    if prepare and "INSERT" in prepare:  # the manual run sits at START itself
        reasons = _explain_reasons(cli, "why", START, START + dt.timedelta(hours=3, minutes=30))
        reasons = [r for r in reasons if r[:2] != ("not-a-slot", None)]
    assert reasons == expected


def test_explain_invalid_and_superseded(cli: Invoke, db: psycopg.Connection[Any]) -> None:
    assert cli("define", "why", "0 * * * *", "--command", "true").exit_code == 0
    db.execute("UPDATE job_definitions SET cursor_at = %s, next_due_at = %s, created_at = %s, "
               "schedule_since = %s", (START, START + dt.timedelta(hours=1), START, START))
    db.execute("UPDATE job_definitions SET timezone = 'Not/AZone'")
    tick(Store(db), TickOptions(now=START + dt.timedelta(hours=2, minutes=30), max_runs=0))
    reasons = _explain_reasons(cli, "why", START, START + dt.timedelta(hours=3))
    assert reasons == [("skipped", "invalid", None)]  # an invalid stretch has no count
    # Repairing it (naming a zone again: the stored one no longer exists) records the time
    # it spent invalid, up to now.
    assert cli("define", "why", "0 * * * *", "--command", "true", "--tz", "UTC").exit_code == 0
    assert [r[0] for r in db.execute("SELECT reason FROM job_skips ORDER BY id")] == [
        "invalid", "invalid"]
