"""The forecast at scale (issue 28): `cronjobs forecast` over the next 24 hours of 100,000
definitions, against the target of 2 s.

The fleet is seeded with SQL the way fleets look: most jobs on a few dozen schedules written
by hand (`0 3 * * *`, `*/5 * * * *`, `@daily`, the day extensions...) in a handful of zones,
a share of them spread with `H` (each such job is its own schedule: H is worked out from its
name), some paused (a share of those with an end inside the window), and a thousand one-off
runs waiting for their time. Measured: the real CLI as a subprocess (`forecast --json`, wall
time: start-up, reading the definitions, expanding, rendering), and the library call alone
in this process (the store's reads and the expansion), the median of several runs each.

    python bench/forecast.py [--database-url URL] [--jobs 100000] [--hashed 0.05]

A figure set against its target says `met` or `NOT met`; the script always exits 0 once it
measured.
"""

from __future__ import annotations

import argparse
import json
import statistics
import time

import benchlib
from common import sql

from cronjobs.core.forecast import forecast
from cronjobs.db.config import resolve_database
from cronjobs.db.connect import open_store

TARGET = 2.0  # seconds, issue 28
COMMON = ["0 0 * * *", "0 3 * * *", "0 4 * * *", "30 2 * * *", "0 6 * * 1-5", "15 * * * *",
          "*/5 * * * *", "*/15 * * * *", "*/30 * * * *", "0 * * * *", "0 */2 * * *",
          "0 9 * * mon", "0 0 1 * *", "0 18 LW * *", "0 6 * * fri#3", "30 4 * * 0",
          "@daily", "@hourly", "@weekly", "0 12 * * *", "45 23 * * *", "0 1 * * *",
          "0 0 * * 6", "10 5 * * *", "*/10 * * * *", "0 8-18 * * 1-5", "0 22 * * *",
          "5 4 * * sun", "0 0 L * *", "* * * * *"]
HASHED = ["H 3 * * *", "H H * * *", "H/15 * * * *", "H(0-29) 2 * * *", "H 4 * * 1-5"]
ZONES = ["UTC", "Europe/Berlin", "America/New_York", "Asia/Tokyo", "Europe/London",
         "America/Los_Angeles", "Australia/Sydney", "Asia/Kolkata"]


def seed(server: benchlib.Server, db: str, jobs: int, hashed: float) -> None:
    """``jobs`` definitions: a share ``hashed`` with H, the others on COMMON, round-robin
    over ZONES; 2 % paused (half of them until 12 hours from now); 1,000 one-off runs."""
    every = max(1, round(1 / hashed)) if hashed > 0 else 0
    sql(server, db, """
        INSERT INTO job_definitions (name, schedule, timezone, kind, command, max_attempts,
                                     cursor_at, next_due_at)
        SELECT 'job-' || g,
               CASE WHEN %(every)s > 0 AND g %% %(every)s = 0
                    THEN (%(hashed)s::text[])[1 + g %% cardinality(%(hashed)s::text[])]
                    ELSE (%(common)s::text[])[1 + (g * 7) %% cardinality(%(common)s::text[])]
               END,
               (%(zones)s::text[])[1 + (g / 3) %% cardinality(%(zones)s::text[])],
               'command', 'true', 1, now(), now() + interval '1 minute'
        FROM generate_series(1, %(jobs)s) AS g
        """, {"jobs": jobs, "every": every, "hashed": HASHED, "common": COMMON,
              "zones": ZONES})
    sql(server, db, """
        UPDATE job_definitions
        SET paused_at = now(),
            paused_until = CASE WHEN id % 100 = 0 THEN now() + interval '12 hours' END
        WHERE id % 50 = 0
        """)
    sql(server, db, """
        INSERT INTO job_runs (definition_id, scheduled_for, trigger, status, max_attempts,
                              exclusive, eligible_at)
        SELECT g * 97, now() + g * interval '1 minute', 'manual', 'scheduled', 1, true,
               now() + g * interval '1 minute'
        FROM generate_series(1, 1000) AS g
        """)
    sql(server, db, "VACUUM ANALYZE")


def measure(server: benchlib.Server, db: str, repeats: int) -> dict[str, object]:
    conninfo = server.conninfo(db)
    cli_times = []
    result: dict[str, object] = {}
    for _ in range(repeats):
        started = time.perf_counter()
        finished = benchlib.run_cli(["forecast", "--json"], conninfo)
        cli_times.append(time.perf_counter() - started)
        if finished.returncode != 0:
            raise SystemExit(f"cronjobs forecast failed: {finished.stderr}")
        result = json.loads(finished.stdout)
    library_times = []
    connected = open_store(resolve_database(conninfo), retry_for=10)
    try:
        for _ in range(repeats):
            started = time.perf_counter()
            forecast(connected.store)
            library_times.append(time.perf_counter() - started)
    finally:
        connected.store.close()
    peak = result["peaks"][0] if result.get("peaks") else {}  # type: ignore[index, union-attr, attr-defined]
    return {"cli": cli_times, "library": library_times, "jobs": result.get("jobs"),
            "paused": result.get("paused"), "distinct": result.get("distinct_schedules"),
            "fires": result.get("fires"), "one_offs": result.get("one_off_runs"),
            "peak": (peak.get("at"), peak.get("fires"))}  # type: ignore[union-attr]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--database-url", help="a maintenance database (default: embedded)")
    parser.add_argument("--jobs", type=int, default=100_000)
    parser.add_argument("--hashed", type=float, default=0.05,
                        help="the share of jobs written with H (default 0.05)")
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args()
    with benchlib.open_server(args.database_url) as server:
        db = server.cronjobs_database("forecast")
        benchlib.log(f"seeding {args.jobs:,} definitions ({args.hashed:.0%} with H)")
        seed(server, db, args.jobs, args.hashed)
        benchlib.log("measuring")
        found = measure(server, db, args.repeats)
    cli = statistics.median(found["cli"])  # type: ignore[arg-type]
    library = statistics.median(found["library"])  # type: ignore[arg-type]
    print(f"forecast of the next 24 h, {found['jobs']:,} jobs expanded ({found['paused']:,} "
          f"paused throughout), {found['distinct']:,} distinct schedules, "
          f"{found['fires']:,} fires, {found['one_offs']:,} one-off runs; "
          f"busiest minute {found['peak'][0]} with {found['peak'][1]:,} fires")  # type: ignore[index]
    for name, value, values in (("cronjobs forecast --json (wall)", cli, found["cli"]),
                                ("library call (reads + expansion)", library,
                                 found["library"])):
        verdict = "met" if value <= TARGET else "NOT met"
        spread = ", ".join(f"{v:.2f}" for v in values)  # type: ignore[attr-defined]
        print(f"  {name}: median {value:.2f} s (runs: {spread}); target {TARGET:.1f} s: "
              f"{verdict}")


if __name__ == "__main__":
    main()
