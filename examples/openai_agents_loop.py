"""tripwire in an OpenAI Agents SDK run, runnable as is (no network, no API key).

    pip install 'tripwire[openai-agents]'
    python examples/openai_agents_loop.py

The model is scripted (a ``Model`` of the SDK that answers from a list): it asks for
``read_file("src/a.py")`` on every request, the way a stuck agent does. ``TripwireRunHooks``
observes every call, result, model text and usage of the run, and its tool input guardrail
stops the fifth identical call before the tool runs: ``Runner.run`` ends with
``GuardrailTripped``, and the session's next run is refused before any model call. A second
session, whose model reads different files and answers, is not touched.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable
from typing import Any

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

ran: list[str] = []


@function_tool
def read_file(path: str) -> str:
    """Read a file of the repository."""
    ran.append(path)
    return f"contents of {path}"


def asks_for(path: str, n: int) -> ResponseFunctionToolCall:
    return ResponseFunctionToolCall(type="function_call", call_id=f"call_{n}", name="read_file",
                                    arguments=json.dumps({"path": path}), id=f"fc_{n}",
                                    status="completed")


def says(text: str) -> ResponseOutputMessage:
    return ResponseOutputMessage(type="message", id="msg", role="assistant", status="completed",
                                 content=[ResponseOutputText(type="output_text", text=text,
                                                             annotations=[])])


class ScriptedModel(Model):
    """A model that answers request n with ``script(n)`` (and a provider's usage)."""

    def __init__(self, script: Callable[[int], list[Any]]) -> None:
        self.script = script
        self.requests = 0

    async def get_response(self, *args: Any, **kwargs: Any) -> ModelResponse:
        output = self.script(self.requests)
        self.requests += 1
        return ModelResponse(output=output, usage=Usage(requests=1, input_tokens=1200,
                                                        output_tokens=40, total_tokens=1240),
                             response_id=None)

    def stream_response(self, *args: Any, **kwargs: Any) -> Any:
        raise NotImplementedError("this example does not stream")


async def run(guardrails: Guardrails, model: ScriptedModel, prompt: str) -> str:
    hooks = TripwireRunHooks(guardrails)  # one per session; every run of it passes the same
    agent = Agent(name="coder", instructions="You fix bugs.", model=model,
                  tools=hooks.guard_tools([read_file]))  # adds tripwire's tool input guardrail
    result = await Runner.run(agent, prompt, hooks=hooks, max_turns=50,
                              run_config=RunConfig(tracing_disabled=True))
    return str(result.final_output)


async def main() -> None:
    stuck = Guardrails(GuardrailsConfig(mode="enforce"), session_id="ticket-4711")
    looping = ScriptedModel(lambda n: [asks_for("src/a.py", n)])
    try:
        await run(stuck, looping, "fix the failing test")
    except GuardrailTripped as stopped:  # a cut turn or a halted session
        print(f"stopped: {stopped.guardrail} {stopped.decision.action} after the tool ran "
              f"{len(ran)} times")
        print(f"  reason: {stopped.reason}")
    try:
        await run(stuck, looping, "try again")
    except GuardrailHalted as refused:  # refused before any model call
        print(f"next run refused before any model call (model requests so far: "
              f"{looping.requests}): halted by {', '.join(refused.guardrails)}")

    healthy = Guardrails(GuardrailsConfig(mode="enforce"), session_id="ticket-4712")
    files = ["src/a.py", "src/b.py", "src/c.py"]

    def reads_then_answers(n: int) -> list[Any]:
        if n < len(files):
            return [says(f"Reading {files[n]}."), asks_for(files[n], 100 + n)]
        return [says("The bug is in src/c.py: fixed.")]

    answer = await run(healthy, ScriptedModel(reads_then_answers), "fix the other test")
    print(f"healthy session answered: {answer!r}; halted={healthy.halted}")


if __name__ == "__main__":
    asyncio.run(main())
