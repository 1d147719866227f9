"""``--only storage_verdict``: ``/healthz`` and ``/metrics`` at 100,000 definitions
(``--storage-jobs``) in storage_scale's states (on time; every job's slot come since it was
defined; every job overdue), this tree against ``--verdict-before-ref``."""

from __future__ import annotations

import shutil
import sys
import tempfile
from pathlib import Path

import benchlib
from benchlib import log
from common import Context, Section, sql
from pages import PAGE_LIMITS, serving, timed_fetches
from storage_seed import add_jobs
from versions import Version, export, git, install

# The states of storage_scale's definitions the verdict is asked about: what each sets on the
# job-* definitions (not due before next year: "0 0 1 1 *", next_due_at next year).
VERDICT_STATES = {
    # the cursor where it was defined: no slot came since
    "on time": "UPDATE job_definitions SET cursor_at = created_at",
    # the cursor moved since they were defined and none succeeded (what storage_scale's
    # materialisation leaves): each may have a problem until its schedule says not
    "slot come, none due yet": "UPDATE job_definitions SET cursor_at = now()",
    # defined a year and a day ago, the cursor moved, never succeeded: every job overdue
    "every job overdue": "UPDATE job_definitions SET created_at = now() - interval '367 days', "
                         "schedule_since = now() - interval '367 days', cursor_at = now()",
}


def bench_storage_verdict(ctx: Context) -> Section:
    server, jobs, requests = ctx.server, ctx.storage["jobs"], ctx.storage["requests"]
    ref = ctx.storage["verdict_ref"]
    n = ctx.repeats("storage_verdict")
    s = Section(
        "The verdict at scale: /healthz and /metrics, before and after",
        f"{jobs:,} shell-command definitions as storage_scale makes them (add_jobs: "
        "`0 0 1 1 *`, not due before next year), a tick recorded, in three states: "
        + "; ".join(f"{k}: `{v}`" for k, v in VERDICT_STATES.items())
        + f". Two databases per state, the same rows: one migrated by git ref `{ref}` "
        "(before), one by this tree (after), each served by its own `cronjobs serve`; "
        f"/healthz fetched {requests} times and /metrics {max(5, requests // 5)} times "
        "(after 3 warm-ups; fewer when a page is slow: storage_scale's budget), before "
        f"and after alternately, in reverse order every other repetition ({n}); p95 per "
        "page, after / before paired within a repetition.")
    tmp = Path(tempfile.mkdtemp(prefix="cjbench-verdict-"))
    try:
        commit = git("rev-parse", "--verify", f"{ref}^{{commit}}")
        export(commit, tmp / "src")
        before = install("before", f"{ref} ({commit[:10]})", tmp / "src", tmp / "venv",
                         extras="embedded,web")
        versions = {"before": before.cli, "after": list(benchlib.cronjobs_command())}
        s.extra["versions"] = {"before": before.describe(), "after": Version(
            "after", "this tree", sys.executable).describe()}
        p95s: dict[tuple[str, str, str], list[float]] = {}
        for state, update in VERDICT_STATES.items():
            dbs = {}
            for name, cli in versions.items():
                db = server.cronjobs_database(f"st_v_{name}", cli=cli)
                add_jobs(server, db, count=jobs)
                sql(server, db, "INSERT INTO job_ticks (worker, tick_at, started_at, "
                    "finished_at, status) VALUES ('bench', now(), now(), now(), 'finished')")
                sql(server, db, update)
                sql(server, db, "VACUUM ANALYZE")
                dbs[name] = db
            for rep in range(n):
                order = list(dbs.items())
                for name, db in order[::-1] if rep % 2 else order:
                    # a tick just now (else "no tick for ..." after a few slow minutes)
                    sql(server, db, "UPDATE job_ticks SET tick_at = now(), "
                        "started_at = now(), finished_at = now()")
                    with serving(server.conninfo(db), versions[name]) as base:
                        for path in ("/healthz", "/metrics"):
                            count = max(5, requests // 5) if path == "/metrics" else requests
                            times = timed_fetches(base + path, count)
                            p95 = benchlib.percentile(times, 95)
                            p95s.setdefault((state, path, name), []).append(p95)
                            log(f"  [{rep + 1}/{n}] {state}, {name}: {path} p95 {p95:.0f} ms")
            for db in dbs.values():
                server.drop_database(db)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    for (state, path, name), values in p95s.items():
        s.figure(f"{state}: {path} p95, {name}", "ms", values)
    for state in VERDICT_STATES:
        for path, limit in PAGE_LIMITS.items():
            after, prior = p95s[(state, path, "after")], p95s[(state, path, "before")]
            s.figure(f"{state}: {path} p95 after / before", "x",
                     [a / max(b, 1e-9) for a, b in zip(after, prior, strict=True)])
            s.target(f"{state}: {path} p95 <= {limit:.0f} ms (after)",
                     (min(after), sorted(after)[len(after) // 2]), "<=", limit, "ms")
    return s

