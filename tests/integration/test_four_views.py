"""One truth: runs in every state, and jobs active and paused, built by real ticks, and each
of them read through the four views — the CLI's text, the CLI's --json, the Python client's
results and the dashboard's pages — which must say the same: state, acknowledgement,
attempts used, lateness, result, next fire time (all worked out in cronjobs/core/facts.py).
"""

from __future__ import annotations

import datetime as dt
import json
import re
import threading
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import psycopg
import pytest
from markupsafe import escape
from starlette.testclient import TestClient

from conftest import Invoke, wait_for
from cronjobs import Client, JobInfo, RunInfo
from cronjobs.db.store import Store
from cronjobs.tick import TickOptions, tick
from cronjobs.web.app import create_app
from cronjobs.web.site import Settings

JOBS = '''
import cronjobs

@cronjobs.job("four_views_report")
def report(ctx):
    return {"rows": 3, "note": "<b>done</b>"}
'''
APP = "four_views_jobs"


@dataclass(frozen=True)
class Expected:
    state: str
    used: int
    allowed: int
    acknowledged: bool = False
    needs_ack: bool = False
    late: bool = False
    result: Any = None
    interrupted: int = 0


@pytest.fixture
def web(database_url: str) -> Iterator[TestClient]:
    app = create_app(Settings(conninfo=database_url))
    with TestClient(app, raise_server_exceptions=False, follow_redirects=False) as client:
        yield client


@pytest.fixture
def client(database_url: str) -> Iterator[Client]:
    with Client(database_url) as c:
        yield c


def _ok(cli: Invoke, *args: str) -> str:
    result = cli(*args)
    assert result.exit_code == 0, (args, result.stderr)
    return str(result.stdout)


def _trigger(cli: Invoke, name: str, *options: str) -> int:
    return int(json.loads(_ok(cli, "trigger", name, "--json", *options))["id"])


def _tick(database_url: str, stop: threading.Event | None = None) -> None:
    with psycopg.connect(database_url, autocommit=True) as conn:
        tick(Store(conn), TickOptions(worker="four-views", apps=(APP,), in_process=True),
             should_stop=stop.is_set if stop is not None else (lambda: False))


# -- the views of a run ----------------------------------------------------------------------

def _check_run(run_id: int, want: Expected, *, cli: Invoke, client: Client,
               web: TestClient) -> None:
    where = f"run {run_id} ({want.state})"
    # 1. the client's result
    info = client.run(run_id)
    assert isinstance(info, RunInfo)
    assert (info.state, info.attempts_used, info.attempts_allowed, info.interrupted_attempts,
            info.acknowledged, info.needs_acknowledgement, info.late, info.result) == (
        want.state, want.used, want.allowed, want.interrupted, want.acknowledged,
        want.needs_ack, want.late, want.result), where
    assert (info.acknowledged_at is not None) == want.acknowledged, where
    assert (info.acknowledged_by is not None) == want.acknowledged, where
    assert sum(1 for a in info.attempts if a.counted) == want.used, where
    # 2. the CLI's --json, `show` and `runs`
    data = json.loads(_ok(cli, "show", str(run_id), "--json"))
    assert (data["status"], data["attempts_used"], data["attempts_allowed"],
            data["interrupted_attempts"], data["acknowledged"], data["needs_acknowledgement"],
            data["late"], data["result"]) == (
        want.state, want.used, want.allowed, want.interrupted, want.acknowledged,
        want.needs_ack, want.late, want.result), where
    assert (data["attempt"], data["max_attempts"]) == (want.used, want.allowed), where
    assert (data["acknowledged_at"] is not None) == want.acknowledged, where
    assert data["acknowledged_at"] == (None if info.acknowledged_at is None
                                       else info.acknowledged_at.isoformat()), where
    assert [a["counted"] for a in data["attempts"]] == [a.counted for a in info.attempts]
    listed = [r for r in json.loads(_ok(cli, "runs", "--json", "--limit", "1000"))
              if r["id"] == run_id]
    assert len(listed) == 1, where
    assert {k: listed[0][k] for k in ("status", "attempts_used", "attempts_allowed",
                                      "acknowledged", "needs_acknowledgement", "late",
                                      "result", "acknowledged_at")} == {
        k: data[k] for k in ("status", "attempts_used", "attempts_allowed", "acknowledged",
                             "needs_acknowledgement", "late", "result", "acknowledged_at")}
    by_client = [r for r in client.runs(limit=1000) if r.id == run_id]
    assert [(r.state, r.attempts_used, r.acknowledged) for r in by_client] == [
        (info.state, info.attempts_used, info.acknowledged)], where
    explained = json.loads(_ok(cli, "explain", info.job, "--json"))
    there = [s["run"] for s in explained["slots"] if s["run"] and s["run"]["id"] == run_id]
    there += [r for r in explained["one_off_runs"] if r["id"] == run_id]
    # explain folds consecutive runs that succeeded into one entry naming its first and last
    folded = [s["outcome"] for s in explained["slots"] if s["first_run_id"] is not None
              and s["first_run_id"] <= run_id <= s["last_run_id"]]
    in_a_fold = folded == ["succeeded"] and want.state == "succeeded" and not there
    assert in_a_fold or (there and all(
        (r["status"], r["attempts_used"], r["attempts_allowed"], r["acknowledged"])
        == (want.state, want.used, want.allowed, want.acknowledged) for r in there)), where
    # 3. the CLI's text
    text = _ok(cli, "show", str(run_id), "--utc")
    assert text.startswith(f"run {run_id} of {info.job}: {want.state}\n"), where
    assert f"attempts    {want.used} of {want.allowed} used" in text, where
    assert (f"({want.interrupted} interrupted, not counted)" in text) == bool(
        want.interrupted), where
    assert ("not acknowledged" in text) == want.needs_ack, where
    assert ("  ack         acknowledged " in text) == want.acknowledged, where
    assert ("(late)" in text) == want.late, where
    results = [json.loads(line.split("result", 1)[1]) for line in text.splitlines()
               if line.startswith("  result      ")]
    assert results == ([] if want.result is None else [want.result]), where
    row = [line for line in _ok(cli, "runs", "--limit", "1000", "--utc").splitlines()
           if line.startswith(f"{run_id} ")]
    assert len(row) == 1, where
    assert re.search(rf"\s{want.state}\s+{want.used}/{want.allowed}(\s|$)", row[0]), row
    # 4. the dashboard's run page
    page = web.get(f"/runs/{run_id}")
    assert page.status_code == 200, where
    body = page.text
    assert re.search(rf"<h1>Run {run_id} <span class=\"badge s-{want.state}\">", body), where
    assert ("not acknowledged</span>" in body) == want.needs_ack, where
    assert ("<dt>Acknowledged</dt>" in body) == want.acknowledged, where
    assert f"{want.used} of {want.allowed} used" in body, where
    assert ("badge s-late" in body) == want.late, where
    assert ("<dt>Result</dt>" in body) == (want.result is not None), where
    if want.result is not None:
        assert "<b>done</b>" not in body  # escaped
        assert str(escape('"rows": 3')) in body, where  # indented JSON, escaped
    # and the job's page lists it alike
    job_page = web.get(f"/jobs/{info.job}").text
    cell = re.search(rf'<a href="/runs/{run_id}"><span class="phone">run </span>{run_id}</a>'
                     r'.*?</tr>', job_page, re.DOTALL)
    assert cell is not None, where
    assert f"s-{want.state}\">{want.state}</span>" in cell.group(0), where
    assert f"{want.used} of {want.allowed} used" in cell.group(0), where
    assert ("not acknowledged" in cell.group(0)) == want.needs_ack, where


# -- the views of a job ----------------------------------------------------------------------

def _check_job(name: str, *, state: str, paused: bool, next_at: dt.datetime | None,
               cli: Invoke, client: Client, web: TestClient) -> None:
    info = client.job(name)
    assert isinstance(info, JobInfo)
    assert (info.state, info.paused, info.next_fire_at) == (state, paused, next_at), name
    assert [j for j in client.jobs() if j.name == name] == [info]
    data = [j for j in json.loads(_ok(cli, "list", "--json")) if j["name"] == name]
    assert len(data) == 1, name
    iso = next_at.isoformat() if next_at is not None else None
    assert (data[0]["state"], data[0]["paused"], data[0]["next_fire_at"],
            data[0]["next_at"]) == (state, paused, iso, iso), name
    described = json.loads(_ok(cli, "describe", name, "--json"))
    assert (described["job"]["state"], described["job"]["next_fire_at"]) == (state, iso)
    assert (described["next"][0]["utc"] if described["next"] else None) == iso, name
    assert client.next_fire_times(name, count=1) == ([next_at] if next_at else [])
    upcoming = json.loads(_ok(cli, "next", name, "--count", "1", "--json"))
    assert (upcoming["next"][0]["utc"] if upcoming["next"] else None) == iso, name
    assert (upcoming["note"] is not None) == (next_at is None), name
    line = [ln for ln in _ok(cli, "list", "--utc").splitlines() if ln.startswith(name + " ")]
    assert len(line) == 1, name
    assert re.search(rf"\s{state}(\s|$)", line[0]) or (
        paused and f" paused until {info.paused_until:%Y-%m-%d %H:%M}" in line[0]), line
    if next_at is None:
        assert re.search(r"\s-\s", line[0]), line
    else:
        assert f"{next_at:%Y-%m-%d %H:%M}" in line[0], line
    row = re.search(rf'<tr class="job" data-job="{name}">.*?</tr>', web.get("/").text,
                    re.DOTALL)
    assert row is not None, name
    assert ("badge s-paused" in row.group(0)) == paused, name
    times = re.findall(r'<time datetime="([^"]+)"', row.group(0))
    if next_at is None:
        assert not times or times[0] != iso  # (the last run's time only)
        assert ">paused</span>" in row.group(0) if paused else True
    else:
        assert times[0] == iso, (name, times)


def test_the_four_views_agree(cli: Invoke, client: Client, web: TestClient,
                              database_url: str, db: psycopg.Connection[Any], tmp_path: Path,
                              monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / f"{APP}.py").write_text(JOBS)
    monkeypatch.syspath_prepend(str(tmp_path))
    never = "0 0 1 1 *"
    _ok(cli, "define", "report", never, "--handler", "four_views_report")
    _ok(cli, "define", "broken", never, "--command", "exit 1", "--max-attempts", "1")
    _ok(cli, "define", "flaky", never, "--command", "exit 1", "--max-attempts", "1")
    _ok(cli, "define", "retrying", never, "--command", "exit 1", "--backoff", "2h")
    _ok(cli, "define", "slow", never, "--command", "sleep 60")
    _ok(cli, "define", "simple", never, "--command", "true", "--overlap", "allow")
    _ok(cli, "define", "minutely", "* * * * *", "--command", "true", "--catchup", "all")
    _ok(cli, "define", "resting", "* * * * *", "--command", "true")
    _ok(cli, "define", "holiday", "0 * * * *", "--command", "true")
    # the per-minute jobs were defined 10 minutes ago: their missed slots are due
    db.execute("UPDATE job_definitions SET cursor_at = now() - interval '10 minutes', "
               "created_at = now() - interval '1 hour', "
               "schedule_since = now() - interval '1 hour', next_due_at = now() "
               "WHERE name IN ('minutely', 'resting')")
    _ok(cli, "pause", "resting", "--note", "maintenance")  # its slots become skips
    until = (dt.datetime.now(dt.UTC) + dt.timedelta(hours=5)).replace(microsecond=0)
    _ok(cli, "pause", "holiday", "--until", until.isoformat())

    succeeded = _trigger(cli, "report")
    unacked, acked = _trigger(cli, "broken"), _trigger(cli, "broken", "--force")
    retried = _trigger(cli, "flaky")
    waiting_retry = _trigger(cli, "retrying")
    _tick(database_url)
    _ok(cli, "ack", str(acked))
    _ok(cli, "retry", str(retried))  # acknowledges its death ...
    _tick(database_url)  # ... and it dies again
    late = min(r.id for r in client.runs("minutely", limit=100))

    # running, then interrupted by a stopped tick (as SIGINT stops one)
    interrupted = _trigger(cli, "slow")
    stop = threading.Event()
    ticking = threading.Thread(target=_tick, args=(database_url, stop))
    ticking.start()
    try:
        wait_for(lambda: client.run(interrupted).state == "running", "the run to start")
        _check_run(interrupted, Expected("running", 1, 3), cli=cli, client=client, web=web)
    finally:
        stop.set()
        ticking.join(60)
    assert not ticking.is_alive()

    cancelled = _trigger(cli, "simple")
    _ok(cli, "cancel", str(cancelled))
    scheduled = _trigger(cli, "simple", "--in", "2h")
    queued = _trigger(cli, "simple")

    for run_id, want in [
        (scheduled, Expected("scheduled", 0, 3)),
        (queued, Expected("queued", 0, 3)),
        (waiting_retry, Expected("failed", 1, 3)),
        (succeeded, Expected("succeeded", 1, 3, result={"rows": 3, "note": "<b>done</b>"})),
        (late, Expected("succeeded", 1, 3, late=True)),
        (unacked, Expected("dead", 1, 1, needs_ack=True)),
        (acked, Expected("dead", 1, 1, acknowledged=True)),
        (retried, Expected("dead", 2, 2, needs_ack=True)),
        (cancelled, Expected("cancelled", 0, 3)),
        (interrupted, Expected("queued", 0, 3, interrupted=1)),
    ]:
        _check_run(run_id, want, cli=cli, client=client, web=web)

    # the interrupted run runs again: its first counted attempt, in `status` too
    stop = threading.Event()
    ticking = threading.Thread(target=_tick, args=(database_url, stop))
    ticking.start()
    try:
        wait_for(lambda: client.run(interrupted).state == "running", "the run to restart")
        _check_run(interrupted, Expected("running", 1, 3, interrupted=1), cli=cli,
                   client=client, web=web)
        running = json.loads(_ok(cli, "status", "--json"))["running"]
        assert [(r["run_id"], r["attempt"]) for r in running] == [(interrupted, 1)]
    finally:
        stop.set()
        ticking.join(60)
    assert not ticking.is_alive()
    _check_run(interrupted, Expected("queued", 0, 3, interrupted=2), cli=cli, client=client,
               web=web)

    # skipped slots have no run: explain (text, --json, the client) and the job's timeline
    explained = json.loads(_ok(cli, "explain", "resting", "--json"))
    skipped = [s for s in explained["slots"] if s["outcome"] == "skipped"]
    assert skipped and all(s["reason"] == "paused" for s in skipped)
    assert [r.outcome for r in client.explain("resting").rows
            if r.outcome == "skipped"] == ["skipped"] * len(skipped)
    assert "skipped" in _ok(cli, "explain", "resting")
    assert 'class="o-skipped"' in web.get("/jobs/resting").text

    # jobs: active, paused without an end (no next fire time), paused until a time (the
    # first slot after it)
    now = dt.datetime.now(dt.UTC)
    next_minute = (now + dt.timedelta(minutes=1)).replace(second=0, microsecond=0)
    after_pause = (until + dt.timedelta(hours=1)).replace(minute=0, second=0)
    _check_job("resting", state="paused", paused=True, next_at=None,
               cli=cli, client=client, web=web)
    _check_job("holiday", state="paused", paused=True, next_at=after_pause,
               cli=cli, client=client, web=web)
    active = client.job("minutely").next_fire_at
    assert active in (next_minute, next_minute + dt.timedelta(minutes=1))
    _check_job("minutely", state="active", paused=False, next_at=active,
               cli=cli, client=client, web=web)
