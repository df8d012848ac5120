"""OpenAI Agents SDK integration against the real installed ``openai-agents`` package, with a
scripted model (no network): a looping agent is cut at its 5th identical call and its run ends
with ``GuardrailTripped``; a healthy run is not interfered with."""

from __future__ import annotations

import asyncio
import json

import pytest

pytest.importorskip("agents", reason="needs the openai-agents extra: pip install 'tripwire[openai-agents]'")

from agents import Agent, RunConfig, Runner, function_tool
from agents.items import ModelResponse
from agents.models.interface import Model
from agents.usage import Usage
from openai.types.responses import (
    ResponseFunctionToolCall,
    ResponseOutputMessage,
    ResponseOutputText,
)

from tripwire import GuardrailHalted, Guardrails, GuardrailsConfig
from tripwire.errors import GuardrailTripped
from tripwire.harnesses.integrations.openai_agents import TripwireRunHooks


def tool_call(n: int, name: str, args: dict) -> ResponseFunctionToolCall:
    return ResponseFunctionToolCall(type="function_call", call_id=f"call_{n}", name=name,
                                    arguments=json.dumps(args), id=f"fc_{n}", status="completed")


def say(text: str) -> ResponseOutputMessage:
    return ResponseOutputMessage(type="message", id="msg", role="assistant", status="completed",
                                 content=[ResponseOutputText(type="output_text", text=text,
                                                             annotations=[])])


class ScriptedModel(Model):
    """Answers each model request with the next scripted output items."""

    def __init__(self, script):
        self.script = script
        self.requests = 0

    async def get_response(self, *args, **kwargs) -> ModelResponse:
        output = self.script(self.requests)
        self.requests += 1
        return ModelResponse(output=output, usage=Usage(requests=1, input_tokens=100,
                                                        output_tokens=20, total_tokens=120),
                             response_id=None)

    def stream_response(self, *args, **kwargs):  # pragma: no cover - the tests do not stream
        raise NotImplementedError


executed: list[str] = []


@function_tool
def read_file(path: str) -> str:
    """Read a file."""
    executed.append(path)
    return f"contents of {path}"


def run(hooks: TripwireRunHooks, model: ScriptedModel, prompt: str = "fix the bug"):
    agent = Agent(name="coder", instructions="You fix bugs.", model=model,
                  tools=hooks.guard_tools([read_file]))
    return asyncio.run(Runner.run(agent, prompt, hooks=hooks, max_turns=50,
                                  run_config=RunConfig(tracing_disabled=True)))


def guardrails(implementation: str) -> Guardrails:
    return Guardrails(GuardrailsConfig(mode="enforce", unattended=True), session_id="agents",
                      implementation=implementation)


def test_a_looping_agent_is_cut_at_the_fifth_identical_call(implementation: str) -> None:
    executed.clear()
    g = guardrails(implementation)
    hooks = TripwireRunHooks(g)
    model = ScriptedModel(lambda n: [tool_call(n, "read_file", {"path": "src/a.py"})])
    with pytest.raises(GuardrailTripped) as raised:
        run(hooks, model)
    error = raised.value
    assert error.guardrail == "watchdog"
    assert error.decision.action == "halt_session"
    assert error.halted
    assert [a.signal for a in error.decision.alerts] == ["repeated-tool-call"]
    assert model.requests == 5  # the 5th request asked for the 5th identical call...
    assert executed == ["src/a.py"] * 4  # ...which never ran
    # the session is halted: the next run is refused before any model call
    with pytest.raises(GuardrailHalted):
        run(hooks, model, "try again")
    assert model.requests == 5


def test_a_healthy_run_is_not_interfered_with(implementation: str) -> None:
    executed.clear()
    g = guardrails(implementation)
    hooks = TripwireRunHooks(g)
    files = ["a.py", "b.py", "c.py", "d.py", "e.py", "f.py"]

    def script(n: int):
        if n < len(files):
            return [say(f"Reading {files[n]}."), tool_call(n, "read_file", {"path": files[n]})]
        return [say("The bug is in f.py; fixed.")]

    model = ScriptedModel(script)
    result = run(hooks, model)
    assert result.final_output == "The bug is in f.py; fixed."
    assert executed == files
    assert not g.halted
    # every call, result, text and usage was observed (+ the turn's start and end)
    calls = results = len(files)
    texts = usages = len(files) + 1
    assert g.watchdog.events == calls + results + texts + usages + 2
    status = g.status()
    assert status.counters == {"alerts": {}, "trips": {}, "refused_turns": 0,
                                  "callback_errors": 0}
    assert status.spent_usd == 0.0
    # the next run is a new turn on the same session
    assert run(hooks, ScriptedModel(lambda n: [say("done")])).final_output == "done"
