"""tripwire in a CrewAI crew, runnable as is (no network, no API key).

    pip install 'tripwire[crewai]'   # in a venv of its own: crewai pins openai<3, pydantic<2.13
    python examples/crewai_loop.py

The model is a scripted ``BaseLLM`` (CrewAI's custom-LLM contract, native tool calls): it asks
for ``read_file("src/a.py")`` on every step, the way a stuck agent does. ``TripwireHooks`` sees
every call before the tool runs: the fifth identical call is blocked (the tool ran 4 times, the
model is given the refusal as its result), and the next model call raises CrewAI's
``HookAborted``, which ends the kickoff; the session's next kickoff is aborted before any model
call. A second session is not touched.
"""

from __future__ import annotations

import itertools
import json
import os
from collections.abc import Iterator
from typing import Any

os.environ.setdefault("CREWAI_TRACING_ENABLED", "false")
os.environ.setdefault("OTEL_SDK_DISABLED", "true")

from crewai import Agent, Crew, Task  # noqa: E402
from crewai.hooks import HookAborted  # noqa: E402
from crewai.llms.base_llm import BaseLLM  # noqa: E402
from crewai.tools import tool  # noqa: E402

from tripwire import Guardrails, GuardrailsConfig  # noqa: E402
from tripwire.harnesses.integrations.crewai import TripwireHooks  # noqa: E402

ran: list[str] = []  # the tool's side effect
asked: list[int] = []  # the model's requests


@tool("read_file")
def read_file(path: str) -> str:
    """Read a file of the repository."""
    ran.append(path)
    return f"contents of {path}"


class ScriptedLLM(BaseLLM):
    """Answers each request with the next (path to read, text) reply; no path: the answer."""

    replies: Any  # an iterator of (path, text)

    def call(self, messages, tools=None, callbacks=None, available_functions=None,  # type: ignore[no-untyped-def]
             from_task=None, from_agent=None, response_model=None):
        path, text = next(self.replies)
        asked.append(n := len(asked) + 1)
        self._track_token_usage_internal({"prompt_tokens": 1200, "completion_tokens": 40,
                                          "total_tokens": 1240})
        if path is None:
            return text
        return [{"id": f"call_{n}", "type": "function",
                 "function": {"name": "read_file", "arguments": json.dumps({"path": path})}}]

    def supports_function_calling(self) -> bool:
        return True


def run(guardrails: Guardrails, replies: Iterator[tuple[str | None, str]], prompt: str,
        ) -> tuple[str, TripwireHooks]:
    agent = Agent(role="coder", goal="fix the bug", backstory="a careful coder",
                  llm=ScriptedLLM(model="gpt-4o", replies=replies), tools=[read_file],
                  max_iter=100, verbose=False, allow_delegation=False)
    task = Task(description=prompt, expected_output="the fix", agent=agent)
    hooks = TripwireHooks(guardrails)
    crew = hooks.attach(Crew(agents=[agent], tasks=[task], verbose=False))
    try:
        return crew.kickoff().raw, hooks
    except HookAborted as aborted:  # CrewAI's own abort, its reason tripwire's
        return aborted.reason, hooks
    finally:
        hooks.detach()


def main() -> None:
    stuck = Guardrails(GuardrailsConfig(mode="enforce"), session_id="ticket-4711")
    looping = itertools.repeat(("src/a.py", ""))
    _, hooks = run(stuck, looping, "fix the failing test")
    stopped = hooks.stopped
    assert stopped is not None
    print(f"stopped: {stopped.guardrail} {stopped.action} after the tool ran {len(ran)} times")
    print(f"  reason: {stopped.reason}")
    before = len(asked)
    reason, hooks = run(stuck, looping, "try again")
    assert len(asked) == before and hooks.stopped is not None  # the model was not asked
    assert reason.startswith("[tripwire] The run was stopped: ")
    print(f"next run refused before any model call: {hooks.stopped.action}")

    healthy = Guardrails(GuardrailsConfig(mode="enforce"), session_id="ticket-4712")
    files = ["src/a.py", "src/b.py", "src/c.py"]
    replies = iter([*((p, f"Reading {p}.") for p in files), (None, "The bug is in src/c.py: fixed.")])
    answer, _ = run(healthy, replies, "fix the other test")
    print(f"healthy session answered: {answer!r}; halted={healthy.halted}")


if __name__ == "__main__":
    main()
