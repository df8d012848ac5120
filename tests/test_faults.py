"""Fault-injection regressions: inputs and races that crashed the host or lost durable rows.

Each test here failed before its fix (a segfault, a RecursionError out of the hot path, a halt
lost on eviction, a decision blocked by a held store lock ...). Crash trials with real
processes killed at random points are in ``test_crash.py``; store tampering in
``test_tamper.py``.
"""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap

import pytest

from tripwire import GuardrailsConfig, InvalidEvent, Watchdog
from tripwire.events import Text
from tripwire.fleet import Fleet

WARN = GuardrailsConfig(mode="warn", unattended=False)


def nested(depth: int) -> dict:
    root: dict = {}
    cur = root
    for _ in range(depth):
        cur["a"] = {}
        cur = cur["a"]
    return root


class ReprRaises:
    def __repr__(self) -> str:
        raise RuntimeError("repr is broken")


# -- batch ingest: the first row's session id ---------------------------------------------------


@pytest.mark.parametrize("rows", [
    [(None, "text", "x")],
    [(None, "call", "read_file", "{}")],
    [(None, Text("x"))],
    [(None, "text", "x"), ("s1", "text", "y")],
], ids=["text", "call", "event-object", "then-a-valid-row"])
def test_a_first_row_without_session_id_is_invalid(rows: list, implementation: str) -> None:
    fleet = Fleet(WARN, implementation=implementation)
    with pytest.raises(InvalidEvent, match=r"event 0: a session id is a non-empty str, not None"):
        fleet.observe_many(rows)
    assert len(fleet) == 0  # nothing was observed


def test_a_column_batch_with_a_leading_none_session_is_invalid(implementation: str) -> None:
    fleet = Fleet(WARN, implementation=implementation)
    with pytest.raises(InvalidEvent, match=r"event 0: a session id is a non-empty str, not None"):
        fleet.observe_many({"session": [None, "s1"], "kind": ["text", "text"],
                            "text": ["x", "y"]})
    assert len(fleet) == 0


def test_the_native_batch_decoder_does_not_crash_the_process() -> None:
    """The segfault itself, in a child process so a regression reports instead of killing
    the test run."""
    code = textwrap.dedent("""
        from tripwire import GuardrailsConfig, InvalidEvent
        from tripwire.events import Text
        from tripwire.fleet import Fleet
        for rows in ([(None, "text", "x")], [(None, "call", "f", "{}")], [(None, Text("x"))]):
            try:
                Fleet(GuardrailsConfig(mode="warn", unattended=False),
                      implementation="native").observe_many(rows)
            except InvalidEvent:
                pass
            else:
                raise SystemExit("accepted a row without a session id")
        print("ok")
    """)
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          timeout=120, check=False, env={**os.environ})
    assert proc.returncode == 0, (proc.returncode, proc.stderr)
    assert proc.stdout.strip() == "ok"


# -- deeply nested and unrepresentable args --------------------------------------------------


def test_deeply_nested_decoded_args_are_observed(implementation: str) -> None:
    """10,000 levels of dict, passed as a Python object: a call like any other (compared as
    the raw bytes of its serialization, past the canonicalizer's depth), never RecursionError."""
    w = Watchdog(implementation=implementation)
    args = nested(10_000)
    alerts = [w.observe_call("write", args) for _ in range(5)]
    assert [a.signal for a in alerts[4]] == ["repeated-tool-call"]
    assert all(not a for a in alerts[:4])
    assert alerts[4][0].reason.count('{"a":') >= 10  # the quote is the serialization, cut short


def test_deeply_nested_args_through_guardrails_and_batches(implementation: str) -> None:
    fleet = Fleet(GuardrailsConfig(mode="enforce", unattended=False),
                  implementation=implementation)
    g = fleet.session("s1")
    g.start_turn()
    for _ in range(4):
        assert g.on_call("write", nested(5_000)).proceed
    assert g.on_call("write", nested(5_000)).halt_session
    out = fleet.observe_many([("s2", "turn_start")]
                             + [("s2", "call", "write", nested(3_000))] * 5)
    assert [(i, d.action) for i, _, d in out] == [(5, "halt_session")]


def test_deep_results_and_errors_are_observed(implementation: str) -> None:
    w = Watchdog(implementation=implementation)
    alerts = [w.observe_result("t", error=nested(4_000)) for _ in range(3)]
    assert [a.signal for a in alerts[2]] == ["tool-failure-streak"]
    w2 = Watchdog(implementation=implementation)
    assert w2.observe_result("t", payload=nested(4_000)) == ()


def test_a_value_whose_repr_raises_is_observed(implementation: str) -> None:
    w = Watchdog(implementation=implementation)
    for _ in range(4):
        assert w.observe_call("t", {"x": ReprRaises()}) == ()
    (alert,) = w.observe_call("t", {"x": ReprRaises()})
    assert alert.signal == "repeated-tool-call"
    assert "<unrepresentable ReprRaises>" in alert.reason
    failing = [w.observe_result("t", error=ReprRaises()) for _ in range(3)]
    assert [a.signal for a in failing[2]] == ["tool-failure-streak"]


def test_circular_args_are_observed(implementation: str) -> None:
    loop: dict = {"k": 1}
    loop["self"] = loop
    w = Watchdog(implementation=implementation)
    for _ in range(4):
        assert w.observe_call("t", loop) == ()
    assert [a.signal for a in w.observe_call("t", loop)] == ["repeated-tool-call"]


def test_deep_serialization_agrees_with_json_where_both_apply() -> None:
    from tripwire._common import _iterative_json, _to_json

    value = {"b": [1, 2.5, None, True, "é"], "a": {"z": {}, "y": []}, 3: "int key"}
    import json

    for sort_keys in (False, True):
        expected = json.dumps({str(k) if not isinstance(k, str) else k: v
                               for k, v in value.items()}, ensure_ascii=False,
                              separators=(",", ":"), sort_keys=sort_keys)
        assert _iterative_json(value, sort_keys) == expected
    assert _to_json(nested(300), sort_keys=False) == (
        '{"a":' * 300 + "{}" + "}" * 300).encode()
