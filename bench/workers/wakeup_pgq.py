"""pgqueuer for the wake-up benchmark (bench/wakeup.py): ``pgqueuer.run`` (its supervisor, as
``pgq run`` starts it) in its default continuous mode on uvloop, asyncpg, defaults
otherwise. ``wake`` sends its payload and ``time.time()`` at its start to the benchmark's
UDP port (WAKEUP_PORT); ``noop`` does nothing.

    PGDSN=... python -m pgqueuer install
    BENCH_DSN=... WAKEUP_PORT=... python wakeup_pgq.py work
"""

from __future__ import annotations

import contextlib
import os
import socket
import sys
import time
from collections.abc import AsyncIterator

import asyncpg
import pgqueuer
import uvloop
from pgqueuer import AsyncpgDriver, PgQueuer
from pgqueuer.models import Job

_SOCK = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)


@contextlib.asynccontextmanager
async def create() -> AsyncIterator[PgQueuer]:
    conn = await asyncpg.connect(os.environ["BENCH_DSN"])
    port = int(os.environ.get("WAKEUP_PORT", "0"))
    try:
        pgq = PgQueuer(AsyncpgDriver(conn))

        @pgq.entrypoint("wake")
        async def wake(job: Job) -> None:
            started = time.time()
            _SOCK.sendto(b"%s %r" % (job.payload or b"-", started), ("127.0.0.1", port))

        @pgq.entrypoint("noop")
        async def noop(job: Job) -> None:
            """Nothing."""

        yield pgq
    finally:
        await conn.close()


if __name__ == "__main__":
    if sys.argv[1:] != ["work"]:
        raise SystemExit("usage: wakeup_pgq.py work")
    uvloop.run(pgqueuer.run(create))
