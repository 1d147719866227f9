"""`cronjobs apply` and `cronjobs export` against a real database: the diff, the dry run's
exit code, ownership (prune never touches a job made by hand or another source's; a conflict
is refused unless --adopt), the round trip, and bad files applying nothing."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import psycopg
import pytest

from conftest import Invoke, count, snapshot

JOBS = '''
source = "billing"

[jobs.cleanup]
schedule = "0 3 * * *"
tz = "Europe/Berlin"
timeout = "2h"

[jobs.backup]
schedule = "0 2 * * *"
command = "echo backup"
payload = { keep = 7 }
'''


def _write(tmp_path: Path, text: str, name: str = "jobs.toml") -> str:
    path = tmp_path / name
    path.write_text(textwrap.dedent(text))
    return str(path)


def _defs(db: psycopg.Connection[Any]) -> dict[str, tuple[Any, ...]]:
    return {row[0]: row[1:] for row in db.execute(
        "SELECT name, schedule, timezone, source, removed_at IS NOT NULL FROM job_definitions "
        "WHERE removed_at IS NULL")}


def test_apply_creates_then_is_in_sync(cli: Invoke, db: psycopg.Connection[Any],
                                       tmp_path: Path) -> None:
    path = _write(tmp_path, JOBS)
    dry = cli("apply", path, "--dry-run")
    assert dry.exit_code == 4, dry.stderr
    assert "+ cleanup  0 3 * * *  (Europe/Berlin)  handler: cleanup" in dry.stdout
    assert "dry run: 2 change(s) pending, nothing written" in dry.stdout
    assert count(db, "job_definitions") == 0
    first = cli("apply", path, "--json")
    assert first.exit_code == 0, first.stderr
    report = json.loads(first.stdout)
    assert [a["job"] for a in report["added"]] == ["cleanup", "backup"]
    assert report["source"] == "billing" and report["in_sync"] is False
    assert _defs(db) == {"cleanup": ("0 3 * * *", "Europe/Berlin", "billing", False),
                         "backup": ("0 2 * * *", "UTC", "billing", False)}
    before = snapshot(db)
    again = cli("apply", path, "--dry-run", "--json")
    assert again.exit_code == 0, again.stderr
    assert json.loads(again.stdout)["unchanged"] == 2
    assert json.loads(again.stdout)["in_sync"] is True
    assert cli("apply", path).stdout.endswith("in sync: nothing to change\n")
    assert snapshot(db) == before


def test_a_changed_schedule_shows_old_and_new_and_keeps_history(
        cli: Invoke, db: psycopg.Connection[Any], tmp_path: Path) -> None:
    path = _write(tmp_path, JOBS)
    assert cli("apply", path).exit_code == 0
    db.execute("UPDATE job_definitions SET cursor_at = cursor_at - interval '3 days', "
               "created_at = created_at - interval '3 days'")
    (first_id,) = db.execute("SELECT id FROM job_definitions WHERE name = 'cleanup'").fetchone()
    _write(tmp_path, JOBS.replace('"0 3 * * *"', '"30 4 * * *"').replace('"2h"', '"3h"'))
    dry = cli("apply", path, "--dry-run")
    assert dry.exit_code == 4
    tz = "Europe/Berlin"
    assert ("~ cleanup\n    schedule: '0 3 * * *' -> '30 4 * * *'\n"
            f"      (At 03:00 ({tz}) -> At 04:30 ({tz}))\n"
            "    timeout: '2h' -> '3h'\n") in dry.stdout
    assert "= 1 unchanged" in dry.stdout
    applied = cli("apply", path, "--json")
    assert applied.exit_code == 0
    changes = json.loads(applied.stdout)["changed"][0]["changes"]
    assert changes == {"schedule": {"old": "0 3 * * *", "new": "30 4 * * *",
                                    "description": f"At 03:00 ({tz}) -> At 04:30 ({tz})"},
                       "timeout": {"old": "2h", "new": "3h"}}
    (same_id, schedule) = db.execute(
        "SELECT id, schedule FROM job_definitions WHERE name = 'cleanup'").fetchone()
    assert (same_id, schedule) == (first_id, "30 4 * * *")
    # as `define` does: the old schedule's undecided slots are recorded, not dropped
    reasons = [r for (r,) in db.execute(
        "SELECT reason FROM job_skips WHERE definition_id = %s", (first_id,))]
    assert reasons == ["superseded"]


def test_prune_removes_only_its_own_source(cli: Invoke, db: psycopg.Connection[Any],
                                           tmp_path: Path) -> None:
    assert cli("define", "by_hand", "@daily", "--command", "true").exit_code == 0
    other = _write(tmp_path, '[jobs.theirs]\nschedule = "@hourly"\ncommand = "true"\n',
                   "other.toml")
    assert cli("apply", other).exit_code == 0
    path = _write(tmp_path, JOBS)
    assert cli("apply", path).exit_code == 0
    (backup_id,) = db.execute("SELECT id FROM job_definitions WHERE name = 'backup'").fetchone()
    db.execute("INSERT INTO job_runs (definition_id, scheduled_for, trigger, max_attempts, "
               "eligible_at) VALUES (%s, now(), 'manual', 3, now())", (backup_id,))
    _write(tmp_path, JOBS.split("[jobs.backup]", maxsplit=1)[0])
    kept = cli("apply", path)
    assert kept.exit_code == 0
    assert "no longer declared, kept (--prune removes them): backup" in kept.stdout
    assert "backup" in _defs(db)
    pruned = cli("apply", path, "--prune", "--json")
    assert pruned.exit_code == 0, pruned.stderr
    assert json.loads(pruned.stdout)["removed"] == [{"job": "backup", "cancelled_runs": 1}]
    assert _defs(db) == {"cleanup": ("0 3 * * *", "Europe/Berlin", "billing", False),
                         "by_hand": ("@daily", "UTC", None, False),
                         "theirs": ("@hourly", "UTC", "file:other.toml", False)}
    # removing keeps history, as `remove` does
    assert db.execute("SELECT count(*) FROM job_definitions WHERE name = 'backup' AND "
                      "removed_at IS NOT NULL").fetchone() == (1,)
    assert db.execute("SELECT status FROM job_runs").fetchall() == [("cancelled",)]


def test_a_conflict_is_refused_unless_adopted(cli: Invoke, db: psycopg.Connection[Any],
                                              tmp_path: Path) -> None:
    assert cli("define", "cleanup", "0 3 * * *", "--tz", "Europe/Berlin").exit_code == 0
    other = _write(tmp_path, '[jobs.backup]\nschedule = "@hourly"\ncommand = "true"\n',
                   "other.toml")
    assert cli("apply", other).exit_code == 0
    path = _write(tmp_path, JOBS)
    before = snapshot(db)
    refused = cli("apply", path)
    assert refused.exit_code == 2
    assert refused.stdout == ""
    assert refused.stderr == (
        "error: declared jobs already exist and are not of source 'billing': 'cleanup' "
        "(made by hand (define)), 'backup' (of source 'file:other.toml'); use --adopt to "
        "take them over\n")
    assert snapshot(db) == before
    adopted = cli("apply", path, "--adopt")
    assert adopted.exit_code == 0, adopted.stderr
    assert "~ cleanup  (adopted: was made by hand (define))\n    timeout: '1h' -> '2h'" \
        in adopted.stdout
    assert "~ backup  (adopted: was of source 'file:other.toml')" in adopted.stdout
    assert {name: row[2] for name, row in _defs(db).items()} == {
        "cleanup": "billing", "backup": "billing"}
    # the other source no longer owns it: its prune leaves it alone
    _write(tmp_path, "", "other.toml")
    assert cli("apply", other, "--prune").exit_code == 0
    assert set(_defs(db)) == {"cleanup", "backup"}


def test_export_then_apply_changes_nothing(cli: Invoke, db: psycopg.Connection[Any],
                                           tmp_path: Path) -> None:
    path = _write(tmp_path, JOBS.replace("[jobs.backup]", '[jobs."odd.name:x"]'))
    assert cli("apply", path).exit_code == 0
    exported = cli("export")
    assert exported.exit_code == 0
    assert "source = 'billing'" in exported.stdout
    again = _write(tmp_path, exported.stdout, "exported.toml")
    before = snapshot(db)
    result = cli("apply", again, "--dry-run", "--json")
    assert result.exit_code == 0, result.stdout
    assert json.loads(result.stdout)["unchanged"] == 2
    assert cli("apply", again).exit_code == 0
    assert snapshot(db) == before
    as_json = json.loads(cli("export", "cleanup", "--format", "json").stdout)
    assert as_json == {"source": "billing", "jobs": {"cleanup": {
        "schedule": "0 3 * * *", "tz": "Europe/Berlin", "timeout": "2h"}}}
    assert cli("export", "missing").exit_code == 2


HOOKED = '''
source = "billing"

[jobs.hooked]
schedule = "*/5 * * * *"
command = "echo hooked"
notify = ["https://hooks.example.com/services/T0/B0/s3cretToken", "http://10.1.2.3:8080/rcv-X9"]
notify_on = "dead, failure"

[jobs.quiet]
schedule = "@daily"
command = "true"
'''
SECRETS = ("s3cretToken", "T0/B0", "rcv-X9", "0th3rToken")


def _no_secret(*outputs: str) -> None:
    for secret in SECRETS:
        for output in outputs:
            assert secret not in output, (secret, output)


def test_the_diff_shows_notify_urls_masked(cli: Invoke, db: psycopg.Connection[Any],
                                           tmp_path: Path) -> None:
    path = _write(tmp_path, HOOKED)
    added = cli("apply", path, "--json")
    assert added.exit_code == 0, added.stderr
    fields = json.loads(added.stdout)["added"][0]["fields"]
    assert fields["notify"] == ["https://hooks.example.com/***", "http://10.1.2.3:8080/***"]
    assert fields["notify_on"] == ["dead", "failure"]
    _no_secret(added.stdout, added.stderr)
    assert db.execute("SELECT notify_urls, notify_on FROM job_definitions WHERE name = "
                      "'hooked'").fetchone() == (
        ["https://hooks.example.com/services/T0/B0/s3cretToken", "http://10.1.2.3:8080/rcv-X9"],
        ["dead", "failure"])
    # only the token changes: still a change, masked on both sides
    _write(tmp_path, HOOKED.replace("s3cretToken", "0th3rToken"))
    dry = cli("apply", path, "--dry-run")
    assert dry.exit_code == 4, dry.stderr
    assert ("~ hooked\n    notify: [https://hooks.example.com/***, http://10.1.2.3:8080/***] "
            "-> [https://hooks.example.com/***, http://10.1.2.3:8080/***] (changed)\n"
            ) in dry.stdout
    as_json = cli("apply", path, "--dry-run", "--json")
    assert json.loads(as_json.stdout)["changed"][0]["changes"] == {"notify": {
        "old": ["https://hooks.example.com/***", "http://10.1.2.3:8080/***"],
        "new": ["https://hooks.example.com/***", "http://10.1.2.3:8080/***"],
        "note": "changed (secret part masked)"}}
    _no_secret(dry.stdout, dry.stderr, as_json.stdout, as_json.stderr)
    # a receiver and the events change: old -> new, masked
    _write(tmp_path, HOOKED.replace(', "http://10.1.2.3:8080/rcv-X9"', "").replace(
        '"dead, failure"', '["recovery"]'))
    applied = cli("apply", path)
    assert applied.exit_code == 0, applied.stderr
    assert ("    notify: [https://hooks.example.com/***, http://10.1.2.3:8080/***] -> "
            "[https://hooks.example.com/***]\n"
            "    notify_on: [dead, failure] -> [recovery]\n") in applied.stdout
    _no_secret(applied.stdout, applied.stderr)
    assert db.execute("SELECT notify_urls, notify_on FROM job_definitions WHERE name = "
                      "'hooked'").fetchone() == (
        ["https://hooks.example.com/services/T0/B0/s3cretToken"], ["recovery"])


def test_export_masks_notify_urls_unless_asked_and_apply_refuses_them(
        cli: Invoke, db: psycopg.Connection[Any], tmp_path: Path) -> None:
    assert cli("apply", _write(tmp_path, HOOKED)).exit_code == 0
    exported = cli("export")
    assert exported.exit_code == 0, exported.stderr
    assert ("notify = ['https://hooks.example.com/***', 'http://10.1.2.3:8080/***']\n"
            "notify_on = ['dead', 'failure']\n") in exported.stdout
    assert exported.stderr == ("warning: notify URLs masked (secrets) for job(s) hooked; "
                               "export with --show-secrets to write them in full\n")
    _no_secret(exported.stdout, exported.stderr)
    as_json = cli("export", "--format", "json")
    assert json.loads(as_json.stdout)["jobs"]["hooked"]["notify"] == [
        "https://hooks.example.com/***", "http://10.1.2.3:8080/***"]
    assert as_json.stderr.startswith("warning: notify URLs masked")
    _no_secret(as_json.stdout)
    assert cli("export", "quiet").stderr == ""  # no URLs: nothing masked, no warning
    # a masked export is never applied: exit 2, nothing written
    masked = _write(tmp_path, exported.stdout, "masked.toml")
    before = snapshot(db)
    refused = cli("apply", masked)
    assert refused.exit_code == 2
    assert refused.stdout == ""
    assert refused.stderr == (
        f"error: {masked}:6: job 'hooked': field 'notify': URL is masked (export with "
        "--show-secrets or write the real URL)\n")
    assert snapshot(db) == before
    # --show-secrets: the round trip changes nothing
    full = cli("export", "--show-secrets")
    assert full.exit_code == 0 and full.stderr == ""
    assert "s3cretToken" in full.stdout and "'http://10.1.2.3:8080/rcv-X9'" in full.stdout
    again = _write(tmp_path, full.stdout, "full.toml")
    dry = cli("apply", again, "--dry-run")
    assert dry.exit_code == 0, (dry.stdout, dry.stderr)
    assert "= 2 unchanged\nin sync: nothing to change" in dry.stdout
    assert cli("apply", again).exit_code == 0
    assert snapshot(db) == before
    as_json = json.loads(cli("export", "hooked", "--show-secrets", "--json").stdout)
    assert as_json["jobs"]["hooked"]["notify"][0].endswith("/s3cretToken")


def test_hand_made_jobs_exported_are_adopted_once(cli: Invoke, db: psycopg.Connection[Any],
                                                  tmp_path: Path) -> None:
    assert cli("define", "report", "@daily", "--payload", '{"a": null}', "--overlap",
               "allow", "--timeout", "none", "--pause-after-failures", "4").exit_code == 0
    path = _write(tmp_path, cli("export").stdout)
    assert cli("apply", path).exit_code == 2
    adopted = cli("apply", path, "--adopt", "--json")
    assert json.loads(adopted.stdout)["changed"][0]["changes"] == {}
    assert json.loads(cli("apply", path, "--json").stdout)["in_sync"] is True


def test_a_bad_file_applies_nothing(cli: Invoke, db: psycopg.Connection[Any],
                                    tmp_path: Path) -> None:
    path = _write(tmp_path, JOBS + '\n[jobs.third]\nschedule = "@daily"\ntimeout = "soon"\n')
    before = snapshot(db)
    result = cli("apply", path)
    assert result.exit_code == 2
    assert result.stderr == (f"error: {path}:14: job 'third': invalid timeout 'soon': use a "
                             "number with a unit, such as 90s, 5m, 2h, 1d or 1h30m\n")
    assert snapshot(db) == before
    assert cli("apply").exit_code == 2
    assert cli("apply", str(tmp_path / "missing.toml")).stderr.startswith(
        "error: cannot read jobs file")


MODULE = '''
import cronjobs

@cronjobs.job("cleanup", schedule="0 3 * * *", tz="Europe/Berlin", timeout="2h",
              notify=["https://hooks.example.com/T1/s3cret"], notify_on="failure,recovery")
def cleanup(ctx):
    pass
'''


def test_the_decorator_and_the_file_apply_identical_definitions(
        cli: Invoke, db: psycopg.Connection[Any], tmp_path: Path,
        monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "apply_app_mod.py").write_text(MODULE)
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(sys, "path", list(sys.path))
    result = cli("--app", "apply_app_mod", "apply", "--source", "code")
    assert result.exit_code == 0, result.stderr
    columns = ("SELECT schedule, timezone, kind, handler, command, payload, catchup, "
               "catchup_limit, starting_deadline, overlap, max_attempts, backoff, backoff_max, "
               "timeout, lease, alert_command, alert_on_failure, pause_after_failures, "
               "group_name, notify_urls, notify_on FROM job_definitions")
    from_code = db.execute(columns).fetchall()
    assert from_code[0][-2:] == (["https://hooks.example.com/T1/s3cret"],
                                 ["failure", "recovery"])
    first = JOBS.split("[jobs.backup]", maxsplit=1)[0]
    path = _write(tmp_path, first.replace('"billing"', '"code"') + (
        'notify = ["https://hooks.example.com/T1/s3cret"]\n'
        'notify_on = ["recovery", "failure"]\n'))
    assert json.loads(cli("apply", path, "--json").stdout)["unchanged"] == 1
    assert db.execute(columns).fetchall() == from_code


@pytest.mark.parametrize("processes", [2, 8])
def test_concurrent_applies_end_as_one(database_url: str, db: psycopg.Connection[Any],
                                       tmp_path: Path, processes: int) -> None:
    """Pods starting at once all apply the same file: one creates, the others find it in
    sync; nothing flaps."""
    jobs = "\n".join(f'[jobs.job{i}]\nschedule = "{i} * * * *"\ncommand = "true"\n'
                     for i in range(20))
    path = _write(tmp_path, jobs)
    env = {k: v for k, v in os.environ.items() if not k.startswith("CRONJOBS_")}
    started = [subprocess.Popen(
        [sys.executable, "-m", "cronjobs", "--database-url", database_url, "apply", path,
         "--prune", "--json"], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        env=env) for _ in range(processes)]
    reports = []
    for process in started:
        out, err = process.communicate(timeout=120)
        assert process.returncode == 0, err
        reports.append(json.loads(out))
    assert sorted(len(r["added"]) for r in reports) == [0] * (processes - 1) + [20]
    assert sorted(r["unchanged"] for r in reports) == [0] + [20] * (processes - 1)
    assert all(r["changed"] == [] and r["removed"] == [] for r in reports)
    assert count(db, "job_definitions") == 20
    assert db.execute("SELECT count(DISTINCT updated_at), count(*) FILTER (WHERE "
                      "updated_at <> created_at) FROM job_definitions").fetchone() == (1, 0)


BAD_MODULE = '''
import cronjobs

@cronjobs.job("fine", schedule="@daily")
def fine(ctx):
    pass

@cronjobs.job("broken", schedule="@daily", overlap="sometimes")
def broken(ctx):
    pass
'''


def test_a_bad_decorator_argument_applies_nothing(
        cli: Invoke, db: psycopg.Connection[Any], tmp_path: Path,
        monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "apply_bad_mod.py").write_text(BAD_MODULE)
    (tmp_path / "apply_typo_mod.py").write_text(
        'import cronjobs\n@cronjobs.job("t", schedule="@daily", timout="1h")\n'
        'def t(ctx): pass\n')
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(sys, "path", list(sys.path))
    before = snapshot(db)
    result = cli("--app", "apply_bad_mod", "apply")
    assert result.exit_code == 2
    assert result.stderr == (
        f"error: {tmp_path / 'apply_bad_mod.py'}:8 (apply_bad_mod.broken): job 'broken': "
        "invalid overlap 'sometimes': use skip, queue, allow or replace\n")
    typo = cli("--app", "apply_typo_mod", "apply")
    assert typo.exit_code == 2
    assert typo.stderr.startswith("error: cannot import --app module 'apply_typo_mod': "
                                  "TypeError: job() got an unexpected keyword argument "
                                  "'timout'")
    assert snapshot(db) == before
