"""How fast `cronjobs serve` answers as the history grows: page times with 10,000 jobs and
1,000,000 runs (by default), measured against a real `cronjobs serve` over HTTP.

    pip install -e '.[web]'
    python bench/dashboard.py [--server-url postgresql://postgres@127.0.0.1:5432/postgres]
                              [--jobs 10000] [--runs 1000000] [--requests 100]

It creates a scratch database on the server (dropped at the end unless --keep), seeds it
with SQL (one job that runs every minute, with a tenth of the runs up to 100,000, and daily
jobs sharing the rest: 90 days each by default; each run with its attempt), starts
`cronjobs serve` on it and times each page, sequentially, after a warm-up. /healthz and
/metrics (every job at once) are timed at a tenth of the history and at all of it: their
cost must not grow with the history.
Prints a Markdown table (docs/benchmarks.md, "Dashboard"). It measures; it never fails on a
figure.
"""

from __future__ import annotations

import argparse
import datetime as dt
import os
import random
import socket
import statistics
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import psycopg
from psycopg import sql
from psycopg.conninfo import make_conninfo

from cronjobs.db.migrate import migrate
from cronjobs.db.store import Store

BUSY = "busy-minutely"
ANCHOR = dt.datetime.now(dt.UTC)  # the history ends here, in every seeding step

JOBS = """
INSERT INTO job_definitions (name, schedule, kind, command, cursor_at, next_due_at,
                             schedule_since, created_at, paused_at, pause_note)
SELECT format('job-%%s', lpad(i::text, 5, '0')), format('%%s %%s * * *', i %% 60, i %% 24),
       'command', format('/usr/local/bin/report --part %%s', i), now(),
       now() + interval '1 day', now() - interval '400 days', now() - interval '400 days',
       CASE WHEN i %% 97 = 0 THEN now() - interval '2 days' END,
       CASE WHEN i %% 97 = 0 THEN 'maintenance window' END
FROM generate_series(1, %(jobs)s::integer - 1) AS i
UNION ALL
SELECT %(busy)s, '* * * * *', 'command', 'echo tick', now(), now() + interval '1 minute',
       now() - interval '400 days', now() - interval '400 days', NULL, NULL
"""

# days first..last ago of every daily job, in slot order (as ticks would have written them)
DAILY_RUNS = """
INSERT INTO job_runs (definition_id, scheduled_for, trigger, status, attempt, max_attempts,
                      eligible_at, started_at, finished_at, exit_code, error, output_tail,
                      acknowledged_at, created_at, updated_at)
SELECT d.id, s.slot, 'schedule', s.status, 1, 3, s.slot, s.slot + interval '2 seconds',
       s.slot + interval '9 seconds', CASE WHEN s.status = 'dead' THEN 2 ELSE 0 END,
       CASE WHEN s.status = 'dead' THEN 'exit code 2' END,
       E'starting report\\nrows: 1234\\ndone\\n',
       CASE WHEN s.status = 'dead' AND k > 3 THEN s.slot + interval '1 hour' END,
       s.slot, s.slot
FROM job_definitions AS d
CROSS JOIN generate_series(%(first)s::integer, %(last)s::integer) AS k
CROSS JOIN LATERAL (
    SELECT date_trunc('day', %(anchor)s::timestamptz) - k * interval '1 day'
           + make_interval(hours => (d.id %% 24)::int, mins => (d.id %% 60)::int) AS slot,
           CASE WHEN (d.id + k) %% 29 = 0 THEN 'dead' ELSE 'succeeded' END AS status
) AS s
WHERE d.name <> %(busy)s
ORDER BY s.slot
"""

BUSY_RUNS = """
INSERT INTO job_runs (definition_id, scheduled_for, trigger, status, attempt, max_attempts,
                      eligible_at, started_at, finished_at, exit_code, output_tail,
                      created_at, updated_at)
SELECT d.id, s.slot, 'schedule', 'succeeded', 1, 3, s.slot, s.slot + interval '1 second',
       s.slot + interval '2 seconds', 0, E'tick\\n', s.slot, s.slot
FROM job_definitions AS d
CROSS JOIN generate_series(%(first)s::integer, %(last)s::integer) AS k
CROSS JOIN LATERAL (
    SELECT date_trunc('minute', %(anchor)s::timestamptz) - k * interval '1 minute' AS slot
) AS s
WHERE d.name = %(busy)s
ORDER BY s.slot
"""

ATTEMPTS = """
INSERT INTO job_attempts (run_id, attempt, worker, lease_token, started_at, finished_at,
                          outcome, exit_code, error, output_tail)
SELECT r.id, 1, 'bench:1', gen_random_uuid(), r.started_at, r.finished_at,
       CASE WHEN r.status = 'succeeded' THEN 'succeeded' ELSE 'failed' END, r.exit_code,
       r.error, r.output_tail
FROM job_runs AS r
WHERE r.id > %(after)s
ORDER BY r.id
"""

# what a finish keeps on each definition (status, /healthz and every page's banner judge a
# job's lateness by it): without it every job would look overdue
LAST_SUCCESS = """
UPDATE job_definitions AS d SET last_succeeded_at = s.at
FROM (SELECT definition_id, max(finished_at) AS at FROM job_runs
      WHERE status = 'succeeded' GROUP BY definition_id) AS s
WHERE s.definition_id = d.id
"""

TICKS = """
INSERT INTO job_ticks (worker, tick_at, started_at, finished_at, status)
SELECT 'bench:1', t, t, t + interval '1 second', 'finished'
FROM generate_series(date_trunc('minute', now()) - interval '59 minutes',
                     date_trunc('minute', now()), interval '1 minute') AS t
"""


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--server-url", default=os.environ.get(
        "CRONJOBS_BENCH_SERVER_URL", "postgresql://postgres@127.0.0.1:5432/postgres"),
        help="a PostgreSQL server where a scratch database may be created")
    parser.add_argument("--jobs", type=int, default=10_000)
    parser.add_argument("--runs", type=int, default=1_000_000)
    parser.add_argument("--requests", type=int, default=100, help="timed requests per page")
    parser.add_argument("--keep", action="store_true", help="keep the scratch database")
    args = parser.parse_args()
    busy_runs = min(100_000, args.runs // 10)
    days = max(1, (args.runs - busy_runs) // (args.jobs - 1))
    name = f"cjbench_dashboard_{os.getpid()}"
    with scratch_database(args.server_url, name, keep=args.keep) as url:
        with psycopg.connect(url, autocommit=True) as conn:
            migrate(Store(conn))
            timed("jobs", lambda: conn.execute(JOBS, {"jobs": args.jobs, "busy": BUSY}))
            tenth_days, tenth_busy = max(1, days // 10), busy_runs // 10
            seed(conn, 1, tenth_days, 1, tenth_busy)
            with serving(url) as base:
                history = count(conn)
                print(f"# {args.jobs:,} jobs, {history:,} runs", file=sys.stderr)
                small = measure(base, conn, ["/healthz", "/metrics"], max(5, args.requests // 10))
            seed(conn, tenth_days + 1, days, tenth_busy + 1, busy_runs)
            total = count(conn)
            with serving(url) as base:
                print(f"# {args.jobs:,} jobs, {total:,} runs", file=sys.stderr)
                pages = ["/", "/?after=", "/?q=job-0123", "/jobs/", f"/jobs/{BUSY}", "/runs/",
                         "/healthz?scope=server"]
                big = measure(base, conn, pages, args.requests)
                whole = measure(base, conn, ["/healthz", "/metrics"], max(5, args.requests // 10))
        report(args.jobs, history, total, big, small, whole)


def seed(conn: psycopg.Connection[object], first_day: int, last_day: int, first_busy: int,
         last_busy: int) -> None:
    after = conn.execute("SELECT coalesce(max(id), 0) FROM job_runs").fetchone()[0]  # type: ignore[index]
    timed(f"daily runs, days {first_day}-{last_day}", lambda: conn.execute(
        DAILY_RUNS, {"first": first_day, "last": last_day, "busy": BUSY, "anchor": ANCHOR}))
    timed(f"busy runs {first_busy}-{last_busy}", lambda: conn.execute(
        BUSY_RUNS, {"first": first_busy, "last": last_busy, "busy": BUSY, "anchor": ANCHOR}))
    timed("attempts", lambda: conn.execute(ATTEMPTS, {"after": after}))
    timed("last successes", lambda: conn.execute(LAST_SUCCESS))
    conn.execute("DELETE FROM job_ticks")
    conn.execute(TICKS)
    timed("vacuum analyze", lambda: conn.execute("VACUUM ANALYZE"))


def count(conn: psycopg.Connection[object]) -> int:
    return int(conn.execute("SELECT count(*) FROM job_runs").fetchone()[0])  # type: ignore[index,call-overload]


def timed(what: str, action: object) -> None:
    start = time.perf_counter()
    action()  # type: ignore[operator]
    print(f"  seeded {what} in {time.perf_counter() - start:.1f} s", file=sys.stderr)


def measure(base: str, conn: psycopg.Connection[object], pages: list[str],
            requests: int) -> dict[str, list[float]]:
    names = [row[0] for row in conn.execute("SELECT name FROM job_definitions")]
    top = conn.execute("SELECT max(id) FROM job_runs").fetchone()[0]  # type: ignore[index]
    rng = random.Random(17)  # noqa: S311 - which pages to ask for

    def target(page: str) -> str:
        if page == "/?after=":
            return page + rng.choice(names)
        if page == "/jobs/":
            return page + rng.choice(names)
        if page == "/runs/":
            return page + str(rng.randint(1, top))
        return page

    times: dict[str, list[float]] = {}
    for page in pages:
        for _ in range(3):  # warm-up: connections in the pool, templates compiled
            fetch(base + target(page))
        times[page] = [fetch(base + target(page)) for _ in range(requests)]
        print(f"  {page}: p95 {p95(times[page]):.0f} ms", file=sys.stderr)
    return times


def fetch(url: str) -> float:
    start = time.perf_counter()
    try:
        with urllib.request.urlopen(url, timeout=60) as response:  # noqa: S310 - our server
            response.read()
    except urllib.error.HTTPError as exc:
        if exc.code != 503:  # /healthz may say unhealthy: still an answer
            raise
        exc.read()
    return (time.perf_counter() - start) * 1000


def p95(values: list[float]) -> float:
    return statistics.quantiles(values, n=20)[-1] if len(values) >= 2 else values[0]


def report(jobs: int, small: int, total: int, pages: dict[str, list[float]],
           before: dict[str, list[float]], after: dict[str, list[float]]) -> None:
    labels = {"/": "dashboard, first page", "/?after=": "dashboard, a page further",
              "/?q=job-0123": "dashboard, filtered by name", "/jobs/": "a daily job's page",
              f"/jobs/{BUSY}": "a minutely job's page (100,000 runs, 1,440 slots a day)",
              "/runs/": "a run's page", "/healthz?scope=server": "/healthz?scope=server"}
    print(f"\n{jobs:,} jobs, {total:,} runs (and as many attempts); sequential requests, "
          "times in ms\n")
    print("| page | p50 | p95 | max |\n|---|---|---|---|")
    for page, values in pages.items():
        print(f"| {labels[page]} | {statistics.median(values):.0f} | {p95(values):.0f} | "
              f"{max(values):.0f} |")
    print(f"\n| every job at once | p95 with {small:,} runs | p95 with {total:,} runs |\n"
          "|---|---|---|")
    for page, values in before.items():
        print(f"| {page} | {p95(values):.0f} | {p95(after[page]):.0f} |")


@contextmanager
def scratch_database(server: str, name: str, *, keep: bool) -> Iterator[str]:
    with psycopg.connect(server, autocommit=True) as admin:
        admin.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(name)))
    try:
        yield make_conninfo(server, dbname=name)
    finally:
        if not keep:
            with psycopg.connect(server, autocommit=True) as admin:
                admin.execute(sql.SQL("DROP DATABASE {} WITH (FORCE)").format(
                    sql.Identifier(name)))


@contextmanager
def serving(url: str) -> Iterator[str]:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    exe = Path(sys.executable).parent / "cronjobs"
    env = {**os.environ, "CRONJOBS_DATABASE_URL": url}
    server = subprocess.Popen([str(exe), "serve", "--port", str(port), "--no-access-log"],
                              env=env, stderr=subprocess.DEVNULL)
    base = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 30
        while True:
            try:
                urllib.request.urlopen(base + "/healthz?scope=server", timeout=5).read()  # noqa: S310
                break
            except OSError:
                if time.monotonic() > deadline or server.poll() is not None:
                    raise
                time.sleep(0.2)
        yield base
    finally:
        server.terminate()
        server.wait(timeout=30)


if __name__ == "__main__":
    main()
