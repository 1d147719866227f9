"""Idempotency keys hold under concurrency: 16 real processes enqueue the same 100 keys over
and over (one at a time and in batches, in random orders), while another process claims and
finishes the runs (moving them to the history) and does the storage's upkeep. Exactly one run
per key is made, and every call got that key's run."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import psycopg
import pytest

from conftest import Invoke

PROCESSES = 16
KEYS = 100
ROUNDS = 10  # each process asks for every key this many times: 1,000 asks a process

ENQUEUER = """
import json, random, sys
import psycopg
import cronjobs

url, seed, rounds, keys = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
rng = random.Random(seed)
seen = {}
with psycopg.connect(url, autocommit=True) as conn:
    for n in range(rounds):
        order = [f"k{i}" for i in range(keys)]
        rng.shuffle(order)
        if n % 2:
            runs = cronjobs.enqueue_many(conn, [{"job": "race", "key": k} for k in order])
        else:
            runs = [cronjobs.enqueue(conn, "race", key=k) for k in order]
        for k, run in zip(order, runs):
            seen.setdefault(k, set()).add(run.id)
print(json.dumps({k: sorted(v) for k, v in seen.items()}))
"""

FINISHER = """
import datetime as dt, sys, time
import psycopg
from cronjobs.core.retention import upkeep
from cronjobs.db.store import Store
from cronjobs.models import AttemptOutcome, Outcome, RunStatus

url, stop = sys.argv[1], sys.argv[2]
store = Store(psycopg.connect(url, autocommit=True))
finished = 0
import os
while not os.path.exists(stop) or store.queue.claimable_backlog(
        now=store.now(), handlers=[], limit=1) != (0, 0):
    claimed = store.queue.claim_runs(now=store.now(), worker="racer", limit=20, tick_id=None,
                                     handlers=[])
    outcomes = [Outcome(c.id, c.lease_token, RunStatus.SUCCEEDED, AttemptOutcome.SUCCEEDED,
                        0, None, None, None) for c in claimed]
    finished += len(store.queue.finish_runs(outcomes, now=store.now()))
    upkeep(store, now=store.now())
    if not claimed:
        time.sleep(0.01)
print(finished)
"""


@pytest.mark.slow
def test_sixteen_processes_make_exactly_one_run_per_key(
        cli: Invoke, database_url: str, db: psycopg.Connection[Any], tmp_path: Path) -> None:
    defined = cli("define", "race", "0 0 1 1 *", "--command", "true", "--overlap", "allow")
    assert defined.exit_code == 0, defined.stderr
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    stop = tmp_path / "stop"
    finisher = subprocess.Popen([sys.executable, "-c", FINISHER, database_url, str(stop)],
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                                env=env)
    enqueuers = [subprocess.Popen([sys.executable, "-c", ENQUEUER, database_url, str(seed),
                                   str(ROUNDS), str(KEYS)],
                                  stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                                  env=env)
                 for seed in range(PROCESSES)]
    seen: dict[str, set[int]] = {}
    for process in enqueuers:
        out, err = process.communicate(timeout=600)
        assert process.returncode == 0, err
        for key, ids in json.loads(out).items():
            seen.setdefault(key, set()).update(ids)
    stop.touch()
    out, err = finisher.communicate(timeout=300)
    assert finisher.returncode == 0, err
    assert int(out) == KEYS  # every run ran once, and moved to the history
    assert db.execute("SELECT count(*), count(DISTINCT key) FROM job_runs").fetchone() == (
        KEYS, KEYS)
    assert db.execute("SELECT count(*) FROM job_runs WHERE stage = 'history'").fetchone() == (
        KEYS,)
    # every call got its key's one run, the run the key's row names
    assert {key: len(ids) for key, ids in seen.items()} == {f"k{i}": 1 for i in range(KEYS)}
    holders = dict(db.execute("SELECT k.key, k.run_id FROM job_run_keys AS k").fetchall())
    assert holders == {key: next(iter(ids)) for key, ids in seen.items()}
    assert dict(db.execute("SELECT key, id FROM job_runs").fetchall()) == holders
