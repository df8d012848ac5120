"""tripwire in an AutoGen AgentChat team, runnable as is (no network, no API key).

    pip install 'tripwire[autogen]' autogen-ext   # autogen-ext: AutoGen's replay test client
    python examples/autogen_loop.py

The model is AutoGen's ``ReplayChatCompletionClient``, scripted: it asks for
``read_file("src/a.py")`` on every step, the way a stuck agent does. The guarded workbench sees
every call before the tool runs: the fifth identical call gets an error result with the refusal
instead of running (the tool ran 4 times), and tripwire's termination condition ends the team
(``TaskResult.stop_reason`` says why); the session's next run is stopped on its task, before any
model call. A second session is not touched.
"""

from __future__ import annotations

import asyncio
import itertools
from collections.abc import Iterator

from autogen_agentchat.agents import AssistantAgent
from autogen_agentchat.conditions import TextMessageTermination
from autogen_agentchat.teams import RoundRobinGroupChat
from autogen_core import FunctionCall
from autogen_core.models import CreateResult, ModelFamily, ModelInfo, RequestUsage
from autogen_core.tools import FunctionTool
from autogen_ext.models.replay import ReplayChatCompletionClient

from tripwire import Guardrails, GuardrailsConfig
from tripwire.harnesses.integrations.autogen import TripwireGuard

ran: list[str] = []  # the tool's side effect
asked: list[int] = []  # the model's requests


def read_file(path: str) -> str:
    """Read a file of the repository."""
    ran.append(path)
    return f"contents of {path}"


class ScriptedClient(ReplayChatCompletionClient):
    """The replay client, answering each request with the next (path to read, text) reply."""

    def __init__(self, replies: Iterator[tuple[str | None, str]]):
        super().__init__([], model_info=ModelInfo(vision=False, function_calling=True,
                                                  json_output=False, family=ModelFamily.UNKNOWN,
                                                  structured_output=False))
        self.replies = replies

    async def create(self, messages, **kwargs) -> CreateResult:  # type: ignore[no-untyped-def]
        path, text = next(self.replies)
        asked.append(n := len(asked) + 1)
        usage = RequestUsage(prompt_tokens=1200, completion_tokens=40)
        if path is None:
            return CreateResult(finish_reason="stop", content=text, usage=usage, cached=False)
        call = FunctionCall(id=f"call_{n}", name="read_file", arguments=f'{{"path": "{path}"}}')
        return CreateResult(finish_reason="function_calls", content=[call], usage=usage,
                            cached=False, thought=text or None)


def run(guardrails: Guardrails, replies: Iterator[tuple[str | None, str]], prompt: str,
        ) -> tuple[str | None, TripwireGuard]:
    guard = TripwireGuard(guardrails, model="gpt-4o", provider="openai")  # prices the tokens
    tool = FunctionTool(read_file, name="read_file", description="Read a file.")
    agent = AssistantAgent("coder", model_client=ScriptedClient(replies),
                           workbench=guard.workbench([tool]))
    team = RoundRobinGroupChat([agent], termination_condition=guard.termination
                               | TextMessageTermination("coder"))
    result = asyncio.run(team.run(task=prompt))
    if guard.stopped is not None:
        return result.stop_reason, guard
    return str(result.messages[-1].content), guard


def main() -> None:
    stuck = Guardrails(GuardrailsConfig(mode="enforce"), session_id="ticket-4711")
    looping = itertools.repeat(("src/a.py", ""))
    _, guard = run(stuck, looping, "fix the failing test")
    stopped = guard.stopped
    assert stopped is not None
    print(f"stopped: {stopped.guardrail} {stopped.action} after the tool ran {len(ran)} times")
    print(f"  reason: {stopped.reason}")
    before = len(asked)
    reason, guard = run(stuck, looping, "try again")
    assert len(asked) == before and guard.stopped is not None  # the model was not asked
    assert str(reason).startswith("[tripwire] The run was stopped: ")  # the team's stop reason
    print(f"next run refused before any model call: {guard.stopped.action}")

    healthy = Guardrails(GuardrailsConfig(mode="enforce"), session_id="ticket-4712")
    files = ["src/a.py", "src/b.py", "src/c.py"]
    replies = iter([*((p, f"Reading {p}.") for p in files), (None, "The bug is in src/c.py: fixed.")])
    answer, _ = run(healthy, replies, "fix the other test")
    print(f"healthy session answered: {answer!r}; halted={healthy.halted}")


if __name__ == "__main__":
    main()
