"""Ticks as output: a tick's report, `explain`, `backfill`, and the due runs that wait
(for a handler, for a group)."""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterable
from typing import Any

from cronjobs.cli.render.common import instant, table
from cronjobs.cli.render.runs import run_json
from cronjobs.core.explain import REASONS, Explanation
from cronjobs.core.materialise import BackfillReport, Decided
from cronjobs.models import LostTick, WaitingRuns
from cronjobs.reports import GroupUsage
from cronjobs.tick import TickReport
from cronjobs.timefmt import Times

# -- tick, explain, backfill ---------------------------------------------------------------

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
    rows = [(d.job, _range(d.first_slot, d.last_slot, d.slot_count, times), d.outcome,
             d.detail or "") for d in report.materialise.decisions]
    if not rows:
        return "nothing due"
    return table(["JOB", f"SLOT(S) ({times.label})", "DECISION", "DETAIL"], rows)


def _range(first: dt.datetime, last: dt.datetime, count: int | None, times: Times) -> str:
    if first == last:
        return times.at(first)
    many = f"{count:,} slots" if count is not None else "many slots"
    return f"{times.span(first, last)}  ({many})"


def explain_json(e: Explanation) -> dict[str, Any]:
    return {
        "job": e.job,
        "removed_at": instant(e.definition.removed_at),  # the job's, when it was removed
        "from": instant(e.start),
        "to": instant(e.end),
        "slots": [{
            "first_slot": instant(r.first_slot), "last_slot": instant(r.last_slot),
            "slot_count": r.slot_count, "outcome": r.outcome, "reason": r.reason,
            "detail": r.detail, "run": run_json(r.info) if r.info is not None else None,
            "folded": r.folded, "first_run_id": r.first_run_id, "last_run_id": r.last_run_id,
        } for r in e.rows],
        "waiting_for_handler": waiting_json(e.waiting) if e.waiting is not None else None,
        "one_off_runs": [run_json(r) for r in e.one_offs],
        "group": group_json(e.group) if e.group is not None else None,
    }


def group_json(g: GroupUsage) -> dict[str, Any]:
    return {"name": g.name, "max_running": g.max_running, "jobs": g.jobs,
            "running": g.running, "waiting": g.waiting, "full": g.full}


def group_wait_text(g: GroupUsage) -> str:
    """Why a group's due runs wait, in words (explain, status)."""
    return (f"{g.waiting} due run(s) of group {g.name} wait for a free slot: "
            f"{g.running} of {g.max_running} running")


def _explain_waiting(e: Explanation, times: Times) -> str:
    if e.waiting is None:
        return ""
    w = e.waiting
    return (f"\n{w.runs} due run(s) wait for handler {w.handler}, since "
            f"{times.when(w.oldest)}: no tick of the last 5 minutes registers it (try "
            "--app MODULE on a tick)")


def _explain_one_offs(e: Explanation, times: Times) -> str:
    if e.group is not None and e.group.full and e.group.waiting:
        return "\n" + group_wait_text(e.group) + _explain_one_offs_only(e, times)
    return _explain_one_offs_only(e, times)


def _explain_one_offs_only(e: Explanation, times: Times) -> str:
    return "".join(f"\none-off run {r.id} scheduled manually for "
                   f"{times.when(r.next_attempt_at)} (the overlap policy applies then)"
                   for r in e.one_offs)


def explain_text(e: Explanation, times: Times) -> str:
    """One line per entry: a slot, or a folded stretch of slots with the same story."""
    if not e.rows:
        return (f"no slots of {e.job} between {times.at(e.start)} and {times.at(e.end)} "
                f"(schedule {e.definition.schedule}, {e.definition.timezone})"
                + _explain_waiting(e, times) + _explain_one_offs(e, times) + _removed(e, times))
    rows = []
    for r in e.rows:
        if r.run is not None:
            why = f"run {r.run.id} ({r.run.trigger}): {r.detail}"
        elif r.first_run_id is not None:
            why = f"runs {r.first_run_id} to {r.last_run_id}: {r.detail}"
        elif r.reason is not None:
            why = REASONS.get(r.reason, r.reason) + (f" ({r.detail})" if r.detail else "")
        else:
            why = r.detail or ""
        rows.append((_range(r.first_slot, r.last_slot, r.slot_count, times), r.outcome, why))
    return (table([f"SLOT(S) ({times.label})", "OUTCOME", "WHY"], rows)
            + _explain_waiting(e, times) + _explain_one_offs(e, times) + _removed(e, times))


def _removed(e: Explanation, times: Times) -> str:
    removed = e.definition.removed_at
    return "" if removed is None else (f"\n{e.job} was removed {times.when(removed)}: no slot "
                                       "of it runs after that")


def backfill_json(b: BackfillReport) -> dict[str, Any]:
    return {"job": b.job, "slots": [instant(s) for s in b.slots], "created": b.created,
            "existing": b.existing}


def backfill_text(b: BackfillReport) -> str:
    return (f"backfill of {b.job}: {len(b.slots)} slot(s) in range, {b.created} run(s) "
            f"created, {b.existing} already had a run")
