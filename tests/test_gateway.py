"""``tripwire gateway`` against a scripted fake model on 127.0.0.1, on both engines: each API
(Anthropic Messages, OpenAI Chat Completions and Responses, Gemini), streamed and not, the
loop stopped before its 5th call reaches the harness; a halted session's refusal; feedback
added to the next request; cut turns answered without the upstream; side requests and
sub-agents; the request forwarded byte for byte when nothing is added."""

from __future__ import annotations

import json
from typing import Any

import httpx
import pytest
from gateway_support import FakeModel, Harness, anthropic_reply, gateway_for, looping

from tripwire.gateway.app import HALT_STATUS

CALL = {"name": "Bash", "input": {"command": "echo hi >> f"}}
APIS = ["anthropic", "openai_chat", "openai_responses", "gemini"]
FAMILY = {"anthropic": "anthropic", "openai_chat": "openai", "openai_responses": "openai",
          "gemini": "gemini"}


@pytest.mark.parametrize("stream", [False, True], ids=["whole", "streamed"])
@pytest.mark.parametrize("api", APIS)
def test_a_loop_is_stopped_before_its_fifth_call_reaches_the_harness(
        implementation: str, api: str, stream: bool) -> None:
    with FakeModel(looping(api, CALL)) as model, \
            gateway_for(model.url, implementation) as (url, gateway):
        harness = Harness(httpx.Client(base_url=url, timeout=10), api, stream=stream)
        replies = harness.turn("do it")
        # four calls ran; the fifth response reached the harness with no call, the halt's
        # guidance in its place, and the turn over
        assert harness.results == ["ok"] * 4
        assert len(replies) == 5 and len(model.requests) == 5
        status, last = replies[-1]
        assert status == 200 and harness.calls_of(last) == []
        said = harness.text_of(last)
        assert "[watchdog]" in said and "repeated-tool-call" in said
        assert "tripwire reset s.db --session s1" in said
        if api == "anthropic":
            assert last["stop_reason"] == "end_turn"
        elif api == "openai_chat":
            assert last["choices"][0]["finish_reason"] == "stop"
        g = gateway.fleet.session("s1")
        assert g.halted and g.halted_by == ("watchdog",)
        assert g.status().spent_usd > 0
        # the next prompt is refused by the gateway itself: the harness's error, naming it
        replies = harness.turn("try again")
        status, error = replies[0]
        assert (status, len(model.requests)) == (HALT_STATUS[FAMILY[api]][0], 5)
        message = json.dumps(error)
        assert "tripwire halted session s1" in message and "tripwire reset s.db" in message


def test_a_reset_lets_the_next_prompt_through(implementation: str) -> None:
    with FakeModel(looping("anthropic", CALL, loop=5)) as model, \
            gateway_for(model.url, implementation, operator_token="op-token") as (url, gateway):
        client = httpx.Client(base_url=url, timeout=10)
        harness = Harness(client, "anthropic", stream=False)
        harness.turn("do it")
        assert gateway.fleet.session("s1").halted
        # an agent's own token is no operator's
        assert client.post("/tripwire/sessions/s1/guardrails/reset").status_code == 401
        done = client.post("/tripwire/sessions/s1/guardrails/reset",
                           headers={"authorization": "Bearer op-token"})
        assert done.status_code == 200 and done.json()["cleared"] == ["watchdog"]
        replies = harness.turn("go on")
        assert [s for s, _ in replies] == [200] and harness.text_of(replies[0][1]) == "done"


def test_feedback_reaches_the_model_in_the_next_request(implementation: str) -> None:
    """Three failures of one error signature (numbers aside: repeated-failure, a warning): its
    note is added after the third result, in the request that carries it, where the model
    reads it; the requests before went out byte for byte."""
    with FakeModel(looping("anthropic", CALL)) as model, \
            gateway_for(model.url, implementation, mode="feedback") as (url, gateway):
        client = httpx.Client(base_url=url, timeout=10)
        history: list[Any] = [{"role": "user", "content": "do it"}]
        sent: list[bytes] = []
        for i in range(4):
            body = json.dumps({"model": "claude-sonnet-4-5", "max_tokens": 10,
                               "tools": [{"name": "Bash"}], "messages": history}).encode()
            sent.append(body)
            reply = client.post("/v1/messages", content=body,
                                headers={"x-tripwire-session": "s1",
                                         "content-type": "application/json"}).json()
            use = next(b for b in reply["content"] if b["type"] == "tool_use")
            history = history + [
                {"role": "assistant", "content": reply["content"]},
                {"role": "user", "content": [{"type": "tool_result", "tool_use_id": use["id"],
                                              "is_error": True,
                                              "content": f"error {i}: disk {i} full"}]}]
            history[-2]["content"][-1]["input"] = {"command": f"try {i}"}
        assert [r["raw"] for r in model.requests[:3]] == sent[:3]  # byte for byte
        last = model.requests[3]["body"]["messages"][-1]["content"]
        assert last[0]["type"] == "tool_result"
        assert last[-1]["type"] == "text" and "[watchdog]" in last[-1]["text"]
        assert "- repeated-failure: Bash has now failed 3 times with the same error" in \
            last[-1]["text"]


def test_a_result_past_the_window_is_answered_without_the_upstream(implementation: str) -> None:
    """The context guard at 95% of the window cuts the turn on the result itself: the request
    that would carry it is never sent (nor billed); the harness gets the guidance."""
    with FakeModel(looping("anthropic", {"name": "Read", "input": {"path": "big.log"}})) as model, \
            gateway_for(model.url, implementation) as (url, gateway):
        harness = Harness(httpx.Client(base_url=url, timeout=30), "anthropic", stream=False,
                          tools=("Read",))
        replies = harness.turn("read it", result="x " * 400_000)
        assert len(model.requests) == 1  # the second request, with the result, never left
        status, last = replies[-1]
        assert status == 200 and harness.calls_of(last) == []
        assert "context" in harness.text_of(last).lower()
        g = gateway.fleet.session("s1")
        assert not g.in_turn and not g.halted


def test_a_step_budget_ends_the_task_before_the_next_request(implementation: str) -> None:
    from tripwire.budgets import Budget

    with FakeModel(looping("openai_chat", CALL)) as model, \
            gateway_for(model.url, implementation, budget=Budget(steps=2)) as (url, gateway):
        harness = Harness(httpx.Client(base_url=url, timeout=10), "openai_chat", stream=True)
        harness.prompt("do it")
        for i in range(2):
            status, reply = harness.send()
            harness.record(reply, harness.calls_of(reply), f"out {i}")
        status, reply = harness.send()  # the third model request: no step left
        assert len(model.requests) == 2
        assert status == 200 and "model steps" in harness.text_of(reply)


def test_claude_code_side_requests_and_sub_agents_are_not_the_main_agent(
        implementation: str) -> None:
    """One Claude Code session id: its requests without tools (a title) are side requests,
    charged to ``<id>/side``; a request with tools whose first message is another (a Task
    sub-agent's prompt) is ``<id>/agent-…``, refused once the main session halted."""
    def respond(model: FakeModel, path: str, request: dict) -> Any:
        n = len(model.requests)
        if not request.get("tools"):
            return anthropic_reply(request, n, None, text="a title")
        first = request["messages"][0]["content"]
        return anthropic_reply(request, n, CALL if first == "do it" else None)

    with FakeModel(respond) as model, gateway_for(model.url, implementation) as (url, gateway):
        client = httpx.Client(base_url=url, timeout=10)
        cc = {"x-claude-code-session-id": "cc-1"}
        title = client.post("/v1/messages", headers=cc, json={
            "model": "claude-haiku-4-5", "max_tokens": 20,
            "messages": [{"role": "user", "content": "name this chat: do it"}]})
        assert title.status_code == 200
        main = Harness(client, "anthropic", stream=True, session=None, headers=cc)
        sub = Harness(client, "anthropic", stream=False, session=None, headers=cc,
                      tools=("Read",))
        main.turn("do it", limit=2)  # the main conversation, two calls into its loop
        assert sub.turn("find the config file")[-1][0] == 200
        main.run()
        fleet = gateway.fleet
        assert sorted(fleet) == ["cc-1", "cc-1/agent-" + _digest("find the config file"),
                                 "cc-1/side"]
        assert fleet.session("cc-1").halted
        # the main agent's five model requests are its steps; the title is none of them
        assert fleet.session("cc-1").task.remaining()["steps"] == 1000 - 5
        assert fleet.session("cc-1/side").task.remaining()["steps"] == 1000 - 1
        assert fleet.session("cc-1/side").status().spent_usd > 0
        assert not fleet.session("cc-1/agent-" + _digest("find the config file")).halted
        status, error = sub.turn("again")[0]
        assert status == 400 and "tripwire halted session cc-1" in json.dumps(error)


def _digest(text: str) -> str:
    import blake3

    return blake3.blake3(text.encode()).digest(16)[:4].hex()


def test_the_session_comes_from_the_harness_then_the_header_token_or_fingerprint(
        implementation: str) -> None:

    def ask(client: httpx.Client, headers: dict, body: dict | None = None,
            path: str = "/v1/chat/completions") -> None:
        body = body or {"model": "gpt-4o", "messages": [{"role": "user", "content": "hello"}],
                        "tools": [{"type": "function", "function": {"name": "Bash"}}]}
        assert client.post(path, json=body, headers=headers).status_code == 200

    with FakeModel(looping("openai_chat", None)) as model, \
            gateway_for(model.url, implementation) as (url, gateway):
        client = httpx.Client(base_url=url, timeout=10)
        ask(client, {"session-id": "cx-1", "thread-id": "cx-1"})
        ask(client, {"session-id": "cx-1", "thread-id": "th-2"})
        ask(client, {"x-tripwire-session": "named"})
        ask(client, {})
        ask(client, {"x-claude-code-session-id": "cc-9"})
        assert sorted(gateway.fleet) == sorted(["cx-1", "cx-1/th-2", "named", "cc-9",
                                                _fingerprint("openai", b"hello")])


def _fingerprint(family: str, opening: bytes) -> str:
    import blake3

    return "conv-" + blake3.blake3(family.encode() + b"\0" + opening).hexdigest(8)


def test_claude_metadata_names_the_session() -> None:
    from tripwire.gateway.identity import harness_session

    v2 = {"metadata": {"user_id": json.dumps({"device_id": "d", "account_uuid": "",
                                              "session_id": "abc-123"})}}
    v1 = {"metadata": {"user_id": "user_9f_account__session_def-456"}}
    assert harness_session({}, v2) == "abc-123"
    assert harness_session({}, v1) == "def-456"
    assert harness_session({}, {"client_metadata": {"session_id": "cx"}}) == "cx"
    assert harness_session({}, {"metadata": {"user_id": "plain"}}) is None
