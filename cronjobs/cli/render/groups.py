"""Groups as output: a group's usage, and why its due runs wait (`group`, explain,
status)."""

from __future__ import annotations

from typing import Any

from cronjobs.reports import GroupUsage


def group_json(g: GroupUsage) -> dict[str, Any]:
    return {"name": g.name, "max_running": g.max_running, "jobs": g.jobs,
            "running": g.running, "waiting": g.waiting, "full": g.full}


def group_wait_text(g: GroupUsage) -> str:
    """Why a group's due runs wait, in words (explain, status)."""
    return (f"{g.waiting} due run(s) of group {g.name} wait for a free slot: "
            f"{g.running} of {g.max_running} running")
