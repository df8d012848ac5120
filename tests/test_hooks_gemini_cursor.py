"""``tripwire hook gemini-cli`` and ``tripwire hook cursor``, run as the harnesses run them (one
process per event), fed payloads shaped as each harness sends them (Gemini CLI's
``packages/core/src/hooks`` types and hooks reference; Cursor's hooks documentation), asserting
the exact stdout JSON. Both share the hook session of Claude Code and Codex."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from test_hooks import INSTALLED, Hook, common, pre

GEMINI_SESSION = "c1f0a9d2-6e4b-4f7a-9b3e-2d1c0b9a8f77"
CONVERSATION = "4b1e8a2c-3d9f-4c6b-8a7e-5f0d2c1b9e33"
SHELL = {"command": "npm test", "description": "run the tests"}


def gemini(event: str, n: int = 0, **fields) -> dict:
    return {"session_id": GEMINI_SESSION,
            "transcript_path": f"/home/u/.gemini/tmp/abc/chats/session-{GEMINI_SESSION}.json",
            "cwd": "/home/u/app", "hook_event_name": event,
            "timestamp": f"2026-12-05T03:00:{n:02d}.000Z", **fields}


def before_tool(n: int, args: dict = SHELL) -> dict:
    return gemini("BeforeTool", n, tool_name="run_shell_command", tool_input=args)


def after_tool(n: int, args: dict = SHELL, output: str = "1 failing") -> dict:
    return gemini("AfterTool", n, tool_name="run_shell_command", tool_input=args,
                  tool_response={"llmContent": output, "returnDisplay": output})


def cursor(event: str, **fields) -> dict:
    return {"conversation_id": CONVERSATION, "generation_id": "gen-1", "model": "claude-4.5",
            "hook_event_name": event, "cursor_version": "2.4.21",
            "workspace_roots": ["/home/u/app"], "user_email": None,
            "transcript_path": None, **fields}


def cursor_pre(n: int, args: dict = SHELL) -> dict:
    return cursor("preToolUse", tool_name="Shell", tool_input=args, tool_use_id=f"tool_{n}",
                  cwd="/home/u/app", agent_message="running the tests")


def cursor_post(n: int, args: dict = SHELL, output: str = "1 failing") -> dict:
    return cursor("postToolUse", tool_name="Shell", tool_input=args, tool_use_id=f"tool_{n}",
                  cwd="/home/u/app", tool_output=json.dumps({"output": output}),
                  duration=812)


class ObjectHook(Hook):
    """A hook that prints ``{}`` for no decision (Gemini CLI, Cursor): read as None."""

    def __call__(self, payload: dict) -> dict | None:
        return super().__call__(payload) or None


@pytest.fixture
def gem(tmp_path: Path, implementation: str) -> Hook:
    return ObjectHook("gemini-cli", tmp_path / "state" / "s.sqlite3", implementation)


@pytest.fixture
def cur(tmp_path: Path, implementation: str) -> Hook:
    return ObjectHook("cursor", tmp_path / "state" / "s.sqlite3", implementation)


def raw_out(hook: Hook, payload: dict) -> str:
    done = hook.raw(json.dumps(payload))
    assert done.returncode == 0, done.stderr
    return done.stdout


# -- Gemini CLI --------------------------------------------------------------------------------


def test_gemini_always_prints_an_object_and_denies_the_fifth_identical_call(gem: Hook
                                                                           ) -> None:
    assert raw_out(gem, gemini("SessionStart", source="startup")) == "{}\n"
    assert raw_out(gem, gemini("BeforeAgent", prompt="make the tests pass")) == "{}\n"
    for n in range(1, 5):
        assert raw_out(gem, before_tool(2 * n)) == "{}\n"
        assert raw_out(gem, after_tool(2 * n + 1)) == "{}\n"
    out = gem(before_tool(10))
    assert set(out) == {"decision", "reason", "continue", "stopReason", "systemMessage"}
    assert out["decision"] == "deny" and out["continue"] is False
    assert out["reason"].startswith("[watchdog]") and "run_shell_command" in out["reason"]
    assert out["stopReason"] == out["reason"]  # what the stopped call's result says: the model's
    assert "tripwire reset" in out["systemMessage"] and GEMINI_SESSION in out["systemMessage"]
    # a new prompt of the halted session is refused (the prompt is dropped)
    again = gem(gemini("BeforeAgent", 11, prompt="try again"))
    assert again["decision"] == "deny" and "tripwire reset" in again["reason"]


def test_gemini_an_event_delivered_twice_is_observed_once(gem: Hook) -> None:
    for n in range(1, 5):
        for _ in range(2):  # two hook entries: the same event (same timestamp) twice
            assert gem(before_tool(2 * n)) is None
            assert gem(after_tool(2 * n + 1)) is None
    assert gem(before_tool(10))["decision"] == "deny"


def test_gemini_failures_reach_the_model_as_additional_context(gem: Hook) -> None:
    error = {"message": "Command exited with code 2: make: *** No rule to make target"}
    out = None
    for n in range(3):
        args = {"command": f"make test-{n}"}
        assert gem(before_tool(2 * n, args)) is None
        out = gem(gemini("AfterTool", 2 * n + 1, tool_name="run_shell_command",
                         tool_input=args, tool_response={"llmContent": "", "returnDisplay": "",
                                                         "error": error}))
    assert set(out) == {"hookSpecificOutput"}
    assert out["hookSpecificOutput"]["hookEventName"] == "AfterTool"
    assert "repeated-failure" in out["hookSpecificOutput"]["additionalContext"]


def test_gemini_after_agent_is_the_stop_hook_cap(gem: Hook) -> None:
    assert gem(gemini("AfterAgent", prompt="p", prompt_response="done",
                      stop_hook_active=False)) is None
    for n in range(8):
        assert gem(gemini("AfterAgent", n, prompt="p", prompt_response="done",
                          stop_hook_active=True)) is None
    out = gem(gemini("AfterAgent", 9, prompt="p", prompt_response="done",
                     stop_hook_active=True))
    assert out["continue"] is False
    assert "this cap overrides the stop hooks" in out["stopReason"]
    assert out["systemMessage"] == out["stopReason"]


def test_gemini_garbage_fails_open_with_an_object(gem: Hook) -> None:
    done = gem.raw("not json")
    assert (done.returncode, done.stdout) == (0, "{}\n")
    assert done.stderr.strip().endswith("; no decision")


# -- Cursor -----------------------------------------------------------------------------------


def test_cursor_denies_with_a_message_for_each_reader(cur: Hook) -> None:
    assert raw_out(cur, cursor("sessionStart", session_id=CONVERSATION,
                               is_background_agent=False, composer_mode="agent")) == "{}\n"
    assert cur(cursor("beforeSubmitPrompt", prompt="make the tests pass",
                      attachments=[])) is None
    for n in range(1, 5):
        assert cur(cursor_pre(n)) is None
        assert cur(cursor_post(n)) is None
    out = cur(cursor_pre(5))
    assert set(out) == {"permission", "agent_message", "user_message"}
    assert out["permission"] == "deny"
    assert out["agent_message"].startswith("[watchdog]") and "tripwire reset" not in \
        out["agent_message"]
    assert "tripwire reset" in out["user_message"] and CONVERSATION in out["user_message"]
    refused = cur(cursor("beforeSubmitPrompt", generation_id="gen-2", prompt="again",
                         attachments=[]))
    assert refused["continue"] is False and "tripwire reset" in refused["user_message"]


def test_cursor_shell_and_mcp_events_are_calls_and_results(cur: Hook) -> None:
    mcp_args = json.dumps({"query": "open issues"})
    for n in range(1, 5):
        assert cur(cursor("beforeMCPExecution", tool_name="search", tool_input=mcp_args,
                          command="npx mcp-github")) is None
        assert cur(cursor("afterMCPExecution", tool_name="search", tool_input=mcp_args,
                          result_json=json.dumps({"items": []}), duration=40)) is None
    out = cur(cursor("beforeMCPExecution", tool_name="search", tool_input=mcp_args,
                     command="npx mcp-github"))
    assert out["permission"] == "deny" and "MCP:search" in out["agent_message"]


def test_cursor_loop_count_drives_the_stop_hook_cap(cur: Hook) -> None:
    """loop_count is the follow-ups Cursor submitted so far: each new one is a refusal
    charged to the session's task, whether or not tools ran between them; past the cap (8)
    the next follow-up prompt is refused, saying the cap overrode the stop hooks."""
    assert cur(cursor("stop", status="completed", loop_count=0)) is None
    for count in range(1, 9):
        assert cur(cursor_pre(count, {"command": f"echo {count}"})) is None  # tools between
        cur(cursor_post(count, {"command": f"echo {count}"}, output=f"{count}"))
        assert cur(cursor("stop", status="completed", loop_count=count)) is None
    assert cur(cursor("stop", status="completed", loop_count=9)) is None  # nothing ends it here
    refused = cur(cursor("beforeSubmitPrompt", generation_id="gen-9", prompt="follow-up",
                         attachments=[]))
    assert refused["continue"] is False
    assert "9 of 8" in refused["user_message"]


def test_claude_code_hooks_run_by_cursor_share_the_cursor_session(tmp_path: Path,
                                                                 implementation: str) -> None:
    """Cursor runs Claude Code's hooks with its own payloads: `tripwire hook claude-code`
    reads them as Cursor's (same session, same call ids), so with both installed each call is
    observed once, and answers in Claude Code's format (Cursor maps it back)."""
    store = tmp_path / "s.sqlite3"
    native = ObjectHook("cursor", store, implementation)
    claude = Hook("claude-code", store, implementation)
    for n in range(1, 5):
        for hook in (native, claude):
            assert hook(cursor_pre(n)) is None
            assert hook(cursor_post(n)) is None
    out = claude(cursor_pre(5))
    assert out["hookSpecificOutput"]["permissionDecision"] == "deny"
    assert out["continue"] is False


def test_install_writes_each_harness_file_format(tmp_path: Path) -> None:
    (tmp_path / ".gemini").mkdir()
    (tmp_path / ".cursor").mkdir()
    run = [sys.executable, "-m", "tripwire", "hook"]
    for harness, path in (("gemini-cli", ".gemini/settings.json"),
                          ("cursor", ".cursor/hooks.json")):
        for _ in range(2):
            done = subprocess.run([*run, harness, "--install", "--store", "s.db", "--write",
                                   path], capture_output=True, text=True, cwd=tmp_path)
            assert done.returncode == 0, done.stderr
    settings = json.loads((tmp_path / ".gemini/settings.json").read_text())
    command = f"{INSTALLED} gemini-cli --store {tmp_path}/s.db"
    handler = [{"type": "command", "name": "tripwire", "command": command, "timeout": 10000}]
    assert settings == {"hooks": {
        "BeforeTool": [{"matcher": "*", "hooks": handler}],
        "AfterTool": [{"matcher": "*", "hooks": handler}],
        "BeforeAgent": [{"hooks": handler}], "AfterAgent": [{"hooks": handler}],
        "SessionStart": [{"hooks": handler}]}}
    hooks = json.loads((tmp_path / ".cursor/hooks.json").read_text())
    command = f"{INSTALLED} cursor --store {tmp_path}/s.db"
    assert hooks["version"] == 1
    assert {k: len(v) for k, v in hooks["hooks"].items()} == {
        "sessionStart": 1, "preToolUse": 1, "postToolUse": 1, "postToolUseFailure": 1,
        "beforeSubmitPrompt": 1, "stop": 1}
    assert hooks["hooks"]["stop"] == [{"command": command, "timeout": 10, "loop_limit": None}]


def test_a_claude_code_payload_still_reads_as_claude_codes(tmp_path: Path,
                                                          implementation: str) -> None:
    hook = Hook("claude-code", tmp_path / "s.sqlite3", implementation)
    assert hook(common("UserPromptSubmit", prompt="go")) is None
    assert hook(pre(1)) is None


def test_gemini_spend_comes_from_the_recording_priced(tmp_path: Path,
                                                     implementation: str) -> None:
    """Gemini's hook payloads carry no usage: the hook reads the chat recording its
    transcript_path names, charging each response's tokens once (across processes)."""
    pytest.importorskip("genai_prices", reason="the price catalogue is the prices extra")
    from tripwire.interchange.events import Usage
    from tripwire.interchange.prices import estimate

    recording = tmp_path / f"session-2026-12-05T03-00-{GEMINI_SESSION[:8]}.json"
    messages: list = [{"id": "u1", "timestamp": "2026-12-05T03:00:00Z", "type": "user",
                       "content": "fix the tests"}]

    def respond(n: int) -> None:
        messages.append({"id": f"g{n}", "timestamp": "2026-12-05T03:00:01Z", "type": "gemini",
                         "content": "", "model": "gemini-2.5-pro",
                         "tokens": {"input": 1000, "output": 50, "cached": 0, "thoughts": 10,
                                    "tool": 0, "total": 1060}})
        recording.write_text(json.dumps({"sessionId": GEMINI_SESSION, "projectHash": "abc",
                                         "startTime": "2026-12-05T03:00:00Z",
                                         "lastUpdated": "2026-12-05T03:00:01Z",
                                         "messages": messages}))

    hook = ObjectHook("gemini-cli", tmp_path / "s.sqlite3", implementation)
    for n in range(2):
        respond(n)
        for payload in (before_tool(2 * n), after_tool(2 * n + 1)):
            hook({**payload, "transcript_path": str(recording)})
    one = estimate(Usage(model="gemini-2.5-pro", input_tokens=1000, output_tokens=60,
                         provider="google")).cost_usd
    assert one and one > 0
    status = subprocess.run([sys.executable, "-m", "tripwire", "status", str(hook.store)],
                            capture_output=True, text=True, env=hook.env, timeout=60)
    (record,) = [r for r in map(json.loads, status.stdout.splitlines())
                 if r["kind"] == "session"]
    assert record["spent_usd"] == pytest.approx(2 * one, abs=1e-9)
    assert record["cost_estimated"] is True
