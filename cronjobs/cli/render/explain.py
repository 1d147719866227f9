"""What materialisation decided, or would, for one job over a range of time as output:
`explain` (each slot's story, and the due runs that wait) and `backfill`."""

from __future__ import annotations

from typing import Any

from cronjobs.cli.render.common import instant, slot_range, table
from cronjobs.cli.render.groups import group_json, group_wait_text
from cronjobs.cli.render.runs import run_json
from cronjobs.cli.render.ticks import waiting_json
from cronjobs.core.explain import REASONS, Explanation
from cronjobs.core.materialise import BackfillReport
from cronjobs.timefmt import Times


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
        rows.append((slot_range(r.first_slot, r.last_slot, r.slot_count, times), r.outcome, why))
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
