"""Pydantic AI integration against the real ``pydantic-ai-slim``, with its own scripted model
(``FunctionModel``; no network): the shared cases of ``framework_cases`` and what is Pydantic
AI's own."""

from __future__ import annotations

import asyncio

import pytest

pytest.importorskip("pydantic_ai", reason="needs the pydantic-ai extra: pip install 'tripwire[pydantic-ai]'")

from framework_cases import *  # noqa: F403  (the shared tests, collected here)
from framework_cases import INPUT_TOKENS, MODEL, OUTPUT_TOKENS, PROVIDER, Driver, Outcome, Script
from pydantic_ai import Agent
from pydantic_ai.exceptions import AgentRunError
from pydantic_ai.messages import ModelResponse, TextPart, ToolCallPart
from pydantic_ai.models.function import AgentInfo, FunctionModel
from pydantic_ai.usage import RequestUsage

from tripwire import Guardrails
from tripwire.harnesses.integrations.pydantic_ai import (
    PydanticAIGuardrailTripped,
    TripwireCapability,
)


class PydanticAIDriver(Driver):
    stop_type = PydanticAIGuardrailTripped

    def run(self, guardrails: Guardrails, script: Script, prompt: str = "fix the bug") -> Outcome:
        def respond(messages: list, info: AgentInfo) -> ModelResponse:
            reply = script.next(repr(messages))
            parts: list = [TextPart(reply.text)] if reply.text else []
            if reply.path is not None:
                parts.append(ToolCallPart("read_file", {"path": reply.path},
                                          tool_call_id=f"call_{script.requests}"))
            return ModelResponse(parts=parts, model_name=MODEL, provider_name=PROVIDER,
                                 usage=RequestUsage(input_tokens=INPUT_TOKENS,
                                                    output_tokens=OUTPUT_TOKENS))

        agent = Agent(FunctionModel(respond, model_name=MODEL),
                      capabilities=[TripwireCapability(guardrails)])
        agent.tool_plain(self.read_file)
        try:
            result = agent.run_sync(prompt)
        except PydanticAIGuardrailTripped as stopped:
            return Outcome(stopped=stopped.decision, stop=stopped)
        return Outcome(answer=result.output)


@pytest.fixture
def driver() -> PydanticAIDriver:
    return PydanticAIDriver()


def test_the_stop_is_pydantic_ais_own_run_error_with_the_conversation(implementation) -> None:
    from framework_cases import guardrails, looping

    driver = PydanticAIDriver()
    outcome = driver.run(guardrails(implementation), looping())
    assert isinstance(outcome.stop, AgentRunError)
    assert str(outcome.stop) == outcome.stopped.reason
    calls = [p for m in outcome.stop.conversation.messages for p in getattr(m, "parts", ())
             if isinstance(p, ToolCallPart)]
    assert len(calls) == 5  # the 5th call is in the history, unanswered: it never ran


def test_an_async_run_is_guarded_the_same(implementation) -> None:
    from framework_cases import guardrails, looping

    g = guardrails(implementation)
    driver = PydanticAIDriver()
    script = looping()

    def respond(messages: list, info: AgentInfo) -> ModelResponse:
        reply = script.next()
        return ModelResponse(parts=[ToolCallPart("read_file", {"path": reply.path},
                                                 tool_call_id=f"c{script.requests}")])

    agent = Agent(FunctionModel(respond), tools=[driver.read_file])
    with pytest.raises(PydanticAIGuardrailTripped):
        asyncio.run(agent.run("go", capabilities=[TripwireCapability(g)]))  # per-run capability
    assert driver.executed == ["src/a.py"] * 4
