"""smolagents guard against the real ``smolagents``, with a scripted ``Model`` (smolagents
ships no test model; its ``Model`` subclass contract is ``generate``; no network): the shared
cases of ``framework_cases``, and a ``CodeAgent`` whose code calls the guarded tool."""

from __future__ import annotations

import itertools

import pytest

pytest.importorskip("smolagents", reason="needs the smolagents extra: pip install 'tripwire[smolagents]'")

from framework_cases import *  # noqa: F403  (the shared tests, collected here)
from framework_cases import (
    INPUT_TOKENS,
    MODEL,
    OUTPUT_TOKENS,
    Driver,
    Outcome,
    Script,
    guardrails,
)
from smolagents import CodeAgent, Tool, ToolCallingAgent
from smolagents.models import (
    ChatMessage,
    ChatMessageToolCall,
    ChatMessageToolCallFunction,
    MessageRole,
    Model,
)
from smolagents.monitoring import LogLevel, TokenUsage
from smolagents.utils import AgentError, AgentGenerationError

from tripwire import Guardrails
from tripwire.harnesses.integrations.smolagents import TripwireGuard


class ScriptedModel(Model):
    """Answers each request with the script's next reply: a read_file call, or final_answer."""

    def __init__(self, script: Script):
        super().__init__(model_id=MODEL)
        self.script = script

    def generate(self, messages, stop_sequences=None, response_format=None,
                 tools_to_call_from=None, **kwargs) -> ChatMessage:
        reply = self.script.next(repr(messages))
        name, args = (("read_file", {"path": reply.path}) if reply.path is not None
                      else ("final_answer", {"answer": reply.text}))
        call = ChatMessageToolCall(id=f"call_{self.script.requests}", type="function",
                                   function=ChatMessageToolCallFunction(name=name, arguments=args))
        return ChatMessage(role=MessageRole.ASSISTANT, content=reply.text if reply.path else "",
                           tool_calls=[call],
                           token_usage=TokenUsage(input_tokens=INPUT_TOKENS,
                                                  output_tokens=OUTPUT_TOKENS))


class ReadFile(Tool):
    name = "read_file"
    description = "Read a file."
    inputs = {"path": {"type": "string", "description": "the file"}}
    output_type = "string"

    def __init__(self, driver: Driver):
        super().__init__()
        self.driver = driver

    def forward(self, path: str) -> str:
        return self.driver.read_file(path)


class SmolagentsDriver(Driver):
    stop_type = AgentError  # smolagents' own: an interrupted run, or a refused generation

    def run(self, guardrails: Guardrails, script: Script, prompt: str = "fix the bug") -> Outcome:
        guard = TripwireGuard(guardrails)
        agent = guard.attach(ToolCallingAgent(tools=[ReadFile(self)], model=ScriptedModel(script),
                                              max_steps=50, verbosity_level=LogLevel.OFF))
        try:
            answer = agent.run(prompt)
        except AgentError as stopped:
            assert guard.stopped is not None
            return Outcome(stopped=guard.stopped, stop=stopped)
        return Outcome(answer=answer)


@pytest.fixture
def driver() -> SmolagentsDriver:
    return SmolagentsDriver()


def test_the_stops_are_smolagents_own(implementation) -> None:
    from framework_cases import looping

    driver = SmolagentsDriver()
    g = guardrails(implementation)
    outcome = driver.run(g, looping())
    assert str(outcome.stop) == "Agent interrupted."  # agent.interrupt(): the run's own stop
    refused = driver.run(g, looping())
    assert isinstance(refused.stop, AgentGenerationError)
    assert refused.stop.__cause__.decision.action == "refuse_turn"


def test_a_code_agents_tool_calls_are_guarded(implementation) -> None:
    driver = SmolagentsDriver()
    g = guardrails(implementation)
    guard = TripwireGuard(g)
    n = itertools.count()

    class CodeModel(Model):
        def generate(self, messages, **kwargs) -> ChatMessage:
            next(n)
            return ChatMessage(role=MessageRole.ASSISTANT,
                               content="Thought: read it again\n<code>\nprint(read_file(path='src/a.py'))\n</code>",
                               token_usage=TokenUsage(input_tokens=10, output_tokens=5))

    agent = guard.attach(CodeAgent(tools=[ReadFile(driver)], model=CodeModel(model_id=MODEL),
                                   max_steps=20, verbosity_level=LogLevel.OFF))
    with pytest.raises(AgentError, match="Agent interrupted"):
        agent.run("fix the bug")
    assert driver.executed == ["src/a.py"] * 4
    assert guard.stopped.action == "halt_session"
    assert "[tripwire] This tool call was not run" in str(agent.memory.steps[-1].error)
