"""Framework integrations, each an optional extra: ``tripwire[openai-agents]``,
``tripwire[langchain]``. Each one feeds a ``Guardrails`` from the framework's own callbacks and
ends a run that the guardrails cut or halted with ``GuardrailTripped`` (a refused turn of a
halted session raises ``GuardrailHalted`` before any model call)."""

from __future__ import annotations

from ...base.decision import Decision
from ...errors import GuardrailTripped

__all__ = ["check"]


def check(decision: Decision, error: type[GuardrailTripped] = GuardrailTripped) -> Decision:
    """Raise ``error`` (a ``GuardrailTripped``) when the decision cuts the turn or halts the
    session."""
    if decision.cut_turn:
        raise error(decision)
    return decision
