"""Output of the commands that watch: `logs` (a run's output as it is produced), and the
screens of `runs --watch` and `status --watch`; and times for people, relative to the
operation's instant and in the local zone (or UTC)."""

from __future__ import annotations

import datetime as dt
import json
from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # annotations only
    from cronjobs.core.logs import Chunk


def log_chunk(chunk: Chunk, *, following: bool) -> tuple[str, bool]:
    """(text, to stderr) for one piece of `cronjobs logs`."""
    if chunk.kind == "output":
        return chunk.text, False
    if chunk.kind == "note":
        return f"cronjobs: {chunk.text}\n", True
    return outcome_line(chunk) + "\n", True


def log_json(chunk: Chunk) -> str:
    """One line of `cronjobs logs --json`: {"output": text}, {"note": text} or {"end":
    the run's outcome}."""
    if chunk.kind != "end":
        return json.dumps({chunk.kind: chunk.text}, ensure_ascii=False)
    return json.dumps({"end": {
        "run_id": chunk.run_id, "job": chunk.job, "status": chunk.status,
        "attempt": chunk.attempt, "max_attempts": chunk.max_attempts, "error": chunk.error,
        "exit_code": chunk.exit_code,
        "eligible_at": None if chunk.eligible_at is None
        else chunk.eligible_at.astimezone(dt.UTC).isoformat()}}, ensure_ascii=False)


def outcome_line(chunk: Chunk) -> str:
    used = (f"attempt {chunk.attempt} of {chunk.max_attempts}" if chunk.attempt
            else f"0 of {chunk.max_attempts} attempts used")
    head = f"cronjobs: run {chunk.run_id} of {chunk.job!r} is {chunk.status} ({used})"
    if chunk.status == "running":
        return head
    if chunk.error:
        head += f": {chunk.error}"
    if chunk.status in ("failed", "queued") and chunk.eligible_at is not None:
        head += (f"; the next attempt is due "
                 f"{chunk.eligible_at.astimezone(dt.UTC).strftime('%Y-%m-%d %H:%M:%SZ')}")
    return head


@dataclass(frozen=True)
class Times:
    """How a table shows an instant: in the local zone (or UTC) with how long ago or ahead
    of ``now`` (the operation's instant) it is."""

    now: dt.datetime
    utc: bool = False
    zone: dt.tzinfo | None = None  # None: the system's local zone

    def when(self, value: dt.datetime | None) -> str:
        if value is None:
            return "-"
        local = value.astimezone(dt.UTC if self.utc else self.zone)
        shown = (local.strftime("%Y-%m-%d %H:%M:%SZ") if self.utc or _is_utc(local)
                 else local.strftime("%Y-%m-%d %H:%M:%S %Z"))
        return f"{shown} ({relative(value, self.now)})"

    @property
    def label(self) -> str:
        """The zone the table's times are in, for its headers."""
        if self.utc:
            return "UTC"
        return self.now.astimezone(self.zone).strftime("%Z") or "local"


def _is_utc(value: dt.datetime) -> bool:
    return value.utcoffset() == dt.timedelta(0) and value.strftime("%Z") in ("UTC", "GMT", "Z")


def relative(value: dt.datetime, now: dt.datetime) -> str:
    """``3 min ago``, ``in 2 h``, ``just now``: the largest unit, rounded down."""
    seconds = (value - now).total_seconds()
    size = abs(seconds)
    if size < 1:
        return "now"
    for unit, length in (("d", 86400), ("h", 3600), ("min", 60), ("s", 1)):
        if size >= length:
            amount = f"{int(size // length)} {unit}"
            break
    return f"in {amount}" if seconds > 0 else f"{amount} ago"
