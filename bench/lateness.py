"""Benchmark 5, ``--only lateness``: 1,000 runs due at the same minute, four ticks started
together: how late each run starts."""

from __future__ import annotations

import datetime as dt

import benchlib
from common import (
    Context,
    Section,
    add_definitions,
    checked,
    clear_history,
    cli_env,
    db_clock,
    minute_start,
    sql,
    tick_argv,
)


def bench_lateness(ctx: Context) -> Section:
    s = Section(
        "Lateness",
        "1,000 definitions `* * * * *` (no-op shell command `true`, overlap skip) whose "
        "cursor is 30 s before the current minute, so each has that minute's slot due. Four "
        "`cronjobs tick --concurrency 8 --max-runtime 10m` are started together at t0 (read "
        "from the database clock just before). Lateness of a run = started_at - t0, i.e. "
        "(started_at - slot) as if the ticks had been started exactly at the minute boundary, "
        "as cron starts them. Baseline: the wall time of four empty ticks started together "
        "(the time the tick processes need just to start, connect and exit).")
    server, n = ctx.server, ctx.repeats("lateness")
    lateness: list[float] = []
    p50s, p99s, maxes, walls, empties = [], [], [], [], []
    ticks_info = []
    with server.database("lateness") as db, server.database("lateness_empty") as empty_db:
        sql(server, db, """
            INSERT INTO job_definitions (name, schedule, kind, command, cursor_at, next_due_at)
            SELECT 'every-minute-' || g, '* * * * *', 'command', 'true', now(), now()
            FROM generate_series(1, 1000) AS g""")
        add_definitions(server, empty_db, prefix="idle-", count=100)
        argv = tick_argv("--concurrency", "8", "--max-runtime", "10m")
        for _ in range(n):
            clear_history(server, db)
            minute = minute_start(server, latest_second=40)
            sql(server, db, "UPDATE job_definitions SET cursor_at = %s, next_due_at = %s",
                (minute - dt.timedelta(seconds=30), minute))
            sql(server, db, "VACUUM ANALYZE")
            empty_wall, _ = benchlib.run_together([argv] * 4, cli_env(server, empty_db))
            empties.append(empty_wall)
            t0 = db_clock(server)
            wall, results = benchlib.run_together([argv] * 4, cli_env(server, db))
            for r in results:
                checked(r, "tick")
            rows = sql(server, db, """
                SELECT extract(epoch FROM started_at - %s)::float8, status FROM job_runs
                WHERE trigger = 'schedule'""", (t0,))
            if len(rows) != 1000 or any(r[1] != "succeeded" for r in rows):
                raise RuntimeError(f"expected 1000 succeeded runs, found {len(rows)}")
            values = [float(r[0]) for r in rows]
            lateness += values
            p50s.append(benchlib.percentile(values, 50))
            p99s.append(benchlib.percentile(values, 99))
            maxes.append(max(values))
            walls.append(wall)
            ticks_info.append([dict(zip(("materialised", "claimed"), r, strict=True))
                               for r in sql(server, db, "SELECT materialised, claimed "
                                            "FROM job_ticks ORDER BY id")])
    s.figure("lateness p50", "s", p50s)
    s.figure("lateness p99", "s", p99s)
    s.figure("lateness max", "s", maxes)
    s.figure("4 ticks, all 1,000 runs (spawn → last exit)", "s", walls)
    s.figure("4 empty ticks (spawn → last exit)", "s", empties)
    s.ratio("lateness p99 / 4 empty ticks", "lateness p99", "4 empty ticks (spawn → last exit)")
    s.extra["pooled percentiles (all repetitions)"] = {
        f"p{q}": benchlib.percentile(lateness, q) for q in (50, 90, 99)} | {
        "max": max(lateness)}
    s.extra["per tick (materialised, claimed), each repetition"] = ticks_info
    p99 = s.figures["lateness p99"]
    s.target("lateness p99 <= 2 s", (p99["min"], p99["median"]), "<=", 2.0, "s")
    return s
