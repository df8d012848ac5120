"""``/metrics`` rendered for a fleet of N sessions: tripwire's own writer (``Metrics.render``)
against prometheus-client writing the same families (a custom collector, ``generate_latest``),
the measurement docs/dependencies.md's choice rests on.

    python -m pytest benchmarks/test_bench_metrics.py -q -s

Both read the same fleet the same way (each session's state and spend, the fleet's counters):
what differs is the writing of the text. The ratio is printed."""

from __future__ import annotations

import time
from typing import Any

import pytest

prometheus_client = pytest.importorskip("prometheus_client")

from prometheus_client.core import (  # noqa: E402
    CounterMetricFamily,
    GaugeMetricFamily,
    HistogramMetricFamily,
)

from tripwire import GuardrailsConfig  # noqa: E402
from tripwire.fleet.fleet import Fleet  # noqa: E402
from tripwire.interchange.events import parse_event  # noqa: E402
from tripwire.web.console import STATES, glance  # noqa: E402
from tripwire.web.operator import LATENCY_BUCKETS, Metrics  # noqa: E402

LOOP = [{"type": "turn_start"}] + [
    {"type": "call", "name": "read_file", "args": {"path": "a.py"}} for _ in range(5)]


def _fleet(n: int) -> tuple[Fleet, Metrics]:
    fleet = Fleet(GuardrailsConfig(mode="enforce", unattended=True, max_session_cost_usd=10.0))
    rows = []
    for i in range(n):
        rows += [(f"s{i}", parse_event(e)) for e in (LOOP if i % 10 == 0 else LOOP[:3])]
        rows.append((f"s{i}", parse_event({"type": "usage", "input_tokens": 1,
                                           "cost_usd": 0.001})))
    fleet.observe_many(rows)
    metrics = Metrics()
    for route in ("events", "messages"):
        for k in range(50):
            metrics.decided(route, k / 10_000, ["continue"] * 5)
            metrics.count(route, 200)
    return fleet, metrics


class _Collector:
    """The same families as ``Metrics.render``, written by prometheus-client."""

    def __init__(self, fleet: Fleet, metrics: Metrics) -> None:
        self.fleet, self.metrics = fleet, metrics

    def collect(self) -> Any:
        fleet, metrics = self.fleet, self.metrics
        snap = fleet.counters.snapshot()
        states = dict.fromkeys(STATES, 0)
        spent = 0.0
        for _, _, state, usd in glance(fleet, None):
            states[state] += 1
            spent += usd
        yield GaugeMetricFamily("tripwire_sessions", "Sessions in memory.", value=len(fleet))
        by_state = GaugeMetricFamily("tripwire_sessions_by_state", "by state", labels=["state"])
        for s, n in states.items():
            by_state.add_metric([s], n)
        yield by_state
        yield GaugeMetricFamily("tripwire_spent_usd", "spent", value=spent)
        alerts = CounterMetricFamily("tripwire_alerts", "alerts", labels=["signal", "severity"])
        for key, n in snap["alerts"].items():
            alerts.add_metric(key.split("/", 1), n)
        yield alerts
        trips = CounterMetricFamily("tripwire_trips", "trips", labels=["guardrail"])
        for guardrail, n in snap["trips"].items():
            trips.add_metric([guardrail], n)
        yield trips
        yield CounterMetricFamily("tripwire_refused_turns", "refused",
                                  value=snap["refused_turns"])
        with metrics.lock:
            requests = CounterMetricFamily("tripwire_http_requests", "answers",
                                           labels=["route", "code"])
            for (route, code), n in sorted(metrics.requests.items()):
                requests.add_metric([route, str(code)], n)
            yield requests
            latency = HistogramMetricFamily("tripwire_decision_seconds", "latency",
                                            labels=["route"])
            for route, (buckets, total) in sorted(metrics.latency.items()):
                running, out = 0, []
                for bound, n in zip((*map(str, LATENCY_BUCKETS), "+Inf"), buckets, strict=True):
                    running += n
                    out.append((bound, running))
                latency.add_metric([route], out, total[0])
            yield latency


def _best(fn: Any, rounds: int = 20) -> float:
    best = float("inf")
    for _ in range(rounds):
        started = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - started)
    return best


@pytest.mark.parametrize("sessions", [10, 1000, 10_000])
def test_render_time_hand_written_vs_prometheus_client(sessions: int) -> None:
    fleet, metrics = _fleet(sessions)
    registry = prometheus_client.CollectorRegistry()
    registry.register(_Collector(fleet, metrics))  # type: ignore[arg-type]
    ours = _best(lambda: metrics.render(fleet))
    theirs = _best(lambda: prometheus_client.generate_latest(registry))
    print(f"\n{sessions} sessions: hand-written {ours * 1e3:.2f} ms, prometheus-client "
          f"{theirs * 1e3:.2f} ms (ratio {theirs / ours:.2f})")
    assert metrics.render(fleet).count("\n") > 10
