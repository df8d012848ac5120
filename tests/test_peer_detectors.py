"""What other harnesses' loop detectors do, and what tripwire does in the same case
(docs/guardrails.md, "What other detectors do"): Gemini CLI's two strikes, OpenHands' same
action and error and same syntax error, LangChain's ProgressGuard on a navigate that
"succeeds" on a 404, opencode's doom loop within one assistant message. Both engines, exact
events and decisions."""

from __future__ import annotations

import json
from typing import Any

import httpx
from gateway_support import FakeModel, gateway_for

from tripwire import Guardrails, GuardrailsConfig, Watchdog, WatchdogConfig


def alerts_of(wd: Watchdog, trace: list[tuple[str, str, Any]]) -> list[tuple[int, str]]:
    """(event, signal) of every alert; trace: ("call", name, args) or ("ok"/"fail", name,
    payload or error)."""
    got = []
    for kind, name, value in trace:
        if kind == "call":
            alerts = wd.observe_call(name, value)
        elif kind == "ok":
            alerts = wd.observe_result(name, payload=value)
        else:
            alerts = wd.observe_result(name, error=value)
        got += [(wd.events - 1, a.signal) for a in alerts]
    return got


# -- Gemini CLI: a recovery turn with feedback first, the halt only if the loop goes on -------

def test_a_turn_scoped_critical_cuts_feeds_back_and_halts_on_the_third_turn(
        implementation: str) -> None:
    g = Guardrails(GuardrailsConfig(mode="enforce", unattended=True), session_id="gem",
                   implementation=implementation)
    actions, feedback = [], []
    for turn in range(3):
        feedback.append(g.start_turn().feedback)
        for n in range(3):  # three no-ops in a row: no-op-streak cuts the turn
            call = f"t{turn}-{n}"
            g.on_call("write_file", json.dumps({"path": "a.py", "n": n}), id=call)
            d = g.on_result(id=call, no_op=True, payload="unchanged")
        actions.append(d.action)
        g.end_turn()
    # strike one and two cut the turn and put the guidance (what to do instead) first in the
    # next turn's input: the recovery turn; the third cut in a row halts the session
    assert actions == ["cut_turn", "cut_turn", "halt_session"]
    assert feedback[0] == ""
    for block in feedback[1:]:
        assert "- no-op-streak: " in block
        assert "otherwise do something that changes state" in block
    assert g.status().halted


def test_warnings_reach_the_model_first_and_persisting_they_halt(implementation: str) -> None:
    g = Guardrails(GuardrailsConfig(mode="enforce", unattended=True), session_id="gem2",
                   implementation=implementation)
    feedback, alerts = [], []
    d = None
    for turn in range(3):
        feedback.append(g.start_turn().feedback)
        for n in range(3):  # the same words before each failing run: no result is new
            d = g.on_text("Running the tests again.")
            alerts += [(turn, a.signal) for a in d.alerts]
            if d.action != "continue":
                break
            call = f"t{turn}-{n}"
            g.on_call("bash", json.dumps({"command": f"pytest -k case_{turn}_{n}"}), id=call)
            d = g.on_result(id=call, error="FAILED test_a: AssertionError")
            alerts += [(turn, a.signal) for a in d.alerts]
        if d.action != "continue":
            break
        g.end_turn()
    # each warning is delivered into the next turn (the recovery turn); they persist with
    # nothing new in between, and the fourth halts the session
    assert alerts == [(0, "repeated-text"), (0, "repeated-failure"), (1, "repeated-text"),
                      (2, "repeated-text"), (2, "persistent-warnings")]
    assert d is not None and d.action == "halt_session"
    assert "- repeated-text: " in feedback[1] and "- repeated-failure: " in feedback[1]
    assert "- repeated-text: " in feedback[2]


# -- OpenHands: the same action and error 3 times; the same syntax error ----------------------

def test_the_same_action_and_error(implementation: str) -> None:
    wd = Watchdog(WatchdogConfig(), implementation=implementation)
    trace = [e for _ in range(5) for e in (
        ("call", "bash", '{"command": "python run.py"}'),
        ("fail", "bash", "ModuleNotFoundError: No module named 'yaml'"))]
    # a warning at the third failure (OpenHands stops there), the halt at the fifth call
    assert alerts_of(wd, trace) == [(5, "repeated-failure"), (8, "repeated-tool-call")]


def test_the_same_syntax_error_at_another_line(implementation: str) -> None:
    edits = [("call", "edit", json.dumps({"path": "a.py", "new": f"x = '{n}"}))
             for n in range(3)]
    errors = [f"SyntaxError: unterminated string literal (detected at line {12 + n})"
              for n in range(3)]
    failed = [e for call, error in zip(edits, errors, strict=True)
              for e in (call, ("fail", "edit", error))]
    wd = Watchdog(WatchdogConfig(), implementation=implementation)
    # reported as failures: the error signature drops the line number, one error three times
    assert alerts_of(wd, failed) == [(5, "repeated-failure")]
    succeeded = [e for call, error in zip(edits, errors, strict=True)
                 for e in (call, ("ok", "edit", error))]
    wd = Watchdog(WatchdogConfig(), implementation=implementation)
    # reported as successful output: each answer differs (the line), nothing to see
    assert alerts_of(wd, succeeded) == []


# -- LangChain's ProgressGuard: a navigate that "succeeds" on a 404, 98 times -----------------

NOT_FOUND = json.dumps({"success": True, "status": 404, "title": "404 Not Found"})


def test_the_same_navigate_answering_success_on_a_404(implementation: str) -> None:
    wd = Watchdog(WatchdogConfig(), implementation=implementation)
    trace = [e for _ in range(98) for e in (
        ("call", "browser_navigate", '{"url": "https://example.com/pricing"}'),
        ("ok", "browser_navigate", NOT_FOUND))]
    # the fifth call, before it runs: the repeat's results all one answer
    assert alerts_of(wd, trace)[0] == (8, "repeated-tool-call")


def test_a_navigate_to_another_404_each_time(implementation: str) -> None:
    wd = Watchdog(WatchdogConfig(), implementation=implementation)
    trace = [e for n in range(98) for e in (
        ("call", "browser_navigate", json.dumps({"url": f"https://example.com/p/{n}"})),
        ("ok", "browser_navigate", NOT_FOUND))]
    # no call repeats; the page does: no-new-state at the 6th page seen before (result 7),
    # tools-without-text at the 12th call, no-new-state's run going on to 12 (result 13:
    # counted, not alerted), the name run at the 15th call: the fourth warning with nothing
    # new, and the critical
    assert alerts_of(wd, trace) == [
        (13, "no-new-state"), (22, "tools-without-text"), (28, "repeated-tool-name"),
        (28, "persistent-warnings")]


# -- opencode's doom loop: identical calls within one assistant message -----------------------

def test_identical_calls_of_one_message_are_decided_as_each_is_observed(
        implementation: str) -> None:
    g = Guardrails(GuardrailsConfig(mode="enforce", unattended=True), session_id="oc",
                   implementation=implementation)
    g.start_turn()
    args = '{"path": "src/app.ts"}'
    # one message's five parallel calls, observed before any of them runs (no result yet)
    decisions = [g.on_call("read", args, id=f"c{n}").action for n in range(5)]
    assert decisions == ["continue"] * 4 + ["halt_session"]
    g2 = Guardrails(GuardrailsConfig(mode="enforce", unattended=True), session_id="oc3",
                    implementation=implementation)
    g2.start_turn()
    # three identical calls (opencode's doom-loop threshold) are not a loop to tripwire
    assert [g2.on_call("read", args, id=f"c{n}").alerts for n in range(3)] == [()] * 3


def test_the_gateway_decides_every_call_of_a_response_before_the_harness_sees_one(
        implementation: str) -> None:
    def respond(model: FakeModel, path: str, request: dict) -> Any:
        content: list[dict[str, Any]] = [{"type": "text", "text": "reading it"}] + [
            {"type": "tool_use", "id": f"toolu_{n}", "name": "Read",
             "input": {"file_path": "src/app.ts"}} for n in range(5)]
        return "application/json", json.dumps({
            "id": "msg_1", "type": "message", "role": "assistant", "model": "m",
            "content": content, "stop_reason": "tool_use", "stop_sequence": None,
            "usage": {"input_tokens": 100, "output_tokens": 10}}).encode()

    with FakeModel(respond) as model, gateway_for(model.url, implementation) as (url, gw):
        client = httpx.Client(base_url=url, timeout=10)
        r = client.post("/v1/messages", headers={"x-tripwire-session": "s1"}, json={
            "model": "claude-sonnet-4-5", "max_tokens": 100, "tools": [
                {"name": "Read", "input_schema": {}}],
            "messages": [{"role": "user", "content": "read it"}]})
        body = r.json()
        # not one of the five reaches the harness: the response ends the turn with the
        # guidance in their place
        assert r.status_code == 200
        assert [b["type"] for b in body["content"]].count("tool_use") == 0
        assert body["stop_reason"] == "end_turn"
        assert "repeated-tool-call" in json.dumps(body["content"])
        assert gw.fleet.session("s1").halted
