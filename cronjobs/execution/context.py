"""What a job receives: :class:`JobContext` for handlers, ``CRONJOBS_*`` variables for commands."""

from __future__ import annotations

import datetime as dt
import json
from dataclasses import dataclass, field
from typing import Any


@dataclass(frozen=True)
class JobContext:
    """The single argument of a handler::

        @cronjobs.job("nightly_cleanup")
        def nightly_cleanup(ctx: cronjobs.JobContext) -> dict[str, int]:
            ...

    ``scheduled_for`` is the slot the run is for (an aware datetime in UTC), not the time the
    attempt started; together with ``job`` it names the run for idempotency: retries of a run
    share ``idempotency_key``, different slots never do.
    """

    run_id: int
    job: str
    scheduled_for: dt.datetime
    attempt: int
    payload: dict[str, Any] = field(default_factory=dict)
    # the W3C trace context of this run's span (``00-<trace id>-<span id>-<flags>``) when the
    # tick traces with OpenTelemetry, else None; commands get it as TRACEPARENT
    traceparent: str | None = None

    def __post_init__(self) -> None:
        when = self.scheduled_for
        if when.tzinfo is None or when.utcoffset() is None:
            raise ValueError(f"scheduled_for must be an aware datetime, got {when!r}")
        if when.tzinfo is not dt.UTC:
            object.__setattr__(self, "scheduled_for", when.astimezone(dt.UTC))

    @property
    def idempotency_key(self) -> str:
        """``job@scheduled_for``: the same for every attempt of one run."""
        return f"{self.job}@{self.scheduled_for.isoformat()}"

    def environment(self) -> dict[str, str]:
        """The ``CRONJOBS_*`` variables a job process sees."""
        return {
            "CRONJOBS_RUN_ID": str(self.run_id),
            "CRONJOBS_JOB": self.job,
            "CRONJOBS_SCHEDULED_FOR": self.scheduled_for.isoformat(),
            "CRONJOBS_ATTEMPT": str(self.attempt),
            "CRONJOBS_PAYLOAD": json.dumps(self.payload, separators=(",", ":")),
            **({"TRACEPARENT": self.traceparent} if self.traceparent else {}),
        }

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready form (how the runner hands the context to a handler's process)."""
        return {
            "run_id": self.run_id,
            "job": self.job,
            "scheduled_for": self.scheduled_for.isoformat(),
            "attempt": self.attempt,
            "payload": self.payload,
            **({"traceparent": self.traceparent} if self.traceparent else {}),
        }

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> JobContext:
        return cls(
            run_id=int(data["run_id"]),
            job=str(data["job"]),
            scheduled_for=dt.datetime.fromisoformat(str(data["scheduled_for"])),
            attempt=int(data["attempt"]),
            payload=dict(data.get("payload") or {}),
            traceparent=str(data["traceparent"]) if data.get("traceparent") else None,
        )
