"""A history of finished runs, written by the product's own statements: each run inserted as
a tick materialises it (``MaterialiseStore.insert_runs``), claimed (``QueueStore.claim_runs``)
and finished (``QueueStore.finish_runs``) as a tick's executor does, at instants pinned in
the past. The finish moves each run to the history with its attempt, sets its retirement
day from the job's retention and moves the job's last success or death on: whatever the
schema becomes, the seeded history is the one a finish leaves.

Runs are finished in batches; the runs of a batch share their claim and finish instants
(their slots are their own), so a history of ``count`` runs over ``span`` has at least
min(count, 100) distinct finish instants.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Sequence

import psycopg
from benchlib import Server, log

from cronjobs.db.store import Store
from cronjobs.models import AttemptOutcome, NewRun, Outcome, RunStatus, Trigger

# runs inserted, claimed and finished by one statement each, at most: finish_runs' time
# per run grows with its batch past a few hundred (measured on 2 cores under load: 0.7 ms a
# run at 200 and 1,000, 0.9 at 3,000, 1.6 at 5,000), as a tick never finishes more than
# its handler threads at once
BATCH = 500
WORKER = "bench:1"  # the worker the attempts name


def insert_history(server: Server, db: str, *, count: int, start: dt.datetime,
                   span: dt.timedelta, defs: int, offset: int = 0, busy: int = 0,
                   busy_every: int = 0, dead_every: int = 10**12,
                   handlers: Sequence[str] = ("noop",)) -> None:
    """``count`` finished runs (each with its attempt), the g-th (1..count) finishing at
    about start + (g - 1) * span / count: every ``dead_every``-th dead (then acknowledged,
    as an installation that saw to its dead runs), the others succeeded. The g-th run's job
    is definition ``busy`` for every ``busy_every``-th run (0: none), else definition
    ``offset + 1 + g % defs``. The history's day partitions are the caller's to make."""
    step = span / max(count, 1)
    size = max(1, min(BATCH, count // 100))
    dead_jobs: set[int] = set()
    with psycopg.connect(server.conninfo(db), autocommit=True) as conn:
        store = Store(conn)
        for lo in range(1, count + 1, size):
            hi = min(count, lo + size - 1)
            runs: list[NewRun] = []
            dead: set[tuple[int, dt.datetime]] = set()
            for g in range(lo, hi + 1):
                job = busy if busy_every and g % busy_every == 0 else offset + 1 + g % defs
                slot = start + step * (g - 1) - dt.timedelta(seconds=2)
                runs.append(NewRun(job, slot, Trigger.SCHEDULE, 1, slot, exclusive=False))
                if g % dead_every == 0:
                    dead.add((job, slot))
                    dead_jobs.add(job)
            finish = start + step * (hi - 1)
            _claim_and_finish(store, runs, dead, finish, handlers)
            if count >= 10 * BATCH and (hi // size) % 100 == 0:
                log(f"    {hi:,} / {count:,} runs")
        for job in sorted(dead_jobs):
            store.runs.acknowledge_dead_runs(job, by="bench", now=start + span)


def _claim_and_finish(store: Store, runs: list[NewRun], dead: set[tuple[int, dt.datetime]],
                      finish: dt.datetime, handlers: Sequence[str]) -> None:
    """Insert ``runs``, claim them a second before ``finish`` and finish them at it (the
    runs keyed in ``dead`` dead, the others succeeded); they must be the only runs due."""
    made = store.materialise.insert_runs(runs, now=runs[0].scheduled_for, tick_id=None)
    claimed = store.queue.claim_runs(now=finish - dt.timedelta(seconds=1), worker=WORKER,
                                     limit=len(runs), tick_id=None, handlers=handlers)
    if len(made) != len(runs) or len(claimed) != len(runs):
        raise RuntimeError(f"seeding the history: {len(runs)} runs, {len(made)} inserted, "
                           f"{len(claimed)} claimed (another run due, or a slot taken?)")
    outcomes = []
    for run in claimed:
        died = (run.definition_id, run.scheduled_for) in dead
        outcomes.append(Outcome(
            run.id, run.lease_token, RunStatus.DEAD if died else RunStatus.SUCCEEDED,
            AttemptOutcome.FAILED if died else AttemptOutcome.SUCCEEDED, 1 if died else 0,
            "exit code 1" if died else None, "ok\n", None))
    finished = store.queue.finish_runs(outcomes, now=finish)
    if len(finished) != len(runs):
        raise RuntimeError(f"seeding the history: {len(finished)} of {len(runs)} finished")
