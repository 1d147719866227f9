"""Wake-up: how soon a queued job starts with a worker running, and a drain with defaults,
cronjobs' worker beside pgqueuer's and procrastinate's, side by side in one run.

    python bench/run.py --only wakeup
    python bench/wakeup.py [--database-url URL] [--enqueues N] [--drain N]

- Latency: with the worker running (and warmed up by a few enqueues not counted), N
  enqueues one at a time (default 1,000): the enqueuer takes ``time.time()`` once its
  enqueue committed, the handler takes it first thing and sends it to this process over a
  UDP socket on the loopback; the next enqueue follows a short pause after the handler
  started (the worker is idle again, as it is between one application request and the
  next). p50 and p99 of commit -> handler start. cronjobs enqueues through the path of
  ``cronjobs trigger`` and ``Client.trigger`` (core.operations.trigger), pgqueuer with
  ``Queries.enqueue`` (asyncpg), procrastinate with ``defer_async``.
- Drain: N no-op jobs (default 10,000) queued, then the worker started with its defaults;
  end to end, from starting the worker to the last job done (seen by polling the
  database every 50 ms): runs/s.

cronjobs runs twice: ``cronjobs worker`` as it ships (each handler run isolated in a
process forked from its template) and ``--in-process`` (handlers in threads, as
pgqueuer's and procrastinate's run in their event loops).
"""

from __future__ import annotations

import argparse
import asyncio
import os
import signal
import socket
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import benchlib
from benchlib import Server, log, percentile
from common import (
    WORKERS,
    Context,
    Section,
    add_definitions,
    checked,
    cli_env,
    enqueue_runs,
    scalar,
)

ENQUEUES = 1_000
DRAIN = 10_000
WARM = 20  # enqueues before the measured ones (not counted)
PAUSE = 0.02  # seconds between a handler's start and the next enqueue
WAIT = 30.0  # seconds an enqueue may take to start before it counts as lost

HANDLERS = '''"""The wake-up benchmark's handlers (written by bench/wakeup.py)."""
import os, socket, time
import cronjobs

_SOCK = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
_TO = ("127.0.0.1", int(os.environ.get("WAKEUP_PORT", "0")))


@cronjobs.job("wake")
def wake(ctx):
    started = time.time()
    _SOCK.sendto(b"%d %r" % (ctx.payload["i"], started), _TO)


@cronjobs.job("noop")
def noop(ctx):
    return None
'''

Enqueue = Callable[[int], None]  # queue job i; returns once committed


@dataclass
class System:
    key: str
    label: str
    server: Server

    def database(self) -> str:
        raise NotImplementedError

    def env(self, db: str, port: int) -> dict[str, str]:
        return cli_env(self.server, db, WAKEUP_PORT=str(port))

    def argv(self) -> list[str]:
        raise NotImplementedError

    @contextmanager
    def enqueuer(self, db: str) -> Iterator[Enqueue]:
        raise NotImplementedError

    def fill(self, db: str, count: int) -> None:
        raise NotImplementedError

    def done(self, db: str, count: int) -> bool:
        raise NotImplementedError


class Cronjobs(System):
    def __init__(self, server: Server, apps: Path, *, in_process: bool) -> None:
        key = "cronjobs_in_process" if in_process else "cronjobs"
        label = "cronjobs worker --in-process" if in_process else "cronjobs worker"
        super().__init__(key, label, server)
        self.apps = apps
        self.in_process = in_process

    def database(self) -> str:
        db = self.server.cronjobs_database("wakeup")
        for name in ("wake", "noop"):
            checked(benchlib.run_cli(["define", name, "0 0 1 1 *", "--handler", name,
                                      "--overlap", "allow", "--max-attempts", "1"],
                                     self.server.conninfo(db)), "cronjobs define")
        return db

    def env(self, db: str, port: int) -> dict[str, str]:
        return {**super().env(db, port), "PYTHONPATH": _path(self.apps)}

    def argv(self) -> list[str]:
        return [*benchlib.cronjobs_command(), "--app", "wakeup_jobs", "worker",
                *(["--in-process"] if self.in_process else [])]

    @contextmanager
    def enqueuer(self, db: str) -> Iterator[Enqueue]:
        # the path of `cronjobs trigger` and Client.trigger, which returns once it committed
        # (Client.trigger then reads the run back: not part of the enqueue)
        from cronjobs.core import operations  # noqa: PLC0415 - the benchmark's cronjobs
        from cronjobs.db.config import resolve_database  # noqa: PLC0415
        from cronjobs.db.connect import open_store  # noqa: PLC0415

        store = open_store(resolve_database(self.server.conninfo(db))).store
        try:
            yield lambda i: operations.trigger(store, "wake", payload={"i": i}) and None
        finally:
            store.close()

    def fill(self, db: str, count: int) -> None:
        add_definitions(self.server, db, prefix="drain", count=1, kind="handler",
                        command=None, handler="noop", overlap="allow")
        enqueue_runs(self.server, db, prefix="drain", definitions=1, count=count)

    def done(self, db: str, count: int) -> bool:
        return bool(scalar(self.server, db, "SELECT count(*) FROM job_runs "
                           "WHERE status = 'succeeded' AND trigger = 'backfill'") >= count)


class PgQueuer(System):
    def __init__(self, server: Server) -> None:
        super().__init__("pgqueuer", "pgqueuer (asyncpg + uvloop, defaults)", server)
        self.loop = asyncio.new_event_loop()

    def database(self) -> str:
        db = self.server.create_database("wakeup_pgq")
        env = {**self.env(db, 0), "PGDSN": benchlib.url(self.server.conninfo(db))}
        checked(benchlib.run([sys.executable, "-m", "pgqueuer", "install"], env),
                "pgq install")
        return db

    def env(self, db: str, port: int) -> dict[str, str]:
        return {**super().env(db, port), "BENCH_DSN": benchlib.url(self.server.conninfo(db))}

    def argv(self) -> list[str]:
        return [sys.executable, str(WORKERS / "wakeup_pgq.py"), "work"]

    @contextmanager
    def enqueuer(self, db: str) -> Iterator[Enqueue]:
        import asyncpg  # noqa: PLC0415 - the bench extra
        from pgqueuer import AsyncpgDriver, Queries  # noqa: PLC0415

        run = self.loop.run_until_complete
        conn = run(asyncpg.connect(benchlib.url(self.server.conninfo(db))))
        queries = Queries(AsyncpgDriver(conn))
        try:
            yield lambda i: run(queries.enqueue("wake", str(i).encode())) and None
        finally:
            run(conn.close())

    def fill(self, db: str, count: int) -> None:
        import asyncpg  # noqa: PLC0415
        from pgqueuer import AsyncpgDriver, Queries  # noqa: PLC0415

        async def fill() -> None:
            conn = await asyncpg.connect(benchlib.url(self.server.conninfo(db)))
            try:
                await Queries(AsyncpgDriver(conn)).enqueue(["noop"] * count, [None] * count,
                                                           [0] * count)
            finally:
                await conn.close()

        self.loop.run_until_complete(fill())

    def done(self, db: str, count: int) -> bool:
        return bool(scalar(self.server, db, "SELECT count(*) FROM pgqueuer") == 0)


class Procrastinate(System):
    def __init__(self, server: Server) -> None:
        super().__init__("procrastinate", "procrastinate (psycopg, defaults)", server)
        self.loop = asyncio.new_event_loop()

    def database(self) -> str:
        db = self.server.create_database("wakeup_procrastinate")
        checked(benchlib.run([*self._cli(), "schema", "--apply"], self.env(db, 0)),
                "procrastinate schema")
        return db

    def env(self, db: str, port: int) -> dict[str, str]:
        return {**super().env(db, port), "BENCH_DSN": self.server.conninfo(db),
                "PYTHONPATH": _path(WORKERS)}

    @staticmethod
    def _cli() -> list[str]:
        return [sys.executable, "-m", "procrastinate", "--app=wakeup_procrastinate.app"]

    def argv(self) -> list[str]:
        return [*self._cli(), "worker"]

    def _app(self, db: str) -> Any:
        import procrastinate  # noqa: PLC0415 - the bench extra

        return procrastinate.App(connector=procrastinate.PsycopgConnector(
            conninfo=self.server.conninfo(db)))

    @contextmanager
    def enqueuer(self, db: str) -> Iterator[Enqueue]:
        app = self._app(db)
        run = self.loop.run_until_complete
        run(app.open_async())
        task = app.configure_task("wake")
        try:
            yield lambda i: run(task.defer_async(i=i)) and None
        finally:
            run(app.close_async())

    def fill(self, db: str, count: int) -> None:
        app = self._app(db)

        async def fill() -> None:
            async with app.open_async():
                await app.configure_task("noop").batch_defer_async(
                    *({} for _ in range(count)))

        self.loop.run_until_complete(fill())

    def done(self, db: str, count: int) -> bool:
        return bool(scalar(self.server, db, "SELECT count(*) FROM procrastinate_jobs "
                           "WHERE status = 'succeeded'") >= count)


def _path(first: Path) -> str:
    """PYTHONPATH with ``first`` in front of this process's own."""
    return os.pathsep.join(part for part in (str(first), os.environ.get("PYTHONPATH"))
                           if part)


# -- the measurements ----------------------------------------------------------------------


@contextmanager
def running(system: System, db: str, port: int) -> Iterator[benchlib.Proc]:
    """The system's worker, stopped with SIGTERM (then killed) afterwards."""
    proc = benchlib.Proc(system.argv(), system.env(db, port))
    try:
        yield proc
    finally:
        if proc.poll() is None:
            os.kill(proc.pid, signal.SIGTERM)
            done = proc.wait(60)
            if done.returncode not in (0, -signal.SIGTERM, 128 + signal.SIGTERM):
                log(f"  {system.key} exited {done.returncode}: {done.stderr[-500:]}")


def _started(sock: socket.socket, i: int) -> float | None:
    """When the handler of job ``i`` started (None: not within WAIT)."""
    deadline = time.monotonic() + WAIT
    while (left := deadline - time.monotonic()) > 0:
        sock.settimeout(left)
        try:
            data = sock.recv(256)
        except TimeoutError:
            return None
        got, at = data.split()
        if int(got) == i:
            return float(at)
    return None


def latencies(system: System, sock: socket.socket, count: int) -> tuple[list[float], int]:
    """Commit -> handler start of ``count`` enqueues one at a time, in ms; and how many
    did not start within WAIT."""
    db = system.database()
    try:
        with running(system, db, sock.getsockname()[1]), system.enqueuer(db) as enqueue:
            seconds: list[float] = []
            lost = 0
            for i in range(-WARM, count):
                enqueue(i)
                committed = time.time()
                started = _started(sock, i)
                if started is None:
                    lost += 1
                elif i >= 0:
                    seconds.append((started - committed) * 1000)
                time.sleep(PAUSE)
            return seconds, lost
    finally:
        system.server.drop_database(db)


def drain(system: System, count: int) -> float:
    """Seconds from starting the worker to ``count`` queued no-op jobs done."""
    db = system.database()
    try:
        system.fill(db, count)
        started = time.perf_counter()
        with running(system, db, 0) as proc:
            while not system.done(db, count):
                if proc.poll() is not None:
                    raise RuntimeError(f"{system.key}'s worker exited during the drain")
                time.sleep(0.05)
            return time.perf_counter() - started
    finally:
        system.server.drop_database(db)


def systems(server: Server, apps: Path) -> list[System]:
    return [Cronjobs(server, apps, in_process=False), Cronjobs(server, apps, in_process=True),
            PgQueuer(server), Procrastinate(server)]


def measure(server: Server, *, enqueues: int = ENQUEUES, drained: int = DRAIN) -> Section:
    section = Section(
        "Wake-up: commit to handler start, and a drain with defaults",
        f"{enqueues:,} enqueues one at a time with the worker running (commit -> the "
        f"handler's first line, p50 and p99), then {drained:,} queued no-op jobs drained "
        "end to end by the worker with its defaults; all on the same machine, in one run")
    with tempfile.TemporaryDirectory() as tmp, \
            socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as sock:
        (Path(tmp) / "wakeup_jobs.py").write_text(HANDLERS)
        sock.bind(("127.0.0.1", 0))
        every = systems(server, Path(tmp))
        for system in every:
            log(f"  latency: {system.label}")
            ms, lost = latencies(system, sock, enqueues)
            section.figure(f"{system.key}: commit to start", "ms", ms,
                           p50=percentile(ms, 50), p99=percentile(ms, 99), lost=lost)
            log(f"    p50 {percentile(ms, 50):.1f} ms, p99 {percentile(ms, 99):.1f} ms"
                f"{f', {lost} lost' if lost else ''}")
        for system in every:
            log(f"  drain: {system.label}")
            seconds = drain(system, drained)
            section.figure(f"{system.key}: drain", "runs/s", [drained / seconds],
                           seconds=seconds)
            log(f"    {drained / seconds:,.0f} runs/s ({seconds:.1f} s)")
    figures = section.figures
    ours, theirs = figures["cronjobs: commit to start"], figures["pgqueuer: commit to start"]
    section.target("cronjobs worker: commit to start p50", (ours["p50"], ours["p50"]), "<=",
                   20.0, "ms")
    section.target("cronjobs worker: commit to start p99", (ours["p99"], ours["p99"]), "<=",
                   100.0, "ms")
    section.target("cronjobs worker p50 / pgqueuer p50",
                   (ours["p50"] / theirs["p50"],) * 2, "<=", 1.0)
    for key in ("cronjobs", "cronjobs_in_process"):
        ratio = section.ratio(f"{key} drain / pgqueuer drain", f"{key}: drain",
                              "pgqueuer: drain")
        section.target(f"{key}: drain {drained:,} with defaults / pgqueuer",
                       (ratio["min"], ratio["median"]), ">=", 1.0)
    section.extra["table"] = table(section)
    return section


def table(section: Section) -> str:
    """The Markdown table of docs/benchmarks.md."""
    labels = {"cronjobs": "`cronjobs worker`", "cronjobs_in_process": "`cronjobs worker "
              "--in-process`", "pgqueuer": "pgqueuer", "procrastinate": "procrastinate"}
    rows = ["| worker | commit → handler start, p50 | p99 | drain, runs/s |",
            "|---|---|---|---|"]
    for key, label in labels.items():
        latency = section.figures[f"{key}: commit to start"]
        runs = section.figures[f"{key}: drain"]
        rows.append(f"| {label} | {latency['p50']:.1f} ms | {latency['p99']:.1f} ms | "
                    f"{runs['median']:,.0f} |")
    return "\n".join(rows)


def bench_wakeup(ctx: Context) -> Section:
    return measure(ctx.server)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--database-url", help="a maintenance database (default: an "
                        "embedded server)")
    parser.add_argument("--enqueues", type=int, default=ENQUEUES)
    parser.add_argument("--drain", type=int, default=DRAIN)
    args = parser.parse_args()
    with benchlib.open_server(args.database_url) as server:
        section = measure(server, enqueues=args.enqueues, drained=args.drain)
    print(section.extra["table"])
    for target in section.targets:
        print(f"target: {target['text']}: {target['measured']:.3g} {target['unit']} "
              f"({target['verdict']})")


if __name__ == "__main__":
    main()
