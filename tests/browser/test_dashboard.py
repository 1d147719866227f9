"""The dashboard in a real headless browser: Debian's chromium, driven by Playwright, against
a real `cronjobs serve` process and a database with history from real ticks."""

from __future__ import annotations

import json
import os
import re
import signal
import time
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


# -- health first, at desktop and phone width -------------------------------------------------

DESKTOP = {"width": 1280, "height": 800}
PHONE = {"width": 390, "height": 844}
WIDTHS = [pytest.param(DESKTOP, id="desktop"), pytest.param(PHONE, id="phone")]


def _open(browser: Any, viewport: dict[str, int]) -> tuple[Any, list[str]]:
    """A page of that size, and the script errors it will meet."""
    page = browser.new_page(viewport=viewport, device_scale_factor=2 if viewport == PHONE
                            else 1)
    errors: list[str] = []
    page.on("pageerror", lambda exc: errors.append(str(exc)))
    return page, errors


def _fits(page: Any, errors: list[str], viewport: dict[str, int]) -> None:
    """No sideways scrolling of the page, no script error."""
    width = page.evaluate("() => document.documentElement.scrollWidth")
    assert width <= viewport["width"], (page.url, width)
    assert errors == []


def _on_screen(locator: Any, viewport: dict[str, int]) -> None:
    """Visible, and wholly within the width of the screen. (Read in one evaluation: the page
    refreshes itself every few seconds, and a row replaced between two calls has no box. The
    locator finds the element and then evaluates on it in two steps, so an element the refresh
    detached in between is found again; only a connected element's box is judged.)"""
    for _ in range(20):
        box = locator.evaluate(
            "e => { const r = e.getBoundingClientRect(); return {x: r.x, width: r.width, "
            "height: r.height, hidden: getComputedStyle(e).visibility === 'hidden', "
            "connected: e.isConnected}; }")
        if box["connected"]:
            break
        time.sleep(0.05)
    assert box["connected"], box  # replaced on every try: the page never settled
    assert box["width"] > 0 and box["height"] > 0 and not box["hidden"], box  # visible
    assert box["x"] >= 0 and box["x"] + box["width"] <= viewport["width"], box


def _fields_unbroken(page: Any) -> None:
    """Every field of every cron expression on the page is on one line."""
    lines = page.evaluate("() => Array.from(document.querySelectorAll('code.cron span'))"
                          ".map(s => s.getClientRects().length)")
    assert lines and set(lines) == {1}, lines


@pytest.mark.parametrize("viewport", WIDTHS)
def test_the_banner_says_what_healthz_says_and_clears_when_acknowledged(
        browser: Any, server: str, cli: Invoke, db: psycopg.Connection[Any],
        viewport: dict[str, int]) -> None:
    _, bad = _seed(cli, db)
    page, errors = _open(browser, viewport)
    page.goto(server + "/")
    banner = page.locator("#health")
    # first on the page, before the cards
    assert page.evaluate("() => document.querySelector('main').firstElementChild.id") == "health"
    assert "bad" in (banner.get_attribute("class") or "")
    healthz = page.request.get(server + "/healthz")
    assert healthz.status == 503
    problems = healthz.json()["problems"]
    whats = banner.locator("li.problem .what").all_inner_texts()
    assert len(whats) == len(problems) == 1
    assert problems[0].startswith(whats[0])
    assert whats[0] == f"job 'flaky': 1 dead run(s) not acknowledged (latest: run {bad})"
    _on_screen(banner.locator("li.problem .what"), viewport)
    _on_screen(banner.get_by_role("link", name=f"run {bad}"), viewport)
    assert page.locator(".card.dead").get_attribute("class") == "card dead bad"
    _fits(page, errors, viewport)
    # its link leads to the run
    banner.get_by_role("link", name=f"run {bad}").click()
    page.wait_for_url(f"{server}/runs/{bad}")
    assert page.locator("#health li.problem").count() == 1  # on every page
    # signed in, the banner's button acknowledges, and the page comes back healthy
    page.fill('input[name="token"]', TOKEN)
    page.click("button:has-text('Sign in')")
    page.wait_for_url(f"{server}/runs/{bad}")
    page.goto(server + "/")
    button = page.locator("#health button", has_text="Acknowledge")
    _on_screen(button, viewport)
    button.click()
    page.wait_for_url(server + "/?done=acknowledged-all")
    page.wait_for_load_state()
    assert page.locator("#health").get_attribute("class") == "banner ok"
    assert page.locator("#health h2").inner_text().startswith("All well: no problem found")
    assert page.locator("#health li.problem").count() == 0
    assert page.locator(".card.dead").get_attribute("class") == "card dead"
    assert page.locator(".card.dead .sub").inner_text() == "all acknowledged"
    assert page.request.get(server + "/healthz").status == 200
    _fits(page, errors, viewport)


@pytest.mark.parametrize("viewport", WIDTHS)
def test_what_is_failing_is_visible_without_scrolling_sideways(
        browser: Any, server: str, cli: Invoke, db: psycopg.Connection[Any],
        viewport: dict[str, int]) -> None:
    ok, bad = _seed(cli, db)
    assert cli("define", "long-schedule", "0,15,30,45 8-18 * JAN-MAR,OCT-DEC MON-FRI",
               "--command", "python -m a.rather.long.module.name --with-a-long-option "
               "--and-another-one=/a/long/path/on/disk").exit_code == 0
    page, errors = _open(browser, viewport)
    page.goto(server + "/")
    flaky = page.locator('tr[data-job="flaky"]')
    _on_screen(flaky.locator("a.name"), viewport)
    _on_screen(flaky.locator(".badge.s-dead"), viewport)  # its state: dead
    _on_screen(flaky.locator(".badge.s-problem"), viewport)  # and a problem
    _on_screen(page.locator('tr[data-job="long-schedule"] code.cron'), viewport)
    _fields_unbroken(page)
    _fits(page, errors, viewport)
    # a job's page: its runs table whole, the schedule unbroken
    page.goto(server + "/jobs/flaky")
    row = page.locator("table.runs tbody tr").first
    _on_screen(row, viewport)
    _on_screen(row.locator(f'a[href="/runs/{bad}"]'), viewport)
    _on_screen(row.locator(".c-status .badge.s-dead").first, viewport)  # dead
    _on_screen(row.locator(".c-status .badge.small.s-dead"), viewport)  # not acknowledged
    _on_screen(row.locator(".c-error"), viewport)
    _on_screen(page.locator("table.timeline tbody tr").first, viewport)
    _fields_unbroken(page)
    _fits(page, errors, viewport)
    page.goto(server + "/jobs/long-schedule")
    _fields_unbroken(page)
    _fits(page, errors, viewport)
    page.goto(f"{server}/runs/{ok}")
    _on_screen(page.locator("pre.output"), viewport)
    _fits(page, errors, viewport)


RESULT_JOBS = '''
import cronjobs


@cronjobs.job("weekly-totals")
def weekly_totals(ctx):
    print("counting")
    return {"orders": 1284, "refunds": 3, "regions": ["eu", "us"], "note": "<i>as text</i>"}
'''


@pytest.mark.parametrize("viewport", WIDTHS)
def test_the_run_page_shows_the_handlers_result(
        browser: Any, server: str, cli: Invoke, db: psycopg.Connection[Any], tmp_path: Path,
        monkeypatch: pytest.MonkeyPatch, viewport: dict[str, int]) -> None:
    (tmp_path / "browser_result_jobs.py").write_text(RESULT_JOBS)
    monkeypatch.syspath_prepend(str(tmp_path))
    assert cli("define", "weekly-totals", "0 6 * * 1").exit_code == 0
    run_id = json.loads(cli("trigger", "weekly-totals", "--json").stdout)["id"]
    tick(Store(db), TickOptions(worker="browser-test", apps=("browser_result_jobs",),
                                in_process=True))
    page, errors = _open(browser, viewport)
    page.goto(f"{server}/runs/{run_id}")
    result = page.locator("pre.result")
    _on_screen(result, viewport)
    assert json.loads(result.inner_text()) == {
        "orders": 1284, "refunds": 3, "regions": ["eu", "us"], "note": "<i>as text</i>"}
    assert result.locator("i").count() == 0  # text, not markup
    assert page.locator("dt", has_text="Result").is_visible()
    _fits(page, errors, viewport)


@pytest.mark.parametrize("viewport", WIDTHS)
def test_error_pages_are_styled_worded_for_the_web_and_lead_back(
        browser: Any, server: str, cli: Invoke, db: psycopg.Connection[Any],
        viewport: dict[str, int]) -> None:
    _seed(cli, db)
    page, errors = _open(browser, viewport)
    for path, status, title, message in (
            ("/jobs/nope", 404, "Not found", "No job named 'nope'."),
            ("/runs/987654", 404, "Not found", "No run with id 987654."),
            ("/nowhere/at/all", 404, "Not found", "There is no page at this address."),
            ("/runs/x", 400, "That address is not valid",
             "Malformed run id: run ids are positive integers."),
            ("/jobs/flaky/trigger", 405, "Not allowed here",
             "This address does not take that kind of request: use the dashboard's links "
             "and buttons instead.")):
        answer = page.goto(server + path)
        assert answer is not None and answer.status == status, path
        assert page.locator(".oops h1").inner_text() == title
        assert page.locator(".oops .message").inner_text() == message
        assert "`" not in page.locator("main").inner_text()
        # in the site's layout: its header, its stylesheet
        _on_screen(page.locator("header.top .brand"), viewport)
        assert page.evaluate("() => getComputedStyle(document.querySelector('.oops'))"
                             ".borderTopStyle") == "solid"
        back = page.get_by_role("link", name="Back to the dashboard")
        _on_screen(back, viewport)
        _fits(page, errors, viewport)
        back.click()
        page.wait_for_url(server + "/")
        assert page.locator("#health").count() == 1
    # a wrong token: a page that says so, and leads back to where it was typed
    page.goto(server + "/jobs/flaky")
    page.fill('input[name="token"]', "not-the-token-at-all")
    page.click("button:has-text('Sign in')")
    assert page.locator(".oops h1").inner_text() == "Not allowed"
    assert page.locator(".oops .message").inner_text() == (
        "That is the wrong admin token: you are not signed in.")
    _fits(page, errors, viewport)
    page.get_by_role("link", name="Back to the page you came from").click()
    page.wait_for_url(server + "/jobs/flaky")


# -- the docs' screenshots --------------------------------------------------------------------

DOCS = Path(__file__).resolve().parents[2] / "docs"


def test_the_docs_screenshots(browser: Any, server: str, cli: Invoke,
                              db: psycopg.Connection[Any]) -> None:
    """The dashboard of docs/how-to/dashboard.md, with showcase's jobs: checked on every run, and
    written to docs/dashboard.png and docs/dashboard-phone.png with CRONJOBS_SCREENSHOTS=1
    (docs/screenshot.py)."""
    from showcase import DEAD, JOBS, seed

    seed(cli, db)
    shots = {DESKTOP["width"]: DOCS / "dashboard.png",
             PHONE["width"]: DOCS / "dashboard-phone.png"}
    for viewport in (DESKTOP, PHONE):
        context = browser.new_context(viewport=viewport, color_scheme="light",
                                      timezone_id="Europe/London", locale="en-GB",
                                      device_scale_factor=1 if viewport == DESKTOP else 2)
        page = context.new_page()
        page.goto(server + "/")
        assert page.locator("tr.job").count() == len(JOBS)
        problems = page.locator("#health li.problem")
        assert sorted(problems.evaluate_all("(items) => items.map(i => i.dataset.job)")) == (
            sorted(DEAD))
        for job in DEAD:
            _on_screen(page.locator(f'tr[data-job="{job}"] a.name'), viewport)
            _on_screen(page.locator(f'tr[data-job="{job}"] .badge.s-problem'), viewport)
        assert page.evaluate("() => document.documentElement.scrollWidth") <= viewport["width"]
        if os.environ.get("CRONJOBS_SCREENSHOTS") == "1":
            page.wait_for_timeout(300)
            # the whole page on a desktop; on a phone, the first screen
            page.screenshot(path=str(shots[viewport["width"]]), full_page=viewport == DESKTOP)
        context.close()


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
