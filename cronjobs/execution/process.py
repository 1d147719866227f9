"""Run one attempt of a job in its own process group: real timeouts, a bounded output tail,
no orphans.

The tick calls :func:`start` for each claimed run and then :meth:`Running.poll` from its
loop; the database side (leases, heartbeats, fencing) is the caller's. Nothing here
blocks the caller except :meth:`Running.wait`.

How a job runs
    A command runs as ``/bin/sh -c COMMAND`` (as cron runs it, no Python in between); a
    handler runs in a fresh interpreter, ``python -m cronjobs.execution.child`` (see
    :mod:`cronjobs.child`), which imports the ``--app`` modules and calls the handler with
    a :class:`~cronjobs.context.JobContext`. Either way the process gets the caller's
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
    (``kill -9``, the OOM killer). When no watchdog could be started, the job's main
    process gets ``PR_SET_PDEATHSIG = SIGKILL`` (Linux) instead. Note that Linux sends the
    parent-death signal when the *thread* that started the job ends: call :func:`start`
    from a thread that lives as long as the job (the tick's main thread).

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
import ctypes
import datetime as dt
import fcntl
import functools
import json
import logging
import os
import queue
import selectors
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from types import TracebackType
from typing import IO, Any

from cronjobs.core.durations import format_duration
from cronjobs.execution.context import JobContext
from cronjobs.models import AttemptOutcome

log = logging.getLogger(__name__)

CHUNK = 64 * 1024  # bytes per read of a job's output
PIPE_SIZE = 1024 * 1024  # asked-for capacity of the output pipe, so a busy tick never stalls a job
RESULT_SLACK = 4096  # bytes of envelope allowed around a handler's result
DRAIN = 1.0  # seconds to keep reading output once the job's group is gone
SETTLE = 2.0  # seconds to wait for SIGKILLed leftovers to vanish before giving up on them
ERROR_CHARS = 1000  # longest error line reported

KINDS = ("command", "handler")


@dataclass(frozen=True)
class Work:
    """One attempt to run: what to run, for which run, and within which limits."""

    context: JobContext
    kind: str  # "command" | "handler"
    command: str | None
    handler: str | None
    apps: tuple[str, ...] = ()  # modules to import in the child so that handlers register
    timeout: float | None = None  # seconds; None for no timeout
    kill_grace: float = 10.0  # seconds between SIGTERM and SIGKILL
    output_limit: int = 64 * 1024  # bytes of output kept (the tail)
    result_limit: int = 64 * 1024  # bytes of a handler's JSON result kept; bigger is dropped
    env: Mapping[str, str] | None = None  # base environment; None for os.environ

    def __post_init__(self) -> None:
        if self.kind not in KINDS:
            raise ValueError(f"kind must be 'command' or 'handler', not {self.kind!r}")
        if self.kind == "command" and not self.command:
            raise ValueError("a command job needs a command")
        if self.kind == "handler" and not self.handler:
            raise ValueError("a handler job needs a handler name")
        if self.timeout is not None and not self.timeout > 0:
            raise ValueError(f"timeout must be positive or None, not {self.timeout!r}")
        if not self.kill_grace >= 0:
            raise ValueError(f"kill_grace must not be negative, not {self.kill_grace!r}")
        if self.output_limit < 0 or self.result_limit < 0:
            raise ValueError("output_limit and result_limit must not be negative")


@dataclass(frozen=True)
class Result:
    """How one attempt ended."""

    outcome: AttemptOutcome
    exit_code: int | None  # the main process's exit code; None when killed by a signal
    error: str | None  # one line for people; None on success
    output_tail: str  # the last output_limit bytes of stdout+stderr, as text
    result: Any  # a handler's JSON-ready return value; None for commands and failures
    duration: float  # seconds from start to the exit of the main process


# -- dying with the parent --------------------------------------------------------------

_PR_SET_PDEATHSIG = 1


def _load_prctl() -> Callable[..., int] | None:
    if not sys.platform.startswith("linux"):
        return None
    try:
        prctl = ctypes.CDLL(None, use_errno=True).prctl
    except (OSError, AttributeError):
        return None
    prctl.argtypes = [ctypes.c_int, ctypes.c_ulong, ctypes.c_ulong, ctypes.c_ulong,
                      ctypes.c_ulong]
    prctl.restype = ctypes.c_int
    return prctl


_PRCTL = _load_prctl()  # resolved here, so the forked child only makes the call


def _die_with_parent(parent: int) -> None:
    """In the forked child, before exec: SIGKILL when the parent dies. Must not raise."""
    if _PRCTL is None:
        return
    _PRCTL(_PR_SET_PDEATHSIG, int(signal.SIGKILL), 0, 0, 0)
    if os.getppid() != parent:  # the parent died before the call: nobody to outlive
        os._exit(255)


# -- the output pump ----------------------------------------------------------------------


class Tail:
    """The last ``limit`` bytes of a job's output; memory stays under ``2 * limit + chunk``
    whatever the job prints. Shared by both ways of running a job."""

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self.data = bytearray()
        self.total = 0  # bytes seen

    def keep(self, data: bytes) -> None:
        self.total += len(data)
        limit = self.limit
        if limit == 0:
            return
        if len(data) >= limit:
            self.data[:] = data[-limit:]
            return
        self.data += data
        if len(self.data) > 2 * limit:
            del self.data[: len(self.data) - limit]

    def text(self, note: str | None = None) -> str:
        """The tail as text, with ``note`` (from the runner) as its last line."""
        data = bytes(self.data)
        total = self.total
        if note:
            line = (b"\n" if data and not data.endswith(b"\n") else b"") + note.encode() + b"\n"
            data += line
            total += len(line)
        limit = self.limit
        if len(data) > limit:
            data = data[len(data) - limit:] if limit else b""
        if total > len(data):  # cut: start at a character boundary
            skip = 0
            while skip < min(3, len(data)) and data[skip] & 0xC0 == 0x80:
                skip += 1
            data = data[skip:]
        return data.decode("utf-8", errors="replace").replace("\x00", "\ufffd")


class Workers:
    """Daemon threads that are reused: a new one is started only when none is idle (a
    thread blocked for good — an abandoned handler — simply never comes back)."""

    def __init__(self, name: str) -> None:
        self._name = name
        self._work: queue.SimpleQueue[Callable[[], None]] = queue.SimpleQueue()
        self._idle = 0
        self._lock = threading.Lock()

    def submit(self, task: Callable[[], None]) -> None:
        with self._lock:
            spawn = self._idle == 0
            if not spawn:
                self._idle -= 1
        self._work.put(task)
        if spawn:
            threading.Thread(target=self._serve, name=self._name, daemon=True).start()

    def _serve(self) -> None:
        while True:
            task = self._work.get()
            try:
                task()
            except Exception:  # a task reports its own failures; the thread must go on
                log.exception("a %s task failed", self._name)
            with self._lock:
                self._idle += 1


_PUMPS = Workers("cronjobs-pump")


class _Pump:
    """A thread moving bytes between the tick and one job: the spec in, output and result out.

    Memory is bounded: at most ``2 * output_limit + CHUNK`` bytes of output and
    ``result_limit + RESULT_SLACK`` bytes of result are held.
    """

    def __init__(self, output: int, output_limit: int,
                 channel: int | None, result_limit: int,
                 spec_fd: int | None, spec: bytes, *, pid: int = 0,
                 wake: threading.Event | None = None) -> None:
        self.output = Tail(output_limit)
        self.result_limit = result_limit + RESULT_SLACK
        self.result = bytearray()
        self.result_overflow = False
        self._fds = {output: "out"}
        if channel is not None:
            self._fds[channel] = "result"
        if spec_fd is not None:
            os.set_blocking(spec_fd, False)
            self._fds[spec_fd] = "spec"
        self._spec = memoryview(spec)
        self._stopping = threading.Event()
        self._done = threading.Event()  # every fd reached its end (or reading was stopped)
        self._pid = pid
        self._wake = wake

    def start(self) -> None:
        _PUMPS.submit(self._run)

    @property
    def finished(self) -> bool:
        return self._done.is_set()

    def stop(self) -> None:
        """Stop reading (what is still unread is dropped); the thread ends within 0.25 s."""
        self._stopping.set()

    def _run(self) -> None:
        selector = selectors.DefaultSelector()
        try:
            for fd, role in self._fds.items():
                events = selectors.EVENT_WRITE if role == "spec" else selectors.EVENT_READ
                selector.register(fd, events, role)
            while selector.get_map() and not self._stopping.is_set():
                for key, _events in selector.select(0.25):
                    if not self._move(key.fd, key.data):
                        selector.unregister(key.fd)
                        os.close(key.fd)
        except Exception:  # never expected; the job still gets a result, minus output
            log.exception("reading the output of a job failed")
        finally:
            for key in list(selector.get_map().values()):
                selector.unregister(key.fd)
                os.close(key.fd)
            selector.close()
            self._done.set()
        self._signal_exit()

    def _signal_exit(self) -> None:
        """Once the output ended (usually: the job exited), wait for the main process to
        exit — without reaping it — and wake the tick, so a finished job is noticed at once
        rather than on the tick's next poll."""
        if self._wake is None:
            return
        if self._pid:
            with contextlib.suppress(ChildProcessError, OSError):
                os.waitid(os.P_PID, self._pid, os.WEXITED | os.WNOWAIT)
        self._wake.set()

    def _move(self, fd: int, role: str) -> bool:
        """Move one chunk; False when this fd is done."""
        if role == "spec":
            try:
                sent = os.write(fd, self._spec[:CHUNK])
            except BlockingIOError:
                return True
            except OSError:  # the child is gone or closed stdin
                return False
            self._spec = self._spec[sent:]
            return len(self._spec) > 0
        try:
            data = os.read(fd, CHUNK)
        except BlockingIOError:
            return True
        except OSError:
            return False
        if not data:
            return False
        if role == "out":
            self.output.keep(data)
        else:
            self._keep_result(data)
        return True

    def _keep_result(self, data: bytes) -> None:
        if self.result_overflow:
            return  # keep draining, so the child never blocks on a full pipe
        if len(self.result) + len(data) > self.result_limit:
            self.result_overflow = True
            self.result.clear()
            return
        self.result += data

    def envelope(self) -> dict[str, Any] | None:
        """The handler's envelope, or None when it sent none (or a broken one)."""
        if self.result_overflow or not self.result:
            return None
        try:
            value = json.loads(bytes(self.result))
        except ValueError:
            return None
        return value if isinstance(value, dict) else None

# -- process groups -----------------------------------------------------------------------


def _live_members(pgid: int) -> list[int] | None:
    """Processes of group ``pgid`` that are alive (zombies excluded); None without /proc."""
    try:
        names = os.listdir("/proc")
    except OSError:
        return None
    found: list[int] = []
    for name in names:
        if not name.isdigit():
            continue
        try:
            with open(f"/proc/{name}/stat", "rb") as stat:
                line = stat.read()
        except OSError:
            continue  # exited meanwhile
        fields = line[line.rfind(b")") + 2:].split(b" ", 4)
        if len(fields) < 4 or fields[0] in (b"Z", b"X"):
            continue
        if int(fields[2]) == pgid:
            found.append(int(name))
    return found


def _group_alive(pgid: int) -> bool:
    """Whether any process of group ``pgid`` is alive (zombies excluded). One system call
    in the usual case, an empty group; /proc is read only when something is left."""
    try:
        os.killpg(pgid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True  # a member changed its user (setuid): alive, and not ours to signal
    members = _live_members(pgid)
    return members is None or bool(members)


def _signal_group(pgid: int, signum: int) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pgid, signum)


def _terminate_group(pgid: int) -> None:
    """SIGTERM, plus SIGCONT so that stopped processes get to handle it (as systemd does)."""
    _signal_group(pgid, signal.SIGTERM)
    _signal_group(pgid, signal.SIGCONT)


def _signal_name(signum: int) -> str:
    try:
        return signal.Signals(signum).name
    except ValueError:
        return f"signal {signum}"


def seconds_text(value: float) -> str:
    """Compact duration: 2s, 90s → 1m30s, 0.5s."""
    if value >= 1 and value == int(value):
        return format_duration(dt.timedelta(seconds=value))
    return f"{value:g}s"


def _one_line(text: str) -> str:
    stripped = text.strip()
    line = stripped.splitlines()[0] if stripped else ""
    line = line.replace("\x00", "\ufffd")
    return line if len(line) <= ERROR_CHARS else line[: ERROR_CHARS - 3] + "..."


# -- a running attempt --------------------------------------------------------------------


class Running:
    """One attempt in progress. Drive it with :meth:`poll` (non-blocking, enforces the
    timeout and the kill grace) until it returns the :class:`Result`. Use it from one thread.
    """

    abandoned = False  # a job in a process of its own is always stopped, never left behind

    def __init__(self, work: Work, process: subprocess.Popen[bytes] | None, pump: _Pump | None,
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
            self._returncode = process.wait()
            # Reaped, the main pid stays reserved by the kernel for as long as anything
            # left in its group lives on (it is their group id), so signals sent to the
            # group from here on can only reach leftovers of this job.
            if _group_alive(self.pid):
                if self._term_at is None:
                    _terminate_group(self.pid)
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
        """Whether the main process exited, without reaping it (it keeps the group id)."""
        try:
            info = os.waitid(os.P_PID, self.pid, os.WEXITED | os.WNOHANG | os.WNOWAIT)
        except ChildProcessError:
            return True  # already reaped: Popen.wait() knows its status
        return info is not None

    def _request_stop(self, outcome: AttemptOutcome, reason: str, now: float) -> None:
        self._stop = (outcome, reason)
        _terminate_group(self.pid)
        self._term_at = now
        self._enforce(now)

    def _enforce(self, now: float) -> None:
        """While the main process runs: the timeout, then SIGKILL after the grace."""
        timeout = self.work.timeout
        if self._stop is None and timeout is not None and now - self._started >= timeout:
            self._timed_out = True
            self._request_stop(AttemptOutcome.TIMED_OUT,
                               f"timed out after {seconds_text(timeout)}", now)
            return
        if (self._term_at is not None and self._kill_at is None
                and now >= self._term_at + self.work.kill_grace):
            _signal_group(self.pid, signal.SIGKILL)
            self._kill_at = now
            self._killed_running = True

    def _leftovers_settled(self, now: float) -> bool:
        """After the main process exited: whether its group is empty (or given up on)."""
        if not _group_alive(self.pid):
            return True
        if self._kill_at is None:
            if self._term_at is None:
                _terminate_group(self.pid)
                self._term_at = now
            if now >= self._term_at + self.work.kill_grace:
                _signal_group(self.pid, signal.SIGKILL)
                self._kill_at = now
            return False
        if now < self._kill_at + SETTLE:
            return False
        log.warning("processes %s of job %s survived SIGKILL", _live_members(self.pid),
                    self.work.context.job)
        return True

    def _group_gone(self, now: float) -> None:
        self._group_gone_at = now
        if self._watchdog is not None:
            self._watchdog.forget(self.pid)

    def _build(self, pump: _Pump) -> Result:
        code = self._returncode
        assert code is not None and self._ended is not None  # noqa: S101
        duration = self._ended - self._started
        envelope = pump.envelope() if self.work.kind == "handler" else None
        note = None
        if pump.result_overflow:
            note = (f"cronjobs: the handler's result was dropped: more than "
                    f"{self.work.result_limit} bytes")
        output = pump.output.text(note)
        exit_code = code if code >= 0 else None
        result: Any = None
        if self._stop is not None:
            outcome, error = self._stop
            if self._timed_out and self._killed_running:
                error += (f" (SIGTERM, then SIGKILL after "
                          f"{seconds_text(self.work.kill_grace)})")
        elif code < 0:
            outcome, error = AttemptOutcome.FAILED, f"killed by signal {_signal_name(-code)}"
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


def _grow_pipe(fd: int) -> None:
    with contextlib.suppress(OSError, AttributeError):  # else the default 64 KiB
        fcntl.fcntl(fd, fcntl.F_SETPIPE_SZ, PIPE_SIZE)


def _close(*fds: int | None) -> None:
    for fd in fds:
        if fd is not None:
            os.close(fd)


def _encoded(env: Mapping[str, str]) -> dict[bytes, bytes]:
    return {os.fsencode(k): os.fsencode(v) for k, v in env.items()}


@functools.lru_cache(maxsize=1)
def _base_environment() -> dict[bytes, bytes]:
    """The tick's environment, encoded once: it does not change while a tick runs."""
    return dict(os.environb)


def start(work: Work, watchdog: Watchdog | None = None,
          deadline: float | None = None, wake: threading.Event | None = None) -> Running:
    """Start ``work`` and return at once. A job that cannot be started at all (no
    /bin/sh, out of processes) gives a Running whose result is FAILED, with pid 0.
    With a ``watchdog``, the job's group is killed if the tick dies, or when ``deadline``
    (``time.monotonic()``; the end of the lease) passes without ``watchdog.renew``.
    ``wake`` is set when the job's main process has exited (and its output ended), so
    that the caller can wait on it instead of polling."""
    env = dict(_base_environment() if work.env is None else _encoded(work.env))
    env.update(_encoded(work.context.environment()))
    spec = b""
    channel_r = channel_w = spec_r = spec_w = None
    if work.kind == "handler":
        channel_r, channel_w = os.pipe()
        spec_r, spec_w = os.pipe()
        argv = [sys.executable, "-m", "cronjobs.execution.child", "--result-fd", str(channel_w)]
        spec = json.dumps({"apps": list(work.apps), "handler": work.handler,
                           "context": work.context.to_dict(),
                           "result_limit": work.result_limit}).encode()
    else:
        assert work.command is not None  # noqa: S101 - checked by Work
        argv = ["/bin/sh", "-c", work.command]
    output_r, output_w = os.pipe()
    _grow_pipe(output_w)
    # Without a watchdog the parent-death signal is the only guard against outliving a
    # killed tick. With one, it is left out: a preexec function rules out vfork, and
    # forking the whole tick for every job costs more than the job (`true`) itself.
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
                        else functools.partial(_die_with_parent, os.getpid())),
            env=env,
        )
    except (OSError, subprocess.SubprocessError) as exc:
        _close(output_r, output_w, channel_r, channel_w, spec_r, spec_w)
        return Running(work, None, None, None, started,
                       failure=f"could not start {argv[0]}: {exc}")
    _close(output_w, channel_w, spec_r)
    if watchdog is not None:
        watchdog.watch(process.pid, deadline)
    pump = _Pump(output_r, work.output_limit, channel_r, work.result_limit, spec_w, spec,
                 pid=process.pid, wake=wake)
    pump.start()
    return Running(work, process, pump, watchdog, started)


# -- the watchdog ---------------------------------------------------------------------------


class Watchdog:
    """One per tick process: if the tick dies (``kill -9``, the OOM killer), every job
    process group it started is killed, so a reclaimed run never overlaps an orphan.

    It is a small separate process (:mod:`cronjobs.child` ``--watchdog``, run isolated) in
    a session of its own, so signals for the tick's process group or terminal never reach
    it; it ignores SIGTERM, SIGINT and SIGHUP. The tick tells it ``watch PGID`` /
    ``forget PGID`` over a pipe only the tick holds; when that pipe ends (the tick exited,
    however) it SIGKILLs every group still watched and exits. :meth:`close` ends it
    cleanly: groups still watched then are killed too, since nobody supervises them any
    more. If the watchdog cannot be started or dies, jobs still run (with only the
    parent-death signal as protection) and a warning is logged.
    """

    def __init__(self, process: subprocess.Popen[bytes] | None) -> None:
        self._process = process
        self._lock = threading.Lock()
        self._warned = False
        # With autoflush off, messages are sent by flush(): a caller starting many jobs in
        # one pass (the tick) sends them together.
        self.autoflush = True

    @classmethod
    def start(cls) -> Watchdog:
        script = Path(__file__).with_name("child.py")
        if script.is_file():  # isolated: no site, no PYTHON* variables, no cwd on the path
            argv = [sys.executable, "-I", "-S", str(script), "--watchdog"]
        else:
            argv = [sys.executable, "-m", "cronjobs.execution.child", "--watchdog"]
        try:
            process = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.DEVNULL,
                                       start_new_session=True)
        except OSError as exc:
            log.warning("could not start the watchdog: %s; jobs would outlive a killed tick",
                        exc)
            return cls(None)
        return cls(process)

    @property
    def pid(self) -> int | None:
        return self._process.pid if self._process is not None else None

    def watch(self, pgid: int, deadline: float | None = None) -> None:
        """Watch a job's process group; with ``deadline`` (a ``time.monotonic()`` value)
        it is killed when that passes without :meth:`renew`."""
        self._send(f"watch {pgid}\n" if deadline is None else f"watch {pgid} {deadline:.3f}\n")

    def renew(self, pgid: int, deadline: float) -> None:
        """Move a watched group's deadline (its lease was renewed)."""
        self._send(f"renew {pgid} {deadline:.3f}\n")

    def forget(self, pgid: int) -> None:
        self._send(f"forget {pgid}\n")

    def flush(self) -> None:
        """Send the messages written since the last flush."""
        with self._lock:
            if self._process is None or self._process.stdin is None:
                return
            with contextlib.suppress(OSError):  # gone: _send warns on the next message
                self._process.stdin.flush()

    def close(self) -> None:
        """End the watchdog (killing any group still watched) and wait for it to exit."""
        with self._lock:
            process, self._process = self._process, None
        if process is None:
            return
        stdin = process.stdin
        assert stdin is not None  # noqa: S101 - started with stdin=PIPE
        try:
            stdin.write(b"close\n")
            stdin.close()
        except OSError:
            pass
        try:
            process.wait(5.0)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()

    def __enter__(self) -> Watchdog:
        return self

    def __exit__(self, kind: type[BaseException] | None, value: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.close()

    def _send(self, line: str) -> None:
        with self._lock:
            if self._process is None:
                return
            stdin: IO[bytes] | None = self._process.stdin
            assert stdin is not None  # noqa: S101
            try:
                stdin.write(line.encode())
                if self.autoflush:
                    stdin.flush()
            except OSError as exc:
                if not self._warned:
                    self._warned = True
                    log.warning("the watchdog is gone (%s); jobs would outlive a killed tick",
                                exc)
