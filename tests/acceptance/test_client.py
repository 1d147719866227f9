"""The Python API from a plain Python process (as a web app uses it): cronjobs.Client
finds the database as the CLI does, returns the frozen rows and results, raises the errors
of the exception tree, and writes exactly what the CLI's commands write."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import psycopg

SCRIPT = '''
import dataclasses, datetime as dt, json, sys
import cronjobs
from cronjobs import Client, JobNotFound, Refused, UsageError

out = {}
with Client() as client:                       # CRONJOBS_DATABASE_URL, as the CLI
    made = client.define("report", "0 6 * * *", tz="Europe/Berlin", command="echo hi",
                         overlap="skip", timeout="10m", payload={"days": 7})
    out["define"] = [made.outcome, made.job.timezone, made.job.source]
    assert dataclasses.is_dataclass(made) and type(made).__dataclass_params__.frozen
    out["again"] = client.define("report", "0 6 * * *", tz="Europe/Berlin",
                                 command="echo hi", overlap="skip", timeout="10m",
                                 payload={"days": 7}).outcome
    try:
        client.define("bad", "61 * * * *")
    except UsageError as exc:
        out["bad"] = exc.message
    try:
        client.define("bad", "@daily", timeout="soon")
    except UsageError as exc:
        out["bad_timeout"] = exc.message
    out["jobs"] = [job.name for job in client.jobs()]
    out["job"] = client.job("report").schedule
    out["next"] = len(client.next_fire_times("report", count=3))
    run = client.trigger("report", payload={"days": 1})
    out["trigger"] = [run.state, run.trigger, run.payload, run.attempts_used,
                      run.attempts_allowed]
    try:
        client.trigger("report")
    except Refused as exc:
        out["refused"] = [type(exc).__name__, exc.message]
    out["runs"] = [(r.job, r.id == run.id) for r in client.runs("report")]
    out["run"] = client.run(run.id).job
    later = client.trigger("report", at=dt.datetime.now(dt.timezone.utc)
                           + dt.timedelta(hours=1))
    out["later"] = [later.state, client.cancel(later.id).state]
    out["cancel"] = client.cancel(run.id).state
    out["retry"] = client.retry(run.id).state
    out["pause"] = client.pause("report", note="maintenance").pause_note
    out["resume"] = client.resume("report").paused is False
    out["explain"] = client.explain("report").job
    applied = client.apply(sys.argv[1], prune=True)
    out["apply"] = [[d.name for d in applied.added], applied.unchanged, applied.source]
    out["dry"] = client.apply(sys.argv[1], dry_run=True).in_sync
    out["export"] = client.export("nightly").jobs
    hooked = client.define("hooked", "@daily", command="true",
                           notify="https://hooks.example.com/T1/s3cret",
                           notify_on=["recovery", "failure"]).job
    out["notify"] = [list(hooked.notify), list(hooked.notify_on)]
    out["notify_again"] = client.define(
        "hooked", "@daily", command="true", notify=("https://hooks.example.com/T1/s3cret",),
        notify_on="failure,recovery").outcome
    masked = client.export("hooked")
    out["notify_masked"] = [masked.jobs["hooked"]["notify"], list(masked.masked)]
    out["notify_full"] = client.export("hooked", show_secrets=True).jobs["hooked"]["notify"]
    try:
        client.define("hooked", "@daily", command="true", notify_on="never")
    except UsageError as exc:
        out["bad_notify_on"] = exc.message
    try:
        client.define("hooked", "@daily", command="true", notify="https://h.example.com/***")
    except UsageError as exc:
        out["masked_notify"] = exc.message
    client.remove("hooked")
    removed = client.remove("report")
    out["remove"] = [removed.job.state, removed.cancelled_runs]
    out["removed_job"] = client.job("report").state
    try:
        client.job("never_defined")
    except JobNotFound as exc:
        out["missing"] = exc.message
    out["error_base"] = issubclass(JobNotFound, cronjobs.CronjobsError)
print(json.dumps(out))
'''


def test_the_client_from_a_plain_python_process(database_url: str, db: psycopg.Connection[Any],
                                                tmp_path: Path) -> None:
    (tmp_path / "client_script.py").write_text(SCRIPT)
    (tmp_path / "jobs.toml").write_text(textwrap.dedent('''
        [jobs.nightly]
        schedule = "0 3 * * *"
        command = "true"
    '''))
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("CRONJOBS_", "PG")) and k != "DATABASE_URL"}
    env["CRONJOBS_DATABASE_URL"] = database_url
    result = subprocess.run([sys.executable, "client_script.py", "jobs.toml"], cwd=tmp_path,
                            env=env, capture_output=True, text=True, timeout=120, check=False)
    assert result.returncode == 0, result.stderr
    out = json.loads(result.stdout)
    assert out["define"] == ["created", "Europe/Berlin", None]
    assert out["again"] == "unchanged"
    assert out["bad"].startswith("Client.define: job 'bad': invalid schedule '61 * * * *'")
    assert out["bad_timeout"].startswith("Client.define: job 'bad': invalid timeout 'soon'")
    assert out["jobs"] == ["report"]
    assert out["job"] == "0 6 * * *"
    assert out["next"] == 3
    assert out["trigger"] == ["queued", "manual", {"days": 1}, 0, 3]
    assert out["refused"] == [
        "Refused", "'report' has 0 running and 1 waiting run(s) and its overlap policy is "
        "'skip': pass force=True to run it anyway"]
    assert out["runs"] == [["report", True]]
    assert out["run"] == "report"
    assert out["later"] == ["scheduled", "cancelled"]
    assert out["cancel"] == "cancelled"
    assert out["retry"] == "queued"
    assert out["pause"] == "maintenance"
    assert out["resume"] is True
    assert out["explain"] == "report"
    assert out["apply"] == [["nightly"], 0, "file:jobs.toml"]
    assert out["dry"] is True
    assert out["export"] == {"nightly": {"schedule": "0 3 * * *", "command": "true"}}
    assert out["notify"] == [["https://hooks.example.com/***"], ["failure", "recovery"]]
    assert out["notify_again"] == "unchanged"
    assert out["notify_masked"] == [["https://hooks.example.com/***"], ["hooked"]]
    assert out["notify_full"] == ["https://hooks.example.com/T1/s3cret"]
    assert out["bad_notify_on"].startswith("Client.define: job 'hooked': invalid notify_on "
                                           "'never'")
    assert out["masked_notify"] == ("Client.define: job 'hooked': field 'notify': URL is "
                                    "masked (export with --show-secrets or write the real "
                                    "URL)")
    assert out["remove"] == ["removed", 1]
    # a removed job is read as removed; a name never defined is not found
    assert out["removed_job"] == "removed"
    assert out["missing"] == "no job named 'never_defined' (see Client.jobs())"
    assert out["error_base"] is True
    # exactly what was asked, nothing more
    assert db.execute("SELECT name, removed_at IS NULL FROM job_definitions ORDER BY id"
                      ).fetchall() == [("report", False), ("nightly", True),
                                       ("hooked", False)]
    assert db.execute("SELECT count(*), min(status) FROM job_runs").fetchone() == (
        2, "cancelled")
