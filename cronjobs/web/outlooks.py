"""The dashboard's forecast, worked out at most once per view every ``KEEP`` seconds and
shared by the requests (the pages refresh every few seconds; a fleet's next day changes by
the minute, and working it out for 100,000 jobs takes about a second)."""

from __future__ import annotations

import threading
import time

from cronjobs.core.outlook import Outlook, outlook
from cronjobs.db.store import Store

KEEP = 30.0  # seconds an outlook is shown before it is worked out again


class Outlooks:
    """The latest outlook of each view, and when it was worked out."""

    def __init__(self, keep: float = KEEP) -> None:
        self.keep = keep
        self._lock = threading.Lock()
        self._latest: dict[str, tuple[float, Outlook]] = {}

    def get(self, store: Store, view: str) -> Outlook:
        with self._lock:
            kept = self._latest.get(view)
            if kept is not None and time.monotonic() - kept[0] < self.keep:
                return kept[1]
            fresh = outlook(store, view)
            self._latest[view] = (time.monotonic(), fresh)
            return fresh
