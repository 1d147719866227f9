"""The runner with real processes (no database): commands, handlers, limits, the watchdog.

Short timeouts and kill graces only make these tests quick; nothing asserts how long
anything took. Loops that wait for a process to vanish are bounded, and fail with a
message rather than hang.
"""

from __future__ import annotations

import datetime as dt
import json
import os
import re
import signal
import subprocess
import sys
import textwrap
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from conftest import alive, group_members, peak_rss, wait_for
from cronjobs.execution.context import JobContext
from cronjobs.execution.runners import Result, Work
from cronjobs.execution.runners.dispatch import start
from cronjobs.execution.runners.process import Running
from cronjobs.execution.runners.shell import close_inherited
from cronjobs.execution.runners.template import Template, TemplateChild
from cronjobs.execution.watchdog import Watchdog
from cronjobs.models import AttemptOutcome

CONTEXT = JobContext(run_id=42, job="nightly", attempt=2, payload={"table": "events", "days": 30},
                     scheduled_for=dt.datetime(2024, 5, 1, 3, 0, tzinfo=dt.UTC))
SAFETY = 60.0  # seconds: only so that a broken runner fails a test instead of hanging it

APP = '''
import ctypes, os, signal, sys, time
import cronjobs


class Oops(Exception):
    pass


@cronjobs.job("report")
def report(ctx):
    print("working on", ctx.payload["table"])
    print("a warning", file=sys.stderr)
    return {"rows": 3, "names": ["a", "b"]}


@cronjobs.job("context")
def context(ctx):
    return {"run_id": ctx.run_id, "job": ctx.job, "attempt": ctx.attempt,
            "scheduled_for": ctx.scheduled_for.isoformat(), "payload": ctx.payload,
            "key": ctx.idempotency_key, "type": type(ctx).__name__,
            "env": [os.environ["CRONJOBS_RUN_ID"], os.environ["CRONJOBS_JOB"]]}


@cronjobs.job("nothing")
def nothing(ctx):
    print('{"ok": false, "error": "not the result channel"}')


@cronjobs.job("bad_input")
def bad_input(ctx):
    raise ValueError("bad input")


@cronjobs.job("oops")
def oops(ctx):
    raise Oops("first line\\nsecond line")


@cronjobs.job("stubborn")
def stubborn(ctx):
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    while True:
        pass


@cronjobs.job("sleepy")
def sleepy(ctx):
    open(os.environ["READY"], "w").close()
    time.sleep(60)


@cronjobs.job("exit7")
def exit7(ctx):
    print("about to leave")
    os._exit(7)


@cronjobs.job("sys_exit")
def sys_exit(ctx):
    sys.exit(3)


@cronjobs.job("segfault")
def segfault(ctx):
    ctypes.string_at(0)


@cronjobs.job("a_set")
def a_set(ctx):
    return {1, 2}


@cronjobs.job("huge")
def huge(ctx):
    return "x" * 100_000
'''


# -- helpers -----------------------------------------------------------------------------


def _finish(running: Running) -> Result:
    result = running.wait(SAFETY)
    assert result is not None, "the job did not finish"
    return result


def command(cmd: str, **options: Any) -> Result:
    return _finish(start(Work(context=CONTEXT, kind="command", command=cmd, handler=None,
                              **options)))


@pytest.fixture
def app_env(tmp_path: Path) -> dict[str, str]:
    (tmp_path / "myjobs.py").write_text(textwrap.dedent(APP))
    (tmp_path / "broken.py").write_text('raise RuntimeError("no config")\n')
    return dict(os.environ, PYTHONPATH=str(tmp_path), READY=str(tmp_path / "ready"))


@pytest.fixture(params=["fresh interpreter", "template"])
def handler(request: pytest.FixtureRequest, app_env: dict[str, str],
            monkeypatch: pytest.MonkeyPatch) -> Iterator[Callable[..., Result]]:
    """Runs a handler either way: in a fresh interpreter, or forked from a template process
    (cronjobs.execution.runners.template) — with the same results."""
    templates: dict[tuple[str, ...], Template] = {}
    if request.param == "template":
        monkeypatch.setenv("PYTHONPATH", app_env["PYTHONPATH"])
        monkeypatch.setenv("READY", app_env["READY"])

    def run(name: str, **options: Any) -> Result:
        options.setdefault("apps", ("myjobs",))
        if request.param == "fresh interpreter":
            return _finish(start(Work(context=CONTEXT, kind="handler", command=None,
                                      handler=name, env=app_env, **options)))
        apps = options["apps"]
        if apps not in templates:
            templates[apps] = Template(apps)
            assert not apps or templates[apps].wait_ready(SAFETY)
        running = start(Work(context=CONTEXT, kind="handler", command=None, handler=name,
                             **options), template=templates[apps])
        # forked, not a fresh interpreter (without apps a template only fences)
        assert isinstance(running._process, TemplateChild) == bool(apps)
        return _finish(running)

    yield run
    for template in templates.values():
        template.close()


# -- commands ----------------------------------------------------------------------------


def test_command_sees_its_context_in_the_environment() -> None:
    result = command('echo "$CRONJOBS_RUN_ID $CRONJOBS_JOB $CRONJOBS_ATTEMPT '
                     '$CRONJOBS_SCHEDULED_FOR $CRONJOBS_PAYLOAD"')
    assert result == Result(AttemptOutcome.SUCCEEDED, 0, None,
                            '42 nightly 2 2024-05-01T03:00:00+00:00 '
                            '{"table":"events","days":30}\n', None, result.duration)
    assert result.duration >= 0


def test_command_gets_the_given_environment_plus_its_context() -> None:
    result = command('echo "${GREETING:-unset} ${HOME:-nohome} $CRONJOBS_JOB"',
                     env={"PATH": os.environ["PATH"], "GREETING": "hi"})
    assert result.output_tail == "hi nohome nightly\n"


def test_command_stdin_is_empty() -> None:
    assert command("wc -c").output_tail.strip() == "0"


def test_non_zero_exit_fails_with_the_code() -> None:
    result = command("echo out; echo err >&2; echo more; exit 3")
    assert result.outcome == AttemptOutcome.FAILED
    assert result.exit_code == 3
    assert result.error == "exit code 3"
    assert result.output_tail == "out\nerr\nmore\n"  # one pipe: in order


def test_killed_by_a_signal() -> None:
    result = command("kill -SEGV $$")
    assert (result.outcome, result.exit_code, result.error) == (
        AttemptOutcome.FAILED, None, "killed by signal SIGSEGV")


def test_timeout_terminates_the_command() -> None:
    result = command("echo started; sleep 60", timeout=1, kill_grace=1)
    assert (result.outcome, result.exit_code, result.error) == (
        AttemptOutcome.TIMED_OUT, None, "timed out after 1s")
    assert result.output_tail == "started\n"


def test_timeout_kills_a_command_that_ignores_sigterm() -> None:
    result = command("trap '' TERM; sleep 60", timeout=1, kill_grace=0.5)
    assert (result.outcome, result.exit_code, result.error) == (
        AttemptOutcome.TIMED_OUT, None, "timed out after 1s (SIGTERM, then SIGKILL after 0.5s)")


def test_timeout_kills_the_whole_process_tree() -> None:
    result = command("sleep 100 & echo $!; sh -c 'sleep 100 & echo $!; sleep 100'; sleep 100",
                     timeout=1, kill_grace=1)
    assert result.outcome == AttemptOutcome.TIMED_OUT
    pids = [int(word) for word in result.output_tail.split()]
    assert len(pids) == 2
    for pid in pids:
        assert not alive(pid), f"grandchild {pid} survived the timeout"


def test_processes_left_behind_do_not_outlive_the_job() -> None:
    result = command("sleep 100 & echo $!; (trap '' TERM; exec sleep 100) & echo $!",
                     kill_grace=0.5)
    assert (result.outcome, result.exit_code, result.error) == (
        AttemptOutcome.SUCCEEDED, 0, None)
    for pid in map(int, result.output_tail.split()):
        assert not alive(pid), f"background process {pid} outlived the job"


def test_a_process_that_left_the_group_does_not_hold_up_the_result() -> None:
    # it keeps the output pipe open; the runner stops reading shortly after the group is gone
    result = command("setsid sleep 300 & sleep 0.3; echo $!")
    assert (result.outcome, result.error) == (AttemptOutcome.SUCCEEDED, None)
    escaped = int(result.output_tail)
    if alive(escaped):
        os.kill(escaped, signal.SIGKILL)


def test_a_gigabyte_of_output_keeps_only_the_tail_in_bounded_memory(tmp_path: Path) -> None:
    script = textwrap.dedent("""
        import datetime as dt, json, sys
        from cronjobs.execution.context import JobContext
        from cronjobs.execution.runners import Work
        from cronjobs.execution.runners.dispatch import start
        context = JobContext(1, "loud", dt.datetime(2024, 1, 1, tzinfo=dt.UTC), 1, {})
        result = start(Work(context=context, kind="command", command=sys.argv[1],
                            handler=None, output_limit=65536)).wait(120)
        with open(sys.argv[2], "w") as out:
            json.dump({"outcome": result.outcome, "tail": result.output_tail}, out)
    """)
    report = tmp_path / "report.json"
    loud = "head -c 1073741824 /dev/zero | tr '\\0' 'x'; echo; printf end"
    code, peak_mib = peak_rss([sys.executable, "-c", script, loud, str(report)])
    assert code == 0
    outcome = json.loads(report.read_text())
    assert outcome["outcome"] == "succeeded"
    assert outcome["tail"] == "x" * (65536 - 4) + "\nend"
    assert peak_mib < 100, f"the runner's process peaked at {peak_mib:.0f} MiB"


def test_undecodable_bytes_and_nul_are_replaced() -> None:
    assert command(r"printf '\377\376ok\000!'").output_tail == "\ufffd\ufffdok\ufffd!"


def test_a_cut_tail_starts_at_a_character_boundary() -> None:
    # 8 bytes of 2-byte characters; the last 5 start in the middle of one
    assert command("printf 'éééé'", output_limit=5).output_tail == "éé"
    assert command("printf 'éééé'", output_limit=0).output_tail == ""


def test_stop_cancels_with_the_reason() -> None:
    running = start(Work(context=CONTEXT, kind="command", command="echo up; sleep 60",
                         handler=None, kill_grace=1))
    assert running.poll() is None
    running.stop(AttemptOutcome.CANCELLED, "cancelled by alice")
    running.stop(AttemptOutcome.LOST, "a second request changes nothing")
    result = _finish(running)
    assert (result.outcome, result.exit_code, result.error) == (
        AttemptOutcome.CANCELLED, None, "cancelled by alice")
    assert running.poll() is result


def test_stop_kills_a_command_that_ignores_sigterm() -> None:
    running = start(Work(context=CONTEXT, kind="command", command="trap '' TERM; sleep 60",
                         handler=None, kill_grace=0.5))
    running.stop(AttemptOutcome.INTERRUPTED, "interrupted: the tick was stopped")
    result = _finish(running)
    assert (result.outcome, result.exit_code, result.error) == (
        AttemptOutcome.INTERRUPTED, None, "interrupted: the tick was stopped")


def test_stop_after_the_job_ended_keeps_its_result() -> None:
    running = start(Work(context=CONTEXT, kind="command", command="exit 0", handler=None))
    wait_for(lambda: os.waitid(os.P_PID, running.pid,
                               os.WEXITED | os.WNOHANG | os.WNOWAIT) is not None,
             "the job exited", 15)
    running.stop(AttemptOutcome.CANCELLED, "too late")
    assert _finish(running).outcome == AttemptOutcome.SUCCEEDED


def test_wait_with_a_timeout_returns_none_while_running() -> None:
    running = start(Work(context=CONTEXT, kind="command", command="sleep 60", handler=None,
                         kill_grace=1))
    assert running.wait(0.1) is None
    running.stop(AttemptOutcome.CANCELLED, "done waiting")
    assert _finish(running).outcome == AttemptOutcome.CANCELLED


def test_a_job_that_cannot_start_fails(app_env: dict[str, str],
                                       monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(sys, "executable", "/nonexistent/python")
    running = start(Work(context=CONTEXT, kind="handler", command=None, handler="report",
                         env=app_env))
    assert running.pid == 0
    result = _finish(running)
    assert result.outcome == AttemptOutcome.FAILED
    assert result.exit_code is None
    assert result.error is not None
    assert result.error.startswith("could not start /nonexistent/python: ")


# -- handlers ----------------------------------------------------------------------------


def test_handler_result_is_stored_apart_from_its_output(handler: Callable[..., Result]) -> None:
    result = handler("report")
    assert (result.outcome, result.exit_code, result.error) == (
        AttemptOutcome.SUCCEEDED, 0, None)
    assert result.result == {"rows": 3, "names": ["a", "b"]}
    assert result.output_tail == "working on events\na warning\n"


def test_handler_receives_its_context(handler: Callable[..., Result]) -> None:
    assert handler("context").result == {
        "run_id": 42, "job": "nightly", "attempt": 2,
        "scheduled_for": "2024-05-01T03:00:00+00:00",
        "payload": {"table": "events", "days": 30},
        "key": "nightly@2024-05-01T03:00:00+00:00", "type": "JobContext",
        "env": ["42", "nightly"],
    }


def test_a_spec_too_large_for_a_request_to_fork_takes_a_fresh_interpreter(
        app_env: dict[str, str], monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(app_env["PYTHONPATH"])  # the apps are found here, either way
    # (escaped twice in the spec, the padding makes it larger than one request can be)
    large = JobContext(run_id=42, job="nightly", attempt=2, scheduled_for=CONTEXT.scheduled_for,
                       payload={"table": "events", "padding": '"' * 60_000})
    template = Template(("myjobs",))
    try:
        assert template.wait_ready(SAFETY)
        runs = [start(Work(context=context, kind="handler", command=None, handler="report",
                           apps=("myjobs",)), template=template)
                for context in (large, CONTEXT)]
        assert [isinstance(r._process, TemplateChild) for r in runs] == [False, True]
        results = [_finish(r) for r in runs]
        assert [(r.outcome, r.result, r.output_tail) for r in results] == [(
            AttemptOutcome.SUCCEEDED, {"rows": 3, "names": ["a", "b"]},
            "working on events\na warning\n")] * 2
    finally:
        template.close()


def test_output_never_passes_for_the_result(handler: Callable[..., Result]) -> None:
    result = handler("nothing")
    assert (result.outcome, result.result) == (AttemptOutcome.SUCCEEDED, None)
    assert result.output_tail == '{"ok": false, "error": "not the result channel"}\n'


def test_handler_exception_fails_with_its_last_line(handler: Callable[..., Result]) -> None:
    result = handler("bad_input")
    assert (result.outcome, result.exit_code, result.error) == (
        AttemptOutcome.FAILED, 1, "ValueError: bad input")
    assert result.output_tail.startswith("Traceback (most recent call last):\n")
    assert result.output_tail.endswith('    raise ValueError("bad input")\n'
                                       "ValueError: bad input\n")
    assert "cronjobs/execution/processes/handler.py" not in result.output_tail


def test_handler_exception_error_is_one_line(handler: Callable[..., Result]) -> None:
    result = handler("oops")
    assert result.error == "myjobs.Oops: first line"
    assert result.output_tail.endswith("myjobs.Oops: first line\nsecond line\n")


def test_handler_ignoring_sigterm_is_killed_on_timeout(handler: Callable[..., Result]) -> None:
    # 2s: time enough for the interpreter to start and the handler to ignore SIGTERM
    result = handler("stubborn", timeout=2, kill_grace=0.5)
    assert (result.outcome, result.exit_code, result.error) == (
        AttemptOutcome.TIMED_OUT, None, "timed out after 2s (SIGTERM, then SIGKILL after 0.5s)")


def test_handler_timeout(handler: Callable[..., Result]) -> None:
    result = handler("sleepy", timeout=1, kill_grace=5)
    assert (result.outcome, result.exit_code, result.error) == (
        AttemptOutcome.TIMED_OUT, None, "timed out after 1s")


def test_stopped_handler_shows_where_it_was(app_env: dict[str, str]) -> None:
    running = start(Work(context=CONTEXT, kind="handler", command=None, handler="sleepy",
                         apps=("myjobs",), env=app_env))
    wait_for(lambda: Path(app_env["READY"]).exists(), "the handler is sleeping", 15)
    running.stop(AttemptOutcome.CANCELLED, "cancelled")
    result = _finish(running)
    assert (result.outcome, result.exit_code, result.error) == (
        AttemptOutcome.CANCELLED, None, "cancelled")
    assert result.output_tail.startswith("cronjobs: the handler got SIGTERM while at:\n")
    assert result.output_tail.endswith("in sleepy\n    time.sleep(60)\n")


def test_handler_exiting_hard_fails_with_the_code(handler: Callable[..., Result]) -> None:
    result = handler("exit7")
    assert (result.outcome, result.exit_code, result.error) == (
        AttemptOutcome.FAILED, 7, "exit code 7")
    assert result.output_tail == "about to leave\n"  # printed before os._exit: not lost
    assert handler("sys_exit").error == "exit code 3"


def test_handler_crash_fails_with_the_signal(handler: Callable[..., Result]) -> None:
    result = handler("segfault")
    assert (result.outcome, result.exit_code, result.error) == (
        AttemptOutcome.FAILED, None, "killed by signal SIGSEGV")
    assert "Fatal Python error: Segmentation fault" in result.output_tail
    assert re.search(r'myjobs.py", line \d+ in segfault', result.output_tail)


def test_unregistered_handler(handler: Callable[..., Result]) -> None:
    result = handler("missing")
    names = ("a_set, bad_input, context, exit7, huge, nothing, oops, report, segfault, "
             "sleepy, stubborn, sys_exit")
    message = f"handler 'missing' is not registered by --app modules (registered: {names})"
    assert (result.outcome, result.exit_code, result.error) == (
        AttemptOutcome.FAILED, 1, message)
    assert result.output_tail == f"cronjobs: {message}\n"
    assert handler("report", apps=()).error == (
        "handler 'report' is not registered by --app modules (registered: none)")


def test_app_that_cannot_be_imported(handler: Callable[..., Result]) -> None:
    result = handler("report", apps=("broken", "myjobs"))
    assert (result.outcome, result.exit_code, result.error) == (
        AttemptOutcome.FAILED, 1, "cannot import --app module 'broken': RuntimeError: no config")
    assert result.output_tail.endswith("RuntimeError: no config\n")
    missing = handler("report", apps=("no_such_module",))
    assert missing.error == ("cannot import --app module 'no_such_module': "
                             "ModuleNotFoundError: No module named 'no_such_module'")


def test_result_that_is_not_json_is_kept_as_repr(handler: Callable[..., Result]) -> None:
    result = handler("a_set")
    assert (result.outcome, result.result) == (AttemptOutcome.SUCCEEDED, {"repr": "{1, 2}"})


def test_result_too_large_is_dropped(handler: Callable[..., Result]) -> None:
    result = handler("huge")
    assert (result.outcome, result.exit_code, result.error, result.result) == (
        AttemptOutcome.SUCCEEDED, 0, None, None)
    assert result.output_tail == ("cronjobs: the handler's result was dropped: 100002 bytes "
                                  "of JSON exceed the limit of 65536 bytes\n")
    assert handler("huge", result_limit=200_000).result == "x" * 100_000


# -- the watchdog and the parent-death signal -----------------------------------------------

TICK = """
import datetime as dt, sys, time
from cronjobs.execution.context import JobContext
from cronjobs.execution.runners import Work
from cronjobs.execution.runners.dispatch import start
from cronjobs.execution.watchdog import Watchdog
watchdog = Watchdog.start() if sys.argv[2] == "watchdog" else None
context = JobContext(1, "long", dt.datetime(2024, 1, 1, tzinfo=dt.UTC), 1, {})
running = start(Work(context=context, kind="command", command=sys.argv[1], handler=None),
                watchdog)
print(running.pid, watchdog.pid if watchdog else 0, flush=True)
while running.poll() is None:
    time.sleep(0.05)
"""


@pytest.fixture
def tick() -> Iterator[Callable[[str, str], tuple[int, int]]]:
    """Start a tick-like process running one command; yields (job pgid, watchdog pid)."""
    started: list[subprocess.Popen[str]] = []

    def run(cmd: str, mode: str) -> tuple[int, int]:
        process = subprocess.Popen([sys.executable, "-c", TICK, cmd, mode],
                                   stdout=subprocess.PIPE, text=True)
        started.append(process)
        assert process.stdout is not None
        job, watchdog = map(int, process.stdout.readline().split())
        wait_for(lambda: len(group_members(job)) >= 3, "the job's processes started", 15)
        process.kill()  # kill -9: no cleanup of any kind
        process.wait()
        return job, watchdog

    yield run
    for process in started:
        if process.poll() is None:
            process.kill()
            process.wait()


def test_watchdog_kills_the_jobs_of_a_killed_tick(
        tick: Callable[[str, str], tuple[int, int]]) -> None:
    job, watchdog = tick("sleep 300 & sleep 300 & wait", "watchdog")
    wait_for(lambda: not group_members(job), f"process group {job} is gone", 15)
    wait_for(lambda: not alive(watchdog), "the watchdog exited", 15)


def test_parent_death_signal_kills_the_job_without_a_watchdog(
        tick: Callable[[str, str], tuple[int, int]]) -> None:
    # Only the job's main process has the parent-death signal; its children need the watchdog.
    job, _ = tick("sleep 300 & sleep 300 & exec sleep 300", "none")
    wait_for(lambda: not alive(job), "the job's main process is gone", 15)
    for pid in group_members(job):
        os.kill(pid, signal.SIGKILL)


def test_watchdog_closes_cleanly() -> None:
    alone = subprocess.Popen(["sleep", "300"], start_new_session=True)
    watched = subprocess.Popen(["sleep", "300"], start_new_session=True)
    try:
        watchdog = Watchdog.start()
        assert watchdog.pid is not None
        assert os.getsid(watchdog.pid) == watchdog.pid  # its own session, not the tick's group
        watchdog.watch(alone.pid)
        watchdog.forget(alone.pid)
        watchdog.watch(watched.pid)
        watchdog.close()
        watchdog.close()
        watchdog.watch(123)  # after close: ignored
        assert watched.wait(SAFETY) == -signal.SIGKILL  # still watched at close: killed
        assert alone.poll() is None  # forgotten: left alone
        assert not alive(watchdog.pid)
    finally:
        for process in (alone, watched):
            process.kill()
            process.wait()


def test_runner_forgets_finished_jobs() -> None:
    with Watchdog.start() as watchdog:
        result = _finish(start(Work(context=CONTEXT, kind="command", command="true",
                                    handler=None), watchdog))
        assert result.outcome == AttemptOutcome.SUCCEEDED
        assert watchdog.pid is not None and alive(watchdog.pid)



def test_a_job_does_not_inherit_the_ticks_other_files(tmp_path: Path) -> None:
    # what the tick's own parent left open (inheritable) is not passed on, however the
    # job was started (posix_spawn with a watchdog, Popen without)
    fd = os.open(tmp_path / "held", os.O_CREAT | os.O_WRONLY)
    os.set_inheritable(fd, True)
    # a tick looks once, at its first job, for what it inherited at its start; this process
    # has started jobs before
    close_inherited.cache_clear()
    try:
        cmd = f"if [ -e /proc/$$/fd/{fd} ]; then echo inherited; else echo closed; fi"
        assert command(cmd).output_tail == "closed\n"
        with Watchdog.start() as watchdog:
            result = _finish(start(Work(context=CONTEXT, kind="command", command=cmd,
                                        handler=None), watchdog))
        assert result.output_tail == "closed\n"
    finally:
        os.close(fd)
