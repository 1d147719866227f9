"""pgqueuer, used as its documentation shows: a factory (an async context manager, as
``pgq run`` wants it) yielding ``PgQueuer`` on a psycopg async connection (autocommit), with
one no-op entrypoint.

    PGDSN=... python -m pgqueuer install
    BENCH_DSN=... python pgq_app.py enqueue N
    BENCH_DSN=... python pgq_app.py work        # pgqueuer.run(create, mode=drain)
    BENCH_DSN=... python pgq_app.py count       # jobs still in the queue table

Workers are started through ``pgqueuer.run`` (documented as "run a worker from factory, as
``pgq run`` does, without the CLI") in drain mode with the default batch size of 10: the
``pgq run`` command of pgqueuer 1.6.0 fails at start-up with the typer release it installs
(``AttributeError: 'str' object has no attribute 'name'`` while setting up logging).
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import sys
from collections.abc import AsyncIterator

import pgqueuer
import psycopg
from pgqueuer import PgQueuer, PsycopgDriver, Queries
from pgqueuer.models import Job
from pgqueuer.types import QueueExecutionMode

ENTRYPOINT = "noop"


@contextlib.asynccontextmanager
async def create() -> AsyncIterator[PgQueuer]:
    """The factory: PgQueuer with the no-op entrypoint; its connection is closed after."""
    async with await psycopg.AsyncConnection.connect(os.environ["BENCH_DSN"],
                                                     autocommit=True) as conn:
        pgq = PgQueuer(PsycopgDriver(conn))

        @pgq.entrypoint(ENTRYPOINT)
        async def noop(job: Job) -> None:
            """The job: nothing."""

        yield pgq


async def enqueue(count: int) -> None:
    async with await psycopg.AsyncConnection.connect(os.environ["BENCH_DSN"],
                                                     autocommit=True) as conn:
        queries = Queries(PsycopgDriver(conn))
        await queries.enqueue([ENTRYPOINT] * count, [None] * count, [0] * count)


def main(argv: list[str]) -> None:
    if argv[0] == "enqueue":
        asyncio.run(enqueue(int(argv[1])))
    elif argv[0] == "work":
        asyncio.run(pgqueuer.run(create, mode=QueueExecutionMode.drain, batch_size=10))
    elif argv[0] == "count":
        with psycopg.connect(os.environ["BENCH_DSN"], autocommit=True) as conn:
            row = conn.execute("SELECT count(*) FROM pgqueuer").fetchone()
        print(row[0] if row else 0)
    else:
        raise SystemExit(f"unknown command {argv[0]!r}")


if __name__ == "__main__":
    main(sys.argv[1:])
