"""Operations say what is true: explain names each run's real state; a dead run keeps
status --check red until it is acknowledged (ack, retry); backfilled runs never hold up a
schedule and do not count for lateness; a removed job's history stays readable; list's
NEXT is next's first line; overlap skip counts a run that waits to start."""

from __future__ import annotations

import datetime as dt
import json
from typing import Any

import psycopg

from conftest import Invoke, count, snapshot
from cronjobs.db.store import Store
from cronjobs.tick import TickOptions, tick

SLOT = dt.datetime(2020, 1, 1, tzinfo=dt.UTC)
PINNED = dt.datetime(2026, 3, 28, 12, 0, tzinfo=dt.UTC)


def _define(cli: Invoke, name: str, schedule: str, command: str, *options: str) -> None:
    result = cli("define", name, schedule, "--command", command, *options)
    assert result.exit_code == 0, result.stderr


def _tick(db: psycopg.Connection[Any], **options: Any) -> Any:
    return tick(Store(db), TickOptions(worker="test", **options))


def _dead_run(cli: Invoke, db: psycopg.Connection[Any], name: str) -> int:
    """A run of job ``name`` (one attempt, exit 1) that a real tick makes dead."""
    result = cli("trigger", name, "--force", "--json")
    assert result.exit_code == 0, result.stderr
    run_id = int(json.loads(result.stdout)["id"])
    _tick(db)
    assert db.execute("SELECT status FROM job_runs WHERE id = %s", (run_id,)).fetchone() == (
        "dead",)
    return run_id


# -- explain ------------------------------------------------------------------------------

SEED = """
INSERT INTO job_runs (definition_id, scheduled_for, trigger, status, attempt, max_attempts,
                      eligible_at, lease_owner, lease_token, lease_expires_at,
                      cancel_requested_at, finished_at, error)
SELECT d.id, %(slot)s, 'manual', %(status)s, %(attempt)s, 3, %(eligible)s,
       CASE WHEN %(status)s = 'running' THEN 'w1' END,
       CASE WHEN %(status)s = 'running' THEN gen_random_uuid() END,
       CASE WHEN %(status)s = 'running' THEN now() + interval '1 minute' END,
       CASE WHEN %(status)s = 'running' THEN now() END,
       CASE WHEN %(status)s IN ('succeeded', 'dead', 'cancelled') THEN now() END,
       %(error)s
FROM job_definitions AS d WHERE d.name = 'states'
"""


def test_explain_names_the_real_state_of_every_run(cli: Invoke,
                                                   db: psycopg.Connection[Any]) -> None:
    _define(cli, "states", "0 0 1 1 *", "true")
    cases = [("queued", 0, None), ("queued", 1, None), ("running", 1, None),
             ("failed", 1, "exit code 1"), ("succeeded", 1, None), ("dead", 3, "exit code 2"),
             ("cancelled", 0, "cancelled by an operator"), ("cancelled", 2, "job removed")]
    for day, (status, attempt, error) in enumerate(cases, start=2):
        slot = SLOT.replace(day=day)
        db.execute(SEED, {"slot": slot, "status": status, "attempt": attempt, "error": error,
                          "eligible": slot if status != "failed" else SLOT.replace(year=2999)})
    result = cli("explain", "states", "--from", "2020-01-02", "--to", "2020-01-31", "--json")
    assert result.exit_code == 0, result.stderr
    slots = json.loads(result.stdout)["slots"]
    assert [(s["outcome"], s["detail"]) for s in slots] == [
        ("queued", "queued, not started yet (due now)"),
        ("queued", "queued again after attempt 1 of 3 (due now)"),
        ("running", "running attempt 1 of 3 on w1; asked to stop"),
        ("failed", "attempt 1 of 3 failed; the next attempt is due at "
                   "2999-01-01 00:00 UTC: exit code 1"),
        ("succeeded", "succeeded (attempt 1 of 3)"),
        ("dead", "dead after attempt 3 of 3: exit code 2"),
        ("cancelled", "cancelled before it started: cancelled by an operator"),
        ("cancelled", "cancelled after attempt 2 of 3: job removed"),
    ]
    assert [s["run"]["status"] for s in slots] == [c[0] for c in cases]
    text = cli("explain", "states", "--from", "2020-01-02", "--to", "2020-01-31").stdout
    assert " ran " not in text
    assert "(manual): running attempt 1 of 3 on w1; asked to stop" in text
    db.execute("UPDATE job_runs SET acknowledged_at = now() + interval '1 s' "
               "WHERE status = 'dead'")
    slots = json.loads(cli("explain", "states", "--from", "2020-01-02", "--to", "2020-01-31",
                           "--json").stdout)["slots"]
    assert slots[5]["detail"] == "dead after attempt 3 of 3: exit code 2; acknowledged"


# -- ack ----------------------------------------------------------------------------------

def test_a_dead_run_stays_red_until_acknowledged(cli: Invoke,
                                                 db: psycopg.Connection[Any]) -> None:
    _define(cli, "bad", "0 0 1 1 *", "exit 1", "--max-attempts", "1")
    run_id = _dead_run(cli, db, "bad")
    # Died long ago: the old rule (dead in the last day) would have turned green by now.
    db.execute("UPDATE job_runs SET finished_at = now() - interval '3 days'")
    red = cli("status", "--check")
    assert red.exit_code == 3
    assert (f"job 'bad': 1 dead run(s) not acknowledged (latest: run {run_id}); see "
            f"`cronjobs show {run_id}`, then `cronjobs retry {run_id}` or "
            "`cronjobs ack --all bad`") in red.stderr
    shown = cli("show", str(run_id)).stdout
    assert f"not acknowledged: `cronjobs ack {run_id}` once handled" in shown

    acked = cli("ack", str(run_id), "--json")
    assert acked.exit_code == 0, acked.stderr
    data = json.loads(acked.stdout)
    assert (data["job"], data["already"], len(data["acknowledged"])) == ("bad", False, 1)
    assert data["acknowledged"][0]["acknowledged_at"] is not None
    green = cli("status", "--check", "--json")
    assert green.exit_code == 0, green.stderr
    status = json.loads(green.stdout)
    assert (status["healthy"], status["dead_unacknowledged"]) == (True, 0)
    assert status["jobs"][0]["dead_unacknowledged"] == 0

    before = snapshot(db)
    again = cli("ack", str(run_id))
    assert again.exit_code == 0
    assert f"run {run_id} of bad was already acknowledged" in again.stdout
    assert snapshot(db) == before


def test_ack_refuses_unknown_and_live_runs_writing_nothing(cli: Invoke,
                                                           db: psycopg.Connection[Any]) -> None:
    _define(cli, "fine", "0 0 1 1 *", "true")
    queued = json.loads(cli("trigger", "fine", "--json").stdout)["id"]
    before = snapshot(db)
    cases = [
        (["999999"], "no run with id 999999"),
        ([str(queued)], f"run {queued} of 'fine' is queued: only a dead run can be acknowledged"),
        ([], "give either RUN_ID or --all NAME"),
        ([str(queued), "--all", "fine"], "give either RUN_ID or --all NAME"),
        (["--all", "ghost"], "no job named 'ghost'"),
    ]
    for args, message in cases:
        result = cli("ack", *args)
        assert result.exit_code == 2, (args, result.stdout)
        assert message in result.stderr
        assert result.stdout == ""
    db.execute("UPDATE job_runs SET status = 'failed'")
    failed = cli("ack", str(queued))
    assert failed.exit_code == 2
    assert "failed: only a dead run" in failed.stderr
    before["job_runs"] = db.execute("SELECT * FROM job_runs ORDER BY 1").fetchall()
    assert snapshot(db) == before


def test_ack_all_and_retry_acknowledge_until_it_dies_again(cli: Invoke,
                                                           db: psycopg.Connection[Any]) -> None:
    _define(cli, "bad", "0 0 1 1 *", "exit 1", "--max-attempts", "1")
    first, second = _dead_run(cli, db, "bad"), _dead_run(cli, db, "bad")
    status = json.loads(cli("status", "--json").stdout)
    assert status["dead_unacknowledged"] == 2

    retried = cli("retry", str(first), "--json")
    assert retried.exit_code == 0, retried.stderr
    # an acknowledgement applies to the death it acknowledged: the queued run has none
    requeued = json.loads(retried.stdout)
    assert (requeued["status"], requeued["acknowledged"], requeued["acknowledged_at"],
            requeued["needs_acknowledgement"], requeued["retry_count"]) == (
        "queued", False, None, False, 1)
    assert json.loads(cli("status", "--json").stdout)["dead_unacknowledged"] == 1
    _tick(db)  # the retry dies again: a new acknowledgement is needed
    assert json.loads(cli("status", "--json").stdout)["dead_unacknowledged"] == 2
    # and every view says so alike (the row still holds the retry's acknowledgement)
    shown = json.loads(cli("show", str(first), "--json").stdout)
    assert (shown["status"], shown["acknowledged"], shown["acknowledged_at"],
            shown["acknowledged_by"], shown["needs_acknowledgement"]) == (
        "dead", False, None, None, True)
    assert "not acknowledged" in cli("show", str(first)).stdout

    everything = cli("ack", "--all", "bad", "--yes", "--json")
    assert everything.exit_code == 0, everything.stderr
    assert [r["id"] for r in json.loads(everything.stdout)["acknowledged"]] == [first, second]
    assert cli("status", "--check").exit_code == 0
    nothing = cli("ack", "--all", "bad", "--yes")
    assert (nothing.exit_code, nothing.stdout.strip()) == (
        0, "no dead run of bad waits for acknowledgement")
    samples = _samples(cli("metrics").stdout)
    assert float(samples['cronjobs_job_dead_unacknowledged_runs{job="bad"}']) == 0
    assert float(samples['cronjobs_job_dead_runs{job="bad"}']) == 2


def test_a_removed_jobs_dead_runs_do_not_keep_status_red(cli: Invoke,
                                                         db: psycopg.Connection[Any]) -> None:
    _define(cli, "gone", "0 0 1 1 *", "exit 1", "--max-attempts", "1")
    _dead_run(cli, db, "gone")
    assert cli("status", "--check").exit_code == 3
    assert cli("remove", "gone").exit_code == 0
    assert cli("status", "--check").exit_code == 0


# -- history after remove -----------------------------------------------------------------

def test_runs_show_and_explain_read_a_removed_jobs_history(cli: Invoke,
                                                           db: psycopg.Connection[Any]) -> None:
    _define(cli, "old", "0 0 1 1 *", "echo bye")
    run_id = json.loads(cli("trigger", "old", "--json").stdout)["id"]
    _tick(db)
    assert cli("remove", "old").exit_code == 0
    runs = cli("runs", "old", "--json")
    assert runs.exit_code == 0, runs.stderr
    assert [(r["id"], r["job"], r["status"]) for r in json.loads(runs.stdout)] == [
        (run_id, "old", "succeeded")]
    shown = cli("show", str(run_id), "--json")
    assert shown.exit_code == 0, shown.stderr
    assert json.loads(shown.stdout)["attempts"][0]["output_tail"] == "bye\n"
    assert cli("explain", "old", "--json").exit_code == 0
    never = cli("runs", "never_was")
    assert never.exit_code == 2
    assert "no job named 'never_was'" in never.stderr


# -- list's NEXT ----------------------------------------------------------------------------

def test_list_next_is_nexts_first_line_and_never_past(cli: Invoke,
                                                      db: psycopg.Connection[Any]) -> None:
    _define(cli, "often", "*/5 * * * *", "true")
    _define(cli, "daily", "30 2 * * *", "true", "--tz", "Europe/Berlin")
    # The ticks are an hour behind: the rows' next_due_at is in the past.
    db.execute("UPDATE job_definitions SET cursor_at = now() - interval '1 hour', "
               "next_due_at = now() - interval '55 minutes' WHERE name = 'often'")
    now = db.execute("SELECT now()").fetchone()[0]  # type: ignore[index]
    listed = {j["name"]: j for j in json.loads(cli("list", "--json").stdout)}
    text = cli("list").stdout
    for name in ("often", "daily"):
        first = json.loads(cli("next", name, "--json").stdout)["next"][0]["utc"]
        assert listed[name]["next_at"] == first
        assert dt.datetime.fromisoformat(first) > now
        shown = dt.datetime.fromisoformat(first).strftime("%Y-%m-%d %H:%M UTC")  # TZ=UTC
        assert any(line.startswith(name) and shown in line for line in text.splitlines())
    assert dt.datetime.fromisoformat(listed["often"]["next_due_at"]) < now


# -- overlap and backfill -------------------------------------------------------------------

def _behind(db: psycopg.Connection[Any], name: str, minutes: int) -> None:
    db.execute("UPDATE job_definitions SET cursor_at = now() - make_interval(mins => %s), "
               "next_due_at = NULL WHERE name = %s", (minutes, name))


def _one_slot_due(db: psycopg.Connection[Any], name: str) -> dt.datetime:
    """Set job ``name`` (every minute) so that a tick at the instant returned decides
    exactly one slot."""
    db.execute("UPDATE job_definitions SET cursor_at = %s, next_due_at = NULL WHERE name = %s",
               (PINNED, name))
    return PINNED + dt.timedelta(minutes=1, seconds=1)


def _runs(db: psycopg.Connection[Any]) -> list[tuple[str, str]]:
    return [(r[0], r[1]) for r in db.execute(
        "SELECT trigger, status FROM job_runs ORDER BY id").fetchall()]


def test_overlap_skip_counts_a_run_that_waits_to_start(cli: Invoke,
                                                       db: psycopg.Connection[Any]) -> None:
    _define(cli, "single", "* * * * *", "true")
    db.execute("UPDATE job_definitions SET cursor_at = %s, next_due_at = NULL, "
               "created_at = %s, schedule_since = %s", (PINNED, PINNED, PINNED))
    minute = dt.timedelta(minutes=1, seconds=1)
    _tick(db, now=PINNED + minute, max_runs=0)  # its slot becomes a queued run; none runs
    assert _runs(db) == [("schedule", "queued")]
    _tick(db, now=PINNED + 2 * minute, max_runs=0)
    assert _runs(db) == [("schedule", "queued")]
    skips = db.execute("SELECT first_slot, reason, detail FROM job_skips").fetchall()
    assert skips == [(PINNED + dt.timedelta(minutes=2), "overlap",
                      "overlap 'skip': 1 run(s) still waiting")]
    refused = cli("trigger", "single")
    assert refused.exit_code == 2
    assert "0 running and 1 waiting run(s)" in refused.stderr


def test_backfilled_runs_do_not_block_the_schedule(cli: Invoke,
                                                   db: psycopg.Connection[Any]) -> None:
    _define(cli, "minutely", "* * * * *", "true")
    result = cli("backfill", "--yes", "minutely", "--from", "2026-01-01T00:00:00Z",
                 "--to", "2026-01-01T00:04:00Z")
    assert result.exit_code == 0, result.stderr
    # one of them is running, four wait
    db.execute("UPDATE job_runs SET status = 'running', attempt = 1, lease_owner = 'w', "
               "lease_token = gen_random_uuid(), lease_expires_at = now() + interval '1 m' "
               "WHERE scheduled_for = '2026-01-01T00:00:00Z'")
    _tick(db, now=_one_slot_due(db, "minutely"), max_runs=0)
    assert count(db, "job_skips") == 0
    assert _runs(db) == [("backfill", "running")] + [("backfill", "queued")] * 4 + [
        ("schedule", "queued")]
    triggered = cli("trigger", "minutely")
    assert triggered.exit_code == 2  # the scheduled run waits: 'skip' refuses a second one
    assert "0 running and 1 waiting run(s)" in triggered.stderr
    db.execute("DELETE FROM job_runs WHERE trigger = 'schedule'")
    assert cli("trigger", "minutely").exit_code == 0
    # the running backfilled run ends; the next claim takes the job's own runs first: the
    # slot that came due meanwhile (a manual run asked for after a slot does not hold that
    # slot back), then the manual run, and only then the backfilled ones
    db.execute("UPDATE job_runs SET status = 'succeeded', lease_token = NULL, "
               "lease_expires_at = NULL, finished_at = now() WHERE status = 'running'")
    _tick(db, max_runs=1)
    assert _runs(db) == [("backfill", "succeeded")] + [("backfill", "queued")] * 4 + [
        ("manual", "queued"), ("schedule", "succeeded")]
    _tick(db, max_runs=1)
    assert _runs(db) == [("backfill", "succeeded")] + [("backfill", "queued")] * 4 + [
        ("manual", "succeeded"), ("schedule", "succeeded")]


def test_replace_does_not_stop_backfilled_runs(cli: Invoke, db: psycopg.Connection[Any]) -> None:
    _define(cli, "swap", "* * * * *", "true", "--overlap", "replace")
    assert cli("backfill", "--yes", "swap", "--from", "2026-01-01T00:00:00Z",
               "--to", "2026-01-01T00:00:00Z").exit_code == 0
    db.execute("UPDATE job_runs SET status = 'running', attempt = 1, lease_owner = 'w', "
               "lease_token = gen_random_uuid(), lease_expires_at = now() + interval '1 m'")
    _tick(db, now=_one_slot_due(db, "swap"), max_runs=0)
    assert db.execute("SELECT trigger, cancel_requested_at IS NULL FROM job_runs "
                      "ORDER BY id").fetchall() == [("backfill", True), ("schedule", True)]


def test_lateness_counts_scheduled_runs_only(cli: Invoke, db: psycopg.Connection[Any]) -> None:
    _define(cli, "late", "* * * * *", "true")
    _behind(db, "late", 1)
    _tick(db)
    assert _runs(db) == [("schedule", "succeeded")]
    expected = db.execute(
        "SELECT extract(epoch FROM a.started_at - r.scheduled_for)::float8 FROM job_runs r "
        "JOIN job_attempts a ON a.run_id = r.id").fetchone()[0]  # type: ignore[index]
    assert cli("backfill", "--yes", "late", "--from", "2026-01-01T00:00:00Z",
               "--to", "2026-01-01T00:00:00Z").exit_code == 0
    assert cli("trigger", "late", "--force").exit_code == 0
    _tick(db)
    assert sorted(_runs(db)) == [("backfill", "succeeded"), ("manual", "succeeded"),
                                 ("schedule", "succeeded")]
    lateness = float(_samples(cli("metrics").stdout)['cronjobs_job_lateness_seconds{job="late"}'])
    assert abs(lateness - expected) < 1e-6


def _samples(text: str) -> dict[str, str]:
    return {line.split(" ")[0]: line.split(" ")[1] for line in text.splitlines()
            if line and not line.startswith("#")}
