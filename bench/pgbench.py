"""Benchmark 7, ``--only pgbench``: the physical limit, what the server and its disk can
commit (pgbench, one-row UPDATEs)."""

from __future__ import annotations

import os
import re
import tempfile

import benchlib
from common import (
    Context,
    Section,
    checked,
    sql,
)

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
