"""The storage's benchmarks (issue 26: a hot queue partition, the history partitioned by
retirement day, retention by dropping days), each figure against a baseline of the same run.

    python bench/run.py --only storage --database-url URL          # all four, full size
    python bench/run.py --only storage_scale --storage-jobs 1000 --storage-history 100000
    python bench/run.py --only storage_scale --storage-parts dashboard \
        --storage-dashboard-ref main                                 # pages, before / after
    python bench/run.py --only storage_snapshot --snapshot-minutes 1
    python bench/run.py --only storage_snapshot --snapshot-minutes 3 --snapshot-vacuum 60
    python bench/run.py --only storage_retire --retire-sizes 10000,100000
    python bench/run.py --only storage_write                        # WAL and index entries
    python bench/run.py --only storage_verdict                      # /healthz, /metrics only

- ``storage_scale``: 100,000 definitions and 10,000,000 finished runs (``--storage-jobs``,
  ``--storage-history``) against the same database without the history: drains of queued
  no-op runs, 100,000 definitions due in one tick, every dashboard page's p95.
- ``storage_snapshot``: a REPEATABLE READ transaction held open while 4 ticks drain a fed
  backlog: throughput and dead rows of the hot tables before, during and after.
- ``storage_retire``: dropping one day of history against DELETE, the full upkeep, and a
  simulated month of every-minute jobs with 7-day retention (the database's size per day,
  ``--storage-plot``).
- ``storage_write``: WAL bytes and index entries written per run, and runs/s, of cronjobs
  before the storage work (``--storage-before-ref``), after it, pgqueuer and the hand loop.
- ``storage_verdict``: ``/healthz`` and ``/metrics`` at 100,000 definitions (``--storage-jobs``)
  in storage_scale's states (on time; every job's slot come since it was defined, the state
  its materialisation leaves; every job overdue), this tree against ``--verdict-before-ref``.

Nothing here asserts a time: targets are reported met or NOT met.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import json
import random
import shutil
import socket
import subprocess
import sys
import tempfile
import threading
import time
import urllib.error
import urllib.request
import uuid
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import benchlib
import psycopg
from benchlib import Server, log
from common import Context, Section, checked, cli_env, db_clock, scalar, sql, tick_argv
from engine import Cronjobs, HandLoop, PgQueuer, System, handler_dir
from versions import Version, export, git, install

UUID0 = "00000000-0000-0000-0000-000000000000"
NOOP_DEFS = 100  # no-op handler definitions the drains' runs are spread over

# Finished runs written straight into the history (as finishes leave them): ``count`` runs
# g = lo..hi finishing at start + (g - lo) * step, every ``dead_every``-th dead (kept
# ``keep_failed``), the others succeeded (kept ``keep_ok``); each with its attempt.
# Definition of run g: 1 + g % defs (+ offset), or definition ``busy`` for every
# ``busy_every``-th run (0: none).
HISTORY_INSERT = """
WITH r AS (
    INSERT INTO job_runs (definition_id, scheduled_for, trigger, status, attempt,
                          max_attempts, exclusive, eligible_at, started_at, finished_at,
                          exit_code, error, output_tail, created_at, updated_at, stage,
                          retire_at, acknowledged_at)
    SELECT x.def, x.fin - interval '2 seconds', 'schedule', x.status, 1, 1, true,
           x.fin - interval '2 seconds', x.fin - interval '1 second', x.fin,
           CASE WHEN x.status = 'dead' THEN 1 ELSE 0 END,
           CASE WHEN x.status = 'dead' THEN 'exit code 1' END, E'ok\\n',
           x.fin - interval '2 seconds', x.fin, 'history',
           x.fin + CASE WHEN x.status = 'dead' THEN %(keep_failed)s::interval
                        ELSE %(keep_ok)s::interval END,
           -- (an installation whose dead runs were seen to: acknowledged)
           CASE WHEN x.status = 'dead' THEN x.fin END
    FROM (SELECT CASE WHEN %(busy_every)s > 0 AND g %% greatest(%(busy_every)s, 1) = 0
                      THEN %(busy)s::bigint
                      ELSE %(offset)s + 1 + g %% %(defs)s END AS def,
                 %(start)s::timestamptz + (g - %(lo)s) * %(step)s::interval AS fin,
                 CASE WHEN g %% %(dead_every)s = 0 THEN 'dead' ELSE 'succeeded' END AS status
          FROM generate_series(%(lo)s::bigint, %(hi)s::bigint) AS g) AS x
    RETURNING id, started_at, finished_at, status, retire_at)
INSERT INTO job_attempts (run_id, attempt, worker, lease_token, started_at, finished_at,
                          outcome, exit_code, stage, retire_at)
SELECT id, 1, 'bench:1', %(uuid)s::uuid, started_at, finished_at,
       CASE WHEN status = 'dead' THEN 'failed' ELSE 'succeeded' END,
       CASE WHEN status = 'dead' THEN 1 ELSE 0 END, 'history', retire_at
FROM r
"""


LAST_OUTCOMES = """
UPDATE job_definitions AS d SET last_succeeded_at = x.ok, last_failed_at = x.died
FROM (SELECT definition_id, max(finished_at) FILTER (WHERE status = 'succeeded') AS ok,
             max(finished_at) FILTER (WHERE status = 'dead') AS died
      FROM job_runs WHERE stage = 'history' GROUP BY definition_id) AS x
WHERE d.id = x.definition_id
"""


def insert_history(server: Server, db: str, *, count: int, start: dt.datetime,
                   span: dt.timedelta, defs: int, offset: int = 0, busy: int = 0,
                   busy_every: int = 0, dead_every: int = 10**12,
                   keep_ok: dt.timedelta = dt.timedelta(days=14),
                   keep_failed: dt.timedelta = dt.timedelta(days=90),
                   chunk: int = 1_000_000) -> None:
    """``count`` finished runs (and their attempts), finishing evenly over ``span`` from
    ``start``, in statements of ``chunk`` runs."""
    step = span / max(count, 1)
    with psycopg.connect(server.conninfo(db), autocommit=True) as conn:
        for lo in range(1, count + 1, chunk):
            hi = min(count, lo + chunk - 1)
            conn.execute(HISTORY_INSERT, {
                "lo": lo, "hi": hi, "start": start + step * (lo - 1), "step": step,
                "defs": defs, "offset": offset, "busy": busy, "busy_every": busy_every,
                "dead_every": dead_every, "keep_ok": keep_ok, "keep_failed": keep_failed,
                "uuid": UUID0})
            if count > chunk:
                log(f"    {hi:,} / {count:,} runs")
        # what the finishes would have left on the definitions (health reads it)
        conn.execute(LAST_OUTCOMES)


def add_days(server: Server, db: str, days: Sequence[dt.date]) -> None:
    with psycopg.connect(server.conninfo(db), autocommit=True) as conn:
        for day in days:
            conn.execute("SELECT cronjobs_add_history_day(%s)", (day,))


def add_jobs(server: Server, db: str, *, count: int, prefix: str = "job-",
             schedule: str = "0 0 1 1 *") -> None:
    """``count`` shell-command definitions named prefix000001…, not due before next year."""
    sql(server, db, """
        INSERT INTO job_definitions (name, schedule, timezone, kind, command, overlap,
                                     max_attempts, cursor_at, next_due_at)
        SELECT %(prefix)s::text || lpad(g::text, 6, '0'), %(schedule)s, 'UTC', 'command',
               'true', 'skip', 1, now(), date_trunc('year', now(), 'UTC') + interval '1 year'
        FROM generate_series(1, %(count)s) AS g""",
        {"prefix": prefix, "count": count, "schedule": schedule})


def add_noop(server: Server, db: str, *, count: int = NOOP_DEFS, schedule: str = "0 0 1 1 *",
             prefix: str = "noop-") -> None:
    sql(server, db, """
        INSERT INTO job_definitions (name, schedule, timezone, kind, handler, overlap,
                                     max_attempts, cursor_at, next_due_at)
        SELECT %(prefix)s::text || g, %(schedule)s, 'UTC', 'handler', 'noop', 'allow', 1,
               now(), date_trunc('year', now(), 'UTC') + interval '1 year'
        FROM generate_series(1, %(count)s) AS g""",
        {"count": count, "schedule": schedule, "prefix": prefix})


def enqueue(server: Server, db: str, count: int, *, trigger: str = "backfill",
            vacuum: bool = True) -> int:
    """``count`` queued runs of the no-op definitions (as ``cronjobs backfill`` leaves them,
    or manual runs); returns the largest run id before them."""
    with psycopg.connect(server.conninfo(db), autocommit=True) as conn:
        row = conn.execute("SELECT coalesce(max(id), 0) FROM job_runs_queue").fetchone()
        seq = conn.execute("SELECT CASE WHEN is_called THEN last_value ELSE 0 END "
                           "FROM job_runs_id_seq").fetchone()
        conn.execute("""
            INSERT INTO job_runs (definition_id, scheduled_for, trigger, max_attempts,
                                  exclusive, eligible_at)
            SELECT d.id, date_trunc('minute', now()) - g * interval '1 minute', %(trigger)s,
                   1, false, now() - interval '1 second'
            FROM generate_series(1, %(count)s) AS g
            JOIN job_definitions AS d ON d.name = 'noop-' || (1 + g %% %(defs)s)
            ORDER BY g""", {"count": count, "defs": NOOP_DEFS, "trigger": trigger})
        if vacuum:
            conn.execute("VACUUM ANALYZE job_runs_queue")
    return max(int(row[0]) if row else 0, int(seq[0]) if seq else 0)


def drained(server: Server, db: str, after_id: int) -> tuple[int, float]:
    """(runs succeeded with an id above ``after_id``, first start -> last finish)."""
    row = sql(server, db, """
        SELECT count(*) FILTER (WHERE status = 'succeeded'),
               extract(epoch FROM max(finished_at) - min(started_at))::float8
        FROM job_runs WHERE id > %s AND trigger = 'backfill'""", (after_id,))[0]
    return int(row[0]), float(row[1] or 0)


def utc_today(server: Server) -> dt.date:
    return db_clock(server).astimezone(dt.UTC).date()


# -- 1. scale ---------------------------------------------------------------------------------

PAGE_LIMITS = {"/healthz": 50.0, "/metrics": 500.0}  # ms; every other page: 200 ms
SCALE_PARTS = ("drains", "materialise", "dashboard")  # --storage-parts


def bench_storage_scale(ctx: Context) -> Section:  # noqa: PLR0915 - one setup
    o, server = ctx.storage, ctx.server
    jobs, history, queued = o["jobs"], o["history"], o["queued"]
    n = ctx.repeats("storage_scale")
    s = Section(
        "Storage at scale: a long history against none",
        f"Two databases of the same schema, {jobs:,} shell-command definitions (not due) "
        f"and {NOOP_DEFS} no-op handler definitions each, the same history day partitions "
        f"made (cronjobs_add_history_day); one also holds {history:,} finished runs (each "
        "with its attempt) written straight into the history: finished evenly over the "
        "last 13.9 days, 1 in 50 dead (retire_at = finished_at + 90 days, else + 14 "
        "days), 1 in 10 runs of one busy job (job-000001), the rest round-robin over the "
        "definitions; then VACUUM ANALYZE. (a) Drains: "
        f"{queued:,} queued no-op runs (as `cronjobs backfill` leaves them) drained by K "
        "`cronjobs tick --in-process --concurrency 8` processes, on the full database and "
        "on the empty one alternately (in reverse order every other repetition), in place "
        "(each drain's runs join the history); runs/s = runs / (first start -> last "
        "finish); full / empty paired within a repetition. (b) Materialisation: every "
        f"job-* definition set to `* * * * *`, due at a pinned minute; one `cronjobs tick "
        "--max-runs 0 --now MINUTE` makes their runs; timed as the process (spawn -> exit), "
        "inside the tick (job_ticks started -> finished) and net of an empty tick (the "
        "same command with nothing due, just before: the materialise step alone); runs "
        "made counted (and distinct jobs) and a second tick at the same minute must make "
        "none. (c) Dashboard: `cronjobs serve` on each database, each page fetched "
        f"sequentially {o['requests']} times after 3 warm-ups; p95 per page. A page that "
        "misses its limit on the full database is traced (the page rendered in a process "
        "that records its named queries, each then run under EXPLAIN ANALYZE): the "
        "slowest query is named.")
    parts, ref = o["parts"], o["dashboard_ref"]
    if ref and "dashboard" in parts:
        s.method += (
            f" (c') Before / after: the databases are made at the schema of the code at "
            f"{ref} (its `cronjobs migrate`) and the history loaded once; the full one is "
            "copied (CREATE DATABASE ... TEMPLATE) and the copy and the empty one are "
            "migrated by this checkout; each page is then fetched from the code at "
            f"{ref} on the original and from this checkout on the copy, alternately, page "
            "by page; ratio = before / after of the p95.")
    appdir = handler_dir()
    with contextlib.ExitStack() as stack:
        before = stack.enter_context(before_version(ref)) if ref and "dashboard" in parts \
            else None
        try:
            base = server.cronjobs_database("st_base", cli=before.cli if before else None)
            add_jobs(server, base, count=jobs)
            add_noop(server, base)
            today = utc_today(server)
            days = sorted({today + dt.timedelta(days=d) for d in
                           (*range(16), *range(75, 92))})
            add_days(server, base, days)
            sql(server, base, "VACUUM ANALYZE")
            full = server.create_database("st_full", template=base)
            empty = server.create_database("st_empty", template=base)
            now = db_clock(server)
            t = time.monotonic()
            log(f"  loading {history:,} runs into the history")
            insert_history(server, full, count=history,
                           start=now - dt.timedelta(days=13.9),
                           span=dt.timedelta(days=13.9) - dt.timedelta(minutes=1), defs=jobs,
                           busy=1, busy_every=10, dead_every=50)
            sql(server, full, "VACUUM ANALYZE")
            s.extra["seconds to load the history (runs + attempts, VACUUM ANALYZE)"] = round(
                time.monotonic() - t, 1)
            dbs = {"full history": full, "empty history": empty}
            clis: dict[str, list[str] | None] = {}
            if before is not None:
                # the history at REF's schema is REF's; a copy of it, and the empty one, are
                # brought to this checkout's schema by its own `cronjobs migrate`
                t = time.monotonic()
                copy = server.create_database("st_full_now", template=full)
                s.extra["seconds to copy the full database"] = round(time.monotonic() - t, 1)
                for db in (copy, empty):
                    t = time.monotonic()
                    checked(benchlib.run_cli(["migrate"], server.conninfo(db)), "migrate")
                    s.extra.setdefault("seconds of this checkout's migrate", []).append(
                        round(time.monotonic() - t, 1))
                sql(server, copy, "ANALYZE job_definitions")
                dbs = {"full history": copy, "empty history": empty,
                       f"full history, {ref}": full}
                clis = {f"full history, {ref}": before.cli}
                s.extra[f"code at {ref}"] = before.describe()
            s.extra["database sizes (MB)"] = {
                name: round(scalar(server, db, "SELECT pg_database_size(current_database())")
                            / 2**20) for name, db in dbs.items()}
            if "drains" in parts:
                _scale_drains(ctx, s, {k: dbs[k] for k in ("full history", "empty history")},
                              appdir, n)
            if "materialise" in parts:
                _scale_materialise(ctx, s, {k: dbs[k] for k in ("full history",
                                                                "empty history")}, n)
            if "dashboard" in parts:
                _scale_dashboard(ctx, s, dbs, clis, ref if before is not None else None)
        finally:
            shutil.rmtree(appdir, ignore_errors=True)
            for db in list(server._created):
                if "_st_" in db:
                    server.drop_database(db)
    return s


def _scale_drains(ctx: Context, s: Section, dbs: dict[str, str], appdir: Path,
                  n: int) -> None:
    server, queued = ctx.server, ctx.storage["queued"]
    system = Cronjobs(server, "in-process", appdir)
    rates: dict[str, list[float]] = {}
    for rep in range(n):
        for k in ctx.compare_processes:
            order = list(dbs.items())
            for name, db in order[::-1] if rep % 2 else order:
                after = enqueue(server, db, queued)
                _, results = benchlib.run_together([system.argv()] * k, system.env(db))
                for r in results:
                    checked(r, "tick")
                done, span = drained(server, db, after)
                if done != queued:
                    raise RuntimeError(f"{name}: {done} of {queued} runs done")
                rates.setdefault(f"{name} x{k}", []).append(done / span)
                log(f"  [{rep + 1}/{n}] K={k} {name}: {done / span:,.0f} runs/s")
    for key, values in rates.items():
        s.figure(f"drain {key}: runs/s", "runs/s", values)
    for k in ctx.compare_processes:
        ratio = [a / b for a, b in zip(rates[f"full history x{k}"],
                                       rates[f"empty history x{k}"], strict=True)]
        s.figure(f"drain x{k}: full / empty history", "x", ratio)
        s.target(f"drain at K={k}: full / empty history >= 0.9", (min(ratio),
                 sorted(ratio)[len(ratio) // 2]), ">=", 0.9, "x")


def _scale_materialise(ctx: Context, s: Section, dbs: dict[str, str], n: int) -> None:
    server, jobs = ctx.server, ctx.storage["jobs"]
    values: dict[str, list[float]] = {}
    for rep in range(n):
        order = list(dbs.items())
        for name, db in order[::-1] if rep % 2 else order:
            minute = db_clock(server).replace(second=0, microsecond=0)
            env = cli_env(server, db)
            at = ["--now", minute.isoformat(), "--max-runs", "0"]
            empty = checked(benchlib.run(tick_argv(*at), env), "empty tick")
            empty_inside = _last_tick_seconds(server, db)
            sql(server, db, "UPDATE job_definitions SET schedule = '* * * * *', "
                "cursor_at = %s, next_due_at = %s WHERE name LIKE 'job-%%'",
                (minute - dt.timedelta(seconds=30), minute))
            sql(server, db, "VACUUM ANALYZE job_definitions")
            result = checked(benchlib.run(tick_argv(*at), env), "tick")
            inside = _last_tick_seconds(server, db)
            again = checked(benchlib.run(tick_argv(
                "--now", (minute + dt.timedelta(seconds=20)).isoformat(), "--max-runs", "0"),
                env), "second tick")
            made, distinct = sql(server, db, """
                SELECT count(*), count(DISTINCT definition_id) FROM job_runs
                WHERE scheduled_for = %s AND trigger = 'schedule'""", (minute,))[0]
            second = scalar(server, db, "SELECT materialised FROM job_ticks "
                            "ORDER BY id DESC LIMIT 1")
            if made != jobs or distinct != jobs or second != 0:
                raise RuntimeError(f"{name}: {made} runs for {distinct} jobs, the second "
                                   f"tick made {second} (expected {jobs}, {jobs}, 0)")
            del again
            sql(server, db, "DELETE FROM job_runs_queue WHERE scheduled_for = %s AND "
                "trigger = 'schedule'", (minute,))
            sql(server, db, "UPDATE job_definitions SET schedule = '0 0 1 1 *', "
                "cursor_at = now(), next_due_at = date_trunc('year', now(), 'UTC') "
                "+ interval '1 year' WHERE name LIKE 'job-%%'")
            sql(server, db, "VACUUM ANALYZE job_definitions, job_runs_queue")
            values.setdefault(f"{name}: tick process", []).append(result.wall)
            values.setdefault(f"{name}: inside the tick", []).append(inside)
            values.setdefault(f"{name}: materialise step (inside, net of an empty tick)",
                              []).append(inside - empty_inside)
            values.setdefault(f"{name}: empty tick process", []).append(empty.wall)
            log(f"  [{rep + 1}/{n}] {name}: {jobs:,} due, tick {result.wall:.2f} s "
                f"(inside {inside:.2f} s), exactly once: {made:,} runs, {distinct:,} jobs")
    for key, vs in values.items():
        s.figure(f"materialise {jobs:,} due: {key}", "s", vs)
    s.ratio("materialise step: full / empty history",
            f"materialise {jobs:,} due: full history: materialise step (inside, net of an "
            "empty tick)",
            f"materialise {jobs:,} due: empty history: materialise step (inside, net of an "
            "empty tick)")
    s.extra["materialise: exactly once"] = (f"every repetition: {jobs:,} runs for {jobs:,} "
                                            "distinct jobs; a second tick made 0")


@contextlib.contextmanager
def before_version(ref: str) -> Iterator[Version]:
    """The code at ``ref``, installed in a virtual environment of its own; removed after."""
    tmp = Path(tempfile.mkdtemp(prefix="cjbench-before-"))
    try:
        commit = git("rev-parse", "--verify", f"{ref}^{{commit}}")
        export(commit, tmp / "src")
        yield install("before", f"{ref} ({commit[:10]})", tmp / "src", tmp / "venv",
                      extras="embedded,web")
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def _last_tick_seconds(server: Server, db: str) -> float:
    # a tick at a pinned instant records its end on that clock: finished_at - tick_at
    return float(scalar(server, db, "SELECT extract(epoch FROM finished_at - tick_at)"
                        "::float8 FROM job_ticks ORDER BY id DESC LIMIT 1"))


def _pages(server: Server, db: str) -> list[str]:
    """The pages fetched, the same on both databases but for the run (one of its own)."""
    rng = random.Random(26)  # noqa: S311 - which pages to ask for
    names = [r[0] for r in sql(server, db, "SELECT name FROM job_definitions "
                               "WHERE name LIKE 'job-%%' ORDER BY id")]
    lo, hi = sql(server, db, "SELECT min(id), max(id) FROM job_runs")[0]
    run = rng.randint(int(lo or 1), int(hi or 1))
    return ["/", f"/?after={rng.choice(names)}", "/?q=job-0123", f"/jobs/{rng.choice(names)}",
            "/jobs/job-000001", "/jobs/noop-1", f"/runs/{run}", "/healthz",
            "/healthz?scope=server", "/metrics"]


def _scale_dashboard(ctx: Context, s: Section, dbs: dict[str, str],
                     clis: dict[str, list[str] | None], ref: str | None) -> None:
    """Every page from every database, page by page (the databases alternate, so that the
    load of a shared machine falls on each alike)."""
    server, requests = ctx.server, ctx.storage["requests"]
    p95s: dict[str, dict[str, float]] = {}
    timeouts: list[str] = []
    refused: list[str] = []
    pages = {name: _pages(server, db) for name, db in dbs.items()}
    for i in range(len(pages["full history"])):
        for name, db in dbs.items():
            path = pages[name][i]
            # a server per page: a request cut off by the timeout leaves none of its work
            ERRORS.clear()
            with serving(server.conninfo(db), clis.get(name)) as base:
                n = max(5, requests // 5) if path == "/metrics" else requests
                times = _timed_fetches(base + path, n)
            if ERRORS:
                refused.append(f"{name} {path}: HTTP {sorted(set(ERRORS.values()))}")
            if times[-1] >= PAGE_TIMEOUT * 1000:
                timeouts.append(f"{name} {path}")
                sql(server, db, "SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
                    "WHERE datname = current_database() AND pid <> pg_backend_pid()")
            label = _label(path)
            s.figure(f"page {label} ({name})", "ms", times)
            p95 = benchlib.percentile(times, 95)
            p95s.setdefault(label, {})[name] = p95
            log(f"  {name} {path}: p95 {p95:.0f} ms")
    traced: dict[str, Any] = {}
    paths = pages["full history"]
    for path in paths:
        label = _label(path)
        limit = PAGE_LIMITS.get(path.split("?")[0] if path.startswith("/healthz") else path,
                                200.0)
        full = p95s[label]["full history"]
        s.figure(f"page {label}: p95, full history", "ms", [full])
        s.figure(f"page {label}: p95, empty history", "ms", [p95s[label]["empty history"]])
        s.figure(f"page {label}: p95 full / empty", "x",
                 [full / max(p95s[label]["empty history"], 1e-9)])
        if ref is not None:
            old = p95s[label][f"full history, {ref}"]
            s.figure(f"page {label}: p95, full history, {ref}", "ms", [old])
            s.figure(f"page {label}: p95 {ref} / this checkout (full history)", "x",
                     [old / max(full, 1e-9)])
        s.target(f"page {label}: p95 <= {limit:.0f} ms (full history)", (full, full), "<=",
                 limit, "ms")
        if full > limit and f"full history {path}" not in timeouts:
            try:
                traced[label] = trace_page(server.conninfo(dbs["full history"]), path)
            except Exception as exc:
                traced[label] = {"error": f"{type(exc).__name__}: {exc}"}
    s.extra["pages"] = {_label(p): p for p in paths}
    s.extra[f"pages cut off after {PAGE_TIMEOUT:.0f} s (figure = the timeout)"] = timeouts
    s.extra["pages answered with an error (timed all the same)"] = refused
    s.extra["pages that miss: their queries under EXPLAIN ANALYZE"] = traced


PAGE_BUDGET = 60.0  # seconds of requests per page and database, once 3 are timed
PAGE_TIMEOUT = 60.0  # seconds: a request still unanswered is cut off (recorded as this)


def _timed_fetches(url: str, n: int) -> list[float]:
    """``n`` timed fetches after 3 warm-ups; fewer (3 at least, no warm-up) when the page
    takes so long that ``n`` would not fit in PAGE_BUDGET."""
    first = fetch(url)
    if first >= PAGE_TIMEOUT * 1000:
        return [first]
    if first > 2000:  # a slow page: its first answer is timed too
        times = [first]
        spent = first / 1000
        while len(times) < n and spent < PAGE_BUDGET:
            times.append(fetch(url))
            spent += times[-1] / 1000
        return times
    for _ in range(2):
        fetch(url)
    return [fetch(url) for _ in range(n)]


def _label(path: str) -> str:
    if path.startswith("/?after="):
        return "/?after=JOB (a page further)"
    if path.startswith("/jobs/job-") and path != "/jobs/job-000001":
        return "/jobs/JOB (a job, ~100 runs)"
    if path == "/jobs/job-000001":
        return "/jobs/job-000001 (the busy job, 1/10 of the history)"
    if path == "/jobs/noop-1":
        return "/jobs/noop-1 (a drained job)"
    if path.startswith("/runs/"):
        return "/runs/ID (a run)"
    return path


@contextlib.contextmanager
def serving(conninfo: str, cli: Sequence[str] | None = None) -> Iterator[str]:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    env = benchlib.clean_env({"CRONJOBS_DATABASE_URL": conninfo})
    proc = subprocess.Popen([*(cli or benchlib.cronjobs_command()), "serve", "--port", str(port),
                             "--no-access-log"], env=env, stderr=subprocess.DEVNULL)
    base = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 60
        while True:
            try:
                fetch(base + "/healthz?scope=server")
                break
            except OSError:
                if time.monotonic() > deadline or proc.poll() is not None:
                    raise
                time.sleep(0.2)
        yield base
    finally:
        proc.terminate()
        proc.wait(timeout=30)


ERRORS: dict[str, int] = {}  # path -> the error status it answered with (see fetch)


def fetch(url: str) -> float:
    """Milliseconds to fetch ``url``. A 503 of /healthz is an answer too, and so is the 404
    of the run page of a database that holds no run (the empty one without the drains);
    any other error status is an answer recorded in ERRORS (a page that refuses: the busy
    job's page before it bounded its timeline)."""
    start = time.perf_counter()
    try:
        with urllib.request.urlopen(url, timeout=PAGE_TIMEOUT) as response:  # noqa: S310
            response.read()
    except urllib.error.HTTPError as exc:
        exc.read()
        if exc.code not in (404, 503):
            ERRORS[url.split("/", 3)[-1]] = exc.code
    except TimeoutError:
        return PAGE_TIMEOUT * 1000
    return (time.perf_counter() - start) * 1000


# Renders one page in-process (Starlette's test client) recording every named query it
# runs, then runs each SELECT under EXPLAIN ANALYZE with the same parameters; prints JSON:
# the page's time and the queries, slowest first, with the slowest one's plan.
TRACE = r'''
import json, sys, time
import psycopg
from cronjobs.db import session as cjsession, sql as cjsql
from cronjobs.web.app import create_app
from cronjobs.web.site import Settings
from starlette.testclient import TestClient

conninfo, path = sys.argv[1], sys.argv[2]
seen = []

def traced(method):
    original = getattr(cjsession.Session, method)
    def wrapper(self, name, params=None, *args, **kw):
        start = time.perf_counter()
        try:
            return original(self, name, params, *args, **kw)
        finally:
            seen.append((name, params, (time.perf_counter() - start) * 1000, method))
    setattr(cjsession.Session, method, wrapper)

for method in ("rows", "values", "count", "send", "later"):
    traced(method)
with TestClient(create_app(Settings(conninfo=conninfo))) as client:
    client.get(path)
    seen.clear()
    start = time.perf_counter()
    client.get(path)
    page_ms = (time.perf_counter() - start) * 1000
calls = list(seen)
out = []
with psycopg.connect(conninfo, autocommit=True) as conn:
    calls.sort(key=lambda c: -c[2])
    for i, (name, params, ms, method) in enumerate(calls):
        query = cjsql.query(name)
        entry = {"query": name, "client_ms": round(ms, 2)}
        if i == 0:  # the slowest only: EXPLAIN ANALYZE runs it again
            try:
                entry["plan"] = [r[0] for r in conn.execute(
                    "EXPLAIN (ANALYZE, BUFFERS) " + query, params).fetchall()]
            except Exception as exc:
                entry["error"] = f"{type(exc).__name__}: {exc}"
        out.append(entry)
if out and "plan" in out[0]:
    out[0]["plan"] = out[0]["plan"][:80]
print(json.dumps({"page_ms": page_ms, "named queries": len(out),
                  "sql ms (sum of client times)": sum(q["client_ms"] for q in out),
                  "queries": out}))
'''


def trace_page(conninfo: str, path: str) -> dict[str, Any]:
    result = checked(benchlib.run([sys.executable, "-c", TRACE, conninfo, path],
                                  benchlib.clean_env()), f"trace {path}")
    traced: dict[str, Any] = json.loads(result.stdout.strip().splitlines()[-1])
    return traced


# -- 2. a held snapshot -------------------------------------------------------------------------

HOT = ("job_runs_queue", "job_attempts_queue")


def bench_storage_snapshot(ctx: Context) -> Section:  # noqa: PLR0915 - one timeline
    o, server = ctx.storage, ctx.server
    held, window = o["snapshot_minutes"] * 60, o["snapshot_window"]
    vacuum_every = o.get("snapshot_vacuum", 0.0)
    s = Section(
        "A held snapshot: throughput and dead rows of the hot tables",
        f"A database with {NOOP_DEFS} no-op handler definitions. 4 loops each run `cronjobs "
        "tick --in-process --concurrency 8 --max-runtime 30s` one after the other (a new "
        "tick as soon as the last exits), while a feeder keeps 10,000-20,000 manual runs "
        "queued (it tops the queue up with 10,000 whenever the queue's statistics count fewer "
        "than 10,000 live rows). After "
        f"a 20 s warm-up: a {window:.0f} s window before; then a REPEATABLE READ "
        "transaction reads job_runs (count(*)) and stays open, idle, for "
        f"{held / 60:g} min (the window during); it commits, and a {window:.0f} s window "
        "after. Throughput of a window = runs finished in it (finished_at, from job_runs) / "
        "its length. Dead rows: pg_stat_user_tables.n_dead_tup of job_runs_queue and "
        "job_attempts_queue (PostgreSQL 15 keeps these statistics in shared memory; a "
        "backend flushes its counts at most once a second and at exit, so a reading lags "
        "by a second or so; read in a new connection each time; pg_stat_force_next_flush "
        "is PostgreSQL 16), sampled every 30 s, with autovacuum's count of runs on them."
        + (f" Every {vacuum_every:.0f} s, each of the two with more than 2,000 dead rows is "
           "VACUUMed (what autovacuum would do with their own settings, the server's "
           "autovacuum being off or not); the count of these VACUUMs is reported."
           if vacuum_every else ""))
    appdir = handler_dir()
    db = server.cronjobs_database("st_snap")
    stop = threading.Event()
    threads: list[threading.Thread] = []
    errors: list[str] = []
    samples: list[dict[str, Any]] = []
    try:
        add_noop(server, db)
        sql(server, db, "VACUUM ANALYZE job_definitions")
        enqueue(server, db, 20_000, trigger="manual")
        system = Cronjobs(server, "in-process", appdir)
        argv = tick_argv("--in-process", "--concurrency", "8", "--max-runtime", "30s",
                         apps=["bench_noop_jobs"])
        env = system.env(db)

        def ticks() -> None:
            while not stop.is_set():
                r = benchlib.run(argv, env, timeout=300)
                if r.returncode != 0:
                    errors.append(r.stderr[-500:])
                    time.sleep(1)

        def feeder() -> None:
            # (the queue's live rows from its statistics, lagging a second or so: counting
            # the queued rows read the whole queue every half second, which a held
            # snapshot bloats, so the feeder's own cost grew during the hold)
            while not stop.is_set():
                try:
                    waiting = scalar(server, db, "SELECT n_live_tup FROM pg_stat_user_tables "
                                     "WHERE relname = 'job_runs_queue'")
                    if waiting < 10_000:
                        enqueue(server, db, 10_000, trigger="manual", vacuum=False)
                except psycopg.Error as exc:
                    errors.append(str(exc))
                stop.wait(0.5)

        vacuums: list[str] = []

        def vacuumer() -> None:  # (--snapshot-vacuum: autovacuum, as the tables ask for it)
            while not stop.wait(vacuum_every):
                with psycopg.connect(server.conninfo(db), autocommit=True) as conn:
                    for (rel,) in conn.execute(
                            "SELECT relname FROM pg_stat_user_tables WHERE relname = ANY(%s) "
                            "AND n_dead_tup > 2000", (list(HOT),)).fetchall():
                        conn.execute(f"VACUUM {rel}".encode())
                        vacuums.append(rel)

        threads = [threading.Thread(target=ticks) for _ in range(4)]
        threads.append(threading.Thread(target=feeder))
        if vacuum_every:
            threads.append(threading.Thread(target=vacuumer))
        for t in threads:
            t.start()
        time.sleep(20)

        def sample(phase: str) -> None:
            row = {"phase": phase, "at": db_clock(server).isoformat(timespec="seconds")}
            with psycopg.connect(server.conninfo(db), autocommit=True) as conn:
                for rel, dead, live, av in conn.execute(
                        "SELECT relname, n_dead_tup, n_live_tup, autovacuum_count "
                        "FROM pg_stat_user_tables WHERE relname = ANY(%s)", (list(HOT),)):
                    row[rel] = {"n_dead_tup": dead, "n_live_tup": live,
                                "autovacuum_count": av}
            samples.append(row)
            log(f"  {phase}: " + ", ".join(f"{r} dead {row[r]['n_dead_tup']:,}"
                                          for r in HOT if r in row))

        def phase(name: str, seconds: float) -> tuple[dt.datetime, dt.datetime]:
            begin = db_clock(server)
            end_at = time.monotonic() + seconds
            sample(f"{name} start")
            while time.monotonic() < end_at:
                time.sleep(min(30.0, max(0.0, end_at - time.monotonic())))
                sample(name)
            return begin, db_clock(server)

        windows = {"before": phase("before", window)}
        with psycopg.connect(server.conninfo(db)) as holder:
            holder.execute("BEGIN ISOLATION LEVEL REPEATABLE READ")
            holder.execute("SELECT count(*) FROM job_runs").fetchone()
            windows["during"] = phase("during", held)
            holder.execute("COMMIT")
        windows["after"] = phase("after", window)
    finally:
        stop.set()
        for t in threads:
            t.join(timeout=120)
        shutil.rmtree(appdir, ignore_errors=True)
    try:
        rates = {}
        for name, (a, b) in windows.items():
            done = scalar(server, db, "SELECT count(*) FROM job_runs WHERE trigger = 'manual' "
                          "AND status = 'succeeded' AND finished_at >= %s AND "
                          "finished_at < %s", (a, b))
            rates[name] = done / (b - a).total_seconds()
            s.figure(f"{name}: runs/s", "runs/s", [rates[name]])
        s.ratio("during / before", "during: runs/s", "before: runs/s")
        s.ratio("after / before", "after: runs/s", "before: runs/s")
        ratio = rates["during"] / rates["before"]
        s.target("held snapshot: throughput during / before >= 0.8", (ratio, ratio), ">=",
                 0.8, "x")
        for rel in HOT:
            for name in windows:
                vs = [x[rel]["n_dead_tup"] for x in samples
                      if x["phase"].startswith(name) and rel in x]
                if vs:
                    s.figure(f"{rel} n_dead_tup, {name} (max of samples)", "rows", [max(vs)])
        s.extra["samples"] = samples
        s.extra["server autovacuum settings"] = server.settings(
            ["autovacuum", "autovacuum_naptime", "autovacuum_max_workers"])
        s.extra["tick errors"] = errors[:5]
        if vacuum_every:
            s.extra["VACUUMs run (--snapshot-vacuum)"] = len(vacuums)
    finally:
        server.drop_database(db)
    return s


# -- 3. retirement ----------------------------------------------------------------------------


def bench_storage_retire(ctx: Context) -> Section:
    o, server = ctx.storage, ctx.server
    sizes, month_days, month_jobs = o["retire_sizes"], o["month_days"], o["month_jobs"]
    s = Section(
        "Retirement: dropping a day against DELETE, and a month of every-minute jobs",
        "A database with 100 no-op definitions. Per size N: three past retirement days "  # noqa: S608
        "(before today, UTC) made with cronjobs_add_history_day, each filled with N "
        "succeeded runs and their attempts (retire_at spread over the day), VACUUM "
        "ANALYZE; then (1) `SELECT cronjobs_drop_history_day(day)` on the first, timed "
        "from the client (one autocommit statement); (2) the same rows of the second "
        "deleted with DELETE (job_attempts then job_runs, WHERE retire_at in the day, one "
        "transaction); (3) the full upkeep, `cronjobs.core.retention.upkeep(store, "
        "now=now())` in this process, with the third day the only one expired (it keeps "
        "each job's latest success, then drops the day; the days ahead were made before). "
        "Baseline: the same upkeep again just after, with nothing left to do. Month: "
        f"{month_jobs} every-minute jobs, retention 7 days (succeeded and failed); for each "
        f"of {month_days} simulated days ending yesterday: the upkeep with now = the day's "
        "start (it makes the days ahead and drops the expired ones), then the day's runs "
        f"({month_jobs} x 1,440, finished through the day, retire_at = finished_at + 7 "
        "days, with attempts) inserted straight into the history; pg_database_size "
        "after each day.")
    db = server.cronjobs_database("st_retire")
    try:
        add_noop(server, db)
        _upkeep_timed(server, db)  # the days ahead made, as a first tick would
        today = utc_today(server)
        for i, size in enumerate(sizes):
            days = [today - dt.timedelta(days=400 - 5 * i - d) for d in range(3)]
            add_days(server, db, days)
            for day in days:
                start = dt.datetime.combine(day, dt.time(), dt.UTC)
                insert_history(server, db, count=size, start=start - dt.timedelta(days=14),
                               span=dt.timedelta(days=1) - dt.timedelta(seconds=1),
                               defs=NOOP_DEFS, offset=_noop_offset(server, db))
            sql(server, db, "VACUUM ANALYZE job_runs, job_attempts")
            with psycopg.connect(server.conninfo(db), autocommit=True) as conn:
                t = time.perf_counter()
                conn.execute("SELECT cronjobs_drop_history_day(%s)", (days[0],))
                drop = time.perf_counter() - t
                lo = dt.datetime.combine(days[1], dt.time(), dt.UTC)
                hi = lo + dt.timedelta(days=1)
                t = time.perf_counter()
                with conn.transaction():
                    conn.execute("DELETE FROM job_attempts WHERE retire_at >= %s AND "
                                 "retire_at < %s", (lo, hi))
                    conn.execute("DELETE FROM job_runs WHERE retire_at >= %s AND "
                                 "retire_at < %s", (lo, hi))
                delete = time.perf_counter() - t
                conn.execute("SELECT cronjobs_drop_history_day(%s)", (days[1],))
            empty_upkeep, full_upkeep, did = _upkeep_timed(server, db)
            log(f"  {size:,} runs: drop {drop * 1000:.0f} ms, DELETE {delete * 1000:.0f} ms, "
                f"upkeep {full_upkeep * 1000:.0f} ms ({did})")
            s.figure(f"{size:,} runs a day: cronjobs_drop_history_day", "s", [drop])
            s.figure(f"{size:,} runs a day: DELETE of the same rows", "s", [delete])
            s.figure(f"{size:,} runs a day: upkeep dropping the day", "s", [full_upkeep])
            s.figure(f"{size:,} runs a day: upkeep with nothing expired", "s", [empty_upkeep])
            s.ratio(f"{size:,} runs: DELETE / drop",
                    f"{size:,} runs a day: DELETE of the same rows",
                    f"{size:,} runs a day: cronjobs_drop_history_day")
            s.extra[f"{size:,} runs: what the upkeep did"] = did
            for what in ("cronjobs_drop_history_day", "upkeep dropping the day"):
                f = s.figures[f"{size:,} runs a day: {what}"]
                s.target(f"{what}, {size:,} runs a day: <= 1 s", (f["min"], f["median"]),
                         "<=", 1.0, "s")
    finally:
        server.drop_database(db)
    if month_days:
        _month(ctx, s)
    return s


def _noop_offset(server: Server, db: str) -> int:
    return int(scalar(server, db, "SELECT min(id) - 1 FROM job_definitions "
                      "WHERE name LIKE 'noop-%%'"))


def _upkeep_timed(server: Server, db: str) -> tuple[float, float, str]:
    """(the upkeep again with nothing left to do, the upkeep now, what it did)."""
    from cronjobs.core.retention import upkeep  # noqa: PLC0415 - only here
    from cronjobs.db.store import Store  # noqa: PLC0415

    with psycopg.connect(server.conninfo(db), autocommit=True) as conn:
        store = Store(conn)
        t = time.perf_counter()
        report = upkeep(store, now=db_clock(server))
        full = time.perf_counter() - t
        # again: nothing left to do (the baseline)
        t = time.perf_counter()
        upkeep(store, now=db_clock(server))
        empty = time.perf_counter() - t
    return empty, full, (f"dropped {report.dropped} day(s), kept {report.kept} runs, "
                         f"made {report.created} day(s)")


def _month(ctx: Context, s: Section) -> None:
    from cronjobs.core.retention import upkeep  # noqa: PLC0415 - only here
    from cronjobs.db.store import Store  # noqa: PLC0415

    o, server = ctx.storage, ctx.server
    days, jobs = o["month_days"], o["month_jobs"]
    db = server.cronjobs_database("st_month")
    sizes: list[dict[str, Any]] = []
    try:
        add_noop(server, db, count=jobs, schedule="* * * * *", prefix="minutely-")
        sql(server, db, "UPDATE cronjobs_retention SET succeeded = '7 days', "
            "failed = '7 days'")
        offset = int(scalar(server, db, "SELECT min(id) - 1 FROM job_definitions"))
        today = utc_today(server)
        with psycopg.connect(server.conninfo(db), autocommit=True) as conn:
            store = Store(conn)
            for d in range(days):
                day = today - dt.timedelta(days=days - d)
                start = dt.datetime.combine(day, dt.time(), dt.UTC)
                t = time.perf_counter()
                report = upkeep(store, now=start, batches=10)
                spent = time.perf_counter() - t
                insert_history(server, db, count=jobs * 1440, start=start,
                               span=dt.timedelta(days=1), defs=jobs, offset=offset,
                               keep_ok=dt.timedelta(days=7), keep_failed=dt.timedelta(days=7))
                row = conn.execute("""
                    SELECT pg_database_size(current_database()),
                           (SELECT count(*) FROM job_runs),
                           (SELECT count(*) FROM pg_inherits i
                              JOIN pg_class c ON c.oid = i.inhrelid
                             WHERE i.inhparent = 'job_runs_history'::regclass)""").fetchone()
                assert row is not None  # noqa: S101 - one row, always
                sizes.append({"day": d + 1, "date": day.isoformat(),
                              "database_mb": round(row[0] / 2**20, 1), "runs": row[1],
                              "history_partitions": row[2], "upkeep_s": round(spent, 3),
                              "dropped": report.dropped})
                log(f"  day {d + 1}/{days} ({day}): {row[0] / 2**20:,.0f} MB, "
                    f"{row[1]:,} runs, upkeep {spent:.2f} s, dropped {report.dropped}")
    finally:
        server.drop_database(db)
    s.extra["month: size per simulated day"] = sizes
    if len(sizes) >= 15:
        last = [x["database_mb"] for x in sizes[-7:]]
        mid = [x["database_mb"] for x in sizes[-14:-7]]
        s.figure("month: database size, mean of the last 7 days", "MB", last)
        s.figure("month: database size, mean of the 7 days before", "MB", mid)
        s.ratio("month: last week / the week before", "month: database size, mean of the "
                "last 7 days", "month: database size, mean of the 7 days before")
    s.figure("month: upkeep per simulated day", "s", [x["upkeep_s"] for x in sizes])
    plot = o.get("plot")
    if plot:
        plot_month(sizes, Path(plot), jobs)


def plot_month(sizes: list[dict[str, Any]], out: Path, jobs: int) -> None:
    import matplotlib  # noqa: PLC0415 - imported only to plot

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt  # noqa: PLC0415

    fig, ax = plt.subplots(figsize=(8, 4.2))
    xs = [x["day"] for x in sizes]
    ax.plot(xs, [x["database_mb"] for x in sizes], marker="o", label="pg_database_size (MB)")
    ax.set_xlabel("simulated day")
    ax.set_ylabel("MB")
    ax.grid(True, alpha=0.3)
    ax2 = ax.twinx()
    ax2.plot(xs, [x["runs"] / 1e6 for x in sizes], color="tab:orange", linestyle="--",
             label="runs in job_runs (millions)")
    ax2.set_ylabel("runs (millions)")
    lines = ax.get_legend_handles_labels()[0] + ax2.get_legend_handles_labels()[0]
    ax.legend(lines, [str(line.get_label()) for line in lines], loc="lower right", fontsize=8)
    ax.set_title(f"{jobs} every-minute jobs, 7-day retention: the database levels off",
                 fontsize=10)
    fig.tight_layout()
    out.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(out, dpi=110)
    plt.close(fig)


# -- 4. write cost per run ------------------------------------------------------------------------

WAL = """
SELECT coalesce(sum(record_length), 0), coalesce(sum(fpi_length), 0), count(*),
       count(*) FILTER (WHERE resource_manager = 'Btree'
                        AND record_type IN ('INSERT_LEAF', 'INSERT_POST')),
       count(*) FILTER (WHERE resource_manager IN ('Heap', 'Heap2'))
FROM pg_get_wal_records_info(%s, %s)
WHERE block_ref LIKE %s
"""

INDEX_ESTIMATE = """
SELECT coalesce(sum((t.n_tup_ins + t.n_tup_upd - t.n_tup_hot_upd)
                    * (SELECT count(*) FROM pg_index i WHERE i.indrelid = t.relid)), 0)
FROM pg_stat_user_tables AS t
"""


@dataclass
class Cost:
    runs: int
    span: float
    wal: int  # LSN difference over the drain (the whole server: other tenants included)
    db_wal: int | None  # WAL records touching the drain's database (pg_walinspect)
    db_fpi: int | None  # of which full-page images
    records: int | None
    index_inserts: int | None  # B-tree leaf insert records of the database
    heap_records: int | None
    index_estimate: int  # sum over tables of (inserts + non-HOT updates) x its indexes


def bench_storage_write(ctx: Context) -> Section:
    server, n, queued = ctx.server, ctx.repeats("storage_write"), ctx.storage["queued"]
    ref = ctx.storage["before_ref"]
    s = Section(
        "Write cost per run, and runs/s: before, after, pgqueuer, the hand loop",
        f"{queued:,} queued no-op jobs drained by K = "
        f"{', '.join(map(str, ctx.compare_processes))} processes, each drain on a fresh "
        "database cloned from its system's template (as the engine benchmark: engine.py), "
        "the systems one after the other, in reverse order every other repetition: "
        "cronjobs after (this tree) and before (git ref "
        f"`{ref}`, installed into a virtual environment of its own as engine_compare does) "
        "with `cronjobs tick --in-process` (no flag: `--concurrency auto`, the default) "
        "and `--concurrency 64`, pgqueuer (asyncpg + uvloop, "
        "batch 10) and the hand loop (claim 10, finish the batch in one statement). WAL: "
        "pg_current_wal_lsn() difference over the drain (the whole server, other tenants "
        "included), and the WAL records whose block references name the drain's database "
        "(pg_walinspect.pg_get_wal_records_info over the same LSN range: exact per "
        "database, but without the commit records, which name no block), with the bytes "
        "of full-page images among them (they depend on when the last checkpoint was). "
        "Index entries written: B-tree leaf insert records (INSERT_LEAF, INSERT_POST) of "
        "the database in that WAL, i.e. one per index tuple written; and, as a check, an "
        "estimate from pg_stat_user_tables: per table, (n_tup_ins + n_tup_upd - "
        "n_tup_hot_upd) x its number of indexes (an upper bound: a partial index skips "
        "rows outside its predicate). All per job done.")
    appdir = handler_dir()
    tmp = Path(tempfile.mkdtemp(prefix="cjbench-before-"))
    inspect_db = server.create_database("st_walinspect")
    try:
        sql(server, inspect_db, "CREATE EXTENSION IF NOT EXISTS pg_walinspect")
        commit = git("rev-parse", "--verify", f"{ref}^{{commit}}")
        export(commit, tmp / "src")
        before = install("before", f"{ref} ({commit[:10]})", tmp / "src", tmp / "venv")
        s.extra["versions"] = {"before": before.describe(), "after": Version(
            "after", "this tree", sys.executable).describe()}
        systems: list[System] = [
            Cronjobs(server, "in-process-auto", appdir, tag="after"),
            Cronjobs(server, "in-process-64", appdir, tag="after"),
            Cronjobs(server, "in-process-auto", appdir, cli=before.cli, tag="before"),
            Cronjobs(server, "in-process-64", appdir, cli=before.cli, tag="before"),
            PgQueuer(server), HandLoop(server)]
        costs: dict[tuple[str, int], list[Cost]] = {}
        for rep in range(n):
            for k in ctx.compare_processes:
                for system in systems[::-1] if rep % 2 else systems:
                    c = _costed_drain(server, inspect_db, system, queued, k)
                    if c.runs != queued:
                        raise RuntimeError(f"{system.label}: {c.runs} of {queued} done")
                    costs.setdefault((system.key, k), []).append(c)
                    log(f"  [{rep + 1}/{n}] K={k} {system.label}: {c.runs / c.span:,.0f} "
                        f"runs/s, WAL {(c.db_wal or 0) / c.runs:,.0f} B/run (database), "
                        f"{(c.index_inserts or 0) / c.runs:.1f} index entries/run")
    finally:
        shutil.rmtree(appdir, ignore_errors=True)
        shutil.rmtree(tmp, ignore_errors=True)
        server.drop_database(inspect_db)
    s.extra["systems"] = {x.key: x.label for x in systems}
    for (key, k), cs in costs.items():
        name = f"{key} x{k}"
        s.figure(f"{name}: runs/s", "runs/s", [c.runs / c.span for c in cs])
        s.figure(f"{name}: WAL bytes/run (server LSN diff)", "B", [c.wal / c.runs for c in cs])
        if all(c.db_wal is not None for c in cs):
            s.figure(f"{name}: WAL bytes/run (its database)", "B",
                     [(c.db_wal or 0) / c.runs for c in cs])
            s.figure(f"{name}: WAL bytes/run without full-page images", "B",
                     [((c.db_wal or 0) - (c.db_fpi or 0)) / c.runs for c in cs])
            s.figure(f"{name}: WAL records/run", "", [(c.records or 0) / c.runs for c in cs])
            s.figure(f"{name}: index entries/run (B-tree leaf inserts)", "",
                     [(c.index_inserts or 0) / c.runs for c in cs])
            s.figure(f"{name}: heap records/run", "",
                     [(c.heap_records or 0) / c.runs for c in cs])
        s.figure(f"{name}: index entries/run (estimate from table statistics)", "",
                 [c.index_estimate / c.runs for c in cs])
        if key != "pgqueuer":
            s.figure(f"{name}: runs/s / pgqueuer", "x", [
                (c.runs / c.span) / (p.runs / p.span)
                for c, p in zip(cs, costs[("pgqueuer", k)], strict=True)])
    for mode in ("in_process_auto", "in_process_64"):
        for k in ctx.compare_processes:
            key = f"cj_{mode}_after x{k}"
            for what, unit in (("WAL bytes/run without full-page images", "B"),
                               ("index entries/run (B-tree leaf inserts)", "")):
                mine, theirs = s.figures.get(f"{key}: {what}"), s.figures.get(
                    f"pgqueuer x{k}: {what}")
                if mine and theirs:
                    s.figure(f"{key}: {what} / pgqueuer", "x",
                             [mine["median"] / theirs["median"]])
                    s.target(f"{what}, after ({mode}, K={k}) <= pgqueuer's",
                             (mine["min"], mine["median"]), "<=", theirs["median"], unit)
            r = s.figures.get(f"{key}: runs/s / pgqueuer")
            if r:
                s.target(f"runs/s, after ({mode}, K={k}) >= 1.3 x pgqueuer",
                         (r["min"], r["median"]), ">=", 1.3, "x")
            b = s.figures.get(f"cj_{mode}_before x{k}: runs/s")
            a = s.figures.get(f"{key}: runs/s")
            if a and b:
                s.figure(f"{key}: runs/s after / before", "x", [
                    (x.runs / x.span) / (y.runs / y.span) for x, y in zip(
                        costs[(f"cj_{mode}_after", k)], costs[(f"cj_{mode}_before", k)],
                        strict=True)])
    return s


def _costed_drain(server: Server, inspect_db: str, system: System, count: int,
                  k: int) -> Cost:
    db = server.create_database(f"st_w_{system.key}", template=system.template())
    try:
        system.enqueue(db, count)
        if scalar(server, db, "SELECT to_regprocedure('cronjobs_add_history_day(date)') "
                  "IS NOT NULL") in (True, "t"):
            # a history whose days are made, as a tick of the day before made them: in a
            # fresh database, a drain's runs would all go to the default partition first
            # and move when the day is made (writing them twice)
            scalar(server, db, "SELECT count(cronjobs_add_history_day(d::date)) FROM ("
                   "SELECT generate_series(now() + interval '13 days', now() + interval "
                   "'18 days', interval '1 day') AS d UNION ALL SELECT generate_series(now() "
                   "+ interval '89 days', now() + interval '94 days', interval '1 day')) AS x")
        oid = scalar(server, db, "SELECT oid FROM pg_database WHERE datname = "
                     "current_database()")
        benchlib.counters(server, db)  # the set-up's backends gone
        est0 = int(scalar(server, db, INDEX_ESTIMATE))
        with psycopg.connect(server.conninfo(inspect_db), autocommit=True) as conn:
            # a temporary slot (gone with this session) keeps the drain's WAL from being
            # recycled before it is read (a shared server writes WAL of its own)
            conn.execute("SELECT pg_create_physical_replication_slot(%s, true, true)",
                         (f"cjbench_wal_{uuid.uuid4().hex[:8]}",))
            lsn0 = conn.execute("SELECT pg_current_wal_flush_lsn()").fetchone()[0]  # type: ignore[index]
            _, results = benchlib.run_together([system.argv()] * k, system.env(db))
            for r in results:
                checked(r, system.label)
            benchlib.counters(server, db)  # the workers' backends gone: statistics flushed
            lsn1, wal = conn.execute("SELECT pg_current_wal_flush_lsn(), "
                                     "pg_current_wal_flush_lsn() - %s::pg_lsn",
                                     (lsn0,)).fetchone() or (None, 0)
            try:
                row = conn.execute(WAL, (lsn0, lsn1, f"%/{oid}/%")).fetchone()
            except psycopg.Error as exc:
                log(f"    pg_walinspect: {exc}")
                row = None
        time.sleep(0.6)  # the statistics of the workers' last transactions
        est1 = int(scalar(server, db, INDEX_ESTIMATE))
        done, span = system.result(db)
    finally:
        server.drop_database(db)
    return Cost(done, span, int(wal), *(row if row else (None,) * 5), est1 - est0)


# -- 5. the verdict at scale ------------------------------------------------------------------

# The states of storage_scale's definitions the verdict is asked about: what each sets on the
# job-* definitions (not due before next year: "0 0 1 1 *", next_due_at next year).
VERDICT_STATES = {
    # the cursor where it was defined: no slot came since
    "on time": "UPDATE job_definitions SET cursor_at = created_at",
    # the cursor moved since they were defined and none succeeded (what storage_scale's
    # materialisation leaves): each may have a problem until its schedule says not
    "slot come, none due yet": "UPDATE job_definitions SET cursor_at = now()",
    # defined a year and a day ago, the cursor moved, never succeeded: every job overdue
    "every job overdue": "UPDATE job_definitions SET created_at = now() - interval '367 days', "
                         "schedule_since = now() - interval '367 days', cursor_at = now()",
}


def bench_storage_verdict(ctx: Context) -> Section:
    server, jobs, requests = ctx.server, ctx.storage["jobs"], ctx.storage["requests"]
    ref = ctx.storage["verdict_ref"]
    n = ctx.repeats("storage_verdict")
    s = Section(
        "The verdict at scale: /healthz and /metrics, before and after",
        f"{jobs:,} shell-command definitions as storage_scale makes them (add_jobs: "
        "`0 0 1 1 *`, not due before next year), a tick recorded, in three states: "
        + "; ".join(f"{k}: `{v}`" for k, v in VERDICT_STATES.items())
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
        for state, update in VERDICT_STATES.items():
            dbs = {}
            for name, cli in versions.items():
                db = server.cronjobs_database(f"st_v_{name}", cli=cli)
                add_jobs(server, db, count=jobs)
                sql(server, db, "INSERT INTO job_ticks (worker, tick_at, started_at, "
                    "finished_at, status) VALUES ('bench', now(), now(), now(), 'finished')")
                sql(server, db, update)
                sql(server, db, "VACUUM ANALYZE")
                dbs[name] = db
            for rep in range(n):
                order = list(dbs.items())
                for name, db in order[::-1] if rep % 2 else order:
                    # a tick just now (else "no tick for ..." after a few slow minutes)
                    sql(server, db, "UPDATE job_ticks SET tick_at = now(), "
                        "started_at = now(), finished_at = now()")
                    with serving(server.conninfo(db), versions[name]) as base:
                        for path in ("/healthz", "/metrics"):
                            count = max(5, requests // 5) if path == "/metrics" else requests
                            times = _timed_fetches(base + path, count)
                            p95 = benchlib.percentile(times, 95)
                            p95s.setdefault((state, path, name), []).append(p95)
                            log(f"  [{rep + 1}/{n}] {state}, {name}: {path} p95 {p95:.0f} ms")
            for db in dbs.values():
                server.drop_database(db)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    for (state, path, name), values in p95s.items():
        s.figure(f"{state}: {path} p95, {name}", "ms", values)
    for state in VERDICT_STATES:
        for path, limit in PAGE_LIMITS.items():
            after, prior = p95s[(state, path, "after")], p95s[(state, path, "before")]
            s.figure(f"{state}: {path} p95 after / before", "x",
                     [a / max(b, 1e-9) for a, b in zip(after, prior, strict=True)])
            s.target(f"{state}: {path} p95 <= {limit:.0f} ms (after)",
                     (min(after), sorted(after)[len(after) // 2]), "<=", limit, "ms")
    return s


BENCHMARKS = {"storage_scale": bench_storage_scale, "storage_snapshot": bench_storage_snapshot,
              "storage_retire": bench_storage_retire, "storage_write": bench_storage_write,
              "storage_verdict": bench_storage_verdict}
GROUPS = {"storage": tuple(BENCHMARKS)}


# -- the Markdown tables ------------------------------------------------------------------------


def _num(value: float, unit: str) -> str:
    if unit == "s":
        return f"{value * 1000:,.0f} ms" if value < 10 else f"{value:,.1f} s"
    if unit == "x":
        return f"{value:.2f}\u00d7"
    if unit in ("runs/s", "rows", "B", "MB", "ms"):
        return f"{value:,.0f} {unit}" if unit != "ms" or value >= 10 else f"{value:.1f} ms"
    return f"{value:,.1f}"


def markdown(results: dict[str, Any]) -> str:
    """The storage sections of a run's JSON as Markdown tables (figures min / median,
    targets met or not)."""
    out: list[str] = []
    for name in BENCHMARKS:
        section = results["sections"].get(name)
        if section is None:
            continue
        out.append(f"### {section.get('title', name)}\n")
        if "error" in section:
            out.append(f"ERROR: {section['error']}\n")
            continue
        out.append(f"{section['method']}\n")
        out.append("| figure | min | median |\n|---|---|---|")
        for fig, v in section["figures"].items():
            if fig.startswith("page ") and ": p95" not in fig:
                continue  # every request's time: the p95 rows below say it
            out.append(f"| {fig} | {_num(v['min'], v['unit'])} | "
                       f"{_num(v['median'], v['unit'])} |")
        for r in section["ratios"]:
            out.append(f"| {r['name']} | {r['min']:.2f}\u00d7 | {r['median']:.2f}\u00d7 |")
        out.append("")
        if section["targets"]:
            out.append("| target | measured (min / median) | verdict |\n|---|---|---|")
            for t in section["targets"]:
                word = t["verdict"] if t["verdict"] == "met" else f"**{t['verdict']}**"
                out.append(f"| {t['text']} | {_num(t['measured_min'], t['unit'])} / "
                           f"{_num(t['measured'], t['unit'])} | {word} |")
            out.append("")
    return "\n".join(out) + "\n"


if __name__ == "__main__":
    print(markdown(json.loads(Path(sys.argv[1]).read_text())), end="")
