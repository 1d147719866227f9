"""Benchmarks 2 and 3, ``--only idle_definitions`` and ``--only materialise``: what a tick
pays to decide which slots become runs — nothing for idle definitions, little per slot for
many definitions due in the same minute."""

from __future__ import annotations

import datetime as dt
import sys
from collections.abc import Callable
from zoneinfo import ZoneInfo

import benchlib
import psycopg
from benchlib import Server
from common import (
    Context,
    Section,
    add_definitions,
    checked,
    clear_history,
    cli_env,
    last_tick,
    minute_start,
    scalar,
    sql,
    tick_argv,
)

# run for every due definition and moves every cursor, in one transaction.
SQL_MATERIALISE = """
import os, psycopg
with psycopg.connect(os.environ['BENCH_DSN'], autocommit=True) as c, c.transaction():
    c.execute("INSERT INTO job_runs (definition_id, scheduled_for, trigger, max_attempts, "
              "exclusive, eligible_at) SELECT id, next_due_at, 'schedule', max_attempts, "
              "overlap IN ('skip', 'queue'), next_due_at FROM job_definitions "
              "WHERE next_due_at <= now() ON CONFLICT DO NOTHING")
    c.execute("UPDATE job_definitions SET cursor_at = now(), "
              "next_due_at = next_due_at + interval '1 minute' WHERE next_due_at <= now()")
"""

# -- 2. idle definitions cost nothing --------------------------------------------------------


def bench_idle_definitions(ctx: Context) -> Section:
    s = Section(
        "Idle definitions cost nothing",
        "`cronjobs tick --max-runs 0` (materialisation only, no runs executed) on a database "
        "with 100,000 definitions of which 100 are due, against one with 1,000 definitions "
        "of which 100 are due. Definitions are inserted with INSERT … SELECT "
        "generate_series: idle ones `0 0 1 1 *` with next_due_at next year, due ones "
        "`* * * * *` with the cursor 30 s before the current minute and next_due_at at it; "
        "VACUUM ANALYZE after loading. Before every tick the 100 due ones are made due again "
        "and their runs deleted. The two databases alternate.")
    server, n = ctx.server, ctx.repeats("idle_definitions")
    sizes = {"1,000 definitions": 1_000, "100,000 definitions": 100_000}
    with server.database("idle_small") as small, server.database("idle_large") as large:
        dbs = {"1,000 definitions": small, "100,000 definitions": large}
        for label, db in dbs.items():
            add_definitions(server, db, prefix="idle-", count=sizes[label] - 100)
            sql(server, db, """
                INSERT INTO job_definitions (name, schedule, kind, command, cursor_at,
                                             next_due_at)
                SELECT 'due-' || g, '* * * * *', 'command', 'true',
                       date_trunc('minute', now()) - interval '30 seconds',
                       date_trunc('minute', now())
                FROM generate_series(1, 100) AS g""")
            sql(server, db, "VACUUM ANALYZE")
        walls: dict[str, list[float]] = {label: [] for label in dbs}
        inside: dict[str, list[float]] = {label: [] for label in dbs}
        for i in range(n + 1):
            for label, db in dbs.items():
                clear_history(server, db)
                sql(server, db, """
                    UPDATE job_definitions
                    SET cursor_at = date_trunc('minute', now()) - interval '30 seconds',
                        next_due_at = date_trunc('minute', now())
                    WHERE name LIKE 'due-%%'""")
                result = checked(benchlib.run(tick_argv("--max-runs", "0"),
                                              cli_env(server, db)), "tick")
                info = last_tick(server, db)
                if info.get("materialised") != 100:
                    raise RuntimeError(f"{label}: expected 100 runs, tick said {info}")
                if i > 0:  # the first round warms up
                    walls[label].append(result.wall)
                    inside[label].append(info["seconds"])
        for label in dbs:
            s.figure(f"tick, {label}", "s", walls[label])
            s.figure(f"inside the tick, {label}", "s", inside[label])
    r = s.ratio("100,000 / 1,000 (whole tick)", "tick, 100,000 definitions",
                "tick, 1,000 definitions")
    s.ratio("100,000 / 1,000 (inside the tick)", "inside the tick, 100,000 definitions",
            "inside the tick, 1,000 definitions")
    s.target("tick with 100,000 definitions <= 1.1 x tick with 1,000 (100 due in both)",
             (r["min"], r["median"]), "<=", 1.1, "x")
    return s


# -- 3. materialisation ----------------------------------------------------------------------

ZONES = ("UTC", "Europe/Berlin", "America/New_York", "America/Los_Angeles", "Asia/Kolkata",
         "Asia/Kathmandu", "Australia/Sydney", "Pacific/Auckland", "America/Sao_Paulo",
         "Asia/Tokyo")


def _fires_at(minute: dt.datetime) -> Callable[[str, str, str], bool] | None:
    """A checker using cronjobs' own schedule code (for picking H jobs), if available."""
    try:
        from cronjobs import cron as schedule  # noqa: PLC0415 - optional, only to pick H names
    except ImportError:
        return None
    before = minute - dt.timedelta(microseconds=1)

    def fires(expression: str, zone: str, name: str) -> bool:
        try:
            return bool(schedule.parse(expression, zone, hash_key=name).next_after(before)
                        == minute)
        except Exception:
            return False

    return fires


def due_definitions(minute: dt.datetime, count: int) -> list[tuple[str, str, str]]:
    """``count`` (name, schedule, zone) that all have a slot at ``minute``: 40 % share a few
    common expressions, 40 % use one of ~1,500 distinct expressions, 20 % are H-hashed."""
    shared: list[tuple[str, str]] = []
    distinct: list[tuple[str, str]] = []
    fields: dict[str, tuple[int, int, int, int, int]] = {}
    for zone in ZONES:
        local = minute.astimezone(ZoneInfo(zone))
        m, h, dom, mon, dow = (local.minute, local.hour, local.day, local.month,
                               local.isoweekday() % 7)
        fields[zone] = (m, h, dom, mon, dow)
        shared += [(e, zone) for e in ("* * * * *", f"{m} * * * *", f"{m} {h} * * *",
                                       f"*/1 {h} * * *", f"{m} {h} {dom} {mon} *")]
        distinct += [(f"{m},{x} * * * *", zone) for x in range(60) if x != m]
        distinct += [(f"{m} {h},{y} * * *", zone) for y in range(24) if y != h]
        distinct += [(f"{m % step}/{step} * * * *", zone) for step in range(2, 31)]
        distinct += [(f"{m} {h} * * {dow},{w}", zone) for w in range(7) if w != dow]
        distinct += [(f"{m} {h} {dom} * {w}", zone) for w in range(7)]  # either day field
        distinct += [(f"{max(0, m - k)}-{min(59, m + k)} * * * *", zone) for k in range(1, 9)]
    fires = _fires_at(minute)
    out: list[tuple[str, str, str]] = []
    n_shared, n_distinct = count * 4 // 10, count * 4 // 10
    out += [(f"shared-{i}", *shared[i % len(shared)]) for i in range(n_shared)]
    out += [(f"distinct-{i}", *distinct[i % len(distinct)]) for i in range(n_distinct)]
    i = 0
    while len(out) < count:
        zone = ZONES[i % len(ZONES)]
        m, h, *_ = fields[zone]
        name = f"hashed-{i}"
        i += 1
        width = 1 + i % 3
        lo, hi = max(0, m - width), min(59, m + width)
        candidates = [f"H({lo}-{hi}) * * * *", f"{m} H({max(0, h - 1)}-{min(23, h + 1)}) * * *",
                      f"H({lo}-{hi}) {h} * * *", "H/1 * * * *", f"{m} H/1 * * *"]
        expression = candidates[i % len(candidates)]
        if fires is not None and not fires(expression, zone, name):
            continue  # the hash picked another minute for this name: try the next name
        out.append((name, expression, zone))
    return out


def bench_materialise(ctx: Context) -> Section:
    count = 2_000 if ctx.quick else 10_000
    s = Section(
        "Materialisation",
        f"{count:,} definitions all due in the same minute (10 zones; 40 % share five "
        "common expressions per zone, 40 % use ~1,300 distinct expressions — lists, steps, "
        "ranges, both day fields —, 20 % are H-hashed), cursor 30 s before the minute. One "
        "`cronjobs tick --max-runs 0` materialises them. Baseline, in the same database just "
        "before: one Python process inserting a run for every due definition and moving "
        "every cursor in SQL alone (no schedule math). The tick's count of materialised runs "
        "is checked.")
    server, n = ctx.server, ctx.repeats("materialise")
    walls, inside, floors = [], [], []
    with server.database("materialise") as db:
        for _ in range(n):
            sql(server, db, "TRUNCATE job_attempts, job_runs, job_skips, job_ticks, "
                "job_definitions RESTART IDENTITY CASCADE")
            minute = minute_start(server, latest_second=30)
            rows = due_definitions(minute, count)
            cursor = minute - dt.timedelta(seconds=30)
            with psycopg.connect(server.conninfo(db), autocommit=True) as conn:
                with conn.cursor().copy(
                        "COPY job_definitions (name, schedule, timezone, kind, command, "
                        "cursor_at, next_due_at) FROM STDIN") as copy:
                    for name, expression, zone in rows:
                        copy.write_row((name, expression, zone, "command", "true", cursor,
                                        minute))
                conn.execute("VACUUM ANALYZE job_definitions")
            env = cli_env(server, db, BENCH_DSN=server.conninfo(db))
            floors.append(checked(benchlib.run([sys.executable, "-c", SQL_MATERIALISE], env),
                                  "SQL floor").wall)
            sql(server, db, "TRUNCATE job_runs CASCADE")
            sql(server, db, "UPDATE job_definitions SET cursor_at = %s, next_due_at = %s",
                (cursor, minute))
            sql(server, db, "VACUUM ANALYZE job_definitions, job_runs")
            result = checked(benchlib.run(tick_argv("--max-runs", "0"), env), "tick")
            info = last_tick(server, db)
            if info.get("materialised") != count:
                raise RuntimeError(f"expected {count} runs, the tick said {info}")
            walls.append(result.wall)
            inside.append(info["seconds"])
        distinct = scalar(server, db, "SELECT count(DISTINCT (schedule, timezone)) "
                          "FROM job_definitions")
        s.extra["distinct (schedule, zone) pairs"] = distinct
        s.extra["cProfile of one tick (top functions by cumulative time)"] = profile_tick(
            server, db, cursor, minute)
    s.figure("tick (materialise only)", "s", walls)
    s.figure("inside the tick (job_ticks started → finished)", "s", inside)
    s.figure("SQL-only floor (same rows written)", "s", floors)
    s.figure("slots per second (whole tick)", "slots/s", [count / w for w in walls])
    s.figure("slots per second (inside the tick)", "slots/s", [count / w for w in inside])
    s.ratio("tick / SQL-only floor", "tick (materialise only)",
            "SQL-only floor (same rows written)")
    whole = s.figures["tick (materialise only)"]
    s.target(f"{count:,} slots materialised in <= 1 s (whole tick process)",
             (whole["min"], whole["median"]), "<=", 1.0, "s")
    return s


def profile_tick(server: Server, db: str, cursor: dt.datetime, minute: dt.datetime
                 ) -> list[str]:
    """One more materialising tick under cProfile; the top lines of its report."""
    sql(server, db, "TRUNCATE job_runs, job_ticks CASCADE")
    sql(server, db, "UPDATE job_definitions SET cursor_at = %s, next_due_at = %s",
        (cursor, minute))
    sql(server, db, "VACUUM ANALYZE job_definitions, job_runs")
    result = benchlib.run([sys.executable, "-m", "cProfile", "-s", "cumulative", "-m",
                           "cronjobs", "tick", "--max-runs", "0"], cli_env(server, db))
    lines = [line.rstrip() for line in result.stdout.splitlines()]
    header = next((i for i, line in enumerate(lines) if "ncalls" in line), None)
    if header is None:
        return lines[:40]
    # from the tick itself down (the lines above it are the interpreter and click)
    body = lines[header + 1:]
    start = next((i for i, line in enumerate(body) if "tick.py" in line), 0)
    return [lines[header], *body[start:start + 30]]
