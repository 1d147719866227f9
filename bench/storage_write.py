"""``--only storage_write``: WAL bytes and index entries written per run, and runs/s, of
cronjobs before the storage work (``--storage-before-ref``), after it, pgqueuer and the
hand loop."""

from __future__ import annotations

import shutil
import sys
import tempfile
import time
import uuid
from dataclasses import dataclass
from pathlib import Path

import benchlib
import psycopg
from benchlib import Server, log
from common import Context, Section, checked, scalar, sql
from engine import Cronjobs, HandLoop, PgQueuer, System, handler_dir
from versions import Version, export, git, install

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


