"""Pydantic AI integration (``pip install 'tripwire[pydantic-ai]'``): a capability.

    guardrails = Guardrails(GuardrailsConfig(mode="enforce"), feedback_at_once=True)
    agent = Agent(model, tools=[...], capabilities=[TripwireCapability(guardrails)])
    agent.run_sync("fix the bug")          # PydanticAIGuardrailTripped on a cut, halt or refusal

One agent run is one turn (``wrap_run``: its end closes the turn, however it ends). Each model
response's text and ``RequestUsage`` are observed in ``after_model_request`` (priced from the
catalogue by model and provider: Pydantic AI reports tokens); each tool call in
``wrap_tool_execute``, *before* the tool function runs, and its return value or error after.

A call the guardrails cut never runs: the hook raises ``PydanticAIGuardrailTripped``, both a
``GuardrailTripped`` and Pydantic AI's ``AgentRunError`` (what its own ``UsageLimitExceeded``
is), which ends the run as a usage limit does and carries the run's ``conversation``. Feedback
reaches the model through ``RunContext.enqueue``: after a tool's result (queued by a
``feedback_at_once`` session as alerts fire) and before the prompt of a run that starts with
the last turn's notes.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from pydantic_ai.capabilities import AbstractCapability
from pydantic_ai.exceptions import (
    AgentRunError,
    ApprovalRequired,
    CallDeferred,
    SkipToolExecution,
)
from pydantic_ai.messages import ModelResponse, ToolCallPart
from pydantic_ai.tools import RunContext, ToolDefinition

from ...base.decision import Decision
from ...errors import GuardrailTripped
from ...session.guardrails import Guardrails
from .run import GuardedRun

__all__ = ["TripwireCapability", "PydanticAIGuardrailTripped"]

#: what a tool raises to defer or skip itself: control flow, not a failed result
_CONTROL_FLOW = (SkipToolExecution, CallDeferred, ApprovalRequired)


class PydanticAIGuardrailTripped(GuardrailTripped, AgentRunError):
    """The run was stopped by tripwire: a ``GuardrailTripped`` (its ``decision``: a cut, a
    halt, or ``refuse_turn`` for a run of a halted session) that is also Pydantic AI's
    ``AgentRunError``, the base of its ``UsageLimitExceeded``."""

    def __init__(self, decision: Decision):
        GuardrailTripped.__init__(self, decision)
        self.message = decision.reason


@dataclass(init=False)
class TripwireCapability(AbstractCapability[Any]):
    """A capability feeding one session's ``Guardrails`` (one instance per session: give it
    to the agent, or to ``agent.run(..., capabilities=[...])`` per session)."""

    def __init__(self, guardrails: Guardrails):
        self.run = GuardedRun(guardrails)

    @property
    def guardrails(self) -> Guardrails:
        return self.run.guardrails

    # -- the run: one turn -----------------------------------------------------------------

    async def wrap_run(self, ctx: RunContext[Any], *, handler: Any) -> Any:
        try:
            return await handler()
        finally:
            self.run.end()

    async def before_run(self, ctx: RunContext[Any]) -> None:
        _stop(self.run.start())
        feedback = self.run.feedback()  # the last turn's notes
        if feedback:
            ctx.enqueue(feedback, placement="before_prompt")

    async def after_model_request(self, ctx: RunContext[Any], *, request_context: Any,
                                  response: ModelResponse) -> ModelResponse:
        usage = response.usage
        _stop(self.run.response(response.text, model=response.model_name,
                                provider=response.provider_name,
                                input_tokens=usage.input_tokens,
                                output_tokens=usage.output_tokens,
                                cache_read_tokens=usage.cache_read_tokens or None,
                                cache_write_tokens=usage.cache_write_tokens or None))
        return response

    # -- tools -----------------------------------------------------------------------------

    async def wrap_tool_execute(self, ctx: RunContext[Any], *, call: ToolCallPart,
                                tool_def: ToolDefinition, args: Any, handler: Any) -> Any:
        name, call_id = call.tool_name, call.tool_call_id
        _stop(self.run.call(name, call.args_as_dict(), call_id))  # before the tool runs
        try:
            result = await handler(args)
        except _CONTROL_FLOW:
            raise
        except Exception as error:  # a failed call (ModelRetry and ToolFailed included)
            _stop(self.run.result(name, call_id, error=str(error) or type(error).__name__))
            raise
        _stop(self.run.result(name, call_id, payload=_payload(result)))
        feedback = self.run.feedback()
        if feedback:
            ctx.enqueue(feedback)  # into the request that carries this result
        return result


def _stop(decision: Decision | None) -> None:
    if decision is not None and decision.cut_turn:
        raise PydanticAIGuardrailTripped(decision)


def _payload(result: Any) -> Any:
    return result if isinstance(result, (str, bytes)) else repr(result)
