"""What every benchmark module shares: the results of one benchmark (``Section``), the run's
options (``Context``) and small helpers to seed scratch databases and start the real CLI."""

from __future__ import annotations

import datetime as dt
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import benchlib
import psycopg
from benchlib import Server, log, summary

WORKERS = benchlib.BENCH / "workers"

HANDLER_MODULE = '''"""No-op handlers for the cronjobs benchmarks (written by bench/run.py)."""
import cronjobs


@cronjobs.job("noop")
def noop(ctx):
    return None
'''


# Section defaults: (measured repetitions, quick repetitions)
REPEATS = {"empty_tick": (15, 3), "idle_definitions": (7, 2), "materialise": (5, 1),
           "throughput": (3, 1), "lateness": (3, 1), "memory": (3, 1), "pgbench": (2, 1),
           "engine": (3, 1), "claim_rows": (1, 1), "due_at_once": (3, 1),
           "engine_compare": (3, 1), "storage_scale": (3, 1), "storage_snapshot": (1, 1),
           "storage_retire": (1, 1), "storage_write": (3, 1), "storage_verdict": (2, 1),
           "auto_sizing": (3, 1)}




@dataclass
class Section:
    """What one benchmark found: figures, ratios against baselines, targets."""

    title: str
    method: str
    figures: dict[str, dict[str, Any]] = field(default_factory=dict)
    ratios: list[dict[str, Any]] = field(default_factory=list)
    targets: list[dict[str, Any]] = field(default_factory=list)
    extra: dict[str, Any] = field(default_factory=dict)

    def figure(self, name: str, unit: str, values: Sequence[float], **more: Any) -> None:
        self.figures[name] = {"unit": unit, **summary(values), **more}

    def ratio(self, name: str, numerator: str, denominator: str) -> dict[str, Any]:
        a, b = self.figures[numerator], self.figures[denominator]
        entry = {"name": name, "of": numerator, "to": denominator,
                 "min": _div(a["min"], b["min"]), "median": _div(a["median"], b["median"])}
        self.ratios.append(entry)
        return entry

    def target(self, text: str, measured: tuple[float, float], op: str, limit: float,
               unit: str = "") -> None:
        """A target judged on both the min and the median of the repetitions (for a ratio:
        min / min and median / median): met when both meet it, NOT met when neither does,
        borderline when they disagree (noise on a shared machine decides)."""
        low, median = measured

        def meets(value: float) -> bool:
            return value <= limit if op == "<=" else value >= limit

        verdict = ("met" if meets(low) and meets(median)
                   else "NOT met" if not meets(low) and not meets(median) else "borderline")
        self.targets.append({"text": text, "measured": median, "measured_min": low, "op": op,
                             "limit": limit, "unit": unit, "met": verdict == "met",
                             "verdict": verdict, "factor": _div(median, limit),
                             "factor_min": _div(low, limit)})

    def as_json(self) -> dict[str, Any]:
        return {"title": self.title, "method": self.method, "figures": self.figures,
                "ratios": self.ratios, "targets": self.targets, "extra": self.extra}


def _div(a: float, b: float) -> float:
    return a / b if b else float("nan")


@dataclass
class Context:
    server: Server
    repeat: int | None
    quick: bool
    runs: int
    pgbench_seconds: int
    # the engine benchmarks (issue 14): see engine.py
    queued: int = 10_000
    isolated_queued: int = 1_000
    processes: tuple[int, ...] = (1, 2, 4)
    backlogs: tuple[int, ...] = (100, 2_000, 10_000, 100_000)
    due: int = 10_000
    due_ticks: int = 4
    # engine_compare: the version measured against the working tree, and its K (compare.py)
    baseline_ref: str = "dab99c0"
    compare_processes: tuple[int, ...] = (1, 4)
    history: int = 0  # finished runs already in the database of every drain
    # the storage benchmarks (issue 26): their sizes and options (storage.py)
    storage: dict[str, Any] = field(default_factory=dict)

    def repeats(self, section: str) -> int:
        if self.repeat is not None:
            return self.repeat
        full, quick = REPEATS[section]
        return quick if self.quick else full


# -- helpers --------------------------------------------------------------------------------


def sql(server: Server, db: str, query: str, params: Any = None) -> list[tuple[Any, ...]]:
    """Run one statement on a scratch database in a short-lived connection. Seeding may set
    jobs' cursors back (cronjobs.rewind_cursor, schema.sql), which cronjobs never does."""
    with psycopg.connect(server.conninfo(db), autocommit=True,
                         options="-c cronjobs.rewind_cursor=on") as conn:
        cur = conn.execute(query, params)
        return cur.fetchall() if cur.description is not None else []


def scalar(server: Server, db: str, query: str, params: Any = None) -> Any:
    rows = sql(server, db, query, params)
    return rows[0][0] if rows else None


def add_definitions(server: Server, db: str, *, prefix: str, count: int,
                    kind: str = "command", command: str | None = "true",
                    handler: str | None = None, overlap: str = "skip") -> None:
    """``count`` definitions that are not due before next year (``0 0 1 1 *``)."""
    sql(server, db, """
        INSERT INTO job_definitions (name, schedule, timezone, kind, handler, command,
                                     overlap, max_attempts, cursor_at, next_due_at)
        SELECT %(prefix)s::text || g, '0 0 1 1 *', 'UTC', %(kind)s::text, %(handler)s::text,
               %(command)s::text, %(overlap)s::text, 1, now(),
               date_trunc('year', now(), 'UTC') + interval '1 year'
        FROM generate_series(1, %(count)s) AS g
        """, {"prefix": prefix, "count": count, "kind": kind, "handler": handler,
              "command": command, "overlap": overlap})


def enqueue_runs(server: Server, db: str, *, prefix: str, definitions: int, count: int) -> None:
    """``count`` queued runs, eligible now, spread round-robin over the definitions
    ``prefix1..prefixN`` (what ``cronjobs backfill`` creates, written with SQL)."""
    sql(server, db, """
        INSERT INTO job_runs (definition_id, scheduled_for, trigger, max_attempts, exclusive,
                              eligible_at)
        SELECT d.id, date_trunc('minute', now()) - g * interval '1 minute', 'backfill', 1,
               d.overlap IN ('skip', 'queue'), now() - interval '1 second'
        FROM generate_series(1, %(count)s) AS g
        JOIN job_definitions AS d ON d.name = %(prefix)s::text || (1 + g %% %(defs)s)
        ORDER BY g
        """, {"count": count, "prefix": prefix, "defs": definitions})
    sql(server, db, "VACUUM ANALYZE job_runs")


def add_history(server: Server, db: str, *, prefix: str, definitions: int, count: int) -> None:
    """``count`` succeeded runs, finished long ago (in 2020 and before), spread round-robin
    over the definitions ``prefix1..prefixN``: the history a database has after years."""
    sql(server, db, """
        INSERT INTO job_runs (definition_id, scheduled_for, trigger, max_attempts, exclusive,
                              eligible_at, status, attempt, started_at, finished_at)
        SELECT d.id, s.at, 'schedule', 1, false, s.at, 'succeeded', 1, s.at,
               s.at + interval '1 second'
        FROM generate_series(1, %(count)s) AS g
        CROSS JOIN LATERAL (SELECT timestamptz '2020-01-01'
                                   - (g / %(defs)s) * interval '1 minute' AS at) AS s
        JOIN job_definitions AS d ON d.name = %(prefix)s::text || (1 + g %% %(defs)s)
        """, {"count": count, "prefix": prefix, "defs": definitions})
    sql(server, db, "VACUUM ANALYZE job_runs")


def clear_history(server: Server, db: str) -> None:
    sql(server, db, "TRUNCATE job_attempts, job_runs, job_skips, job_ticks CASCADE")


def last_tick(server: Server, db: str) -> dict[str, Any]:
    rows = sql(server, db, """
        SELECT materialised, skipped, claimed, succeeded, failed,
               extract(epoch FROM finished_at - started_at)::float8, status
        FROM job_ticks ORDER BY id DESC LIMIT 1""")
    if not rows:
        return {}
    keys = ("materialised", "skipped", "claimed", "succeeded", "failed", "seconds", "status")
    return dict(zip(keys, rows[0], strict=True))


def tick_argv(*args: str, apps: Sequence[str] = (), cli: Sequence[str] | None = None
              ) -> list[str]:
    """``cronjobs [--app=APP …] tick ARGS``, with ``cli`` the ``cronjobs`` command (by
    default this environment's)."""
    app_args = [f"--app={app}" for app in apps]
    return [*(cli or benchlib.cronjobs_command()), *app_args, "tick", *args]


def cli_env(server: Server, db: str, **extra: str) -> dict[str, str]:
    return benchlib.clean_env({"CRONJOBS_DATABASE_URL": server.conninfo(db), **extra})


def checked(result: benchlib.Finished, what: str) -> benchlib.Finished:
    if result.returncode != 0:
        raise RuntimeError(f"{what} exited {result.returncode}: {result.stderr[-2000:]}")
    return result


def minute_start(server: Server, *, latest_second: float) -> dt.datetime:
    """The start of the database's current minute, waiting for the next minute when more
    than ``latest_second`` seconds of this one are gone."""
    with server.connect() as conn:
        row = conn.execute("SELECT clock_timestamp()").fetchone()
    now = row[0] if row else dt.datetime.now(dt.UTC)
    start = now.replace(second=0, microsecond=0)
    if (now - start).total_seconds() > latest_second:
        wait = (start + dt.timedelta(minutes=1) - now).total_seconds() + 0.2
        log(f"  waiting {wait:.0f}s for the next minute")
        time.sleep(wait)
        start += dt.timedelta(minutes=1)
    return start


def db_clock(server: Server) -> dt.datetime:
    with server.connect() as conn:
        row = conn.execute("SELECT clock_timestamp()").fetchone()
    return row[0] if row else dt.datetime.now(dt.UTC)

