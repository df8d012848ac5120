"""AutoGen AgentChat integration against the real ``autogen-agentchat``, with AutoGen's own
test client (``ReplayChatCompletionClient``, answering from the script; no network): the shared
cases of ``framework_cases`` through a team (``RoundRobinGroupChat``) whose termination
condition is tripwire's, and the refused call's result as the model sees it."""

from __future__ import annotations

import asyncio

import pytest

pytest.importorskip("autogen_agentchat", reason="needs the autogen extra: pip install 'tripwire[autogen]'")

from autogen_agentchat.agents import AssistantAgent
from autogen_agentchat.conditions import MaxMessageTermination, TextMessageTermination
from autogen_agentchat.messages import StopMessage, ToolCallExecutionEvent
from autogen_agentchat.teams import RoundRobinGroupChat
from autogen_core import FunctionCall
from autogen_core.models import CreateResult, ModelFamily, ModelInfo, RequestUsage
from autogen_core.tools import FunctionTool
from autogen_ext.models.replay import ReplayChatCompletionClient
from framework_cases import *  # noqa: F403  (the shared tests, collected here)
from framework_cases import (
    INPUT_TOKENS,
    MODEL,
    OUTPUT_TOKENS,
    PROVIDER,
    Driver,
    Outcome,
    Script,
    guardrails,
    looping,
)

from tripwire import Guardrails
from tripwire.harnesses.integrations.autogen import TripwireGuard


class ScriptedClient(ReplayChatCompletionClient):
    """AutoGen's replay client, answering each request with the script's next reply (and the
    usage a provider reports) instead of a fixed list."""

    def __init__(self, script: Script):
        super().__init__([], model_info=ModelInfo(vision=False, function_calling=True,
                                                  json_output=False, family=ModelFamily.UNKNOWN,
                                                  structured_output=False))
        self.script = script

    async def create(self, messages, **kwargs) -> CreateResult:
        reply = self.script.next(repr(messages))
        usage = RequestUsage(prompt_tokens=INPUT_TOKENS, completion_tokens=OUTPUT_TOKENS)
        if reply.path is None:
            return CreateResult(finish_reason="stop", content=reply.text, usage=usage,
                                cached=False)
        call = FunctionCall(id=f"call_{self.script.requests}", name="read_file",
                            arguments=f'{{"path": "{reply.path}"}}')
        return CreateResult(finish_reason="function_calls", content=[call], usage=usage,
                            cached=False, thought=reply.text or None)


class AutoGenDriver(Driver):
    stop_type = StopMessage  # the team's termination: its stop message is tripwire's

    def team(self, script: Script, guard: TripwireGuard) -> RoundRobinGroupChat:
        tool = FunctionTool(self.read_file, name="read_file", description="Read a file.")
        agent = AssistantAgent("coder", model_client=ScriptedClient(script),
                               workbench=guard.workbench([tool]))
        return RoundRobinGroupChat([agent], termination_condition=guard.termination
                                   | TextMessageTermination("coder") | MaxMessageTermination(200))

    def run(self, guardrails: Guardrails, script: Script, prompt: str = "fix the bug") -> Outcome:
        guard = TripwireGuard(guardrails, model=MODEL, provider=PROVIDER)
        result = asyncio.run(self.team(script, guard).run(task=prompt))
        if guard.stopped is not None:
            stop = guard.termination.stop_message
            assert stop is not None and result.stop_reason == stop.content
            assert stop.content.startswith("[tripwire] The run was stopped: ")
            assert stop.metadata == {"guardrail": guard.stopped.guardrail or "",
                                     "action": guard.stopped.action}
            return Outcome(stopped=guard.stopped, stop=stop)
        return Outcome(answer=result.messages[-1].content)


@pytest.fixture
def driver() -> AutoGenDriver:
    return AutoGenDriver()


def test_the_refused_call_gets_the_refusal_as_its_error_result(implementation) -> None:
    driver = AutoGenDriver()
    guard = TripwireGuard(guardrails(implementation), model=MODEL, provider=PROVIDER)
    result = asyncio.run(driver.team(looping(), guard).run(task="go"))
    executions = [m for m in result.messages if isinstance(m, ToolCallExecutionEvent)]
    assert len(executions) == 5
    refused = executions[-1].content[0]
    assert refused.is_error
    assert refused.content.startswith("[tripwire] This tool call was not run: watchdog halted")
    assert all(not m.content[0].is_error for m in executions[:4])
    assert driver.executed == ["src/a.py"] * 4


def test_the_team_can_run_again_after_its_own_condition_ended_it(implementation) -> None:
    """Another condition ending the run closes its turn too (the team resets every
    condition): the next run is a new turn, not the old one still open."""
    driver = AutoGenDriver()
    g = guardrails(implementation)
    guard = TripwireGuard(g, model=MODEL, provider=PROVIDER)
    from framework_cases import healthy

    team = driver.team(healthy(), guard)
    asyncio.run(team.run(task="fix the bug"))
    assert not g.in_turn and guard.stopped is None


def test_an_agent_iterating_its_tools_is_refused_every_call_after_the_cut(implementation) -> None:
    """``max_tool_iterations`` > 1: the agent asks its model again inside its own turn, before
    the team checks its condition (the page says so); every call it asks for after the cut is
    refused, none runs, and the team stops when the agent yields."""
    driver = AutoGenDriver()
    g = guardrails(implementation)
    guard = TripwireGuard(g, model=MODEL, provider=PROVIDER)
    script = looping()
    tool = FunctionTool(driver.read_file, name="read_file", description="Read a file.")
    agent = AssistantAgent("coder", model_client=ScriptedClient(script),
                           workbench=guard.workbench([tool]), max_tool_iterations=8)
    team = RoundRobinGroupChat([agent], termination_condition=guard.termination
                               | MaxMessageTermination(200))
    result = asyncio.run(team.run(task="go"))
    assert result.stop_reason.startswith("[tripwire] The run was stopped: watchdog halted")
    assert driver.executed == ["src/a.py"] * 4
    assert script.requests == 8  # the agent's own iterations: 4 ran, 4 refused
    refused = [m.content[0] for m in result.messages if isinstance(m, ToolCallExecutionEvent)
               if m.content[0].is_error]
    assert len(refused) == 4
    assert all(r.content.startswith("[tripwire] This tool call was not run") for r in refused)
