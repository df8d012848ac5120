"""Who is told what when a hook halts a session: the model gets model-facing guidance on every
denial (never the operator's ``tripwire reset``), the user gets the reason on the harness's
user channel (Claude Code's ``systemMessage``), a CI step tells a halt from success with
``tripwire status STORE --session ID --fail-on halt``, and one-time notices are said once per
session, not once per hook process."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from test_hooks import SESSION, Hook, codex_event, common, looping_until_denied, post, pre


def status(hook: Hook, *options: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "tripwire", "status", str(hook.store),
                           *options], capture_output=True, text=True, env=hook.env,
                          timeout=60)


def test_status_fail_on_halt_tells_a_halt_from_success(tmp_path: Path,
                                                       implementation: str) -> None:
    hook = Hook("claude-code", tmp_path / "s.sqlite3", implementation)
    assert hook(common("UserPromptSubmit", prompt="go")) is None
    assert hook(pre(1)) is None
    assert status(hook, "--session", SESSION, "--fail-on", "halt").returncode == 0
    looping_until_denied(hook)
    done = status(hook, "--session", SESSION, "--fail-on", "halt")
    assert done.returncode == 3, done.stderr
    (line,) = [json.loads(x) for x in done.stdout.splitlines()
               if json.loads(x)["kind"] == "session"]
    assert line["halted"] is True
    assert status(hook, "--session", SESSION).returncode == 0  # without --fail-on: a report


def test_status_fail_on_exhausted_sees_the_stop_hook_cap(tmp_path: Path,
                                                        implementation: str) -> None:
    hook = Hook("claude-code", tmp_path / "s.sqlite3", implementation)
    for active in [False] + [True] * 9:
        hook(common("Stop", stop_hook_active=active, last_assistant_message="done"))
    assert status(hook, "--fail-on", "halt").returncode == 0
    assert status(hook, "--fail-on", "exhausted").returncode == 3


def test_claude_code_tells_the_user_in_system_message(tmp_path: Path,
                                                     implementation: str) -> None:
    hook = Hook("claude-code", tmp_path / "s.sqlite3", implementation)
    out = looping_until_denied(hook)
    assert out["systemMessage"] == out["stopReason"]
    assert "tripwire reset" in out["systemMessage"]
    assert "tripwire reset" not in out["hookSpecificOutput"]["permissionDecisionReason"]
    later = hook(post(5))  # a result of the halted session: the user is told again
    assert later["continue"] is False and later["systemMessage"] == later["stopReason"]


def test_codex_never_gives_the_model_the_operators_text(tmp_path: Path,
                                                       implementation: str) -> None:
    """Codex gives the model a PostToolUse's ``reason`` (else its ``stopReason``), and each
    PreToolUse denial's reason: all of them are model-facing."""
    hook = Hook("codex", tmp_path / "s.sqlite3", implementation)
    call = {"tool_name": "Bash", "tool_input": {"command": "echo hello"}}
    assert hook(codex_event("UserPromptSubmit", prompt="go")) is None
    for n in range(1, 5):
        assert hook(codex_event("PreToolUse", tool_use_id=f"call_{n}", **call)) is None
        assert hook(codex_event("PostToolUse", tool_use_id=f"call_{n}",
                                tool_response="hello\n", **call)) is None
    denials = [hook(codex_event("PreToolUse", tool_use_id=f"call_{n}", **call))
               for n in range(5, 9)]
    reasons = {d["hookSpecificOutput"]["permissionDecisionReason"] for d in denials}
    assert len(reasons) == 1
    (reason,) = reasons
    assert reason.startswith("[watchdog]") and "tripwire reset" not in reason
    other = hook(codex_event("PreToolUse", tool_use_id="call_9", tool_name="Read",
                             tool_input={"path": "a.py"}))
    assert other["hookSpecificOutput"]["permissionDecisionReason"] == reason
    result = hook(codex_event("PostToolUse", tool_use_id="call_8", tool_response="x", **call))
    assert result["continue"] is False
    assert "tripwire reset" in result["stopReason"]
    assert result["reason"] == reason  # what the model reads


def test_a_halt_without_alerts_is_told_to_the_model_without_the_operators_text(
        tmp_path: Path, implementation: str) -> None:
    """A store that cannot be read halts with no alert: the model reads what happened, not
    how to reset it."""
    hook = Hook("claude-code", tmp_path / "s.sqlite3", implementation)
    hook.env["TRIPWIRE_STORE"] = str(tmp_path)  # a directory: the store cannot be read
    out = hook(pre(1))
    reason = out["hookSpecificOutput"]["permissionDecisionReason"]
    assert reason.startswith("[watchdog] ")
    assert "reset" not in reason and "operator" not in reason


def test_a_one_time_notice_is_said_once_per_session(tmp_path: Path,
                                                   implementation: str) -> None:
    """A model the price catalogue does not know: said at the first event that reads its
    usage, not at every later hook process of the session."""
    pytest.importorskip("genai_prices", reason="the price catalogue is the prices extra")
    transcript = tmp_path / "t.jsonl"
    hook = Hook("claude-code", tmp_path / "s.sqlite3", implementation)

    def response(n: int) -> str:
        return json.dumps({"type": "assistant", "sessionId": SESSION, "message": {
            "id": f"msg_{n}", "role": "assistant", "model": "claude-nonesuch-9",
            "usage": {"input_tokens": 100, "output_tokens": 10},
            "content": [{"type": "text", "text": "ok"}]}}) + "\n"

    said = []
    for n in range(4):
        with transcript.open("a") as f:
            f.write(response(n))
        done = hook.raw(json.dumps({**post(n), "transcript_path": str(transcript)}))
        assert done.returncode == 0
        said.append(done.stderr.count("has no price in the catalogue"))
    # each response's usage is read once it is complete (from the next event on): three of
    # them priced, in three processes, the notice said once
    assert sum(said) == 1 and said[0] == 0


def test_stop_refusals_count_whether_or_not_tools_ran_between(tmp_path: Path,
                                                             implementation: str) -> None:
    """A stop hook that keeps refusing while the agent works between its attempts: every
    refused attempt counts toward the cap (8), tools or no tools between them; the 9th
    stops the agent, saying the cap overrode the stop hooks."""
    hook = Hook("claude-code", tmp_path / "s.sqlite3", implementation)
    assert hook(common("Stop", stop_hook_active=False, last_assistant_message="done")) is None
    out = None
    for n in range(9):
        args = {"command": f"pytest -k case{n}"}
        assert hook(pre(n, args)) is None
        hook(post(n, args, stdout=f"{n} passed"))
        out = hook(common("Stop", stop_hook_active=True, last_assistant_message="done"))
        if n < 8:
            assert out is None, n
    assert out is not None and out["continue"] is False
    assert "9 of 8" in out["stopReason"] and "this cap overrides the stop hooks" in \
        out["stopReason"]
