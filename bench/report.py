"""Render the JSON of ``bench/run.py`` as the Markdown tables of docs/benchmarks.md.

    python bench/run.py --json > results.json
    python bench/report.py results.json > tables.md

It prints the machine, a summary of every target (met / NOT met, by how much) and, per
benchmark, its method, every figure as min / median and every ratio against its baseline.
The analysis of docs/benchmarks.md (what stands in the way of a missed target) is written
by hand from these tables and the profiles they include.
"""

from __future__ import annotations

import argparse
import json
import math
import re
import sys
from pathlib import Path
from typing import Any

ORDER = ("empty_tick", "idle_definitions", "materialise", "throughput", "lateness", "memory",
         "pgbench", "engine", "claim_rows", "due_at_once", "engine_compare")
RATES = ("jobs/s", "slots/s", "tps", "runs/s")
TIMES = "\u00d7"  # the multiplication sign
NONE = "\u2013"  # an en dash: no value


def fmt(value: float | None, unit: str = "") -> str:
    """A number for people: three significant digits, milliseconds below a second."""
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return NONE
    if unit == "s":
        return f"{value * 1000:.3g} ms" if abs(value) < 1 else f"{value:.3g} s"
    if unit in RATES:
        return f"{value:,.0f} {unit}" if value >= 100 else f"{value:.3g} {unit}"
    if unit == "x":
        return f"{value:.3g}{TIMES}"
    if unit in ("commits", ""):
        return f"{value:.3g}"
    return f"{value:.3g} {unit}"


def verdict(target: dict[str, Any]) -> str:
    """met / NOT met / borderline (min and median disagree), and by how much."""
    median = target["factor"]
    low = target.get("factor_min", median)
    if target["op"] == "<=":
        by = f"{low:.2f}{TIMES} / {median:.2f}{TIMES} the limit"
    else:
        by = (f"{low:.2g}{TIMES} / {median:.2g}{TIMES} the target "
              f"(short by {1 / median:.2g}{TIMES} on the median)" if median < 1
              else f"{low:.2g}{TIMES} / {median:.2g}{TIMES} the target")
    word = target.get("verdict", "met" if target["met"] else "NOT met")
    if word == "NOT met":
        word = "**NOT met**"
    elif word == "borderline":
        word = "**borderline** (met on one of min / median only)"
    return f"{word}: {by}"


def machine_table(results: dict[str, Any]) -> list[str]:
    m = results["machine"]
    packages = ", ".join(f"{name} {version}" for name, version in m["packages"].items()
                         if version)
    settings = ", ".join(f"{k} = {v}" for k, v in m["settings"].items())
    rows = [
        ("CPU", f"{m['cpu']}, {m['cores']} cores"),
        ("Memory", f"{m['memory_gib']} GiB"),
        ("OS / kernel", f"{m['os']}, Linux {m['kernel']}"),
        ("Python", m["python"]),
        ("PostgreSQL", f"{m['postgresql']}, {m['server']}"),
        ("Server settings", settings),
        ("Packages", packages),
        ("Run", f"{results['started_at']}, {results['seconds'] / 60:.1f} min in all; "
                f"options {json.dumps(results['settings'])}"),
    ]
    pgbench = results["sections"].get("pgbench", {}).get("extra", {}).get("pgbench")
    if pgbench:
        rows.insert(5, ("pgbench", pgbench))
    return ["| | |", "|---|---|", *[f"| {k} | {v} |" for k, v in rows]]


def summary_table(results: dict[str, Any]) -> list[str]:
    lines = ["| benchmark | target | measured (min / median) | verdict (min / median) |",
             "|---|---|---|---|"]
    for name in ORDER:
        section = results["sections"].get(name)
        if not section:
            continue
        if "error" in section:
            lines.append(f"| {section['title']} | {NONE} | {NONE} | failed: {section['error']} |")
        for t in section.get("targets", []):
            lines.append(f"| {section['title']} | {t['text']} | "
                         f"{fmt(t.get('measured_min'), t['unit'])} / "
                         f"{fmt(t['measured'], t['unit'])} | {verdict(t)} |")
    return lines


def figures_table(section: dict[str, Any]) -> list[str]:
    lines = ["| figure | min | median |", "|---|---|---|"]
    for name, f in section["figures"].items():
        lines.append(f"| {name} | {fmt(f['min'], f['unit'])} | {fmt(f['median'], f['unit'])} |")
    return lines


def throughput_table(section: dict[str, Any]) -> list[str]:
    rows: dict[tuple[str, str], dict[str, dict[str, Any]]] = {}
    other: dict[str, dict[str, Any]] = {}
    for name, f in section["figures"].items():
        match = re.match(r"^(.*) x(\d+): (.*)$", name)
        if match:
            rows.setdefault((match[1], match[2]), {})[match[3]] = f
        else:
            other[name] = f
    lines = ["| system | processes | jobs/s (min / median) | jobs/s incl. start and exit "
             "(median) | commits per job (median) | CPU per job (median) |",
             "|---|---|---|---|---|---|"]
    for (system, workers), f in rows.items():
        rate = f["jobs/s"]
        lines.append(
            f"| {system} | {workers} | {fmt(rate['min'], 'jobs/s')} / "
            f"{fmt(rate['median'], 'jobs/s')} | {fmt(f['jobs/s, wall']['median'], 'jobs/s')} | "
            f"{fmt(f['commits/job']['median'], 'commits')} | "
            f"{fmt(f['CPU ms/job']['median'], 'ms')} |")
    if other:
        lines += ["", *figures_table({"figures": other})]
    return lines


def engine_table(section: dict[str, Any]) -> list[str]:
    """One row per system and K: runs/s, ratios within the run, counters per run."""
    f = section["figures"]
    labels: dict[str, str] = section["extra"]["systems"]

    def cell(name: str, unit: str = "") -> str:
        value = f.get(name)
        return NONE if value is None else fmt(value["median"], unit)

    def both(name: str, unit: str) -> str:
        value = f.get(name)
        return NONE if value is None else (f"{fmt(value['min'], unit)} / "
                                           f"{fmt(value['median'], unit)}")

    lines = ["| system | K | jobs | runs/s (min / median) | to pgqueuer (min / median) | "
             "to the hand loop (min / median) | commits/run | statements/run | rows read/run | "
             "CPU ms/run |", "|---|---|---|---|---|---|---|---|---|---|"]
    for k in section["extra"]["processes"]:
        for key, label in labels.items():
            name = f"{key} x{k}"
            if f"{name}: runs/s" not in f:
                continue
            lines.append(
                f"| {label} | {k} | {f[name + ': jobs']['median']:,.0f} | "
                f"{both(name + ': runs/s', 'runs/s')} | "
                f"{both(f'{name} / pgqueuer x{k}', 'x')} | "
                f"{both(f'{name} / handloop x{k}', 'x')} | {cell(name + ': commits/run')} | "
                f"{cell(name + ': statements/run')} | {cell(name + ': rows read/run')} | "
                f"{cell(name + ': CPU ms/run')} |")
    return lines


def claim_rows_table(section: dict[str, Any]) -> list[str]:
    f = section["figures"]
    lines = ["| threads | queued | statistics | runs | rows read/run | net of an empty tick | "
             "statements/run (net) | commits/run (net) |", "|---|---|---|---|---|---|---|---|"]
    for threads in section["extra"].get("threads", [8]):
        suffix = "" if threads == 8 else f", {threads} threads"
        for backlog in section["extra"]["backlogs"]:
            for state in ("no statistics", "ANALYZE"):
                name = f"{backlog:,} queued, {state}{suffix}"
                if f"{name}: rows/run" not in f:
                    continue

                def median(what: str, name: str = name) -> str:
                    value = f.get(f"{name}: {what}")
                    return NONE if value is None else f"{value['median']:,.4g}"

                lines.append(
                    f"| {threads} | {backlog:,} | {state} | {median('runs')} | "
                    f"{median('rows/run')} | {median('rows/run, net of an empty tick')} | "
                    f"{median('statements/run, net of an empty tick')} | "
                    f"{median('commits/run, net of an empty tick')} |")
    return lines


def ratios_table(section: dict[str, Any]) -> list[str]:
    if not section["ratios"]:
        return []
    lines = ["| ratio | min | median |", "|---|---|---|"]
    for r in section["ratios"]:
        lines.append(f"| {r['name']} | {fmt(r['min'], 'x')} | {fmt(r['median'], 'x')} |")
    return lines


def extras(section: dict[str, Any]) -> list[str]:
    lines: list[str] = []
    for key, value in section.get("extra", {}).items():
        if key in ("systems", "processes", "backlogs", "threads"):
            continue
        if key == "import profile":
            lines += [f"Import profile of one tick (`python -X importtime -m cronjobs tick`, "
                      f"modules taking ≥ 4 ms; all imports: {value['total_ms']:.0f} ms):", ""]
            lines += [f"{'  ' * e['depth']}- {e['module']}: {e['cumulative_ms']:.1f} ms "
                      f"(itself {e['self_ms']:.1f} ms)" for e in value["tree"]]
            lines.append("")
        elif key.startswith("cProfile"):
            lines += [f"{key}:", "", "```", *value, "```", ""]
        elif key.startswith("per tick"):
            lines.append(f"{key}: " + "; ".join(
                " / ".join(f"({t['materialised']}, {t['claimed']})" for t in rep)
                for rep in value) + ".")
            lines.append("")
        elif isinstance(value, dict):
            inner = ", ".join(f"{k} {fmt(v, 's') if isinstance(v, float) else v}"
                              for k, v in value.items())
            lines += [f"{key}: {inner}.", ""]
        elif isinstance(value, float):
            lines += [f"{key}: {value:.3g}.", ""]
        else:
            lines += [f"{key}: {value}.", ""]
    return lines


def against_pgbench(results: dict[str, Any]) -> list[str]:
    """Commits per second each system used at 4 processes, against pgbench at 4 clients."""
    throughput = results["sections"].get("throughput", {}).get("figures", {})
    pgbench = results["sections"].get("pgbench", {}).get("figures", {})
    limit = pgbench.get("pgbench, 4 client(s): transactions/s")
    if not throughput or not limit:
        return []
    lines = ["Against the physical limit (pgbench, 4 clients, median "
             f"{fmt(limit['median'], 'tps')}, same run): the commits per second each "
             "system used at 4 processes (median jobs/s times median commits per job).", "",
             "| system (4 processes) | commits/s used | share of pgbench's commits/s |",
             "|---|---|---|"]
    for name, f in throughput.items():
        match = re.match(r"^(.*) x4: jobs/s$", name)
        if not match:
            continue
        commits = throughput[f"{match[1]} x4: commits/job"]["median"]
        used = f["median"] * commits
        lines.append(f"| {match[1]} | {used:,.0f} | {used / limit['median']:.1%} |")
    return [*lines, ""]


def render(results: dict[str, Any]) -> str:
    out = ["## Machine and versions", "", *machine_table(results), "",
           "## Targets", "", *summary_table(results), ""]
    for number, name in enumerate(ORDER, 1):
        section = results["sections"].get(name)
        if not section:
            continue
        out += [f"## {number}. {section['title']}", ""]
        if "error" in section:
            out += [f"Failed: {section['error']}", ""]
            continue
        out += [section["method"], ""]
        load = section.get("load")
        if load and None not in load:
            out += [f"Took {section['seconds']:.0f} s; the machine's 1-minute load average "
                    f"was {load[0]:.1f} at the start and {load[1]:.1f} at the end "
                    f"({results['machine']['cores']} cores).", ""]
        table = (throughput_table(section) if name == "throughput"
                 else engine_table(section) if name == "engine"
                 else claim_rows_table(section) if name == "claim_rows"
                 else figures_table(section))
        out += [*table, "", *ratios_table(section), ""]
        out += extras(section)
        if name == "pgbench":
            out += against_pgbench(results)
    return "\n".join(line.rstrip() for line in out).strip() + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("results", nargs="?", help="JSON from bench/run.py (default: stdin)")
    args = parser.parse_args(argv)
    text = Path(args.results).read_text() if args.results else sys.stdin.read()
    sys.stdout.write(render(json.loads(text)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
