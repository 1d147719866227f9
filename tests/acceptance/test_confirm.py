"""`backfill` on a terminal (a pseudo-terminal here): it says what it would create and asks;
no (the default) writes nothing and exits 2, yes creates the runs."""

from __future__ import annotations

import os
import pty
import select
import subprocess
import sys
import time
from typing import Any

import psycopg

from conftest import Invoke, count

LIMIT = 240.0  # a step's bound, generous for a loaded machine (see test_watch.py)
QUESTION = "create 3 run(s)? [y/N]: "


def _answer(database_url: str, answer: str) -> tuple[int, str]:
    """Run a backfill on a pty, answer its question; (exit code, what it printed)."""
    leader, follower = pty.openpty()
    process = subprocess.Popen(
        [sys.executable, "-m", "cronjobs", "--database-url", database_url, "backfill",
         "yearly", "--from", "2020-01-01", "--to", "2022-01-01"],
        stdin=follower, stdout=follower, stderr=follower, env={**os.environ, "TZ": "UTC"},
        start_new_session=True)
    os.close(follower)
    seen, answered = b"", False
    deadline = time.monotonic() + LIMIT
    try:
        while process.poll() is None or select.select([leader], [], [], 0)[0]:
            assert time.monotonic() < deadline, f"gave up after {LIMIT:.0f}s: {seen!r}"
            if not answered and QUESTION.encode() in seen:
                os.write(leader, answer.encode() + b"\n")
                answered = True
            if select.select([leader], [], [], 0.2)[0]:
                try:
                    chunk = os.read(leader, 65536)
                except OSError:  # the other side closed
                    break
                if not chunk:
                    break
                seen += chunk
        code = process.wait(timeout=LIMIT)
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()
        os.close(leader)
    assert answered, f"no question: {seen!r}"
    return code, seen.decode().replace("\r\n", "\n")


def test_backfill_asks_on_a_terminal(cli: Invoke, database_url: str,
                                     db: psycopg.Connection[Any]) -> None:
    assert cli("define", "yearly", "0 0 1 1 *", "--command", "true").exit_code == 0
    preview = ("backfill of yearly would create 3 run(s), from 2020-01-01 00:00 UTC to "
               "2022-01-01 00:00 UTC\n")
    code, printed = _answer(database_url, "")  # Enter: the default, no
    assert code == 2
    assert printed == f"{preview}{QUESTION}\nnothing written\n"
    assert count(db, "job_runs") == 0
    code, printed = _answer(database_url, "y")
    assert code == 0, printed
    assert printed == (f"{preview}{QUESTION}y\nbackfill of yearly: 3 slot(s) in range, 3 "
                       "run(s) created, 0 already had a run\n")
    assert count(db, "job_runs") == 3
