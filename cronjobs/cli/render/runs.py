"""Runs as output: a run's facts, lists of runs, `show`, `ack`."""

from __future__ import annotations

import datetime as dt
import json
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

from cronjobs.cli.render.common import instant, table
from cronjobs.durations import elapsed
from cronjobs.reports import Delivery
from cronjobs.timefmt import Times

# For annotations only: the tick renders its report with this package, and these modules
# import what only the other commands use (cron-descriptor, for schedules in words).
if TYPE_CHECKING:
    from cronjobs.core.facts import AttemptInfo, RunInfo
    from cronjobs.core.operations import Acknowledged, RunDetail


def run_json(r: RunInfo) -> dict[str, Any]:
    """A run's facts (:mod:`cronjobs.core.facts`). ``attempt``, ``max_attempts`` and
    ``eligible_at`` are the older names of ``attempts_used``, ``attempts_allowed`` and
    ``next_attempt_at``; ``acknowledged_at``/``acknowledged_by`` are null unless the run's
    latest death is acknowledged."""
    return {
        "id": r.id,
        "job": r.job,
        "job_removed_at": instant(r.job_removed_at),
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
        [(r.id, job_of(r), at(r.scheduled_for), r.trigger, r.state, attempts_text(r),
          at(r.finished_at), (r.error or "")[:60])
         for r in found])


def job_of(r: RunInfo) -> str:
    """The name of a run's job, marked when that job was removed."""
    return r.job if r.job_removed_at is None else f"{r.job} (removed)"


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
        f"run {r.id} of {job_of(r)}: {r.state}",
        *([f"  job         removed {at(r.job_removed_at)}"] if r.job_removed_at else []),
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
        lines.append(f"  ack         {_ack_text(r, at)}")
    if r.result is not None:
        lines.append(f"  result      {json.dumps(r.result)}")
    for a in r.attempts:
        duration = elapsed(a.duration) if a.duration is not None else "running"
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


def _ack_text(r: RunInfo, at: Callable[[dt.datetime | None], str]) -> str:
    """Where a dead run's acknowledgement stands."""
    if r.acknowledged:
        return f"acknowledged {at(r.acknowledged_at)} by {r.acknowledged_by or 'unknown'}"
    if not r.needs_acknowledgement:
        return "not needed: its job was removed"
    return f"not acknowledged: `cronjobs ack {r.id}` once handled"


def attempts_used_text(r: RunInfo) -> str:
    """"1 of 3 used", and the interruptions that used none."""
    text = f"{r.attempts_used} of {r.attempts_allowed} used"
    if r.interrupted_attempts:
        text += f" ({r.interrupted_attempts} interrupted, not counted)"
    return text


def lateness_text(r: RunInfo) -> str:
    """How late a scheduled run's first attempt started after its slot."""
    return (f"{elapsed(r.lateness)} after its slot (late)" if r.late
            else f"on time ({elapsed(r.lateness or dt.timedelta(0))} after its slot)")


def _times_word(n: int) -> str:
    return "once" if n == 1 else "twice" if n == 2 else f"{n} times"
