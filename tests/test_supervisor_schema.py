"""The supervisor's decision schema and its strict check (SPEC §7.4): the hand check agrees
with the ``jsonschema`` library on every value, and names the first wrong field."""

from __future__ import annotations

import json
from typing import Any

import jsonschema
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tripwire.errors import MalformedDecision
from tripwire.supervisor.decision import Check, SupervisorDecision, parse_decision
from tripwire.supervisor.schema import DECISION_SCHEMA, decision_schema_json, validate_decision

VALIDATOR = jsonschema.Draft202012Validator(DECISION_SCHEMA)
CHECK = {"tool": "bash", "outcome": "succeeds", "args_contains": "pip install"}

VALID = [
    {"decision": "continue", "rationale": "output changes each poll"},
    {"decision": "redirect", "rationale": "3 identical failures", "guidance": "Install it.",
     "check": CHECK},
    {"decision": "redirect", "rationale": "r", "guidance": "g",
     "check": {"tool": "t", "outcome": "fails", "result_contains": "x", "description": "d"}},
    {"decision": "stop_complete", "rationale": "r", "evidence": "12 passed"},
    {"decision": "stop_blocked", "rationale": "r", "reason": "no network"},
]

# (value, the field MalformedDecision names)
INVALID: list[tuple[Any, str]] = [
    ([], ""),
    ("continue", ""),
    (None, ""),
    ({}, "decision"),
    ({"rationale": "r"}, "decision"),
    ({"decision": "maybe", "rationale": "r"}, "decision"),
    ({"decision": 1, "rationale": "r"}, "decision"),
    ({"decision": "continue"}, "rationale"),
    ({"decision": "continue", "rationale": ""}, "rationale"),
    ({"decision": "continue", "rationale": " \n\t"}, "rationale"),
    ({"decision": "continue", "rationale": "r" * 2001}, "rationale"),
    ({"decision": "continue", "rationale": "r", "guidance": "g"}, "guidance"),
    ({"decision": "continue", "rationale": "r", "budget": 100}, "budget"),
    ({"decision": "redirect", "rationale": "r", "guidance": "g"}, "check"),
    ({"decision": "redirect", "rationale": "r", "check": CHECK}, "guidance"),
    ({"decision": "redirect", "rationale": "r", "guidance": 5, "check": CHECK}, "guidance"),
    ({"decision": "redirect", "rationale": "r", "guidance": "g", "check": "run the tests"},
     "check"),
    ({"decision": "redirect", "rationale": "r", "guidance": "g", "check": {"tool": "bash"}},
     "check.outcome"),
    ({"decision": "redirect", "rationale": "r", "guidance": "g",
      "check": {"tool": "bash", "outcome": "works"}}, "check.outcome"),
    ({"decision": "redirect", "rationale": "r", "guidance": "g",
      "check": {"tool": "", "outcome": "called"}}, "check.tool"),
    ({"decision": "redirect", "rationale": "r", "guidance": "g",
      "check": {"tool": "b", "outcome": "called", "when": "soon"}}, "check.when"),
    ({"decision": "stop_complete", "rationale": "r"}, "evidence"),
    ({"decision": "stop_complete", "rationale": "r", "evidence": "e", "reason": "x"}, "reason"),
    ({"decision": "stop_blocked", "rationale": "r"}, "reason"),
    ({"decision": "stop_blocked", "rationale": "r", "reason": "x" * 2001}, "reason"),
]


def test_the_schema_is_a_valid_draft_2020_12_schema() -> None:
    jsonschema.Draft202012Validator.check_schema(DECISION_SCHEMA)
    assert json.loads(decision_schema_json()) == DECISION_SCHEMA


@pytest.mark.parametrize("value", VALID)
def test_valid_decisions(value: dict[str, Any]) -> None:
    assert VALIDATOR.is_valid(value)
    decision = parse_decision(json.dumps(value))
    assert decision.to_dict() == value
    assert parse_decision(value) == decision == parse_decision(json.dumps(value).encode())


@pytest.mark.parametrize("value, field", INVALID)
def test_invalid_decisions_name_the_field(value: Any, field: str) -> None:
    assert not VALIDATOR.is_valid(value)
    with pytest.raises(MalformedDecision) as bad:
        validate_decision(value)
    assert bad.value.field == field


def test_text_that_is_not_a_decision() -> None:
    for text, message in (("", "the decision is not JSON"),
                          ("continue", "the decision is not JSON"),
                          (b"\xff", "the decision is not UTF-8 text"),
                          ("[1]", "the decision must be a JSON object, not an array")):
        with pytest.raises(MalformedDecision, match=message):
            parse_decision(text)
    with pytest.raises(MalformedDecision, match="must be a JSON object, not a number"):
        parse_decision(7)


def test_the_python_constructors_are_checked_by_the_schema() -> None:
    d = SupervisorDecision.redirect("Install it.", Check("bash", "succeeds"), "loop")
    assert VALIDATOR.is_valid(d.to_dict())
    with pytest.raises(MalformedDecision) as bad:
        SupervisorDecision.stop_complete("", "r")
    assert bad.value.field == "evidence"
    with pytest.raises(MalformedDecision) as bad:
        SupervisorDecision.redirect("g", Check("bash", "eventually"), "r")
    assert bad.value.field == "check.outcome"
    with pytest.raises(MalformedDecision) as bad:
        SupervisorDecision("continue", "r", reason="x")
    assert bad.value.field == "reason"


_text = st.one_of(st.text(max_size=8), st.sampled_from(["", " ", "x" * 2001, "ok"]))
_scalar = st.one_of(st.none(), st.booleans(), st.integers(), _text)
_check = st.dictionaries(
    st.sampled_from(["tool", "outcome", "args_contains", "result_contains", "description",
                     "extra"]),
    st.one_of(_scalar, st.sampled_from(["called", "succeeds", "fails"])), max_size=5)
_decision = st.dictionaries(
    st.sampled_from(["decision", "rationale", "guidance", "check", "evidence", "reason",
                     "usage"]),
    st.one_of(_scalar, _check, st.sampled_from(
        ["continue", "redirect", "stop_complete", "stop_blocked"])), max_size=6)


@settings(max_examples=600, deadline=None)
@given(st.one_of(_decision, _scalar, st.lists(_scalar, max_size=2)))
def test_the_hand_check_agrees_with_jsonschema(value: Any) -> None:
    try:
        validate_decision(value)
        ours = True
    except MalformedDecision:
        ours = False
    assert ours == VALIDATOR.is_valid(value), value
