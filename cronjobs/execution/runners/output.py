"""A job's output: one pipe per job drained by a reused pump thread in 64 KiB reads,
keeping only a bounded tail, so memory stays bounded whatever the job prints; a handler's
result arrives over a pipe of its own."""

from __future__ import annotations

import contextlib
import json
import logging
import os
import queue
import selectors
import threading
from collections.abc import Callable
from typing import Any

log = logging.getLogger(__name__)

CHUNK = 64 * 1024  # bytes per read of a job's output
RESULT_SLACK = 4096  # bytes of envelope allowed around a handler's result


# -- the output pump ----------------------------------------------------------------------


class Tail:
    """The last ``limit`` bytes of a job's output; memory stays under ``2 * limit + chunk``
    whatever the job prints. Shared by both ways of running a job."""

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self.data = bytearray()
        self.total = 0  # bytes seen
        self._lock = threading.Lock()  # keep() against snapshot() (the live output)

    def keep(self, data: bytes) -> None:
        with self._lock:
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

    def snapshot(self) -> tuple[str, int]:
        """The tail so far as text, and the bytes seen so far, consistent with each other
        (read by the tick while a job still prints: ``cronjobs logs --follow``)."""
        with self._lock:
            data, total = bytes(self.data[-self.limit:] if self.limit else b""), self.total
        return data.decode("utf-8", errors="replace").replace("\x00", "\ufffd"), total

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


PUMPS = Workers("cronjobs-pump")


class Pump:
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
        PUMPS.submit(self._run)

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
