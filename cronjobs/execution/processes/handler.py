"""Calling a handler for one attempt, and the process that does it in a fresh interpreter.

``python -m cronjobs.execution.processes.handler --result-fd N``
    Runs one handler attempt. Reads a JSON spec from stdin (``apps``, ``handler``,
    ``context``, ``result_limit``), imports the ``--app`` modules, calls ``handler(ctx)``
    and writes one JSON envelope to fd ``N``: ``{"ok": true, "result": ...}`` or
    ``{"ok": false, "error": "ValueError: bad input"}``. The handler's output (stdout and
    stderr, tracebacks included) goes to the inherited stdout/stderr, never to fd ``N``.
    Exit status: 0 when the handler returned, 1 when it raised or could not be found; a
    handler stopped by SIGTERM dies by SIGTERM (after printing where it was), and whatever
    the handler itself does (``os._exit(7)``, a crash) shows through unchanged.

A child forked from the template process (:mod:`cronjobs.execution.processes.template`)
calls the handler with :func:`call` too, and a handler run in-process encodes its result
with :func:`encode_result`.

Return values that cannot be stored as JSON (not serialisable, NaN or infinity, NUL
characters, lone surrogates) are stored as ``{"repr": "..."}``, shortened to fit
``result_limit``. A JSON result larger than ``result_limit`` bytes is dropped: the attempt
still succeeds with no result, and a note saying so is written to stderr (so it shows in
the output tail).
"""

from __future__ import annotations

import contextlib
import faulthandler
import io
import json
import os
import signal
import sys
import time
import traceback
from collections.abc import Callable
from types import FrameType
from typing import Any

from cronjobs.errors import ConfigurationError
from cronjobs.execution.context import JobContext
from cronjobs.execution.registry import load_apps, lookup

ERROR_CHARS = 1000  # longest error line sent to the tick

# Handlers are set with the C function that signal.signal wraps: the wrapper converts to and
# from enums, and in a forked child every page that touches is copied (a tenth of a no-op
# run).
SET_HANDLER: Callable[[int, Any], Any] = getattr(signal.signal, "__wrapped__", signal.signal)
_SIGTERM, SIG_DFL = int(signal.SIGTERM), int(signal.SIG_DFL)


class _Terminated(BaseException):
    """SIGTERM arrived while the handler ran (raised so that ``finally`` blocks run)."""


def _on_sigterm(signum: int, frame: FrameType | None) -> None:
    raise _Terminated


def _one_line(text: str) -> str:
    line = text.strip().splitlines()[0] if text.strip() else ""
    line = line.replace("\x00", "\ufffd")
    return line if len(line) <= ERROR_CHARS else line[: ERROR_CHARS - 3] + "..."


def describe_exception(exc: BaseException) -> str:
    """The last line of a traceback, on one line: ``ValueError: bad input``."""
    cls = type(exc)
    name = cls.__qualname__
    if cls.__module__ not in ("builtins", "__main__"):
        name = f"{cls.__module__}.{name}"
    try:
        message = str(exc)
    except Exception:  # a broken __str__ must not hide the exception
        message = "<exception str() failed>"
    return _one_line(f"{name}: {message}" if message.strip() else name)


def _safe_repr(value: Any) -> str:
    try:
        text = repr(value)
    except Exception:  # a broken __repr__ must not fail a finished handler
        text = f"<unrepresentable {type(value).__qualname__}>"
    return text.replace("\x00", "\\x00")


def encode_result(value: Any, limit: int) -> tuple[bytes | None, str | None]:
    """``(json bytes, None)`` for a result that fits ``limit``, else ``(None, note)``."""
    if value is None and limit >= 4:  # the usual result, without the encoder's machinery
        return b"null", None
    try:
        text = json.dumps(value, allow_nan=False, ensure_ascii=False, separators=(",", ":"))
        if "\\u0000" in text:  # PostgreSQL's jsonb cannot hold NUL characters
            raise ValueError("NUL character")  # noqa: TRY301 - handled just below
        data = text.encode("utf-8")  # lone surrogates raise UnicodeEncodeError (a ValueError)
    except (TypeError, ValueError, RecursionError):
        shown = _safe_repr(value)
        while True:
            data = json.dumps({"repr": shown}).encode("ascii")
            over = len(data) - limit
            if over <= 0:
                return data, None
            if len(shown) <= 3:
                return None, f"the handler's result does not fit in {limit} bytes"
            shown = shown[: max(0, len(shown) - over - 3)] + "..."
    if len(data) > limit:
        return None, (f"the handler's result was dropped: {len(data)} bytes of JSON "
                      f"exceed the limit of {limit} bytes")
    return data, None


def _send(channel: int, envelope: bytes) -> None:
    """Write ``envelope`` to ``channel`` and close it (with system calls only: no file
    object to build in a forked child)."""
    view = memoryview(envelope)
    try:
        while view:
            view = view[os.write(channel, view):]
    except OSError:
        pass  # the runner stopped listening (it gave up on this process)
    finally:
        with contextlib.suppress(OSError):
            os.close(channel)


def _error_envelope(message: str) -> bytes:
    return json.dumps({"ok": False, "error": message}).encode("ascii")


def _prepare_stdio() -> None:
    """Line-buffer stdout (output survives ``os._exit``) and detach stdin once read."""
    if isinstance(sys.stdout, io.TextIOWrapper):
        sys.stdout.reconfigure(line_buffering=True)
    devnull = os.open(os.devnull, os.O_RDONLY)
    os.dup2(devnull, 0)
    os.close(devnull)


def run_handler(channel: int) -> int:
    """Run the handler named by the spec on stdin; see the module docstring."""
    os.set_inheritable(channel, False)  # the handler's own subprocesses must not hold it
    faulthandler.enable()  # a crash prints the Python stack to stderr, into the output tail
    spec = json.loads(sys.stdin.buffer.read() or b"{}")
    _prepare_stdio()
    return call(channel, spec, None)


def call(channel: int, spec: dict[str, Any], handlers: dict[str, Any] | None) -> int:
    """Call the handler the spec names, from ``handlers`` (the template's, already
    imported) or, when None, from the spec's ``apps`` imported now; send the envelope to
    ``channel``. Returns the exit status."""
    for key, value in (spec.get("environment") or {}).items():  # CRONJOBS_*: a forked
        os.environ[key] = value  # child's own (set one by one: update() is an ABC's)

    name = str(spec.get("handler"))
    limit = int(spec.get("result_limit", 64 * 1024))
    if handlers is None:
        try:
            handlers = load_apps(spec.get("apps") or ())
        except ConfigurationError as exc:
            traceback.print_exception(exc.__cause__ or exc)
            _send(channel, _error_envelope(_one_line(exc.message)))
            return 1
    try:
        handler = lookup(handlers, name)
    except ConfigurationError as exc:
        print(f"cronjobs: {exc.message}", file=sys.stderr)
        _send(channel, _error_envelope(_one_line(exc.message)))
        return 1
    context = JobContext.from_dict(spec["context"])

    SET_HANDLER(_SIGTERM, _on_sigterm)
    try:
        value = handler(context)
    except _Terminated as exc:
        SET_HANDLER(_SIGTERM, SIG_DFL)
        frames = traceback.extract_tb(exc.__traceback__)[1:-1]  # the handler's frames only
        print("cronjobs: the handler got SIGTERM while at:", file=sys.stderr)
        print("".join(traceback.format_list(frames)), end="", file=sys.stderr)
        _die_by(signal.SIGTERM)
        return 128 + signal.SIGTERM
    except Exception as exc:  # the handler failed: its traceback goes to the output
        SET_HANDLER(_SIGTERM, SIG_DFL)
        tb = exc.__traceback__
        traceback.print_exception(type(exc), exc, tb.tb_next if tb is not None else None)
        _send(channel, _error_envelope(describe_exception(exc)))
        return 1
    SET_HANDLER(_SIGTERM, SIG_DFL)

    data, note = encode_result(value, limit)
    if note is not None:
        print(f"cronjobs: {note}", file=sys.stderr)
    _send(channel, b'{"ok":true,"result":' + (data or b"null") + b"}")
    return 0


def _die_by(signum: int) -> None:
    """Flush and kill this process with ``signum``, so the parent sees the real cause."""
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(OSError, ValueError):
            stream.flush()
    os.kill(os.getpid(), signum)
    time.sleep(1)  # the signal is delivered at once; never reached in practice


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    if len(args) == 2 and args[0] == "--result-fd" and args[1].isdigit():
        return run_handler(int(args[1]))
    print("usage: python -m cronjobs.execution.processes.handler --result-fd N",
          file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main())
