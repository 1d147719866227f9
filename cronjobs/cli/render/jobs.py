"""Jobs as output: their settings and facts (`define`, `list`, `describe`, `preview`)."""

from __future__ import annotations

import datetime as dt
import json
from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING, Any

from cronjobs.cli.render.common import instant, seconds, table
from cronjobs.cli.render.runs import run_json, runs_table
from cronjobs.durations import format_duration
from cronjobs.models import Definition, JobState
from cronjobs.timefmt import Times, in_zone
from cronjobs.validation import mask_url

# For annotations only: the tick renders its report with this package, and these modules
# import what only the other commands use (cron-descriptor, for schedules in words).
if TYPE_CHECKING:
    from cronjobs.core.definitions import DefineResult, Description, Listing, Preview, Slot
    from cronjobs.core.facts import JobInfo


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
        "removed_at": instant(d.removed_at),
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
    if d.state == JobState.REMOVED:
        return f"removed {times.when(d.removed_at)}; its runs stay readable"
    if d.state == JobState.INVALID:
        return f"invalid: {d.invalid_reason}"
    if d.state == JobState.PAUSED:
        extra = f" until {times.when(d.paused_until)}" if d.paused_until else ""
        note = f" ({d.pause_note})" if d.pause_note else ""
        return f"paused since {times.when(d.paused_at)}{extra}{note}"
    return d.state


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
    if info.state == JobState.PAUSED and info.paused_until is not None:
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
    if desc.info.removed_at is not None:
        parts.append(f"next fire times: none, the job was removed (`cronjobs define "
                     f"{desc.info.name} ...` defines it again)")
    elif desc.problem is not None:
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


def preview_json(p: Preview) -> dict[str, Any]:
    return {"schedule": p.expression, "timezone": p.timezone, "job": p.job,
            "description": p.description, "from": instant(p.start),
            "next": slots_json(p.slots), "note": p.note}


def preview_text(p: Preview, times: Times) -> str:
    return p.description + "\n\n" + (p.note if p.note is not None
                                      else slots_table(p.slots, times))
