"""LangChain integration against the real installed ``langchain-core``, with a scripted fake
chat model (no network): a looping agent is cut at its 5th identical call and its run ends with
``GuardrailTripped``; a healthy run is not interfered with."""

from __future__ import annotations

import itertools

import pytest

pytest.importorskip("langchain_core", reason="needs the langchain extra: pip install 'tripwire[langchain]'")

from langchain_core.language_models.fake_chat_models import GenericFakeChatModel
from langchain_core.messages import AIMessage, HumanMessage
from langchain_core.tools import tool

from tripwire import GuardrailHalted, Guardrails, GuardrailsConfig
from tripwire.errors import GuardrailTripped
from tripwire.harnesses.integrations.langchain import TripwireCallbackHandler

executed: list[str] = []


@tool
def read_file(path: str) -> str:
    """Read a file."""
    executed.append(path)
    return f"contents of {path}"


def calling(n: int, path: str, text: str = "") -> AIMessage:
    return AIMessage(content=text, tool_calls=[{"name": "read_file", "args": {"path": path},
                                                "id": f"call_{n}", "type": "tool_call"}],
                     usage_metadata={"input_tokens": 100, "output_tokens": 20,
                                     "total_tokens": 120})


def agent_loop(model, handler: TripwireCallbackHandler, prompt: str, max_steps: int = 50) -> str:
    """The smallest tool-calling agent: model, tools, model ... until a text answer."""
    config = {"callbacks": [handler]}
    messages = [HumanMessage(prompt)]
    for _ in range(max_steps):
        answer = model.invoke(messages, config=config)
        messages.append(answer)
        if not answer.tool_calls:
            handler.end_turn()
            return answer.content
        for call in answer.tool_calls:
            messages.append(read_file.invoke(call, config=config))
    raise AssertionError("the agent did not finish")


def guardrails(implementation: str) -> Guardrails:
    return Guardrails(GuardrailsConfig(mode="enforce", unattended=True), session_id="lc",
                      implementation=implementation)


def test_a_looping_agent_is_cut_at_the_fifth_identical_call(implementation: str) -> None:
    executed.clear()
    g = guardrails(implementation)
    handler = TripwireCallbackHandler(g)
    model = GenericFakeChatModel(messages=(calling(n, "src/a.py") for n in itertools.count()))
    with pytest.raises(GuardrailTripped) as raised:
        agent_loop(model, handler, "fix the bug")
    error = raised.value
    assert error.guardrail == "watchdog"
    assert error.decision.action == "halt_session"
    assert [a.signal for a in error.decision.alerts] == ["repeated-tool-call"]
    assert executed == ["src/a.py"] * 4  # the 5th identical call never ran
    assert g.halted
    handler.end_turn()
    with pytest.raises(GuardrailHalted):  # refused before the model is called
        agent_loop(model, handler, "try again")
    assert executed == ["src/a.py"] * 4


def test_a_swallowed_cut_stops_the_next_model_call(implementation: str) -> None:
    """A framework that turns the tool's exception into an error message (LangGraph's ToolNode
    can) does not get past the cut: the next model call of the turn raises it again."""
    executed.clear()
    handler = TripwireCallbackHandler(guardrails(implementation))
    config = {"callbacks": [handler]}
    model = GenericFakeChatModel(messages=(calling(n, "src/a.py") for n in itertools.count()))
    swallowed = 0
    with pytest.raises(GuardrailTripped) as raised:
        for _ in range(10):
            answer = model.invoke([HumanMessage("go")], config=config)
            try:
                read_file.invoke(answer.tool_calls[0], config=config)
            except GuardrailTripped:
                swallowed += 1  # what a catch-all tool error handler does
    assert swallowed == 1
    assert raised.value.decision.action == "halt_session"
    assert executed == ["src/a.py"] * 4


def test_a_healthy_run_is_not_interfered_with(implementation: str) -> None:
    executed.clear()
    g = guardrails(implementation)
    handler = TripwireCallbackHandler(g)
    files = ["a.py", "b.py", "c.py", "d.py", "e.py", "f.py"]
    script = [calling(n, f, f"Reading {f}.") for n, f in enumerate(files)]
    script.append(AIMessage(content="The bug is in f.py; fixed.",
                            usage_metadata={"input_tokens": 100, "output_tokens": 20,
                                            "total_tokens": 120}))
    model = GenericFakeChatModel(messages=iter(script))
    assert agent_loop(model, handler, "fix the bug") == "The bug is in f.py; fixed."
    assert executed == files
    assert not g.halted
    # every call, result, text and usage was observed (+ the turn's start and end)
    calls = results = len(files)
    texts = usages = len(files) + 1
    assert g.watchdog.events == calls + results + texts + usages + 2
    assert g.status().counters == {"alerts": {}, "trips": {}, "refused_turns": 0,
                                  "callback_errors": 0}
