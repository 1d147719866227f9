"""The one home of database retries: which database errors are transient, for how long they
are retried and how long to wait between attempts. Connecting, heartbeats, finishing and the
worker's loop all go through :func:`retrying`. (A webhook's delivery is not a database call:
its retries live with the deliveries, in ``cronjobs.execution.deliveries``.)

What is retried is a *database call*, never a job: a job's retries are rows
(``eligible_at``), decided by the executor. A call given to :func:`retrying` must be safe to
run twice — a read, or a whole transaction whose writes are fenced (a lease token: its repeat
after a commit whose answer was lost changes nothing and says "zero rows", i.e. the lease
was lost) — and never one statement inside a larger transaction.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, TypeVar

import psycopg

log = logging.getLogger(__name__)

T = TypeVar("T")

# SQLSTATEs that waiting fixes (https://www.postgresql.org/docs/current/errcodes-appendix.html)
TRANSIENT_SQLSTATES = {
    "40001": "serialization failure",  # the transaction was rolled back: safe to repeat
    "40P01": "deadlock detected",  # likewise
    "57P01": "admin shutdown",  # the server is stopping or our backend was terminated
    "57P02": "crash shutdown",
    "57P03": "cannot connect now",  # the server is starting
    "53300": "too many connections",
}
TRANSIENT_CLASSES = ("08",)  # connection exception

# Connection failures (they come without a SQLSTATE) that waiting will not fix.
PERMANENT_MESSAGES = (
    "password authentication failed",
    "authentication failed",
    "no pg_hba.conf entry",
    "does not exist",
    "permission denied",
    "invalid",
    "unsupported",
    "no password supplied",
)


@dataclass(frozen=True)
class RetryPolicy:
    """Which errors are retried, for how long, with what backoff.

    Retried: a lost connection, a server shutting down or starting, too many connections,
    and a serialization failure or deadlock (the transaction was rolled back, and every call
    retried is safe to repeat). Never retried: a statement or lock timeout (they exist so
    that cronjobs cannot wedge the database), a constraint or schema error, a refused login
    — and anything a job does."""

    within: float = 5.0  # seconds of trying, unless the caller gives its own deadline
    first_wait: float = 0.2  # backoff: exponential with full jitter, from this ...
    max_wait: float = 2.0  # ... up to this between two attempts

    def transient(self, exc: BaseException) -> bool:
        """Whether ``exc`` (or the psycopg error it was translated from) is worth a retry."""
        error = _psycopg_error(exc)
        if not isinstance(error, psycopg.OperationalError):
            return False
        state = error.sqlstate
        if state is None:  # raised by libpq: the connection failed or was lost
            text = str(error).lower()
            return not any(marker in text for marker in PERMANENT_MESSAGES)
        return state in TRANSIENT_SQLSTATES or state.startswith(TRANSIENT_CLASSES)


DEFAULT = RetryPolicy()


def retrying(call: Callable[[], T], *, policy: RetryPolicy = DEFAULT,
             until: float | None = None, give_up: Callable[[], bool] | None = None,
             between: Callable[[], object] | None = None,
             on_retry: Callable[[BaseException], object] | None = None) -> T:
    """``call()``, repeated on transient errors until it succeeds or time is up (``until``,
    a ``time.monotonic()`` deadline, else ``policy.within`` from now, or ``give_up()`` says
    so); then the last error is raised. ``between`` runs before each repeat (e.g.
    reconnect); ``on_retry`` is told each error that will be retried."""
    deadline = until if until is not None else time.monotonic() + policy.within

    def stop(state: object) -> bool:
        return time.monotonic() >= deadline or (give_up is not None and give_up())

    # the first attempt (its error, if transient, is told to on_retry like the others)
    try:
        return call()
    except Exception as exc:
        if not policy.transient(exc) or stop(None):
            raise
        first = exc
    # Deferred to the first failure (the usual call needs no retry machinery): tenacity
    # costs every command about 6 ms to import (bench/empty_tick.py).
    from tenacity import Retrying, retry_if_exception, wait_random_exponential  # noqa: PLC0415

    backoff = wait_random_exponential(multiplier=policy.first_wait, max=policy.max_wait)

    def wait(state: Any) -> float:
        return max(0.0, min(backoff(state), deadline - time.monotonic()))

    def before_sleep(state: Any) -> None:
        if on_retry is not None and state.outcome is not None:
            on_retry(state.outcome.exception())

    def again() -> T:
        if between is not None:
            between()
        return call()

    if on_retry is not None:
        on_retry(first)
    # the repeats (the first of them at once: ``between`` reconnects first)
    retry = Retrying(stop=stop, wait=wait, retry=retry_if_exception(policy.transient),
                     before_sleep=before_sleep, reraise=True)
    return retry(again)


def _psycopg_error(exc: BaseException) -> BaseException | None:
    """``exc`` itself, or the psycopg error the store translated into it."""
    seen: BaseException | None = exc
    while seen is not None and not isinstance(seen, psycopg.Error):
        seen = seen.__cause__
    return seen
