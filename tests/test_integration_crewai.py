"""CrewAI integration against the real ``crewai``, with a scripted ``BaseLLM`` (CrewAI's
custom-LLM contract; it ships no test model; native tool calls; no network): the shared
cases of ``framework_cases`` through a one-agent crew, and the refused call's result as the
model sees it.

CrewAI pins an older pydantic and openai than the other frameworks' extras, so it cannot share
their venv: ``.ci/run`` tests it in its own (the ``crewai`` extra), and this module skips, saying
so, where it is not installed."""

from __future__ import annotations

import json

import pytest

pytest.importorskip("crewai", reason="needs the crewai extra, in a venv of its own (its pins conflict with the other frameworks'): pip install 'tripwire[crewai]'")

from crewai import Agent, Crew
from crewai import Task as CrewTask  # framework_cases exports tripwire's Task
from crewai.hooks import HookAborted
from crewai.llms.base_llm import BaseLLM
from crewai.tools import tool as crewai_tool
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
from tripwire.harnesses.integrations.crewai import TripwireHooks


class ScriptedLLM(BaseLLM):
    """Answers each request with the script's next reply: a native read_file call, or the
    final answer; reports the usage a provider reports."""

    script: Script

    def call(self, messages, tools=None, callbacks=None, available_functions=None,
             from_task=None, from_agent=None, response_model=None):
        reply = self.script.next(json.dumps(messages, default=str))
        self._track_token_usage_internal({"prompt_tokens": INPUT_TOKENS,
                                          "completion_tokens": OUTPUT_TOKENS,
                                          "total_tokens": INPUT_TOKENS + OUTPUT_TOKENS})
        if reply.path is None:
            return reply.text
        return [{"id": f"call_{self.script.requests}", "type": "function",
                 "function": {"name": "read_file",
                              "arguments": json.dumps({"path": reply.path})}}]

    def supports_function_calling(self) -> bool:
        return True


class CrewAIDriver(Driver):
    stop_type = HookAborted  # CrewAI's own abort of the kickoff

    def crew(self, script: Script) -> Crew:
        @crewai_tool("read_file")
        def read_file(path: str) -> str:
            """Read a file."""
            return self.read_file(path)

        agent = Agent(role="coder", goal="fix the bug", backstory="a careful coder",
                      llm=ScriptedLLM(model=MODEL, script=script), tools=[read_file],
                      max_iter=100, verbose=False, allow_delegation=False)
        task = CrewTask(description="{prompt}", expected_output="the fix", agent=agent)
        return Crew(agents=[agent], tasks=[task], verbose=False)

    def run(self, guardrails: Guardrails, script: Script, prompt: str = "fix the bug") -> Outcome:
        hooks = TripwireHooks(guardrails)
        crew = hooks.attach(self.crew(script))
        try:
            output = crew.kickoff(inputs={"prompt": prompt})
        except HookAborted as aborted:
            assert hooks.stopped is not None
            assert aborted.reason.startswith("[tripwire] The run was stopped: ")
            return Outcome(stopped=hooks.stopped, stop=aborted)
        finally:
            hooks.detach()
        return Outcome(answer=output.raw)


@pytest.fixture
def driver() -> CrewAIDriver:
    return CrewAIDriver()


def test_the_model_is_given_the_refusal_as_the_calls_result(implementation) -> None:
    from crewai.hooks import register_after_tool_call_hook, unregister_after_tool_call_hook

    driver = CrewAIDriver()
    script = looping()
    results: list[str] = []

    def seen(context) -> None:  # runs after tripwire's hook: the result the model is given
        results.append(context.tool_result)

    hooks = TripwireHooks(guardrails(implementation))
    crew = hooks.attach(driver.crew(script))
    register_after_tool_call_hook(seen)
    try:
        with pytest.raises(HookAborted, match=r"^\[tripwire\] The run was stopped: watchdog halted"):
            crew.kickoff(inputs={"prompt": "go"})
    finally:
        hooks.detach()
        unregister_after_tool_call_hook(seen)
    assert results[:4] == ["contents of src/a.py"] * 4
    assert results[4].startswith("[tripwire] This tool call was not run: watchdog halted")
    assert len(results) == 5 and driver.executed == ["src/a.py"] * 4
    assert script.requests == 5  # the 6th model call was aborted before it was made


def test_hooks_of_another_crew_leave_this_one_alone(implementation) -> None:
    """CrewAI's hooks are process-wide: one crew's guard does not see another crew."""
    from framework_cases import ANSWER, FILES, healthy

    driver = CrewAIDriver()
    task = Task("fix the bug", task_id="ticket-2")  # tripwire's (framework_cases)
    hooks = TripwireHooks(guardrails(implementation, task=task))
    hooks.attach(driver.crew(looping()))
    try:
        assert driver.crew(healthy()).kickoff(inputs={"prompt": "go"}).raw == ANSWER
    finally:
        hooks.detach()
    assert driver.executed == FILES
    assert (task.steps, task.tool_calls, task.tokens) == (0, 0, 0)


def test_detach_leaves_the_crew_as_it_was(implementation) -> None:
    from crewai.hooks import get_before_tool_call_hooks

    crew = CrewAIDriver().crew(looping())
    before = (list(crew.before_kickoff_callbacks), list(crew.after_kickoff_callbacks),
              list(get_before_tool_call_hooks()))
    hooks = TripwireHooks(guardrails(implementation))
    hooks.attach(crew)
    assert len(get_before_tool_call_hooks()) == len(before[2]) + 1
    hooks.detach()
    assert (crew.before_kickoff_callbacks, crew.after_kickoff_callbacks,
            get_before_tool_call_hooks()) == before


def test_crewais_own_no_progress_stop_comes_after_the_fifth_call_ran() -> None:
    """Without tripwire, CrewAI stops a run whose same call returned the same result 5 times:
    after the 5th ran (tripwire refuses the 5th before it runs)."""
    from crewai.tools.tool_failure import ToolExecutionFailedError

    driver = CrewAIDriver()
    with pytest.raises(ToolExecutionFailedError, match="same arguments 5 times"):
        driver.crew(looping()).kickoff(inputs={"prompt": "go"})
    assert driver.executed == ["src/a.py"] * 5


def test_the_crewai_example_runs_with_its_scripted_model(implementation) -> None:
    """examples/crewai_loop.py, here rather than in test_examples: it runs where crewai is."""
    from test_examples import assert_the_example_tells_its_story, run_example

    assert_the_example_tells_its_story(run_example("crewai_loop.py", implementation))
