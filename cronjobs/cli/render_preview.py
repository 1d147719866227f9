"""What `backfill`, `remove` and `ack --all` say before they act (and with --dry-run):
one line of what would happen (see cronjobs.cli.confirming)."""

from __future__ import annotations

from cronjobs.core.materialise import BackfillReport
from cronjobs.core.operations import Acknowledged
from cronjobs.timefmt import Times


def backfill_preview(b: BackfillReport, times: Times) -> str:
    line = f"backfill of {b.job} would create {b.created:,} run(s)"
    if b.created_slots:
        first, last = b.created_slots[0], b.created_slots[-1]
        line += (f", for {times.at(first)}" if first == last
                 else f", from {times.at(first)} to {times.at(last)}")
    if b.existing:
        line += f" ({b.existing:,} of the {len(b.slots):,} slot(s) in range already had a run)"
    return line


def remove_preview(name: str, waiting: int) -> str:
    return (f"removing {name} would cancel its {waiting:,} waiting run(s) (its history "
            "stays)")


def ack_all_preview(a: Acknowledged) -> str:
    ids = ", ".join(str(r.id) for r in a.runs[:10]) + (", ..." if len(a.runs) > 10 else "")
    return f"ack --all would acknowledge {len(a.runs):,} dead run(s) of {a.job}: {ids}"
