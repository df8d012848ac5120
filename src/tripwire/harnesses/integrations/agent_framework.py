"""Microsoft Agent Framework integration (``pip install 'tripwire[agent-framework]'``):
agent, function and chat middleware.

    guardrails = Guardrails(GuardrailsConfig(mode="enforce"), feedback_at_once=True)
    tripwire = TripwireMiddleware(guardrails)
    agent = Agent(client=client, tools=[...], middleware=tripwire.middleware)
    response = await agent.run("fix the bug")
    tripwire.stopped            # the Decision that ended the run, or None

One ``agent.run`` is one turn: the agent middleware opens it before the run and closes it
after. Each model response's text and ``usage_details`` are observed by the chat middleware
(priced from the catalogue by its ``model``: the framework reports tokens), each function call
by the function middleware before the function runs, and its result or error after.

A call the guardrails cut never runs: the function middleware sets the refusal as the call's
result and raises ``MiddlewareTermination``, the framework's own graceful stop of its
function-calling loop, so no later model call happens. The run's response then ends with an
assistant message saying why (``additional_properties["tripwire"]``: the decision). A run of a
halted session is answered by the agent middleware with that message alone, before any model
call. Feedback reaches the model inside the next function result (a text item after the
result), or, at the start of a run, as a user message added to the first model request.
Streamed chat responses are observed when the stream is finalized.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

from agent_framework import (
    AgentContext,
    AgentMiddleware,
    AgentResponse,
    ChatContext,
    ChatMiddleware,
    ChatResponse,
    Content,
    FunctionInvocationContext,
    FunctionMiddleware,
    Message,
    MiddlewareTermination,
)

from ...base.decision import Decision
from ...session.guardrails import Guardrails
from .run import GuardedRun, Guarding, content_text, refused_call, stopped_run

__all__ = ["TripwireMiddleware"]

Next = Callable[[], Awaitable[None]]


class TripwireMiddleware(Guarding):
    """The three middleware of one session's ``Guardrails`` (``middleware``: give all three
    to the agent)."""

    def __init__(self, guardrails: Guardrails):
        self.run = GuardedRun(guardrails)
        self.middleware = [_Runs(self.run), _Functions(self.run), _Responses(self.run)]



class _Runs(AgentMiddleware):
    """One agent run, one turn; its refusal, or its last word when it was stopped."""

    def __init__(self, run: GuardedRun):
        self.run = run

    async def process(self, context: AgentContext, call_next: Next) -> None:
        self.run.end()  # a run that failed without closing its turn
        refused = self.run.start()
        if refused is not None:
            context.result = AgentResponse(messages=[_said(refused)])
            return
        try:
            await call_next()
        finally:
            stopped = self.run.stopped
            self.run.end()
        if stopped is not None and isinstance(context.result, AgentResponse):
            context.result.messages.append(_said(stopped))


class _Functions(FunctionMiddleware):
    """Each function call: refused before it runs, or observed with its result."""

    def __init__(self, run: GuardedRun):
        self.run = run

    async def process(self, context: FunctionInvocationContext, call_next: Next) -> None:
        name = context.function.name
        call_id = context.metadata.get("call_id")
        decision = self.run.call(name, dict(context.arguments or {}), call_id)
        if decision.cut_turn:
            context.result = refused_call(decision)
            raise MiddlewareTermination(refused_call(decision), result=context.result)
        try:
            await call_next()
        except MiddlewareTermination:
            raise
        except Exception as error:
            self.run.result(name, call_id, error=str(error) or type(error).__name__)
            raise
        result = context.result
        self.run.result(name, call_id, payload=_result_text(result))
        feedback = self.run.feedback()
        if feedback:
            items = list(result) if isinstance(result, list) else [Content.from_text(str(result))]
            context.result = [*items, Content.from_text(feedback)]


class _Responses(ChatMiddleware):
    """Each model response's text and usage; the turn's notes in the first request."""

    def __init__(self, run: GuardedRun):
        self.run = run

    async def process(self, context: ChatContext, call_next: Next) -> None:
        feedback = self.run.feedback() if self.run.in_run else ""
        if feedback:
            context.messages = [*context.messages, Message(role="user", contents=[feedback])]
        await call_next()
        if context.stream:
            context.stream_result_hooks.append(self._observe)
        elif isinstance(context.result, ChatResponse):
            self._observe(context.result)

    def _observe(self, response: ChatResponse) -> ChatResponse:
        usage = response.usage_details or {}
        self.run.response(response.text, model=response.model,
                          input_tokens=usage.get("input_token_count"),
                          output_tokens=usage.get("output_token_count"),
                          cache_read_tokens=usage.get("cache_read_input_token_count"),
                          cache_write_tokens=usage.get("cache_creation_input_token_count"))
        return response


def _said(decision: Decision) -> Message:
    return Message(role="assistant", contents=[stopped_run(decision)],
                   additional_properties={"tripwire": decision.to_dict()})


def _result_text(result: Any) -> str:
    if isinstance(result, list):
        return content_text([getattr(c, "text", None) or repr(c) for c in result])
    return content_text(result)
