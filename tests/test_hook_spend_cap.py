"""A per-session spend cap in an interactive Claude Code session (no ``--max-budget-usd``
there), as docs/harnesses/claude-code.md shows it: ``[budget] usd`` in the hook's config, the
spend read from the transcript's usage. A real recorded Claude Code session from
``../shared/corpus`` is replayed through ``tripwire hook claude-code`` as Claude Code would run
it: its transcript written line by line as the session goes, each tool call's PreToolUse once
the line with its ``tool_use`` is written, its PostToolUse once the ``tool_result`` is, one
process per event. The cap denies the first call made after the priced spend of the responses
before it reaches the cap, and every call after it."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import need_shared
from test_hooks import Hook

pytest.importorskip("genai_prices", reason="pricing the transcript's usage needs the prices "
                                           "extra (genai-prices)")

TRANSCRIPT = need_shared("corpus", "claude-code-samples", "samples", "claude-code-projects",
                         "0ccf1a04-1b4c-43b6-8aa5-79e41db43a68.jsonl")
CAP_USD = 0.10


def response_costs(lines: list[dict]) -> dict[str, float]:
    """Each response's cost as priced from its usage (the last line of a message id carries
    its final usage), by message id: what the cap is expected to count."""
    from tripwire.interchange.adapters.anthropic import usage_of
    from tripwire.session.dispatch import usage_arguments

    last: dict[str, dict] = {}
    for line in lines:
        if line.get("type") == "assistant" and not line.get("isSidechain"):
            last[line["message"]["id"]] = line["message"]
    return {ident: usage_arguments(usage_of(m))["cost_usd"] or 0.0
            for ident, m in last.items()}


def test_the_spend_cap_denies_the_call_after_the_ceiling(tmp_path: Path,
                                                         implementation: str) -> None:
    raw = TRANSCRIPT.read_text().splitlines(keepends=True)
    lines = [json.loads(x) for x in raw]
    costs = response_costs(lines)
    assert sum(costs.values()) > CAP_USD  # the session spends past the cap
    config = tmp_path / "tripwire.toml"
    config.write_text(f"[budget]\nusd = {CAP_USD}\n")
    hook = Hook("claude-code", tmp_path / "state" / "tripwire.sqlite3", implementation)
    live = tmp_path / "projects" / "-home-u-app" / TRANSCRIPT.name
    live.parent.mkdir(parents=True)
    session = lines[0].get("sessionId") or TRANSCRIPT.stem

    def run(event: str, **fields) -> dict | None:
        payload = {"session_id": session, "transcript_path": str(live), "cwd": "/home/u/app",
                   "permission_mode": "default", "hook_event_name": event, **fields}
        done = hook.raw(json.dumps(payload), "--config", str(config))
        assert done.returncode == 0 and "Traceback" not in done.stderr, done.stderr
        return json.loads(done.stdout) if done.stdout.strip() else None

    seen: list[str] = []       # response ids in the order their first line was written
    spent_before: list[float] = []  # each call: the cost of the responses before its own
    answers: list[dict | None] = []
    prompted = False
    with live.open("w") as transcript:
        for text, line in zip(raw, lines, strict=True):
            transcript.write(text)
            transcript.flush()
            if line.get("isSidechain"):
                continue
            message = line.get("message") or {}
            content = message.get("content")
            if line.get("type") == "assistant":
                if message["id"] not in seen:
                    seen.append(message["id"])
                for block in content if isinstance(content, list) else []:
                    if block.get("type") == "tool_use":
                        spent_before.append(sum(costs[i] for i in seen[:-1]))
                        answers.append(run("PreToolUse", tool_name=block["name"],
                                           tool_input=block["input"],
                                           tool_use_id=block["id"]))
            elif line.get("type") == "user":
                if isinstance(content, str) and not prompted:
                    prompted = True
                    assert run("UserPromptSubmit", prompt=content) is None
                for block in content if isinstance(content, list) else []:
                    if isinstance(block, dict) and block.get("type") == "tool_result":
                        run("PostToolUse", tool_name="tool", tool_input={},
                            tool_use_id=block["tool_use_id"],
                            tool_response={"content": block.get("content")})
    over = next(n for n, spent in enumerate(spent_before) if spent >= CAP_USD)
    assert 0 < over < len(answers) - 1  # the cap lands inside the session
    assert answers[:over] == [None] * over  # every call before the ceiling ran
    # the budget's reason, with the spend as priced from the responses before this call
    assert answers[over] == {"hookSpecificOutput": {
        "hookEventName": "PreToolUse", "permissionDecision": "deny",
        "permissionDecisionReason": f"task {session} exhausted this task's spending: "
                                    f"${spent_before[over]:.4f} of ${CAP_USD:.4f}"}}
    # and every later call of the session
    assert all(a is not None and a["hookSpecificOutput"]["permissionDecision"] == "deny"
               for a in answers[over + 1:])
    assert over == 4  # this recording: its 5th call (a Task), after $0.1082 of 4 responses
    # the next prompt is refused with the raise that resumes the session; after it, it goes on
    refused = run("UserPromptSubmit", prompt="go on")
    assert refused is not None and refused["decision"] == "block"
    assert f"--task {session} --raise usd=+N" in refused["reason"]
    raised = subprocess.run([sys.executable, "-m", "tripwire", "reset", str(hook.store),
                             "--task", session, "--raise", "usd=+1"], capture_output=True,
                            text=True, env=hook.env, timeout=60)
    assert raised.returncode == 0, raised.stderr
    assert run("UserPromptSubmit", prompt="go on") is None
    assert run("PreToolUse", tool_name="Bash", tool_input={"command": "ls"},
               tool_use_id="toolu_after_raise") is None
