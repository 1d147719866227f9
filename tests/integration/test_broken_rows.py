"""A row written directly with SQL that the code cannot parse is reported, never fatal."""

from __future__ import annotations

import json
from typing import Any

import psycopg
import pytest
from psycopg import sql

from conftest import Invoke, snapshot


@pytest.mark.parametrize(
    ("column", "value", "reason"),
    [("schedule", "61 * * * *", "minute"), ("timezone", "Not/AZone", "unknown time zone"),
     ("schedule", "0 0 30 2 *", "never fires")],
)
def test_broken_definition_is_reported(cli: Invoke, db: psycopg.Connection[Any], column: str,
                                       value: str, reason: str) -> None:
    assert cli("define", "good", "0 3 * * *").exit_code == 0
    assert cli("define", "broken", "0 4 * * *").exit_code == 0
    db.execute(sql.SQL("UPDATE job_definitions SET {} = %s WHERE name = 'broken'").format(
        sql.Identifier(column)), (value,))

    listed = cli("list")
    assert listed.exit_code == 0
    assert "good" in listed.stdout
    assert "invalid" in listed.stdout
    assert reason in listed.stdout
    entries = {e["name"]: e for e in json.loads(cli("list", "--json").stdout)}
    assert entries["broken"]["state"] == "invalid"
    assert reason in entries["broken"]["invalid_reason"]
    assert entries["good"]["state"] == "active"

    described = cli("describe", "broken")
    assert described.exit_code == 0
    assert "cannot be evaluated" in described.stdout

    nxt = cli("next", "broken")
    assert nxt.exit_code == 2
    assert "cannot be evaluated" in nxt.stderr

    # Defining it again with a valid schedule (and zone: a define keeps the options it is
    # not given, and says so when a stored one is broken) repairs it.
    repair = ["define", "broken", "0 4 * * *"]
    if column == "timezone":
        before = snapshot(db)
        refused = cli(*repair)
        assert (refused.exit_code, refused.stderr) == (
            2, "error: job 'broken': its stored --tz is not valid (unknown time zone "
               "'Not/AZone': use an IANA name such as 'Europe/Berlin' or 'UTC'); give --tz "
               "to repair it\n"), refused.stderr
        assert snapshot(db) == before
        repair += ["--tz", "UTC"]
    repaired = json.loads(cli(*repair, "--json").stdout)
    assert repaired["outcome"] == "updated"
    assert repaired["job"]["state"] == "active"


# Rows that bypassed the CLI's checks (constraints dropped by a hand migration, then
# written with SQL), each with the error its run must end with.
BROKEN_RUNS = {
    "no-command": ("UPDATE job_definitions SET command = NULL WHERE name = 'no-command'",
                   "a command job without a command"),
    "list-payload": ("UPDATE job_runs SET payload = '[1, 2]' WHERE definition_id = "
                     "(SELECT id FROM job_definitions WHERE name = 'list-payload')",
                     "payload is not a JSON object but an array"),
    "text-payload": ("UPDATE job_definitions SET payload = '\"text\"' "
                     "WHERE name = 'text-payload'", "payload is not a JSON object but a string"),
    "no-lease": ("UPDATE job_definitions SET lease = NULL WHERE name = 'no-lease'",
                 "the job's lease is None"),
    "bad-timeout": ("UPDATE job_definitions SET timeout = interval '-1 second' "
                    "WHERE name = 'bad-timeout'", "the job's timeout is"),
}
DROPPED = """
ALTER TABLE job_runs DROP CONSTRAINT job_runs_payload_check;
ALTER TABLE job_definitions DROP CONSTRAINT job_definitions_payload_check,
    DROP CONSTRAINT job_definitions_target_check,
    DROP CONSTRAINT job_definitions_timeout_check, DROP CONSTRAINT job_definitions_lease_check,
    ALTER COLUMN lease DROP NOT NULL, ALTER COLUMN backoff DROP NOT NULL;
"""


def _queue(cli: Invoke, name: str, *options: str) -> None:
    assert cli("define", name, "0 0 1 1 *", "--command", "true", *options).exit_code == 0
    result = cli("backfill", "--yes", name, "--from", "2020-01-01T00:00:00Z",
                 "--to", "2020-01-01T00:00:00Z")
    assert result.exit_code == 0, result.stderr


def _runs(db: psycopg.Connection[Any]) -> dict[str, tuple[str, int, str | None]]:
    rows = db.execute("SELECT d.name, r.status, r.attempt, r.error FROM job_runs AS r "
                      "JOIN job_definitions AS d ON d.id = r.definition_id").fetchall()
    return {name: (status, attempt, error) for name, status, attempt, error in rows}


def test_a_broken_run_fails_alone_and_the_batch_runs(cli: Invoke,
                                                     db: psycopg.Connection[Any]) -> None:
    db.execute(DROPPED)
    for name in ("good-1", "good-2", *BROKEN_RUNS):
        _queue(cli, name)
    for statement, _ in BROKEN_RUNS.values():
        assert db.execute(statement).rowcount == 1

    # one claim batch takes them all (concurrency 16)
    result = cli("tick", "--concurrency", "16", "--json")
    assert result.exit_code == 0, result.stderr
    report = json.loads(result.stdout)
    assert report["counts"]["claimed"] == 2 + len(BROKEN_RUNS)
    assert report["counts"]["succeeded"] == 2
    assert report["counts"]["failed"] == len(BROKEN_RUNS)

    runs = _runs(db)
    assert runs["good-1"] == ("succeeded", 1, None)
    assert runs["good-2"] == ("succeeded", 1, None)
    for name, (_, error) in BROKEN_RUNS.items():
        status, attempt, recorded = runs[name]
        # dead at once: a retry would meet the same row
        assert (status, attempt) == ("dead", 1), (name, runs[name])
        assert recorded is not None and recorded.startswith("could not start: "), recorded
        assert error in recorded, (name, recorded)
    attempts = db.execute("SELECT outcome, count(*) FROM job_attempts GROUP BY outcome "
                          "ORDER BY outcome").fetchall()
    assert attempts == [("failed", len(BROKEN_RUNS)), ("succeeded", 2)]
    ticks = db.execute("SELECT status, claimed, error FROM job_ticks").fetchall()
    assert ticks == [("finished", 2 + len(BROKEN_RUNS), None)]


def test_a_failure_without_a_backoff_ends_the_run(cli: Invoke,
                                                  db: psycopg.Connection[Any]) -> None:
    db.execute(DROPPED)
    _queue(cli, "good")
    assert cli("define", "flaky", "0 0 1 1 *", "--command", "exit 3").exit_code == 0
    assert cli("backfill", "--yes", "flaky", "--from", "2020-01-01T00:00:00Z",
               "--to", "2020-01-01T00:00:00Z").exit_code == 0
    db.execute("UPDATE job_definitions SET backoff = NULL WHERE name = 'flaky'")

    result = cli("tick", "--json")
    assert result.exit_code == 0, result.stderr
    runs = _runs(db)
    assert runs["good"] == ("succeeded", 1, None)
    status, attempt, error = runs["flaky"]
    # its failure is recorded; no retry can be computed, so the run ends there
    assert (status, attempt) == ("dead", 1)
    assert error is not None and "exit code 3" in error and "no retry" in error


def test_an_outcome_the_database_refuses_loses_no_other(
        cli: Invoke, db: psycopg.Connection[Any]) -> None:
    # a text column that refuses what the run printed (a trigger stands in for any
    # per-row refusal: a constraint added by hand, a value out of range...)
    db.execute("""
        CREATE FUNCTION refuse_poison() RETURNS trigger LANGUAGE plpgsql AS $$
        BEGIN
            IF NEW.output_tail LIKE '%poison%' THEN
                RAISE check_violation USING MESSAGE = 'poisoned output';
            END IF;
            RETURN NEW;
        END $$;
        CREATE TRIGGER refuse_poison BEFORE INSERT OR UPDATE ON job_runs
            FOR EACH ROW EXECUTE FUNCTION refuse_poison();
    """)
    for name in ("good-1", "good-2"):
        _queue(cli, name)
    assert cli("define", "poison", "0 0 1 1 *", "--command", "echo poison").exit_code == 0
    assert cli("backfill", "--yes", "poison", "--from", "2020-01-01T00:00:00Z",
               "--to", "2020-01-01T00:00:00Z").exit_code == 0

    result = cli("tick", "--concurrency", "16", "--json")
    assert result.exit_code == 0, result.stderr
    runs = _runs(db)
    assert runs["good-1"] == ("succeeded", 1, None)
    assert runs["good-2"] == ("succeeded", 1, None)
    # its outcome could not be written: it keeps its lease, and is reclaimed when it
    # expires (at-least-once)
    assert runs["poison"][:2] == ("running", 1)
    report = json.loads(result.stdout)
    assert report["counts"]["succeeded"] == 2
    lost = [r for r in report["runs"] if r["status"] is None]
    assert [r["job"] for r in lost] == ["poison"]


def test_a_run_the_system_cannot_start_is_retried(
        cli: Invoke, db: psycopg.Connection[Any], monkeypatch: pytest.MonkeyPatch) -> None:
    from cronjobs.execution.watchdog import Watchdog

    def refuse() -> Watchdog:
        raise OSError(11, "Resource temporarily unavailable")

    monkeypatch.setattr(Watchdog, "start", staticmethod(refuse))
    _queue(cli, "busy")
    result = cli("tick", "--json")
    assert result.exit_code == 0, result.stderr
    status, attempt, error = _runs(db)["busy"]
    # not the row's fault: a failed attempt, retried after its backoff like any other
    assert (status, attempt) == ("failed", 1)
    assert error is not None
    assert error.startswith("could not start: BlockingIOError: [Errno 11] Resource temporarily")
