"""Optional OpenTelemetry tracing, with the SDK's in-memory exporter: a span per tick and
per run attempt, the run's context handed to commands (TRACEPARENT) and handlers
(ctx.traceparent); and without the OTEL variables (or without the extra) nothing of
OpenTelemetry is imported."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import psycopg
import pytest

from conftest import Invoke, one_run
from cronjobs.db.store import Store
from cronjobs.execution import tracing
from cronjobs.execution.context import JobContext
from cronjobs.tick import TickOptions, tick

trace = pytest.importorskip("opentelemetry.trace", reason="the otel extra is not installed")
from opentelemetry.sdk.trace import TracerProvider  # noqa: E402
from opentelemetry.sdk.trace.export import SimpleSpanProcessor  # noqa: E402
from opentelemetry.sdk.trace.export.in_memory_span_exporter import (  # noqa: E402
    InMemorySpanExporter,
)

EXPORTER = InMemorySpanExporter()
_PROVIDER = TracerProvider()
_PROVIDER.add_span_processor(SimpleSpanProcessor(EXPORTER))
trace.set_tracer_provider(_PROVIDER)  # once per process, as an application would

JOBS = '''
import cronjobs


@cronjobs.job("traced")
def traced(ctx):
    print("traceparent", ctx.traceparent)
    return {"traceparent": ctx.traceparent}
'''


@pytest.fixture
def traced(monkeypatch: pytest.MonkeyPatch) -> Iterator[InMemorySpanExporter]:
    monkeypatch.setenv("OTEL_TRACES_EXPORTER", "console")  # asks for traces
    monkeypatch.delenv("TRACEPARENT", raising=False)
    EXPORTER.clear()
    yield EXPORTER
    EXPORTER.clear()


def _traceparent(span: Any) -> str:
    context = span.get_span_context()
    return f"00-{context.trace_id:032x}-{context.span_id:016x}-{int(context.trace_flags):02x}"


def test_a_tick_and_its_runs_are_spans(cli: Invoke, store: Store, db: psycopg.Connection[Any],
                                       traced: InMemorySpanExporter) -> None:
    one_run(cli, "echoer", "--command", 'echo "tp=$TRACEPARENT"')
    one_run(cli, "broken", "--command", "exit 2", "--max-attempts", "1")
    report = tick(store, TickOptions(worker="traced-tick", concurrency=1))
    spans = {span.name: span for span in traced.get_finished_spans()}
    assert set(spans) == {"cronjobs tick", "cronjobs run echoer", "cronjobs run broken"}
    top = spans["cronjobs tick"]
    assert top.parent is None
    assert top.attributes is not None
    assert (top.attributes["cronjobs.tick_id"], top.attributes["cronjobs.worker"],
            top.attributes["cronjobs.claimed"], top.attributes["cronjobs.succeeded"],
            top.attributes["cronjobs.failed"]) == (report.tick_id, "traced-tick", 2, 1, 1)
    runs = {r[0]: r[1:] for r in db.execute(
        "SELECT d.name, r.id, r.output_tail FROM job_runs r JOIN job_definitions d "
        "ON d.id = r.definition_id").fetchall()}
    for name, outcome, status in (("echoer", "succeeded", "succeeded"),
                                  ("broken", "failed", "dead")):
        span = spans[f"cronjobs run {name}"]
        assert span.parent is not None
        assert span.parent.span_id == top.get_span_context().span_id
        assert span.get_span_context().trace_id == top.get_span_context().trace_id
        assert dict(span.attributes or {}) == {
            "cronjobs.job": name, "cronjobs.run_id": runs[name][0],
            "cronjobs.slot": "2020-01-01T00:00:00+00:00", "cronjobs.attempt": 1,
            "cronjobs.outcome": outcome, "cronjobs.status": status}
        assert span.status.is_ok == (outcome == "succeeded")
    # the command got its own span's context
    assert runs["echoer"][1] == f"tp={_traceparent(spans['cronjobs run echoer'])}\n"


def test_a_handler_gets_the_context(store: Store, cli: Invoke, db: psycopg.Connection[Any],
                                    traced: InMemorySpanExporter, tmp_path: Path,
                                    monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "traced_jobs.py").write_text(JOBS)
    monkeypatch.syspath_prepend(str(tmp_path))
    one_run(cli, "traced")
    tick(store, TickOptions(worker="w", apps=("traced_jobs",), in_process=True))
    (span,) = [s for s in traced.get_finished_spans() if s.name == "cronjobs run traced"]
    assert db.execute("SELECT result FROM job_runs").fetchone() == (
        {"traceparent": _traceparent(span)},)


def test_a_tick_continues_the_trace_it_was_started_in(
        cli: Invoke, store: Store, traced: InMemorySpanExporter,
        monkeypatch: pytest.MonkeyPatch) -> None:
    parent = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"
    monkeypatch.setenv("TRACEPARENT", parent)
    tick(store, TickOptions(worker="w"))
    (top,) = traced.get_finished_spans()
    assert f"{top.get_span_context().trace_id:032x}" == "0af7651916cd43dd8448eb211c80319c"
    assert top.parent is not None and f"{top.parent.span_id:016x}" == "b7ad6b7169203331"


def test_the_context_reaches_a_handler_process() -> None:
    context = JobContext(run_id=1, job="j", scheduled_for=JobContext.from_dict(
        {"run_id": 1, "job": "j", "scheduled_for": "2020-01-01T00:00:00+00:00",
         "attempt": 1}).scheduled_for, attempt=1, traceparent="00-" + "a" * 32 + "-" + "b" * 16
        + "-01")
    assert JobContext.from_dict(context.to_dict()) == context
    assert context.environment()["TRACEPARENT"] == context.traceparent
    assert "TRACEPARENT" not in JobContext.from_dict(
        {"run_id": 1, "job": "j", "scheduled_for": "2020-01-01T00:00:00+00:00",
         "attempt": 1}).environment()


@pytest.mark.parametrize(("env", "wanted"), [
    ({}, False),
    ({"OTEL_TRACES_EXPORTER": "none"}, False),
    ({"OTEL_TRACES_EXPORTER": "otlp"}, True),
    ({"OTEL_EXPORTER_OTLP_ENDPOINT": "http://collector:4318"}, True),
    ({"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": "http://collector:4318/v1/traces"}, True),
    ({"OTEL_EXPORTER_OTLP_ENDPOINT": "http://c:4318", "OTEL_SDK_DISABLED": "true"}, False),
])
def test_which_variables_turn_tracing_on(env: dict[str, str], wanted: bool) -> None:
    assert tracing.wanted(env) is wanted


_TICK_AND_LOOK = """
import sys
{block}
from cronjobs.cli import main_group
code = main_group.main(args=["--database-url", sys.argv[1], "tick"], standalone_mode=False)
otel = {{m.split(".")[0] for m in sys.modules if m.startswith("opentelemetry")}}
print("imported:", sorted(otel))
"""

_BLOCK = """
class _NoOtel:
    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] == "opentelemetry":
            raise ImportError("no module named " + name)
sys.meta_path.insert(0, _NoOtel())
"""


def _tick_in_a_fresh_interpreter(database_url: str, env: dict[str, str], block: str = ""
                                 ) -> subprocess.CompletedProcess[str]:
    clean = {k: v for k, v in os.environ.items() if not k.startswith("OTEL_")}
    return subprocess.run([sys.executable, "-c", _TICK_AND_LOOK.format(block=block),
                           database_url], capture_output=True, text=True, timeout=120,
                          env={**clean, **env}, check=False)


def test_without_the_variables_nothing_is_imported(cli: Invoke, database_url: str) -> None:
    one_run(cli, "plain", "--command", "echo hi")
    result = _tick_in_a_fresh_interpreter(database_url, {})
    assert result.returncode == 0, result.stderr
    assert "imported: []" in result.stdout
    assert "succeeded 1" in result.stderr


def test_without_the_extra_a_traced_tick_still_runs(cli: Invoke, database_url: str) -> None:
    one_run(cli, "plain", "--command", "echo hi")
    result = _tick_in_a_fresh_interpreter(
        database_url, {"OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:9"}, _BLOCK)
    assert result.returncode == 0, result.stderr
    assert "imported: []" in result.stdout
    assert "OpenTelemetry tracing is configured but not installed" in result.stderr
    assert "succeeded 1" in result.stderr
