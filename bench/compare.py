"""``--only engine_compare``: the engine series and the empty tick of two versions of cronjobs
side by side, in one run — a git ref ("before", ``--baseline-ref``, default dab99c0: the
code before the architecture refactor) and this checkout's working tree ("after"), each
installed in a virtual environment of its own (versions.py).

    python bench/run.py --only engine_compare --baseline-ref dab99c0 --jobs 2000

It measures with the engine benchmark's own code (engine.py) and the empty tick's
(empty_tick.py), pointed at each version's ``cronjobs`` command, the two versions
alternating. Nothing is compared across runs: every ratio is after / before within this one.
"""

from __future__ import annotations

import contextlib
import shutil
from collections.abc import Sequence

from common import Context, Section, cli_env, tick_argv
from empty_tick import FLOOR, Command, alternate, idle_database, warm
from engine import Cronjobs, drain_figures, drain_series, handler_dir, paired
from versions import Version, before_and_after

MODES = ("in-process", "in-process-64")  # the engine's in-process drains, 8 and 64 threads
BUDGET = 1.5  # an empty tick may take this many times the floor


def bench_engine_compare(ctx: Context) -> Section:
    n, ks = ctx.repeats("engine_compare"), ctx.compare_processes
    s = Section(
        "Before and after: the engine and the empty tick of two versions",
        f"Two versions of cronjobs, each `pip install -e '.[embedded]'` into a new virtual "
        f"environment: before = git ref `{ctx.baseline_ref}` (exported with `git archive`), "
        "after = this checkout's working tree. Each version migrates its own template "
        "database. Empty tick: `cronjobs tick` of each version on a database with 100 "
        "definitions and nothing due, against the floor of that version's interpreter "
        "(import psycopg, connect, SELECT 1); one warm-up of each, then rounds of floor / "
        "tick before, floor / tick after, bytecode compiled beforehand for both. Engine: "
        f"the engine benchmark's drains of {ctx.queued:,} queued no-op jobs by `cronjobs "
        "tick --in-process --concurrency 8` (and `--concurrency 64`) processes, K = "
        f"{', '.join(map(str, ks))} started together, each drain on a fresh database; "
        "before and after alternate drain by drain, in reverse order every other "
        "repetition. after / before = runs/s of after over runs/s of before within one "
        "repetition, then min / median over repetitions."
        + (f" Every drain's database also holds {ctx.history:,} succeeded runs finished "
           "long ago (a history of years)." if ctx.history else ""))
    appdir = handler_dir()
    try:
        with before_and_after(ctx.baseline_ref) as pair:
            s.extra["versions"] = {v.name: v.describe() for v in pair}
            empty_ticks(s, ctx, pair)
            systems = {mode: [Cronjobs(ctx.server, mode, appdir, cli=v.cli, tag=v.name,
                                           history=ctx.history)
                              for v in pair] for mode in MODES}
            drains = drain_series([x for xs in systems.values() for x in xs], ks, n,
                                  lambda _: ctx.queued, alternate=True)
    finally:
        shutil.rmtree(appdir, ignore_errors=True)
    for (key, k), ds in drains.items():
        drain_figures(s, f"{key} x{k}", ds)
    for mode, (before, after) in systems.items():
        for k in ks:
            s.figure(f"{mode} x{k}: after / before", "x",
                     paired(drains[(after.key, k)], drains[(before.key, k)]))
    s.extra["processes"] = list(ks)
    s.extra["jobs per drain"] = ctx.queued
    s.extra["finished runs in history"] = ctx.history
    return s


def empty_ticks(s: Section, ctx: Context, pair: Sequence[Version]) -> None:
    """The empty tick against the floor, for each version (empty_tick.py's way)."""
    server = ctx.server
    with contextlib.ExitStack() as stack:
        commands: dict[str, Command] = {}
        for v in pair:
            db = stack.enter_context(idle_database(server, f"cmp_empty_{v.name}", cli=v.cli))
            env = cli_env(server, db, BENCH_DSN=server.conninfo(db))
            commands[f"floor ({v.name})"] = ([v.python, "-c", FLOOR], env)
            commands[f"empty tick ({v.name})"] = (tick_argv(cli=v.cli), env)
        warm(commands)
        times = alternate(commands, ctx.repeats("empty_tick"))
    for name, values in times.items():
        s.figure(name, "s", values)
    for v in pair:
        r = s.ratio(f"empty tick / floor ({v.name})", f"empty tick ({v.name})",
                    f"floor ({v.name})")
        s.target(f"empty tick <= {BUDGET} x the floor ({v.name})", (r["min"], r["median"]),
                 "<=", BUDGET, "x")
    s.ratio("empty tick, after / before", "empty tick (after)", "empty tick (before)")
    s.ratio("floor, after / before", "floor (after)", "floor (before)")
