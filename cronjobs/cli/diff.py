"""How `cronjobs apply` shows its diff (text and JSON), and `cronjobs define` the changes it
made to a job that exists; and how `cronjobs export` shows its file."""

from __future__ import annotations

import json
from typing import Any

from cronjobs.cli.render_forecast import crowding_json
from cronjobs.core.apply import ApplyResult, Export, FieldChange, JobDiff, owner
from cronjobs.core.declarations import dump_toml
from cronjobs.cron.describe import describe
from cronjobs.errors import ScheduleError


def apply_json(result: ApplyResult) -> dict[str, Any]:
    return {
        "source": result.source,
        "dry_run": result.dry_run,
        "in_sync": result.in_sync,
        "added": [_job_json(d) for d in result.added],
        "changed": [_job_json(d) for d in result.changed],
        "removed": [_job_json(d) for d in result.removed],
        "unchanged": result.unchanged,
        "not_declared": list(result.not_declared),
    }


def _job_json(diff: JobDiff) -> dict[str, Any]:
    data: dict[str, Any] = {"job": diff.name}
    if diff.action == "remove":
        data["cancelled_runs"] = diff.cancelled_runs
        return data
    data["fields"] = diff.fields
    if diff.action == "change":
        data["changes"] = changes_json(diff)
        if diff.adopted_from is not None:
            data["adopted_from"] = diff.adopted_from or None
    if diff.warning is not None:
        data["warning"] = diff.warning
    if diff.crowding is not None:
        data["crowding"] = crowding_json(diff.crowding)
    return data


def changes_json(diff: JobDiff) -> dict[str, Any]:
    """A changed job's changes, by field: ``{"old", "new"}`` and the notes that apply."""
    return {c.field: _change_json(c, diff) for c in diff.changes}


def _change_json(change: FieldChange, diff: JobDiff) -> dict[str, Any]:
    data = {"old": change.old, "new": change.new}
    if change.old == change.new:  # a secret changed behind its mask
        data["note"] = "changed (secret part masked)"
    if change.default:
        data["default"] = True
    if change.field == "schedule":
        words = schedule_in_words(change, diff)
        data["description"] = words
    return data


def apply_text(result: ApplyResult) -> str:
    lines = [f"source {result.source!r}:"]
    for diff in result.added:
        target = (f"command: {diff.fields['command']}" if diff.fields.get("command")
                  else f"handler: {diff.fields['handler']}")
        lines.append(f"+ {diff.name}  {diff.fields['schedule']}  ({diff.fields['tz']})  "
                     f"{target}")
        lines += _crowded(diff)
    for diff in result.changed:
        adopted = (f"  (adopted: was {owner(diff.adopted_from or None)})"
                   if diff.adopted_from is not None else "")
        lines.append(f"~ {diff.name}{adopted}")
        lines += changes_text(diff)
        lines += _crowded(diff)
    for diff in result.removed:
        cancelled = (f" ({diff.cancelled_runs} waiting run(s) cancelled)"
                     if diff.cancelled_runs else "")
        lines.append(f"- {diff.name}{cancelled}")
    lines.append(f"= {result.unchanged} unchanged")
    if result.not_declared:
        lines.append(f"  no longer declared, kept (--prune removes them): "
                     f"{', '.join(result.not_declared)}")
    count = result.change_count
    if result.in_sync:
        lines.append("in sync: nothing to change")
    elif result.dry_run:
        lines.append(f"dry run: {count} change(s) pending, nothing written")
    else:
        lines.append(f"applied {count} change(s)")
    return "\n".join(lines)


def _crowded(diff: JobDiff) -> list[str]:
    return [] if diff.crowding is None else [f"    ! crowded: {diff.crowding.message}"]


def changes_text(diff: JobDiff) -> list[str]:
    """A changed job's changes, a line each (the schedule's with a second, in words),
    indented below the line naming the job."""
    return [f"    {line}" for change in diff.changes for line in _change(change, diff)]


def _change(change: FieldChange, diff: JobDiff) -> list[str]:
    # notify URLs come masked: a changed token looks the same on both sides
    hidden = " (changed)" if change.old == change.new else ""
    default = " (default)" if change.default else ""
    lines = [f"{change.field}: {_shown(change.old)} -> {_shown(change.new)}{hidden}{default}"]
    if change.field == "schedule":
        words = schedule_in_words(change, diff)
        if words is not None:
            lines.append(f"  ({words})")
    return lines


def schedule_in_words(change: FieldChange, diff: JobDiff) -> str | None:
    """The old and new schedule in words, each in its own zone (the old zone is the `tz`
    change's old value when the zone changed too); None when either cannot be described."""
    new_tz = str(diff.fields.get("tz") or "UTC")
    old_tz = next((str(c.old) for c in diff.changes if c.field == "tz" and c.old), new_tz)
    old = _words(change.old, old_tz, diff.name)
    new = _words(change.new, new_tz, diff.name)
    if old is None or new is None:
        return None
    return f"{old} -> {new}"


def _words(expression: Any, tz: str, name: str) -> str | None:
    try:
        return describe(str(expression), tz, name=name)
    except ScheduleError:
        return None


def _shown(value: Any) -> str:
    if value is None:
        return "none"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, dict):
        return json.dumps(value, ensure_ascii=False)
    if isinstance(value, list):
        return "[" + ", ".join(str(item) for item in value) + "]"
    if isinstance(value, str):
        return repr(value)
    return str(value)


def export_json(export: Export) -> dict[str, Any]:
    return {"source": export.source, "jobs": export.jobs}


def export_toml(export: Export) -> str:
    return dump_toml(export.source, export.jobs)
