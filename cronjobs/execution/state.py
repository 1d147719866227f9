"""What the parts of the executor share: the attempts under way (:class:`Active`, by run
id), the deadline the watchdog holds for each, what the tick did (:class:`ExecReport`), and
the database reached through the retry policy (:class:`Database`)."""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TypeVar

from cronjobs.db.retry import DEFAULT, RetryPolicy, retrying
from cronjobs.db.store import Store
from cronjobs.errors import DatabaseUnavailable
from cronjobs.execution.runners import Job
from cronjobs.models import AttemptOutcome, Claimed, RunStatus

log = logging.getLogger(__name__)

T = TypeVar("T")


@dataclass(frozen=True)
class Finished:
    """An attempt the tick ended: its outcome, and the run's new status (None when the
    lease was lost: whoever holds the run now records it)."""

    run_id: int
    job: str
    attempt: int
    outcome: AttemptOutcome
    status: RunStatus | None
    error: str | None


@dataclass
class ExecReport:
    reclaimed: int = 0
    claimed: int = 0
    succeeded: int = 0
    failed: int = 0
    dead: int = 0
    cancelled: int = 0
    interrupted: int = 0
    lost: int = 0
    concurrency: int = 0  # the most runs it would run at once (--concurrency, or sized)
    finished: list[Finished] = field(default_factory=list)
    # False: the attempts ended are counted, not listed (a worker's pass may never end)
    keep_finished: bool = True

    def ended(self, finished: Finished) -> None:
        if self.keep_finished:
            self.finished.append(finished)


@dataclass
class Active:
    """An attempt under way."""

    claim: Claimed
    job: Job
    last_beat: float  # monotonic time of the last renewed lease
    stop_requested: AttemptOutcome | None = None
    in_process: bool = False  # a handler in a thread of this process (runners/inprocess.py)


def deadline(since: float, claim: Claimed) -> float:
    """When the watchdog must kill a job whose lease was last renewed at ``since``: just
    before the lease can expire, so a reclaimed run never overlaps this copy."""
    lease = claim.lease.total_seconds()
    return since + lease - min(1.0, lease / 10)


class Database:
    """The store, reached through the retry policy (:mod:`cronjobs.db.retry`): a call that
    fails on a transient error is repeated, on a fresh connection (``store.reconnect()``
    runs between two attempts). Every call must be safe to repeat: a read, or a whole
    transaction whose writes are fenced by lease tokens."""

    def __init__(self, store: Store, policy: RetryPolicy = DEFAULT) -> None:
        self.store = store
        self.policy = policy

    def call(self, call: Callable[[Store], T]) -> T:
        """``call(store)``, retried for the policy's time; then the last error is raised."""
        try:
            return self._retried(call, None, None)
        except DatabaseUnavailable as exc:
            log.warning("database unavailable: %s", exc.message, extra={"action": "database"})
            raise

    def call_until(self, call: Callable[[Store], T], until: float,
                   give_up: Callable[[], bool] | None = None) -> T | None:
        """``call(store)``, retried until ``until`` (monotonic) or ``give_up()``; None when it
        could not be done by then."""
        try:
            return self._retried(call, until, give_up)
        except DatabaseUnavailable as exc:
            log.warning("database unavailable: %s", exc.message, extra={"action": "database"})
            return None

    def _retried(self, call: Callable[[Store], T], until: float | None,
                 give_up: Callable[[], bool] | None) -> T:
        store = self.store
        return retrying(lambda: call(store), policy=self.policy, until=until, give_up=give_up,
                        between=store.reconnect, on_retry=_log_retry)


def _log_retry(exc: BaseException) -> None:
    log.info("database call failed, retrying: %s", exc, extra={"action": "database"})
