"""``/metrics`` read by a real parser (prometheus-client's text parser, as Prometheus reads the
format): every family's name, type and label names, the naming rules (``tripwire_`` prefix,
``_total`` counters, ``_seconds`` histograms, no session id in a label), cumulative histogram
buckets; and the Grafana dashboard in examples/ uses only metric names a live ``tripwire serve``
exports."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("starlette", reason="tripwire serve needs the serve extra")
parser = pytest.importorskip("prometheus_client.parser",
                             reason="the exposition is checked with prometheus-client's parser "
                                    "(the test extra)")

import httpx  # noqa: E402
from starlette.testclient import TestClient  # noqa: E402

from tripwire import GuardrailsConfig  # noqa: E402
from tripwire.cli.serve import create_app  # noqa: E402
from tripwire.fleet.fleet import Fleet  # noqa: E402
from tripwire.web.notify import Notifier  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
DASHBOARD = ROOT / "examples" / "grafana" / "tripwire.json"
TOKEN = "a token for the tests"
AUTH = {"Authorization": f"Bearer {TOKEN}"}
LOOP = [{"type": "turn_start"}] + [
    {"type": "call", "name": "read_file", "args": {"path": "a.py"}} for _ in range(5)]

#: every family tripwire serve exports: its type and its label names (docs/fleet.md's table)
FAMILIES = {
    "tripwire_sessions": ("gauge", set()),
    "tripwire_sessions_by_state": ("gauge", {"state"}),
    "tripwire_spent_usd": ("gauge", set()),
    "tripwire_alerts_total": ("counter", {"signal", "severity"}),
    "tripwire_trips_total": ("counter", {"guardrail"}),
    "tripwire_refused_turns_total": ("counter", set()),
    "tripwire_callback_errors_total": ("counter", set()),
    "tripwire_http_events_total": ("counter", set()),
    "tripwire_http_requests_total": ("counter", {"route", "code"}),
    "tripwire_decisions_total": ("counter", {"decision"}),
    "tripwire_decision_seconds": ("histogram", {"route"}),
    "tripwire_notifications_sent_total": ("counter", set()),
    "tripwire_notifications_dropped_total": ("counter", set()),
    "tripwire_notifications_retries_total": ("counter", set()),
}
SESSIONS = ("s-loop", "s-calm", "s-cost")


def _families(text: str) -> dict[str, Any]:
    """The parsed families by their exposition name (the parser drops a counter's _total)."""
    out = {}
    for family in parser.text_string_to_metric_families(text):
        name = family.name + ("_total" if family.type == "counter" else "")
        out[name] = family
    return out


@pytest.fixture
def exposition(implementation: str) -> str:
    notifier = Notifier([])  # no URL: its counters exported, at 0
    fleet = Fleet(GuardrailsConfig(mode="enforce", unattended=True, max_session_cost_usd=0.5),
                  implementation=implementation)
    client = TestClient(create_app(fleet, TOKEN, notifier))
    client.post("/sessions/s-loop/events", json=LOOP, headers=AUTH)
    client.post("/sessions/s-loop/events", json={"type": "turn_start"}, headers=AUTH)
    client.post("/sessions/s-calm/events", json={"type": "turn_start"}, headers=AUTH)
    client.post("/sessions/s-cost/events", json=[
        {"type": "turn_start"}, {"type": "usage", "input_tokens": 1, "cost_usd": 0.75}],
        headers=AUTH)
    client.get("/metrics")  # a 401, counted
    return client.get("/metrics", headers=AUTH).text


def test_every_family_has_its_type_labels_and_a_conventional_name(exposition: str) -> None:
    families = _families(exposition)
    assert {n: (f.type, set().union(*[set(s.labels) - {"le"} for s in f.samples]) if f.samples
                else set()) for n, f in families.items()} == FAMILIES
    for name, family in families.items():
        assert re.fullmatch(r"tripwire_[a-z][a-z_]*[a-z]", name), name
        assert family.documentation, f"{name} has no HELP"
        if family.type == "counter":
            assert name.endswith("_total") and all(
                s.name in (name, name[:-6] + "_created") for s in family.samples), name
        if family.type == "histogram":
            assert name.endswith("_seconds"), name
        for sample in family.samples:  # bounded cardinality: never a session's id
            assert not set(sample.labels.values()) & set(SESSIONS), sample


def test_the_values_say_what_happened(exposition: str) -> None:
    families = _families(exposition)

    def value(name: str, **labels: str) -> float:
        (hit,) = [s.value for s in families[name].samples
                  if s.name == name and s.labels == labels]
        return float(hit)

    assert value("tripwire_sessions") == 3
    assert {s.labels["state"]: s.value for s in families["tripwire_sessions_by_state"].samples} \
        == {"watching": 1, "warned": 0, "halted": 2, "exhausted": 0, "paused": 0}
    assert value("tripwire_spent_usd") == 0.75
    assert value("tripwire_trips_total", guardrail="watchdog") == 1
    assert value("tripwire_alerts_total", signal="repeated-tool-call", severity="critical") == 1
    assert value("tripwire_refused_turns_total") == 1
    assert value("tripwire_http_requests_total", route="metrics", code="401") == 1
    assert value("tripwire_http_events_total") == 10
    # 10 events: the loop's halt at its sixth, the refused turn, the cost ceiling's halt
    decisions = {s.labels["decision"]: s.value for s in families["tripwire_decisions_total"].samples}
    assert decisions == {"continue": 7, "halt_session": 2, "refuse_turn": 1}, decisions


def test_the_latency_histogram_is_cumulative_and_counts_every_request(exposition: str) -> None:
    family = _families(exposition)["tripwire_decision_seconds"]
    buckets = [(s.labels["le"], s.value) for s in family.samples if s.name.endswith("_bucket")]
    counts = [v for _, v in buckets]
    assert counts == sorted(counts) and buckets[-1][0] == "+Inf"
    (count,) = [s.value for s in family.samples if s.name.endswith("_count")]
    (total,) = [s.value for s in family.samples if s.name.endswith("_sum")]
    assert count == buckets[-1][1] == 4  # four POSTs of events
    assert 0 < total < 10
    assert {s.labels["route"] for s in family.samples} == {"events"}


def test_label_values_are_escaped() -> None:
    from tripwire.web.operator import _labels

    text = "# TYPE tripwire_x gauge\ntripwire_x" + _labels(a='q"uo\\te\nnl') + " 1\n"
    (family,) = parser.text_string_to_metric_families(text)
    assert family.samples[0].labels == {"a": 'q"uo\\te\nnl'}


# --- the Grafana dashboard names only what a live tripwire serve exports -----------------------

_PROMQL_WORDS = {"sum", "by", "rate", "increase", "histogram_quantile", "le", "without", "avg",
                 "max", "min", "count", "on", "ignoring", "group_left", "irate"}


def _expressions(node: Any) -> list[str]:
    if isinstance(node, dict):
        found = [node["expr"]] if isinstance(node.get("expr"), str) else []
        return found + [e for v in node.values() for e in _expressions(v)]
    if isinstance(node, list):
        return [e for v in node for e in _expressions(v)]
    return []


def _metric_names(expr: str) -> set[str]:
    """The metric names an expression selects: identifiers outside braces, strings and range
    brackets that are not PromQL's own words."""
    bare = re.sub(r'"(?:[^"\\]|\\.)*"', '""', expr)
    bare = re.sub(r"\{[^}]*\}|\[[^]]*\]", " ", bare)
    bare = re.sub(r"\b(by|without|on|ignoring)\s*\([^)]*\)", " ", bare)
    return {w for w in re.findall(r"[a-zA-Z_:][a-zA-Z0-9_:]*", bare)
            if w not in _PROMQL_WORDS and not re.fullmatch(r"[0-9.]+", w)}


def _live_names(tmp_path: Path, implementation: str) -> set[str]:
    """Every sample name a real tripwire serve exports, from its /metrics."""
    (tmp_path / "token").write_text(TOKEN)
    env = {k: v for k, v in os.environ.items() if k != "TRIPWIRE_SERVE_TOKEN"}
    env["TRIPWIRE_IMPLEMENTATION"] = implementation
    proc = subprocess.Popen(
        [sys.executable, "-m", "tripwire", "serve", "--port", "0", "--token-file",
         str(tmp_path / "token"), "--notify", "http://127.0.0.1:9/closed"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
    try:
        assert proc.stdout is not None
        line = proc.stdout.readline()
        assert "listening on" in line, line
        url = line.rsplit(" ", 1)[1].strip()
        with httpx.Client(base_url=url, headers=AUTH, timeout=10) as http:
            http.post("/sessions/d/events", json=LOOP)
            text = http.get("/metrics").text
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.communicate(timeout=30)
    return {s.name for f in parser.text_string_to_metric_families(text) for s in f.samples}


def test_the_dashboard_uses_only_metrics_tripwire_exports(tmp_path: Path,
                                                          implementation: str) -> None:
    dashboard = json.loads(DASHBOARD.read_text(encoding="utf-8"))
    exprs = _expressions(dashboard["panels"])
    assert len(exprs) >= 10
    used = set().union(*map(_metric_names, exprs))
    assert used and all(n.startswith("tripwire_") for n in used), used
    exported = _live_names(tmp_path, implementation)
    assert used - exported == set(), "the dashboard names metrics tripwire does not export"
    # and the dashboard shows every family but the HTTP-only ones somewhere
    families = {re.sub(r"_(bucket|sum|count)$", "", n) for n in used}
    assert {"tripwire_sessions_by_state", "tripwire_trips_total", "tripwire_alerts_total",
            "tripwire_decision_seconds", "tripwire_decisions_total"} <= families


def test_the_name_extraction_reads_promql() -> None:
    assert _metric_names('sum by (le, route) (rate(tripwire_x_bucket{code=~"4..", a="b c"}[5m]))'
                         ) == {"tripwire_x_bucket"}
    assert _metric_names("tripwire_a / on (x) tripwire_b") == {"tripwire_a", "tripwire_b"}


def test_the_gateway_exports_its_decision_latency_and_faults(implementation: str) -> None:
    """The gateway's /tripwire/metrics: the same writer, its API routes timed (the check before
    a request goes upstream), its upstream faults exported from the start."""
    pytest.importorskip("aiohttp", reason="the gateway needs the gateway extra (aiohttp)")
    from gateway_support import FakeModel, Harness, looping, serving

    from tripwire.gateway.app import Gateway
    from tripwire.gateway.app import create_app as gateway_app
    from tripwire.gateway.upstreams import Upstream

    call = {"name": "Bash", "input": {"command": "echo hi >> f"}}
    with FakeModel(looping("anthropic", call)) as model:
        fleet = Fleet(GuardrailsConfig(mode="enforce", unattended=True),
                      implementation=implementation, feedback_at_once=True)
        gateway = Gateway(fleet, {"anthropic": Upstream("anthropic", model.url, None)}, None,
                          store_label="s.db")
        with serving(gateway_app(gateway, TOKEN)) as url:
            Harness(httpx.Client(base_url=url, timeout=10), "anthropic", stream=False).turn("go")
            text = httpx.get(f"{url}/tripwire/metrics", headers=AUTH).text
    families = _families(text)
    latency = families["tripwire_decision_seconds"]
    (count,) = [s.value for s in latency.samples if s.name.endswith("_count")]
    requests = sum(s.value for s in families["tripwire_http_requests_total"].samples
                   if s.labels["route"] == "anthropic")
    assert count == requests == len(model.requests) == 5  # each request checked, then sent
    assert {s.labels["route"] for s in latency.samples} == {"anthropic"}
    assert families["tripwire_gateway_upstream_faults_total"].samples[0].value == 0
    assert {s.labels["state"]: s.value for s in families["tripwire_sessions_by_state"].samples
            }["halted"] == 1
