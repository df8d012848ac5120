"""Google ADK integration (``pip install 'tripwire[google-adk]'``): a runner plugin.

    guardrails = Guardrails(GuardrailsConfig(mode="enforce"), feedback_at_once=True)
    app = App(name="coder", root_agent=agent, plugins=[TripwirePlugin(guardrails)])
    # or one plugin for every ADK session, each its own tripwire session of a fleet:
    app = App(name="coder", root_agent=agent, plugins=[TripwirePlugin(fleet.session)])
    runner = InMemoryRunner(app=app)

One invocation (``runner.run_async(...)``: a user message and all it leads to) is one turn:
``before_run_callback`` opens it and ``after_run_callback`` closes it. Each model response's
text and ``usage_metadata`` are observed in ``after_model_callback`` (priced from the catalogue
by its model: ADK reports tokens); each tool call in ``before_tool_callback``, before the tool
runs, and its result in ``after_tool_callback`` / ``on_tool_error_callback``.

A call the guardrails cut never runs: ``before_tool_callback`` returns the refusal as the
call's response (ADK's own way to skip a tool), ``{"error": "[tripwire] This tool call was not
run: ..."}``, and refuses every later call of the invocation. The invocation then ends the way
an ADK callback ends one: the next ``before_model_callback`` answers in the model's place with
the reason (the run's final response, ``custom_metadata["tripwire"]`` the decision) and sets
the invocation's ``end_invocation``. An invocation of a halted session ends in
``before_run_callback``, before any model call, with the reason as its one event. Feedback
reaches the model inside the next tool response (its ``tripwire_feedback`` key), or, at the
start of an invocation, as a user message added to the first model request.
"""

from __future__ import annotations

from typing import Any

from google.adk.agents.callback_context import CallbackContext
from google.adk.agents.invocation_context import InvocationContext
from google.adk.models.llm_request import LlmRequest
from google.adk.models.llm_response import LlmResponse
from google.adk.plugins.base_plugin import BasePlugin
from google.adk.tools.base_tool import BaseTool
from google.adk.tools.tool_context import ToolContext
from google.genai import types

from ...base.decision import Decision
from .run import GuardedRun, GuardedRuns, Sessions, refused_call, stopped_run

__all__ = ["TripwirePlugin"]


class TripwirePlugin(BasePlugin):
    """A ``BasePlugin`` feeding a session's ``Guardrails``: one ``Guardrails`` for every ADK
    session of the runner, or ``sessions(adk_session_id)`` (``fleet.session``) for each."""

    def __init__(self, sessions: Sessions, name: str = "tripwire"):
        super().__init__(name)
        self.runs = GuardedRuns(sessions)
        self._invocations: dict[str, InvocationContext] = {}  # by ADK session id

    def stopped(self, session_id: str) -> Decision | None:
        """The cut or halt that ended an ADK session's last invocation (or its refusal)."""
        return self.runs(session_id).stopped

    def _run(self, context: Any) -> GuardedRun:
        return self.runs(context.session.id)

    # -- the invocation: one turn -------------------------------------------------------------

    async def before_run_callback(self, *, invocation_context: InvocationContext,
                                  ) -> types.Content | None:
        run = self._run(invocation_context)
        run.end()  # an invocation that failed without reaching after_run_callback
        self._invocations[invocation_context.session.id] = invocation_context
        refused = run.start()
        return _said(stopped_run(refused)) if refused is not None else None

    async def after_run_callback(self, *, invocation_context: InvocationContext) -> None:
        key = invocation_context.session.id
        self._invocations.pop(key, None)
        self._run(invocation_context).end()

    async def before_model_callback(self, *, callback_context: CallbackContext,
                                    llm_request: LlmRequest) -> LlmResponse | None:
        run = self._run(callback_context)
        if run.stopped is not None:
            invocation = self._invocations.get(callback_context.session.id)
            if invocation is not None:
                invocation.end_invocation = True
            return LlmResponse(content=_said(stopped_run(run.stopped)),
                               custom_metadata={"tripwire": run.stopped.to_dict()})
        feedback = run.feedback()
        if feedback:  # the turn's notes, for this request
            llm_request.contents.append(types.Content(role="user",
                                                      parts=[types.Part(text=feedback)]))
        return None

    async def after_model_callback(self, *, callback_context: CallbackContext,
                                   llm_response: LlmResponse) -> LlmResponse | None:
        if llm_response.partial:  # a streamed chunk: the whole response comes after
            return None
        parts = llm_response.content.parts if llm_response.content else None
        text = "".join(p.text for p in parts or () if p.text and not p.thought)
        usage = llm_response.usage_metadata
        self._run(callback_context).response(
            text, model=llm_response.model_version,
            input_tokens=usage.prompt_token_count if usage else None,
            output_tokens=usage.candidates_token_count if usage else None,
            cache_read_tokens=usage.cached_content_token_count if usage else None)
        return None  # a cut here refuses the response's calls; the next request ends it

    # -- tools --------------------------------------------------------------------------------

    async def before_tool_callback(self, *, tool: BaseTool, tool_args: dict[str, Any],
                                   tool_context: ToolContext) -> dict[str, Any] | None:
        decision = self._run(tool_context).call(tool.name, tool_args,
                                                tool_context.function_call_id)
        return {"error": refused_call(decision)} if decision.cut_turn else None

    async def after_tool_callback(self, *, tool: BaseTool, tool_args: dict[str, Any],
                                  tool_context: ToolContext, result: Any,
                                  ) -> dict[str, Any] | None:
        run = self._run(tool_context)
        run.result(tool.name, tool_context.function_call_id,
                   payload=result if isinstance(result, str) else repr(result))
        feedback = run.feedback()
        if not feedback:
            return None
        # a tool's plain return value becomes {"result": value} in ADK's function response
        fed = dict(result) if isinstance(result, dict) else {"result": result}
        return {**fed, "tripwire_feedback": feedback}

    async def on_tool_error_callback(self, *, tool: BaseTool, tool_args: dict[str, Any],
                                     tool_context: ToolContext, error: Exception,
                                     ) -> dict[str, Any] | None:
        if isinstance(error, Exception):  # not a cancellation (a BaseException)
            self._run(tool_context).result(tool.name, tool_context.function_call_id,
                                           error=str(error) or type(error).__name__)
        return None


def _said(text: str) -> types.Content:
    return types.Content(role="model", parts=[types.Part(text=text)])
