"""Microsoft Agent Framework middleware against the real ``agent-framework-core``, with a
scripted chat client (a ``BaseChatClient`` with the framework's function-invocation and
middleware layers; the core ships no test client; no network): the shared cases of
``framework_cases``, and a streamed run."""

from __future__ import annotations

import asyncio

import pytest

pytest.importorskip("agent_framework", reason="needs the agent-framework extra: pip install 'tripwire[agent-framework]'")

from agent_framework import (
    Agent,
    AgentResponse,
    BaseChatClient,
    ChatResponse,
    Content,
    FunctionTool,
    Message,
)
from agent_framework._middleware import ChatMiddlewareLayer
from agent_framework._tools import FunctionInvocationLayer
from framework_cases import *  # noqa: F403  (the shared tests, collected here)
from framework_cases import (
    INPUT_TOKENS,
    MODEL,
    OUTPUT_TOKENS,
    Driver,
    Outcome,
    Script,
    guardrails,
    looping,
)

from tripwire import Guardrails
from tripwire.harnesses.integrations.agent_framework import TripwireMiddleware


class ScriptedClient(FunctionInvocationLayer, ChatMiddlewareLayer, BaseChatClient):
    """Answers each request with the script's next reply (the layers a real client has)."""

    def __init__(self, script: Script):
        super().__init__()
        self.script = script

    def _inner_get_response(self, *, messages, stream, options, **kwargs):
        async def respond() -> ChatResponse:
            reply = self.script.next(repr([(c.text, c.result) for m in messages for c in m.contents]))
            contents = [Content.from_text(reply.text)] if reply.text else []
            if reply.path is not None:
                contents.append(Content.from_function_call(
                    call_id=f"call_{self.script.requests}", name="read_file",
                    arguments={"path": reply.path}))
            return ChatResponse(messages=[Message(role="assistant", contents=contents)],
                                model=MODEL, usage_details={"input_token_count": INPUT_TOKENS,
                                                            "output_token_count": OUTPUT_TOKENS})
        return respond()


class AgentFrameworkDriver(Driver):
    stop_type = AgentResponse  # the function loop terminated; the response says why

    def agent(self, script: Script, tripwire: TripwireMiddleware) -> Agent:
        tool = FunctionTool(name="read_file", description="Read a file.", func=self.read_file)
        return Agent(client=ScriptedClient(script), tools=[tool], middleware=tripwire.middleware)

    def run(self, guardrails: Guardrails, script: Script, prompt: str = "fix the bug") -> Outcome:
        tripwire = TripwireMiddleware(guardrails)
        response = asyncio.run(self.agent(script, tripwire).run(prompt))
        if tripwire.stopped is not None:
            last = response.messages[-1]
            assert last.additional_properties["tripwire"] == tripwire.stopped.to_dict()
            assert last.text.startswith("[tripwire] The run was stopped: ")
            return Outcome(stopped=tripwire.stopped, stop=response)
        return Outcome(answer=response.messages[-1].text)


@pytest.fixture
def driver() -> AgentFrameworkDriver:
    return AgentFrameworkDriver()


def test_the_refused_call_gets_the_refusal_as_its_result(implementation) -> None:
    driver = AgentFrameworkDriver()
    tripwire = TripwireMiddleware(guardrails(implementation))
    response = asyncio.run(driver.agent(looping(), tripwire).run("go"))
    results = [c for m in response.messages for c in m.contents if c.type == "function_result"]
    assert len(results) == 5
    assert "[tripwire] This tool call was not run: watchdog halted" in str(results[-1].result)
    assert driver.executed == ["src/a.py"] * 4
