"""Google ADK plugin against the real ``google-adk``, with a scripted ``BaseLlm`` (the shape of
ADK's own test ``MockModel``; no network): the shared cases of ``framework_cases``, and one
plugin serving a fleet's sessions."""

from __future__ import annotations

import asyncio
import os

import pytest

pytest.importorskip("google.adk", reason="needs the google-adk extra: pip install 'tripwire[google-adk]'")
os.environ.setdefault("ADK_DISABLE_TELEMETRY", "1")

from framework_cases import *  # noqa: F403  (the shared tests, collected here)
from framework_cases import (
    INPUT_TOKENS,
    MODEL,
    OUTPUT_TOKENS,
    Driver,
    Outcome,
    Script,
    looping,
)
from google.adk.agents import LlmAgent
from google.adk.apps import App
from google.adk.events import Event
from google.adk.models.base_llm import BaseLlm
from google.adk.models.llm_response import LlmResponse
from google.adk.runners import InMemoryRunner
from google.genai import types

from tripwire import Guardrails, GuardrailsConfig
from tripwire.fleet import Fleet
from tripwire.harnesses.integrations.google_adk import TripwirePlugin


class ScriptedLlm(BaseLlm):
    """A ``BaseLlm`` answering each request with the script's next reply."""

    model: str = MODEL
    script: Script

    async def generate_content_async(self, llm_request, stream: bool = False):
        reply = self.script.next(repr(llm_request.contents))
        parts = [types.Part(text=reply.text)] if reply.text else []
        if reply.path is not None:
            parts.append(types.Part(function_call=types.FunctionCall(
                name="read_file", args={"path": reply.path}, id=f"call_{self.script.requests}")))
        yield LlmResponse(content=types.Content(role="model", parts=parts), model_version=MODEL,
                          usage_metadata=types.GenerateContentResponseUsageMetadata(
                              prompt_token_count=INPUT_TOKENS,
                              candidates_token_count=OUTPUT_TOKENS))


def runner_of(agent: LlmAgent, plugin: TripwirePlugin) -> InMemoryRunner:
    return InMemoryRunner(app=App(name="coder", root_agent=agent, plugins=[plugin]))


class AdkDriver(Driver):
    stop_type = Event  # the invocation's last event: the reason, in the model's place

    def agent(self, script: Script) -> LlmAgent:
        def read_file(path: str) -> str:
            """Read a file."""
            return self.read_file(path)
        return LlmAgent(name="coder", model=ScriptedLlm(script=script), tools=[read_file])

    def invoke(self, runner: InMemoryRunner, user: str, session: str, prompt: str) -> list[Event]:
        async def go() -> list[Event]:
            if await runner.session_service.get_session(app_name=runner.app_name, user_id=user,
                                                        session_id=session) is None:
                await runner.session_service.create_session(app_name=runner.app_name,
                                                            user_id=user, session_id=session)
            message = types.Content(role="user", parts=[types.Part(text=prompt)])
            return [e async for e in runner.run_async(user_id=user, session_id=session,
                                                      new_message=message)]
        return asyncio.run(go())

    def run(self, guardrails: Guardrails, script: Script, prompt: str = "fix the bug") -> Outcome:
        plugin = TripwirePlugin(guardrails)
        runner = runner_of(self.agent(script), plugin)
        events = self.invoke(runner, "u", "s1", prompt)
        final = events[-1]
        stopped = plugin.stopped("s1")
        if stopped is not None:
            assert final.is_final_response()
            assert final.content.parts[0].text.startswith("[tripwire] The run was stopped: ")
            return Outcome(stopped=stopped, stop=final)
        return Outcome(answer=final.content.parts[0].text)


@pytest.fixture
def driver() -> AdkDriver:
    return AdkDriver()


def test_the_refused_call_is_answered_by_the_refusal(implementation) -> None:
    driver = AdkDriver()
    g = Guardrails(GuardrailsConfig(mode="enforce", unattended=True), implementation=implementation)
    runner = runner_of(driver.agent(looping()), TripwirePlugin(g))
    events = driver.invoke(runner, "u", "s1", "go")
    responses = [r.response for e in events for r in e.get_function_responses()]
    assert len(responses) == 5
    assert responses[-1]["error"].startswith("[tripwire] This tool call was not run: watchdog")
    assert events[-1].custom_metadata["tripwire"]["action"] == "halt_session"
    assert driver.executed == ["src/a.py"] * 4


def test_one_plugin_serves_a_fleets_sessions_each_on_its_own(implementation) -> None:
    fleet = Fleet(GuardrailsConfig(mode="enforce", unattended=True), implementation=implementation)
    driver = AdkDriver()
    runner = runner_of(driver.agent(looping()), TripwirePlugin(fleet.session))
    driver.invoke(runner, "u", "stuck", "go")
    assert fleet.session("stuck").halted and driver.executed == ["src/a.py"] * 4
    assert "other" not in fleet
    events = driver.invoke(runner, "u", "other", "go")  # its own session: not refused...
    assert len([e for e in events if e.get_function_responses()]) == 5
    assert driver.executed == ["src/a.py"] * 8  # ...its own loop counted from its own start
    assert events[-1].custom_metadata["tripwire"]["action"] == "halt_session"
