"""The gateway's faults, credentials and store: upstream 5xx, refused connections, timeouts
and malformed bodies passed to the harness as it expects (and counted as retries); a client
gone mid-stream still charged for the usage seen; 413, unknown routes; per-agent tokens and
keys never echoed; the halt in the store as the hooks keep it (``tripwire status``, ``reset``,
``verify``), and a restart that keeps it."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import httpx
import pytest
from gateway_support import FakeModel, Harness, anthropic_reply, free_port, gateway_for, looping

from tripwire.durability import SQLiteStore
from tripwire.gateway.upstreams import Credentials, read_tokens

CALL = {"name": "Bash", "input": {"command": "make"}}
BODY = {"model": "claude-sonnet-4-5", "max_tokens": 10, "tools": [{"name": "Bash"}],
        "messages": [{"role": "user", "content": "do it"}]}
S1 = {"x-tripwire-session": "s1"}


def test_an_upstream_5xx_is_passed_through_and_counted_as_a_retry(implementation: str) -> None:
    def respond(model: FakeModel, path: str, request: Any) -> Any:
        return 529, "application/json", b'{"type":"error","error":{"type":"overloaded_error",' \
                                         b'"message":"Overloaded"}}'

    with FakeModel(respond) as model, gateway_for(model.url, implementation) as (url, gateway):
        r = httpx.post(f"{url}/v1/messages", json=BODY, headers=S1)
        assert r.status_code == 529 and r.json()["error"]["type"] == "overloaded_error"
        assert r.headers["request-id"] == "req_1"
        assert gateway.fleet.session("s1").task.used("retries") == 1


def test_a_refused_connection_is_a_502_and_a_timeout_a_504(implementation: str) -> None:
    closed = f"http://127.0.0.1:{free_port()}"
    with gateway_for(closed, implementation) as (url, gateway):
        r = httpx.post(f"{url}/v1/chat/completions", headers=S1, json={
            "model": "gpt-4o", "messages": [{"role": "user", "content": "hi"}]})
        assert r.status_code == 502
        assert r.json()["error"]["type"] == "server_error"
        assert "unreachable" in r.json()["error"]["message"]
        assert gateway.fleet.session("s1").task.used("retries") == 1

    def slow(model: FakeModel, path: str, request: Any) -> Any:
        time.sleep(1.5)
        return anthropic_reply(request, 1, None)

    with FakeModel(slow) as model, \
            gateway_for(model.url, implementation, timeout=0.3) as (url, gateway):
        r = httpx.post(f"{url}/v1/messages", json=BODY, headers=S1, timeout=10)
        assert r.status_code == 504 and r.json()["error"]["type"] == "api_error"
        assert "did not answer in time" in r.json()["error"]["message"]
        assert gateway.fleet.session("s1").task.used("retries") == 1


def test_a_malformed_upstream_body_is_withheld_under_enforce(implementation: str) -> None:
    def broken(model: FakeModel, path: str, request: Any) -> Any:
        return "application/json", b'{"content": [{"type": "tool_use", "na'

    with FakeModel(broken) as model:
        with gateway_for(model.url, implementation) as (url, gateway):
            r = httpx.post(f"{url}/v1/messages", json=BODY, headers=S1)
            assert r.status_code == 502
            assert "not one tripwire reads" in r.json()["error"]["message"]
        with gateway_for(model.url, implementation, mode="warn") as (url, gateway):
            r = httpx.post(f"{url}/v1/messages", json=BODY, headers=S1)
            assert r.status_code == 200 and r.content.startswith(b'{"content"')


def test_a_client_gone_mid_stream_is_charged_for_the_usage_seen(implementation: str) -> None:
    def dribble(model: FakeModel, path: str, request: Any) -> Any:
        _, data = anthropic_reply({**request, "stream": True}, 1, None, text="x" * 50)
        frames = [f + b"\n\n" for f in data.split(b"\n\n") if f]
        return 200, "text/event-stream", [(0.0, frames[0])] + [(0.3, f) for f in frames[1:]]

    with FakeModel(dribble) as model, gateway_for(model.url, implementation) as (url, gateway):
        with httpx.stream("POST", f"{url}/v1/messages", json={**BODY, "stream": True},
                          headers=S1) as r:
            first = next(r.iter_bytes())
            assert b"message_start" in first  # passed at once, the rest still coming
        g = gateway.fleet.session("s1")
        deadline = time.monotonic() + 5
        while g.status().spent_usd == 0 and time.monotonic() < deadline:
            time.sleep(0.05)
        # message_start's usage: 125 input tokens (100 + cache 5 + 20), 1 output token so far
        assert g.status().spent_usd > 0
        assert not g.in_turn


def test_oversized_bodies_and_unknown_routes(implementation: str) -> None:
    with FakeModel(looping("anthropic", None)) as model, \
            gateway_for(model.url, implementation, max_body=1000) as (url, gateway):
        big = {**BODY, "messages": [{"role": "user", "content": "x" * 2000}]}
        r = httpx.post(f"{url}/v1/messages", json=big, headers=S1)
        assert r.status_code == 413 and r.json()["error"]["type"] == "request_too_large"
        for path in ("/v1/completions", "/v1/batches", "/v2/messages"):
            r = httpx.post(f"{url}{path}", json=BODY)
            assert r.status_code == 404 and "no such route" in r.json()["error"]
        r = httpx.post(f"{url}/v1/messages", content=b"{not json", headers=S1)
        assert r.status_code == 400 and r.json()["error"]["type"] == "invalid_request_error"
        assert httpx.get(f"{url}/v1/models").json()["object"] == "list"  # passed through
        r = httpx.post(f"{url}/v1/messages/count_tokens", json=BODY)
        assert r.status_code == 200
        assert len(model.requests) == 1 and list(gateway.fleet) == []


def test_agents_present_their_tokens_and_never_see_a_key(implementation: str,
                                                        tmp_path: Path,
                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    tokens = tmp_path / "tokens"
    tokens.write_text("# agents\nalpha tok-alpha-1\nbeta tok-beta-2\n")
    monkeypatch.setenv("UPSTREAM_KEY", "sk-real-provider-key")
    with FakeModel(looping("openai_responses", None)) as model, \
            gateway_for(model.url, implementation, key_env="UPSTREAM_KEY",
                        credentials=Credentials(read_tokens(str(tokens)))) as (url, gateway):
        body = {"model": "gpt-5", "input": "hi", "tools": [{"type": "function", "name": "x"}]}
        none = httpx.post(f"{url}/v1/responses", json=body)
        wrong = httpx.post(f"{url}/v1/responses", json=body,
                           headers={"authorization": "Bearer sk-real-provider-key"})
        ok = httpx.post(f"{url}/v1/responses", json=body,
                        headers={"authorization": "Bearer tok-beta-2"})
        assert (none.status_code, wrong.status_code, ok.status_code) == (401, 401, 200)
        for r in (none, wrong, ok):
            assert "sk-real-provider-key" not in r.text
        assert [r["headers"]["authorization"] for r in model.requests] == [
            "Bearer sk-real-provider-key"]
        assert list(gateway.fleet) == ["beta"]  # one session per agent token
    with FakeModel(looping("anthropic", None)) as model, \
            gateway_for(model.url, implementation,
                        credentials=Credentials(pass_client_key=True)) as (url, gateway):
        httpx.post(f"{url}/v1/messages", json=BODY, headers={"x-api-key": "sk-own"})
        assert model.requests[0]["headers"]["x-api-key"] == "sk-own"


def tripwire_cli(*args: str, env: dict | None = None) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "tripwire", *args], capture_output=True,
                          text=True, timeout=60, env=env)


def test_the_halt_is_in_the_store_as_the_hooks_keep_it(implementation: str,
                                                        tmp_path: Path) -> None:
    path = tmp_path / "s.db"
    with FakeModel(looping("anthropic", CALL)) as model:
        store = SQLiteStore(str(path))
        with gateway_for(model.url, implementation, store=store) as (url, gateway):
            Harness(httpx.Client(base_url=url, timeout=10), "anthropic", stream=True).turn("go")
            spent = gateway.fleet.session("s1").status().spent_usd
        store.close()
        status = tripwire_cli("status", str(path), "--session", "s1", "--fail-on", "halt")
        assert status.returncode == 3, status.stdout + status.stderr
        line = json.loads(status.stdout.splitlines()[0])
        assert line["halted_by"] == ["watchdog"] and line["spent_usd"] == round(spent, 9)
        assert tripwire_cli("verify", str(path)).returncode == 0
        # a restarted gateway refuses the halted session at once, and takes an offline reset
        store = SQLiteStore(str(path))
        with gateway_for(model.url, implementation, store=store) as (url, gateway):
            harness = Harness(httpx.Client(base_url=url, timeout=10), "anthropic", stream=False)
            assert harness.turn("again")[0][0] == 400
            assert tripwire_cli("reset", str(path), "--session", "s1").returncode == 0
            replies = harness.turn("again")
            assert replies[0][0] == 200
        store.close()
        assert tripwire_cli("verify", str(path)).returncode == 0


def test_the_cli_says_what_is_wrong_in_one_line(tmp_path: Path) -> None:
    for args, said in [
            (["--upstream", "ftp://x"], "an http:// or https:// URL"),
            (["--upstream", "http://x", "--upstream-key-env", "NO_SUCH_VAR_SET"],
             "$NO_SUCH_VAR_SET (--upstream-key-env) is not set"),
            (["--upstream", "http://x", "--listen", "nowhere"], "HOST:PORT"),
            (["--upstream", "http://x", "--token-file", str(tmp_path / "none")],
             "cannot read the token file")]:
        done = tripwire_cli("gateway", *args)
        assert done.returncode == 2 and said in done.stderr, done.stderr
        assert len(done.stderr.strip().splitlines()) == 1
