"""``--only storage_retire``: dropping one day of history against DELETE, the full upkeep,
and a simulated month of every-minute jobs with 7-day retention (the database's size per
day; ``--retire-sizes``, ``--month-days``, ``--month-jobs``, ``--storage-plot``)."""

from __future__ import annotations

import datetime as dt
import time
from pathlib import Path
from typing import Any

import psycopg
from benchlib import Server, log
from common import Context, Section, db_clock, scalar, sql
from history import insert_history
from storage_seed import NOOP_DEFS, add_days, add_noop, utc_today

from cronjobs.core.retention import upkeep
from cronjobs.db.store import Store


def bench_storage_retire(ctx: Context) -> Section:
    o, server = ctx.storage, ctx.server
    sizes, month_days, month_jobs = o["retire_sizes"], o["month_days"], o["month_jobs"]
    s = Section(
        "Retirement: dropping a day against DELETE, and a month of every-minute jobs",
        "A database with 100 no-op definitions. Per size N: three past retirement days "  # noqa: S608
        "(before today, UTC) made with cronjobs_add_history_day, each filled with N "
        "succeeded runs and their attempts, finished 14 days before the day by the "
        "product's own claim and finish (history.py: retire_at spread over the day), VACUUM "
        "ANALYZE; then (1) `SELECT cronjobs_drop_history_day(day)` on the first, timed "
        "from the client (one autocommit statement); (2) the same rows of the second "
        "deleted with DELETE (job_attempts then job_runs, WHERE retire_at in the day, one "
        "transaction); (3) the full upkeep, `cronjobs.core.retention.upkeep(store, "
        "now=now())` in this process, with the third day the only one expired (it keeps "
        "each job's latest success, then drops the day; the days ahead were made before). "
        "Baseline: the same upkeep again just after, with nothing left to do. Month: "
        f"{month_jobs} every-minute jobs, retention 7 days (succeeded and failed); for each "
        f"of {month_days} simulated days ending yesterday: the upkeep with now = the day's "
        "start (it makes the days ahead and drops the expired ones), then the day's runs "
        f"({month_jobs} x 1,440, with attempts) finished through the day by the product's "
        "own claim and finish (history.py: retire_at = finished_at + 7 days); "
        "pg_database_size "
        "after each day.")
    db = server.cronjobs_database("st_retire")
    try:
        add_noop(server, db)
        _upkeep_timed(server, db)  # the days ahead made, as a first tick would
        today = utc_today(server)
        for i, size in enumerate(sizes):
            days = [today - dt.timedelta(days=400 - 5 * i - d) for d in range(3)]
            add_days(server, db, days)
            for day in days:
                start = dt.datetime.combine(day, dt.time(), dt.UTC)
                insert_history(server, db, count=size, start=start - dt.timedelta(days=14),
                               span=dt.timedelta(days=1) - dt.timedelta(seconds=1),
                               defs=NOOP_DEFS, offset=_noop_offset(server, db))
            sql(server, db, "VACUUM ANALYZE job_runs, job_attempts")
            with psycopg.connect(server.conninfo(db), autocommit=True) as conn:
                t = time.perf_counter()
                conn.execute("SELECT cronjobs_drop_history_day(%s)", (days[0],))
                drop = time.perf_counter() - t
                lo = dt.datetime.combine(days[1], dt.time(), dt.UTC)
                hi = lo + dt.timedelta(days=1)
                t = time.perf_counter()
                with conn.transaction():
                    conn.execute("DELETE FROM job_attempts WHERE retire_at >= %s AND "
                                 "retire_at < %s", (lo, hi))
                    conn.execute("DELETE FROM job_runs WHERE retire_at >= %s AND "
                                 "retire_at < %s", (lo, hi))
                delete = time.perf_counter() - t
                conn.execute("SELECT cronjobs_drop_history_day(%s)", (days[1],))
            empty_upkeep, full_upkeep, did = _upkeep_timed(server, db)
            log(f"  {size:,} runs: drop {drop * 1000:.0f} ms, DELETE {delete * 1000:.0f} ms, "
                f"upkeep {full_upkeep * 1000:.0f} ms ({did})")
            s.figure(f"{size:,} runs a day: cronjobs_drop_history_day", "s", [drop])
            s.figure(f"{size:,} runs a day: DELETE of the same rows", "s", [delete])
            s.figure(f"{size:,} runs a day: upkeep dropping the day", "s", [full_upkeep])
            s.figure(f"{size:,} runs a day: upkeep with nothing expired", "s", [empty_upkeep])
            s.ratio(f"{size:,} runs: DELETE / drop",
                    f"{size:,} runs a day: DELETE of the same rows",
                    f"{size:,} runs a day: cronjobs_drop_history_day")
            s.extra[f"{size:,} runs: what the upkeep did"] = did
            for what in ("cronjobs_drop_history_day", "upkeep dropping the day"):
                f = s.figures[f"{size:,} runs a day: {what}"]
                s.target(f"{what}, {size:,} runs a day: <= 1 s", (f["min"], f["median"]),
                         "<=", 1.0, "s")
    finally:
        server.drop_database(db)
    if month_days:
        _month(ctx, s)
    return s


def _noop_offset(server: Server, db: str) -> int:
    return int(scalar(server, db, "SELECT min(id) - 1 FROM job_definitions "
                      "WHERE name LIKE 'noop-%%'"))


def _upkeep_timed(server: Server, db: str) -> tuple[float, float, str]:
    """(the upkeep again with nothing left to do, the upkeep now, what it did)."""
    with psycopg.connect(server.conninfo(db), autocommit=True) as conn:
        store = Store(conn)
        t = time.perf_counter()
        report = upkeep(store, now=db_clock(server))
        full = time.perf_counter() - t
        # again: nothing left to do (the baseline)
        t = time.perf_counter()
        upkeep(store, now=db_clock(server))
        empty = time.perf_counter() - t
    return empty, full, (f"dropped {report.dropped} day(s), kept {report.kept} runs, "
                         f"made {report.created} day(s)")


def _month(ctx: Context, s: Section) -> None:
    o, server = ctx.storage, ctx.server
    days, jobs = o["month_days"], o["month_jobs"]
    db = server.cronjobs_database("st_month")
    sizes: list[dict[str, Any]] = []
    try:
        add_noop(server, db, count=jobs, schedule="* * * * *", prefix="minutely-")
        offset = int(scalar(server, db, "SELECT min(id) - 1 FROM job_definitions"))
        today = utc_today(server)
        with psycopg.connect(server.conninfo(db), autocommit=True) as conn:
            store = Store(conn)
            week = dt.timedelta(days=7)
            store.retention.set_retention(succeeded=week, failed=week, skips=None, ticks=None,
                                          now=db_clock(server))
            for d in range(days):
                day = today - dt.timedelta(days=days - d)
                start = dt.datetime.combine(day, dt.time(), dt.UTC)
                t = time.perf_counter()
                report = upkeep(store, now=start, batches=10)
                spent = time.perf_counter() - t
                insert_history(server, db, count=jobs * 1440, start=start,
                               span=dt.timedelta(days=1), defs=jobs, offset=offset)
                row = conn.execute("""
                    SELECT pg_database_size(current_database()),
                           (SELECT count(*) FROM job_runs),
                           (SELECT count(*) FROM pg_inherits i
                              JOIN pg_class c ON c.oid = i.inhrelid
                             WHERE i.inhparent = 'job_runs_history'::regclass)""").fetchone()
                assert row is not None  # noqa: S101 - one row, always
                sizes.append({"day": d + 1, "date": day.isoformat(),
                              "database_mb": round(row[0] / 2**20, 1), "runs": row[1],
                              "history_partitions": row[2], "upkeep_s": round(spent, 3),
                              "dropped": report.dropped})
                log(f"  day {d + 1}/{days} ({day}): {row[0] / 2**20:,.0f} MB, "
                    f"{row[1]:,} runs, upkeep {spent:.2f} s, dropped {report.dropped}")
    finally:
        server.drop_database(db)
    s.extra["month: size per simulated day"] = sizes
    if len(sizes) >= 15:
        last = [x["database_mb"] for x in sizes[-7:]]
        mid = [x["database_mb"] for x in sizes[-14:-7]]
        s.figure("month: database size, mean of the last 7 days", "MB", last)
        s.figure("month: database size, mean of the 7 days before", "MB", mid)
        s.ratio("month: last week / the week before", "month: database size, mean of the "
                "last 7 days", "month: database size, mean of the 7 days before")
    s.figure("month: upkeep per simulated day", "s", [x["upkeep_s"] for x in sizes])
    plot = o.get("plot")
    if plot:
        plot_month(sizes, Path(plot), jobs)


def plot_month(sizes: list[dict[str, Any]], out: Path, jobs: int) -> None:
    import matplotlib  # noqa: PLC0415 - imported only to plot

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt  # noqa: PLC0415

    fig, ax = plt.subplots(figsize=(8, 4.2))
    xs = [x["day"] for x in sizes]
    ax.plot(xs, [x["database_mb"] for x in sizes], marker="o", label="pg_database_size (MB)")
    ax.set_xlabel("simulated day")
    ax.set_ylabel("MB")
    ax.grid(True, alpha=0.3)
    ax2 = ax.twinx()
    ax2.plot(xs, [x["runs"] / 1e6 for x in sizes], color="tab:orange", linestyle="--",
             label="runs in job_runs (millions)")
    ax2.set_ylabel("runs (millions)")
    lines = ax.get_legend_handles_labels()[0] + ax2.get_legend_handles_labels()[0]
    ax.legend(lines, [str(line.get_label()) for line in lines], loc="lower right", fontsize=8)
    ax.set_title(f"{jobs} every-minute jobs, 7-day retention: the database levels off",
                 fontsize=10)
    fig.tight_layout()
    out.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(out, dpi=110)
    plt.close(fig)


