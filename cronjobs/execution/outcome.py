"""What a claimed run's attempt comes to: whether its row can be run at all, and the run's
status after the attempt (retry with backoff, dead, cancelled...). Pure functions of the
claim, so that the executor's loop only applies them."""

from __future__ import annotations

import datetime as dt
import json
import random
from collections.abc import Callable

from cronjobs.errors import CronjobsError
from cronjobs.models import AttemptOutcome, Claimed, Kind, RunStatus
from cronjobs.validation import json_kind

# the lease of a run whose job has none (a row written around the CLI's checks), for as
# long as it takes to record that it cannot run
FALLBACK_LEASE = dt.timedelta(seconds=60)


def retry_delay(attempt: int, base: dt.timedelta, cap: dt.timedelta,
                rand: Callable[[], float] = random.random) -> dt.timedelta:
    """Exponential backoff with jitter: base * 2^(attempt-1), capped, then a random point in
    its upper half, so that retries of many runs spread out."""
    ceiling = min(cap.total_seconds(), base.total_seconds() * 2 ** min(attempt - 1, 30))
    return dt.timedelta(seconds=ceiling / 2 + rand() * ceiling / 2)


class UnrunnableRun(CronjobsError):
    """The run's row cannot be run as it is."""


def unrunnable(claim: Claimed) -> str | None:
    """What makes ``claim`` impossible to run as stored (a row that bypassed the CLI's
    checks, e.g. written while constraints were dropped), or None."""
    if claim.payload is not None and not isinstance(claim.payload, dict):
        return (f"the payload is not a JSON object but {json_kind(claim.payload)} "
                f"{json.dumps(claim.payload)[:100]}")
    if not isinstance(claim.kind, Kind):  # see Claimed
        return f"the job's kind is {claim.kind!r}, neither 'command' nor 'handler'"
    if claim.kind == Kind.COMMAND and not claim.command:
        return "the job is a command job without a command (NULL or empty)"
    if claim.kind == Kind.HANDLER and not claim.handler:
        return "the job is a handler job without a handler name (NULL or empty)"
    if not isinstance(claim.lease, dt.timedelta) or claim.lease <= dt.timedelta(0):
        return f"the job's lease is {claim.lease}, not a positive interval"
    if claim.timeout is not None and claim.timeout <= dt.timedelta(0):
        return f"the job's timeout is {claim.timeout}, not a positive interval"
    return None


def lease_of(claim: Claimed) -> dt.timedelta:
    """The claim's lease, or the fallback where the job has none that works."""
    if isinstance(claim.lease, dt.timedelta) and claim.lease > dt.timedelta(0):
        return claim.lease
    return FALLBACK_LEASE


def next_status(claim: Claimed, outcome: AttemptOutcome
                 ) -> tuple[RunStatus, dt.timedelta | None, int]:
    """The run's status after an attempt: (status, retry delay, extra attempts granted)."""
    if outcome == AttemptOutcome.SUCCEEDED:
        return RunStatus.SUCCEEDED, None, 0
    if outcome == AttemptOutcome.CANCELLED:
        return RunStatus.CANCELLED, None, 0
    if outcome == AttemptOutcome.INTERRUPTED:
        return RunStatus.QUEUED, dt.timedelta(0), 1  # an interruption uses no attempt
    if claim.attempt >= claim.max_attempts:
        return RunStatus.DEAD, None, 0
    return RunStatus.FAILED, retry_delay(claim.attempt, claim.backoff, claim.backoff_max), 0

