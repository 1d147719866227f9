"""``--only auto_sizing`` (issue 28): the tick's default concurrency (``auto``) against the
old default (4 handler threads), 64 threads and pgqueuer, in one run.

    python bench/run.py --only auto_sizing --database-url URL --repeat 3

Two parts, each interleaved so that a noisy moment of a shared machine hits every variant:

- drains: the engine benchmark's drains (engine.py) of ``--queued`` no-op handler jobs by
  K = 1 and 4 processes, `cronjobs tick --in-process` with `--concurrency 4`, without the
  flag (auto), with `--concurrency 64`, and pgqueuer (asyncpg + uvloop, batch 10); the
  variants alternate drain by drain, in reverse order every other repetition;
- due at once: engine.py's `due_at_once` (``--due`` jobs due in one minute, ``--due-ticks``
  ticks started together) with the three cronjobs variants, alternating likewise.
"""

from __future__ import annotations

import datetime as dt
import json
import shutil
import time
from collections.abc import Sequence
from typing import Any

import benchlib
import psycopg
from benchlib import log
from common import Context, Section, db_clock, scalar, sql
from engine import (
    Cronjobs,
    PgQueuer,
    System,
    drain_figures,
    drain_series,
    due_once,
    handler_dir,
    paired,
)
from history import insert_history

from cronjobs.db import sql as cjsql

VARIANTS = ("in-process-4", "in-process-auto", "in-process-64")  # old default, new, wide
NAMES = {"in-process-4": "old default (4 threads)", "in-process-auto": "auto (no flag)",
         "in-process-64": "64 threads"}


def bench_auto_sizing(ctx: Context) -> Section:
    n, ks = ctx.repeats("auto_sizing"), ctx.compare_processes
    s = Section(
        "Default concurrency: auto against the old default, 64 threads and pgqueuer",
        f"Drains: {ctx.queued:,} queued no-op handler jobs drained by K = "
        f"{', '.join(map(str, ks))} processes started together, each drain on a fresh "
        "database (engine.py's drains): `cronjobs tick --in-process --max-runtime 10m` with "
        "`--concurrency 4` (the old default), without --concurrency (auto, the new default) "
        "and with `--concurrency 64`, and pgqueuer as `pgq run` ships it (asyncpg, uvloop, "
        "batch 10). The four alternate drain by drain, in reverse order every other "
        "repetition; x pgqueuer = runs/s over pgqueuer's in the same repetition and K, then "
        f"min / median. Due at once: {ctx.due:,} definitions `* * * * *` due in the same "
        f"minute, {ctx.due_ticks} `cronjobs tick --in-process --max-runtime 10m` started "
        "together at t0 (engine.py's due_at_once), with each of the three concurrencies, "
        "alternating; lateness = started_at - t0; \"last tick started\" = the latest "
        "job_ticks.started_at - t0 (the ticks' start-up and connection, before any work).")
    appdir = handler_dir()
    cronjobs = [Cronjobs(ctx.server, mode, appdir) for mode in VARIANTS]
    systems: list[System] = [*cronjobs, PgQueuer(ctx.server)]
    try:
        drains = drain_series(systems, ks, n, lambda _: ctx.queued, alternate=True)
        late = due_series(ctx, cronjobs, n)
    finally:
        shutil.rmtree(appdir, ignore_errors=True)
    for (key, k), ds in drains.items():
        drain_figures(s, f"{key} x{k}", ds)
        if key != "pgqueuer":
            s.figure(f"{key} x{k} / pgqueuer x{k}", "x", paired(ds, drains[("pgqueuer", k)]))
            s.figure(f"{key} x{k} / in-process-4 x{k}", "x",
                     paired(ds, drains[("cj_in_process_4", k)]))
    for name, values in late.items():
        s.figure(name, "s", values)
    for k in ks:
        r = s.figures.get(f"cj_in_process_auto x{k} / pgqueuer x{k}")
        if r:
            s.target(f"auto (no flag) >= 1.0 x pgqueuer at K={k}", (r["min"], r["median"]),
                     ">=", 1.0, "x")
    p99 = s.figures.get("cj_in_process_auto: lateness p99")
    if p99:
        s.target(f"auto (no flag), {ctx.due:,} due at once, {ctx.due_ticks} ticks: "
                 "lateness p99 <= 2 s", (p99["min"], p99["median"]), "<=", 2.0, "s")
    s.extra["variants"] = {x.key: NAMES[x.mode] for x in cronjobs} | {
        "pgqueuer": "pgqueuer (asyncpg + uvloop, batch 10)"}
    s.extra["processes"] = list(ks)
    s.extra["table"] = table(s, ks)
    return s


def due_series(ctx: Context, variants: Sequence[Cronjobs], n: int) -> dict[str, list[float]]:
    """``n`` repetitions of due_at_once with each variant, alternating."""
    figures: dict[str, list[float]] = {}
    empty_db = ctx.server.create_database("due_empty", template=variants[0].template())
    try:
        for rep in range(n):
            order = list(reversed(variants)) if rep % 2 else list(variants)
            for variant in order:
                log(f"  [{rep + 1}/{n}] due at once, {NAMES[variant.mode]}")
                late, finish, _, _, started = due_once(ctx, variant, variant.argv(),
                                                       empty_db)
                for q in (50, 99):
                    figures.setdefault(f"{variant.key}: lateness p{q}", []).append(
                        benchlib.percentile(late, q))
                # what the machine took to start the ticks, and the lateness after it
                figures.setdefault(f"{variant.key}: last tick started", []).append(started)
                figures.setdefault(f"{variant.key}: lateness p99 - last tick started",
                                   []).append(benchlib.percentile(late, 99) - started)
                figures.setdefault(f"{variant.key}: lateness max", []).append(max(late))
                figures.setdefault(f"{variant.key}: makespan", []).append(finish)
                log(f"    p99 {figures[f'{variant.key}: lateness p99'][-1]:.2f} s")
    finally:
        ctx.server.drop_database(empty_db)
    return figures


def table(s: Section, ks: Sequence[int]) -> str:
    """The Markdown table of docs/explanation/concurrency.md: runs/s and x pgqueuer per K
    (median, min in brackets), and the lateness p99 of the due-at-once series."""
    f = s.figures

    def both(name: str, unit: str = "") -> str:
        if name not in f:
            return "-"
        fmt = "{:,.2f}" if unit in {"x", "s"} else "{:,.0f}"
        return f"{fmt.format(f[name]['median'])}{unit} ({fmt.format(f[name]['min'])})"

    head = ["variant", *(f"runs/s K={k}" for k in ks), *(f"x pgqueuer K={k}" for k in ks),
            "p99 lateness, due at once"]
    rows = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for key, label in [*((f"cj_{m.replace('-', '_')}", NAMES[m]) for m in VARIANTS),
                       ("pgqueuer", "pgqueuer (asyncpg, batch 10)")]:
        cells = [label, *(both(f"{key} x{k}: runs/s") for k in ks),
                 *("1.00x" if key == "pgqueuer" else both(f"{key} x{k} / pgqueuer x{k}", "x")
                   for k in ks), both(f"{key}: lateness p99", "s")]
        rows.append("| " + " | ".join(cells) + " |")
    return "\n".join(rows)


def bench_auto_due(ctx: Context) -> Section:
    """The due-at-once half of auto_sizing alone (a quicker look at lateness)."""
    s = Section("Default concurrency: due at once",
                f"{ctx.due:,} jobs due in one minute, {ctx.due_ticks} ticks, as auto_sizing.")
    appdir = handler_dir()
    try:
        late = due_series(ctx, [Cronjobs(ctx.server, m, appdir) for m in VARIANTS],
                          ctx.repeats("auto_sizing"))
    finally:
        shutil.rmtree(appdir, ignore_errors=True)
    for name, values in late.items():
        s.figure(name, "s", values)
    return s


def bench_lateness_query(ctx: Context) -> Section:
    """What start lateness costs `status`, /metrics and the dashboard with a long history."""
    per_day, days = LATENESS_RUNS_PER_DAY, LATENESS_DAYS
    s = Section(
        "Start lateness: the query's cost with a long history",
        f"100 handler definitions; {per_day:,} finished runs a day over the last {days} days "
        f"({per_day * days:,} runs, as 100 jobs every minute kept {days} days), finished "
        "by the product's own claim and finish at pinned instants (history.py: into the "
        "history's day partitions, by retirement day), then VACUUM ANALYZE. The named "
        "query start_lateness (p50 / p99 over the last hour and day), run from a fresh "
        "connection's second execution on; ms = client round trip, min / median of "
        f"{LATENESS_CALLS} calls; the plan's buffers from EXPLAIN (ANALYZE, BUFFERS).")
    appdir = handler_dir()
    system = Cronjobs(ctx.server, "in-process", appdir)
    db = ctx.server.create_database("late_query", template=system.template())
    try:
        # the history's day partitions of the runs' retirement days (a tick makes those of
        # the days ahead; these runs finished in the past 14 days)
        sql(ctx.server, db, """
            SELECT cronjobs_add_history_day(d::date)
            FROM generate_series(now() - interval '1 day', now() + %(days)s * interval '1 day',
                                 interval '1 day') AS d""", {"days": days + 15})
        offset = int(scalar(ctx.server, db, "SELECT min(id) - 1 FROM job_definitions "
                            "WHERE name LIKE 'noop-%%'"))
        now = db_clock(ctx.server)
        insert_history(ctx.server, db, count=per_day * days, start=now - dt.timedelta(days=days),
                       span=dt.timedelta(days=days), defs=100, offset=offset)
        sql(ctx.server, db, "VACUUM ANALYZE")
        query = cjsql.query("start_lateness")
        times: list[float] = []
        with psycopg.connect(ctx.server.conninfo(db), autocommit=True) as conn:
            for _ in range(LATENESS_CALLS + 1):
                params = late_params(conn)
                t = time.perf_counter()
                row = conn.execute(query, params).fetchone()
                times.append(1000 * (time.perf_counter() - t))
            plan = conn.execute(b"EXPLAIN (ANALYZE, BUFFERS, FORMAT JSON) " + query.encode(),
                                late_params(conn)).fetchone()
    finally:
        ctx.server.drop_database(db)
        shutil.rmtree(appdir, ignore_errors=True)
    s.figure("start_lateness: ms per call", "ms", times[1:])
    if row is None or plan is None:
        raise RuntimeError("start_lateness answered nothing")
    doc = plan[0] if isinstance(plan[0], list) else json.loads(plan[0])
    top = doc[0]["Plan"]
    s.extra["runs in the last day / hour"] = f"{row[3]:,} / {row[0]:,}"
    s.extra["shared buffers hit / read"] = (f"{top.get('Shared Hit Blocks', 0):,} / "
                                            f"{top.get('Shared Read Blocks', 0):,}")
    s.extra["indexes read"] = ", ".join(sorted(index_names(top)))
    s.extra["history runs"] = per_day * days
    return s


LATENESS_RUNS_PER_DAY = 144_000
LATENESS_DAYS = 14
LATENESS_CALLS = 7


def late_params(conn: psycopg.Connection[Any]) -> dict[str, Any]:
    (now,) = conn.execute("SELECT now()").fetchone() or (None,)
    return {"now": now, "hour": now - dt.timedelta(hours=1), "day": now - dt.timedelta(days=1)}


def index_names(plan: dict[str, Any]) -> set[str]:
    names = {plan["Index Name"]} if "Index Name" in plan else set()
    for child in plan.get("Plans", []):
        names |= index_names(child)
    return names


BENCHMARKS = {"auto_sizing": bench_auto_sizing, "auto_due": bench_auto_due,
              "lateness_query": bench_lateness_query}
