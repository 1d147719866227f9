"""Optional OpenTelemetry tracing: a span per tick and per run (job, slot, attempt, outcome),
the run's context handed to the job (``TRACEPARENT`` for commands, ``ctx.traceparent`` for
handlers).

On only when the standard environment asks for traces (``OTEL_TRACES_EXPORTER`` other than
``none``, or ``OTEL_EXPORTER_OTLP_ENDPOINT`` / ``OTEL_EXPORTER_OTLP_TRACES_ENDPOINT``; not with
``OTEL_SDK_DISABLED=true``) and the ``otel`` extra is installed. Otherwise nothing of
OpenTelemetry is imported (the tick's start-up stays as small as it is). A tick started with a
``TRACEPARENT`` of its own continues that trace. When the process already has an SDK tracer
provider (an application that set one up), its spans go there; else one is made from the
environment (the OTLP exporter, or ``console``) and flushed when the tick ends.
"""

from __future__ import annotations

import datetime as dt
import logging
import os
from collections.abc import Mapping
from typing import Any

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


def start(attributes: Mapping[str, Any],
          environ: Mapping[str, str] | None = None) -> Tracing | None:
    """A :class:`Tracing` whose tick span has started, or None when tracing is off (or the
    ``otel`` extra is missing: said once, as a warning)."""
    env = os.environ if environ is None else environ
    if not wanted(env):
        return None
    try:
        from opentelemetry import trace  # noqa: PLC0415 - only when tracing is asked for
    except ImportError:
        log.warning("OpenTelemetry tracing is configured but not installed: "
                    "pip install 'cronjobs[otel]'", extra={"action": "tracing"})
        return None
    owned = None
    provider: Any = trace.get_tracer_provider()
    if not hasattr(provider, "force_flush"):  # no SDK provider yet: make one
        owned = _provider(env)
        if owned is None:
            return None
        provider = owned
    return Tracing(provider, owned is not None, attributes, env.get("TRACEPARENT"))


def _provider(env: Mapping[str, str]) -> Any:
    try:
        from opentelemetry.sdk.resources import Resource  # noqa: PLC0415
        from opentelemetry.sdk.trace import TracerProvider  # noqa: PLC0415
        from opentelemetry.sdk.trace.export import (  # noqa: PLC0415
            BatchSpanProcessor,
            ConsoleSpanExporter,
            SpanExporter,
        )
    except ImportError:
        log.warning("OpenTelemetry's SDK is not installed: pip install 'cronjobs[otel]'",
                    extra={"action": "tracing"})
        return None
    exporter: SpanExporter
    if env.get("OTEL_TRACES_EXPORTER", "otlp").strip().lower() == "console":
        exporter = ConsoleSpanExporter()
    else:
        try:
            from opentelemetry.exporter.otlp.proto.http.trace_exporter import (  # noqa: PLC0415
                OTLPSpanExporter,
            )
        except ImportError:
            log.warning("the OTLP exporter is not installed: pip install 'cronjobs[otel]'",
                        extra={"action": "tracing"})
            return None
        exporter = OTLPSpanExporter()
    provider = TracerProvider(resource=Resource.create(
        {"service.name": env.get("OTEL_SERVICE_NAME") or NAME}))
    provider.add_span_processor(BatchSpanProcessor(exporter))
    return provider


class Tracing:
    """The spans of one tick: the tick's, and one per run attempt under it."""

    def __init__(self, provider: Any, owned: bool, attributes: Mapping[str, Any],
                 traceparent: str | None) -> None:
        from opentelemetry import trace  # noqa: PLC0415
        from opentelemetry.trace.propagation.tracecontext import (  # noqa: PLC0415
            TraceContextTextMapPropagator,
        )

        self._trace = trace
        self._propagator = TraceContextTextMapPropagator()
        self._provider = provider
        self._owned = owned
        self._tracer = provider.get_tracer(NAME)
        parent = (self._propagator.extract({"traceparent": traceparent}) if traceparent
                  else None)
        self._tick = self._tracer.start_span("cronjobs tick", context=parent,
                                             kind=trace.SpanKind.INTERNAL,
                                             attributes=dict(attributes))
        self._runs: dict[int, Any] = {}

    def run_started(self, run_id: int, job: str, slot: dt.datetime, attempt: int) -> str | None:
        """Start the span of an attempt; returns its ``traceparent`` for the job."""
        context = self._trace.set_span_in_context(self._tick)
        span = self._tracer.start_span(f"cronjobs run {job}", context=context,
                                       kind=self._trace.SpanKind.INTERNAL, attributes={
                                           "cronjobs.job": job, "cronjobs.run_id": run_id,
                                           "cronjobs.slot": slot.astimezone(dt.UTC).isoformat(),
                                           "cronjobs.attempt": attempt})
        self._runs[run_id] = span
        carrier: dict[str, str] = {}
        self._propagator.inject(carrier, context=self._trace.set_span_in_context(span))
        return carrier.get("traceparent")

    def run_ended(self, run_id: int, outcome: str, status: str | None,
                  error: str | None) -> None:
        span = self._runs.pop(run_id, None)
        if span is None:
            return
        span.set_attribute("cronjobs.outcome", outcome)
        if status is not None:
            span.set_attribute("cronjobs.status", status)
        if outcome != "succeeded":
            from opentelemetry.trace import Status, StatusCode  # noqa: PLC0415

            span.set_status(Status(StatusCode.ERROR, error or outcome))
        span.end()

    def close(self, counts: Mapping[str, int], error: str | None) -> None:
        """End the open spans and the tick's (flushing what this module set up)."""
        for run_id in list(self._runs):
            self.run_ended(run_id, "unknown", None, "the tick ended before the run did")
        for key, value in counts.items():
            self._tick.set_attribute(f"cronjobs.{key}", value)
        if error is not None:
            from opentelemetry.trace import Status, StatusCode  # noqa: PLC0415

            self._tick.set_status(Status(StatusCode.ERROR, error))
        self._tick.end()
        try:
            if self._owned:
                self._provider.shutdown()
            else:
                self._provider.force_flush()
        except Exception as exc:  # an exporter's trouble never fails the tick
            log.warning("could not export the traces: %s", exc, extra={"action": "tracing"})
