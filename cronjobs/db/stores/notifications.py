"""Notifications: the worker's wake-up channel, webhook targets and deliveries, live output of
running runs."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from cronjobs.db.session import Queries, translated
from cronjobs.models import (
    NotifyConfig,
)
from cronjobs.reports import (
    Delivery,
    LiveOutput,
)


class NotificationStore(Queries):
    """Notifications: the worker's wake-up channel, webhook targets and deliveries, live output of
    running runs."""

    def listen_for_triggers(self) -> None:
        self._send("listen_trigger")

    def notify_trigger(self) -> None:
        self._send("notify_trigger")

    def wait_for_notification(self, timeout: float) -> bool:
        """Whether a notification arrived within ``timeout`` seconds."""
        with translated():
            for _ in self.conn.notifies(timeout=timeout, stop_after=1):
                return True
        return False

    def notify_config(self, definition_ids: Sequence[int]) -> dict[int, NotifyConfig]:
        """{definition id: its receivers} of those jobs that have any."""
        rows = self._rows("notify_config", {"ids": list(definition_ids)}, NotifyConfig)
        return {row.id: row for row in rows}

    def previous_run_dead(self, run_id: int) -> bool:
        """Whether the last run of the same job that ended before ``run_id`` died."""
        values = self._values("previous_run_dead", {"run_id": run_id})
        return bool(values and values[0])

    def record_deliveries(self, deliveries: Sequence[Mapping[str, Any]]) -> int:
        """Record notifications sent or tried (dicts with the columns of job_notifications);
        a run pruned meanwhile is skipped."""
        if not deliveries:
            return 0
        return len(self._values("record_deliveries", {
            "run_ids": [d["run_id"] for d in deliveries],
            "attempts": [d["attempt"] for d in deliveries],
            "events": [d["event"] for d in deliveries],
            "targets": [d["target"] for d in deliveries],
            "statuses": [d["status"] for d in deliveries],
            "tries": [d["tries"] for d in deliveries],
            "http_statuses": [d["http_status"] for d in deliveries],
            "errors": [d["error"] for d in deliveries],
            "sent_ats": [d["sent_at"] for d in deliveries],
        }))

    def deliveries_of_run(self, run_id: int) -> list[Delivery]:
        return self._rows("deliveries_of_run", {"run_id": run_id}, Delivery)

    def write_live_output(self, outputs: Sequence[tuple[int, Any, str, int]]) -> set[int]:
        """(run id, lease token, output so far, bytes printed so far) of running runs, each
        written only while that lease holds; returns the ids written."""
        if not outputs:
            return set()
        return {int(value) for value in self._values("write_live_output", {
            "ids": [o[0] for o in outputs], "tokens": [o[1] for o in outputs],
            "tails": [o[2] for o in outputs], "bytes": [o[3] for o in outputs]})}

    def live_output(self, run_id: int) -> LiveOutput | None:
        """What `cronjobs logs` reads of a run: its status, attempt, output so far, error."""
        rows = self._rows("live_output", {"id": run_id}, LiveOutput)
        return rows[0] if rows else None

