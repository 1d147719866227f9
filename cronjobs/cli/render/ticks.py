"""A tick's report as output (`cronjobs tick`), and the due runs that wait for a handler.

Only what a tick prints: `cronjobs tick` imports this module and not the other renders
(nor what they read: core.explain, core.health, cronjobs.reports), see cronjobs.cli."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from cronjobs.cli.render.common import instant, slot_range, table
from cronjobs.core.materialise import Decided
from cronjobs.models import LostTick, WaitingRuns
from cronjobs.tick import TickReport
from cronjobs.timefmt import Times


def decided_json(d: Decided) -> dict[str, Any]:
    return {"job": d.job, "first_slot": instant(d.first_slot), "last_slot": instant(d.last_slot),
            "slot_count": d.slot_count, "outcome": d.outcome, "detail": d.detail}


def tick_json(report: TickReport) -> dict[str, Any]:
    m = report.materialise
    return {
        "tick_id": report.tick_id,
        "now": instant(report.now),
        "dry_run": report.dry_run,
        "counts": report.counts(),
        "concurrency": report.execute.concurrency,  # runs at once (auto: as sized)
        "invalid": m.invalid,
        "decisions": [decided_json(d) for d in m.decisions],
        "runs": [{"run_id": f.run_id, "job": f.job, "attempt": f.attempt,
                  "outcome": f.outcome, "status": f.status, "error": f.error}
                 for f in report.execute.finished],
        "handlers": list(report.handlers),
        "waiting_for_handlers": [waiting_json(w) for w in report.waiting],
        "lost_ticks_closed": [{"tick_id": t.id, "worker": t.worker, "tick_at": instant(t.tick_at)}
                              for t in report.lost_ticks],
    }


def waiting_json(w: WaitingRuns) -> dict[str, Any]:
    """Due runs waiting for a handler (a tick's, status's, explain's)."""
    return {"handler": w.handler, "runs": w.runs, "oldest_eligible_at": instant(w.oldest)}


def waiting_lines(waiting: Iterable[WaitingRuns]) -> list[str]:
    """For a tick's stderr: the due runs it left waiting for handlers it has not loaded."""
    return [f"{w.runs} due run(s) wait for handler {w.handler}, which no --app module of "
            "this tick registers (try --app MODULE)" for w in waiting]


def lost_tick_lines(lost: Iterable[LostTick], times: Times) -> list[str]:
    """For a tick's stderr: the earlier ticks it closed as lost."""
    return [f"closed tick {t.id} of worker {t.worker} (at {times.at(t.tick_at)}) as lost: it went "
            "away without recording its end" for t in lost]


def tick_summary(report: TickReport, times: Times) -> str:
    counts = ", ".join(f"{k} {v}" for k, v in report.counts().items())
    prefix = "dry run (nothing written): " if report.dry_run else "tick: "
    invalid = f"; invalid definitions: {', '.join(report.materialise.invalid)}" \
        if report.materialise.invalid else ""
    return f"{prefix}{counts} at {times.at(report.now)}{invalid}"


def decisions_text(report: TickReport, times: Times) -> str:
    rows = [(d.job, slot_range(d.first_slot, d.last_slot, d.slot_count, times), d.outcome,
             d.detail or "") for d in report.materialise.decisions]
    if not rows:
        return "nothing due"
    return table(["JOB", f"SLOT(S) ({times.label})", "DECISION", "DETAIL"], rows)
