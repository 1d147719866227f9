"""Retrying a webhook's delivery: the policy of calls that are not the database's.

A delivery is retried a bounded number of times *and* within a deadline, so that a slow or
dead receiver costs one bounded series and never holds the tick. Database calls are retried
by ``cronjobs.db.retry`` alone: its policy knows which database errors are transient.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any, TypeVar

T = TypeVar("T")


def retrying_calls(call: Callable[[], T], *, attempts: int, first_wait: float, max_wait: float,
                   until: float, retry_on: Callable[[BaseException], bool],
                   on_retry: Callable[[BaseException], object] | None = None) -> T:
    """``call()`` up to ``attempts`` times while ``retry_on(error)`` says so and the
    ``time.monotonic()`` deadline ``until`` is ahead, waiting with exponential backoff and
    full jitter (``first_wait`` .. ``max_wait``) between tries; then the last error is
    raised. For calls that are not the database's (a webhook's delivery); bounded both in
    tries and in time, so that a slow or dead receiver costs one bounded series."""
    # Deferred (one of the package's few imports inside a function, bench/empty_tick.py):
    # tenacity costs every tick about 6 ms to import, and a tick that sends no webhook
    # never needs it.
    from tenacity import (  # noqa: PLC0415
        Retrying,
        retry_if_exception,
        stop_after_attempt,
        stop_any,
        wait_random_exponential,
    )
    from tenacity.stop import stop_base  # noqa: PLC0415

    backoff = wait_random_exponential(multiplier=first_wait, max=max_wait)

    def wait(state: Any) -> float:
        return max(0.0, min(backoff(state), until - time.monotonic()))

    class PastDeadline(stop_base):
        def __call__(self, state: Any) -> bool:
            return time.monotonic() >= until

    def before_sleep(state: Any) -> None:
        if on_retry is not None and state.outcome is not None:
            on_retry(state.outcome.exception())

    retry = Retrying(stop=stop_any(stop_after_attempt(attempts), PastDeadline()), wait=wait,
                     retry=retry_if_exception(retry_on), before_sleep=before_sleep,
                     reraise=True)
    return retry(call)
