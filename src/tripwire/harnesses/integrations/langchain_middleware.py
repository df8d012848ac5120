"""LangChain v1 integration (``pip install 'tripwire[langchain-agents]'``): an
``AgentMiddleware`` for ``create_agent``, whose tool wrapper also guards a LangGraph
``ToolNode``.

    guardrails = Guardrails(GuardrailsConfig(mode="enforce"), feedback_at_once=True)
    middleware = TripwireMiddleware(guardrails)
    agent = create_agent(model, tools=[...], middleware=[middleware])
    result = agent.invoke({"messages": [("user", "fix the bug")]})
    middleware.stopped          # the Decision that ended the run, or None

    ToolNode(tools, wrap_tool_call=middleware.wrap_tool_call,      # a graph of your own
             awrap_tool_call=middleware.awrap_tool_call)

One agent invocation is one turn (``before_agent`` opens it, ``after_agent`` closes it). Each
call is observed in ``wrap_tool_call`` before the tool runs; a call the guardrails cut is
refused there the way LangChain's own ``ToolCallLimitMiddleware`` refuses one: an error
``ToolMessage`` with the reason instead of running the tool (every later call of the run too).
The run then ends the way LangChain ends one early: the next ``before_model`` jumps to
``"end"`` with a final ``AIMessage`` that says why (its ``response_metadata["tripwire"]`` is
the decision). A run of a halted session jumps to the end in ``before_agent``, before any model
call. Feedback reaches the model as a ``HumanMessage`` that ``before_model`` adds before the next
model call. Text and ``usage_metadata`` are observed in ``after_model``.

The callback handler (``tripwire.harnesses.integrations.langchain``) stays for code that builds
its own loop on ``langchain-core`` alone; a handler cannot refuse a call, this middleware can.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

from langchain.agents.middleware import AgentMiddleware, AgentState, hook_config
from langchain_core.messages import AIMessage, HumanMessage, ToolMessage
from langgraph.prebuilt.tool_node import ToolCallRequest
from langgraph.runtime import Runtime
from langgraph.types import Command

from ...base.decision import Decision
from ...session.guardrails import Guardrails
from .run import GuardedRun, Guarding, content_text, refused_call, stopped_run

__all__ = ["TripwireMiddleware"]

ToolResult = ToolMessage | Command[Any]


class TripwireMiddleware(Guarding, AgentMiddleware[AgentState[Any], Any, Any]):
    """An ``AgentMiddleware`` feeding one session's ``Guardrails`` (one per session)."""

    def __init__(self, guardrails: Guardrails):
        super().__init__()
        self.run = GuardedRun(guardrails)


    # -- the run: one turn -----------------------------------------------------------------

    @hook_config(can_jump_to=["end"])
    def before_agent(self, state: AgentState[Any], runtime: Runtime[Any]) -> dict[str, Any] | None:
        self.run.end()  # a run that failed without reaching after_agent
        refused = self.run.start()
        return _end(refused) if refused is not None else None

    @hook_config(can_jump_to=["end"])
    def before_model(self, state: AgentState[Any], runtime: Runtime[Any]) -> dict[str, Any] | None:
        if self.run.stopped is not None:
            return _end(self.run.stopped)
        feedback = self.run.feedback()
        return {"messages": [HumanMessage(feedback)]} if feedback else None

    def after_model(self, state: AgentState[Any], runtime: Runtime[Any]) -> dict[str, Any] | None:
        message = state["messages"][-1]
        if isinstance(message, AIMessage):
            usage: Any = message.usage_metadata or {}
            meta = message.response_metadata or {}
            details = usage.get("input_token_details") or {}
            self.run.response(content_text(message.content), model=meta.get("model_name"),
                              provider=meta.get("model_provider"),
                              input_tokens=usage.get("input_tokens"),
                              output_tokens=usage.get("output_tokens"),
                              cache_read_tokens=details.get("cache_read"),
                              cache_write_tokens=details.get("cache_creation"))
        return None  # a cut here refuses the response's calls; before_model ends the run

    def after_agent(self, state: AgentState[Any], runtime: Runtime[Any]) -> dict[str, Any] | None:
        self.run.end()
        return None

    # -- tools (also a ToolNode's wrap_tool_call / awrap_tool_call) --------------------------

    def wrap_tool_call(self, request: ToolCallRequest,
                       handler: Callable[[ToolCallRequest], ToolResult]) -> ToolResult:
        refusal = self._before(request)
        if refusal is not None:
            return refusal
        try:
            result = handler(request)
        except Exception as error:
            self._failed(request, error)
            raise
        return self._after(request, result)

    async def awrap_tool_call(self, request: ToolCallRequest,
                              handler: Callable[[ToolCallRequest], Awaitable[ToolResult]],
                              ) -> ToolResult:
        refusal = self._before(request)
        if refusal is not None:
            return refusal
        try:
            result = await handler(request)
        except Exception as error:
            self._failed(request, error)
            raise
        return self._after(request, result)

    def _before(self, request: ToolCallRequest) -> ToolMessage | None:
        call = request.tool_call
        decision = self.run.call(call["name"], call.get("args"), call.get("id"))
        if not decision.cut_turn:
            return None
        return ToolMessage(refused_call(decision), tool_call_id=call.get("id") or "",
                           name=call["name"], status="error")

    def _after(self, request: ToolCallRequest, result: ToolResult) -> ToolResult:
        call = request.tool_call
        if isinstance(result, ToolMessage):
            content = content_text(result.content)
            failed = result.status == "error"
            self.run.result(call["name"], call.get("id"), payload=None if failed else content,
                            error=(content or "error") if failed else None)
        else:  # a Command: the tool hands the graph a state update, not a result to read
            self.run.result(call["name"], call.get("id"), payload=repr(result))
        return result

    def _failed(self, request: ToolCallRequest, error: BaseException) -> None:
        call = request.tool_call
        self.run.result(call["name"], call.get("id"), error=str(error) or type(error).__name__)


def _end(decision: Decision) -> dict[str, Any]:
    """Jump to the end of the run with a final message saying why."""
    message = AIMessage(stopped_run(decision),
                        response_metadata={"tripwire": decision.to_dict()})
    return {"jump_to": "end", "messages": [message]}
