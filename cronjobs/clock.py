"""The one clock of an operation.

An operation (a tick, a command) takes one instant at its start — from the database
(``SELECT now()``, or the tick's own record) or given (``--now``, a test) — and passes it to
every query that decides something; no query reads a clock of its own. A tick lasts: its
leases must still be renewed, and its runs' outcomes recorded, as real time passes. So a
tick carries a :class:`Clock`: its start instant plus the time elapsed since on this host's
monotonic clock. In production the start is the database's clock and the elapsed time is
real, so ``now()`` is the database's clock to within milliseconds (the leases' watchdog
margin absorbs that); with ``--now T`` everything follows T, so a test pins a retry's backoff
or a lease's expiry by ticking at a later instant instead of sleeping.
"""

from __future__ import annotations

import datetime as dt
import time
from collections.abc import Callable


class Clock:
    """``now()`` is ``start`` plus the monotonic time elapsed since this clock was made."""

    def __init__(self, start: dt.datetime,
                 monotonic: Callable[[], float] = time.monotonic) -> None:
        self.start = start
        self._monotonic = monotonic
        self._origin = monotonic()

    def now(self) -> dt.datetime:
        return self.start + dt.timedelta(seconds=self._monotonic() - self._origin)
