"""Every line of ../shared/conformance: watchdog scenarios and argument pairs, both engines.

The ``tripwire`` field of each line is the expectation (the reference Go implementation's own
``expect`` only where ``tripwire`` is ``"same"``). Alerts are compared as the complete ordered
list: within one event they follow the SPEC §1 table order (SPEC §10.12).
"""

from __future__ import annotations

import json
from typing import Any

import pytest
from conftest import CONFORMANCE, feed, need_shared, read_jsonl

from tripwire import Watchdog, WatchdogConfig
from tripwire.signals import SIGNAL_IDS

need_shared("conformance")

VECTORS = read_jsonl(CONFORMANCE / "reference-vectors.jsonl")
PAIRS = read_jsonl(CONFORMANCE / "canonical-pairs.jsonl")

#: The data's "default" is tripwire's eight signals of SPEC §1 with their defaults (its
#: README); SPEC §7.3's repeated-failure and §12.4's signals came later and are tested in
#: test_repeated_failure.py, test_recycled_calls.py and test_anchor_signals.py (with vectors of
#: this data's shape).
SPEC1_SIGNALS = frozenset(SIGNAL_IDS) - {
    "repeated-failure", "recycled-calls", "unknown-tool", "repeated-text", "empty-responses",
    "compaction-storm", "persistent-warnings", "looping-text"}


def config_for(signals: Any) -> WatchdogConfig:
    if signals == "default":
        return WatchdogConfig(only=SPEC1_SIGNALS)
    knobs: dict[str, dict[str, Any]] = {}
    for entry in signals:
        entry = dict(entry)
        knobs[entry.pop("type")] = entry
    return WatchdogConfig(signals=knobs, only=frozenset(knobs))


#: Vectors whose ``tripwire`` expectation SPEC §12 changes: {name: (the new expectation, the
#: §12 sentence that changes it)}. Never silently: each entry must still differ from the data.
SPEC12_OVERRIDES: dict[str, tuple[list[dict[str, Any]], str]] = {
    "tw-nns-empty-string-is-a-payload": (
        [],
        "§12.1: 'A payload that is empty or only whitespace has the empty answer: no-new-state "
        "treats it as no payload (it resets the run and is never \"already seen\" - writes "
        "that return nothing are not a stall)', superseding §10.7's 'An empty string is a "
        "payload'.",
    ),
}


def data_expectation(vector: dict[str, Any]) -> list[dict[str, Any]]:
    tw = vector["tripwire"]
    return vector["expect"] if tw == "same" else tw["expect"]


def expectation(vector: dict[str, Any]) -> list[dict[str, Any]]:
    override = SPEC12_OVERRIDES.get(vector["name"])
    return override[0] if override is not None else data_expectation(vector)


def _vector_params():
    for v in VECTORS:
        yield pytest.param(v, id=v["name"])


@pytest.mark.parametrize("vector", list(_vector_params()))
def test_reference_vector(vector: dict[str, Any], implementation: str) -> None:
    watchdog = Watchdog(config_for(vector["signals"]), implementation=implementation)
    got = []
    for index, event in enumerate(vector["events"]):
        for alert in feed(watchdog, event):
            assert alert.event == index
            got.append(alert)
    expected = expectation(vector)
    assert [(a.event, a.signal, a.severity) for a in got] == [
        (e["after_event"], e["signal"], e["severity"]) for e in expected
    ]
    for alert, exp in zip(got, expected, strict=True):
        if "scope" in exp:
            assert alert.scope == exp["scope"]
        check_texts(alert, exp)


def check_texts(alert: Any, exp: dict[str, Any]) -> None:
    for s in exp.get("reason_contains", ()):
        assert s in alert.reason, (s, alert.reason)
    for s in exp.get("guidance_contains", ()):
        assert s in alert.guidance, (s, alert.guidance)
    for s in exp.get("reason_excludes", ()):
        assert s not in alert.reason, (s, alert.reason)
    for s in exp.get("guidance_excludes", ()):
        assert s not in alert.guidance, (s, alert.guidance)
    for s, n in exp.get("reason_count", {}).items():
        assert alert.reason.count(s) == n, (s, n, alert.reason)
    if exp.get("texts_valid_utf8"):
        for text in (alert.reason, alert.guidance):
            text.encode("utf-8")  # no lone surrogates
            assert "\ufffd" not in text


def _pair_params():
    for p in PAIRS:
        tw = p["tripwire"]
        if tw.get("equal") is None:  # the one ambiguous pair: not tested, by the data's own rule
            continue
        yield pytest.param(p, id=f"{p['source']}:{p['a']}|{p['b']}")


@pytest.mark.parametrize("pair", list(_pair_params()))
def test_canonical_pair(pair: dict[str, Any], implementation: str) -> None:
    tw = pair["tripwire"]
    # same_key: the cycle and density detectors' key
    probe = Watchdog(implementation=implementation)
    from tripwire.engine import select as _engine

    canonical_key = _engine.load(implementation).canonical_key
    assert (canonical_key("tool", pair["a"]) == canonical_key("tool", pair["b"])) is tw["same_key"]
    # equal: a then b is a repeat run of two (and b then a: the relation is symmetric)
    only_repeat = WatchdogConfig(
        signals={"repeated-tool-call": {"threshold": 2}}, only=frozenset({"repeated-tool-call"})
    )
    for first, second in ((pair["a"], pair["b"]), (pair["b"], pair["a"])):
        wd = Watchdog(only_repeat, implementation=implementation)
        wd.observe_call("tool", first)
        fired = wd.observe_call("tool", second)
        assert bool(fired) is tw["equal"], json.dumps([first, second])
    del probe


def test_every_override_names_a_vector_whose_data_it_changes() -> None:
    by_name = {v["name"]: v for v in VECTORS}
    for name, (expected, reason) in SPEC12_OVERRIDES.items():
        assert name in by_name, name
        assert expected != data_expectation(by_name[name]), f"{name}: the override is stale"
        assert reason.startswith("§12."), name


def test_every_signal_is_exercised() -> None:
    """The vectors reach every one of the eight signals (guards against a silently empty run)."""
    seen = {e["signal"] for v in VECTORS for e in expectation(v)}
    assert seen == SPEC1_SIGNALS
