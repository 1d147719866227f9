"""Deleting old history in small batches: short transactions, no long locks."""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable
from dataclasses import dataclass

from cronjobs.db.store import Store

BATCH = 500


@dataclass(frozen=True)
class PruneReport:
    cutoff: dt.datetime
    runs: int
    skips: int
    ticks: int
    dry_run: bool


def in_batches(step: Callable[[], int], *, batch: int, max_batches: int | None) -> int:
    """Run ``step`` (one batch, its own short transaction: it returns how many rows it
    did) until a batch does fewer than ``batch`` rows, at most ``max_batches`` times (None:
    no bound). Returns the rows done in all."""
    total = done = 0
    while max_batches is None or done < max_batches:
        rows = step()
        total += rows
        done += 1
        if rows < batch:
            break
    return total


def prune(store: Store, *, older_than: dt.timedelta, keep_last: int = 0,
          dry_run: bool = False, batch: int = BATCH, max_batches: int | None = None,
          now: dt.datetime | None = None) -> PruneReport:
    """Delete finished runs (with their attempts), skip records and tick records older than
    ``older_than``, always keeping each job's latest success and latest failure and its
    ``keep_last`` newest runs. ``max_batches`` bounds the work (the tick prunes a little at
    a time). Ages are counted back from ``now`` (default: the database's clock)."""
    cutoff = (now if now is not None else store.now()) - older_than
    if dry_run:
        prunable = store.retention.count_prunable_runs(cutoff=cutoff, keep_last=keep_last)
        return PruneReport(cutoff, prunable, 0, 0, True)
    totals = {"runs": 0, "skips": 0, "ticks": 0}
    after: tuple[dt.datetime, int] | None = None

    def prune_runs() -> int:
        # each batch starts where the last one stopped: the runs kept on the way (a job's
        # latest, its keep_last newest) are not read again
        nonlocal after
        deleted, last = store.retention.prune_runs(cutoff=cutoff, keep_last=keep_last, batch=batch,
                                         after=after)
        after = last or after
        return deleted

    steps: dict[str, Callable[[], int]] = {
        "runs": prune_runs,
        "skips": lambda: store.retention.prune_skips(cutoff=cutoff, batch=batch),
        "ticks": lambda: store.retention.prune_ticks(cutoff=cutoff, batch=batch),
    }
    for kind, step in steps.items():
        totals[kind] = in_batches(step, batch=batch, max_batches=max_batches)
    return PruneReport(cutoff, totals["runs"], totals["skips"], totals["ticks"], False)
