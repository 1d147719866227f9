"""`cronjobs serve` through Starlette's test client, against a real database with history
from real ticks: pages, /healthz, /metrics, the actions and their token, bad requests."""

from __future__ import annotations

import asyncio
import datetime as dt
import html
import json
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import psycopg
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from starlette.requests import Request
from starlette.responses import Response
from starlette.testclient import TestClient

from conftest import Invoke, count, snapshot
from cronjobs.core.thresholds import Thresholds
from cronjobs.db.store import Store
from cronjobs.tick import TickOptions, tick
from cronjobs.web.app import create_app
from cronjobs.web.security import CSRF_FIELD, MAX_BODY_BYTES, SESSION_COOKIE
from cronjobs.web.site import Settings

TOKEN = "s3cret-admin-token-0123456789"
HOSTILE = "<script>alert('x')</script>"
HOSTILE_ERR = '<img src=x onerror="alert(2)">'


def _client(url: str, *, token: str | None = None, **options: Any) -> TestClient:
    app = create_app(Settings(conninfo=url, admin_token=token, **options))
    return TestClient(app, raise_server_exceptions=False, follow_redirects=False)


@pytest.fixture
def web(database_url: str) -> Iterator[TestClient]:
    with _client(database_url) as client:
        yield client


@pytest.fixture
def admin(database_url: str) -> Iterator[TestClient]:
    with _client(database_url, token=TOKEN) as client:
        yield client


def _tick(db: psycopg.Connection[Any]) -> Any:
    return tick(Store(db), TickOptions(worker="test"))


def _define(cli: Invoke, name: str, command: str, *options: str) -> None:
    result = cli("define", name, "0 0 1 1 *", "--command", command, *options)
    assert result.exit_code == 0, result.stderr


def _trigger(cli: Invoke, name: str) -> int:
    result = cli("trigger", name, "--json")
    assert result.exit_code == 0, result.stderr
    return int(json.loads(result.stdout)["id"])


def _hostile_history(cli: Invoke, db: psycopg.Connection[Any]) -> int:
    """A job whose command, output, error and pause note carry HTML and script."""
    _define(cli, "hostile", f"printf '%s\\n' \"{HOSTILE}\"; exit 3", "--max-attempts", "1")
    run_id = _trigger(cli, "hostile")
    _tick(db)
    db.execute("UPDATE job_runs SET error = %s", (HOSTILE_ERR,))
    db.execute("UPDATE job_attempts SET error = %s", (HOSTILE_ERR,))
    assert cli("pause", "hostile", "--note", HOSTILE).exit_code == 0
    return run_id


def _assert_escaped(body: str) -> None:
    assert HOSTILE not in body
    assert HOSTILE_ERR not in body
    assert "<script" not in body.replace('<script src="/static/app.js" defer></script>', "")


# -- pages --------------------------------------------------------------------------------

def test_the_dashboard_shows_jobs_their_state_and_latest_runs(
        web: TestClient, cli: Invoke, db: psycopg.Connection[Any]) -> None:
    _hostile_history(cli, db)
    _define(cli, "ok", "echo fine")
    runs = [_trigger(cli, "ok")]
    _tick(db)
    runs.append(_trigger(cli, "ok"))
    page = web.get("/")
    assert page.status_code == 200
    assert page.headers["content-type"].startswith("text/html")
    body = page.text
    _assert_escaped(body)
    assert 'data-job="ok"' in body and 'data-job="hostile"' in body
    # the strip: the succeeded run then the queued one, oldest first, each a link
    marks = re.findall(r'class="mark s-(\w+)" href="/runs/(\d+)"', body)
    assert [m for m in marks if int(m[1]) in runs] == [("succeeded", str(runs[0])),
                                                       ("queued", str(runs[1]))]
    assert body.count('<span class="badge s-paused"') == 1
    assert "read-only" in body and CSRF_FIELD not in body
    assert re.search(r'<time datetime="[0-9T:.+-]+"', body)


def test_the_dashboard_pages_and_filters_by_name(web: TestClient, db: psycopg.Connection[Any],
                                                 cli: Invoke) -> None:
    for i in range(55):
        _define(cli, f"job{i:03d}", "true")
    first = web.get("/").text
    assert first.count('class="job"') == 50
    assert 'href="/?after=job049"' in first
    second = web.get("/?after=job049").text
    assert re.findall(r'data-job="([^"]+)"', second) == [f"job0{i}" for i in range(50, 55)]
    assert 'rel="next"' not in second
    found = web.get("/?q=JOB05").text
    assert re.findall(r'data-job="([^"]+)"', found) == [f"job0{i}" for i in range(50, 55)]
    assert "No job name contains" in web.get("/?q=nothing-like-it").text


def test_a_job_page_shows_upcoming_slots_timeline_and_runs_with_attempts(
        web: TestClient, cli: Invoke, db: psycopg.Connection[Any]) -> None:
    run_id = _hostile_history(cli, db)
    page = web.get("/jobs/hostile")
    assert page.status_code == 200
    _assert_escaped(page.text)
    assert "&lt;script&gt;" in page.text  # the command and the pause note, escaped
    assert f'href="/runs/{run_id}"' in page.text
    assert 'class="badge small s-failed"' in page.text  # attempt 1 of the run
    assert "Upcoming" in page.text and "Last 24 hours" in page.text
    # paused without an end: no slot will run (as `list` and `describe` say)
    assert page.text.count("<li>") == 0
    assert "None while paused." in page.text
    assert cli("resume", "hostile").exit_code == 0
    assert web.get("/jobs/hostile").text.count("<li>") == 8  # the next slots


def test_the_timeline_says_why_slots_were_skipped(web: TestClient, cli: Invoke,
                                                  db: psycopg.Connection[Any]) -> None:
    assert cli("define", "minutely", "* * * * *", "--command", "true").exit_code == 0
    db.execute("UPDATE job_definitions SET cursor_at = now() - interval '30 minutes', "
               "created_at = now() - interval '1 hour', "
               "schedule_since = now() - interval '1 hour', next_due_at = now()")
    _tick(db)  # catch-up latest: the missed slots are coalesced into the latest
    page = web.get("/jobs/minutely").text
    assert "coalesced by catch-up" in page
    assert re.search(r"\((29|30) slots\)", page)


def test_a_run_page_shows_every_attempt_with_its_output(
        web: TestClient, cli: Invoke, db: psycopg.Connection[Any]) -> None:
    _define(cli, "twice", "echo attempt $CRONJOBS_ATTEMPT; exit 4", "--max-attempts", "2",
            "--backoff", "1s")
    run_id = _trigger(cli, "twice")
    _tick(db)
    db.execute("UPDATE job_runs SET eligible_at = now() - interval '1 minute'")
    _tick(db)
    page = web.get(f"/runs/{run_id}")
    assert page.status_code == 200
    assert page.text.count('class="attempt"') == 2
    assert "attempt 1\n" in page.text and "attempt 2\n" in page.text
    assert "exit code 4" in page.text
    assert re.search(r'Run \d+ <span class="badge s-dead">dead</span>', page.text)


def test_run_page_escapes_output_and_errors(web: TestClient, cli: Invoke,
                                            db: psycopg.Connection[Any]) -> None:
    run_id = _hostile_history(cli, db)
    page = web.get(f"/runs/{run_id}")
    assert page.status_code == 200
    _assert_escaped(page.text)
    assert "&lt;script&gt;alert(&#39;x&#39;)&lt;/script&gt;" in page.text
    assert page.headers["content-security-policy"].startswith("default-src 'none'")
    assert page.headers["x-content-type-options"] == "nosniff"


def test_the_refresh_gets_the_live_part_alone(web: TestClient, cli: Invoke) -> None:
    _define(cli, "ok", "true")
    for path in ("/", "/jobs/ok"):
        part = web.get(path, headers={"X-Fragment": "1"})
        assert part.status_code == 200
        assert "<html" not in part.text and "<body" not in part.text
        assert "ok" in part.text
        assert part.headers["cache-control"] == "no-store"


# -- /healthz and /metrics ------------------------------------------------------------------

def test_healthz_gives_the_verdict_of_status_check(web: TestClient, cli: Invoke,
                                                   db: psycopg.Connection[Any]) -> None:
    answer = web.get("/healthz")
    assert answer.status_code == 503
    expected = json.loads(cli("status", "--json").stdout)["problems"]
    assert answer.json()["problems"] == expected == [
        "no tick has ever run: is `cronjobs tick` in a crontab or a Kubernetes CronJob?"]
    assert answer.json()["healthy"] is False
    assert cli("status", "--check").exit_code == 3
    _tick(db)
    answer = web.get("/healthz")
    assert (answer.status_code, answer.json()["healthy"], answer.json()["problems"]) == (
        200, True, [])
    assert cli("status", "--check").exit_code == 0


def test_healthz_server_scope_is_ready_whatever_the_installation(web: TestClient) -> None:
    assert web.get("/healthz").status_code == 503  # no tick ever
    ready = web.get("/healthz?scope=server")
    assert (ready.status_code, ready.json()["healthy"]) == (200, True)
    assert web.get("/healthz?scope=nonsense").status_code == 400


def test_healthz_uses_the_servers_thresholds(database_url: str,
                                             db: psycopg.Connection[Any]) -> None:
    _tick(db)
    db.execute("UPDATE job_ticks SET started_at = started_at - interval '3 minutes'")
    with _client(database_url) as default:
        assert default.get("/healthz").status_code == 200
    strict = Thresholds(max_tick_age=dt.timedelta(minutes=1))
    with _client(database_url, thresholds=strict) as client:
        answer = client.get("/healthz")
        assert answer.status_code == 503
        assert answer.json()["problems"][0].startswith("no tick for 3m")


def test_metrics_is_what_cronjobs_metrics_prints(web: TestClient, cli: Invoke,
                                                 db: psycopg.Connection[Any]) -> None:
    _define(cli, "ok", "true")
    _trigger(cli, "ok")
    _tick(db)
    answer = web.get("/metrics")
    assert answer.status_code == 200
    assert answer.headers["content-type"].startswith("text/plain; version=")
    served = _samples(answer.text)
    printed = _samples(cli("metrics").stdout)
    assert served.keys() == printed.keys()
    assert served['cronjobs_job_runs{job="ok",status="succeeded"}'] == 1.0
    assert served["cronjobs_healthy"] == 1.0
    steady = [k for k in served if "seconds" not in k]
    assert {k: served[k] for k in steady} == {k: printed[k] for k in steady}


def _samples(text: str) -> dict[str, float]:
    return {line.rsplit(" ", 1)[0]: float(line.rsplit(" ", 1)[1])
            for line in text.splitlines() if line and not line.startswith("#")}


# -- actions ---------------------------------------------------------------------------------

def test_a_read_only_server_has_no_action_endpoints(web: TestClient, cli: Invoke,
                                                    db: psycopg.Connection[Any]) -> None:
    _define(cli, "ok", "exit 1", "--max-attempts", "1")
    run_id = _trigger(cli, "ok")
    _tick(db)
    before = snapshot(db)
    headers = {"Authorization": f"Bearer {TOKEN}"}
    for path in ("/jobs/ok/trigger", "/jobs/ok/pause", "/jobs/ok/resume", f"/runs/{run_id}/retry",
                 f"/runs/{run_id}/cancel", f"/runs/{run_id}/ack", "/signin", "/signout"):
        answer = web.post(path, headers=headers, data={"token": TOKEN})
        assert answer.status_code in (404, 405), path
    assert snapshot(db) == before
    for path in ("/", "/jobs/ok", f"/runs/{run_id}"):
        body = web.get(path).text
        assert "<form" not in body.replace('<form class="search" method="get"', "")


def test_every_action_needs_the_token(admin: TestClient, cli: Invoke,
                                      db: psycopg.Connection[Any]) -> None:
    _define(cli, "ok", "exit 1", "--max-attempts", "1")
    run_id = _trigger(cli, "ok")
    _tick(db)
    before = snapshot(db)
    for path in ("/jobs/ok/trigger", "/jobs/ok/pause", "/jobs/ok/resume",
                 f"/runs/{run_id}/retry", f"/runs/{run_id}/cancel", f"/runs/{run_id}/ack"):
        for headers in ({}, {"Authorization": "Bearer wrong-token-0123456789"},
                        {"Authorization": f"Basic {TOKEN}"}):
            answer = admin.post(path, headers=headers)
            assert answer.status_code == 403, (path, headers)
            assert TOKEN not in answer.text
    assert snapshot(db) == before


def test_actions_with_the_token_as_a_bearer(admin: TestClient, cli: Invoke,
                                            db: psycopg.Connection[Any]) -> None:
    _define(cli, "ok", "exit 1", "--max-attempts", "1")
    bearer = {"Authorization": f"Bearer {TOKEN}"}
    triggered = admin.post("/jobs/ok/trigger", headers=bearer)
    assert triggered.status_code == 200, triggered.text
    run_id = triggered.json()["run_id"]
    assert triggered.json() == {"done": "triggered", "run_id": run_id, "status": "queued"}
    _tick(db)  # it dies
    assert admin.post(f"/runs/{run_id}/ack", headers=bearer).json()["done"] == "acknowledged"
    assert admin.post(f"/runs/{run_id}/ack", headers=bearer).json()["done"] == (
        "already-acknowledged")
    assert admin.post(f"/runs/{run_id}/retry", headers=bearer).json()["status"] == "queued"
    assert admin.post(f"/runs/{run_id}/cancel", headers=bearer).json()["status"] == "cancelled"
    refused = admin.post(f"/runs/{run_id}/cancel", headers=bearer)
    assert refused.status_code == 409
    assert "already finished" in refused.text
    assert admin.post("/jobs/ok/pause", headers=bearer).json()["state"] == "paused"
    assert db.execute("SELECT paused_at IS NOT NULL FROM job_definitions").fetchone() == (True,)
    assert admin.post("/jobs/ok/resume", headers=bearer).json()["state"] == "active"
    assert admin.post("/jobs/nope/trigger", headers=bearer).status_code == 404
    assert admin.post("/runs/9999/retry", headers=bearer).status_code == 404
    assert admin.post("/runs/x/retry", headers=bearer).status_code == 400
    assert count(db, "job_runs") == 1


def test_a_browser_signs_in_and_acts_with_the_csrf_value(admin: TestClient, cli: Invoke,
                                                         db: psycopg.Connection[Any]) -> None:
    _define(cli, "ok", "true")
    assert "Run now" not in admin.get("/jobs/ok").text  # not signed in: no action shown
    assert admin.post("/signin", data={"token": "wrong"}).status_code == 403
    signed = admin.post("/signin", data={"token": TOKEN, "next": "/jobs/ok"})
    assert (signed.status_code, signed.headers["location"]) == (303, "/jobs/ok")
    cookie = signed.cookies[SESSION_COOKIE]
    assert TOKEN not in cookie and TOKEN not in signed.headers["set-cookie"]
    assert "httponly" in signed.headers["set-cookie"].lower()
    assert "samesite=strict" in signed.headers["set-cookie"].lower()
    page = admin.get("/jobs/ok").text
    assert TOKEN not in page
    csrf = re.search(r'name="csrf" value="([0-9a-f]{64})"', page)
    assert csrf is not None and "Run now" in page
    # the cookie alone (another site's form would send it) is not enough
    assert admin.post("/jobs/ok/trigger").status_code == 403
    assert admin.post("/jobs/ok/trigger", data={CSRF_FIELD: "0" * 64}).status_code == 403
    assert admin.post("/jobs/ok/trigger", data={CSRF_FIELD: csrf[1]},
                      headers={"Origin": "https://evil.example"}).status_code == 403
    assert count(db, "job_runs") == 0
    done = admin.post("/jobs/ok/trigger", data={CSRF_FIELD: csrf[1]},
                      headers={"Origin": "http://testserver"})
    assert done.status_code == 303
    run_id = db.execute("SELECT id FROM job_runs").fetchone()[0]  # type: ignore[index]
    assert done.headers["location"] == f"/runs/{run_id}?done=triggered"
    assert "Triggered: the next tick runs it." in admin.get(done.headers["location"]).text
    out = admin.post("/signout", data={CSRF_FIELD: csrf[1], "next": "//evil.example/"})
    assert (out.status_code, out.headers["location"]) == (303, "/")
    admin.cookies.clear()
    assert admin.post("/jobs/ok/trigger", data={CSRF_FIELD: csrf[1]}).status_code == 403
    assert count(db, "job_runs") == 1


# -- bad requests ----------------------------------------------------------------------------

@pytest.mark.parametrize(("path", "status", "message"), [
    ("/runs/abc", 400, "malformed run id"),
    ("/runs/0", 400, "malformed run id"),
    ("/runs/-1", 400, "malformed run id"),
    ("/runs/99999999999999999999", 400, "malformed run id"),
    ("/runs/1.5", 400, "malformed run id"),
    ("/runs/12345", 404, "no run with id 12345"),
    ("/jobs/nope", 404, "no job named 'nope'"),
    ("/jobs/%3Cscript%3Ealert(1)%3C%5Cscript%3E", 400, "invalid job name"),
    ("/?q=a%00b", 400, "invalid search: contains a NUL character"),
    ("/jobs/" + "a" * 200, 400, "invalid job name"),
    ("/?after=%3Cb%3E", 400, "invalid page start"),
    ("/?q=" + "x" * 200, 400, "invalid search"),
    ("/nowhere", 404, "Not Found"),
])
def test_bad_requests_get_a_short_4xx(web: TestClient, path: str, status: int,
                                      message: str) -> None:
    answer = web.get(path)
    assert answer.status_code == status
    assert answer.headers["content-type"].startswith("text/plain")
    assert answer.text.startswith(message)
    assert answer.text.count("\n") == 1 and "Traceback" not in answer.text


def test_request_sizes_are_bounded(admin: TestClient, db: psycopg.Connection[Any]) -> None:
    big = admin.post("/signin", content=b"token=" + b"x" * (MAX_BODY_BYTES + 1),
                     headers={"Content-Type": "application/x-www-form-urlencoded"})
    assert big.status_code == 413

    def chunks() -> Iterator[bytes]:  # no Content-Length: counted as it arrives
        for _ in range(20):
            yield b"x" * 1024

    streamed = admin.post("/signin", content=chunks(),
                          headers={"Content-Type": "application/x-www-form-urlencoded"})
    assert streamed.status_code == 413
    assert admin.get("/jobs/" + "a" * 3000).status_code == 414


@settings(max_examples=60, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(segment=st.text(min_size=1, max_size=80))
def test_no_path_segment_gets_a_500(web: TestClient, segment: str) -> None:
    from urllib.parse import quote

    part = quote(segment, safe="")
    for path in (f"/jobs/{part}", f"/runs/{part}", f"/?after={part}", f"/?q={part}"):
        answer = web.get(path)
        assert answer.status_code in (200, 400, 404), (path, answer.status_code, answer.text)


def test_an_unreachable_database_is_a_503_that_hides_the_password() -> None:
    url = "postgresql://someone:hunter2-pa55word@127.0.0.1:1/nothing"
    with _client(url, pool_timeout=1.0) as client:
        for path in ("/", "/jobs/x", "/runs/1", "/metrics", "/healthz"):
            answer = client.get(path)
            assert answer.status_code == 503, path
            assert "hunter2" not in answer.text
    shown = repr(Settings(conninfo=url, admin_token=TOKEN))
    assert "hunter2" not in shown and TOKEN not in shown


# -- `cronjobs serve`'s own input -------------------------------------------------------------

def _bad_duration(text: str, minimum: dt.timedelta) -> bool:
    from cronjobs.durations import parse_bounded
    from cronjobs.errors import UsageError

    try:
        parse_bounded(text, option="--x", minimum=minimum, maximum=dt.timedelta(days=30))
    except UsageError:
        return True
    return False


def _a_port(value: str) -> bool:
    """Whether ``--port`` would take the value (click reads it with int(), which also takes
    other scripts' digits, and refuses '¹', which str.isdigit calls a digit)."""
    try:
        return 1 <= int(value) <= 65535
    except ValueError:
        return False


@settings(max_examples=40, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(option=st.sampled_from(["--refresh", "--max-tick-age", "--max-backlog-age",
                               "--admin-token", "--port"]),
       value=st.text(max_size=30))
def test_bad_serve_options_exit_2_with_one_line_and_write_nothing(
        cli: Invoke, db: psycopg.Connection[Any], option: str, value: str) -> None:
    from hypothesis import assume

    if option == "--admin-token":
        value = value[:15]  # too short, whatever it holds
    elif option == "--port":
        assume(not _a_port(value))
    else:
        shortest = dt.timedelta(seconds=2 if option == "--refresh" else 60)
        assume(_bad_duration(value, shortest))
    before = snapshot(db)
    result = cli("serve", option, value)
    assert result.exit_code == 2, (option, value, result.stderr)
    assert result.stderr.startswith("error: ") and result.stderr.count("\n") == 1
    assert result.stdout == ""
    assert snapshot(db) == before


@settings(max_examples=40, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(body=st.binary(max_size=300),
       content_type=st.sampled_from(["application/x-www-form-urlencoded",
                                     "multipart/form-data; boundary=xyz",
                                     "multipart/form-data", "text/plain", "application/json"]),
       path=st.sampled_from(["/signin", "/signout", "/jobs/ok/trigger", "/runs/1/retry"]))
def test_no_posted_body_gets_a_500(admin: TestClient, body: bytes, content_type: str,
                                   path: str) -> None:
    answer = admin.post(path, content=body, headers={"Content-Type": content_type})
    assert 400 <= answer.status_code < 500, (path, body, answer.status_code, answer.text)
    assert "Traceback" not in answer.text


def test_schedules_are_shown_in_words_beside_the_cron_expression(
        web: TestClient, cli: Invoke) -> None:
    assert cli("define", "month_end", "0 18 LW * *", "--tz", "Europe/Berlin",
               "--command", "true").exit_code == 0
    described = json.loads(cli("describe", "month_end", "--json").stdout)["description"]
    assert "last weekday" in described and described.endswith("(Europe/Berlin)")
    for page in (web.get("/").text, web.get("/jobs/month_end").text):
        assert html.escape(described, quote=False) in page
        # each field unbreakable, so that the expression wraps between fields only
        assert ('<code class="cron"><span>0</span> <span>18</span> <span>LW</span> '
                '<span>*</span> <span>*</span></code>') in page


# -- the health banner ------------------------------------------------------------------------

BANNER = re.compile(r'<section id="health" class="banner (ok|bad)".*?</section>', re.S)


def _banner(body: str) -> tuple[str, list[str]]:
    """The banner's colour and the words of each problem it lists."""
    found = BANNER.search(body)
    assert found is not None, "no health banner"
    whats = [html.unescape(w) for w in re.findall(r'<span class="what">(.*?)</span>', found[0])]
    return found[1], whats


def _dead_history(cli: Invoke, db: psycopg.Connection[Any]) -> int:
    _define(cli, "flaky", "exit 7", "--max-attempts", "1")
    _define(cli, "fine", "true")
    run_id = _trigger(cli, "flaky")
    _trigger(cli, "fine")
    _tick(db)
    return run_id


def test_every_page_leads_with_what_healthz_and_status_check_report(
        web: TestClient, cli: Invoke, db: psycopg.Connection[Any]) -> None:
    _define(cli, "fine", "true")
    # no tick yet: the one problem, on every page, in the same words
    expected = web.get("/healthz").json()["problems"]
    assert expected == json.loads(cli("status", "--json").stdout)["problems"]
    assert len(expected) == 1
    # (the banner leaves out what to type at a terminal: "is `cronjobs tick` in a crontab")
    assert expected[0].startswith("no tick has ever run: is `cronjobs tick` in a crontab")
    assert _banner(web.get("/").text) == ("bad", ["no tick has ever run"])
    assert _banner(web.get("/jobs/fine").text) == ("bad", ["no tick has ever run"])
    # a dead run: its problem, with links to the run and the job
    dead = _dead_history(cli, db)
    problems = web.get("/healthz").json()["problems"]
    assert problems == json.loads(cli("status", "--json").stdout)["problems"]
    assert len(problems) == 1
    for path in ("/", "/jobs/fine", f"/runs/{dead}", "/jobs/flaky"):
        body = web.get(path).text
        colour, whats = _banner(body)
        assert colour == "bad" and len(whats) == len(problems)
        # the banner says what /healthz says, without what to type at a terminal
        assert [p.startswith(w) for w, p in zip(whats, problems, strict=True)] == [True]
        assert whats == [f"job 'flaky': 1 dead run(s) not acknowledged (latest: run {dead})"]
        banner = BANNER.search(body)
        assert banner is not None
        assert f'<a href="/runs/{dead}">run {dead}</a>' in banner[0]
        assert '<a href="/jobs/flaky">job flaky</a>' in banner[0]
        assert "cronjobs ack" not in banner[0]
        assert "/ack" not in banner[0]  # a read-only server offers no button
    # the refresh gets the banner too
    part = web.get("/", headers={"X-Fragment": "1"}).text
    assert _banner(part)[0] == "bad"
    # acknowledged: all well, and the dead card is no longer red
    assert cli("ack", "--all", "flaky", "--yes").exit_code == 0
    assert web.get("/healthz").json()["problems"] == []
    body = web.get("/").text
    assert _banner(body) == ("ok", [])
    assert "All well: no problem found" in body
    card = re.search(r'<div class="card dead( bad)?">.*?</div>', body)
    assert card is not None
    assert card[1] is None and "all acknowledged" in card[0] and '"value">1<' in card[0]


def test_a_long_list_of_problems_folds_but_names_them_all(
        web: TestClient, cli: Invoke, db: psycopg.Connection[Any]) -> None:
    for i in range(12):
        _define(cli, f"broken{i:02d}", "exit 1", "--max-attempts", "1")
        _trigger(cli, f"broken{i:02d}")
    _tick(db)
    problems = web.get("/healthz").json()["problems"]
    assert len(problems) == 12
    body = web.get("/").text
    banner = BANNER.search(body)
    assert banner is not None
    assert 'data-problems="12"' in banner[0]
    assert "12 problems need attention" in banner[0]
    open_part, folded = banner[0].split('<details class="more">')
    assert open_part.count('<li class="problem"') == 10
    assert "<summary>2 more problems</summary>" in folded
    assert folded.count('<li class="problem"') == 2
    colour, whats = _banner(body)
    assert colour == "bad"
    assert [p.startswith(w) for w, p in zip(whats, problems, strict=True)] == [True] * 12


def test_pages_reuse_a_recent_verdict_and_an_action_forgets_it(
        database_url: str, cli: Invoke, db: psycopg.Connection[Any]) -> None:
    _dead_history(cli, db)
    bearer = {"Authorization": f"Bearer {TOKEN}"}
    with _client(database_url, token=TOKEN, verdict_for=dt.timedelta(minutes=5)) as client:
        assert _banner(client.get("/").text)[0] == "bad"
        assert cli("ack", "--all", "flaky", "--yes").exit_code == 0
        assert _banner(client.get("/jobs/fine").text)[0] == "bad"  # the kept verdict
        assert client.get("/healthz").status_code == 200  # always worked out, then kept
        assert _banner(client.get("/").text)[0] == "ok"
        _define(cli, "flaky2", "exit 1", "--max-attempts", "1")
        _trigger(cli, "flaky2")
        _tick(db)
        assert _banner(client.get("/").text)[0] == "ok"  # kept
        assert client.post("/jobs/fine/pause", headers=bearer).status_code == 200
        assert _banner(client.get("/").text) == (
            "bad", [f"job 'flaky2': 1 dead run(s) not acknowledged (latest: run "
                    f"{_latest_run(db)})"])
    with _client(database_url, verdict_for=dt.timedelta(0)) as client:
        assert _banner(client.get("/").text)[0] == "bad"
        assert cli("ack", "--all", "flaky2", "--yes").exit_code == 0
        assert _banner(client.get("/").text)[0] == "ok"


def _latest_run(db: psycopg.Connection[Any]) -> int:
    row = db.execute("SELECT max(id) FROM job_runs").fetchone()
    assert row is not None
    return int(row[0])


def test_the_dead_card_is_red_while_a_dead_run_is_not_acknowledged(
        web: TestClient, cli: Invoke, db: psycopg.Connection[Any]) -> None:
    _dead_history(cli, db)
    card = re.search(r'<div class="card dead( bad)?">.*?</div>', web.get("/").text)
    assert card is not None
    assert card[1] == " bad" and "1 not acknowledged" in card[0]
    row = re.search(r'<tr class="job( trouble)?" data-job="flaky">', web.get("/").text)
    assert row is not None and row[1] == " trouble"
    assert '<tr class="job" data-job="fine">' in web.get("/").text


def test_the_banner_acknowledges_and_returns_to_its_page(
        admin: TestClient, cli: Invoke, db: psycopg.Connection[Any]) -> None:
    dead = _dead_history(cli, db)
    signed = admin.post("/signin", data={"token": TOKEN, "next": "/"})
    assert signed.status_code == 303
    body = admin.get("/jobs/fine").text
    colour, whats = _banner(body)
    assert colour == "bad" and len(whats) == 1
    banner = BANNER.search(body)
    assert banner is not None
    assert '<form class="inline" method="post" action="/jobs/flaky/ack">' in banner[0]
    assert '<input type="hidden" name="next" value="/jobs/fine">' in banner[0]
    csrf = re.search(r'name="csrf" value="([0-9a-f]{64})"', banner[0])
    assert csrf is not None
    done = admin.post("/jobs/flaky/ack", data={CSRF_FIELD: csrf[1], "next": "/jobs/fine"})
    assert (done.status_code, done.headers["location"]) == (
        303, "/jobs/fine?done=acknowledged-all")
    after = admin.get(done.headers["location"]).text
    assert _banner(after) == ("ok", [])
    assert "the job&#39;s dead runs no longer count as a problem" in after
    assert db.execute("SELECT acknowledged_by FROM job_runs WHERE id = %s",
                      (dead,)).fetchone() == ("dashboard",)
    # never to another site
    again = admin.post("/jobs/flaky/ack", data={CSRF_FIELD: csrf[1],
                                                "next": "https://evil.example/"})
    assert again.headers["location"] == "/?done=acknowledged-all"
    # as a script: JSON, with the runs it acknowledged (none left)
    bearer = {"Authorization": f"Bearer {TOKEN}"}
    assert admin.post("/jobs/flaky/ack", headers=bearer).json() == {
        "done": "acknowledged-all", "job": "flaky", "run_ids": []}
    assert admin.post("/jobs/nope/ack", headers=bearer).status_code == 404
    assert admin.post("/jobs/flaky/ack").status_code == 403


def test_the_run_page_shows_the_handlers_result(
        web: TestClient, cli: Invoke, store: Store, tmp_path: Path,
        monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "dash_result_jobs.py").write_text(
        "import cronjobs\n\n\n@cronjobs.job('totals')\ndef totals(ctx):\n"
        "    return {'rows': 42, 'note': '<b>not markup</b>', 'days': [1, 2]}\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    assert cli("define", "totals", "0 0 1 1 *").exit_code == 0
    run_id = _trigger(cli, "totals")
    tick(store, TickOptions(worker="w", apps=("dash_result_jobs",), in_process=True))
    body = web.get(f"/runs/{run_id}").text
    shown = re.search(r'<dt>Result</dt><dd><pre class="result">(.*?)</pre></dd>', body, re.S)
    assert shown is not None
    assert json.loads(html.unescape(shown[1])) == {
        "rows": 42, "note": "<b>not markup</b>", "days": [1, 2]}
    assert "<b>not markup</b>" not in body
    # a shell command's run has no result: no empty row
    _define(cli, "plain", "true")
    plain = _trigger(cli, "plain")
    _tick(store.conn)
    assert "<dt>Result</dt>" not in web.get(f"/runs/{plain}").text


# -- error pages ------------------------------------------------------------------------------

HTML = {"Accept": "text/html,application/xhtml+xml,application/xml;q=0.9,*/*;q=0.8"}


def _error_page(answer: Any) -> tuple[str, str, str, str]:
    """An error page's title, message, link back and its words."""
    assert answer.headers["content-type"].startswith("text/html")
    body = answer.text
    assert '<link rel="stylesheet" href="/static/app.css">' in body  # the site's layout
    assert "Traceback" not in body and "`" not in body and "--" not in body.split(
        '<section class="oops"')[1]
    found = re.search(r'<h1 id="oops-title">(.*?)</h1>\s*<p class="message">(.*?)</p>\s*'
                      r'<p class="back"><a class="btn" href="([^"]*)">(.*?)</a>', body, re.S)
    assert found is not None, body
    title, message, href, words = (html.unescape(part) for part in found.groups())
    return title, message, href, words


@pytest.mark.parametrize(("path", "status", "title", "message"), [
    ("/jobs/nope", 404, "Not found", "No job named 'nope'."),
    ("/runs/12345", 404, "Not found", "No run with id 12345."),
    ("/nowhere", 404, "Not found", "There is no page at this address."),
    ("/runs/abc", 400, "That address is not valid",
     "Malformed run id: run ids are positive integers."),
    ("/jobs/" + "a" * 3000, 414, "Address too long",
     "The address was longer than the dashboard accepts."),
])
def test_a_browser_gets_error_pages_in_the_sites_layout(
        web: TestClient, path: str, status: int, title: str, message: str) -> None:
    answer = web.get(path, headers=HTML)
    assert answer.status_code == status
    assert _error_page(answer) == (title, message, "/", "Back to the dashboard")
    assert answer.headers["content-security-policy"].startswith("default-src 'none'")
    # a script still gets its one line
    assert web.get(path).headers["content-type"].startswith("text/plain")


def test_error_pages_of_actions_lead_back_to_their_page(
        admin: TestClient, cli: Invoke, db: psycopg.Connection[Any]) -> None:
    _define(cli, "ok", "true")
    run_id = _trigger(cli, "ok")
    _tick(db)
    refused = admin.post(f"/runs/{run_id}/retry", headers=HTML)  # not signed in
    assert refused.status_code == 403
    assert _error_page(refused) == (
        "Not allowed", "This action needs the admin token: sign in (at the top of the page) "
        "first. Nothing was changed.", f"/runs/{run_id}", f"Back to run {run_id}")
    wrong = admin.post("/signin", data={"token": "not-it", "next": "/jobs/ok"},
                       headers={**HTML, "Referer": "http://testserver/jobs/ok"})
    assert wrong.status_code == 403
    assert _error_page(wrong) == ("Not allowed",
                                  "That is the wrong admin token: you are not signed in.",
                                  "/jobs/ok", "Back to the page you came from")
    admin.post("/signin", data={"token": TOKEN})
    csrf = re.search(r'name="csrf" value="([0-9a-f]{64})"', admin.get("/jobs/ok").text)
    assert csrf is not None
    late = admin.post(f"/runs/{run_id}/cancel", data={CSRF_FIELD: csrf[1]}, headers=HTML)
    assert late.status_code == 409
    title, message, href, _ = _error_page(late)
    assert (title, href) == ("Not possible now", f"/runs/{run_id}")
    assert message == f"Run {run_id} of 'ok' succeeded: it has already finished."
    wrong_method = admin.get("/jobs/ok/trigger", headers=HTML)
    assert wrong_method.status_code == 405
    assert _error_page(wrong_method)[:2] == (
        "Not allowed here", "This address does not take that kind of request: use the "
        "dashboard's links and buttons instead.")
    big = admin.post("/signin", content=b"token=" + b"x" * (MAX_BODY_BYTES + 1),
                     headers={**HTML, "Content-Type": "application/x-www-form-urlencoded"})
    assert big.status_code == 413
    assert _error_page(big)[:2] == (
        "Too large", "The request was larger than the dashboard accepts. Nothing was changed.")
    assert big.headers["connection"] == "close"


def test_an_internal_error_is_a_page_that_says_nothing_of_it(database_url: str) -> None:
    # (no request makes this server fail: its handler for what nobody foresaw, called as
    # Starlette calls it)
    app = create_app(Settings(conninfo=database_url))
    handler = app.exception_handlers[Exception]
    scope = {"type": "http", "method": "GET", "path": "/jobs/x", "raw_path": b"/jobs/x",
             "query_string": b"", "headers": [(b"accept", b"text/html")], "app": app}
    answer = asyncio.run(handler(Request(scope), RuntimeError("secret detail")))
    assert isinstance(answer, Response)
    assert answer.status_code == 500
    body = bytes(answer.body).decode()
    assert "secret detail" not in body and "Something went wrong" in body
    assert 'href="/">Back to the dashboard</a>' in body


def test_errors_keep_what_to_type_at_a_terminal_apart() -> None:
    # the command line shows an error's advice, the web its message alone: no pattern
    # guesses which part of the text is for a terminal
    from cronjobs.errors import JobNotFound, Refused, SchemaNotReady
    from cronjobs.web.errors import web_words

    missing = JobNotFound("no job named 'x'", advice=" (see `cronjobs list`)")
    assert missing.message == "no job named 'x' (see `cronjobs list`)"
    assert web_words(missing.what) == "No job named 'x'."
    again = Refused("run 3 of 'x' succeeded", advice="; use --force to run its slot again")
    assert again.message == "run 3 of 'x' succeeded; use --force to run its slot again"
    assert web_words(again.what) == "Run 3 of 'x' succeeded."
    old = SchemaNotReady("the database schema is at version 1, this cronjobs needs version 2",
                         advice=": run `cronjobs migrate`")
    assert web_words(old.what) == (
        "The database schema is at version 1, this cronjobs needs version 2.")
    assert web_words("malformed run id: run ids are positive integers") == (
        "Malformed run id: run ids are positive integers.")


def test_the_banner_shows_a_problem_without_what_to_type_at_a_terminal(
        web: TestClient, cli: Invoke) -> None:
    # status's problem carries its advice apart: the command line prints it, the banner
    # does not (and no pattern strips it from the line)
    assert "no tick has ever run: is `cronjobs tick` in a crontab" in cli("status").stdout
    page = web.get("/", headers={"accept": "text/html"})
    whats = re.findall(r'<span class="what">([^<]*)</span>', page.text)
    assert whats == ["no tick has ever run"]
