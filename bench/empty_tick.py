"""Benchmark 1, ``--only empty_tick``: an empty ``cronjobs tick`` against the floor of any
command that talks to PostgreSQL (a Python process that imports psycopg, connects and runs
SELECT 1), with the tick's import profile."""

from __future__ import annotations

import contextlib
import re
import sys
from collections.abc import Iterator, Mapping, Sequence
from typing import Any

import benchlib
from benchlib import Server
from common import (
    Context,
    Section,
    add_definitions,
    checked,
    cli_env,
    sql,
    tick_argv,
)

# A Python process that imports psycopg, connects and runs SELECT 1: the floor of any
# command that talks to PostgreSQL.
FLOOR = ("import os, psycopg\n"
         "with psycopg.connect(os.environ['BENCH_DSN']) as c:\n"
         "    c.execute('SELECT 1').fetchone()\n")


def bench_empty_tick(ctx: Context) -> Section:
    s = Section(
        "Empty tick vs the floor",
        "Wall time of `cronjobs tick` (the real CLI, a subprocess) on a database with 100 "
        "definitions and nothing due, against the floor: a Python process that imports "
        "psycopg, connects and runs SELECT 1. Runs alternate floor / tick after one warm-up "
        "of each. For context, the same interpreter doing nothing, only importing psycopg, "
        "and `cronjobs --version` (the CLI's imports, no database).")
    server, n = ctx.server, ctx.repeats("empty_tick")
    with idle_database(server, "empty") as db:
        env = cli_env(server, db, BENCH_DSN=server.conninfo(db))
        py = sys.executable
        variants: dict[str, list[str]] = {
            "python -c pass": [py, "-c", "pass"],
            "import psycopg": [py, "-c", "import psycopg"],
            "floor (import psycopg, connect, SELECT 1)": [py, "-c", FLOOR],
            "cronjobs --version": [*benchlib.cronjobs_command(), "--version"],
            "empty tick": tick_argv(),
        }
        commands = {name: (argv, env) for name, argv in variants.items()}
        warm(commands)
        before = benchlib.commits(server, db)
        times = alternate(commands, n)
        ticks = n + 1
        after = benchlib.commits(server, db)
        for name, values in times.items():
            s.figure(name, "s", values)
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


Command = tuple[list[str], dict[str, str]]  # argv and environment of a measured process


@contextlib.contextmanager
def idle_database(server: Server, purpose: str, *, cli: Sequence[str] | None = None
                  ) -> Iterator[str]:
    """A scratch database (at the schema of ``cli``) with 100 definitions and nothing due
    before next year: what an empty tick finds."""
    with server.database(purpose, cli=cli) as db:
        add_definitions(server, db, prefix="idle-", count=100)
        sql(server, db, "VACUUM ANALYZE job_definitions")
        yield db


def warm(commands: Mapping[str, Command]) -> None:
    """Run every command once, unmeasured: the page cache, and bytecode of anything the
    run's warm-up did not compile."""
    for name, (argv, env) in commands.items():
        checked(benchlib.run(argv, env), name)


def alternate(commands: Mapping[str, Command], n: int) -> dict[str, list[float]]:
    """Wall times of ``n`` rounds of every command in turn, so that a noisy moment of a
    shared machine hits all of them."""
    times: dict[str, list[float]] = {name: [] for name in commands}
    for _ in range(n):
        for name, (argv, env) in commands.items():
            times[name].append(checked(benchlib.run(argv, env), name).wall)
    return times


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
