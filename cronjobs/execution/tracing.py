"""Optional OpenTelemetry tracing: a span per tick and per run (job, slot, attempt, outcome),
the run's context handed to the job (``TRACEPARENT`` for commands, ``ctx.traceparent`` for
handlers).

On only when the standard environment asks for traces (``OTEL_TRACES_EXPORTER`` other than
``none``, or ``OTEL_EXPORTER_OTLP_ENDPOINT`` / ``OTEL_EXPORTER_OTLP_TRACES_ENDPOINT``; not with
``OTEL_SDK_DISABLED=true``) and the ``otel`` extra is installed. Otherwise nothing of
OpenTelemetry is imported: the spans themselves are made in :mod:`cronjobs.execution.otel`,
imported only then (the tick's start-up stays as small as it is). A tick started with a
``TRACEPARENT`` of its own continues that trace. When the process already has an SDK tracer
provider (an application that set one up), its spans go there; else one is made from the
environment (the OTLP exporter, or ``console``) and flushed when the tick ends.
"""

from __future__ import annotations

import datetime as dt
import logging
import os
from collections.abc import Mapping
from typing import Any, Protocol

log = logging.getLogger(__name__)

NAME = "cronjobs"


def wanted(environ: Mapping[str, str] | None = None) -> bool:
    """Whether the OpenTelemetry environment variables ask for traces."""
    env = os.environ if environ is None else environ
    if env.get("OTEL_SDK_DISABLED", "").strip().lower() == "true":
        return False
    exporter = env.get("OTEL_TRACES_EXPORTER", "").strip().lower()
    if exporter:
        return exporter != "none"
    return bool(env.get("OTEL_EXPORTER_OTLP_ENDPOINT") or
                env.get("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT"))


class Tracing(Protocol):
    """The spans of one tick: the tick's, and one per run attempt under it."""

    def run_started(self, run_id: int, job: str, slot: dt.datetime, attempt: int) -> str | None:
        """Start the span of an attempt; returns its ``traceparent`` for the job."""

    def run_ended(self, run_id: int, outcome: str, status: str | None,
                  error: str | None) -> None:
        """End the span of an attempt."""

    def close(self, counts: Mapping[str, int], error: str | None) -> None:
        """End the open spans and the tick's (flushing what was set up for it)."""


def start(attributes: Mapping[str, Any],
          environ: Mapping[str, str] | None = None) -> Tracing | None:
    """A :class:`Tracing` whose tick span has started, or None when tracing is off (or the
    ``otel`` extra is missing: said once, as a warning)."""
    env = os.environ if environ is None else environ
    if not wanted(env):
        return None
    try:
        # the otel extra: imported only when tracing is asked for
        from cronjobs.execution import otel  # noqa: PLC0415
    except ImportError:
        log.warning("OpenTelemetry tracing is configured but not installed: "
                    "pip install 'cronjobs[otel]'", extra={"action": "tracing"})
        return None
    return otel.start(attributes, env)
