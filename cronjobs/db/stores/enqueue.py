"""Runs enqueued by the application on its own connection, in its own transaction
(:mod:`cronjobs.enqueue`): one statement per batch, run through
:func:`cronjobs.db.session.rows_on` on whatever holds the connection."""

from __future__ import annotations

import datetime as dt
import json
from collections.abc import Mapping, Sequence
from typing import Any

from cronjobs.db import session as foreign

# what a repeated key does to the run that holds it, if that run has not started yet:
# keeps it as it is, or gives it the new payload, time and priority
KEY_MODES = {False: "keep", True: "replace"}


def _params(runs: Sequence[Mapping[str, Any]], *, replace: bool,
            now: dt.datetime | None) -> dict[str, Any]:
    return {"runs": json.dumps(list(runs), default=_instant),
            "key_mode": KEY_MODES[replace], "now": now}


def _instant(value: Any) -> str:
    if isinstance(value, dt.datetime):
        return value.isoformat()
    raise TypeError(f"{type(value).__name__} is not JSON")


def enqueue_runs(conn: Any, runs: Sequence[Mapping[str, Any]], *, replace: bool,
                 now: dt.datetime | None) -> list[dict[str, Any]]:
    """The runs (one row of job_runs each, in order) of ``runs``: objects of job, payload,
    run_at, key, priority (cronjobs_enqueue_many)."""
    return foreign.rows_on("enqueue_runs", _params(runs, replace=replace, now=now), conn)


async def enqueue_runs_async(conn: Any, runs: Sequence[Mapping[str, Any]], *, replace: bool,
                             now: dt.datetime | None) -> list[dict[str, Any]]:
    return await foreign.rows_on_async("enqueue_runs",
                                       _params(runs, replace=replace, now=now), conn)
