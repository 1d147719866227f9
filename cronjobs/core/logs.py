"""`cronjobs logs RUN_ID [--follow]`: the output of a run, as it is produced.

A tick writes the output of each running attempt to the run's row as it prints (the bounded
tail, and how many bytes it printed in all; at most once a second, fenced by the lease), and
the final tail when the attempt ends. Following reads that row every ``poll`` seconds and
yields what was printed since the last read, until the attempt ends; then its outcome.
Output printed faster than the tail keeps between two reads is skipped, and said so (like
``kubectl logs``, this shows a bounded buffer, not an archive).
"""

from __future__ import annotations

import datetime as dt
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass

from cronjobs.core import facts
from cronjobs.core.operations import check_run_id
from cronjobs.db.store import Store
from cronjobs.errors import RunNotFound
from cronjobs.models import RUN_WAITS
from cronjobs.reports import LiveOutput
from cronjobs.timefmt import in_zone

ANCHOR = 256  # characters of the last output read, looked for in the final tail


@dataclass(frozen=True)
class Chunk:
    """Something to show: ``output`` (text as printed by the job), ``note`` (about the
    stream: skipped output, a new attempt, waiting) or ``end`` (the run's outcome)."""

    kind: str
    text: str
    status: str | None = None  # with "end": the run's status
    job: str | None = None
    run_id: int | None = None
    attempt: int | None = None
    max_attempts: int | None = None
    error: str | None = None
    exit_code: int | None = None
    eligible_at: dt.datetime | None = None
    job_removed_at: dt.datetime | None = None  # with "end": when its job was removed


def logs(store: Store, run_id: int, *, follow: bool = False, poll: float = 1.0,
         sleep: Callable[[float], None] = time.sleep,
         should_stop: Callable[[], bool] = lambda: False) -> Iterator[Chunk]:
    """The run's output: what it printed so far (a finished run: its last attempt's tail);
    with ``follow``, then what it prints until its attempt ends, then the outcome."""
    row = _read(store, run_id)
    if follow and row.status in RUN_WAITS:
        yield Chunk("note", f"waiting for run {row.id} to start ({row.status}, due "
                            f"{_at(row.eligible_at)})")
        while row.status in RUN_WAITS and not should_stop():
            sleep(poll)
            row = _read(store, run_id)
    attempt, printed, last = row.attempt, 0, ""
    while True:
        if row.status != "running" or row.attempt != attempt:
            break
        total = row.output_bytes or 0
        tail = row.output_tail or ""
        if total > printed:
            yield from _new_output(tail, total - printed)
            printed, last = total, tail
        if not follow or should_stop():
            if not follow and not printed:  # said: an empty answer reads as an error
                yield Chunk("note", f"run {row.id} of {row.job} is running (attempt "
                                    f"{attempt} of {row.max_attempts}) and has printed "
                                    "nothing yet; --follow waits for its output")
            return
        sleep(poll)
        row = _read(store, run_id)
    final = row.output_tail or ""
    if row.attempt != attempt:  # a later attempt began meanwhile: that one's output
        yield Chunk("note", f"attempt {attempt} ended; attempt {row.attempt} began")
        final, last = final if row.status != "running" else "", ""
    rest = _rest(final, last)
    if rest:
        yield Chunk("output", rest)
    yield _end(store, row)


def _end(store: Store, row: LiveOutput) -> Chunk:
    """The run's outcome, its attempts counted as every view counts them (an interruption
    uses none: :mod:`cronjobs.core.facts`)."""
    found = store.runs.run_by_id(row.id)
    used, allowed, removed_at = row.attempt, row.max_attempts, None
    if found is not None:
        info = facts.load_run(store, found)
        used, allowed, removed_at = info.attempts_used, info.attempts_allowed, info.job_removed_at
    return Chunk("end", "", status=row.status, job=row.job, run_id=row.id, attempt=used,
                 max_attempts=allowed, error=row.error, exit_code=row.exit_code,
                 eligible_at=row.eligible_at, job_removed_at=removed_at)


def _read(store: Store, run_id: int) -> LiveOutput:
    row = store.notifications.live_output(check_run_id(run_id))
    if row is None:
        raise RunNotFound(f"no run with id {run_id} (see `cronjobs runs`)")
    return row


def _new_output(tail: str, new_bytes: int) -> Iterator[Chunk]:
    """The last ``new_bytes`` bytes of ``tail`` (all of it, and a note, if it kept fewer)."""
    data = tail.encode("utf-8", errors="replace")
    if new_bytes > len(data):
        skipped = new_bytes - len(data)
        if skipped > 0 and data:
            yield Chunk("note", f"... {skipped} byte(s) of output printed faster than the "
                                "tail keeps were skipped ...")
        if tail:
            yield Chunk("output", tail)
        return
    yield Chunk("output", data[len(data) - new_bytes:].decode("utf-8", errors="replace"))


def _rest(final: str, shown: str) -> str:
    """What ``final`` (the attempt's last tail) holds after ``shown`` (the last tail read
    while it ran)."""
    if not shown:
        return final
    if final.startswith(shown):
        return final[len(shown):]
    anchor = shown[-ANCHOR:]
    at = final.rfind(anchor)
    return final[at + len(anchor):] if at >= 0 else final


def _at(value: dt.datetime | None) -> str:
    return "-" if value is None else in_zone(value, dt.UTC)
