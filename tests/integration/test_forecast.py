"""`cronjobs forecast` and the crowded-minute warnings of define, apply and the decorator,
against a real database: stored jobs, pauses with an end, one-off runs, the capacity read
from the history real ticks leave, bad input writing nothing."""

from __future__ import annotations

import datetime as dt
import json
import sys
from pathlib import Path
from typing import Any

import psycopg
import pytest

from conftest import Invoke, snapshot
from cronjobs.client import apply_declared
from cronjobs.core import forecast as fc
from cronjobs.db.store import Store
from cronjobs.tick import TickOptions, tick

UTC = dt.UTC


def _define(cli: Invoke, name: str, schedule: str, *options: str) -> dict[str, Any]:
    result = cli("define", name, schedule, "--command", "true", "--crowded-threshold", "off",
                 "--json", *options)
    assert result.exit_code == 0, result.stderr
    assert result.stderr == ""
    data: dict[str, Any] = json.loads(result.stdout)
    return data


def _forecast(cli: Invoke, *options: str) -> dict[str, Any]:
    result = cli("forecast", "--json", *options)
    assert result.exit_code == 0, result.stderr
    data: dict[str, Any] = json.loads(result.stdout)
    return data


def test_the_forecast_counts_every_stored_job_pause_and_one_off(cli: Invoke) -> None:
    for i in range(4):
        _define(cli, f"nightly-{i}", "0 3 * * *")
    _define(cli, "berlin", "30 2 * * *", "--tz", "Europe/Berlin")
    _define(cli, "quarterly", "*/15 * * * *")
    _define(cli, "paused-for-good", "0 3 * * *")
    _define(cli, "paused-a-while", "0 3 * * *")
    _define(cli, "removed", "0 3 * * *")
    assert cli("pause", "paused-for-good").exit_code == 0
    assert cli("pause", "paused-a-while", "--until", "2099-01-02T00:00:00Z").exit_code == 0
    assert cli("remove", "removed").exit_code == 0
    assert cli("trigger", "quarterly", "--at", "2099-01-02T03:00:30Z").exit_code == 0
    # the spring-forward day in Berlin: 02:30 does not exist, the job runs at 03:00 CEST
    data = _forecast(cli, "--from", "2099-03-29", "--to", "1d")
    assert (data["from"], data["to"]) == ("2099-03-29T00:00:00+00:00",
                                          "2099-03-30T00:00:00+00:00")
    assert data["bucket_seconds"] == 60 and len(data["buckets"]) == 1440
    assert (data["jobs"], data["paused"], data["one_off_runs"]) == (7, 1, 0)
    assert data["fires"] == 4 + 1 + 96 + 1  # paused-a-while's pause ended on 2 January
    assert data["peaks"][0]["at"] == "2099-03-29T03:00:00+00:00"
    assert data["peaks"][0]["fires"] == 6
    assert [j["job"] for j in data["peaks"][0]["jobs"]] == [
        "nightly-0", "nightly-1", "nightly-2", "nightly-3", "paused-a-while", "quarterly"]
    berlin = data["buckets"][60]  # 01:00 UTC, 03:00 CEST
    assert berlin == 2  # berlin and quarterly
    # the day its pause ends: fires only after its end; and the one-off run
    data = _forecast(cli, "--from", "2099-01-02", "--to", "2099-01-02",
                     "--bucket", "1h", "--top", "1")
    assert len(data["buckets"]) == 24 and data["one_off_runs"] == 1
    # nightly-*, quarterly x4 and its one-off run, paused-a-while
    assert data["buckets"][3] == 4 + 4 + 1 + 1
    assert data["peaks"][0]["job_count"] == 6
    assert {j["job"]: j["fires"] for j in data["peaks"][0]["jobs"]} == {
        "quarterly": 5, "nightly-0": 1, "nightly-1": 1, "nightly-2": 1, "nightly-3": 1,
        "paused-a-while": 1}
    # the day before: paused-a-while still paused
    data = _forecast(cli, "--from", "2099-01-01", "--to", "1d", "--bucket", "1h")
    assert data["buckets"][3] == 4 + 4


def test_the_forecast_in_text(cli: Invoke) -> None:
    for i in range(3):
        _define(cli, f"nightly-{i}", "0 3 * * *")
    result = cli("forecast", "--from", "2099-06-01", "--top", "2")
    assert result.exit_code == 0, result.stderr
    lines = result.stdout.splitlines()
    assert lines[0] == ("forecast 2099-06-01 00:00 to 2099-06-02 00:00 (UTC), 1m buckets: 3 "
                        "fires of 3 job(s) (1 distinct schedule(s)), 0 one-off run(s); 0 "
                        "job(s) paused throughout")
    assert lines[1].startswith("capacity: no burst of runs in the history since ")
    assert lines[1].endswith("a minute is crowded above 10 fires")
    assert "  1  2099-06-01 03:00  3      3     -                 nightly-0, nightly-1, " \
           "nightly-2" in lines
    assert "busiest 1m of each 1h (a full bar: 3 fires):" in lines
    assert sum(1 for line in lines if line.startswith("  2099-06-01 ")) == 24
    assert "2099-06-01 03:00  ████████████████████████████████████████ 3 (total 3)" \
           in result.stdout


@pytest.mark.parametrize("options", [
    ("--bucket", "30s"), ("--bucket", "90s"), ("--to", "32d"), ("--top", "0"),
    ("--from", "2099-01-02", "--to", "2099-01-01"), ("--from", "yesterday"),
    ("--tz", "Mars/Olympus"), ("--bucket", "2d"),
])
def test_bad_input_is_one_line_and_exit_2(cli: Invoke, db: psycopg.Connection[Any],
                                          options: tuple[str, ...]) -> None:
    before = snapshot(db)
    result = cli("forecast", *options)
    assert result.exit_code == 2
    assert result.stdout == ""
    assert result.stderr.startswith("error: ") and result.stderr.count("\n") == 1
    assert snapshot(db) == before


def test_capacity_and_lateness_come_from_the_history(cli: Invoke, store: Store,
                                                     db: psycopg.Connection[Any]) -> None:
    for i in range(6):
        _define(cli, f"minutely-{i}", "* * * * *")
    later = store.now() + dt.timedelta(minutes=2)
    report = tick(store, TickOptions(worker="forecast-test", now=later, allow_future=True))
    assert report.execute.succeeded == 6  # six runs that shared one slot: a burst
    data = _forecast(cli, "--top", "1")
    capacity = data["capacity"]
    assert capacity["bursts"] == {"command": 1} and capacity["largest_burst"] == {"command": 6}
    spread = db.execute("SELECT extract(epoch FROM max(started_at) - min(started_at)) "
                        "FROM job_runs").fetchone()[0]  # type: ignore[index]
    rate = 5 / float(spread)
    assert capacity["runs_per_second"]["command"] == pytest.approx(rate, rel=1e-3)
    assert data["crowded_threshold"] == max(1, int(rate * fc.CROWDED_SECONDS))
    peak = data["peaks"][0]
    # 6 runs at the rate shown: the last starts 5 runs' time late
    assert peak["predicted_lateness_seconds"] == pytest.approx(5 / rate, abs=1e-3)
    assert all(job["typical_seconds"] is not None and job["typical_seconds"] >= 0
               for job in peak["jobs"])


# -- the warnings -----------------------------------------------------------------------

def _crowd(cli: Invoke, count: int) -> None:
    for i in range(count):
        _define(cli, f"crowd-{i:02d}", "0 3 * * *")


def test_define_warns_above_the_threshold_and_not_at_it(cli: Invoke,
                                                        db: psycopg.Connection[Any]) -> None:
    _crowd(cli, 5)
    at_threshold = cli("define", "new", "0 3 * * *", "--command", "true",
                       "--crowded-threshold", "5", "--json")
    assert at_threshold.exit_code == 0 and at_threshold.stderr == ""
    assert json.loads(at_threshold.stdout)["crowding"] is None
    above = cli("define", "new", "0 3 * * *", "--command", "true", "--crowded-threshold", "4",
                "--json")
    assert above.exit_code == 0  # a warning, never an error
    crowding = json.loads(above.stdout)["crowding"]
    assert (crowding["others"], crowding["threshold"]) == (5, 4)
    assert crowding["suggestion"] == "H 3 * * *"
    assert crowding["at"].endswith("T03:00:00+00:00")
    assert above.stderr == f"warning: {crowding['message']}\n"
    assert crowding["message"].startswith("0 3 * * * shares 03:00 (UTC, first on ")
    assert "with 5 other job run(s), more than the crowded-minute threshold of 4; " \
           "`H 3 * * *` would run at 03:" in crowding["message"]
    # written all the same, once
    assert db.execute("SELECT count(*) FROM job_definitions WHERE name = 'new'"
                      ).fetchone() == (1,)
    # the setting from the environment; off checks nothing
    env = cli("define", "new", "0 3 * * *", "--command", "true",
              env={"CRONJOBS_CROWDED_THRESHOLD": "4"})
    assert env.stderr.startswith("warning: 0 3 * * * shares 03:00")
    assert cli("define", "new", "0 3 * * *", "--command", "true",
               "--crowded-threshold", "off").stderr == ""
    # the default without history: 10
    _crowd(cli, 10)
    default = json.loads(cli("define", "new", "0 3 * * *", "--command", "true",
                             "--json").stdout)
    assert default["crowding"] is None  # 10 others: not more than 10
    _define(cli, "crowd-10", "0 3 * * *")
    default = json.loads(cli("define", "new", "0 3 * * *", "--command", "true",
                             "--json").stdout)
    assert default["crowding"]["others"] == 11 and default["crowding"]["threshold"] == 10
    bad = cli("define", "other", "0 3 * * *", "--command", "true",
              "--crowded-threshold", "lots")
    assert bad.exit_code == 2
    assert db.execute("SELECT count(*) FROM job_definitions WHERE name = 'other'"
                      ).fetchone() == (0,)


JOBS = '''
[jobs.declared-a]
schedule = "0 3 * * *"
command = "true"

[jobs.declared-b]
schedule = "0 3 * * *"
command = "true"

[jobs.spread]
schedule = "H 3 * * *"
command = "true"
'''


def test_apply_marks_crowded_jobs_in_its_diff(cli: Invoke, tmp_path: Path) -> None:
    _crowd(cli, 3)
    path = tmp_path / "jobs.toml"
    path.write_text(JOBS)
    # 3 stored + the other declared one: 4 others each
    dry = cli("apply", str(path), "--dry-run", "--crowded-threshold", "4", "--json")
    assert dry.exit_code == 4
    assert [d.get("crowding") for d in json.loads(dry.stdout)["added"]] == [None] * 3
    dry = cli("apply", str(path), "--dry-run", "--crowded-threshold", "3")
    assert dry.exit_code == 4
    lines = dry.stdout.splitlines()
    marks = [line for line in lines if line.startswith("    ! crowded: ")]
    assert len(marks) == 2
    assert lines[lines.index("+ declared-a  0 3 * * *  (UTC)  command: true") + 1] == marks[0]
    assert "with 4 other job run(s), more than the crowded-minute threshold of 3; " \
           "`H 3 * * *` would run at 03:" in marks[0]
    assert dry.stderr.count("warning: declared-") == 2
    applied = cli("apply", str(path), "--crowded-threshold", "3", "--json")
    assert applied.exit_code == 0
    added = {d["job"]: d.get("crowding") for d in json.loads(applied.stdout)["added"]}
    assert added["spread"] is None
    assert added["declared-a"]["others"] == 4 and added["declared-b"]["others"] == 4
    # in sync: nothing newly timed, nothing to warn about
    again = cli("apply", str(path), "--crowded-threshold", "0")
    assert again.exit_code == 0 and again.stderr == ""


# One job name per test module: the process's registry refuses a name declared twice.
MODULE = '''
import cronjobs

@cronjobs.job("{name}", schedule="0 3 * * *")
def decorated(ctx):
    pass
'''


def test_the_decorator_warns_when_its_jobs_are_applied(
        cli: Invoke, store: Store, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    _crowd(cli, 2)
    (tmp_path / "forecast_app_mod.py").write_text(MODULE.format(name="decorated"))
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(sys, "path", list(sys.path))
    result = apply_declared(store, modules=["forecast_app_mod"], crowded_threshold=1)
    (diff,) = result.added
    assert diff.crowding is not None
    assert (diff.crowding.job, diff.crowding.others, diff.crowding.threshold) == (
        "decorated", 2, 1)
    assert diff.crowding.suggestion == "H 3 * * *"


# -- the dashboard's forecast page --------------------------------------------------------

def test_the_forecast_page_and_an_unknown_view(
        cli: Invoke, database_url: str) -> None:
    from starlette.testclient import TestClient

    from cronjobs.web.app import create_app
    from cronjobs.web.site import Settings

    _define(cli, "a.b:c-d", "0 3 * * *")
    with TestClient(create_app(Settings(conninfo=database_url)),
                    raise_server_exceptions=False) as web:
        page = web.get("/forecast")
        assert page.status_code == 200
        assert '<a class="name" href="/jobs/a.b%3Ac-d">a.b:c-d</a>' in page.text
        assert page.text.count('<td class="h') == 24 * 60
        assert 'data-cell="03:00" data-count="1"' in page.text
        week = web.get("/forecast?view=week")
        assert week.status_code == 200 and week.text.count('<td class="h') == 7 * 24
        bad = web.get("/forecast?view=month")
        assert (bad.status_code, bad.text) == (400, "invalid view 'month': use day or week\n")
        job = web.get("/jobs/a.b%3Ac-d")
        assert "holds <strong>1</strong> run(s) of the fleet" in job.text


def test_the_client_logs_the_warning_of_the_decorator_and_of_define(
        cli: Invoke, database_url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        caplog: pytest.LogCaptureFixture) -> None:
    from cronjobs.client import Client

    _crowd(cli, 2)
    (tmp_path / "forecast_client_mod.py").write_text(MODULE.format(name="decorated-too"))
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(sys, "path", list(sys.path))
    with caplog.at_level("WARNING", logger="cronjobs.client"), Client(database_url) as client:
        applied = client.apply(modules=["forecast_client_mod"], crowded_threshold=1)
        defined = client.define("by-hand", "0 3 * * *", command="true", crowded_threshold=2)
    assert applied.added[0].crowding is not None and defined.crowding is not None
    assert [(r.levelname, r.getMessage()) for r in caplog.records] == [
        ("WARNING", f"decorated-too: {applied.added[0].crowding.message}"),
        ("WARNING", defined.crowding.message)]
    assert defined.crowding.others == 3  # the crowd and the decorated job
