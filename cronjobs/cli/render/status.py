"""The installation's health as output: `status` (its storage and start lateness too) and
`retention`."""

from __future__ import annotations

from typing import Any

from cronjobs.cli.render.common import instant, seconds, table
from cronjobs.cli.render.groups import group_json, group_wait_text
from cronjobs.cli.render.ticks import waiting_json
from cronjobs.core.health import (
    DEFAULT_ROWS_CAP,
    Status,
    Storage,
    describe_holder,
    lateness_json,
    storage_json,
)
from cronjobs.core.retention import Retention
from cronjobs.durations import format_duration, precise
from cronjobs.reports import StartLateness
from cronjobs.timefmt import Times

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
        "running": [{"run_id": r.id, "job": r.job,
                     "job_removed_at": instant(r.job_removed_at), "attempt": r.attempt,
                     "worker": r.lease_owner, "started_at": instant(r.started_at),
                     "heartbeat_at": instant(r.heartbeat_at),
                     "lease_expires_at": instant(r.lease_expires_at)}
                    for r in st.running],
        "failed_last_day": n.failed_last_day,
        "dead_last_day": n.dead_last_day,
        "dead_unacknowledged": st.dead_unacknowledged,
        "waiting_for_handlers": [waiting_json(w) for w in st.waiting],
        "waiting_for_groups": [group_json(g) for g in st.groups],
        "jobs": [{"name": j.name, "state": j.state,
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
        return f"p50 {precise(p50)}, p99 {precise(p99)} ({runs} run(s))"

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
                            [(r.id, r.job if r.job_removed_at is None
                              else f"{r.job} (removed)", r.attempt, r.lease_owner,
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
