"""tripwire in a Microsoft Agent Framework agent, runnable as is (no network, no API key).

    pip install 'tripwire[agent-framework]'
    python examples/agent_framework_loop.py

The chat client is scripted (a ``BaseChatClient`` with the framework's function-calling and
middleware layers): it asks for ``read_file("src/a.py")`` on every step, the way a stuck agent
does. ``TripwireMiddleware`` sees every function call before it runs: the fifth identical
call gets the refusal as its result instead of running (the function ran 4 times) and
``MiddlewareTermination`` ends the function loop; the run's last message says why. The
session's next run is answered by that message before any model call. A second session is not
touched.
"""

from __future__ import annotations

import asyncio
import itertools
from collections.abc import Iterator

from agent_framework import Agent, BaseChatClient, ChatResponse, Content, FunctionTool, Message
from agent_framework._middleware import ChatMiddlewareLayer
from agent_framework._tools import FunctionInvocationLayer

from tripwire import Guardrails, GuardrailsConfig
from tripwire.harnesses.integrations.agent_framework import TripwireMiddleware

ran: list[str] = []  # the function's side effect
asked: list[int] = []  # the model's requests


def read_file(path: str) -> str:
    """Read a file of the repository."""
    ran.append(path)
    return f"contents of {path}"


class ScriptedClient(FunctionInvocationLayer, ChatMiddlewareLayer, BaseChatClient):
    """Answers each request with the next (path to read, text) reply."""

    def __init__(self, replies: Iterator[tuple[str | None, str]]):
        super().__init__()
        self.replies = replies

    def _inner_get_response(self, *, messages, stream, options, **kwargs):  # type: ignore[no-untyped-def]
        async def respond() -> ChatResponse:
            path, text = next(self.replies)
            asked.append(n := len(asked) + 1)
            contents = [Content.from_text(text)] if text else []
            if path is not None:
                contents.append(Content.from_function_call(call_id=f"call_{n}", name="read_file",
                                                           arguments={"path": path}))
            return ChatResponse(messages=[Message(role="assistant", contents=contents)],
                                model="gpt-4o", usage_details={"input_token_count": 1200,
                                                               "output_token_count": 40})
        return respond()


def run(guardrails: Guardrails, replies: Iterator[tuple[str | None, str]], prompt: str,
        ) -> tuple[str, TripwireMiddleware]:
    tripwire = TripwireMiddleware(guardrails)
    tool = FunctionTool(name="read_file", description="Read a file.", func=read_file)
    agent = Agent(client=ScriptedClient(replies), tools=[tool], middleware=tripwire.middleware)
    response = asyncio.run(agent.run(prompt))
    return response.messages[-1].text, tripwire


def main() -> None:
    stuck = Guardrails(GuardrailsConfig(mode="enforce"), session_id="ticket-4711")
    looping = itertools.repeat(("src/a.py", ""))
    _, tripwire = run(stuck, looping, "fix the failing test")
    stopped = tripwire.stopped
    assert stopped is not None
    print(f"stopped: {stopped.guardrail} {stopped.action} after the tool ran {len(ran)} times")
    print(f"  reason: {stopped.reason}")
    before = len(asked)
    final, tripwire = run(stuck, looping, "try again")
    assert len(asked) == before and tripwire.stopped is not None  # the model was not asked
    assert final.startswith("[tripwire] The run was stopped: ")  # the run's last message
    print(f"next run refused before any model call: {tripwire.stopped.action}")

    healthy = Guardrails(GuardrailsConfig(mode="enforce"), session_id="ticket-4712")
    files = ["src/a.py", "src/b.py", "src/c.py"]
    replies = iter([*((p, f"Reading {p}.") for p in files), (None, "The bug is in src/c.py: fixed.")])
    answer, _ = run(healthy, replies, "fix the other test")
    print(f"healthy session answered: {answer!r}; halted={healthy.halted}")


if __name__ == "__main__":
    main()
