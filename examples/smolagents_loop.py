"""tripwire in a smolagents agent, runnable as is (no network, no API key).

    pip install 'tripwire[smolagents]'
    python examples/smolagents_loop.py

The model is a scripted smolagents ``Model``: it asks for ``read_file("src/a.py")`` on every
step, the way a stuck agent does. ``TripwireGuard`` guards the agent's tools: the fifth
identical call raises instead of running (the tool ran 4 times) and the guard interrupts the
agent, smolagents' own stop; the session's next run is refused before any model call. A second
session is not touched.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterator

from smolagents import Tool, ToolCallingAgent
from smolagents.models import (
    ChatMessage,
    ChatMessageToolCall,
    ChatMessageToolCallFunction,
    MessageRole,
    Model,
)
from smolagents.monitoring import LogLevel, TokenUsage
from smolagents.utils import AgentError

from tripwire import Guardrails, GuardrailsConfig
from tripwire.harnesses.integrations.smolagents import TripwireGuard

ran: list[str] = []  # the tool's side effect
asked: list[int] = []  # the model's requests


class ReadFile(Tool):
    name = "read_file"
    description = "Read a file of the repository."
    inputs = {"path": {"type": "string", "description": "the file"}}
    output_type = "string"

    def forward(self, path: str) -> str:
        ran.append(path)
        return f"contents of {path}"


class ScriptedModel(Model):
    """Answers each request with the next (path to read, text) reply; no path: the answer."""

    def __init__(self, replies: Iterator[tuple[str | None, str]]):
        super().__init__(model_id="gpt-4o")
        self.replies = replies

    def generate(self, messages, stop_sequences=None, response_format=None,  # type: ignore[no-untyped-def]
                 tools_to_call_from=None, **kwargs) -> ChatMessage:
        path, text = next(self.replies)
        asked.append(n := len(asked) + 1)
        name, args = ("read_file", {"path": path}) if path else ("final_answer", {"answer": text})
        call = ChatMessageToolCall(id=f"call_{n}", type="function",
                                   function=ChatMessageToolCallFunction(name=name, arguments=args))
        return ChatMessage(role=MessageRole.ASSISTANT, content=text if path else "",
                           tool_calls=[call],
                           token_usage=TokenUsage(input_tokens=1200, output_tokens=40))


def run(guard: TripwireGuard, replies: Iterator[tuple[str | None, str]], prompt: str) -> str:
    agent = guard.attach(ToolCallingAgent(tools=[ReadFile()], model=ScriptedModel(replies),
                                          max_steps=50, verbosity_level=LogLevel.OFF))
    return str(agent.run(prompt))


def main() -> None:
    stuck = Guardrails(GuardrailsConfig(mode="enforce"), session_id="ticket-4711")
    looping = itertools.repeat(("src/a.py", ""))
    guard = TripwireGuard(stuck)
    try:
        run(guard, looping, "fix the failing test")
    except AgentError:  # "Agent interrupted.": smolagents' own stop
        stopped = guard.stopped
        assert stopped is not None
        print(f"stopped: {stopped.guardrail} {stopped.action} after the tool ran {len(ran)} times")
        print(f"  reason: {stopped.reason}")
    before = len(asked)
    guard = TripwireGuard(stuck)
    try:
        run(guard, looping, "try again")
    except AgentError:  # AgentGenerationError: the model's generate was refused
        assert len(asked) == before and guard.stopped is not None  # the model was not asked
        print(f"next run refused before any model call: {guard.stopped.action}")

    healthy = Guardrails(GuardrailsConfig(mode="enforce"), session_id="ticket-4712")
    files = ["src/a.py", "src/b.py", "src/c.py"]
    replies = iter([*((p, f"Reading {p}.") for p in files), (None, "The bug is in src/c.py: fixed.")])
    answer = run(TripwireGuard(healthy), replies, "fix the other test")
    print(f"healthy session answered: {answer!r}; halted={healthy.halted}")


if __name__ == "__main__":
    main()
