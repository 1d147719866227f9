"""The storage's benchmarks (issue 26: a hot queue partition, the history partitioned by
retirement day, retention by dropping days), each figure against a baseline of the same run.

    python bench/run.py --only storage --database-url URL          # all four, full size
    python bench/run.py --only storage_scale --storage-jobs 1000 --storage-history 100000
    python bench/run.py --only storage_scale --storage-parts dashboard \
        --storage-dashboard-ref main                                 # pages, before / after
    python bench/run.py --only storage_snapshot --snapshot-minutes 1
    python bench/run.py --only storage_snapshot --snapshot-minutes 3 --snapshot-vacuum 60
    python bench/run.py --only storage_retire --retire-sizes 10000,100000
    python bench/run.py --only storage_write                        # WAL and index entries
    python bench/run.py --only storage_verdict                      # /healthz, /metrics only

- ``storage_scale``: 100,000 definitions and 10,000,000 finished runs (``--storage-jobs``,
  ``--storage-history``) against the same database without the history: drains of queued
  no-op runs, 100,000 definitions due in one tick, every dashboard page's p95.
- ``storage_snapshot``: a REPEATABLE READ transaction held open while 4 ticks drain a fed
  backlog: throughput and dead rows of the hot tables before, during and after.
- ``storage_retire``: dropping one day of history against DELETE, the full upkeep, and a
  simulated month of every-minute jobs with 7-day retention (the database's size per day,
  ``--storage-plot``).
- ``storage_write``: WAL bytes and index entries written per run, and runs/s, of cronjobs
  before the storage work (``--storage-before-ref``), after it, pgqueuer and the hand loop.
- ``storage_verdict``: ``/healthz`` and ``/metrics`` at 100,000 definitions (``--storage-jobs``)
  in storage_scale's states (on time; every job's slot come since it was defined, the state
  its materialisation leaves; every job overdue), this tree against ``--verdict-before-ref``.

Nothing here asserts a time: targets are reported met or NOT met.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

from storage_retire import bench_storage_retire
from storage_scale import SCALE_PARTS, bench_storage_scale
from storage_snapshot import bench_storage_snapshot
from storage_verdict import bench_storage_verdict
from storage_write import bench_storage_write

__all__ = ["BENCHMARKS", "GROUPS", "SCALE_PARTS", "markdown"]

BENCHMARKS = {"storage_scale": bench_storage_scale, "storage_snapshot": bench_storage_snapshot,
              "storage_retire": bench_storage_retire, "storage_write": bench_storage_write,
              "storage_verdict": bench_storage_verdict}
GROUPS = {"storage": tuple(BENCHMARKS)}


# -- the Markdown tables ------------------------------------------------------------------------


def _num(value: float, unit: str) -> str:
    if unit == "s":
        return f"{value * 1000:,.0f} ms" if value < 10 else f"{value:,.1f} s"
    if unit == "x":
        return f"{value:.2f}\u00d7"
    if unit in ("runs/s", "rows", "B", "MB", "ms"):
        return f"{value:,.0f} {unit}" if unit != "ms" or value >= 10 else f"{value:.1f} ms"
    return f"{value:,.1f}"


def markdown(results: dict[str, Any]) -> str:
    """The storage sections of a run's JSON as Markdown tables (figures min / median,
    targets met or not)."""
    out: list[str] = []
    for name in BENCHMARKS:
        section = results["sections"].get(name)
        if section is None:
            continue
        out.append(f"### {section.get('title', name)}\n")
        if "error" in section:
            out.append(f"ERROR: {section['error']}\n")
            continue
        out.append(f"{section['method']}\n")
        out.append("| figure | min | median |\n|---|---|---|")
        for fig, v in section["figures"].items():
            if fig.startswith("page ") and ": p95" not in fig:
                continue  # every request's time: the p95 rows below say it
            out.append(f"| {fig} | {_num(v['min'], v['unit'])} | "
                       f"{_num(v['median'], v['unit'])} |")
        for r in section["ratios"]:
            out.append(f"| {r['name']} | {r['min']:.2f}\u00d7 | {r['median']:.2f}\u00d7 |")
        out.append("")
        if section["targets"]:
            out.append("| target | measured (min / median) | verdict |\n|---|---|---|")
            for t in section["targets"]:
                word = t["verdict"] if t["verdict"] == "met" else f"**{t['verdict']}**"
                out.append(f"| {t['text']} | {_num(t['measured_min'], t['unit'])} / "
                           f"{_num(t['measured'], t['unit'])} | {word} |")
            out.append("")
    return "\n".join(out) + "\n"


if __name__ == "__main__":
    print(markdown(json.loads(Path(sys.argv[1]).read_text())), end="")
