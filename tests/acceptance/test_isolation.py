"""Isolated handler runs (the default) with real ticks, real processes and a real PostgreSQL:
each attempt runs in a child forked from the tick's template process; a handler that
crashes, exits hard, leaks, raises or ignores SIGTERM hurts only its own run; a template
that dies fails only its attempts and is replaced; and when the tick and its watchdog are
both killed with SIGKILL, no job process is left."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

import psycopg
import pytest

from conftest import Invoke, alive, group_members, process_state, wait_for

JOBS = '''
import ctypes, os, random, signal, sys, threading, time
import cronjobs

HELD = []  # what a leaking handler keeps: a fresh child starts without it
STATE = os.environ["JOBS_STATE"]


def _facts():
    sockets = 0
    for fd in os.listdir("/proc/self/fd"):
        try:
            sockets += os.readlink(f"/proc/self/fd/{fd}").startswith("socket:")
        except OSError:
            pass
    return {"ppid": os.getppid(), "own_session": os.getsid(0) == os.getpid(),
            "threads": threading.active_count(), "sockets": sockets,
            "random": random.random(), "run": int(os.environ["CRONJOBS_RUN_ID"])}


@cronjobs.job("fine")
def fine(ctx):
    print("fine", ctx.run_id)
    return _facts()


@cronjobs.job("leak")
def leak(ctx):
    HELD.append(bytearray(64 * 1024 * 1024))
    return {"held": len(HELD)}


@cronjobs.job("segfault")
def segfault(ctx):
    ctypes.string_at(0)


@cronjobs.job("hard_exit")
def hard_exit(ctx):
    print("leaving")
    os._exit(7)


@cronjobs.job("raises")
def raises(ctx):
    raise ValueError("bad input")


@cronjobs.job("stubborn")
def stubborn(ctx):
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    while True:
        time.sleep(0.01)


@cronjobs.job("victim")
def victim(ctx):
    """The first run to get here waits (to have its template killed); later ones return."""
    mine = os.path.join(STATE, f"{ctx.run_id}-{ctx.attempt}")
    with open(mine, "w") as f:
        f.write(f"{os.getpid()} {os.getppid()}")
    try:
        os.mkdir(os.path.join(STATE, "first"))
    except FileExistsError:
        return {"ppid": os.getppid()}
    time.sleep(300)


@cronjobs.job("sleeper")
def sleeper(ctx):
    with open(os.path.join(STATE, "sleeper"), "w") as f:
        f.write(f"{os.getpid()} {os.getppid()}")
    time.sleep(300)
'''


@pytest.fixture
def app(tmp_path: Path) -> dict[str, str]:
    (tmp_path / "isojobs.py").write_text(JOBS)
    state = tmp_path / "state"
    state.mkdir()
    return dict(os.environ, PYTHONPATH=str(tmp_path), JOBS_STATE=str(state))


def _tick(database_url: str, env: dict[str, str], *args: str) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-m", "cronjobs", "--database-url", database_url, "--app", "isojobs",
         "tick", "--json", *args],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)


def _queue(cli: Invoke, name: str, runs: int, *options: str) -> None:
    result = cli("define", name, "0 0 1 1 *", "--overlap", "allow", "--max-attempts", "1",
                 *options)
    assert result.exit_code == 0, result.stderr
    result = cli("backfill", "--yes", name, "--from", "2020-01-01T00:00:00Z",
                 "--to", f"{2020 + runs - 1}-01-01T00:00:00Z")
    assert result.exit_code == 0, result.stderr


def _runs(db: psycopg.Connection[Any], job: str) -> list[tuple[Any, ...]]:
    return db.execute(
        "SELECT r.status, a.outcome, a.exit_code, a.error, r.result, r.output_tail"
        " FROM job_runs r JOIN job_definitions d ON d.id = r.definition_id"
        " JOIN job_attempts a ON a.run_id = r.id WHERE d.name = %s ORDER BY r.id",
        (job,)).fetchall()


def _children(pid: int) -> dict[int, str]:
    """Live children of ``pid``, with their command lines."""
    found = {}
    for name in os.listdir("/proc"):
        if name.isdigit():
            stat = process_state(int(name))
            if stat is not None and stat[1] == pid and stat[0] not in ("Z", "X"):
                try:
                    cmdline = Path(f"/proc/{name}/cmdline").read_bytes()
                except OSError:
                    continue
                found[int(name)] = cmdline.rstrip(b"\0").replace(b"\0", b" ").decode()
    return found


@pytest.mark.smoke
def test_a_bad_handler_hurts_only_its_own_run(cli: Invoke, database_url: str,
                                              db: psycopg.Connection[Any],
                                              app: dict[str, str]) -> None:
    _queue(cli, "fine", 3)
    _queue(cli, "leak", 3)
    for name in ("segfault", "hard_exit", "raises"):
        _queue(cli, name, 1)
    _queue(cli, "stubborn", 1, "--timeout", "2s")
    tick = _tick(database_url, app, "--concurrency", "4", "--grace", "1")
    out, err = tick.communicate(timeout=120)
    assert tick.returncode == 0, err
    counts = json.loads(out)["counts"]
    assert (counts["claimed"], counts["succeeded"], counts["failed"]) == (10, 6, 4)

    fine = _runs(db, "fine")
    assert [row[:4] for row in fine] == [("succeeded", "succeeded", 0, None)] * 3
    facts = [row[4] for row in fine]
    assert [row[5] for row in fine] == [f"fine {f['run']}\n" for f in facts]
    # every run in a child of the same template process, not of the tick
    assert len({f["ppid"] for f in facts}) == 1
    assert facts[0]["ppid"] != tick.pid
    # nothing harmful inherited across fork: no socket (the tick's database connection or
    # the template's own), no thread, a random seed of its own, a session of its own
    assert {(f["own_session"], f["threads"], f["sockets"]) for f in facts} == {(True, 1, 0)}
    assert len({f["random"] for f in facts}) == 3

    assert [row[:5] for row in _runs(db, "leak")] == [
        ("succeeded", "succeeded", 0, None, {"held": 1})] * 3
    assert [row[:4] for row in _runs(db, "segfault")] == [
        ("dead", "failed", None, "killed by signal SIGSEGV")]
    assert "Fatal Python error: Segmentation fault" in _runs(db, "segfault")[0][5]
    assert [row[:4] + row[5:] for row in _runs(db, "hard_exit")] == [
        ("dead", "failed", 7, "exit code 7", "leaving\n")]
    raised = _runs(db, "raises")
    assert [row[:4] for row in raised] == [("dead", "failed", 1, "ValueError: bad input")]
    assert raised[0][5].endswith('raise ValueError("bad input")\nValueError: bad input\n')
    assert [row[:4] for row in _runs(db, "stubborn")] == [
        ("dead", "timed_out", None, "timed out after 2s (SIGTERM, then SIGKILL after 1s)")]


@pytest.mark.slow
def test_a_dead_template_fails_only_its_runs_and_is_replaced(
        cli: Invoke, database_url: str, db: psycopg.Connection[Any],
        app: dict[str, str]) -> None:
    _queue(cli, "victim", 2)
    _queue(cli, "fine", 1)
    state = Path(app["JOBS_STATE"])
    tick = _tick(database_url, app, "--concurrency", "1")
    wait_for((state / "first").exists, "the first victim to start")
    first = next(p for p in state.iterdir() if p.name != "first")
    wait_for(lambda: first.read_text().count(" ") == 1, "the victim to say who it is")
    handler, template = map(int, first.read_text().split())
    assert template != tick.pid
    os.kill(template, signal.SIGKILL)
    out, err = tick.communicate(timeout=120)
    assert tick.returncode == 0, err
    assert not alive(handler)
    counts = json.loads(out)["counts"]
    assert (counts["claimed"], counts["succeeded"], counts["failed"]) == (3, 2, 1)
    victims = _runs(db, "victim")
    lost = [row for row in victims if row[0] == "dead"]
    assert [row[:4] for row in lost] == [
        ("dead", "failed", None, "the template process died (killed by signal SIGKILL); "
                                 "the attempt was killed with it")]
    survivor = [row for row in victims if row[0] == "succeeded"]
    assert len(survivor) == 1
    assert survivor[0][4]["ppid"] not in (template, tick.pid)  # a new template
    assert [row[:4] for row in _runs(db, "fine")] == [("succeeded", "succeeded", 0, None)]


@pytest.mark.slow
def test_killing_the_tick_and_its_watchdog_leaves_no_job_process(
        cli: Invoke, database_url: str, db: psycopg.Connection[Any], app: dict[str, str],
        tmp_path: Path) -> None:
    pids = tmp_path / "command-pids"
    result = cli("define", "shell", "0 0 1 1 *", "--command",
                 f"sleep 300 & echo $! >> {pids}; sleep 300 & echo $! >> {pids}; wait")
    assert result.exit_code == 0, result.stderr
    assert cli("backfill", "--yes", "shell", "--from", "2020-01-01T00:00:00Z",
               "--to", "2020-01-01T00:00:00Z").exit_code == 0
    _queue(cli, "sleeper", 1)
    tick = _tick(database_url, app, "--concurrency", "2")
    state = Path(app["JOBS_STATE"])
    wait_for(lambda: pids.exists() and len(pids.read_text().split()) == 2,
             "the command's processes")
    wait_for(lambda: (state / "sleeper").exists()
             and len((state / "sleeper").read_text().split()) == 2, "the handler")
    handler, template = map(int, (state / "sleeper").read_text().split())
    children = _children(tick.pid)
    watchdogs = [pid for pid, cmd in children.items() if cmd.endswith("--watchdog")]
    commands = [pid for pid, cmd in children.items() if cmd.startswith("/bin/sh -c ")]
    assert len(watchdogs) == 1
    assert len(commands) == 1
    assert template in children
    command_group = commands[0]
    assert len(group_members(command_group)) == 3  # sh and its two sleeps
    assert group_members(handler) == [handler]

    os.kill(watchdogs[0], signal.SIGKILL)
    tick.kill()
    tick.communicate()
    wait_for(lambda: not alive(watchdogs[0]), "the watchdog to be gone")

    wait_for(lambda: not group_members(command_group), "the command's processes to die", 15)
    wait_for(lambda: not alive(handler), "the handler's child to die", 15)
    wait_for(lambda: not alive(template), "the template process to exit", 15)
    for pid in map(int, pids.read_text().split()):
        assert not alive(pid)
    assert group_members(command_group) == []
    assert group_members(handler) == []


def test_handlers_run_in_a_fresh_interpreter_when_the_app_starts_threads(
        cli: Invoke, database_url: str, db: psycopg.Connection[Any],
        app: dict[str, str], tmp_path: Path) -> None:
    (tmp_path / "threaded.py").write_text(
        "import os, threading, time\nimport cronjobs\n"
        "threading.Thread(target=time.sleep, args=(300,), daemon=True).start()\n\n"
        "@cronjobs.job('who')\n"
        "def who(ctx):\n    return {'ppid': os.getppid()}\n")
    result = cli("define", "who", "0 0 1 1 *", "--overlap", "allow")
    assert result.exit_code == 0, result.stderr
    assert cli("backfill", "--yes", "who", "--from", "2020-01-01T00:00:00Z",
               "--to", "2021-01-01T00:00:00Z").exit_code == 0
    tick = subprocess.Popen(
        [sys.executable, "-m", "cronjobs", "--database-url", database_url, "--app", "threaded",
         "tick", "--json"], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=app)
    _, err = tick.communicate(timeout=120)
    assert tick.returncode == 0, err
    rows = db.execute("SELECT status, result FROM job_runs ORDER BY id").fetchall()
    # a fresh interpreter is a child of the tick itself (a template child's parent is the
    # template); the tick says why, once
    assert rows == [("succeeded", {"ppid": tick.pid})] * 2
    assert err.count("handlers run in a fresh interpreter each: the --app modules "
                     "started 1 thread(s) on import") == 1
