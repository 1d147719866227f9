"""Turning results into output: aligned tables for people, stable JSON for machines.

The JSON shapes are documented in docs/reference/json.md; change them only additively.
"""

from __future__ import annotations

import datetime as dt
import json
from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING, Any

from cronjobs.core.explain import REASONS, Explanation
from cronjobs.core.health import (
    DEFAULT_ROWS_CAP,
    Status,
    Storage,
    describe_holder,
    lateness_json,
    seconds_text,
    storage_json,
)
from cronjobs.core.materialise import BackfillReport, Decided
from cronjobs.core.retention import Retention
from cronjobs.durations import format_duration
from cronjobs.models import Definition, LostTick, WaitingRuns
from cronjobs.reports import Delivery, GroupUsage, StartLateness
from cronjobs.tick import TickReport
from cronjobs.timefmt import Times, in_zone, iso
from cronjobs.validation import mask_url

# For annotations only: the tick renders its report with this module, and these modules
# import what only the other commands use (cron-descriptor, for schedules in words).
if TYPE_CHECKING:
    from cronjobs.core.definitions import DefineResult, Description, Listing, Preview, Slot
    from cronjobs.core.facts import AttemptInfo, JobInfo, RunInfo
    from cronjobs.core.operations import Acknowledged, RunDetail


def to_json(value: Any) -> str:
    return json.dumps(value, indent=2, sort_keys=False, ensure_ascii=False)


instant = iso  # every instant in JSON: ISO 8601 in UTC (cronjobs.timefmt)


def seconds(value: dt.timedelta | None) -> int | None:
    return None if value is None else int(value.total_seconds())


def table(headers: Sequence[str], rows: Iterable[Sequence[object]]) -> str:
    """An aligned plain-text table."""
    cells = [[str(h) for h in headers]] + [["" if c is None else str(c) for c in r] for r in rows]
    widths = [max(len(row[i]) for row in cells) for i in range(len(headers))]
    lines = ["  ".join(c.ljust(w) for c, w in zip(row, widths, strict=True)).rstrip()
             for row in cells]
    return "\n".join(lines)




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
        "alert_command": d.alert_command,
        "alert_on_failure": d.alert_on_failure,
        "pause_after_failures": d.pause_after_failures,
        "source": d.source,
        "group": d.group_name,
        "notify": [mask_url(url) for url in d.notify_urls],  # secrets: masked
        "notify_on": list(d.notify_on),
        # its own retention of finished runs; null: the global one (`cronjobs retention`)
        "keep_succeeded_seconds": seconds(d.keep_succeeded),
        "keep_failed_seconds": seconds(d.keep_failed),
        "consecutive_failures": d.consecutive_failures,
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


def slots_table(slots: Sequence[Slot], times: Times) -> str:
    """Fire times as the reader's clock shows them, and on the job's own wall clock."""
    return table([f"TIME ({times.label})", "JOB'S CLOCK"],
                 [(times.when(s.utc), in_zone(s.local, s.local.tzinfo)) for s in slots])


def define_json(result: DefineResult) -> dict[str, Any]:
    return {
        "outcome": result.outcome,
        "job": definition_json(result.definition),
        "description": result.description,
        "next": slots_json(result.next_slots),
        "warning": result.warning,
    }


def define_text(result: DefineResult, times: Times) -> str:
    """Two lines: what was done to which job, and when it runs next (the rest:
    `cronjobs describe NAME`)."""
    d = result.definition
    outcome = {"created": "defined", "updated": "updated", "unchanged": "no change to"}.get(
        result.outcome, result.outcome)
    head = f"{outcome} {d.name}: {d.schedule}" + (f" ({result.description})"
                                                 if result.description else "")
    first = result.next_slots[0].utc if result.next_slots else None
    if d.paused_at is not None:
        nxt = "paused"
    elif first is None:
        nxt = "no next fire time"
    else:
        nxt = f"next {times.when(first)}"
    return f"{head}\n{d.target}; {nxt}"


def settings_text(d: Definition, description: str | None, times: Times) -> str:
    pairs = [
        ("name", d.name),
        ("schedule", f"{d.schedule}  ({d.timezone})"),
        *([("in words", description)] if description else []),
        ("runs", d.target),
        ("payload", json.dumps(d.payload)),
        ("state", _state_text(d, times)),
        ("catch-up", d.catchup + (f" (limit {d.catchup_limit})" if d.catchup == "all" else "")),
        ("starting deadline", format_duration(d.starting_deadline)),
        ("overlap", d.overlap),
        ("max attempts", str(d.max_attempts)),
        ("backoff", f"{format_duration(d.backoff)} doubling, up to "
                    f"{format_duration(d.backoff_max)}"),
        ("timeout", format_duration(d.timeout)),
        ("lease", format_duration(d.lease)),
        ("alert", (d.alert_command or "-") + (" (also on failure)" if d.alert_on_failure
                                               else "")),
        ("pause after", f"{d.pause_after_failures} failures in a row"
         if d.pause_after_failures else "-"),
        ("group", d.group_name or "-"),
        ("keep succeeded", _keep_text(d.keep_succeeded)),
        ("keep failed", _keep_text(d.keep_failed)),
        ("source", d.source or "made by hand (define)"),
        ("notify", ", ".join(mask_url(url) for url in d.notify_urls)
         + f" (on {', '.join(d.notify_on)})" if d.notify_urls else "-"),
        ("created", times.when(d.created_at)),
        ("updated", times.when(d.updated_at)),
    ]
    width = max(len(k) for k, _ in pairs)
    return "\n".join(f"  {k.ljust(width)}  {v}" for k, v in pairs)


def _keep_text(keep: dt.timedelta | None) -> str:
    """A job's own retention, or that it keeps the global one."""
    return "default (see `cronjobs retention`)" if keep is None else format_duration(keep)


def _state_text(d: Definition, times: Times) -> str:
    if d.invalid_reason is not None:
        return f"invalid: {d.invalid_reason}"
    if d.paused_at is not None:
        extra = f" until {times.when(d.paused_until)}" if d.paused_until else ""
        note = f" ({d.pause_note})" if d.pause_note else ""
        return f"paused since {times.when(d.paused_at)}{extra}{note}"
    return "active"


def job_json(d: Definition, info: JobInfo) -> dict[str, Any]:
    """A job's settings and facts (:mod:`cronjobs.core.facts`)."""
    entry = definition_json(d)
    entry["state"] = info.state
    entry["paused"] = info.paused
    entry["invalid_reason"] = info.problem
    entry["next_fire_at"] = instant(info.next_fire_at)
    entry["description"] = info.description
    return entry


def list_json(listings: Sequence[Listing]) -> list[dict[str, Any]]:
    out = []
    for item in listings:
        entry = job_json(item.definition, item.info)
        entry["last_run_status"] = item.info.last_run_state
        entry["last_run_at"] = instant(item.info.last_run_at)
        entry["next_at"] = instant(item.info.next_fire_at)  # (next_fire_at's older name)
        out.append(entry)
    return out


def job_state_text(info: JobInfo, at: Any = None) -> str:
    """A job's state in a word or three: "paused until ..." when its pause has an end."""
    if info.paused and info.paused_until is not None and info.state == "paused":
        return f"paused until {(at or Times(utc=True).at)(info.paused_until)}"
    return info.state


def list_text(listings: Sequence[Listing], times: Times, *, wide: bool = False) -> str:
    """The jobs as a table; ``wide`` adds each schedule in words (DESCRIPTION), last."""
    at = times.when
    if not listings:
        return "no jobs defined (add one with `cronjobs define NAME SCHEDULE`)"
    rows = []
    for item in listings:
        info = item.info
        last = info.last_run_state or "-"
        if info.last_run_at is not None:
            last += " " + at(info.last_run_at)
        row = [info.name, info.schedule, info.timezone, job_state_text(info, at),
               at(info.next_fire_at), last, info.target]
        if wide:
            row.append(info.description or "-")
        rows.append(row)
    headers = ["NAME", "SCHEDULE", "TZ", "STATE", f"NEXT ({times.label})", "LAST RUN", "RUNS"]
    text = table([*headers, "DESCRIPTION"] if wide else headers, rows)
    problems = [f"warning: job {i.info.name} cannot be evaluated: {i.info.problem}"
                for i in listings if i.info.problem is not None]
    return "\n".join([text, *problems])


def describe_json(desc: Description) -> dict[str, Any]:
    entry = job_json(desc.definition, desc.info)
    return {"job": entry, "description": desc.description, "next": slots_json(desc.next_slots),
            "recent_runs": [run_json(r) for r in desc.recent_runs]}


def describe_text(desc: Description, times: Times) -> str:
    parts = [settings_text(desc.definition, desc.description, times), ""]
    if desc.problem is not None:
        parts.append(f"cannot be evaluated: {desc.problem}")
    elif not desc.next_slots and desc.info.paused:
        parts.append(f"next fire times: none while paused (`cronjobs resume "
                     f"{desc.info.name}` resumes it)")
    else:
        parts += ["next fire times:", slots_table(desc.next_slots, times)]
    parts.append("")
    if desc.recent_runs:
        parts += ["recent runs:", runs_table(desc.recent_runs, times)]
    else:
        parts.append("no runs yet")
    return "\n".join(parts)


def run_json(r: RunInfo) -> dict[str, Any]:
    """A run's facts (:mod:`cronjobs.core.facts`). ``attempt``, ``max_attempts`` and
    ``eligible_at`` are the older names of ``attempts_used``, ``attempts_allowed`` and
    ``next_attempt_at``; ``acknowledged_at``/``acknowledged_by`` are null unless the run's
    latest death is acknowledged."""
    return {
        "id": r.id,
        "job": r.job,
        "scheduled_for": instant(r.scheduled_for),
        "trigger": r.trigger,
        "status": r.state,
        "attempts_used": r.attempts_used,
        "attempts_allowed": r.attempts_allowed,
        "interrupted_attempts": r.interrupted_attempts,
        "attempt": r.attempts_used,
        "max_attempts": r.attempts_allowed,
        "next_attempt_at": instant(r.next_attempt_at),
        "eligible_at": instant(r.next_attempt_at),
        "started_at": instant(r.started_at),
        "finished_at": instant(r.finished_at),
        "lateness_seconds": (None if r.lateness is None
                             else round(r.lateness.total_seconds(), 3)),
        "late": r.late,
        "exit_code": r.exit_code,
        "error": r.error,
        "result": r.result,
        "retry_count": r.retry_count,
        "retry_of": r.retry_of,
        "cancel_requested_at": instant(r.cancel_requested_at),
        "acknowledged": r.acknowledged,
        "needs_acknowledgement": r.needs_acknowledgement,
        "acknowledged_at": instant(r.acknowledged_at),
        "acknowledged_by": r.acknowledged_by,
    }


def attempts_text(r: RunInfo) -> str:
    """Attempts used of those allowed (an interruption uses none)."""
    return f"{r.attempts_used}/{r.attempts_allowed}"


def runs_table(runs: Sequence[RunInfo], times: Times) -> str:
    at = times.when
    return table(
        ["ID", f"SLOT ({times.label})", "TRIGGER", "STATUS", "ATTEMPTS", "FINISHED", "ERROR"],
        [(r.id, at(r.scheduled_for), r.trigger, r.state, attempts_text(r),
          at(r.finished_at), (r.error or "")[:60]) for r in runs],
    )


def preview_json(p: Preview) -> dict[str, Any]:
    return {"schedule": p.expression, "timezone": p.timezone, "job": p.job,
            "description": p.description, "from": instant(p.start),
            "next": slots_json(p.slots), "note": p.note}


def preview_text(p: Preview, times: Times) -> str:
    return p.description + "\n\n" + (p.note if p.note is not None
                                      else slots_table(p.slots, times))


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
                + _explain_waiting(e, times) + _explain_one_offs(e, times))
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
            + _explain_waiting(e, times) + _explain_one_offs(e, times))


def backfill_json(b: BackfillReport) -> dict[str, Any]:
    return {"job": b.job, "slots": [instant(s) for s in b.slots], "created": b.created,
            "existing": b.existing}


def backfill_text(b: BackfillReport) -> str:
    return (f"backfill of {b.job}: {len(b.slots)} slot(s) in range, {b.created} run(s) "
            f"created, {b.existing} already had a run")


# -- operating --------------------------------------------------------------------------------

def ack_json(a: Acknowledged) -> dict[str, Any]:
    return {"job": a.job, "already": a.already,
            "acknowledged": [run_json(r) for r in a.runs]}


def ack_text(a: Acknowledged, times: Times) -> str:
    if a.already:
        r = a.runs[0]
        return (f"run {r.id} of {a.job} was already acknowledged "
                f"({times.when(r.acknowledged_at)} by {r.acknowledged_by or 'unknown'})")
    if not a.runs:
        return f"no dead run of {a.job} waits for acknowledgement"
    ids = ", ".join(str(r.id) for r in a.runs)
    return f"acknowledged {len(a.runs)} dead run(s) of {a.job}: {ids}"


def runs_list_json(found: Sequence[RunInfo]) -> list[dict[str, Any]]:
    return [run_json(run) for run in found]


def runs_list_text(found: Sequence[RunInfo], times: Times) -> str:
    at = times.when
    if not found:
        return "no runs"
    return table(
        ["ID", "JOB", f"SLOT ({times.label})", "TRIGGER", "STATUS", "ATTEMPTS", "FINISHED",
         "ERROR"],
        [(r.id, r.job, at(r.scheduled_for), r.trigger, r.state, attempts_text(r),
          at(r.finished_at), (r.error or "")[:60])
         for r in found])


def attempt_json(a: AttemptInfo) -> dict[str, Any]:
    duration = a.duration.total_seconds() if a.duration is not None else None
    return {"attempt": a.number, "worker": a.worker, "started_at": instant(a.started_at),
            "finished_at": instant(a.finished_at), "duration_seconds": duration,
            "outcome": a.outcome, "counted": a.counted, "exit_code": a.exit_code,
            "error": a.error, "output_tail": a.output_tail}


def show_json(detail: RunDetail) -> dict[str, Any]:
    info = detail.info
    data = run_json(info)
    data["output_tail"] = info.output_tail
    data["lease_owner"] = info.held_by
    data["lease_expires_at"] = instant(info.lease_expires_at)
    data["attempts"] = [attempt_json(a) for a in info.attempts]
    data["notifications"] = [delivery_json(n) for n in detail.deliveries]
    return data


def delivery_json(n: Delivery) -> dict[str, Any]:
    """Where one notification stands: ``status`` pending (with ``next_attempt_at`` and
    ``expires_at``), sent (``delivered_at``), failed or expired (``error``: the last)."""
    return {"event": n.event, "attempt": n.attempt, "target": n.target, "status": n.status,
            "delivery_id": None if n.delivery_id is None else str(n.delivery_id),
            "delivery_attempts": n.rounds, "tries": n.tries, "http_status": n.http_status,
            "error": n.error, "sent_at": instant(n.sent_at),
            "delivered_at": instant(n.sent_at) if n.status == "sent" else None,
            "next_attempt_at": instant(n.next_attempt_at),
            "expires_at": instant(n.expires_at)}


def deliveries_text(deliveries: Sequence[Delivery], times: Times) -> list[str]:
    at = times.when
    if not deliveries:
        return []
    return ["", "notifications:"] + [
        f"  {n.event} (attempt {n.attempt}) to {n.target}: {n.standing(at)}"
        for n in deliveries]


def show_text(detail: RunDetail, times: Times) -> str:
    at = times.when
    r = detail.info
    lines = [
        f"run {r.id} of {r.job}: {r.state}",
        f"  slot        {at(r.scheduled_for)}  ({r.trigger})",
        f"  attempts    {attempts_used_text(r)}"
        + (f"; retried by an operator {_times_word(r.retry_count)}" if r.retry_count else ""),
    ]
    if r.next_attempt_at is not None:
        lines.append(f"  next try    {at(r.next_attempt_at)}")
    if r.held_by is not None:
        lines.append(f"  held by     {r.held_by} until {at(r.lease_expires_at)}")
    if r.lateness is not None:
        lines.append(f"  started     {lateness_text(r)}")
    if r.error:
        lines.append(f"  error       {r.error}")
    if r.state == "dead":
        lines.append(f"  ack         acknowledged {at(r.acknowledged_at)} by "
                     f"{r.acknowledged_by or 'unknown'}" if r.acknowledged
                     else f"  ack         not acknowledged: `cronjobs ack {r.id}` once handled")
    if r.result is not None:
        lines.append(f"  result      {json.dumps(r.result)}")
    for a in r.attempts:
        duration = (f"{a.duration.total_seconds():.1f}s" if a.duration is not None
                    else "running")
        lines += ["", f"attempt {a.number}: {a.outcome} on {a.worker}, "
                      f"{at(a.started_at)}, {duration}"
                      + (f", exit code {a.exit_code}" if a.exit_code is not None else "")
                      + ("" if a.counted else " (uses no attempt)")]
        if a.error:
            lines.append(f"  error: {a.error}")
        if a.output_tail:
            lines.append("  output (tail):")
            lines += [f"    {line}" for line in a.output_tail.rstrip("\n").splitlines()[-20:]]
    lines += deliveries_text(detail.deliveries, times)
    return "\n".join(lines)


def attempts_used_text(r: RunInfo) -> str:
    """"1 of 3 used", and the interruptions that used none."""
    text = f"{r.attempts_used} of {r.attempts_allowed} used"
    if r.interrupted_attempts:
        text += f" ({r.interrupted_attempts} interrupted, not counted)"
    return text


def lateness_text(r: RunInfo) -> str:
    """How late a scheduled run's first attempt started after its slot."""
    seconds_late = r.lateness.total_seconds() if r.lateness is not None else 0.0
    return (f"{format_duration(r.lateness)} after its slot (late)" if r.late
            else f"on time ({seconds_late:.0f}s after its slot)")


# -- retention ----------------------------------------------------------------------------------

RETAINED = {"succeeded": "succeeded and cancelled runs (a job's --keep-succeeded wins)",
            "failed": "dead runs (a job's --keep-failed wins), webhook notification records",
            "skips": "records of slots not run (`explain` reads them)",
            "ticks": "records of ticks"}


def retention_json(r: Retention) -> dict[str, Any]:
    kept = r.settings
    return {
        **{f"{name}_seconds": seconds(getattr(kept, name)) for name in RETAINED},
        "retired_before": instant(kept.retired_before),
        "updated_at": instant(kept.updated_at),
        "changed": {name: {"old_seconds": seconds(old), "new_seconds": seconds(new)}
                    for name, (old, new) in r.changed.items()},
    }


def retention_text(r: Retention, times: Times) -> str:
    kept = r.settings
    lines = []
    if r.changed:
        lines.append("set retention: " + ", ".join(
            f"{name} {format_duration(old)} -> {format_duration(new)}"
            for name, (old, new) in r.changed.items()))
    lines.append(table(["KEEP", "FOR", "WHAT"],
                       [(name, format_duration(getattr(kept, name)), what)
                        for name, what in RETAINED.items()]))
    lines.append("")
    lines.append("retired   " + (f"history retiring before {times.at(kept.retired_before)}"
                                  " may be gone" if kept.retired_before is not None
                                  else "nothing yet"))
    lines.append(f"updated   {times.when(kept.updated_at)}")
    return "\n".join(lines)


def status_json(st: Status) -> dict[str, Any]:
    n = st.numbers
    return {
        "now": instant(st.now),
        "healthy": st.healthy,
        "problems": st.problems,
        "more_problems": st.more_problems,
        "last_tick": {"at": instant(n.last_tick_at), "worker": n.last_tick_worker,
                      "status": n.last_tick_status},
        "ticks_last_hour": n.ticks_last_hour,
        "lost_ticks": {"last_day": n.lost_ticks_last_day,
                       "latest": {"worker": n.last_lost_tick_worker,
                                  "at": instant(n.last_lost_tick_at)}
                       if n.last_lost_tick_at is not None else None},
        "ticks_per_minute": round(n.ticks_last_hour / 60, 2),
        "backlog": {"runs": n.backlog, "oldest_eligible_at": instant(n.backlog_oldest)},
        "running": [{"run_id": r.id, "job": r.job, "attempt": r.attempt,
                     "worker": r.lease_owner, "started_at": instant(r.started_at),
                     "heartbeat_at": instant(r.heartbeat_at),
                     "lease_expires_at": instant(r.lease_expires_at)}
                    for r in st.running],
        "failed_last_day": n.failed_last_day,
        "dead_last_day": n.dead_last_day,
        "dead_unacknowledged": st.dead_unacknowledged,
        "waiting_for_handlers": [waiting_json(w) for w in st.waiting],
        "waiting_for_groups": [group_json(g) for g in st.groups],
        "jobs": [{"name": j.name, "state": "invalid" if j.invalid_reason else
                  "paused" if j.paused_at else "active",
                  "invalid_reason": j.invalid_reason,
                  "last_success_at": instant(j.last_success_at),
                  "overdue": st.overdue.get(j.name),
                  "dead_unacknowledged": j.dead_unacknowledged} for j in st.jobs],
        "warnings": st.warnings,
        "start_lateness": lateness_json(st.lateness) if st.lateness is not None else None,
        "storage": storage_json(st.storage) if st.storage is not None else None,
    }


def lateness_lines(late: StartLateness) -> list[str]:
    """`cronjobs status`'s start lateness: p50 / p99 over the last hour and the last day."""
    def window(runs: int, p50: float | None, p99: float | None) -> str:
        if runs == 0 or p50 is None or p99 is None:
            return "no run started"
        return f"p50 {seconds_text(p50)}, p99 {seconds_text(p99)} ({runs} run(s))"

    return [f"start lateness  last hour {window(late.hour_runs, late.hour_p50, late.hour_p99)}"
            f"; last day {window(late.day_runs, late.day_p50, late.day_p99)}"]


def storage_lines(st: Storage, at: Any) -> list[str]:
    """The storage's lines of `cronjobs status` (docs/explanation/storage.md, "Storage health")."""
    lines = []
    for i, t in enumerate(st.hot):
        vacuumed = (f"autovacuum {at(t.last_autovacuum)}" if t.last_autovacuum is not None
                    else "never autovacuumed")
        label = "hot tables" if i == 0 else ""
        lines.append(f"{label:<16}{t.name}: {t.live} live, {t.dead} dead ({vacuumed})")
    holder = st.oldest_holder
    if holder is None:
        lines.append("xmin holder     none")
    else:
        held = st.held_for(holder)
        age = (f"for {format_duration(held)}, " if held is not None else "")
        query = f": {holder.query}" if holder.query else ""
        lines.append(f"xmin holder     {describe_holder(holder)} {age}"
                     f"{holder.xid_age} transactions{query}")
    h = st.history
    oldest = (f", oldest {h.oldest_partition} (retires by {at(h.oldest_until)})"
              if h.oldest_partition is not None else "")
    lines.append(f"history         {h.run_partitions} run and {h.attempt_partitions} attempt "
                 f"day partition(s){oldest}")
    lines.append(f"storage         history {_bytes(h.history_bytes)}, queue "
                 f"{_bytes(h.queue_bytes)}, kept {_bytes(h.kept_bytes)}")

    def rows(n: int) -> str:
        return f"{n}+" if n >= DEFAULT_ROWS_CAP else str(n)

    lines.append(f"default part.   {rows(h.default_runs)} run(s), "
                 f"{rows(h.default_attempts)} attempt(s) (should be 0)")
    return lines


def _times_word(n: int) -> str:
    return "once" if n == 1 else "twice" if n == 2 else f"{n} times"


def _bytes(n: int) -> str:
    value = float(n)
    for unit in ("B", "KiB", "MiB", "GiB"):
        if value < 1024 or unit == "GiB":
            return f"{value:.0f} {unit}" if unit == "B" else f"{value:.1f} {unit}"
        value /= 1024
    raise AssertionError("unreachable")


def status_text(st: Status, times: Times) -> str:
    at = times.when
    n = st.numbers
    last = (f"{at(n.last_tick_at)} by {n.last_tick_worker} ({n.last_tick_status})"
            if n.last_tick_at else "never")
    oldest = (f", oldest due since {at(n.backlog_oldest)}" if n.backlog_oldest
              else "")
    lines = [
        f"last tick       {last}",
        f"ticks           {n.ticks_last_hour} in the last hour "
        f"({n.ticks_last_hour / 60:.2f}/min)",
        f"lost ticks      {n.lost_ticks_last_day} in the last day" + (
            f" (latest: worker {n.last_lost_tick_worker}, tick at "
            f"{at(n.last_lost_tick_at)})" if n.last_lost_tick_at is not None else ""),
        f"backlog         {n.backlog} due run(s) unclaimed{oldest}",
        f"running         {n.running}",
        f"last day        {n.failed_last_day} failed (awaiting retry), "
        f"{n.dead_last_day} dead",
        f"dead, not acked {st.dead_unacknowledged}",
        f"jobs            {n.jobs} ({sum(1 for j in st.jobs if j.paused_at)} paused, "
        f"{sum(1 for j in st.jobs if j.invalid_reason)} invalid)",
    ]
    if st.lateness is not None:
        lines += lateness_lines(st.lateness)
    if st.storage is not None:
        lines += storage_lines(st.storage, at)
    if st.running:
        lines += ["", table(["RUN", "JOB", "ATTEMPT", "WORKER", "STARTED", "LEASE UNTIL"],
                            [(r.id, r.job, r.attempt, r.lease_owner,
                              at(r.started_at), at(r.lease_expires_at))
                             for r in st.running])]
    if st.waiting:
        lines += ["", table(["HANDLER", "WAITING RUNS", "OLDEST DUE", "NOTE"],
                            [(w.handler, w.runs, at(w.oldest),
                              "no recent tick registers it (try --app MODULE)")
                             for w in st.waiting])]
    if st.groups:
        lines += ["", *(group_wait_text(g) for g in st.groups)]
    paused = [j for j in st.jobs if j.paused_at]
    if paused:
        lines += ["", "paused: " + ", ".join(j.name for j in paused)]
    if st.warnings:
        lines += ["", "warnings:", *(f"  - {w}" for w in st.warnings)]
    lines += ["", "problems:" if st.problems else "all well"]
    lines += [f"  - {p}" for p in st.problems]
    return "\n".join(lines)
