"""procrastinate for the wake-up benchmark (bench/wakeup.py): an App on a PsycopgConnector,
its worker as ``procrastinate worker`` starts it (defaults: LISTEN/NOTIFY and polling).
``wake`` sends its argument and ``time.time()`` at its start to the benchmark's UDP port
(WAKEUP_PORT); ``noop`` does nothing.

    BENCH_DSN=... procrastinate --app=wakeup_procrastinate.app schema --apply
    BENCH_DSN=... WAKEUP_PORT=... procrastinate --app=wakeup_procrastinate.app worker
"""

from __future__ import annotations

import os
import socket
import time

import procrastinate

_SOCK = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)

app = procrastinate.App(
    connector=procrastinate.PsycopgConnector(conninfo=os.environ.get("BENCH_DSN", "")))


@app.task(name="wake")
async def wake(i: int) -> None:
    started = time.time()
    _SOCK.sendto(b"%d %r" % (i, started),
                 ("127.0.0.1", int(os.environ.get("WAKEUP_PORT", "0"))))


@app.task(name="noop")
async def noop() -> None:
    """Nothing."""
