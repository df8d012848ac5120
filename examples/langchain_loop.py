"""tripwire in a LangChain tool-calling loop, runnable as is (no network, no API key).

    pip install 'tripwire[langchain]'     # langchain-core is all this script needs
    python examples/langchain_loop.py

The model is scripted (``GenericFakeChatModel``): it asks for ``read_file("src/a.py")`` on every
step, the way a stuck agent does. tripwire's callback handler sees every call, result, model
text and usage; the fifth identical call raises ``GuardrailTripped`` before the tool runs, and
the session's next turn is refused before any model call. A second session, whose model reads
different files and answers, is not touched.
"""

from __future__ import annotations

import itertools

from langchain_core.language_models.fake_chat_models import GenericFakeChatModel
from langchain_core.messages import AIMessage, HumanMessage
from langchain_core.tools import tool

from tripwire import GuardrailHalted, Guardrails, GuardrailsConfig
from tripwire.errors import GuardrailTripped
from tripwire.harnesses.integrations.langchain import TripwireCallbackHandler

ran: list[str] = []


@tool
def read_file(path: str) -> str:
    """Read a file of the repository."""
    ran.append(path)
    return f"contents of {path}"


def asks_for(path: str, n: int, text: str = "") -> AIMessage:
    """A model reply asking for one read_file call (with the usage a provider reports)."""
    return AIMessage(content=text,
                     tool_calls=[{"name": "read_file", "args": {"path": path},
                                  "id": f"call_{n}", "type": "tool_call"}],
                     usage_metadata={"input_tokens": 1200, "output_tokens": 40,
                                     "total_tokens": 1240})


def run_turn(model: GenericFakeChatModel, handler: TripwireCallbackHandler, prompt: str) -> str:
    """A hand-written agent loop: model, tools, model ... until the model answers in words."""
    config = {"callbacks": [handler]}
    messages: list = [HumanMessage(prompt)]
    while True:
        reply = model.invoke(messages, config=config)  # a halted session raises here
        messages.append(reply)
        if not reply.tool_calls:
            handler.end_turn()  # a hand-written loop closes its turn itself
            return str(reply.content)
        for call in reply.tool_calls:
            messages.append(read_file.invoke(call, config=config))  # a cut raises here


def main() -> None:
    stuck = Guardrails(GuardrailsConfig(mode="enforce"), session_id="ticket-4711")
    handler = TripwireCallbackHandler(stuck)
    looping = GenericFakeChatModel(messages=(asks_for("src/a.py", n) for n in itertools.count()))
    try:
        run_turn(looping, handler, "fix the failing test")
    except GuardrailTripped as stopped:  # a cut turn or a halted session
        handler.end_turn()
        print(f"stopped: {stopped.guardrail} {stopped.decision.action} after the tool ran "
              f"{len(ran)} times")
        print(f"  reason: {stopped.reason}")
    try:
        run_turn(looping, handler, "try again")
    except GuardrailHalted as refused:  # refused before the model is called
        print(f"next turn refused before any model call: halted by {', '.join(refused.guardrails)}")

    healthy = Guardrails(GuardrailsConfig(mode="enforce"), session_id="ticket-4712")
    files = ["src/a.py", "src/b.py", "src/c.py"]
    replies = [asks_for(path, n, f"Reading {path}.") for n, path in enumerate(files)]
    replies.append(AIMessage(content="The bug is in src/c.py: fixed."))
    answer = run_turn(GenericFakeChatModel(messages=iter(replies)),
                      TripwireCallbackHandler(healthy), "fix the other test")
    print(f"healthy session answered: {answer!r}; halted={healthy.halted}")


if __name__ == "__main__":
    main()
