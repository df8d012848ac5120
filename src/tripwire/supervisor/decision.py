"""What a supervisor answers (SPEC §7.4): ``SupervisorDecision`` — ``continue``,
``redirect(guidance, check)``, ``stop_complete(evidence)`` or ``stop_blocked(reason)`` — with the
redirect's ``Check`` and the supervisor's own model usage (``ReviewUsage``), and
``parse_decision``, which turns an answer (a decision, a mapping or JSON text) into one or
raises ``MalformedDecision``. The schema they are checked against is ``schema.py``'s.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol

from ..base.money import parse_dollars
from ..base.validate import check_usage
from ..errors import InvalidEvent, MalformedDecision
from .schema import validate_decision

__all__ = ["Check", "CheckedCall", "ReviewUsage", "SupervisorDecision", "parse_decision"]


class CheckedCall(Protocol):
    """What a ``Check`` reads of an observed call: its tool, its arguments as JSON text and its
    status (``ok``, ``error``, ``no_op``, or ``pending`` while it has no result)."""

    @property
    def tool(self) -> str: ...

    @property
    def args_text(self) -> str: ...

    @property
    def status(self) -> str: ...


@dataclass(frozen=True)
class Check:
    """What a redirect says to look for: a later call of ``tool`` (its args JSON containing
    ``args_contains``) that was made (``called``), succeeded (``succeeds``) or failed
    (``fails``), its payload or error text containing ``result_contains``."""

    tool: str
    outcome: str
    args_contains: str | None = None
    result_contains: str | None = None
    description: str | None = None

    def to_dict(self) -> dict[str, str]:
        out = {"tool": self.tool, "outcome": self.outcome}
        for name in ("args_contains", "result_contains", "description"):
            value = getattr(self, name)
            if value is not None:
                out[name] = value
        return out

    def describe(self) -> str:
        """The check in words, for the model's block and the log."""
        if self.description:
            return self.description
        verb = {"called": "is called", "succeeds": "succeeds", "fails": "fails"}[self.outcome]
        text = f"a call of {self.tool}"
        if self.args_contains:
            text += f" with {self.args_contains!r} in its arguments"
        text += f" {verb}"
        if self.result_contains and self.outcome != "called":
            text += f" and its {'result' if self.outcome == 'succeeds' else 'error'} " \
                    f"contains {self.result_contains!r}"
        return text

    def followed_by(self, call: CheckedCall) -> bool:
        """The call is the one the check names (the tool, and the args it asks for)."""
        return call.tool == self.tool and (
            self.args_contains is None or self.args_contains in call.args_text)

    def held_by(self, call: CheckedCall, result: str | None = None) -> bool:
        """The call, with its result (``result``: its full payload or error text; None while
        it has none), shows the condition."""
        if not self.followed_by(call):
            return False
        if self.outcome == "called":
            return True
        if result is None or call.status == "pending":
            return False
        if self.outcome == "succeeds" and call.status == "error":
            return False
        if self.outcome == "fails" and call.status != "error":
            return False
        return self.result_contains is None or self.result_contains in result


@dataclass(frozen=True)
class ReviewUsage:
    """The supervisor's own model usage for one review (charged to the task)."""

    model: str | None = None
    input_tokens: int | None = None
    output_tokens: int | None = None
    cost_usd: float | None = None

    def __post_init__(self) -> None:
        try:
            check_usage(self.model, self.input_tokens, self.output_tokens)
        except InvalidEvent as exc:
            raise MalformedDecision(f"the review's usage: {exc}", "usage") from None
        if self.cost_usd is not None:
            parse_dollars(self.cost_usd, "the review's usage cost_usd", error=MalformedDecision)


@dataclass(frozen=True)
class SupervisorDecision:
    """One of ``continue``, ``redirect(guidance, check)``, ``stop_complete(evidence)``,
    ``stop_blocked(reason)``, with the ``rationale`` that supports it. Built with the class
    methods or ``parse_decision``; constructing one that does not match ``DECISION_SCHEMA``
    raises ``MalformedDecision``. ``usage`` is the supervisor's own model usage, if any."""

    decision: str
    rationale: str
    guidance: str | None = None
    check: Check | None = None
    evidence: str | None = None
    reason: str | None = None
    usage: ReviewUsage | None = field(default=None, compare=False)

    def __post_init__(self) -> None:
        validate_decision(self.to_dict())
        if isinstance(self.check, Mapping):  # a check given as its JSON object
            object.__setattr__(self, "check", Check(**self.check))
        if self.usage is not None and not isinstance(self.usage, ReviewUsage):
            raise MalformedDecision("usage must be a ReviewUsage", "usage")

    @classmethod
    def continue_(cls, rationale: str, *, usage: ReviewUsage | None = None
                  ) -> SupervisorDecision:
        return cls("continue", rationale, usage=usage)

    @classmethod
    def redirect(cls, guidance: str, check: Check, rationale: str, *,
                 usage: ReviewUsage | None = None) -> SupervisorDecision:
        return cls("redirect", rationale, guidance=guidance, check=check, usage=usage)

    @classmethod
    def stop_complete(cls, evidence: str, rationale: str, *,
                      usage: ReviewUsage | None = None) -> SupervisorDecision:
        return cls("stop_complete", rationale, evidence=evidence, usage=usage)

    @classmethod
    def stop_blocked(cls, reason: str, rationale: str, *,
                     usage: ReviewUsage | None = None) -> SupervisorDecision:
        return cls("stop_blocked", rationale, reason=reason, usage=usage)

    def to_dict(self) -> dict[str, Any]:
        """The decision as ``DECISION_SCHEMA`` describes it (usage is not part of it)."""
        out: dict[str, Any] = {"decision": self.decision, "rationale": self.rationale}
        if self.guidance is not None:
            out["guidance"] = self.guidance
        if self.check is not None:
            out["check"] = self.check.to_dict() if isinstance(self.check, Check) else self.check
        if self.evidence is not None:
            out["evidence"] = self.evidence
        if self.reason is not None:
            out["reason"] = self.reason
        return out


def parse_decision(value: Any, usage: ReviewUsage | None = None) -> SupervisorDecision:
    """A supervisor's answer as a ``SupervisorDecision``: one already, a mapping, or JSON text
    (str or bytes). Anything else, or one that does not match the schema, raises
    ``MalformedDecision``."""
    if isinstance(value, SupervisorDecision):
        return value
    if isinstance(value, (bytes, bytearray)):
        try:
            value = bytes(value).decode("utf-8")
        except UnicodeDecodeError:
            raise MalformedDecision("the decision is not UTF-8 text") from None
    if isinstance(value, str):
        try:
            value = json.loads(value)
        except ValueError as exc:
            raise MalformedDecision(f"the decision is not JSON ({exc})") from None
    if isinstance(value, Mapping):
        value = dict(value)
    data = validate_decision(value)
    check = data.get("check")
    return SupervisorDecision(
        data["decision"], data["rationale"], guidance=data.get("guidance"),
        check=Check(**check) if check is not None else None, evidence=data.get("evidence"),
        reason=data.get("reason"), usage=usage)
