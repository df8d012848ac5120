"""tripwire in a Pydantic AI agent, runnable as is (no network, no API key).

    pip install 'tripwire[pydantic-ai]'
    python examples/pydantic_ai_loop.py

The model is Pydantic AI's own ``FunctionModel``, scripted: it asks for ``read_file("src/a.py")``
on every step, the way a stuck agent does. ``TripwireCapability`` sees every call before it
runs: the fifth identical call is refused (the tool ran 4 times) and the run ends with
Pydantic AI's own run error; the session's next run is refused before any model call. A
second session, whose model reads different files and answers, is not touched.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterator

from pydantic_ai import Agent
from pydantic_ai.messages import ModelResponse, TextPart, ToolCallPart
from pydantic_ai.models.function import AgentInfo, FunctionModel
from pydantic_ai.usage import RequestUsage

from tripwire import Guardrails, GuardrailsConfig
from tripwire.harnesses.integrations.pydantic_ai import (
    PydanticAIGuardrailTripped,
    TripwireCapability,
)

ran: list[str] = []  # the tool's side effect
asked: list[int] = []  # the model's requests


def read_file(path: str) -> str:
    """Read a file of the repository."""
    ran.append(path)
    return f"contents of {path}"


def scripted(replies: Iterator[tuple[str | None, str]]) -> FunctionModel:
    """A model answering each request with the next (path to read, text) reply."""
    def respond(messages: list, info: AgentInfo) -> ModelResponse:
        path, text = next(replies)
        asked.append(n := len(asked) + 1)
        parts: list = [TextPart(text)] if text else []
        if path is not None:
            parts.append(ToolCallPart("read_file", {"path": path}, tool_call_id=f"call_{n}"))
        return ModelResponse(parts=parts, model_name="gpt-4o", provider_name="openai",
                             usage=RequestUsage(input_tokens=1200, output_tokens=40))
    return FunctionModel(respond, model_name="gpt-4o")


def agent(guardrails: Guardrails, replies: Iterator[tuple[str | None, str]]) -> Agent:
    return Agent(scripted(replies), tools=[read_file],
                 capabilities=[TripwireCapability(guardrails)])


def main() -> None:
    stuck = Guardrails(GuardrailsConfig(mode="enforce"), session_id="ticket-4711")
    looping = itertools.repeat(("src/a.py", ""))
    try:
        agent(stuck, looping).run_sync("fix the failing test")
    except PydanticAIGuardrailTripped as stopped:  # Pydantic AI's AgentRunError
        print(f"stopped: {stopped.decision.guardrail} {stopped.decision.action} after the tool "
              f"ran {len(ran)} times")
        print(f"  reason: {stopped.decision.reason}")
    before = len(asked)
    try:
        agent(stuck, looping).run_sync("try again")
    except PydanticAIGuardrailTripped as refused:
        assert len(asked) == before  # the model was not asked
        print(f"next run refused before any model call: {refused.decision.action}")

    healthy = Guardrails(GuardrailsConfig(mode="enforce"), session_id="ticket-4712")
    files = ["src/a.py", "src/b.py", "src/c.py"]
    replies = iter([*((p, f"Reading {p}.") for p in files), (None, "The bug is in src/c.py: fixed.")])
    answer = agent(healthy, replies).run_sync("fix the other test").output
    print(f"healthy session answered: {answer!r}; halted={healthy.halted}")


if __name__ == "__main__":
    main()
