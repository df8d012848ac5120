"""tripwire in a LangChain v1 agent (``create_agent``), runnable as is (no network, no API key).

    pip install 'tripwire[langchain-agents]'
    python examples/langchain_agent_loop.py

The model is LangChain's ``GenericFakeChatModel``, scripted: it asks for ``read_file("src/a.py")``
on every step, the way a stuck agent does. ``TripwireMiddleware`` sees every call before the
tool runs: the fifth identical call gets an error ``ToolMessage`` instead of running (the tool
ran 4 times) and the run jumps to its end with an ``AIMessage`` saying why; the session's next
run ends the same way before any model call. A second session is not touched.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterator

from langchain.agents import create_agent
from langchain_core.language_models.fake_chat_models import GenericFakeChatModel
from langchain_core.messages import AIMessage
from langchain_core.tools import tool

from tripwire import Guardrails, GuardrailsConfig
from tripwire.harnesses.integrations.langchain_middleware import TripwireMiddleware

ran: list[str] = []  # the tool's side effect
asked: list[int] = []  # the model's requests


@tool
def read_file(path: str) -> str:
    """Read a file of the repository."""
    ran.append(path)
    return f"contents of {path}"


class ScriptedModel(GenericFakeChatModel):
    """The fake model, taking the tools ``create_agent`` binds (its replies are scripted)."""

    def bind_tools(self, tools, **kwargs):  # type: ignore[no-untyped-def]
        return self


def scripted(replies: Iterator[tuple[str | None, str]]) -> ScriptedModel:
    def messages() -> Iterator[AIMessage]:
        for path, text in replies:
            asked.append(n := len(asked) + 1)
            calls = [{"name": "read_file", "args": {"path": path}, "id": f"call_{n}",
                      "type": "tool_call"}] if path else []
            yield AIMessage(content=text, tool_calls=calls,
                            usage_metadata={"input_tokens": 1200, "output_tokens": 40,
                                            "total_tokens": 1240},
                            response_metadata={"model_name": "gpt-4o", "model_provider": "openai"})
    return ScriptedModel(messages=messages())


def run(guardrails: Guardrails, replies: Iterator[tuple[str | None, str]], prompt: str,
        ) -> tuple[str, TripwireMiddleware]:
    middleware = TripwireMiddleware(guardrails)
    agent = create_agent(scripted(replies), tools=[read_file], middleware=[middleware])
    final = agent.invoke({"messages": [("user", prompt)]})["messages"][-1]
    return str(final.content), middleware


def main() -> None:
    stuck = Guardrails(GuardrailsConfig(mode="enforce"), session_id="ticket-4711")
    looping = itertools.repeat(("src/a.py", ""))
    _, middleware = run(stuck, looping, "fix the failing test")
    stopped = middleware.stopped
    assert stopped is not None
    print(f"stopped: {stopped.guardrail} {stopped.action} after the tool ran {len(ran)} times")
    print(f"  reason: {stopped.reason}")
    before = len(asked)
    final, middleware = run(stuck, looping, "try again")
    assert len(asked) == before and middleware.stopped is not None  # the model was not asked
    assert final.startswith("[tripwire] The run was stopped: ")  # the run's last message
    print(f"next run refused before any model call: {middleware.stopped.action}")

    healthy = Guardrails(GuardrailsConfig(mode="enforce"), session_id="ticket-4712")
    files = ["src/a.py", "src/b.py", "src/c.py"]
    replies = iter([*((p, f"Reading {p}.") for p in files), (None, "The bug is in src/c.py: fixed.")])
    answer, _ = run(healthy, replies, "fix the other test")
    print(f"healthy session answered: {answer!r}; halted={healthy.halted}")


if __name__ == "__main__":
    main()
