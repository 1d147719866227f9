"""Benchmark 6, ``--only memory``: the peak RSS of a tick one of whose runs writes 1 GiB to
stdout."""

from __future__ import annotations

import sys
import time

import benchlib
from common import (
    Context,
    Section,
    add_definitions,
    checked,
    clear_history,
    cli_env,
    sql,
    tick_argv,
)
from empty_tick import FLOOR

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
