"""Regenerate docs/dashboard.png: a scratch database with a few realistic jobs and their
history, `cronjobs serve` on it, and headless chromium (Playwright) taking the picture.

    pip install -e '.[web,test]'   # playwright; the browser is Debian's chromium
    python docs/screenshot.py [--server-url postgresql://postgres@127.0.0.1:5432/postgres]
"""

from __future__ import annotations

import argparse
import datetime as dt
import os
import shutil
import socket
import subprocess
import sys
import time
import urllib.request
import uuid
from pathlib import Path

import psycopg
from playwright.sync_api import sync_playwright
from psycopg import sql
from psycopg.conninfo import make_conninfo

from cronjobs import cron

DOCS = Path(__file__).resolve().parent
# name, schedule, zone, command, the fate of its last runs (newest last):
# s succeeded, f failed then retried and succeeded, d dead, r running, q queued
JOBS = [
    ("billing-export", "15 1 * * *", "UTC", "python -m billing.export --to s3://exports",
     "sssssssssssssssssd"),
    ("cleanup-tmp", "30 4 * * *", "America/New_York", "find /scratch -mtime +7 -delete",
     "ssssssssssss"),
    ("nightly-backup", "0 2 * * *", "Europe/Berlin", "pg_dump -Fc app > /backups/app.dump",
     "ssssssssfsssssssssss"),
    ("refresh-cache", "*/5 * * * *", "UTC", "curl -fsS -X POST http://app/internal/cache",
     "sssssssssssssssssssr"),
    ("send-digest", "0 8 * * 1-5", "Asia/Tokyo", "python -m mail.digest",
     "sssssssssssssss"),
    ("sync-inventory", "*/15 * * * *", "UTC", "python -m inventory.sync --full",
     "sssssfsssssssdssssfs"),
    ("warehouse-etl", "0 * * * *", "UTC", "dbt run --select tag:hourly",
     "ssssssssssssssssssss"),
]
PAUSED = {"cleanup-tmp": "disk migration, see INC-42"}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--server-url", default="postgresql://postgres@127.0.0.1:5432/postgres")
    parser.add_argument("--out", default=str(DOCS / "dashboard.png"))
    args = parser.parse_args()
    name = f"cjdocs_screenshot_{os.getpid()}"
    with psycopg.connect(args.server_url, autocommit=True) as admin:
        admin.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(name)))
    url = make_conninfo(args.server_url, dbname=name)
    exe = Path(sys.executable).parent / "cronjobs"
    env = {**os.environ, "CRONJOBS_DATABASE_URL": url}
    try:
        subprocess.run([str(exe), "migrate"], env=env, check=True, capture_output=True)
        with psycopg.connect(url, autocommit=True) as conn:
            seed(conn, exe, env)
        shoot(exe, env, Path(args.out))
    finally:
        with psycopg.connect(args.server_url, autocommit=True) as admin:
            admin.execute(sql.SQL("DROP DATABASE {} WITH (FORCE)").format(
                sql.Identifier(name)))


def seed(conn: psycopg.Connection[object], exe: Path, env: dict[str, str]) -> None:
    now = dt.datetime.now(dt.UTC)
    for job, schedule, zone, command, fates in JOBS:
        subprocess.run([str(exe), "define", job, schedule, "--tz", zone, "--command", command],
                       env=env, check=True, capture_output=True)
        conn.execute("UPDATE job_definitions SET created_at = %s, schedule_since = %s "
                     "WHERE name = %s", (now - dt.timedelta(days=60),) * 2 + (job,))
        sched = cron.parse(schedule, zone, hash_key=job)
        slots: list[dt.datetime] = []
        at = now
        while len(slots) < len(fates):
            slot = sched.latest_at_or_before(at)
            if slot is None:
                raise SystemExit(f"{job}: no slot before {at}")
            slots.insert(0, slot)
            at = slot - dt.timedelta(microseconds=1)
        (definition_id,) = conn.execute("SELECT id FROM job_definitions WHERE name = %s",
                                        (job,)).fetchone()  # type: ignore[misc]
        for slot, fate in zip(slots, fates, strict=True):
            insert_run(conn, definition_id, slot, fate, job)
    conn.execute("INSERT INTO job_ticks (worker, tick_at, started_at, finished_at, status) "
                 "SELECT 'worker-7f9c:1', t, t, t + interval '1 second', 'finished' "
                 "FROM generate_series(now() - interval '59 minutes', now(), "
                 "interval '1 minute') AS t")
    for job, note in PAUSED.items():
        subprocess.run([str(exe), "pause", job, "--note", note], env=env, check=True,
                       capture_output=True)


def insert_run(conn: psycopg.Connection[object], definition_id: int, slot: dt.datetime,
               fate: str, job: str) -> None:
    status = {"s": "succeeded", "f": "succeeded", "d": "dead", "r": "running"}[fate]
    attempts = 2 if fate == "f" else 3 if fate == "d" else 1
    started = slot + dt.timedelta(seconds=2)
    took = dt.timedelta(seconds=4 + (hash(job) % 50))
    finished = None if fate == "r" else started + took
    running = fate == "r"
    token = uuid.uuid4() if running else None
    (run_id,) = conn.execute(
        "INSERT INTO job_runs (definition_id, scheduled_for, trigger, status, attempt, "
        "max_attempts, eligible_at, started_at, finished_at, exit_code, error, output_tail, "
        "lease_owner, lease_token, lease_expires_at, heartbeat_at, created_at, updated_at) "
        "VALUES (%s, %s, 'schedule', %s, %s, 3, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, "
        "%s) RETURNING id",
        (definition_id, slot, status, attempts, slot, started, finished,
         None if running else (2 if fate == "d" else 0), "exit code 2" if fate == "d" else None,
         None if running else "done\n", "worker-7f9c:1" if running else None, token,
         slot + dt.timedelta(minutes=1) if running else None, started if running else None,
         slot, slot)).fetchone()  # type: ignore[misc]
    for attempt in range(1, attempts + 1):
        last = attempt == attempts
        outcome = ("running" if running else "succeeded" if last and fate != "d"
                   else "failed")
        conn.execute(
            "INSERT INTO job_attempts (run_id, attempt, worker, lease_token, started_at, "
            "finished_at, outcome, exit_code, error, output_tail) VALUES "
            "(%s, %s, 'worker-7f9c:1', %s, %s, %s, %s, %s, %s, %s)",
            (run_id, attempt, token or uuid.uuid4(), started, finished, outcome,
             None if running else (0 if outcome == "succeeded" else 2),
             None if outcome in ("succeeded", "running") else "exit code 2",
             None if running else "done\n"))


def shoot(exe: Path, env: dict[str, str], out: Path) -> None:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    server = subprocess.Popen([str(exe), "serve", "--port", str(port), "--no-access-log"],
                              env={**env, "CRONJOBS_ADMIN_TOKEN": "screenshot-token-0123456789"},
                              stderr=subprocess.DEVNULL)
    base = f"http://127.0.0.1:{port}"
    try:
        for _ in range(100):
            try:
                urllib.request.urlopen(base + "/healthz?scope=server", timeout=2).read()  # noqa: S310
                break
            except OSError:
                time.sleep(0.2)
        args = ["--no-sandbox"] if os.geteuid() == 0 else []
        with sync_playwright() as playwright:
            browser = playwright.chromium.launch(executable_path=shutil.which("chromium"),
                                                 args=args)
            page = browser.new_page(viewport={"width": 1280, "height": 720},
                                    device_scale_factor=1, color_scheme="light",
                                    timezone_id="Europe/London", locale="en-GB")
            page.goto(base + "/")
            page.wait_for_timeout(300)
            page.screenshot(path=str(out), full_page=True)
            browser.close()
    finally:
        server.terminate()
        server.wait(timeout=30)


if __name__ == "__main__":
    main()
