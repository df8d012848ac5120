"""tripwire in a Google ADK agent, runnable as is (no network, no API key).

    pip install 'tripwire[google-adk]'
    python examples/google_adk_loop.py

The model is a scripted ``BaseLlm``: it asks for ``read_file("src/a.py")`` on every step, the
way a stuck agent does. ``TripwirePlugin`` sees every call before the tool runs: the fifth
identical call is answered by its refusal instead of running (the tool ran 4 times) and the
invocation ends with the reason as its final response; the session's next invocation ends the
same way before any model call. A second session is not touched.
"""

from __future__ import annotations

import asyncio
import itertools
import os
from collections.abc import AsyncIterator, Iterator

os.environ.setdefault("ADK_DISABLE_TELEMETRY", "1")

from google.adk.agents import LlmAgent  # noqa: E402
from google.adk.apps import App  # noqa: E402
from google.adk.models.base_llm import BaseLlm  # noqa: E402
from google.adk.models.llm_response import LlmResponse  # noqa: E402
from google.adk.runners import InMemoryRunner  # noqa: E402
from google.genai import types  # noqa: E402

from tripwire import Guardrails, GuardrailsConfig  # noqa: E402
from tripwire.harnesses.integrations.google_adk import TripwirePlugin  # noqa: E402

ran: list[str] = []  # the tool's side effect
asked: list[int] = []  # the model's requests


def read_file(path: str) -> str:
    """Read a file of the repository."""
    ran.append(path)
    return f"contents of {path}"


class ScriptedLlm(BaseLlm):
    """Answers each request with the next (path to read, text) reply."""

    model: str = "gpt-4o"
    replies: Iterator[tuple[str | None, str]]

    async def generate_content_async(self, llm_request, stream: bool = False,  # type: ignore[no-untyped-def]
                                     ) -> AsyncIterator[LlmResponse]:
        path, text = next(self.replies)
        asked.append(n := len(asked) + 1)
        parts = [types.Part(text=text)] if text else []
        if path is not None:
            parts.append(types.Part(function_call=types.FunctionCall(
                name="read_file", args={"path": path}, id=f"call_{n}")))
        yield LlmResponse(content=types.Content(role="model", parts=parts), model_version="gpt-4o",
                          usage_metadata=types.GenerateContentResponseUsageMetadata(
                              prompt_token_count=1200, candidates_token_count=40))


def run(guardrails: Guardrails, replies: Iterator[tuple[str | None, str]], prompt: str,
        ) -> tuple[str, TripwirePlugin]:
    plugin = TripwirePlugin(guardrails)
    agent = LlmAgent(name="coder", model=ScriptedLlm(replies=replies), tools=[read_file])
    runner = InMemoryRunner(app=App(name="coder", root_agent=agent, plugins=[plugin]))

    async def go() -> str:
        await runner.session_service.create_session(app_name="coder", user_id="u",
                                                    session_id="s1")
        message = types.Content(role="user", parts=[types.Part(text=prompt)])
        events = [e async for e in runner.run_async(user_id="u", session_id="s1",
                                                    new_message=message)]
        return str(events[-1].content.parts[0].text)
    return asyncio.run(go()), plugin


def main() -> None:
    stuck = Guardrails(GuardrailsConfig(mode="enforce"), session_id="ticket-4711")
    looping = itertools.repeat(("src/a.py", ""))
    _, plugin = run(stuck, looping, "fix the failing test")
    stopped = plugin.stopped("s1")
    assert stopped is not None
    print(f"stopped: {stopped.guardrail} {stopped.action} after the tool ran {len(ran)} times")
    print(f"  reason: {stopped.reason}")
    before = len(asked)
    final, plugin = run(stuck, looping, "try again")
    refused = plugin.stopped("s1")
    assert len(asked) == before and refused is not None  # the model was not asked
    assert final.startswith("[tripwire] The run was stopped: ")  # the invocation's last event
    print(f"next run refused before any model call: {refused.action}")

    healthy = Guardrails(GuardrailsConfig(mode="enforce"), session_id="ticket-4712")
    files = ["src/a.py", "src/b.py", "src/c.py"]
    replies = iter([*((p, f"Reading {p}.") for p in files), (None, "The bug is in src/c.py: fixed.")])
    answer, _ = run(healthy, replies, "fix the other test")
    print(f"healthy session answered: {answer!r}; halted={healthy.halted}")


if __name__ == "__main__":
    main()
