"""Every view agrees about a removed job and its runs.

The rule (docs/explanation/semantics.md, "A removed job"): a removed job keeps its row and
its history. Wherever it is named it is shown as removed, with when (describe, the job's
page, Client.job, explain); it is in no list of the jobs defined now (list, export, the
dashboard's list, status's jobs, the metrics' job series and counts). Its runs stay
readable by id and by name, each marked as a removed job's (``job_removed_at``; "NAME
(removed)" in text). A dead run of a removed job needs no acknowledgement: removing the job
settled it, so it keeps neither `status --check` nor /healthz red, and `show` says so.
Nothing acts on it any more: the commands that would say it was removed, and when.

The job is removed by `remove` and by `apply --prune`, after it had a run in each state:
succeeded, dead (unacknowledged), waiting (cancelled by the removal) and running (asked to
stop); every view is checked against the rule, with exact strings and fields.
"""

from __future__ import annotations

import datetime as dt
import json
import re
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import psycopg
import pytest
from starlette.testclient import TestClient

from conftest import Invoke
from cronjobs import Client
from cronjobs.db.store import Store
from cronjobs.tick import TickOptions, tick
from cronjobs.web.app import create_app
from cronjobs.web.site import Settings

# fails when its run's payload says so: one job, a run that succeeds and one that dies
COMMAND = 'case "$CRONJOBS_PAYLOAD" in *fail*) exit 1;; esac; echo done'
JOBS = f"""
[jobs.keeper]
schedule = "0 0 1 1 *"
command = "true"

[jobs.victim]
schedule = "0 0 1 1 *"
command = '{COMMAND}'
overlap = "allow"
max_attempts = 1
"""


AGO = r"\((now|[0-9]+ [a-z]+ ago)\)"  # a time relative to now, as text shows it


@dataclass(frozen=True)
class Removed:
    """The removed job's runs, by their state before the removal, and when it was removed."""

    cli: Invoke
    database_url: str
    succeeded: int
    dead: int
    waiting: int  # cancelled by the removal
    running: int  # asked to stop by the removal
    keeper_run: int  # a run of a job still defined, for contrast
    removed_at: dt.datetime

    @property
    def ids(self) -> list[int]:
        """Newest first, as the views list them."""
        return [self.running, self.waiting, self.dead, self.succeeded]

    @property
    def states(self) -> dict[int, str]:
        return {self.succeeded: "succeeded", self.dead: "dead", self.waiting: "cancelled",
                self.running: "running"}

    @property
    def when(self) -> str:
        return self.removed_at.astimezone(dt.UTC).strftime("%Y-%m-%d %H:%M UTC")

    @property
    def iso(self) -> str:
        return self.removed_at.isoformat()


def _ok(cli: Invoke, *args: str) -> str:
    result = cli(*args)
    assert result.exit_code == 0, (args, result.stderr)
    return str(result.stdout)


def _trigger(cli: Invoke, name: str, *options: str) -> int:
    return int(json.loads(_ok(cli, "trigger", name, "--json", *options))["id"])


def _tick(db: psycopg.Connection[Any]) -> None:
    tick(Store(db), TickOptions(worker="removed-test"))


def _build(cli: Invoke, db: psycopg.Connection[Any], database_url: str, tmp_path: Path,
           how: str) -> Removed:
    jobs = tmp_path / "jobs.toml"
    jobs.write_text(JOBS)
    _ok(cli, "apply", str(jobs))
    keeper_run = _trigger(cli, "keeper")
    succeeded = _trigger(cli, "victim")
    _tick(db)
    dead = _trigger(cli, "victim", "--payload", '{"fail": 1}')
    _tick(db)
    waiting = _trigger(cli, "victim")
    running = _trigger(cli, "victim")
    store = Store(db)
    claimed = store.queue.claim_runs(now=store.now(), worker="w1", limit=1, tick_id=None,
                                     run_ids=[running])
    assert [c.id for c in claimed] == [running]
    if how == "remove":
        _ok(cli, "remove", "victim", "--yes")
    else:
        jobs.write_text(JOBS.split("[jobs.victim]", maxsplit=1)[0])
        _ok(cli, "apply", str(jobs), "--prune")
    row = db.execute("SELECT removed_at FROM job_definitions WHERE name = 'victim'").fetchone()
    assert row is not None and row[0] is not None
    found = dict(db.execute("SELECT id, status FROM job_runs").fetchall())
    assert found == {keeper_run: "succeeded", succeeded: "succeeded", dead: "dead",
                     waiting: "cancelled", running: "running"}
    return Removed(cli, database_url, succeeded, dead, waiting, running, keeper_run, row[0])


@pytest.fixture(params=["remove", "apply --prune"])
def removed(request: pytest.FixtureRequest, cli: Invoke, db: psycopg.Connection[Any],
            database_url: str, tmp_path: Path) -> Removed:
    return _build(cli, db, database_url, tmp_path, request.param)


def _removed_message(r: Removed) -> str:
    return (f"error: job 'victim' was removed at {r.when} (its runs stay: `cronjobs runs "
            "victim`)\n")


def _check_run_json(r: Removed, runs: list[dict[str, Any]]) -> None:
    """Runs of the removed job as --json lists them: each marked, none awaiting an ack."""
    assert [x["id"] for x in runs] == r.ids
    assert {x["id"]: x["status"] for x in runs} == r.states
    assert {x["job"] for x in runs} == {"victim"}
    assert {x["job_removed_at"] for x in runs} == {r.iso}
    assert [x["needs_acknowledgement"] for x in runs] == [False] * 4
    assert [x["acknowledged"] for x in runs] == [False] * 4


def _rows(text: str) -> dict[int, str]:
    """A table's rows by the run id in their first column."""
    return {int(line.split()[0]): line for line in text.splitlines()[1:]
            if line.split() and line.split()[0].isdigit()}


# -- the views -----------------------------------------------------------------------------

def view_list(r: Removed) -> None:
    assert [j["name"] for j in json.loads(_ok(r.cli, "list", "--json"))] == ["keeper"]
    text = _ok(r.cli, "list")
    assert [line.split()[0] for line in text.splitlines()[1:]] == ["keeper"]


def view_describe(r: Removed) -> None:
    data = json.loads(_ok(r.cli, "describe", "victim", "--json"))
    assert (data["job"]["state"], data["job"]["removed_at"], data["job"]["next_fire_at"],
            data["next"]) == ("removed", r.iso, None, [])
    _check_run_json(r, data["recent_runs"])
    text = _ok(r.cli, "--utc", "describe", "victim")
    state = [line for line in text.splitlines() if line.lstrip().startswith("state ")]
    assert len(state) == 1
    assert re.fullmatch(rf"  state +removed {r.when} {AGO}; its runs stay readable",
                        state[0]), state
    assert ("next fire times: none, the job was removed (`cronjobs define victim ...` "
            "defines it again)") in text.splitlines()


def view_runs_of_the_job(r: Removed) -> None:
    _check_run_json(r, json.loads(_ok(r.cli, "runs", "victim", "--json")))
    rows = _rows(_ok(r.cli, "runs", "victim"))
    assert sorted(rows) == sorted(r.ids)
    for run_id, line in rows.items():
        assert re.match(rf"{run_id} +victim \(removed\) +", line), line


def view_all_runs(r: Removed) -> None:
    found = json.loads(_ok(r.cli, "runs", "--json"))
    _check_run_json(r, [x for x in found if x["job"] == "victim"])
    keeper = [x for x in found if x["job"] == "keeper"]
    assert [(x["id"], x["job_removed_at"]) for x in keeper] == [(r.keeper_run, None)]
    rows = _rows(_ok(r.cli, "runs"))
    assert re.match(rf"{r.keeper_run} +keeper +", rows[r.keeper_run])
    for run_id in r.ids:
        assert re.match(rf"{run_id} +victim \(removed\) +", rows[run_id]), rows[run_id]


def view_show(r: Removed) -> None:
    for run_id, state in r.states.items():
        data = json.loads(_ok(r.cli, "show", str(run_id), "--json"))
        assert (data["job"], data["job_removed_at"], data["status"],
                data["needs_acknowledgement"]) == ("victim", r.iso, state, False)
        lines = _ok(r.cli, "--utc", "show", str(run_id)).splitlines()
        assert lines[0] == f"run {run_id} of victim (removed): {state}"
        assert re.fullmatch(rf"  job +removed {r.when} {AGO}", lines[1]), lines[1]
        ack = [line for line in lines if line.startswith("  ack ")]
        assert ack == (["  ack         not needed: its job was removed"]
                       if state == "dead" else [])


def view_logs(r: Removed) -> None:
    dead = r.cli("logs", str(r.dead))
    assert (dead.exit_code, dead.stdout) == (0, "")
    assert dead.stderr == (f"cronjobs: run {r.dead} of victim (removed) is dead (attempt 1 "
                           "of 1): exit code 1\n")
    done = r.cli("logs", str(r.succeeded))
    assert (done.exit_code, done.stdout) == (0, "done\n")
    assert done.stderr == (f"cronjobs: run {r.succeeded} of victim (removed) succeeded "
                           "(attempt 1 of 1)\n")
    ended = [json.loads(line) for line in _ok(r.cli, "logs", str(r.dead), "--json")
             .splitlines()]
    assert ended[-1]["end"]["job_removed_at"] == r.iso


def view_explain(r: Removed) -> None:
    data = json.loads(_ok(r.cli, "explain", "victim", "--json"))
    assert data["removed_at"] == r.iso
    _check_run_json(r, sorted((s["run"] for s in data["slots"] if s["run"]),
                              key=lambda x: -int(x["id"])))
    lines = _ok(r.cli, "--utc", "explain", "victim").splitlines()
    assert re.fullmatch(rf"victim was removed {r.when} {AGO}: no slot of it runs "
                        "after that", lines[-1]), lines[-1]


def view_next(r: Removed) -> None:
    result = r.cli("next", "victim")
    assert (result.exit_code, result.stdout, result.stderr) == (2, "", _removed_message(r))


def view_status(r: Removed) -> None:
    data = json.loads(_ok(r.cli, "status", "--json"))
    assert (data["healthy"], data["problems"], data["dead_unacknowledged"]) == (True, [], 0)
    assert [j["name"] for j in data["jobs"]] == ["keeper"]
    assert [(x["run_id"], x["job"], x["job_removed_at"]) for x in data["running"]] == [
        (r.running, "victim", r.iso)]
    text = _ok(r.cli, "status", "--check")
    assert "dead, not acked 0" in text.splitlines()
    assert "jobs            1 (0 paused, 0 invalid)" in text.splitlines()
    assert re.search(rf"^{r.running} +victim \(removed\) +1 +w1 ", text, re.MULTILINE)


def view_export(r: Removed) -> None:
    assert "victim" not in _ok(r.cli, "export")
    result = r.cli("export", "victim")
    assert (result.exit_code, result.stdout, result.stderr) == (2, "", _removed_message(r))


def view_metrics(r: Removed) -> None:
    text = _ok(r.cli, "metrics")
    samples = {line.rsplit(" ", 1)[0]: float(line.rsplit(" ", 1)[1])
               for line in text.splitlines() if line and not line.startswith("#")}
    assert not [name for name in samples if 'job="victim"' in name]
    assert samples['cronjobs_job_dead_unacknowledged_runs{job="keeper"}'] == 0
    assert (samples["cronjobs_jobs"], samples["cronjobs_dead_unacknowledged_runs"],
            samples["cronjobs_healthy"], samples["cronjobs_running_runs"]) == (1, 0, 1, 1)


def view_dashboard(r: Removed) -> None:
    app = create_app(Settings(conninfo=r.database_url))
    with TestClient(app, raise_server_exceptions=False, follow_redirects=False) as web:
        job = web.get("/jobs/victim")
        assert job.status_code == 200
        assert '<span class="badge s-removed">removed</span>' in job.text
        assert "<dt>Removed</dt>" in job.text
        assert "None: the job was removed." in job.text
        assert "not acknowledged" not in job.text
        assert all(f'href="/runs/{run_id}"' in job.text for run_id in r.ids)
        for run_id, state in r.states.items():
            page = web.get(f"/runs/{run_id}")
            assert page.status_code == 200
            assert f'<h1>Run {run_id} <span class="badge s-{state}">{state}</span></h1>' \
                in page.text
            assert ('<a href="/jobs/victim">victim</a> <span class="badge s-removed">'
                    'removed</span>') in page.text
            assert "not acknowledged" not in page.text
        listed = web.get("/")
        assert listed.status_code == 200
        assert 'href="/jobs/keeper"' in listed.text
        assert 'href="/jobs/victim"' not in listed.text
        health = web.get("/healthz")
        assert (health.status_code, health.json()["problems"]) == (200, [])
        assert 'job="victim"' not in web.get("/metrics").text


def view_client(r: Removed) -> None:
    with Client(r.database_url) as client:
        job = client.job("victim")
        assert (job.state, job.removed_at, job.next_fire_at) == ("removed", r.removed_at, None)
        assert [j.name for j in client.jobs()] == ["keeper"]
        runs = client.runs("victim")
        assert [x.id for x in runs] == r.ids
        assert {x.job_removed_at for x in runs} == {r.removed_at}
        assert [x.needs_acknowledgement for x in runs] == [False] * 4
        one = client.run(r.dead)
        assert (one.state, one.job_removed_at, one.needs_acknowledgement) == (
            "dead", r.removed_at, False)
        assert client.run(r.keeper_run).job_removed_at is None


VIEWS: list[Callable[[Removed], None]] = [
    view_list, view_describe, view_runs_of_the_job, view_all_runs, view_show, view_logs,
    view_explain, view_next, view_status, view_export, view_metrics, view_dashboard,
    view_client,
]


@pytest.mark.parametrize("view", VIEWS, ids=[v.__name__ for v in VIEWS])
def test_every_view_agrees_about_a_removed_job(removed: Removed,
                                               view: Callable[[Removed], None]) -> None:
    view(removed)
