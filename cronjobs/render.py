"""Turning results into output: aligned tables for people, stable JSON for machines.

The JSON shapes are documented in the README; change them only additively.
"""

from __future__ import annotations

import datetime as dt
import json
from collections.abc import Iterable, Sequence
from typing import Any

from cronjobs.definitions import DefineResult, Description, Listing, Preview, Slot
from cronjobs.durations import format_duration
from cronjobs.explain import REASONS, Explanation
from cronjobs.materialise import BackfillReport, Decided
from cronjobs.models import Definition, Run
from cronjobs.tick import TickReport


def to_json(value: Any) -> str:
    return json.dumps(value, indent=2, sort_keys=False, ensure_ascii=False)


def instant(value: dt.datetime | None) -> str | None:
    """An instant in UTC, ISO-8601 with an explicit offset."""
    return None if value is None else value.astimezone(dt.UTC).isoformat()


def seconds(value: dt.timedelta | None) -> int | None:
    return None if value is None else int(value.total_seconds())


def table(headers: Sequence[str], rows: Iterable[Sequence[object]]) -> str:
    """An aligned plain-text table."""
    cells = [[str(h) for h in headers]] + [["" if c is None else str(c) for c in r] for r in rows]
    widths = [max(len(row[i]) for row in cells) for i in range(len(headers))]
    lines = ["  ".join(c.ljust(w) for c, w in zip(row, widths, strict=True)).rstrip()
             for row in cells]
    return "\n".join(lines)


def short(value: dt.datetime | None) -> str:
    if value is None:
        return "-"
    return value.astimezone(dt.UTC).strftime("%Y-%m-%d %H:%M:%SZ")


def local_short(value: dt.datetime) -> str:
    return value.strftime("%Y-%m-%d %H:%M:%S %Z (%z)")


# -- definitions ----------------------------------------------------------------------------

def definition_json(d: Definition) -> dict[str, Any]:
    return {
        "id": d.id,
        "name": d.name,
        "schedule": d.schedule,
        "timezone": d.timezone,
        "kind": d.kind,
        "handler": d.handler,
        "command": d.command,
        "payload": d.payload,
        "state": d.state,
        "catchup": d.catchup,
        "catchup_limit": d.catchup_limit,
        "starting_deadline_seconds": seconds(d.starting_deadline),
        "overlap": d.overlap,
        "max_attempts": d.max_attempts,
        "backoff_seconds": seconds(d.backoff),
        "backoff_max_seconds": seconds(d.backoff_max),
        "timeout_seconds": seconds(d.timeout),
        "lease_seconds": seconds(d.lease),
        "paused_at": instant(d.paused_at),
        "paused_until": instant(d.paused_until),
        "pause_note": d.pause_note,
        "invalid_reason": d.invalid_reason,
        "next_due_at": instant(d.next_due_at),
        "created_at": instant(d.created_at),
        "updated_at": instant(d.updated_at),
    }


def slots_json(slots: Iterable[Slot]) -> list[dict[str, str | None]]:
    return [{"utc": instant(s.utc), "local": s.local.isoformat()} for s in slots]


def slots_table(slots: Sequence[Slot]) -> str:
    return table(["UTC", "LOCAL"], [(short(s.utc), local_short(s.local)) for s in slots])


def define_json(result: DefineResult) -> dict[str, Any]:
    return {
        "outcome": result.outcome,
        "job": definition_json(result.definition),
        "next": slots_json(result.next_slots),
    }


def define_text(result: DefineResult) -> str:
    d = result.definition
    head = f"{result.outcome} job {d.name!r}: {d.schedule} ({d.timezone}), {d.target}"
    return head + "\n" + settings_text(d) + "\n\nnext fire times:\n" + slots_table(
        result.next_slots)


def settings_text(d: Definition) -> str:
    pairs = [
        ("name", d.name),
        ("schedule", f"{d.schedule}  ({d.timezone})"),
        ("runs", d.target),
        ("payload", json.dumps(d.payload)),
        ("state", _state_text(d)),
        ("catch-up", d.catchup + (f" (limit {d.catchup_limit})" if d.catchup == "all" else "")),
        ("starting deadline", format_duration(d.starting_deadline)),
        ("overlap", d.overlap),
        ("max attempts", str(d.max_attempts)),
        ("backoff", f"{format_duration(d.backoff)} doubling, up to "
                    f"{format_duration(d.backoff_max)}"),
        ("timeout", format_duration(d.timeout)),
        ("lease", format_duration(d.lease)),
        ("created", short(d.created_at)),
        ("updated", short(d.updated_at)),
    ]
    width = max(len(k) for k, _ in pairs)
    return "\n".join(f"  {k.ljust(width)}  {v}" for k, v in pairs)


def _state_text(d: Definition) -> str:
    if d.invalid_reason is not None:
        return f"invalid: {d.invalid_reason}"
    if d.paused_at is not None:
        extra = f" until {short(d.paused_until)}" if d.paused_until else ""
        note = f" ({d.pause_note})" if d.pause_note else ""
        return f"paused since {short(d.paused_at)}{extra}{note}"
    return "active"


def list_json(listings: Sequence[Listing]) -> list[dict[str, Any]]:
    out = []
    for item in listings:
        entry = definition_json(item.definition)
        if item.problem is not None:
            entry["state"] = "invalid"
            entry["invalid_reason"] = item.problem
        entry["last_run_status"] = item.summary.last_run_status
        entry["last_run_at"] = instant(item.summary.last_run_at)
        out.append(entry)
    return out


def list_text(listings: Sequence[Listing]) -> str:
    if not listings:
        return "no jobs defined (add one with `cronjobs define NAME SCHEDULE`)"
    rows = []
    for item in listings:
        d = item.definition
        state = "invalid" if item.problem is not None else d.state
        last = item.summary.last_run_status or "-"
        if item.summary.last_run_at is not None:
            last += " " + short(item.summary.last_run_at)
        rows.append((d.name, d.schedule, d.timezone, state,
                     short(d.next_due_at) if item.problem is None else "-", last, d.target))
    text = table(["NAME", "SCHEDULE", "TZ", "STATE", "NEXT (UTC)", "LAST RUN", "RUNS"], rows)
    problems = [f"warning: job {i.definition.name!r} cannot be evaluated: {i.problem}"
                for i in listings if i.problem is not None]
    return "\n".join([text, *problems])


def describe_json(desc: Description) -> dict[str, Any]:
    entry = definition_json(desc.definition)
    if desc.problem is not None:
        entry["state"] = "invalid"
        entry["invalid_reason"] = desc.problem
    return {"job": entry, "next": slots_json(desc.next_slots),
            "recent_runs": [run_json(r) for r in desc.recent_runs]}


def describe_text(desc: Description) -> str:
    parts = [settings_text(desc.definition), ""]
    if desc.problem is not None:
        parts.append(f"cannot be evaluated: {desc.problem}")
    else:
        parts += ["next fire times:", slots_table(desc.next_slots)]
    parts.append("")
    if desc.recent_runs:
        parts += ["recent runs:", runs_table(desc.recent_runs)]
    else:
        parts.append("no runs yet")
    return "\n".join(parts)


def run_json(r: Run) -> dict[str, Any]:
    return {
        "id": r.id,
        "scheduled_for": instant(r.scheduled_for),
        "trigger": r.trigger,
        "status": r.status,
        "attempt": r.attempt,
        "max_attempts": r.max_attempts,
        "eligible_at": instant(r.eligible_at),
        "started_at": instant(r.started_at),
        "finished_at": instant(r.finished_at),
        "exit_code": r.exit_code,
        "error": r.error,
    }


def runs_table(runs: Sequence[Run]) -> str:
    return table(
        ["ID", "SLOT (UTC)", "TRIGGER", "STATUS", "ATTEMPT", "FINISHED", "ERROR"],
        [(r.id, short(r.scheduled_for), r.trigger, r.status, f"{r.attempt}/{r.max_attempts}",
          short(r.finished_at), (r.error or "")[:60]) for r in runs],
    )


def preview_json(p: Preview) -> dict[str, Any]:
    return {"schedule": p.expression, "timezone": p.timezone, "job": p.job,
            "from": instant(p.start), "next": slots_json(p.slots)}


def preview_text(p: Preview) -> str:
    return slots_table(p.slots)


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
        "invalid": m.invalid,
        "decisions": [decided_json(d) for d in m.decisions],
        "runs": [{"run_id": f.run_id, "job": f.job, "attempt": f.attempt,
                  "outcome": f.outcome, "status": f.status, "error": f.error}
                 for f in report.execute.finished],
    }


def tick_summary(report: TickReport) -> str:
    counts = ", ".join(f"{k} {v}" for k, v in report.counts().items())
    prefix = "dry run (nothing written): " if report.dry_run else "tick: "
    invalid = f"; invalid definitions: {', '.join(report.materialise.invalid)}" \
        if report.materialise.invalid else ""
    return f"{prefix}{counts} at {short(report.now)}{invalid}"


def decisions_text(report: TickReport) -> str:
    rows = [(d.job, _range(d.first_slot, d.last_slot, d.slot_count), d.outcome, d.detail or "")
            for d in report.materialise.decisions]
    if not rows:
        return "nothing due"
    return table(["JOB", "SLOT(S) (UTC)", "DECISION", "DETAIL"], rows)


def _range(first: dt.datetime, last: dt.datetime, count: int | None) -> str:
    if first == last:
        return short(first)
    many = f"{count} slots" if count is not None else "many slots"
    return f"{short(first)} .. {short(last)} ({many})"


def explain_json(e: Explanation) -> dict[str, Any]:
    return {
        "job": e.job,
        "from": instant(e.start),
        "to": instant(e.end),
        "slots": [{
            "first_slot": instant(r.first_slot), "last_slot": instant(r.last_slot),
            "slot_count": r.slot_count, "outcome": r.outcome, "reason": r.reason,
            "detail": r.detail, "run": run_json(r.run) if r.run is not None else None,
        } for r in e.rows],
    }


def explain_text(e: Explanation) -> str:
    if not e.rows:
        return (f"no slots of {e.job!r} between {short(e.start)} and {short(e.end)} "
                f"(schedule {e.definition.schedule!r}, {e.definition.timezone})")
    rows = []
    for r in e.rows:
        if r.run is not None:
            why = f"run {r.run.id}: {r.run.status} ({r.run.trigger})"
        elif r.reason is not None:
            why = REASONS.get(r.reason, r.reason) + (f" ({r.detail})" if r.detail else "")
        else:
            why = r.detail or ""
        rows.append((_range(r.first_slot, r.last_slot, r.slot_count), r.outcome, why))
    return table(["SLOT(S) (UTC)", "OUTCOME", "WHY"], rows)


def backfill_json(b: BackfillReport) -> dict[str, Any]:
    return {"job": b.job, "slots": [instant(s) for s in b.slots], "created": b.created,
            "existing": b.existing}


def backfill_text(b: BackfillReport) -> str:
    return (f"backfill of {b.job!r}: {len(b.slots)} slot(s) in range, {b.created} run(s) "
            f"created, {b.existing} already had a run")
