"""Plot the engine benchmark (runs/s at K processes, and the ratios to pgqueuer and to the
hand-written loop within the same run) from the JSON of ``bench/run.py``, as a PNG.

    python bench/plot.py results.json docs/engine-throughput.png

``bench/run.py --plot FILE`` does the same at the end of a run. Needs matplotlib (the
``bench`` extra).
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

MARKERS = {"cj_in_process": "o", "cj_in_process_64": "P", "cj_isolated": "s", "cj_shell": "^",
           "pgqueuer": "D", "handloop": "x"}


def plot(results: dict[str, Any], out: Path) -> None:
    import matplotlib  # noqa: PLC0415 - imported only to plot

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt  # noqa: PLC0415

    section = results["sections"]["engine"]
    figures, labels = section["figures"], section["extra"]["systems"]
    ks = section["extra"]["processes"]
    fig, (rates, ratios) = plt.subplots(1, 2, figsize=(12, 4.8))
    for key, label in labels.items():
        series = [figures.get(f"{key} x{k}: runs/s") for k in ks]
        if not any(series):
            continue
        xs = [k for k, f in zip(ks, series, strict=True) if f]
        medians = [f["median"] for f in series if f]
        lows = [f["median"] - f["min"] for f in series if f]
        rates.errorbar(xs, medians, yerr=[lows, [0] * len(lows)], marker=MARKERS.get(key, "."),
                       capsize=3, label=label)
    rates.set_yscale("log")
    rates.set_xscale("log", base=2)
    rates.set_xticks(ks, [str(k) for k in ks])
    rates.set_xlabel("worker processes (K)")
    rates.set_ylabel("runs/s (median; bar down to the min)")
    rates.set_title(f"{results['settings'].get('queued', 0):,} queued no-op jobs")
    rates.grid(True, which="both", alpha=0.3)
    rates.legend(fontsize=7)
    # (isolated runs: two orders below, in the table)
    for key in ("cj_in_process", "cj_in_process_64", "cj_shell"):
        for base, style in (("pgqueuer", "-"), ("handloop", ":")):
            series = [figures.get(f"{key} x{k} / {base} x{k}") for k in ks]
            if not any(series):
                continue
            xs = [k for k, f in zip(ks, series, strict=True) if f]
            ratios.plot(xs, [f["median"] for f in series if f], linestyle=style,
                        marker=MARKERS[key], label=f"{labels[key].split(' (')[0]} / {base}")
    ratios.axhline(1.5, color="tab:red", linewidth=0.8, linestyle="-")
    ratios.axhline(0.6, color="tab:red", linewidth=0.8, linestyle=":")
    ratios.text(ks[0], 1.5, " target in-process / pgqueuer = 1.5", fontsize=7, va="bottom")
    ratios.text(ks[0], 0.6, " target in-process / hand loop = 0.6", fontsize=7, va="bottom")
    ratios.set_yscale("log")
    ratios.set_xscale("log", base=2)
    ratios.set_xticks(ks, [str(k) for k in ks])
    ratios.set_xlabel("worker processes (K)")
    ratios.set_ylabel("ratio of runs/s within one repetition (median)")
    ratios.set_title("cronjobs / pgqueuer (solid), / hand-written loop (dotted), same run")
    ratios.grid(True, which="both", alpha=0.3)
    ratios.legend(fontsize=7)
    machine = results["machine"]
    fig.suptitle(f"cronjobs execution engine, {machine['cores']} cores, PostgreSQL "
                 f"{machine['postgresql']}, {results['started_at'][:10]}", fontsize=10)
    fig.tight_layout()
    out.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(out, dpi=110)
    plt.close(fig)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("results", help="JSON from bench/run.py --output")
    parser.add_argument("png", help="where to write the plot")
    args = parser.parse_args(argv)
    plot(json.loads(Path(args.results).read_text()), Path(args.png))
    return 0


if __name__ == "__main__":
    sys.exit(main())
