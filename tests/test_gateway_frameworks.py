"""The OpenAI Agents SDK and LangChain pointed at the gateway by ``base_url`` alone — no
tripwire code in the agent — stop the same loop: the scripted model asks for the same tool call
on every turn, the tool appends a line to a file, and the file ends with exactly 4 lines; the
run ends with the halt's guidance as the model's last words."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest
from gateway_support import FakeModel, gateway_for, looping


def test_the_openai_agents_sdk_is_stopped_by_base_url_alone(implementation: str,
                                                            tmp_path: Path) -> None:
    agents = pytest.importorskip("agents", reason="needs openai-agents (the test extra)")
    from openai import AsyncOpenAI

    lines = tmp_path / "lines.txt"

    @agents.function_tool
    def append_line(text: str) -> str:
        """Append a line to the log."""
        with lines.open("a") as f:
            f.write(text + "\n")
        return "appended"

    call = {"name": "append_line", "input": {"text": "again"}}
    with FakeModel(looping("openai_responses", call)) as model, \
            gateway_for(model.url, implementation) as (url, gateway):
        client = AsyncOpenAI(base_url=f"{url}/v1", api_key="agent-key", max_retries=0)
        agent = agents.Agent(name="looper", instructions="do it", tools=[append_line],
                             model=agents.OpenAIResponsesModel("gpt-5", client))
        result = asyncio.run(agents.Runner.run(
            agent, "append lines", max_turns=30,
            run_config=agents.RunConfig(tracing_disabled=True)))
    assert lines.read_text().splitlines() == ["again"] * 4
    assert "repeated-tool-call" in result.final_output
    assert len(model.requests) == 5
    (session,) = list(gateway.fleet)
    assert gateway.fleet.session(session).halted


def test_langchain_is_stopped_by_base_url_alone(implementation: str, tmp_path: Path) -> None:
    pytest.importorskip("langchain_openai", reason="needs langchain-openai (the test extra)")
    from langchain_core.messages import HumanMessage, ToolMessage
    from langchain_core.tools import tool
    from langchain_openai import ChatOpenAI

    lines = tmp_path / "lines.txt"

    @tool
    def append_line(text: str) -> str:
        """Append a line to the log."""
        with lines.open("a") as f:
            f.write(text + "\n")
        return "appended"

    call = {"name": "append_line", "input": {"text": "again"}}
    with FakeModel(looping("openai_chat", call)) as model, \
            gateway_for(model.url, implementation) as (url, gateway):
        llm = ChatOpenAI(model="gpt-4o", base_url=f"{url}/v1", api_key="agent-key",
                         max_retries=0).bind_tools([append_line])
        messages: list = [HumanMessage("append lines")]
        for _ in range(30):  # the plain tool loop of LangChain's docs
            ai = llm.invoke(messages)
            messages.append(ai)
            if not ai.tool_calls:
                break
            for c in ai.tool_calls:
                messages.append(ToolMessage(append_line.invoke(c["args"]),
                                            tool_call_id=c["id"]))
    assert lines.read_text().splitlines() == ["again"] * 4
    assert "repeated-tool-call" in messages[-1].content
    assert len(model.requests) == 5
    (session,) = list(gateway.fleet)
    assert gateway.fleet.session(session).halted
