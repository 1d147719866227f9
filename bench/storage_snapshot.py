"""``--only storage_snapshot``: a REPEATABLE READ transaction held open while 4 ticks drain
a fed backlog: throughput and dead rows of the hot tables before, during and after
(``--snapshot-minutes``, ``--snapshot-window``, ``--snapshot-vacuum``)."""

from __future__ import annotations

import datetime as dt
import shutil
import threading
import time
from typing import Any

import benchlib
import psycopg
from benchlib import log
from common import Context, Section, db_clock, scalar, sql, tick_argv
from engine import Cronjobs, handler_dir
from storage_seed import NOOP_DEFS, add_noop, enqueue

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


