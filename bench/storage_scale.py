"""``--only storage_scale``: 100,000 definitions and 10,000,000 finished runs
(``--storage-jobs``, ``--storage-history``) against the same database without the history:
drains of queued no-op runs, 100,000 definitions due in one tick, every dashboard page's
p95 (``--storage-parts``; ``--storage-dashboard-ref``: the pages also served by older code).
"""

from __future__ import annotations

import contextlib
import datetime as dt
import random
import shutil
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import benchlib
from benchlib import Server, log
from common import Context, Section, checked, cli_env, db_clock, scalar, sql, tick_argv
from engine import Cronjobs, handler_dir
from history import insert_history
from pages import ERRORS, PAGE_LIMITS, PAGE_TIMEOUT, serving, timed_fetches, trace_page
from storage_seed import NOOP_DEFS, add_days, add_jobs, add_noop, drained, enqueue, utc_today
from versions import Version, export, git, install

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
        "with its attempt) seeded by the product's own statements (history.py: inserted, "
        "claimed and finished in batches at pinned instants, so the finish moves them to "
        "the history and keeps them 14 days, a dead one 90): finished evenly over the "
        "last 13.9 days, 1 in 50 dead (acknowledged), 1 in 10 runs of one busy job "
        "(job-000001), the rest round-robin over the definitions; then VACUUM ANALYZE. "
        "(a) Drains: "
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
                times = timed_fetches(base + path, n)
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


