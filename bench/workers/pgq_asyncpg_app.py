"""pgqueuer as its users run it: ``pgq run`` (uvloop when installed, as the CLI does) on a
factory yielding ``PgQueuer`` on an asyncpg connection (pgqueuer's default driver), one
no-op entrypoint, batch 10 (``pgq run``'s default).

    PGDSN=... python -m pgqueuer install
    BENCH_DSN=... python pgq_asyncpg_app.py enqueue N
    BENCH_DSN=... python -m pgqueuer run pgq_asyncpg_app:create --mode drain --batch-size 10
    BENCH_DSN=... python pgq_asyncpg_app.py work     # the same without the CLI (see below)

``work`` does what ``pgq run`` does — ``pgqueuer.run`` (its supervisor) on uvloop — for
when the CLI cannot start (pgqueuer 1.6.0's ``pgq run`` failed with some typer releases).
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import sys
from collections.abc import AsyncIterator

import asyncpg
import pgqueuer
import uvloop
from pgqueuer import AsyncpgDriver, PgQueuer, Queries
from pgqueuer.models import Job
from pgqueuer.types import QueueExecutionMode

ENTRYPOINT = "noop"


@contextlib.asynccontextmanager
async def create() -> AsyncIterator[PgQueuer]:
    """The factory: PgQueuer with the no-op entrypoint; its connection is closed after."""
    conn = await asyncpg.connect(os.environ["BENCH_DSN"])
    try:
        pgq = PgQueuer(AsyncpgDriver(conn))

        @pgq.entrypoint(ENTRYPOINT)
        async def noop(job: Job) -> None:
            """The job: nothing."""

        yield pgq
    finally:
        await conn.close()


async def enqueue(count: int) -> None:
    conn = await asyncpg.connect(os.environ["BENCH_DSN"])
    try:
        await Queries(AsyncpgDriver(conn)).enqueue([ENTRYPOINT] * count, [None] * count,
                                                   [0] * count)
    finally:
        await conn.close()


def main(argv: list[str]) -> None:
    if argv[0] == "enqueue":
        asyncio.run(enqueue(int(argv[1])))
    elif argv[0] == "work":
        uvloop.run(pgqueuer.run(create, mode=QueueExecutionMode.drain, batch_size=10))
    else:
        raise SystemExit(f"unknown command {argv[0]!r}")


if __name__ == "__main__":
    main(sys.argv[1:])
