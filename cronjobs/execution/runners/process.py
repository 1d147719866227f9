"""Run one attempt of a job in its own process group: real timeouts, a bounded output tail,
no orphans.

The runners that start a process (:mod:`.shell`, :mod:`.forked`, :mod:`.interpreter`) return
a :class:`Running`, which the executor polls from its loop; the database side (leases,
heartbeats, fencing) is the caller's. Nothing here blocks the caller except
:meth:`Running.wait`, and starting a handler while a template process forks its child (for
its first one, while it imports the app: at most a few seconds, then the run takes a fresh
interpreter).

How a job runs
    A command runs as ``/bin/sh -c COMMAND`` (as cron runs it, no Python in between),
    started with ``posix_spawn`` (a vfork and an exec) when a watchdog fences it. A handler
    runs in a child forked from the tick's template process (see
    :mod:`.template`), or, without one, in a fresh interpreter,
    ``python -m cronjobs.execution.processes.handler``; either
    imports the ``--app`` modules and calls the handler with a
    :class:`~cronjobs.execution.context.JobContext`. Either way the process gets the caller's
    environment (or ``Work.env``) plus ``CRONJOBS_RUN_ID``, ``CRONJOBS_JOB``,
    ``CRONJOBS_SCHEDULED_FOR``, ``CRONJOBS_ATTEMPT`` and ``CRONJOBS_PAYLOAD``; stdin is
    ``/dev/null``; stdout and stderr share one pipe that a thread drains in 64 KiB reads,
    keeping only the last ``output_limit`` bytes, so memory stays bounded whatever the job
    prints. A handler's return value comes back over a separate pipe, never mixed with the
    output.

Process groups
    Every job is the leader of a new session and process group, and every signal goes to the
    whole group, so ``sh -c "a & b"`` is stopped as a whole. A timeout or :meth:`Running.stop`
    sends SIGTERM to the group, then SIGKILL ``kill_grace`` seconds later if the job has not
    exited. When the job's main process exits, the attempt is over: whatever it left running
    in its group gets SIGTERM, then SIGKILL after ``kill_grace``, before the result is
    reported, so that a retry or the next run never overlaps leftovers of this one.
    (Processes that detach into a session of their own are outside any supervision.)

Dying with the tick
    A :class:`Watchdog` process kills every group the tick still watched if the tick dies
    (``kill -9``, the OOM killer), and so does the tick's template process, which gets the
    same messages: a job dies unless the tick, its watchdog and its template all die at
    once. A handler forked from the template also has ``PR_SET_PDEATHSIG = SIGKILL``
    towards it. When no watchdog could be started, the job's main process gets
    ``PR_SET_PDEATHSIG = SIGKILL`` (Linux) towards the tick instead. Note that Linux sends
    the parent-death signal when the *thread* that started the job ends: call
    start jobs from a thread that lives as long as them (the tick's main thread).

Outcomes
    exit 0: SUCCEEDED; exit N: FAILED ``exit code N`` (for a handler that raised, the
    exception's last traceback line, ``ValueError: bad input``); killed by a signal: FAILED
    ``killed by signal SIGSEGV``. Once a timeout or a stop was requested while the job ran,
    the result has that outcome (TIMED_OUT, or whatever :meth:`Running.stop` asked for),
    however the job then ended. A handler result larger than ``result_limit`` bytes of JSON
    is dropped (``result`` is None, the attempt still succeeds, the output says why); one
    that is not JSON is kept as ``{"repr": "..."}``. NUL characters in the output become
    U+FFFD, as undecodable bytes do (PostgreSQL text cannot hold NUL).
"""


from __future__ import annotations

import contextlib
import fcntl
import functools
import logging
import os
import signal
import subprocess
import threading
import time
from collections.abc import Mapping, Sequence
from typing import Any, Protocol

from cronjobs.durations import format_duration
from cronjobs.execution.runners import Result, Work
from cronjobs.execution.runners.groups import (
    die_with_parent,
    group_alive,
    live_members,
    signal_group,
    signal_name,
    terminate_group,
)
from cronjobs.execution.runners.output import Pump
from cronjobs.execution.watchdog import Watchdog
from cronjobs.models import AttemptOutcome, Kind

log = logging.getLogger(__name__)

PIPE_SIZE = 1024 * 1024  # asked-for capacity of the output pipe, so a busy tick never stalls a job
DRAIN = 1.0  # seconds to keep reading output once the job's group is gone
SETTLE = 2.0  # seconds to wait for SIGKILLed leftovers to vanish before giving up on them
ERROR_CHARS = 1000  # longest error line reported


def _one_line(text: str) -> str:
    stripped = text.strip()
    line = stripped.splitlines()[0] if stripped else ""
    line = line.replace("\x00", "\ufffd")
    return line if len(line) <= ERROR_CHARS else line[: ERROR_CHARS - 3] + "..."


# -- a running attempt --------------------------------------------------------------------


class Main(Protocol):
    """A job's main process: a child of the tick, or of its template process."""

    @property
    def pid(self) -> int: ...

    def exited(self) -> bool:
        """Whether it exited (a child of the tick stays unreaped: it keeps the group id)."""

    def status(self) -> int:
        """Once exited: its exit code, or minus the signal that killed it."""

    def lost(self) -> str | None:
        """Why its exit status is unknown (its template process died), else None."""


class Spawned:
    """A command started by the tick itself with ``posix_spawn``."""

    def __init__(self, pid: int) -> None:
        self.pid = pid
        self._status: int | None = None

    def exited(self) -> bool:
        if self._status is not None:
            return True
        return os.waitid(os.P_PID, self.pid, os.WEXITED | os.WNOHANG | os.WNOWAIT) is not None

    def status(self) -> int:
        if self._status is None:
            _, status = os.waitpid(self.pid, 0)
            self._status = os.waitstatus_to_exitcode(status)
        return self._status

    def lost(self) -> str | None:
        return None


class Popened:
    """A job started by the tick itself."""

    def __init__(self, process: subprocess.Popen[bytes]) -> None:
        self._process = process
        self.pid = process.pid

    def exited(self) -> bool:
        try:
            info = os.waitid(os.P_PID, self.pid, os.WEXITED | os.WNOHANG | os.WNOWAIT)
        except ChildProcessError:
            return True  # already reaped: Popen.wait() knows its status
        return info is not None

    def status(self) -> int:
        return self._process.wait()

    def lost(self) -> str | None:
        return None


class Running:
    """One attempt in progress. Drive it with :meth:`poll` (non-blocking, enforces the
    timeout and the kill grace) until it returns the :class:`Result`. Use it from one thread.
    """

    abandoned = False  # a job in a process of its own is always stopped, never left behind

    def __init__(self, work: Work, process: Main | None, pump: Pump | None,
                 watchdog: Watchdog | None, started: float, failure: str | None = None) -> None:
        self.work = work
        self._process = process
        self._pump = pump
        self._watchdog = watchdog
        self._started = started
        self._stop: tuple[AttemptOutcome, str] | None = None
        self._timed_out = False
        self._term_at: float | None = None  # when SIGTERM went to the group
        self._kill_at: float | None = None  # when SIGKILL went to the group
        self._killed_running = False  # SIGKILL was needed before the main process exited
        self._returncode: int | None = None  # set once the main process is reaped
        self._ended: float | None = None
        self._group_gone_at: float | None = None
        self._result: Result | None = None
        if failure is not None:
            self._result = Result(AttemptOutcome.FAILED, None, _one_line(failure), "", None, 0.0)

    @property
    def pid(self) -> int:
        """The job's main process, also its process group and session id (0 if not started)."""
        return self._process.pid if self._process is not None else 0

    def poll(self) -> Result | None:
        """The result once the attempt is over, else None. Call it often (every 0.05-0.5 s):
        it also sends the signals a timeout or a stop calls for."""
        if self._result is not None:
            return self._result
        process, pump = self._process, self._pump
        assert process is not None and pump is not None  # noqa: S101 - set unless failed
        now = time.monotonic()
        if self._returncode is None:
            if not self._main_exited():
                self._enforce(now)
                return None
            self._ended = now
            self._returncode = process.status()
            # Reaped, the main pid stays reserved by the kernel for as long as anything
            # left in its group lives on (it is their group id), so signals sent to the
            # group from here on can only reach leftovers of this job.
            if group_alive(self.pid):
                if self._term_at is None:
                    terminate_group(self.pid)
                    self._term_at = now
            else:
                self._group_gone(now)
        if self._group_gone_at is None:
            if not self._leftovers_settled(now):
                return None
            self._group_gone(now)
        if not pump.finished:
            assert self._group_gone_at is not None  # noqa: S101
            if now < self._group_gone_at + DRAIN:
                return None  # something outside the group may still hold the pipe
            pump.stop()
            if not pump.finished:
                return None
        self._result = self._build(pump)
        return self._result

    def live_output(self) -> tuple[str, int] | None:
        """The output so far and the bytes printed so far, while the job runs."""
        return None if self._pump is None else self._pump.output.snapshot()

    def stop(self, outcome: AttemptOutcome, reason: str) -> None:
        """Ask the job to stop: SIGTERM to its group now, SIGKILL ``kill_grace`` seconds later
        (sent by a later :meth:`poll` or :meth:`wait`). The result will have ``outcome`` and
        ``reason`` as its error. Does nothing when the job has already ended or was already
        asked to stop (the first request wins)."""
        if self._result is not None or self._stop is not None or self._returncode is not None:
            return
        if self._main_exited():
            return  # it finished on its own: that result stands
        self._request_stop(outcome, reason, time.monotonic())

    def wait(self, timeout: float | None = None) -> Result | None:
        """Poll until the result is there (None if ``timeout`` seconds pass first)."""
        deadline = None if timeout is None else time.monotonic() + timeout
        pause = 0.002
        while True:
            result = self.poll()
            if result is not None:
                return result
            now = time.monotonic()
            if deadline is not None and now >= deadline:
                return None
            time.sleep(pause if deadline is None else min(pause, deadline - now))
            pause = min(pause * 2, 0.05)

    # -- internals ------------------------------------------------------------------------

    def _main_exited(self) -> bool:
        """Whether the main process exited (a child of the tick is not reaped yet)."""
        assert self._process is not None  # noqa: S101 - set unless failed
        return self._process.exited()

    def _request_stop(self, outcome: AttemptOutcome, reason: str, now: float) -> None:
        self._stop = (outcome, reason)
        terminate_group(self.pid)
        self._term_at = now
        self._enforce(now)

    def _enforce(self, now: float) -> None:
        """While the main process runs: the timeout, then SIGKILL after the grace."""
        timeout = self.work.timeout
        if self._stop is None and timeout is not None and now - self._started >= timeout:
            self._timed_out = True
            self._request_stop(AttemptOutcome.TIMED_OUT,
                               f"timed out after {format_duration(timeout)}", now)
            return
        if (self._term_at is not None and self._kill_at is None
                and now >= self._term_at + self.work.kill_grace):
            signal_group(self.pid, signal.SIGKILL)
            self._kill_at = now
            self._killed_running = True

    def _leftovers_settled(self, now: float) -> bool:
        """After the main process exited: whether its group is empty (or given up on)."""
        if not group_alive(self.pid):
            return True
        if self._kill_at is None:
            if self._term_at is None:
                terminate_group(self.pid)
                self._term_at = now
            if now >= self._term_at + self.work.kill_grace:
                signal_group(self.pid, signal.SIGKILL)
                self._kill_at = now
            return False
        if now < self._kill_at + SETTLE:
            return False
        log.warning("processes %s of job %s survived SIGKILL", live_members(self.pid),
                    self.work.context.job)
        return True

    def _group_gone(self, now: float) -> None:
        self._group_gone_at = now
        if self._watchdog is not None:
            self._watchdog.forget(self.pid)

    def _build(self, pump: Pump) -> Result:
        code = self._returncode
        assert code is not None and self._ended is not None  # noqa: S101
        duration = self._ended - self._started
        envelope = pump.envelope() if self.work.kind == Kind.HANDLER else None
        note = None
        if pump.result_overflow:
            note = (f"cronjobs: the handler's result was dropped: more than "
                    f"{self.work.result_limit} bytes")
        output = pump.output.text(note)
        exit_code = code if code >= 0 else None
        result: Any = None
        lost = self._process.lost() if self._process is not None else None
        if self._stop is not None:
            outcome, error = self._stop
            if self._timed_out and self._killed_running:
                error += (f" (SIGTERM, then SIGKILL after "
                          f"{format_duration(self.work.kill_grace)})")
        elif lost is not None:
            outcome, error, exit_code = AttemptOutcome.FAILED, lost, None
        elif code < 0:
            outcome, error = AttemptOutcome.FAILED, f"killed by signal {signal_name(-code)}"
        elif code != 0:
            outcome, error = AttemptOutcome.FAILED, f"exit code {code}"
            if envelope is not None and isinstance(envelope.get("error"), str):
                error = _one_line(envelope["error"]) or error
        else:
            outcome, error = AttemptOutcome.SUCCEEDED, None
            if envelope is not None:
                result = envelope.get("result")
        return Result(outcome, exit_code, error, output, result, duration)


# -- starting -------------------------------------------------------------------------------


def grow_pipe(fd: int) -> None:
    with contextlib.suppress(OSError, AttributeError):  # else the default 64 KiB
        fcntl.fcntl(fd, fcntl.F_SETPIPE_SZ, PIPE_SIZE)


def close(*fds: int | None) -> None:
    for fd in fds:
        if fd is not None:
            os.close(fd)


def _encoded(env: Mapping[str, str]) -> dict[bytes, bytes]:
    return {os.fsencode(k): os.fsencode(v) for k, v in env.items()}


@functools.lru_cache(maxsize=1)
def _base_environment() -> dict[bytes, bytes]:
    """The tick's environment, encoded once: it does not change while a tick runs."""
    return dict(os.environb)


def environment(work: Work) -> dict[bytes, bytes]:
    """The job's environment: the tick's (or ``Work.env``) and the run's ``CRONJOBS_*``."""
    env = dict(_base_environment() if work.env is None else _encoded(work.env))
    env.update(_encoded(work.context.environment()))
    return env


def popen(work: Work, argv: Sequence[str], watchdog: Watchdog | None,
          deadline: float | None, wake: threading.Event | None, *,
          result_pipe: tuple[int, int] | None = None, spec: bytes = b"") -> Running:
    """Start ``argv`` for ``work`` with ``subprocess.Popen``: a session of its own, /dev/null
    (or ``spec``, fed by the pump) in, the output pipe out, the write end of
    ``result_pipe`` passed on. Without a watchdog the parent-death signal is the only
    guard against outliving a killed tick. With one, it is left out: a preexec function
    rules out vfork, and forking the whole tick for every job costs more than the job
    (`true`) itself; the watchdog and the template process fence the job instead."""
    env = environment(work)
    channel_r, channel_w = result_pipe if result_pipe is not None else (None, None)
    spec_r, spec_w = os.pipe() if spec else (None, None)
    output_r, output_w = os.pipe()
    grow_pipe(output_w)
    guarded = watchdog is not None and watchdog.pid is not None
    started = time.monotonic()
    try:
        process = subprocess.Popen(
            argv,
            stdin=spec_r if spec_r is not None else subprocess.DEVNULL,
            stdout=output_w,
            stderr=output_w,
            pass_fds=() if channel_w is None else (channel_w,),
            start_new_session=True,
            # only a prctl() call: safe after fork even with other threads around
            preexec_fn=(None if guarded  # noqa: PLW1509
                        else functools.partial(die_with_parent, os.getpid())),
            env=env,
        )
    except (OSError, subprocess.SubprocessError) as exc:
        close(output_r, output_w, channel_r, channel_w, spec_r, spec_w)
        return Running(work, None, None, None, started,
                       failure=f"could not start {argv[0]}: {exc}")
    close(output_w, channel_w, spec_r)
    if watchdog is not None:
        watchdog.watch(process.pid, deadline)
    pump = Pump(output_r, work.output_limit, channel_r, work.result_limit, spec_w, spec,
                pid=process.pid, wake=wake)
    pump.start()
    return Running(work, Popened(process), pump, watchdog, started)
