"""OpenTelemetry export (tripwire.harnesses.otel): alerts, cuts, halts, resets and refusals as span events
on the host's current span and as counters and a histogram, with GenAI semantic-convention
names where they exist; checked with the SDK's in-memory span exporter and metric reader."""

from __future__ import annotations

from typing import Any

import pytest

pytest.importorskip("opentelemetry.sdk", reason="the OpenTelemetry tests need opentelemetry-sdk")
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import InMemoryMetricReader
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import (
    InMemorySpanExporter,
)

from tripwire import Guardrails, GuardrailsConfig
from tripwire.errors import GuardrailHalted, ResetRefused
from tripwire.harnesses.otel import OtelExporter

CONFIG = GuardrailsConfig(mode="enforce", unattended=False, max_session_cost_usd=1.0)
CALL = ("read_file", '{"path": "src/a.py"}')


@pytest.fixture
def otel() -> tuple[Any, InMemorySpanExporter, InMemoryMetricReader, MeterProvider]:
    spans = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(spans))
    reader = InMemoryMetricReader()
    meters = MeterProvider(metric_readers=[reader])
    return provider.get_tracer("harness"), spans, reader, meters


def metric_points(reader: InMemoryMetricReader) -> dict[str, list[tuple[dict[str, Any], Any]]]:
    out: dict[str, list[tuple[dict[str, Any], Any]]] = {}
    data = reader.get_metrics_data()
    for rm in data.resource_metrics:
        for sm in rm.scope_metrics:
            for m in sm.metrics:
                for p in m.data.data_points:
                    value = p.value if hasattr(p, "value") else (p.count, p.sum)
                    out.setdefault(m.name, []).append((dict(p.attributes), value))
    return out


def test_a_watchdog_halt_is_an_alert_and_a_halt_on_the_tool_span(otel, implementation) -> None:
    tracer, spans, reader, meters = otel
    seen: list[str] = []
    exporter = OtelExporter(meter_provider=meters, agent_name="coder",
                            provider_name="anthropic", on_event=lambda e: seen.append(e.kind))
    g = Guardrails(CONFIG, session_id="s-1", on_event=exporter, implementation=implementation)
    g.start_turn()
    for i in range(5):
        with tracer.start_as_current_span(f"execute_tool read_file #{i}"):
            decision = g.on_call(*CALL)
    assert decision.halt_session
    assert seen == ["alert", "halt"]  # the host's own callback still runs, first
    finished = spans.get_finished_spans()
    assert [len(s.events) for s in finished] == [0, 0, 0, 0, 2]
    blocked = finished[-1]
    assert blocked.attributes["error.type"] == "tripwire.halt"
    alert, halt = blocked.events
    common = {"gen_ai.conversation.id": "s-1", "gen_ai.agent.name": "coder",
              "gen_ai.provider.name": "anthropic", "tripwire.guardrail": "watchdog",
              "tripwire.signal": "repeated-tool-call", "tripwire.severity": "critical",
              "tripwire.event": 5, "gen_ai.tool.name": "read_file"}
    assert alert.name == "tripwire.alert"
    assert dict(alert.attributes) == {**common, "tripwire.reason": decision.alerts[0].reason}
    assert halt.name == "tripwire.halt"
    assert dict(halt.attributes) == {**common, "tripwire.action": "halt_session",
                                     "tripwire.reason": decision.reason}
    points = metric_points(reader)
    assert points["tripwire.alerts"] == [({"tripwire.guardrail": "watchdog",
                                           "tripwire.signal": "repeated-tool-call",
                                           "tripwire.severity": "critical"}, 1)]
    assert points["tripwire.halts"] == [({"tripwire.guardrail": "watchdog",
                                          "tripwire.signal": "repeated-tool-call",
                                          "tripwire.severity": "critical",
                                          "tripwire.action": "halt_session"}, 1)]
    # the histogram holds the count the signal tripped at: 5 calls in a row
    assert points["tripwire.alert.count"] == [({"tripwire.signal": "repeated-tool-call"},
                                               (1, 5))]


def test_cost_halt_refused_turn_and_resets(otel, implementation) -> None:
    tracer, spans, reader, meters = otel
    g = Guardrails(CONFIG, session_id="s-2", on_event=OtelExporter(meter_provider=meters),
                   implementation=implementation)
    with tracer.start_as_current_span("invoke_agent coder"):
        g.start_turn()
        assert g.on_usage(cost_usd=1.5).halt_session
        with pytest.raises(GuardrailHalted):
            g.start_turn()
        with pytest.raises(ResetRefused):
            g.reset()
        g.reset(additional_budget_usd=1.0)
    (span,) = spans.get_finished_spans()
    assert [e.name for e in span.events] == [
        "tripwire.halt", "tripwire.refused_turn", "tripwire.reset_refused", "tripwire.reset"]
    assert span.attributes["error.type"] == "tripwire.halt"
    halt = dict(span.events[0].attributes)
    assert (halt["tripwire.guardrail"], halt["tripwire.action"], halt["gen_ai.conversation.id"]
            ) == ("cost_ceiling", "halt_session", "s-2")
    assert halt["tripwire.reason"].startswith("per-session cost ceiling exceeded")
    points = metric_points(reader)
    assert {name: sum(v for _, v in p) for name, p in points.items()} == {
        "tripwire.halts": 1, "tripwire.refused_turns": 1, "tripwire.reset_refusals": 1,
        "tripwire.resets": 1}
    assert points["tripwire.halts"][0][0] == {"tripwire.guardrail": "cost_ceiling",
                                              "tripwire.action": "halt_session"}


def test_without_a_recording_span_only_the_metrics_move(otel, implementation) -> None:
    _, spans, reader, meters = otel
    g = Guardrails(CONFIG, session_id="s-3", on_event=OtelExporter(meter_provider=meters),
                   implementation=implementation)
    g.start_turn()
    for _ in range(5):
        g.on_call(*CALL)
    assert spans.get_finished_spans() == ()
    assert {n: sum(v for _, v in p) for n, p in metric_points(reader).items()
            if n != "tripwire.alert.count"} == {"tripwire.alerts": 1, "tripwire.halts": 1}
