"""Benchmark 4, ``--only throughput``: no-op runs executed by cronjobs ticks at 1 and 4
processes against a hand-written loop, pgqueuer and procrastinate (the older throughput
benchmark; the engine's scaling series is ``engine.py``)."""

from __future__ import annotations

import importlib.util
import shutil
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import benchlib
from benchlib import log
from common import (
    HANDLER_MODULE,
    WORKERS,
    Context,
    Section,
    add_definitions,
    checked,
    clear_history,
    cli_env,
    enqueue_runs,
    scalar,
    sql,
    tick_argv,
)

ISOLATED_JOBS = 1000  # jobs per measurement of isolated handler runs (the default mode)

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
    handler = "cronjobs.execution.processes.handler"
    variants = {"python -c pass": [sys.executable, "-c", "pass"],
                f"python -c 'import {handler}, <app module>'":
                    [sys.executable, "-c", f"import {handler}, bench_noop_jobs"]}
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
