"""The JSON schema of a supervisor's decision, and the strict check of a value against it.

``DECISION_SCHEMA`` is the one statement of what a decision may hold (SPEC §7.4): the reference
supervisor sends it to the model, ``validate_decision`` checks every decision against it. The
check interprets the schema itself (the subset it uses: ``type``, ``const``, ``enum``,
``required``, ``properties``, ``additionalProperties: false``, ``minLength``, ``maxLength``,
``pattern``, ``oneOf`` told apart by ``decision``), so the two cannot drift apart; the tests
compare it with the ``jsonschema`` library on many values. No runtime dependency: a schema
library is heavy for six fields.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from typing import Any

from ..errors import MalformedDecision

__all__ = ["DECISION_SCHEMA", "CHECK_SCHEMA", "DECISIONS", "CHECK_OUTCOMES",
           "validate_decision", "decision_schema_json"]

DECISIONS = ("continue", "redirect", "stop_complete", "stop_blocked")
CHECK_OUTCOMES = ("called", "succeeds", "fails")


def _text(max_length: int) -> dict[str, Any]:
    # some non-space character: "" or "   " says nothing ("try harder" at least is words)
    return {"type": "string", "minLength": 1, "maxLength": max_length, "pattern": "\\S"}


#: The observable condition a redirect names; tripwire evaluates it on the calls that follow.
CHECK_SCHEMA: dict[str, Any] = {
    "type": "object",
    "description": (
        "The observable condition that shows the redirect helped: a later call of `tool` "
        "(whose arguments contain `args_contains`, when given) that was made (`called`), "
        "succeeded (`succeeds`) or failed (`fails`), its result or error text containing "
        "`result_contains` when given."),
    "additionalProperties": False,
    "required": ["tool", "outcome"],
    "properties": {
        "tool": _text(200),
        "outcome": {"enum": list(CHECK_OUTCOMES)},
        "args_contains": _text(500),
        "result_contains": _text(500),
        "description": _text(500),
    },
}


def _variant(decision: str, description: str, **fields: dict[str, Any]) -> dict[str, Any]:
    return {
        "type": "object",
        "description": description,
        "additionalProperties": False,
        "required": ["decision", "rationale", *fields],
        "properties": {"decision": {"const": decision}, "rationale": _text(2000), **fields},
    }


DECISION_SCHEMA: dict[str, Any] = {
    "$schema": "https://json-schema.org/draft/2020-12/schema",
    "title": "SupervisorDecision",
    "description": (
        "A progress supervisor's decision about one review of an agent's task. `rationale` "
        "cites the evidence in the review that supports the decision."),
    "type": "object",
    "oneOf": [
        _variant("continue", "The work is advancing: let the agent go on within its budget."),
        _variant("redirect", "Change of approach: `guidance` is told to the agent at its next "
                 "turn; `check` is how the next review tells whether it helped.",
                 guidance=_text(2000), check=CHECK_SCHEMA),
        _variant("stop_complete", "The objective is met: `evidence` shows the acceptance "
                 "criteria hold.", evidence=_text(4000)),
        _variant("stop_blocked", "The task cannot advance: `reason` names the blocker.",
                 reason=_text(2000)),
    ],
}


def decision_schema_json() -> str:
    """The schema as JSON text (for a provider's structured-output option)."""
    return json.dumps(DECISION_SCHEMA, indent=2)


_TYPES: dict[str, type] = {"object": dict, "string": str}


def _where(path: str) -> str:
    return path or "the decision"


def _check(schema: Mapping[str, Any], value: Any, path: str) -> None:
    expected = schema.get("type")
    if expected is not None and not isinstance(value, _TYPES[expected]):
        raise MalformedDecision(f"{_where(path)} must be a JSON {expected}, not "
                                f"{_kind(value)}", path)
    if "const" in schema and value != schema["const"]:
        raise MalformedDecision(f"{_where(path)} must be {schema['const']!r}", path)
    if "enum" in schema and value not in schema["enum"]:
        raise MalformedDecision(f"{_where(path)} must be one of "
                                f"{', '.join(schema['enum'])}, not {_short(value)}", path)
    if isinstance(value, str):
        if len(value) < schema.get("minLength", 0):
            raise MalformedDecision(f"{_where(path)} must not be empty", path)
        if "maxLength" in schema and len(value) > schema["maxLength"]:
            raise MalformedDecision(f"{_where(path)} is longer than {schema['maxLength']} "
                                    f"characters ({len(value)})", path)
        if "pattern" in schema and re.search(schema["pattern"], value) is None:
            raise MalformedDecision(f"{_where(path)} must contain a non-space character", path)
    if "oneOf" in schema:
        _one_of(schema["oneOf"], value, path)
    if isinstance(value, dict):
        _object(schema, value, path)


def _one_of(variants: list[dict[str, Any]], value: Any, path: str) -> None:
    # the variants differ by their `decision` constant: pick the one the value names
    names = [v["properties"]["decision"]["const"] for v in variants]
    name = value.get("decision") if isinstance(value, dict) else None
    if "decision" not in value:
        raise MalformedDecision("the decision has no 'decision' field (one of "
                                f"{', '.join(names)})", "decision")
    if not isinstance(name, str) or name not in names:
        raise MalformedDecision(f"decision must be one of {', '.join(names)}, not "
                                f"{_short(name)}", "decision")
    _check(variants[names.index(name)], value, path)


def _object(schema: Mapping[str, Any], value: dict[Any, Any], path: str) -> None:
    properties: Mapping[str, Any] = schema.get("properties", {})
    for key in schema.get("required", ()):
        if key not in value:
            raise MalformedDecision(f"{_where(path)} has no {key!r} field", _join(path, key))
    if schema.get("additionalProperties") is False:
        for key in value:
            if key not in properties:
                raise MalformedDecision(f"{_where(path)} has an unexpected field "
                                        f"{_short(key)}", _join(path, str(key)))
    for key, sub in properties.items():
        if key in value:
            _check(sub, value[key], _join(path, key))


def _join(path: str, key: str) -> str:
    return f"{path}.{key}" if path else key


def _kind(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, (int, float)):
        return "a number"
    if isinstance(value, (list, tuple)):
        return "an array"
    if isinstance(value, str):
        return "a string"
    if isinstance(value, dict):
        return "an object"
    return type(value).__name__


def _short(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


def validate_decision(value: Any) -> dict[str, Any]:
    """``value`` (a decoded JSON value) checked against ``DECISION_SCHEMA``: returned as is,
    or ``MalformedDecision`` naming the first field that is wrong."""
    _check(DECISION_SCHEMA, value, "")
    result: dict[str, Any] = value
    return result
