"""OpenAI Agents SDK integration (``pip install 'tripwire[openai-agents]'``).

    guardrails = Guardrails(GuardrailsConfig(mode="enforce"))
    hooks = TripwireRunHooks(guardrails)
    agent = Agent(name="coder", tools=hooks.guard_tools([read_file, run_tests]))
    await Runner.run(agent, "fix the bug", hooks=hooks)   # GuardrailTripped on a cut or halt

One ``Runner.run`` is one turn: the first model call of the run opens it (``GuardrailHalted``
when the session is halted, before any model call) and the final output closes it. Every model
response's usage and text are observed (``on_llm_end``); every tool call (``on_tool_start``) and
its result (``on_tool_end``).

Function tools run their input guardrails *before* the tool-start hooks, so ``guard_tools`` adds
a tool input guardrail that observes the call there and raises on a cut or halt: the looping
call never runs. The error is ``AgentsGuardrailTripped``, both a ``GuardrailTripped`` and the
SDK's ``AgentsException`` (the SDK re-raises its own exceptions as they are). Tools it cannot
guard (hosted tools, shell and computer tools, agents as tools) are observed in
``on_tool_start``, which raises the same way; an exception raised in a hook propagates out of
``Runner.run``.

A model that calls a tool the agent does not have ends the run with the SDK's
``ModelBehaviorError`` ("Tool X not found in agent Y") before any hook sees the call: hand it to
``hooks.on_run_error(error)``, which observes that call and its ``unknown_tool`` result (a host
that retries within the turn, without ``end_turn()``, gets ``unknown-tool`` at the third).
"""

from __future__ import annotations

import dataclasses
import re
from typing import Any

from agents import Agent, RunContextWrapper, RunHooks, Tool
from agents.exceptions import AgentsException
from agents.items import ModelResponse
from agents.tool import FunctionTool
from agents.tool_guardrails import (
    ToolGuardrailFunctionOutput,
    ToolInputGuardrail,
    ToolInputGuardrailData,
)

from ...base.decision import Decision
from ...errors import GuardrailTripped
from ...session.guardrails import Guardrails
from . import check

__all__ = ["TripwireRunHooks", "AgentsGuardrailTripped"]

#: The SDK's ModelBehaviorError for a call of a tool the agent does not have.
_UNKNOWN_TOOL = re.compile(r"^Tool (\S+) not found in agent ")


class AgentsGuardrailTripped(GuardrailTripped, AgentsException):
    """``GuardrailTripped`` that is also the SDK's ``AgentsException``: the SDK re-raises its
    own exceptions from tool execution as they are (any other one becomes a ``UserError``)."""


class TripwireRunHooks(RunHooks[Any]):
    """``RunHooks`` feeding one session's ``Guardrails``."""

    def __init__(self, guardrails: Guardrails):
        self.guardrails = guardrails
        self._in_turn = False
        self._observed: set[str] = set()  # call ids the tool input guardrail already observed
        self.input_guardrail: ToolInputGuardrail[Any] = ToolInputGuardrail(self._gate,
                                                                           name="tripwire")

    # -- tools ---------------------------------------------------------------------------------

    def guard_tools(self, tools: list[Tool]) -> list[Tool]:
        """The same tools, function tools with tripwire's input guardrail added first."""
        return [dataclasses.replace(t, tool_input_guardrails=[
                    self.input_guardrail, *(t.tool_input_guardrails or ())])
                if isinstance(t, FunctionTool) else t for t in tools]

    def _gate(self, data: ToolInputGuardrailData) -> ToolGuardrailFunctionOutput:
        ctx = data.context
        self._start_turn()
        self._observed.add(ctx.tool_call_id)
        self._check(self.guardrails.on_call(ctx.tool_name, ctx.tool_arguments or None,
                                      id=ctx.tool_call_id))
        return ToolGuardrailFunctionOutput.allow()

    async def on_tool_start(self, context: RunContextWrapper[Any], agent: Agent[Any],
                            tool: Tool) -> None:
        call_id = getattr(context, "tool_call_id", None)
        if call_id is not None and call_id in self._observed:
            self._observed.discard(call_id)
            return
        self._check(self.guardrails.on_call(getattr(context, "tool_name", None) or tool.name,
                                      getattr(context, "tool_arguments", None) or None,
                                      id=call_id))

    async def on_tool_end(self, context: RunContextWrapper[Any], agent: Agent[Any], tool: Tool,
                          result: object) -> None:
        call_id = getattr(context, "tool_call_id", None)
        self._check(self.guardrails.on_result(getattr(context, "tool_name", None) or tool.name,
                                        id=call_id, payload=_payload(result)))

    def on_run_error(self, error: BaseException) -> None:
        """The exception ``Runner.run`` raised: the SDK's unknown-tool error is a call and its
        ``unknown_tool`` result (raises ``AgentsGuardrailTripped`` on a cut or halt); any
        other error is not observed."""
        found = _UNKNOWN_TOOL.match(str(error))
        if found is None:
            return
        self._start_turn()
        name = found.group(1)
        self._check(self.guardrails.on_call(name, None))
        self._check(self.guardrails.on_result(name, error=str(error), unknown_tool=True))

    # -- model calls and turns -----------------------------------------------------------------

    async def on_llm_start(self, context: RunContextWrapper[Any], agent: Agent[Any],
                           system_prompt: str | None, input_items: list[Any]) -> None:
        self._start_turn()

    async def on_llm_end(self, context: RunContextWrapper[Any], agent: Agent[Any],
                         response: ModelResponse) -> None:
        for item in response.output:
            if getattr(item, "type", None) == "message":
                parts: Any = getattr(item, "content", None) or ()  # text and refusal parts
                text = "".join(getattr(part, "text", "") or "" for part in parts)
                if text:
                    self._check(self.guardrails.on_text(text))
        usage = response.usage
        model = agent.model if isinstance(agent.model, str) else None
        self._check(self.guardrails.on_usage(model=model, input_tokens=usage.input_tokens,
                                       output_tokens=usage.output_tokens))

    async def on_agent_end(self, context: Any, agent: Agent[Any], output: Any) -> None:
        self.end_turn()

    def end_turn(self) -> None:
        """Close the run's turn (done on the final output; call it after a run that raised)."""
        if self._in_turn:
            self._in_turn = False
            self._observed.clear()
            self.guardrails.end_turn()

    def _check(self, decision: Decision) -> None:
        if decision.cut_turn:
            self.end_turn()  # the run ends here: the next run is a new turn (refused if halted)
            check(decision, AgentsGuardrailTripped)

    def _start_turn(self) -> None:
        if not self._in_turn:
            self.guardrails.start_turn()  # GuardrailHalted: the run is refused
            self._in_turn = True


def _payload(result: object) -> Any:
    return result if isinstance(result, (str, bytes)) else str(result)
