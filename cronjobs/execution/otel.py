"""The OpenTelemetry side of tracing (the ``otel`` extra): imported by
:func:`cronjobs.execution.tracing.start` only when tracing is asked for, so everything here
imports OpenTelemetry at the top."""

from __future__ import annotations

import datetime as dt
import logging
from collections.abc import Mapping
from typing import Any

from opentelemetry import trace
from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import (
    BatchSpanProcessor,
    ConsoleSpanExporter,
    SpanExporter,
)
from opentelemetry.trace import Status, StatusCode
from opentelemetry.trace.propagation.tracecontext import TraceContextTextMapPropagator

log = logging.getLogger(__name__)

NAME = "cronjobs"


def start(attributes: Mapping[str, Any], env: Mapping[str, str]) -> Spans:
    """The spans of a tick, its own started: on the process's SDK tracer provider when an
    application set one up, else on one made from the environment."""
    owned = None
    provider: Any = trace.get_tracer_provider()
    if not hasattr(provider, "force_flush"):  # no SDK provider yet: make one
        owned = _provider(env)
        provider = owned
    return Spans(provider, owned is not None, attributes, env.get("TRACEPARENT"))


def _provider(env: Mapping[str, str]) -> TracerProvider:
    exporter: SpanExporter
    if env.get("OTEL_TRACES_EXPORTER", "otlp").strip().lower() == "console":
        exporter = ConsoleSpanExporter()
    else:
        exporter = OTLPSpanExporter()
    provider = TracerProvider(resource=Resource.create(
        {"service.name": env.get("OTEL_SERVICE_NAME") or NAME}))
    provider.add_span_processor(BatchSpanProcessor(exporter))
    return provider


class Spans:
    """The spans of one tick: the tick's, and one per run attempt under it."""

    def __init__(self, provider: Any, owned: bool, attributes: Mapping[str, Any],
                 traceparent: str | None) -> None:
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
        context = trace.set_span_in_context(self._tick)
        span = self._tracer.start_span(f"cronjobs run {job}", context=context,
                                       kind=trace.SpanKind.INTERNAL, attributes={
                                           "cronjobs.job": job, "cronjobs.run_id": run_id,
                                           "cronjobs.slot": slot.astimezone(dt.UTC).isoformat(),
                                           "cronjobs.attempt": attempt})
        self._runs[run_id] = span
        carrier: dict[str, str] = {}
        self._propagator.inject(carrier, context=trace.set_span_in_context(span))
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
            span.set_status(Status(StatusCode.ERROR, error or outcome))
        span.end()

    def close(self, counts: Mapping[str, int], error: str | None) -> None:
        """End the open spans and the tick's (flushing what this module set up)."""
        for run_id in list(self._runs):
            self.run_ended(run_id, "unknown", None, "the tick ended before the run did")
        for key, value in counts.items():
            self._tick.set_attribute(f"cronjobs.{key}", value)
        if error is not None:
            self._tick.set_status(Status(StatusCode.ERROR, error))
        self._tick.end()
        try:
            if self._owned:
                self._provider.shutdown()
            else:
                self._provider.force_flush()
        except Exception as exc:  # an exporter's trouble never fails the tick
            log.warning("could not export the traces: %s", exc, extra={"action": "tracing"})
