"""The gateway's upstreams and what it reads of them: one upstream per API family in one
gateway (a family with none is a 404), a cost the provider reports taken as the spend instead
of the catalogue's price, and Claude Code's compaction of the main conversation observed as a
``compaction`` event of the main session (not a sub-agent's), so that a storm of them trips;
a token budget, charged from the provider's usage, ends the task before the next request."""

from __future__ import annotations

import json
from typing import Any

import httpx
from gateway_support import FakeModel, anthropic_reply, chat_reply, serving

from tripwire.fleet.fleet import Fleet
from tripwire.gateway.app import Gateway, create_app
from tripwire.gateway.upstreams import Upstream
from tripwire.session.guardrails import GuardrailsConfig

CHAT = {"model": "gpt-4o", "messages": [{"role": "user", "content": "hi"}]}
MESSAGES = {"model": "claude-sonnet-4-5", "max_tokens": 10,
            "messages": [{"role": "user", "content": "hi"}]}


def _gateway(implementation: str, upstreams: dict[str, str]) -> Gateway:
    fleet = Fleet(GuardrailsConfig(mode="enforce", unattended=True),
                  implementation=implementation, feedback_at_once=True)
    return Gateway(fleet, {f: Upstream(f, url) for f, url in upstreams.items()},
                   store_label="s.db")


def test_each_family_goes_to_its_own_upstream(implementation: str) -> None:
    def anthropic(model: FakeModel, path: str, request: Any) -> Any:
        return anthropic_reply(request, len(model.requests), None)

    def openai(model: FakeModel, path: str, request: Any) -> Any:
        return chat_reply(request, len(model.requests), None)

    with FakeModel(anthropic) as a, FakeModel(openai) as o:
        gateway = _gateway(implementation, {"anthropic": a.url, "openai": o.url})
        with serving(create_app(gateway)) as url:
            h = {"x-tripwire-session": "s1"}
            assert httpx.post(f"{url}/v1/messages", json=MESSAGES, headers=h).status_code == 200
            r = httpx.post(f"{url}/v1/chat/completions", json=CHAT, headers=h)
            assert r.status_code == 200 and r.json()["object"] == "chat.completion"
            gemini = httpx.post(f"{url}/v1beta/models/gemini-2.5-pro:generateContent",
                                json={"contents": [{"role": "user", "parts": [{"text": "x"}]}]})
            assert gemini.status_code == 404
            assert "no upstream for the gemini API" in gemini.json()["error"]["message"]
        assert [r["path"] for r in a.requests] == ["/v1/messages"]
        assert [r["path"] for r in o.requests] == ["/v1/chat/completions"]


def test_a_cost_the_provider_reports_is_the_spend(implementation: str) -> None:
    def priced(model: FakeModel, path: str, request: Any) -> Any:
        content_type, data = chat_reply(request, len(model.requests), None)
        body = json.loads(data)
        body["usage"]["cost"] = 0.125  # OpenRouter's, LiteLLM's reported cost
        return content_type, json.dumps(body).encode()

    with FakeModel(priced) as model:
        gateway = _gateway(implementation, {"openai": model.url})
        with serving(create_app(gateway)) as url:
            r = httpx.post(f"{url}/v1/chat/completions", json=CHAT,
                           headers={"x-tripwire-session": "s1"})
            assert r.status_code == 200
        assert gateway.fleet.session("s1").status().spent_usd == 0.125


SUMMARY = ("This session is being continued from a previous conversation that ran out of "
           "context. The conversation is summarized below: part {k}.")


def test_claude_code_compactions_are_the_main_sessions_and_a_storm_of_them_trips(
        implementation: str) -> None:
    """Each request after a compaction opens with Claude Code's summary: the main session's,
    observed as a ``compaction``; the third within one turn is ``compaction-storm``."""
    def respond(model: FakeModel, path: str, request: Any) -> Any:
        n = len(model.requests)
        return anthropic_reply(request, n, {"name": "Bash", "input": {"command": f"step {n}"}})

    with FakeModel(respond) as model:
        gateway = _gateway(implementation, {"anthropic": model.url})
        with serving(create_app(gateway)) as url:
            client = httpx.Client(base_url=url, timeout=10)
            cc = {"x-claude-code-session-id": "cc-1"}
            tools = [{"name": "Bash", "input_schema": {"type": "object"}}]
            reply = client.post("/v1/messages", headers=cc, json={
                **MESSAGES, "tools": tools, "messages": [{"role": "user", "content": "do it"}]})
            # the first result is new (work between compactions restarts the count): the
            # 2nd, 3rd and 4th compactions have nothing new between them
            for k in range(4):
                call = [b for b in reply.json()["content"] if b["type"] == "tool_use"]
                assert call, reply.json()
                messages = [{"role": "user", "content": SUMMARY.format(k=k)},
                            {"role": "assistant", "content": call},
                            {"role": "user", "content": [{"type": "tool_result",
                                                          "tool_use_id": call[0]["id"],
                                                          "content": "ok"}]}]
                reply = client.post("/v1/messages", headers=cc,
                                    json={**MESSAGES, "tools": tools, "messages": messages})
                assert reply.status_code == 200
        fleet = gateway.fleet
        assert sorted(fleet) == ["cc-1"]  # no sub-agent: the compactions are the main's
        g = fleet.session("cc-1")
        assert g.halted, g.status()
        assert "compaction-storm" in (g.status().watchdog_reason or "")
        # the halting response carries no call for the harness to run
        assert [b for b in reply.json()["content"] if b["type"] == "tool_use"] == []


def test_a_token_budget_spent_ends_the_task_before_the_next_request(implementation: str) -> None:
    """Tokens are the provider's usage as billed (135 a response here: 100 input, 10 output,
    5 cache write, 20 cache read): the request after the budget is spent is never sent."""
    from gateway_support import Harness, gateway_for, looping

    from tripwire.budgets import Budget

    call = {"name": "Bash", "input": {"command": "make"}}
    with FakeModel(looping("anthropic", call)) as model, \
            gateway_for(model.url, implementation, budget=Budget(tokens=200)) as (url, gateway):
        harness = Harness(httpx.Client(base_url=url, timeout=10), "anthropic", stream=False)
        harness.prompt("do it")
        for i in range(2):  # 135, then 270 tokens: over
            status, reply = harness.send()
            assert status == 200
            harness.record(reply, harness.calls_of(reply), f"out {i}")
        status, reply = harness.send()
        assert len(model.requests) == 2
        assert status == 200 and harness.calls_of(reply) == []
        assert "tokens" in harness.text_of(reply)
