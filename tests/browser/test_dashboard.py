"""The dashboard in a real headless browser: Debian's chromium, driven by Playwright, against
a real `cronjobs serve` process and a database with history from real ticks."""

from __future__ import annotations

import json
import os
import re
import signal
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import psycopg
import pytest

from conftest import Invoke, count, serving
from cronjobs.db.store import Store
from cronjobs.tick import TickOptions, tick
from system_tools import require_tool

pytestmark = pytest.mark.slow

TOKEN = "browser-admin-token-0123456789"


@pytest.fixture
def browser() -> Iterator[Any]:
    executable = require_tool("chromium", "chromium")
    from playwright.sync_api import sync_playwright

    args = ["--no-sandbox"] if os.geteuid() == 0 else []
    with sync_playwright() as playwright:
        launched = playwright.chromium.launch(executable_path=executable, args=args)
        try:
            yield launched
        finally:
            launched.close()


@pytest.fixture
def server(database_url: str, tmp_path: Path) -> Iterator[str]:
    """`cronjobs serve` with an admin token, on a free port."""
    log = tmp_path / "serve.log"
    with serving(log, {"CRONJOBS_DATABASE_URL": database_url, "CRONJOBS_ADMIN_TOKEN": TOKEN,
                       "CRONJOBS_SERVE_REFRESH": "2s"}) as (base, process):
        yield base
    # uvicorn finishes the requests under way, then ends by the signal it was sent
    assert process.returncode in (0, -signal.SIGTERM), log.read_text()
    assert "Application shutdown complete" in log.read_text()
    assert TOKEN not in log.read_text()


def _seed(cli: Invoke, db: psycopg.Connection[Any]) -> tuple[int, int]:
    for name, command in (("nightly-report", "echo 'report: 42 rows <b>bold?</b>'"),
                          ("flaky", "echo 'oops' >&2; exit 7")):
        assert cli("define", name, "0 3 * * *", "--command", command,
                   "--max-attempts", "1").exit_code == 0
    ok = json.loads(cli("trigger", "nightly-report", "--json").stdout)["id"]
    bad = json.loads(cli("trigger", "flaky", "--json").stdout)["id"]
    tick(Store(db), TickOptions(worker="browser-test"))
    return ok, bad


def test_the_dashboard_shows_seeded_jobs_and_runs(browser: Any, server: str, cli: Invoke,
                                                  db: psycopg.Connection[Any]) -> None:
    ok, bad = _seed(cli, db)
    page = browser.new_page()
    errors: list[str] = []
    page.on("pageerror", lambda exc: errors.append(str(exc)))
    page.on("console", lambda msg: errors.append(msg.text) if msg.type == "error" else None)
    page.goto(server + "/")
    rows = page.locator("tr.job")
    assert rows.count() == 2
    assert rows.nth(0).get_attribute("data-job") == "flaky"
    report = page.locator('tr[data-job="nightly-report"]')
    assert report.locator(".badge.s-succeeded").inner_text() == "succeeded"
    assert page.locator('tr[data-job="flaky"] .badge.s-dead').inner_text() == "dead"
    assert page.locator(f'a.mark.s-succeeded[href="/runs/{ok}"]').count() == 1
    assert page.locator(f'a.mark.s-dead[href="/runs/{bad}"]').count() == 1
    # times: relative words as the command line says them, the exact instant in the
    # viewer's zone on hover, in the command line's pattern (cronjobs/timefmt.py)
    last = report.locator("time").last
    assert re.fullmatch(r"now|\d+ (s|min) ago", last.inner_text())
    assert re.match(r"\d{4}-\d\d-\d\d \d\d:\d\d \S+ \(", last.get_attribute("title") or "")
    # it refreshes itself: a run triggered now appears without a reload
    marker = page.evaluate("() => { window.__kept = 1; return window.__kept; }")
    queued = json.loads(cli("trigger", "nightly-report", "--json").stdout)["id"]
    page.locator(f'a.mark.s-queued[href="/runs/{queued}"]').wait_for(timeout=15_000)
    assert page.evaluate("() => window.__kept") == marker  # the same page: not reloaded
    assert errors == []


def test_a_run_page_shows_its_output(browser: Any, server: str, cli: Invoke,
                                     db: psycopg.Connection[Any]) -> None:
    ok, bad = _seed(cli, db)
    page = browser.new_page()
    page.goto(f"{server}/runs/{ok}")
    assert page.locator("pre.output").inner_text() == "report: 42 rows <b>bold?</b>\n"
    assert page.locator("pre.output b").count() == 0  # shown as text, not as markup
    page.goto(f"{server}/runs/{bad}")
    assert page.locator("pre.output").inner_text() == "oops\n"
    assert "exit code 7" in page.locator(".attempt").inner_text()
    page.click("text=flaky")
    assert page.url == f"{server}/jobs/flaky"
    assert page.locator("h2", has_text="Last 24 hours").count() == 1


def test_an_action_works_with_the_token_and_is_refused_without(
        browser: Any, server: str, cli: Invoke, db: psycopg.Connection[Any]) -> None:
    _seed(cli, db)
    before = count(db, "job_runs")
    page = browser.new_page()
    page.goto(server + "/jobs/nightly-report")
    assert page.locator("button", has_text="Run now").count() == 0  # not signed in
    # without the token: refused, nothing written
    refused = page.request.post(server + "/jobs/nightly-report/trigger", form={"csrf": "x"})
    assert refused.status == 403
    page.fill('input[name="token"]', "not-the-token-at-all")
    page.click("button:has-text('Sign in')")
    assert "wrong admin token" in page.content()
    assert count(db, "job_runs") == before
    # with it: signed in, the button triggers a run and the run's page says so
    page.goto(server + "/jobs/nightly-report")
    page.fill('input[name="token"]', TOKEN)
    page.click("button:has-text('Sign in')")
    page.click("button:has-text('Run now')")
    page.wait_for_url(re.compile(r"/runs/\d+\?done=triggered$"))
    assert page.locator(".flash").inner_text() == "Triggered: the next tick runs it."
    assert count(db, "job_runs") == before + 1
    assert TOKEN not in page.content()
    assert all(TOKEN not in cookie["value"] for cookie in page.context.cookies())
    # pause, then resume, from the job's page
    page.goto(server + "/jobs/nightly-report")
    page.click("button:has-text('Pause')")
    page.wait_for_url(re.compile(r"/jobs/nightly-report\?done=paused$"))
    page.wait_for_load_state()
    assert page.locator("h1 .badge.s-paused").count() == 1
    page.click("button:has-text('Resume')")
    page.wait_for_url(re.compile(r"/jobs/nightly-report\?done=resumed$"))
    page.wait_for_load_state()
    assert page.locator("h1 .badge").count() == 0


def test_the_dashboard_is_readable_on_a_phone(browser: Any, server: str, cli: Invoke,
                                              db: psycopg.Connection[Any]) -> None:
    _seed(cli, db)
    page = browser.new_page(viewport={"width": 375, "height": 740}, device_scale_factor=2)
    page.goto(server + "/")
    width = page.evaluate("() => document.documentElement.scrollWidth")
    assert width <= 375  # no sideways scrolling of the page
    assert page.locator("tr.job").count() == 2


def test_the_forecast_heatmap_shows_the_peak_and_each_job_its_place(
        browser: Any, server: str, cli: Invoke) -> None:
    for i in range(12):
        assert cli("define", f"nightly-{i:02d}", "0 3 * * *", "--command", "true",
                   "--crowded-threshold", "off").exit_code == 0
    assert cli("define", "spread", "H 5 * * *", "--command", "true").exit_code == 0
    page = browser.new_page()
    errors: list[str] = []
    page.on("pageerror", lambda exc: errors.append(str(exc)))
    page.goto(server + "/")
    page.click("a[href='/forecast']")
    page.wait_for_url(server + "/forecast")
    cells = page.locator("table.heatmap.day td")
    assert cells.count() == 24 * 60
    peak_cell = page.locator('td[data-cell="03:00"]')
    assert peak_cell.get_attribute("data-count") == "12"
    assert peak_cell.get_attribute("class") == "h5"  # the busiest: the darkest
    assert page.locator('td[data-cell="03:01"]').get_attribute("class") == "h0"
    assert sum(int(c) for c in page.eval_on_selector_all(
        "table.heatmap td", "cells => cells.map(c => c.dataset.count)")) == 13
    colours = page.eval_on_selector_all(
        'td[data-cell="03:00"], td[data-cell="03:01"]',
        "cells => cells.map(c => getComputedStyle(c).backgroundColor)")
    assert colours[0] != colours[1]
    first = page.locator("tr.peak").first
    assert first.get_attribute("data-fires") == "12"
    assert first.get_attribute("data-at", timeout=1000).endswith("T03:00:00+00:00")
    assert first.locator("a.name").count() == 8
    assert "and 4 more" in first.inner_text()
    # the week: day of week by hour
    page.click("text=next week")
    assert page.locator("table.heatmap.week td").count() == 7 * 24
    assert page.locator("tr.peak").first.get_attribute("data-fires") == "12"
    # a job's place in the peaks, with what H would give
    page.goto(server + "/jobs/nightly-00")
    place = page.locator("p.place").inner_text()
    assert "holds 12 run(s) of the fleet: #1 of the day's minutes" in place
    assert "crowded" in place and "`H 3 * * *` would run at 03:" in place
    page.goto(server + "/jobs/spread")
    assert "holds 1 run(s) of the fleet" in page.locator("p.place").inner_text()
    assert errors == []
