"""Runs enqueued from the application's own transaction (docs/how-to/enqueue.md).

``enqueue(conn, "send_receipt", payload={...}, key=..., priority=..., at=...)`` runs the
SQL function cronjobs_enqueue_many on the application's connection ``conn``: a psycopg
connection, a SQLAlchemy ``Connection`` or ``Session``, or Django's ``connection``
(``enqueue_async`` and ``enqueue_many_async`` take psycopg's ``AsyncConnection`` or
SQLAlchemy's ``AsyncConnection`` or ``AsyncSession``). The run is written in the caller's
transaction: rolled back, it never existed; committed, the next claim sees it. On a
connection in autocommit mode the statement commits at once.

A ``key`` makes it idempotent: while a run of the job holds the key (it waits, runs, or
finished less than the job's ``key_window`` ago), the same call returns that run and
creates none. ``replace=True`` gives a held run that has not started yet the new payload,
time and priority.

Bad input (an unknown job, a payload that is not a JSON object, a key longer than 200
characters, a priority outside -100..100, a time more than a day in the past, a time
without a zone) raises :class:`cronjobs.UsageError` (:class:`cronjobs.JobNotFound` for an
unknown job) and writes nothing; the caller's transaction, as after any failed statement,
must then be rolled back.
"""

from __future__ import annotations

import datetime as dt
import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from cronjobs.db.stores.enqueue import enqueue_runs, enqueue_runs_async
from cronjobs.errors import UsageError

FIELDS = ("job", "payload", "key", "priority", "at")  # of each run given to enqueue_many


@dataclass(frozen=True)
class Enqueued:
    """A run enqueued: the new one, or the one that already held the key."""

    id: int
    job: str
    status: str  # queued, or scheduled (it waits for its time); or further, for a repeat
    origin: str  # who asked for it: 'enqueue' (or 'manual', a key's run by `trigger`)
    payload: dict[str, Any] | None  # None: the job's own
    key: str | None
    priority: int
    run_at: dt.datetime  # when it may start
    created_at: dt.datetime


def enqueue(conn: Any, job: str, payload: Mapping[str, Any] | None = None, *,
            key: str | None = None, priority: int | None = None,
            at: dt.datetime | None = None, replace: bool = False,
            now: dt.datetime | None = None) -> Enqueued:
    """One run of ``job`` in the transaction of ``conn``: now, or at ``at``; with the job's
    priority unless ``priority`` (-100 to 100; higher first) is given. ``now``: the instant
    keys are judged at (default: the database's now())."""
    return enqueue_runs_of(conn, [_one(job, payload, key, priority, at)], replace=replace,
                           now=now)[0]


def enqueue_many(conn: Any, runs: Iterable[Mapping[str, Any]], *, replace: bool = False,
                 now: dt.datetime | None = None) -> list[Enqueued]:
    """Several runs in one statement (thousands in one round trip), each a mapping of the
    arguments of :func:`enqueue` (``job``, and ``payload``, ``key``, ``priority``, ``at``);
    their runs in the same order. One bad run and none is written."""
    return enqueue_runs_of(conn, _batch(runs), replace=replace, now=now)


async def enqueue_async(conn: Any, job: str, payload: Mapping[str, Any] | None = None, *,
                        key: str | None = None, priority: int | None = None,
                        at: dt.datetime | None = None, replace: bool = False,
                        now: dt.datetime | None = None) -> Enqueued:
    """:func:`enqueue` on an async connection."""
    runs = [_one(job, payload, key, priority, at)]
    rows = await enqueue_runs_async(conn, runs, replace=replace, now=now)
    return _enqueued(runs, rows)[0]


async def enqueue_many_async(conn: Any, runs: Iterable[Mapping[str, Any]], *,
                             replace: bool = False, now: dt.datetime | None = None
                             ) -> list[Enqueued]:
    """:func:`enqueue_many` on an async connection."""
    batch = _batch(runs)
    return _enqueued(batch, await enqueue_runs_async(conn, batch, replace=replace, now=now))


def enqueue_runs_of(conn: Any, runs: list[dict[str, Any]], *, replace: bool,
                    now: dt.datetime | None) -> list[Enqueued]:
    return _enqueued(runs, enqueue_runs(conn, runs, replace=replace, now=now))


def _enqueued(runs: list[dict[str, Any]], rows: list[dict[str, Any]]) -> list[Enqueued]:
    return [Enqueued(id=row["id"], job=run["job"], status=row["status"], origin=row["trigger"],
                     payload=row["payload"], key=row["key"], priority=row["priority"],
                     run_at=row["eligible_at"], created_at=row["created_at"])
            for run, row in zip(runs, rows, strict=True)]


def _batch(runs: Iterable[Mapping[str, Any]]) -> list[dict[str, Any]]:
    batch = []
    for n, run in enumerate(runs, 1):
        if not isinstance(run, Mapping):
            raise UsageError(f"cannot enqueue: run {n} is a {type(run).__name__}, not a "
                             "mapping of job, payload, key, priority, at")
        unknown = sorted(set(run) - set(FIELDS))
        if unknown:
            raise UsageError(f"cannot enqueue: run {n} has an unknown field {unknown[0]!r} "
                             f"(use {', '.join(FIELDS)})")
        if "job" not in run:
            raise UsageError(f"cannot enqueue: run {n} names no job")
        batch.append(_one(run["job"], run.get("payload"), run.get("key"),
                          run.get("priority"), run.get("at")))
    return batch


def _one(job: str, payload: Mapping[str, Any] | None, key: str | None,
         priority: int | None, at: dt.datetime | None) -> dict[str, Any]:
    """One run as cronjobs_enqueue_many takes it (the database checks the values)."""
    if not isinstance(job, str):
        raise UsageError(f"cannot enqueue: the job is a {type(job).__name__}, not a name")
    if payload is not None and not isinstance(payload, Mapping):
        raise UsageError(f"cannot enqueue: the payload is a {type(payload).__name__}, not "
                         "a JSON object (a dict)")
    if at is not None and (not isinstance(at, dt.datetime) or at.utcoffset() is None):
        raise UsageError("cannot enqueue: at must be a datetime with a time zone (e.g. "
                         "datetime.now(timezone.utc) + timedelta(minutes=5))")
    if key is not None and not isinstance(key, str):
        raise UsageError(f"cannot enqueue: the key is a {type(key).__name__}, not a string")
    if priority is not None and (isinstance(priority, bool) or not isinstance(priority, int)):
        raise UsageError(f"cannot enqueue: the priority is a {type(priority).__name__}, not "
                         "an integer")
    run: dict[str, Any] = {"job": job, "key": key, "priority": priority,
                           "run_at": at.isoformat() if at is not None else None}
    if payload is not None:
        try:
            run["payload"] = json.loads(json.dumps(dict(payload)))
        except (TypeError, ValueError) as exc:
            raise UsageError(f"cannot enqueue: the payload is not JSON: {exc}") from None
    return run
