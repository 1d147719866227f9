"""procrastinate, used as its documentation shows: an App on a PsycopgConnector with one
no-op task; the schema is applied with ``procrastinate schema --apply`` and workers are
``procrastinate worker`` processes.

    BENCH_DSN=... procrastinate --app=procrastinate_app.app schema --apply
    BENCH_DSN=... python procrastinate_app.py defer N
    BENCH_DSN=... procrastinate --app=procrastinate_app.app worker --one-shot
    BENCH_DSN=... python procrastinate_app.py count   # succeeded jobs
"""

from __future__ import annotations

import asyncio
import os
import sys

import procrastinate
import psycopg

app = procrastinate.App(
    connector=procrastinate.PsycopgConnector(conninfo=os.environ.get("BENCH_DSN", "")))


@app.task(name="noop")
async def noop() -> None:
    """The job: nothing."""


async def defer(count: int) -> None:
    async with app.open_async():
        await noop.batch_defer_async(*({} for _ in range(count)))


def main(argv: list[str]) -> None:
    if argv[0] == "defer":
        asyncio.run(defer(int(argv[1])))
    elif argv[0] == "count":
        with psycopg.connect(os.environ["BENCH_DSN"], autocommit=True) as conn:
            row = conn.execute("SELECT count(*) FROM procrastinate_jobs "
                               "WHERE status = 'succeeded'").fetchone()
        print(row[0] if row else 0)
    else:
        raise SystemExit(f"unknown command {argv[0]!r}")


if __name__ == "__main__":
    main(sys.argv[1:])
