"""OpenTelemetry export of what the guardrails decide (``tripwire[otel]``: opentelemetry-api).

``OtelExporter`` is an operator callback (``on_event``): hand it to ``Guardrails`` or ``Fleet``
and each alert, cut, halt, reset, refused reset and refused turn becomes

- a span event on the host's current span (the ``execute_tool`` or ``invoke_agent`` span the
  harness has open when it asks), named ``tripwire.<kind>`` (``tripwire.alert``,
  ``tripwire.cut``, ``tripwire.halt``, ``tripwire.reset``, ``tripwire.reset_refused``,
  ``tripwire.refused_turn``); a cut or halt also sets ``error.type`` on that span
  (``tripwire.cut`` / ``tripwire.halt``: the tool call in flight was blocked);
- a count on the counter ``tripwire.alerts`` / ``tripwire.cuts`` / ``tripwire.halts`` /
  ``tripwire.resets`` / ``tripwire.reset_refusals`` / ``tripwire.refused_turns``, and for an
  alert a value on the histogram ``tripwire.alert.count`` (the count the signal tripped at:
  repeated calls, failures in a row ...).

Attribute names follow the OpenTelemetry GenAI semantic conventions where one exists:
``gen_ai.conversation.id`` (the session id), ``gen_ai.tool.name`` (the tool an alert names),
``gen_ai.agent.name`` and ``gen_ai.provider.name`` (when given to the exporter), ``error.type``.
The rest is ``tripwire.*``: ``tripwire.guardrail``, ``tripwire.signal``, ``tripwire.severity``,
``tripwire.action``, ``tripwire.reason``, ``tripwire.event``. Metric attributes stay
low-cardinality (no session ids, no reasons).

Nothing is added to the observation path: the guardrails call an operator callback only when
they report something, and without one they test one ``None``. ``on_event`` chains a callback
the host already had (called first).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from ..policy.reporting import OperatorEvent

__all__ = ["OtelExporter", "EXPORTED_KINDS"]

#: OperatorEvent kinds exported, and their counter names.
EXPORTED_KINDS = {
    "alert": "tripwire.alerts",
    "cut": "tripwire.cuts",
    "halt": "tripwire.halts",
    "reset": "tripwire.resets",
    "reset_refused": "tripwire.reset_refusals",
    "refused_turn": "tripwire.refused_turns",
}
_COUNTER_HELP = {
    "alert": "watchdog alerts raised",
    "cut": "turns cut by a guardrail",
    "halt": "sessions halted by a guardrail",
    "reset": "operator resets applied",
    "reset_refused": "operator resets refused (they would re-trip at once)",
    "refused_turn": "turns refused because the session is halted",
}


class OtelExporter:
    """``Guardrails(on_event=OtelExporter())``: span events and metrics for tripwire's reports.

    ``tracer_provider`` is not needed (events go on the current span, whoever made it);
    ``meter_provider`` defaults to the global one. ``agent_name`` / ``provider_name`` are copied
    onto every span event as ``gen_ai.agent.name`` / ``gen_ai.provider.name``."""

    def __init__(self, *, meter_provider: Any = None, agent_name: str | None = None,
                 provider_name: str | None = None,
                 on_event: Callable[[OperatorEvent], object] | None = None) -> None:
        from opentelemetry import metrics, trace

        self._trace = trace
        meter = (meter_provider or metrics.get_meter_provider()).get_meter("tripwire")
        self._counters = {kind: meter.create_counter(name, unit="1",
                                                     description=_COUNTER_HELP[kind])
                          for kind, name in EXPORTED_KINDS.items()}
        self._alert_count = meter.create_histogram(
            "tripwire.alert.count", unit="1",
            description="the count a watchdog signal tripped at (repeats, failures in a row)")
        self._common: dict[str, str] = {}
        if agent_name:
            self._common["gen_ai.agent.name"] = agent_name
        if provider_name:
            self._common["gen_ai.provider.name"] = provider_name
        self._chained = on_event

    def __call__(self, event: OperatorEvent) -> None:
        if self._chained is not None:
            self._chained(event)
        counter = self._counters.get(event.kind)
        if counter is None:
            return  # feedback_withdrawn, context records: log lines, not exported
        attrs: dict[str, Any] = {"gen_ai.conversation.id": event.session_id, **self._common}
        metric: dict[str, Any] = {}
        if event.guardrail is not None:
            attrs["tripwire.guardrail"] = metric["tripwire.guardrail"] = event.guardrail
        alert = event.alert
        if alert is not None:
            attrs["tripwire.signal"] = metric["tripwire.signal"] = alert.signal
            attrs["tripwire.severity"] = metric["tripwire.severity"] = alert.severity
            attrs["tripwire.event"] = alert.event
            if alert.tool:
                attrs["gen_ai.tool.name"] = alert.tool
        decision = event.decision
        if decision is not None and getattr(decision, "action", None):
            attrs["tripwire.action"] = metric["tripwire.action"] = decision.action
        reason = getattr(decision, "reason", None) or (alert.reason if alert else None)
        attrs["tripwire.reason"] = reason or event.message
        span = self._trace.get_current_span()
        if span.is_recording():
            span.add_event(f"tripwire.{event.kind}", attributes=attrs)
            if event.kind in ("cut", "halt"):
                span.set_attribute("error.type", f"tripwire.{event.kind}")
        counter.add(1, metric)
        if alert is not None and event.kind == "alert":
            self._alert_count.record(alert.count, {"tripwire.signal": alert.signal})
