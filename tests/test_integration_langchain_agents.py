"""LangChain v1 middleware against the real ``langchain`` (``create_agent``) and ``langgraph``,
with LangChain's own scripted chat model (``GenericFakeChatModel``; no network): the shared
cases of ``framework_cases``, and a LangGraph graph of one's own whose ``ToolNode`` the
middleware's tool wrapper guards."""

from __future__ import annotations

import pytest

pytest.importorskip("langchain.agents", reason="needs the langchain-agents extra: pip install 'tripwire[langchain-agents]'")

from framework_cases import *  # noqa: F403  (the shared tests, collected here)
from framework_cases import (
    INPUT_TOKENS,
    MODEL,
    OUTPUT_TOKENS,
    PROVIDER,
    Driver,
    Outcome,
    Reply,
    Script,
    guardrails,
    looping,
)
from langchain.agents import create_agent
from langchain_core.language_models.fake_chat_models import GenericFakeChatModel
from langchain_core.messages import AIMessage, ToolMessage
from langchain_core.tools import StructuredTool

from tripwire import Guardrails
from tripwire.harnesses.integrations.langchain_middleware import TripwireMiddleware


class ScriptedChatModel(GenericFakeChatModel):
    """``GenericFakeChatModel`` that takes the tools ``create_agent`` binds (it ignores them,
    as its replies are scripted) and shows the script each request's messages."""

    script: Script

    def bind_tools(self, tools, **kwargs):
        return self

    def _generate(self, messages, stop=None, run_manager=None, **kwargs):
        self.script.seen.append(repr(messages))
        return super()._generate(messages, stop=stop, run_manager=run_manager, **kwargs)


def reply_message(reply: Reply, n: int) -> AIMessage:
    calls = ([{"name": "read_file", "args": {"path": reply.path}, "id": f"call_{n}",
               "type": "tool_call"}] if reply.path is not None else [])
    return AIMessage(content=reply.text, tool_calls=calls,
                     usage_metadata={"input_tokens": INPUT_TOKENS, "output_tokens": OUTPUT_TOKENS,
                                     "total_tokens": INPUT_TOKENS + OUTPUT_TOKENS},
                     response_metadata={"model_name": MODEL, "model_provider": PROVIDER})


def scripted_model(script: Script) -> ScriptedChatModel:
    def messages():
        for reply in script.replies:
            script.requests += 1
            yield reply_message(reply, script.requests)
    return ScriptedChatModel(messages=messages(), script=script)


class LangChainDriver(Driver):
    stop_type = AIMessage  # the run jumps to its end with a final AIMessage saying why

    def tool(self) -> StructuredTool:
        return StructuredTool.from_function(self.read_file, name="read_file",
                                            description="Read a file.")

    def run(self, guardrails: Guardrails, script: Script, prompt: str = "fix the bug") -> Outcome:
        middleware = TripwireMiddleware(guardrails)
        agent = create_agent(scripted_model(script), tools=[self.tool()],
                             middleware=[middleware])
        result = agent.invoke({"messages": [("user", prompt)]})
        final = result["messages"][-1]
        if middleware.stopped is not None:
            assert final.response_metadata["tripwire"] == middleware.stopped.to_dict()
            return Outcome(stopped=middleware.stopped, stop=final)
        return Outcome(answer=final.content)


@pytest.fixture
def driver() -> LangChainDriver:
    return LangChainDriver()


def test_the_refused_call_gets_an_error_tool_message_and_the_run_a_final_word(implementation) -> None:
    driver = LangChainDriver()
    middleware = TripwireMiddleware(guardrails(implementation))
    agent = create_agent(scripted_model(looping()), tools=[driver.tool()], middleware=[middleware])
    messages = agent.invoke({"messages": [("user", "go")]})["messages"]
    refused = [m for m in messages if isinstance(m, ToolMessage) and m.status == "error"]
    assert len(refused) == 1 and refused[0].tool_call_id == "call_5"
    assert refused[0].content.startswith("[tripwire] This tool call was not run: watchdog halted")
    assert messages[-1].content.startswith("[tripwire] The run was stopped: watchdog halted")
    assert driver.executed == ["src/a.py"] * 4


def test_a_langgraph_tool_node_is_guarded_by_the_tool_wrapper(implementation) -> None:
    """A graph of one's own: ``ToolNode(..., wrap_tool_call=middleware.wrap_tool_call)``; the
    graph routes to its end on ``middleware.stopped``."""
    from langgraph.graph import END, START, MessagesState, StateGraph
    from langgraph.prebuilt import ToolNode

    driver = LangChainDriver()
    g = guardrails(implementation)
    middleware = TripwireMiddleware(g)
    model = scripted_model(looping())
    graph = StateGraph(MessagesState)
    graph.add_node("model", lambda state: {"messages": [model.invoke(state["messages"])]})
    graph.add_node("tools", ToolNode([driver.tool()], wrap_tool_call=middleware.wrap_tool_call))
    graph.add_edge(START, "model")
    graph.add_edge("model", "tools")
    graph.add_conditional_edges("tools", lambda s: END if middleware.stopped else "model")
    messages = graph.compile().invoke({"messages": [("user", "go")]},
                                      {"recursion_limit": 100})["messages"]
    assert driver.executed == ["src/a.py"] * 4
    assert messages[-1].status == "error" and "not run" in messages[-1].content
    assert middleware.stopped.action == "halt_session" and g.halted


def test_an_async_invocation_is_guarded_the_same(implementation) -> None:
    import asyncio

    driver = LangChainDriver()
    middleware = TripwireMiddleware(guardrails(implementation))
    agent = create_agent(scripted_model(looping()), tools=[driver.tool()], middleware=[middleware])
    final = asyncio.run(agent.ainvoke({"messages": [("user", "go")]}))["messages"][-1]
    assert final.response_metadata["tripwire"]["action"] == "halt_session"
    assert driver.executed == ["src/a.py"] * 4
