"""The forecast at scale (issue 28): `cronjobs forecast` over the next 24 hours of 100,000
definitions, against the target of 2 s.

The fleet is seeded with SQL the way fleets look: most jobs on a few dozen schedules written
by hand (`0 3 * * *`, `*/5 * * * *`, `@daily`, the day extensions...) in a handful of zones,
a share of them spread with `H` (each such job is its own schedule: H is worked out from its
name), some paused (a share of those with an end inside the window), and a thousand one-off
runs waiting for their time. Measured: the real CLI as a subprocess (`forecast --json`, wall
time: start-up, reading the definitions, expanding, rendering), and the library call alone
in this process (the store's reads and the expansion), the median of several runs each;
and `define` of one more job, with its crowded-minute check (the fleet over 7 days) and
without it. With ``--baseline-ref REF`` the CLI of the code at REF is timed too, its runs
alternating with this checkout's, so that both see the same moments of a shared machine.

    python bench/forecast.py [--database-url URL] [--jobs 100000] [--hashed 0.05]
                             [--baseline-ref REF]

A figure set against its target says `met` or `NOT met`; the script always exits 0 once it
measured.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import statistics
import time
from typing import Any

import benchlib
from common import sql
from versions import before_and_after

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


def cli_times(conninfo: str, argv: list[str], cli: list[str] | None) -> tuple[float, str]:
    """One run of ``cronjobs ARGV`` (wall seconds, stdout)."""
    started = time.perf_counter()
    finished = benchlib.run_cli(argv, conninfo, cli=cli)
    wall = time.perf_counter() - started
    if finished.returncode != 0:
        raise SystemExit(f"cronjobs {argv[0]} failed: {finished.stderr}")
    return wall, finished.stdout


def measure(server: benchlib.Server, db: str, repeats: int,
            versions: dict[str, list[str] | None]) -> dict[str, Any]:
    """``forecast --json`` of each version (their runs alternating), then ``define`` of one
    job into the fleet with its crowded-minute check and with ``--crowded-threshold off``
    (this checkout's CLI), then the library call in this process."""
    conninfo = server.conninfo(db)
    cli: dict[str, list[float]] = {name: [] for name in versions}
    result: dict[str, Any] = {}
    for _ in range(repeats):
        for name, command in versions.items():
            wall, out = cli_times(conninfo, ["forecast", "--json"], command)
            cli[name].append(wall)
            result = json.loads(out)
    define: dict[str, list[float]] = {"check": [], "off": []}
    for _ in range(repeats):
        for how, extra in (("check", []), ("off", ["--crowded-threshold", "off"])):
            wall, _ = cli_times(conninfo, ["define", "bench-new-job", "0 3 * * *",
                                           "--command", "true", "--json", *extra], None)
            define[how].append(wall)
    library_times = []
    connected = open_store(resolve_database(conninfo), retry_for=10)
    try:
        for _ in range(repeats):
            started = time.perf_counter()
            forecast(connected.store)
            library_times.append(time.perf_counter() - started)
    finally:
        connected.store.close()
    peak = result["peaks"][0] if result.get("peaks") else {}
    return {"cli": cli, "define": define, "library": library_times, "jobs": result.get("jobs"),
            "paused": result.get("paused"), "distinct": result.get("distinct_schedules"),
            "fires": result.get("fires"), "one_offs": result.get("one_off_runs"),
            "peak": (peak.get("at"), peak.get("fires"))}


def line(name: str, values: list[float], target: float | None = TARGET) -> str:
    value = statistics.median(values)
    spread = ", ".join(f"{v:.2f}" for v in values)
    text = f"  {name}: median {value:.2f} s (runs: {spread})"
    if target is not None:
        text += f"; target {target:.1f} s: {'met' if value <= target else 'NOT met'}"
    return text


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--database-url", help="a maintenance database (default: embedded)")
    parser.add_argument("--jobs", type=int, default=100_000)
    parser.add_argument("--hashed", type=float, default=0.05,
                        help="the share of jobs written with H (default 0.05)")
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--baseline-ref", metavar="REF",
                        help="also time `forecast` of the code at this git ref, its runs "
                             "alternating with this checkout's (each installed afresh)")
    args = parser.parse_args()
    with contextlib.ExitStack() as stack:
        versions: dict[str, list[str] | None] = {"this checkout": None}
        if args.baseline_ref:
            before, after = stack.enter_context(before_and_after(args.baseline_ref))
            versions = {f"before ({before.source})": before.cli,
                        f"after ({after.source})": after.cli}
        server = stack.enter_context(benchlib.open_server(args.database_url))
        db = server.cronjobs_database("forecast")
        benchlib.log(f"seeding {args.jobs:,} definitions ({args.hashed:.0%} with H)")
        seed(server, db, args.jobs, args.hashed)
        benchlib.log("measuring")
        found = measure(server, db, args.repeats, versions)
    print(f"forecast of the next 24 h, {found['jobs']:,} jobs expanded ({found['paused']:,} "
          f"paused throughout), {found['distinct']:,} distinct schedules, "
          f"{found['fires']:,} fires, {found['one_offs']:,} one-off runs; "
          f"busiest minute {found['peak'][0]} with {found['peak'][1]:,} fires")
    for name, values in found["cli"].items():
        print(line(f"cronjobs forecast --json (wall), {name}", values))
    if len(found["cli"]) == 2:
        before_times, after_times = (statistics.median(v) for v in found["cli"].values())
        print(f"  after / before: {after_times / before_times:.2f}")
    print(line("library call (reads + expansion)", found["library"]))
    print(line("cronjobs define with the crowded-minute check (7 days)", found["define"]["check"],
               None))
    print(line("cronjobs define --crowded-threshold off", found["define"]["off"], None))


if __name__ == "__main__":
    main()
