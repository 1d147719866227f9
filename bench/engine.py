"""The execution engine's benchmarks: the scaling series against pgqueuer and a hand-written
loop, rows read per run as the backlog grows, and many jobs due at once.

    python bench/run.py --only engine        # runs/s at K = 1, 2, 4 processes, side by side
    python bench/run.py --only claim_rows    # rows read per run at 100 … 100,000 queued
    python bench/run.py --only due_at_once   # 10,000 jobs due in one minute, 4 ticks
    python bench/run.py --only issue14 --plot docs/engine-throughput.png  # all three

Every drain gets a fresh database cloned from a template prepared once per system, so no
measurement inherits another's dead rows, statistics or cache of plans. Counters come from
the server: commits (pg_stat_database.xact_commit), rows read (tup_returned + tup_fetched)
and statements (pg_stat_statements, where the server loads it), as deltas over the worker
processes' lifetime, read once they have exited.
"""

from __future__ import annotations

import datetime as dt
import itertools
import shutil
import sys
import tempfile
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import ClassVar

import benchlib
from benchlib import Server, log
from common import (
    HANDLER_MODULE,
    WORKERS,
    Context,
    Section,
    add_definitions,
    add_history,
    checked,
    cli_env,
    db_clock,
    enqueue_runs,
    minute_start,
    sql,
    tick_argv,
)

BATCH = 10  # pgqueuer's and the hand loop's batch (pgq run's default)
CLAIM_RUNS = 100  # runs claimed per claim_rows measurement (the start of the backlog)
CLAIM_THREADS = (8, 64)  # the in-process ticks' --concurrency in claim_rows


# -- the systems ----------------------------------------------------------------------------


@dataclass
class Drain:
    """One measurement: ``processes`` workers started together on a fresh database holding
    ``queued`` jobs, until they all exited."""

    runs: int  # jobs done
    span: float  # first job started -> last job finished, from the system's own records
    wall: float  # first worker spawned -> last worker exited
    cpu: float  # user + system seconds of the workers and their children
    counters: dict[str, int]  # deltas of benchlib.counters over the workers' lifetime


class System:
    """A way of draining no-op jobs: its template database, how to queue jobs and start a
    worker, and how it records what it did."""

    key = ""
    label = ""

    def __init__(self, server: Server) -> None:
        self.server = server
        self._template: str | None = None

    def template(self) -> str:
        if self._template is None:
            self._template = self.make_template()
        return self._template

    def make_template(self) -> str:
        raise NotImplementedError

    def enqueue(self, db: str, count: int) -> None:
        raise NotImplementedError

    def argv(self) -> list[str]:
        raise NotImplementedError

    def env(self, db: str) -> dict[str, str]:
        return benchlib.clean_env({"BENCH_DSN": self.server.conninfo(db),
                                   "PYTHONPATH": str(WORKERS)})

    def result(self, db: str) -> tuple[int, float]:
        """(jobs done, seconds from the first start to the last finish)."""
        raise NotImplementedError

    def helper(self, db: str, module: str, *args: str) -> None:
        code = f"import sys, {module}; {module}.main(sys.argv[1:])"
        checked(benchlib.run([sys.executable, "-c", code, *args], self.env(db)),
                f"{module} {args[0]}")

    def drain(self, count: int, processes: int) -> Drain:
        db = self.server.create_database(f"eng_{self.key}", template=self.template())
        try:
            self.enqueue(db, count)
            before = benchlib.counters(self.server, db)
            wall, results = benchlib.run_together([self.argv()] * processes, self.env(db))
            for r in results:
                checked(r, self.label)
            after = benchlib.counters(self.server, db)
            done, span = self.result(db)
        finally:
            self.server.drop_database(db)
        return Drain(done, span, wall, sum(r.cpu for r in results),
                     {k: after[k] - before[k] for k in after})


class Cronjobs(System):
    """``cronjobs tick`` processes (the real CLI) over runs queued with SQL, as ``cronjobs
    backfill`` leaves them, spread over 100 definitions with overlap ``allow``. ``cli`` is
    the ``cronjobs`` command (by default this environment's); ``tag`` names its version in
    the keys and labels when two versions are drained side by side (compare.py)."""

    MODES: ClassVar[dict[str, str]] = {
        "in-process": "cronjobs tick --in-process (no-op Python handlers)",
        "in-process-64": "cronjobs tick --in-process --concurrency 64 (no-op Python handlers)",
        "in-process-4": "cronjobs tick --in-process --concurrency 4 (the old default)",
        "in-process-auto": "cronjobs tick --in-process (--concurrency auto, the default)",
        "isolated": "cronjobs tick, isolated handlers (the default mode)",
        "shell": "cronjobs tick, shell commands (true)"}
    # --concurrency of each mode (None: no flag, the default); 8 where the issue-14 series
    # measured it
    CONCURRENCY: ClassVar[dict[str, str | None]] = {
        "in-process-64": "64", "in-process-4": "4", "in-process-auto": None}

    def __init__(self, server: Server, mode: str, appdir: Path, *,
                 cli: Sequence[str] | None = None, tag: str = "", history: int = 0) -> None:
        super().__init__(server)
        self.mode, self.appdir, self.cli, self.history = mode, appdir, cli, history
        self.key = f"cj_{mode.replace('-', '_')}" + (f"_{tag}" if tag else "")
        self.label = self.MODES[mode] + (f" [{tag}]" if tag else "")

    def make_template(self) -> str:
        db = self.server.cronjobs_database(f"tpl_{self.key}", cli=self.cli)
        if self.mode == "shell":
            add_definitions(self.server, db, prefix="noop-", count=100, command="true",
                            overlap="allow")
        else:
            add_definitions(self.server, db, prefix="noop-", count=100, kind="handler",
                            handler="noop", command=None, overlap="allow")
        sql(self.server, db, "VACUUM ANALYZE job_definitions")
        if self.history:
            add_history(self.server, db, prefix="noop-", definitions=100, count=self.history)
        return db

    def enqueue(self, db: str, count: int) -> None:
        enqueue_runs(self.server, db, prefix="noop-", definitions=100, count=count)

    def argv(self) -> list[str]:
        # in-process handlers are threads: the wide mode runs 64 at once (pgqueuer's
        # concurrency is unbounded by default), so that a pass claims up to 64 runs
        in_process = self.mode.startswith("in-process")
        threads = self.CONCURRENCY.get(self.mode, "8")
        return tick_argv(*(["--concurrency", threads] if threads is not None else []),
                         "--max-runtime", "10m", *(["--in-process"] if in_process else []),
                         apps=[] if self.mode == "shell" else ["bench_noop_jobs"],
                         cli=self.cli)

    def env(self, db: str) -> dict[str, str]:
        return cli_env(self.server, db, PYTHONPATH=str(self.appdir))

    def result(self, db: str) -> tuple[int, float]:
        row = sql(self.server, db, """
            SELECT count(*) FILTER (WHERE status = 'succeeded'),
                   extract(epoch FROM max(finished_at) - min(started_at))::float8
            FROM job_runs WHERE trigger = 'backfill'""")[0]  # the drained runs, not history
        return int(row[0]), float(row[1] or 0)


class PgQueuer(System):
    """pgqueuer as ``pgq run`` ships it: asyncpg, uvloop, batch 10, drain mode."""

    key = "pgqueuer"
    label = "pgqueuer (asyncpg + uvloop, batch 10)"

    def env(self, db: str) -> dict[str, str]:
        # asyncpg takes only URLs
        return {**super().env(db), "BENCH_DSN": benchlib.url(self.server.conninfo(db))}

    def make_template(self) -> str:
        db = self.server.create_database("tpl_pgqueuer")
        env = {**self.env(db), "PGDSN": benchlib.url(self.server.conninfo(db))}
        checked(benchlib.run([sys.executable, "-m", "pgqueuer", "install"], env),
                "pgq install")
        return db

    def enqueue(self, db: str, count: int) -> None:
        self.helper(db, "pgq_asyncpg_app", "enqueue", str(count))
        sql(self.server, db, "VACUUM ANALYZE pgqueuer")

    def argv(self) -> list[str]:
        return [sys.executable, str(WORKERS / "pgq_asyncpg_app.py"), "work"]

    def result(self, db: str) -> tuple[int, float]:
        row = sql(self.server, db, """
            SELECT count(*) FILTER (WHERE status = 'successful'),
                   extract(epoch FROM max(created) FILTER (WHERE status = 'successful')
                                    - min(created) FILTER (WHERE status = 'picked'))::float8
            FROM pgqueuer_log""")[0]
        left = sql(self.server, db, "SELECT count(*) FROM pgqueuer")[0][0]
        if left:
            raise RuntimeError(f"pgqueuer left {left} jobs in the queue")
        return int(row[0]), float(row[1] or 0)


class HandLoop(System):
    """The floor: claim 10 with SKIP LOCKED, run them in-process, finish the batch in one
    statement (workers/handloop.py --batch-finish)."""

    key = "handloop"
    label = "hand-written loop (claim 10, finish the batch at once)"

    def make_template(self) -> str:
        db = self.server.create_database("tpl_handloop")
        self.helper(db, "handloop", "setup", "0")
        return db

    def enqueue(self, db: str, count: int) -> None:
        self.helper(db, "handloop", "setup", str(count))

    def argv(self) -> list[str]:
        return [sys.executable, str(WORKERS / "handloop.py"), "work", "--batch-finish"]

    def result(self, db: str) -> tuple[int, float]:
        row = sql(self.server, db, """
            SELECT count(*) FILTER (WHERE status = 'succeeded'),
                   extract(epoch FROM max(finished_at) - min(started_at))::float8
            FROM handloop_jobs""")[0]
        return int(row[0]), float(row[1] or 0)


def handler_dir() -> Path:
    """A temporary directory holding the no-op handler module (``--app bench_noop_jobs``)."""
    appdir = Path(tempfile.mkdtemp(prefix="cjbench-app-"))
    (appdir / "bench_noop_jobs.py").write_text(HANDLER_MODULE)
    return appdir


# -- 1. the scaling series --------------------------------------------------------------------


def bench_engine(ctx: Context) -> Section:
    n, ks = ctx.repeats("engine"), ctx.processes
    s = Section(
        "Execution engine: runs/s at K processes, side by side",
        f"{ctx.queued:,} queued no-op jobs ({ctx.isolated_queued:,} for isolated handler "
        f"runs) drained by K = {', '.join(map(str, ks))} worker processes started together; "
        "every drain on a fresh database cloned from its system's template, the queue "
        "table VACUUM ANALYZEd after queueing. cronjobs: `cronjobs tick --concurrency 8 "
        "--max-runtime 10m` processes (the real CLI) with `--in-process` no-op handlers "
        "(and again with `--concurrency 64`: 64 handler threads, so a pass claims up to 64), "
        "the default isolated handler mode, and shell commands (`true`); runs queued with "
        "SQL as `cronjobs backfill` leaves them, over 100 definitions with overlap `allow`. "
        "pgqueuer as `pgq run` ships it: asyncpg driver, uvloop, batch 10, drain mode "
        "(`pgqueuer.run` on `uvloop.run`, which is what `pgq run` calls). The hand-written "
        "loop: one psycopg connection, claim 10 with FOR UPDATE SKIP LOCKED, run them "
        "in-process, finish the batch in one statement. runs/s = jobs / (first start → last "
        "finish) from each system's own records. Ratios are taken within one repetition "
        "(the systems of one repetition run one after the other, K by K), then min / median "
        "over repetitions. Per run: commits = pg_stat_database.xact_commit delta, rows read "
        "= tup_returned + tup_fetched delta, statements = pg_stat_statements calls delta, "
        "all of the fresh database over the workers' lifetime (start-up and exit included) "
        "/ jobs.")
    s.extra["statements"] = ctx.server.statements_note
    appdir = handler_dir()
    systems: list[System] = [Cronjobs(ctx.server, "in-process", appdir),
                             Cronjobs(ctx.server, "in-process-64", appdir),
                             Cronjobs(ctx.server, "isolated", appdir),
                             Cronjobs(ctx.server, "shell", appdir),
                             PgQueuer(ctx.server), HandLoop(ctx.server)]
    try:
        drains = drain_series(systems, ks, n, lambda system: ctx.isolated_queued
                              if system.key == "cj_isolated" else ctx.queued)
    finally:
        shutil.rmtree(appdir, ignore_errors=True)
    engine_figures(s, systems, drains, ks)
    return s


Drains = dict[tuple[str, int], list[Drain]]  # (system key, K) -> one drain per repetition


def drain_series(systems: Sequence[System], ks: Sequence[int], n: int,
                 jobs: Callable[[System], int], *, alternate: bool = False) -> Drains:
    """``n`` repetitions of every system at every K, one drain of ``jobs(system)`` jobs
    each, the systems one after the other; with ``alternate``, every other repetition takes
    them in reverse order, so that no system of a comparison always goes first."""
    drains: Drains = {}
    for rep in range(n):
        for k in ks:
            order = reversed(systems) if alternate and rep % 2 else systems
            for system in order:
                count = jobs(system)
                log(f"  [{rep + 1}/{n}] K={k} {system.label}: {count:,} jobs")
                d = system.drain(count, k)
                if d.runs != count:
                    raise RuntimeError(f"{system.label}: {d.runs} of {count} jobs done")
                log(f"    {d.runs / d.span:,.0f} runs/s")
                drains.setdefault((system.key, k), []).append(d)
    return drains


def drain_figures(s: Section, name: str, ds: Sequence[Drain]) -> None:
    """The figures of one system at one K (``name``), over the repetitions."""
    s.figure(f"{name}: runs/s", "runs/s", [d.runs / d.span for d in ds])
    s.figure(f"{name}: runs/s incl. start and exit", "runs/s", [d.runs / d.wall for d in ds])
    s.figure(f"{name}: commits/run", "", [d.counters["commits"] / d.runs for d in ds])
    s.figure(f"{name}: rows read/run", "", [d.counters["rows"] / d.runs for d in ds])
    if all("statements" in d.counters for d in ds):
        s.figure(f"{name}: statements/run", "",
                 [d.counters["statements"] / d.runs for d in ds])
        s.figure(f"{name}: BEGIN/COMMIT/run", "",
                 [d.counters["transaction control"] / d.runs for d in ds])
    s.figure(f"{name}: CPU ms/run", "ms", [1000 * d.cpu / d.runs for d in ds])
    s.figure(f"{name}: jobs", "", [d.runs for d in ds])


def paired(ds: Sequence[Drain], bases: Sequence[Drain]) -> list[float]:
    """runs/s of each drain over that of the base drained in the same repetition."""
    return [(d.runs / d.span) / (b.runs / b.span) for d, b in zip(ds, bases, strict=True)]


def engine_figures(s: Section, systems: Sequence[System], drains: Drains,
                   ks: Sequence[int]) -> None:
    labels = {x.key: x.label for x in systems}
    s.extra["systems"] = labels
    s.extra["processes"] = list(ks)
    for (key, k), ds in drains.items():
        name = f"{key} x{k}"
        drain_figures(s, name, ds)
        for base in ("pgqueuer", "handloop"):
            if key == base or (base, k) not in drains:
                continue
            s.figure(f"{name} / {base} x{k}", "x", paired(ds, drains[(base, k)]))
    for key, mode in (("cj_in_process", "in-process"),
                      ("cj_in_process_64", "in-process, 64 threads")):
        for k in (1, 4):
            if (key, k) not in drains:
                continue
            for base, limit in (("pgqueuer", 1.5), ("handloop", 0.6)):
                r = s.figures.get(f"{key} x{k} / {base} x{k}")
                if r:
                    s.target(f"{mode} >= {limit} x {labels[base].split(' (')[0]} at K={k}",
                             (r["min"], r["median"]), ">=", limit, "x")
    for key, limit in (("cj_isolated", 300.0), ("cj_shell", 1000.0)):
        rate = s.figures.get(f"{key} x4: runs/s")
        if rate:
            s.target(f"{key.removeprefix('cj_')} >= {limit:,.0f} runs/s at K=4",
                     (rate["min"], rate["median"]), ">=", limit, "runs/s")


# -- 2. rows read per run as the backlog grows ----------------------------------------------


def bench_claim_rows(ctx: Context) -> Section:
    s = Section(
        "Rows read per run as the backlog grows",
        f"A fresh database per backlog size and statistics state, 100 no-op handler "
        "definitions, autovacuum off on job_runs (so the statistics stay as set). N runs "
        "queued with one INSERT (as `cronjobs backfill` leaves them); then either nothing "
        "(no statistics on job_runs: never analysed) or ANALYZE job_runs. One `cronjobs tick "
        f"--in-process --concurrency 8 --max-runs {CLAIM_RUNS:,}` (K = 1) runs the first "
        f"min(N, {CLAIM_RUNS:,}) runs; then the same with `--concurrency 64` (marked \"64 "
        "threads\": a pass claims up to 64 runs). Rows read = pg_stat_database tup_returned + "
        "tup_fetched delta of the database over the tick's lifetime; per run, and net of "
        "an empty tick (the same command on the same database before the runs were queued: "
        "start-up, materialisation, an empty claim), so that what remains is the execution "
        "path's cost per run. Statements per run likewise, where pg_stat_statements is "
        "loaded.")
    appdir = handler_dir()
    system = Cronjobs(ctx.server, "in-process", appdir)
    n = ctx.repeats("claim_rows")
    values: dict[str, list[float]] = {}
    try:
        for _, (threads, backlog, analysed) in itertools.product(
                range(n), itertools.product(CLAIM_THREADS, ctx.backlogs, (False, True))):
            argv = tick_argv("--in-process", "--concurrency", str(threads),
                             "--max-runtime", "10m", "--max-runs", str(CLAIM_RUNS),
                             apps=["bench_noop_jobs"])
            db = ctx.server.create_database("rows", template=system.template())
            try:
                sql(ctx.server, db,
                    "ALTER TABLE job_runs SET (autovacuum_enabled = false)")
                env = system.env(db)
                c0 = benchlib.counters(ctx.server, db)
                checked(benchlib.run(argv, env), "empty tick")
                c1 = benchlib.counters(ctx.server, db)
                enqueue(ctx.server, db, backlog, analysed=analysed)
                c2 = benchlib.counters(ctx.server, db)
                checked(benchlib.run(argv, env), "tick")
                c3 = benchlib.counters(ctx.server, db)
                runs = int(sql(ctx.server, db, "SELECT count(*) FROM job_runs "
                               "WHERE status = 'succeeded'")[0][0])
            finally:
                ctx.server.drop_database(db)
            if runs != min(backlog, CLAIM_RUNS):
                raise RuntimeError(f"{backlog} queued: {runs} runs done")
            state = "ANALYZE" if analysed else "no statistics"
            name = f"{backlog:,} queued, {state}{_threads(threads)}"
            log(f"  {name}: {(c3['rows'] - c2['rows']) / runs:,.1f} rows/run")
            for what in ("rows", "statements", "commits"):
                if what not in c3:
                    continue
                empty, full = c1[what] - c0[what], c3[what] - c2[what]
                values.setdefault(f"{name}: {what}/run", []).append(full / runs)
                values.setdefault(f"{name}: {what}/run, net of an empty tick",
                                  []).append((full - empty) / runs)
            values.setdefault(f"{name}: runs", []).append(runs)
    finally:
        shutil.rmtree(appdir, ignore_errors=True)
    for name, vs in values.items():
        s.figure(name, "", vs)
    s.extra["backlogs"] = list(ctx.backlogs)
    s.extra["statements"] = ctx.server.statements_note
    s.extra["threads"] = list(CLAIM_THREADS)
    for threads, backlog, state in itertools.product(CLAIM_THREADS, (100, 100_000),
                                                     ("no statistics", "ANALYZE")):
        name = f"{backlog:,} queued, {state}{_threads(threads)}"
        f = s.figures.get(f"{name}: rows/run, net of an empty tick")
        if f:
            s.target(f"rows read/run <= 20 at {name}", (f["min"], f["median"]), "<=", 20.0)
    return s


def _threads(threads: int) -> str:
    """How the figures of a claim_rows series are named: none for the 8-thread one."""
    return "" if threads == 8 else f", {threads} threads"


def enqueue(server: Server, db: str, count: int, *, analysed: bool) -> None:
    """``count`` queued runs over the 100 definitions; ANALYZE job_runs when ``analysed``
    (nothing else touches the statistics: no VACUUM, autovacuum off)."""
    sql(server, db, """
        INSERT INTO job_runs (definition_id, scheduled_for, trigger, max_attempts, exclusive,
                              eligible_at)
        SELECT d.id, date_trunc('minute', now()) - g * interval '1 minute', 'backfill', 1,
               false, now() - interval '1 second'
        FROM generate_series(1, %(count)s) AS g
        JOIN job_definitions AS d ON d.name = 'noop-' || (1 + g %% 100)
        ORDER BY g
        """, {"count": count})
    if analysed:
        sql(server, db, "ANALYZE job_runs")


# -- 3. due at once ------------------------------------------------------------------------


def bench_due_at_once(ctx: Context) -> Section:
    due, ticks = ctx.due, ctx.due_ticks
    s = Section(
        "Due at once",
        f"{due:,} definitions `* * * * *` (no-op Python handlers, overlap skip) whose cursor "
        f"is 30 s before the current minute, so each has that minute's slot due; {ticks} "
        "`cronjobs tick --in-process --concurrency 8 --max-runtime 10m` started together at "
        "t0 (the database clock just before), on a fresh database per repetition; then the "
        "same with `--concurrency 64` (figures marked \"64 threads\"). Lateness "
        "of a run = started_at - t0 (as if cron had started the ticks exactly at the minute); "
        "makespan = the last finished_at - t0. Baseline in the same repetition: the same "
        f"{ticks} ticks started together on a database with nothing due.")
    appdir = handler_dir()
    variants = {"": Cronjobs(ctx.server, "in-process", appdir),
                ", 64 threads": Cronjobs(ctx.server, "in-process-64", appdir)}
    n = ctx.repeats("due_at_once")
    figures: dict[str, list[float]] = {}
    pooled: dict[str, list[float]] = {}
    system = variants[""]
    empty_db = ctx.server.create_database("due_empty", template=system.template())
    try:
        for _ in range(n):
            for suffix, variant in variants.items():
                late, finish, wall, empty = _due_once(ctx, system, variant.argv(), empty_db)
                pooled.setdefault(suffix, []).extend(late)
                for q in (50, 99):
                    figures.setdefault(f"lateness p{q}{suffix}", []).append(
                        benchlib.percentile(late, q))
                figures.setdefault(f"lateness max{suffix}", []).append(max(late))
                figures.setdefault(f"makespan (t0 → last finish){suffix}", []).append(finish)
                figures.setdefault(f"{ticks} ticks, spawn → last exit{suffix}", []).append(wall)
                figures.setdefault(f"{ticks} empty ticks, spawn → last exit{suffix}",
                                   []).append(empty)
                log(f"  p99 {figures[f'lateness p99{suffix}'][-1]:.2f} s, makespan "
                    f"{finish:.2f} s{suffix}")
    finally:
        ctx.server.drop_database(empty_db)
        shutil.rmtree(appdir, ignore_errors=True)
    for name, vs in figures.items():
        s.figure(name, "s", vs)
    for suffix, late in pooled.items():
        s.extra[f"pooled percentiles (all repetitions){suffix}"] = {
            f"p{q}": benchlib.percentile(late, q) for q in (50, 90, 99)} | {"max": max(late)}
    s.extra["jobs, ticks"] = f"{due:,} jobs, {ticks} ticks"
    for suffix in variants:
        p99 = s.figures[f"lateness p99{suffix}"]
        s.target(f"due at once ({due:,} jobs, {ticks} ticks{suffix}): lateness p99 <= 2 s",
                 (p99["min"], p99["median"]), "<=", 2.0, "s")
        if due >= 50_000:
            m = s.figures[f"makespan (t0 → last finish){suffix}"]
            s.target(f"due at once ({due:,} jobs, {ticks} ticks{suffix}): makespan <= 3 s",
                     (m["min"], m["median"]), "<=", 3.0, "s")
    return s


def _due_once(ctx: Context, system: Cronjobs, argv: list[str], empty_db: str
              ) -> tuple[list[float], float, float, float]:
    """One repetition: (lateness of every run, makespan, spawn → last exit of the ticks,
    the same for empty ticks), all in seconds."""
    late, finish, wall, empty, _ = due_once(ctx, system, argv, empty_db)
    return late, finish, wall, empty


def due_once(ctx: Context, system: Cronjobs, argv: list[str], empty_db: str
             ) -> tuple[list[float], float, float, float, float]:
    """As _due_once, and when the last of the ticks started (job_ticks.started_at - t0: what
    the ticks took to start and connect, before any work)."""
    due, ticks = ctx.due, ctx.due_ticks
    db = ctx.server.create_database("due", template=system.template())
    try:
        sql(ctx.server, db, """
            INSERT INTO job_definitions (name, schedule, kind, handler, overlap,
                                         cursor_at, next_due_at)
            SELECT 'due-' || g, '* * * * *', 'handler', 'noop', 'skip', now(), now()
            FROM generate_series(1, %s) AS g""", (due,))
        minute = minute_start(ctx.server, latest_second=30)
        sql(ctx.server, db, "UPDATE job_definitions SET cursor_at = %s, "
            "next_due_at = %s WHERE name LIKE 'due-%%'",
            (minute - dt.timedelta(seconds=30), minute))
        sql(ctx.server, db, "VACUUM ANALYZE")
        empty, _ = benchlib.run_together([argv] * ticks, system.env(empty_db))
        t0 = db_clock(ctx.server)
        wall, results = benchlib.run_together([argv] * ticks, system.env(db))
        for r in results:
            checked(r, "tick")
        rows = sql(ctx.server, db, """
            SELECT extract(epoch FROM r.started_at - %(t0)s)::float8,
                   extract(epoch FROM r.finished_at - %(t0)s)::float8
            FROM job_runs AS r JOIN job_definitions AS d ON d.id = r.definition_id
            WHERE d.name LIKE 'due-%%' AND r.scheduled_for = %(minute)s
              AND r.status = 'succeeded'""", {"t0": t0, "minute": minute})
        started = sql(ctx.server, db, "SELECT extract(epoch FROM max(started_at) - %s)::float8 "
                      "FROM job_ticks", (t0,))[0][0]
    finally:
        ctx.server.drop_database(db)
    if len(rows) != due:
        raise RuntimeError(f"expected {due} succeeded runs, found {len(rows)}")
    return ([float(r[0]) for r in rows], max(float(r[1]) for r in rows), wall, empty,
            float(started or 0.0))


BENCHMARKS = {"engine": bench_engine, "claim_rows": bench_claim_rows,
              "due_at_once": bench_due_at_once}
GROUPS = {"issue14": tuple(BENCHMARKS)}

