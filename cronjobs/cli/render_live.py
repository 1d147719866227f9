"""Output of the commands that watch: `logs` (a run's output as it is produced), and the
screens of `runs --watch` and `status --watch` (times for people: cronjobs.timefmt)."""

from __future__ import annotations

import json
from typing import TYPE_CHECKING

from cronjobs.models import RUN_WAITS, status_phrase
from cronjobs.timefmt import Times, iso

if TYPE_CHECKING:  # annotations only
    from cronjobs.core.logs import Chunk


def log_chunk(chunk: Chunk, *, following: bool, times: Times | None = None
              ) -> tuple[str, bool]:
    """(text, to stderr) for one piece of `cronjobs logs`."""
    if chunk.kind == "output":
        return chunk.text, False
    if chunk.kind == "note":
        return f"cronjobs: {chunk.text}\n", True
    return outcome_line(chunk, times) + "\n", True


def log_json(chunk: Chunk) -> str:
    """One line of `cronjobs logs --json`: {"output": text}, {"note": text} or {"end":
    the run's outcome}."""
    if chunk.kind != "end":
        return json.dumps({chunk.kind: chunk.text}, ensure_ascii=False)
    return json.dumps({"end": {
        "run_id": chunk.run_id, "job": chunk.job,
        "job_removed_at": iso(chunk.job_removed_at), "status": chunk.status,
        "attempt": chunk.attempt, "max_attempts": chunk.max_attempts, "error": chunk.error,
        "exit_code": chunk.exit_code,
        "eligible_at": iso(chunk.eligible_at)}}, ensure_ascii=False)


def outcome_line(chunk: Chunk, times: Times | None = None) -> str:
    times = times or Times.of(utc=False)
    used = (f"attempt {chunk.attempt} of {chunk.max_attempts}" if chunk.attempt
            else f"0 of {chunk.max_attempts} attempts used")
    job = chunk.job if chunk.job_removed_at is None else f"{chunk.job} (removed)"
    head = f"cronjobs: run {chunk.run_id} of {job} {status_phrase(chunk.status or '')} ({used})"
    if chunk.status == "running":
        return head
    if chunk.error:
        head += f": {chunk.error}"
    if chunk.status in RUN_WAITS and chunk.eligible_at is not None:
        head += f"; the next attempt is due {times.at(chunk.eligible_at)}"
    return head
