"""One clock: every decision follows the operation's instant, so a test pins time by passing
a later instant instead of sleeping — retries' backoff, leases, a stale tick, the days that
retire — and a `--now` ahead of the database's clock is refused unless the future is allowed."""

from __future__ import annotations

import datetime as dt
import json
from typing import Any

import psycopg

from conftest import Invoke, count, snapshot
from cronjobs.core.health import status
from cronjobs.core.metrics import metrics
from cronjobs.core.retention import upkeep
from cronjobs.db.store import Store
from cronjobs.tick import TickOptions, tick

MINUTE = dt.timedelta(minutes=1)


def _one_run(cli: Invoke, name: str, *options: str) -> None:
    """Job ``name`` (its schedule fires on 29 February only) with one run queued, of
    2020-02-29."""
    result = cli("define", name, "0 0 29 2 *", *options)
    assert result.exit_code == 0, result.stderr
    result = cli("backfill", "--yes", name, "--from", "2020-02-29T00:00:00Z",
                 "--to", "2020-02-29T00:00:00Z")
    assert result.exit_code == 0, result.stderr


def _tick_at(cli: Invoke, at: dt.datetime, *options: str) -> dict[str, Any]:
    result = cli("tick", "--now", at.isoformat(), "--allow-future", "--json", *options)
    assert result.exit_code == 0, result.stderr
    counts: dict[str, Any] = json.loads(result.stdout)["counts"]
    return counts


def test_a_pinned_clock_drives_retries(cli: Invoke, store: Store,
                                       db: psycopg.Connection[Any]) -> None:
    # A failing job with a 10 minute backoff: a tick at T fails attempt 1, a tick at T+4m
    # finds nothing due, a tick at T+11m runs attempt 2 — no sleeping.
    _one_run(cli, "flaky", "--command", "echo oops >&2; exit 3", "--max-attempts", "2",
             "--backoff", "10m")
    t = store.now() + dt.timedelta(hours=1)
    first = _tick_at(cli, t)
    assert (first["claimed"], first["failed"]) == (1, 1)
    status_, eligible_at = db.execute("SELECT status, eligible_at FROM job_runs").fetchone() or ()
    assert status_ == "failed"
    # the backoff (a random point in the upper half of 10m) counts from the tick's instant
    assert t + 5 * MINUTE <= eligible_at < t + 11 * MINUTE
    assert _tick_at(cli, t + 4 * MINUTE)["claimed"] == 0
    second = _tick_at(cli, t + 11 * MINUTE)
    assert (second["claimed"], second["failed"]) == (1, 1)
    row = db.execute("SELECT status, attempt, exit_code, error, output_tail FROM job_runs"
                     ).fetchone()
    assert row == ("dead", 2, 3, "exit code 3", "oops\n")
    # attempts are recorded on the same clock
    starts = [r[0] for r in db.execute("SELECT started_at FROM job_attempts ORDER BY attempt")]
    assert t <= starts[0] < t + MINUTE
    assert t + 11 * MINUTE <= starts[1] < t + 12 * MINUTE
    assert count(db, "job_ticks") == 3


def test_a_pinned_clock_drives_leases_and_heartbeats(cli: Invoke, store: Store,
                                                     db: psycopg.Connection[Any]) -> None:
    _one_run(cli, "steady", "--command", "true", "--lease", "10m")
    t = store.now() + dt.timedelta(hours=1)
    # A worker claims the run at T, heartbeats once at T+8m, then dies (the row a crash
    # leaves behind, made by the real statements).
    (claim,) = store.queue.claim_runs(now=t, worker="gone", limit=1, tick_id=None)
    assert db.execute("SELECT lease_expires_at FROM job_runs").fetchone() == (t + 10 * MINUTE,)
    held = store.queue.heartbeat([(claim.id, claim.lease_token, claim.lease)], now=t + 8 * MINUTE)
    assert held == {claim.id: False}
    assert db.execute("SELECT lease_expires_at FROM job_runs").fetchone() == (t + 18 * MINUTE,)
    # At T+11m the first lease would have expired, the renewed one has not.
    early = _tick_at(cli, t + 11 * MINUTE)
    assert (early["reclaimed"], early["claimed"]) == (0, 0)
    late = _tick_at(cli, t + 19 * MINUTE)
    assert (late["reclaimed"], late["claimed"], late["succeeded"]) == (1, 1, 1)
    assert db.execute("SELECT attempt, outcome FROM job_attempts ORDER BY attempt"
                      ).fetchall() == [(1, "lost"), (2, "succeeded")]


def test_a_future_now_is_refused_and_writes_nothing(cli: Invoke, store: Store,
                                                    db: psycopg.Connection[Any]) -> None:
    assert cli("define", "often", "* * * * *", "--command", "true", "--overlap", "allow",
               "--catchup", "latest").exit_code == 0
    before = snapshot(db)
    later = store.now() + dt.timedelta(hours=3)
    refused = cli("tick", "--now", later.isoformat())
    assert refused.exit_code == 2
    assert refused.stdout == ""
    lines = refused.stderr.strip().splitlines()
    assert len(lines) == 1
    assert "--now is 3h ahead of the database clock" in lines[0]
    assert (f"for slots up to {later.isoformat(timespec='seconds')} and run them for "
            "real") in lines[0]
    assert "add --dry-run to preview it or --allow-future to do it anyway" in lines[0]
    assert "Traceback" not in refused.stderr
    assert snapshot(db) == before  # not even the tick's own record
    # --dry-run previews it, still writing nothing
    preview = cli("tick", "--now", later.isoformat(), "--dry-run")
    assert preview.exit_code == 0, preview.stderr
    assert "often" in preview.stdout
    assert snapshot(db) == before
    # a little skew between clocks is not the future
    skewed = cli("tick", "--now", (store.now() + dt.timedelta(seconds=30)).isoformat(),
                 "--max-runs", "0")
    assert skewed.exit_code == 0, skewed.stderr
    assert count(db, "job_ticks") == 1
    # --allow-future does it for real: the slots up to `later` are decided
    allowed = cli("tick", "--now", later.isoformat(), "--allow-future", "--max-runs", "0",
                  "--json")
    assert allowed.exit_code == 0, allowed.stderr
    assert json.loads(allowed.stdout)["counts"]["materialised"] == 1  # catch-up: latest
    assert db.execute("SELECT cursor_at FROM job_definitions").fetchone() == (later,)
    # and a later --now is refused again
    refused_again = cli("tick", "--now", (later + dt.timedelta(hours=1)).isoformat())
    assert refused_again.exit_code == 2
    assert count(db, "job_ticks") == 2


def test_the_library_refuses_a_future_instant(store: Store,
                                              db: psycopg.Connection[Any]) -> None:
    from cronjobs.errors import UsageError

    later = store.now() + dt.timedelta(days=2)
    try:
        tick(store, TickOptions(now=later, max_runs=0))
    except UsageError as exc:
        assert exc.message.startswith("--now is 2d ahead of the database clock")
    else:
        raise AssertionError("a tick in the future was not refused")
    assert count(db, "job_ticks") == 0
    tick(store, TickOptions(now=later, allow_future=True, max_runs=0))
    assert count(db, "job_ticks") == 1


def test_a_stale_tick_is_seen_at_a_later_instant(cli: Invoke, store: Store,
                                                 db: psycopg.Connection[Any]) -> None:
    assert cli("define", "ok", "0 0 29 2 *", "--command", "true").exit_code == 0
    tick(store, TickOptions(worker="test"))
    # (when the tick really started: the dead-man's switch is about real ticks)
    now = db.execute("SELECT started_at FROM job_ticks").fetchone()[0]  # type: ignore[index]
    assert status(store, now=now + MINUTE).problems == []
    stale = status(store, now=now + 20 * MINUTE)
    assert [p for p in stale.problems if p.startswith("no tick for")] == [
        "no tick for 20m (threshold 5m): is the crontab or CronJob still running?"]


def test_retirement_counts_from_the_instant(cli: Invoke, store: Store,
                                           db: psycopg.Connection[Any]) -> None:
    # (was prune's ages from the instant: prune is gone, and the one retention policy
    # decides by the upkeep's instant which days are over)
    assert cli("define", "ok", "0 0 29 2 *", "--command", "true").exit_code == 0
    assert cli("backfill", "--yes", "ok", "--from", "2016-01-01T00:00:00Z",
               "--to", "2024-12-31T00:00:00Z").exit_code == 0  # 2016, 2020, 2024
    assert tick(store, TickOptions(worker="test")).execute.succeeded == 3
    # a removed job's runs: none of them kept as its latest
    assert cli("remove", "ok").exit_code == 0
    # as if they had finished a month ago, their day (plus 14 days) over 15 days ago
    month = dt.timedelta(days=30)
    for table in ("job_runs", "job_attempts"):
        db.execute(f"UPDATE {table} SET finished_at = finished_at - %s, "  # noqa: S608
                   "retire_at = retire_at - %s", (month, month))
    retire_day = (db.execute("SELECT max(retire_at) FROM job_runs").fetchone() or (None,))[0]
    assert retire_day is not None
    day = retire_day.astimezone(dt.UTC).replace(hour=0, minute=0, second=0, microsecond=0)
    # an upkeep whose instant is on that day: not over yet, nothing retires
    report = upkeep(store, now=day + dt.timedelta(hours=23))
    assert (report.dropped, report.retired_rows, report.kept) == (0, 0, 0)
    assert count(db, "job_runs") == 3
    # the next day: over (their days were never made: the default partition has them,
    # retired row by row)
    report = upkeep(store, now=day + dt.timedelta(days=1, minutes=1))
    assert (report.dropped, report.retired_rows, report.kept) == (0, 3, 0)
    assert count(db, "job_runs") == 0 and count(db, "job_attempts") == 0


def test_lateness_is_never_negative(cli: Invoke, store: Store,
                                    db: psycopg.Connection[Any]) -> None:
    assert cli("define", "every", "* * * * *", "--command", "true").exit_code == 0
    t = store.now() + dt.timedelta(hours=1)
    _tick_at(cli, t)
    slot = db.execute("SELECT scheduled_for FROM job_runs WHERE status = 'succeeded'"
                      ).fetchone()[0]  # type: ignore[index]
    # an attempt recorded as started before its slot (as a tick in the future used to
    # record on the database's real clock) is on time, not early
    db.execute("UPDATE job_attempts SET started_at = %s", (slot - dt.timedelta(hours=1),))
    lateness = [line for line in metrics(store, now=t).splitlines()
                if line.startswith("cronjobs_job_lateness_seconds{")]
    assert lateness == ['cronjobs_job_lateness_seconds{job="every"} 0.0']
