"""Limits across jobs: a group's fleet-wide limit (at most N runs of its jobs at once,
across every tick), and what groups there are and who waits for them.

The limit itself is enforced by the claim (``claim_runs`` with ``lock_claimable_groups``
in ``db/queries/queue.sql``); runs that wait for their group stay queued, attempts untouched.
"""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass

from cronjobs.db.store import Store
from cronjobs.errors import UsageError
from cronjobs.reports import GroupUsage
from cronjobs.validation import check_name

MAX_RUNNING = 10_000


@dataclass(frozen=True)
class GroupDetail:
    usage: GroupUsage
    job_names: tuple[str, ...]


def set_limit(store: Store, name: str, *, max_running: int) -> GroupUsage:
    """Create or change group ``name``'s limit; from the next claim on, at most
    ``max_running`` runs of its jobs run at once (runs already running finish)."""
    check_name(name, what="group name")
    if not 1 <= max_running <= MAX_RUNNING:
        raise UsageError(f"invalid --max-running {max_running}: must be between 1 and "
                         f"{MAX_RUNNING}")
    with store.transaction():
        now = store.now()
        store.groups.set_group_limit(name, max_running=max_running, now=now)
        return _usage(store, name, now)


def remove_limit(store: Store, name: str) -> GroupUsage:
    """Remove group ``name``'s limit (its jobs stay in the group, unlimited)."""
    check_name(name, what="group name")
    with store.transaction():
        if not store.groups.remove_group_limit(name):
            raise UsageError(f"group {name!r} has no limit (see `cronjobs group list`)")
        return _usage(store, name, store.now(), missing_ok=True)


def list_groups(store: Store, *, now: dt.datetime | None = None) -> list[GroupUsage]:
    """Every group: limited ones, and those only named by jobs (no limit)."""
    return store.groups.group_usage(now=now if now is not None else store.now())


def show(store: Store, name: str) -> GroupDetail:
    check_name(name, what="group name")
    usage = _usage(store, name, store.now())
    return GroupDetail(usage, tuple(store.groups.group_jobs(name)))


def usage_of(store: Store, name: str, now: dt.datetime) -> GroupUsage | None:
    found = store.groups.group_usage(now=now, name=name)
    return found[0] if found else None


def waiting_for_groups(store: Store, now: dt.datetime) -> list[GroupUsage]:
    """The groups whose due runs wait for a free slot right now."""
    return [g for g in store.groups.group_usage(now=now) if g.full and g.waiting]


def _usage(store: Store, name: str, now: dt.datetime, *, missing_ok: bool = False
           ) -> GroupUsage:
    found = usage_of(store, name, now)
    if found is not None:
        return found
    if missing_ok:
        return GroupUsage(name, None, 0, 0, 0)
    raise UsageError(f"no group named {name!r}: no job names it and it has no limit (see "
                     "`cronjobs group list`)")
