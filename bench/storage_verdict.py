"""``--only storage_verdict``: ``/healthz`` and ``/metrics`` at 100,000 definitions
(``--storage-jobs``) in storage_scale's states (on time; every job's slot come since it was
defined; every job overdue) and in the bad minute (every job's run queued, unclaimed, and the
next slot skipped), this tree against ``--verdict-before-ref``."""

from __future__ import annotations

import datetime as dt
import shutil
import sys
import tempfile
import time
from pathlib import Path

import benchlib
import psycopg
from benchlib import Server, log
from common import Context, Section, checked, cli_env, db_clock, sql, tick_argv
from pages import PAGE_LIMITS, serving, timed_fetches
from storage_seed import add_jobs
from versions import Version, export, git, install

from cronjobs import cron
from cronjobs.core.spec import build_spec
from cronjobs.db.store import Store

# The states of storage_scale's definitions the verdict is asked about: what each sets on the
# job-* definitions (not due before next year: "0 0 1 1 *", next_due_at next year).
VERDICT_STATES = {
    # the cursor where it was defined: no slot came since
    "on time": "UPDATE job_definitions SET cursor_at = created_at",
    # the cursor moved since they were defined and none succeeded (what storage_scale's
    # materialisation leaves): each may have a problem until its schedule says not
    "slot come, none due yet": "UPDATE job_definitions SET cursor_at = now()",
    # defined three years ago (before the slot before the latest of `0 0 1 1 *`: a year and
    # a day ago was after it, and the verdict found no job overdue), the cursor moved, never
    # succeeded: every job overdue
    "every job overdue": "UPDATE job_definitions SET created_at = now() - interval '3 years', "
                         "schedule_since = now() - interval '3 years', cursor_at = now()",
}
# A queue nobody claims, as the product itself leaves it: --storage-jobs every-minute shell
# commands written by the statement `cronjobs define` runs, one `cronjobs tick --max-runs 0`
# that materialises a run of each and claims none, and the next minute's, which records a
# skip of each (overlap skip: the runs are still queued); every job overdue, every run due.
# Measured between ticks: before each pass the minute's tick runs, as cron would run it.
BAD_MINUTE = "the bad minute"


def bench_storage_verdict(ctx: Context) -> Section:
    server, jobs, requests = ctx.server, ctx.storage["jobs"], ctx.storage["requests"]
    ref = ctx.storage["verdict_ref"]
    n = ctx.repeats("storage_verdict")
    s = Section(
        "The verdict at scale: /healthz and /metrics, before and after",
        f"{jobs:,} shell-command definitions as storage_scale makes them (add_jobs: "
        "`0 0 1 1 *`, not due before next year), a tick recorded, in three states: "
        + "; ".join(f"{k}: `{v}`" for k, v in VERDICT_STATES.items())
        + f"; and {BAD_MINUTE}: {jobs:,} every-minute shell commands (upsert_definition, "
        "the statement of `cronjobs define`), `cronjobs tick --max-runs 0 --now M` (a run "
        "of each, none claimed), the same at M + 1 minute (a skip of each: overlap skip), "
        "VACUUM ANALYZE, and before each pass the minute's `cronjobs tick --max-runs 0`"
        + f". Two databases per state, the same rows: one migrated by git ref `{ref}` "
        "(before), one by this tree (after), each served by its own `cronjobs serve`; "
        f"/healthz fetched {requests} times and /metrics {max(5, requests // 5)} times "
        "(after 3 warm-ups; fewer when a page is slow: storage_scale's budget), before "
        f"and after alternately, in reverse order every other repetition ({n}); p95 per "
        "page, after / before paired within a repetition.")
    tmp = Path(tempfile.mkdtemp(prefix="cjbench-verdict-"))
    try:
        commit = git("rev-parse", "--verify", f"{ref}^{{commit}}")
        export(commit, tmp / "src")
        before = install("before", f"{ref} ({commit[:10]})", tmp / "src", tmp / "venv",
                         extras="embedded,web")
        versions = {"before": before.cli, "after": list(benchlib.cronjobs_command())}
        s.extra["versions"] = {"before": before.describe(), "after": Version(
            "after", "this tree", sys.executable).describe()}
        p95s: dict[tuple[str, str, str], list[float]] = {}
        p50s: dict[tuple[str, str, str], list[float]] = {}
        # (the bad minute first: its seeding, through the product, is what may fail)
        for state in (BAD_MINUTE, *VERDICT_STATES):
            dbs = (_bad_minute(server, versions, jobs) if state == BAD_MINUTE
                   else _state(server, versions, jobs, VERDICT_STATES[state]))
            for rep in range(n):
                order = list(dbs.items())
                for name, db in order[::-1] if rep % 2 else order:
                    if state == BAD_MINUTE:  # the minute's tick, as cron runs it
                        _next_minute(server)
                        checked(benchlib.run(tick_argv("--max-runs", "0", cli=versions[name]),
                                             cli_env(server, db)), "tick")
                    else:  # a tick just now (else "no tick for ..." after slow minutes)
                        sql(server, db, "UPDATE job_ticks SET tick_at = now(), "
                            "started_at = now(), finished_at = now()")
                    with serving(server.conninfo(db), versions[name]) as base:
                        for path in ("/healthz", "/metrics"):
                            count = max(5, requests // 5) if path == "/metrics" else requests
                            times = timed_fetches(base + path, count)
                            p95 = benchlib.percentile(times, 95)
                            p95s.setdefault((state, path, name), []).append(p95)
                            p50s.setdefault((state, path, name), []).append(
                                benchlib.percentile(times, 50))
                            log(f"  [{rep + 1}/{n}] {state}, {name}: {path} p95 {p95:.0f} ms")
            for db in dbs.values():
                server.drop_database(db)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    for (state, path, name), values in p95s.items():
        s.figure(f"{state}: {path} p50, {name}", "ms", p50s[(state, path, name)])
        s.figure(f"{state}: {path} p95, {name}", "ms", values)
    for state in (*VERDICT_STATES, BAD_MINUTE):
        for path, limit in PAGE_LIMITS.items():
            after, prior = p95s[(state, path, "after")], p95s[(state, path, "before")]
            s.figure(f"{state}: {path} p95 after / before", "x",
                     [a / max(b, 1e-9) for a, b in zip(after, prior, strict=True)])
            s.target(f"{state}: {path} p95 <= {limit:.0f} ms (after)",
                     (min(after), sorted(after)[len(after) // 2]), "<=", limit, "ms")
    return s



def _state(server: Server, versions: dict[str, list[str]], jobs: int,
           update: str) -> dict[str, str]:
    """One database per version: storage_scale's definitions, a tick, ``update``."""
    dbs = {}
    for name, cli in versions.items():
        db = server.cronjobs_database(f"st_v_{name}", cli=cli)
        add_jobs(server, db, count=jobs)
        sql(server, db, "INSERT INTO job_ticks (worker, tick_at, started_at, finished_at, "
            "status) VALUES ('bench', now(), now(), now(), 'finished')")
        sql(server, db, update)
        sql(server, db, "VACUUM ANALYZE")
        dbs[name] = db
    return dbs


def define_minutely(server: Server, db: str, count: int) -> None:
    """``count`` every-minute shell commands (job-000001...), written by the statement
    `cronjobs define` runs, in one transaction: their first slot is the next minute."""
    with psycopg.connect(server.conninfo(db), autocommit=True) as conn:
        store = Store(conn)
        with store.transaction():
            now = store.now()
            first = cron.parse("* * * * *", "UTC").next_after(now)
            for i in range(1, count + 1):
                store.definitions.upsert_definition(
                    build_spec(name=f"job-{i:06d}", schedule="* * * * *", command="true"),
                    start=now, next_due_at=first)


def _next_minute(server: Server) -> dt.datetime:
    """Wait for the start of the database's next minute; return it."""
    now = db_clock(server)
    minute = now.replace(second=0, microsecond=0) + dt.timedelta(minutes=1)
    time.sleep(max(0.0, (minute - now).total_seconds()) + 0.2)
    return minute


def _bad_minute(server: Server, versions: dict[str, list[str]], jobs: int) -> dict[str, str]:
    """One database per version in the bad minute (BAD_MINUTE): the definitions written
    once, in the first version's database, copied for the others and brought to their
    schema by their own `cronjobs migrate`; then each ticked by its own `cronjobs tick`, at
    the same two minutes."""
    names = list(versions)
    t = time.monotonic()
    dbs = {names[0]: server.cronjobs_database(f"st_v_{names[0]}", cli=versions[names[0]])}
    define_minutely(server, dbs[names[0]], jobs)
    for name in names[1:]:
        dbs[name] = server.create_database(f"st_v_{name}", template=dbs[names[0]])
        checked(benchlib.run_cli(["migrate"], server.conninfo(dbs[name]), cli=versions[name]),
                "migrate")
    log(f"  {BAD_MINUTE}: {jobs:,} jobs defined in {time.monotonic() - t:.0f} s")
    first = _next_minute(server)
    for what, minute in (("materialised", first), ("skipped", first + dt.timedelta(minutes=1))):
        # (each tick at its minute, pinned: a tick of 100,000 jobs can take most of one)
        time.sleep(max(0.0, (minute - db_clock(server)).total_seconds()) + 0.2)
        for name, db in dbs.items():
            t = time.monotonic()
            checked(benchlib.run(tick_argv("--now", minute.isoformat(), "--max-runs", "0",
                                           cli=versions[name]), cli_env(server, db)), "tick")
            made, skipped = sql(server, db, "SELECT materialised, skipped FROM job_ticks "
                                "ORDER BY id DESC LIMIT 1")[0]
            done = made if what == "materialised" else skipped
            log(f"  {BAD_MINUTE}, {name}: the tick at {minute:%H:%M} {what} {done:,} in "
                f"{time.monotonic() - t:.1f} s")
            if done != jobs:
                raise RuntimeError(f"{BAD_MINUTE}, {name}: the tick {what} {done}, not {jobs}")
    for db in dbs.values():
        sql(server, db, "VACUUM ANALYZE")
    return dbs
