"""The hook events the harnesses added (issue 37), each run as the harness runs it (one
``tripwire hook`` process per event), fed payloads shaped as the harness sends them, asserting
the exact output:

- Claude Code (its Agent SDK's hook input types): ``PostToolBatch`` (``tool_calls``: each call's
  ``tool_name``, ``tool_input``, ``tool_use_id``, ``tool_response``), ``PreCompact`` /
  ``PostCompact`` (``trigger``) and ``SessionStart`` ``source: compact``, ``SubagentStart`` /
  ``SubagentStop`` (``agent_id``, ``agent_type``), ``SessionEnd`` (``reason``);
- Codex (``codex-rs/hooks/src/events/compact.rs``, ``session_start.rs``): ``PreCompact`` /
  ``PostCompact`` (``turn_id``, ``model``, ``trigger``) and ``SessionStart``'s sources.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from test_hooks import SESSION, Hook, block, common, post, pre, repeat_guidance

STORM = ("The context was compacted 3 times in this turn and 3 times since a turn last ended "
         "in an answer: compaction cannot free enough room for the agent to make progress, and "
         "each one costs a summarization.")


def storm_halt(store: Path, session: str = SESSION) -> str:
    return (f"tripwire: watchdog halted the session (compaction-storm): {STORM} The session "
            "refuses new turns until an operator resets it (Guardrails.reset, or `tripwire "
            f"reset`). To resume: tripwire reset {store} --session {session}")


@pytest.fixture
def claude(tmp_path: Path, implementation: str) -> Hook:
    return Hook("claude-code", tmp_path / "state" / "tripwire.sqlite3", implementation)


@pytest.fixture
def codex(tmp_path: Path, implementation: str) -> Hook:
    return Hook("codex", tmp_path / "state" / "tripwire.sqlite3", implementation)


def batch(*calls: tuple[int, dict, str]) -> dict:
    return common("PostToolBatch", tool_calls=[
        {"tool_name": "Bash", "tool_input": args, "tool_use_id": f"toolu_{n:02d}",
         "tool_response": output} for n, args, output in calls])


def compaction(hook: Hook, **fields) -> list:
    """One compaction as Claude Code reports it: PreCompact, PostCompact, then the session's
    start after it; the three outputs."""
    return [hook(common("PreCompact", trigger="auto", custom_instructions=None, **fields)),
            hook(common("PostCompact", trigger="auto", compact_summary="summary", **fields)),
            hook(common("SessionStart", source="compact", **fields))]


# -- PostToolBatch -----------------------------------------------------------------------------


def test_a_batch_observes_the_calls_and_results_no_other_hook_reported(claude: Hook) -> None:
    """Only PostToolBatch installed for the tools: its fifth identical call halts the session,
    and the batch's answer stops the loop before the next model request."""
    assert claude(common("UserPromptSubmit", prompt="make the tests pass")) is None
    for n in range(1, 5):
        assert claude(batch((n, {"command": "pytest -x"}, "1 failed"))) is None
    args = '{"command":"pytest -x"}'
    reason = (f"tripwire: watchdog halted the session (repeated-tool-call): Bash was called 5 "
              f"times in a row with equivalent arguments ({args}): a likely loop, since the "
              "same call returns the same result. The session refuses new turns until an "
              "operator resets it (Guardrails.reset, or `tripwire reset`). To resume: tripwire "
              f"reset {claude.store} --session {SESSION}")
    assert claude(batch((5, {"command": "pytest -x"}, "1 failed"))) == {
        "decision": "block",
        "reason": block(("repeated-tool-call", repeat_guidance(args))),
        "continue": False, "stopReason": reason, "systemMessage": reason}


def test_a_batch_of_results_already_reported_is_not_observed_again(claude: Hook) -> None:
    assert claude(common("UserPromptSubmit", prompt="make the tests pass")) is None
    for n in range(1, 5):
        assert claude(pre(n)) is None
        assert claude(post(n)) is None
    # the same four calls and results once more, as the batch's view: observed once
    assert claude(batch(*[(n, {"command": "pytest -x", "description": "run tests"},
                           "1 failed") for n in range(1, 5)])) is None
    out = claude(pre(5))
    assert out["hookSpecificOutput"]["permissionDecision"] == "deny"  # the 5th, not earlier


# -- compaction --------------------------------------------------------------------------------


def test_three_compactions_in_one_turn_halt_the_session(claude: Hook) -> None:
    assert claude(common("UserPromptSubmit", prompt="read the whole repository")) is None
    assert compaction(claude) == [None, None, None]  # one compaction, counted once
    assert compaction(claude) == [None, None, None]
    halted = {"continue": False, "stopReason": storm_halt(claude.store),
              "systemMessage": storm_halt(claude.store)}
    assert compaction(claude) == [halted, halted, halted]  # the third PreCompact halts
    assert claude(pre(1))["hookSpecificOutput"]["permissionDecision"] == "deny"


def test_a_turn_that_ends_in_an_answer_rearms_the_compactions_in_a_row(claude: Hook) -> None:
    """Five compactions in five turns: a storm only when no turn ended in an answer (the Stop's
    ``last_assistant_message``, a first attempt to finish)."""
    for n in range(6):
        assert claude(common("UserPromptSubmit", prompt=f"step {n}", prompt_id=f"p{n}")) is None
        assert compaction(claude, prompt_id=f"p{n}") == [None, None, None]
        assert claude(common("Stop", stop_hook_active=False, prompt_id=f"p{n}",
                             last_assistant_message=f"Step {n} is done.")) is None


def test_compactions_in_a_row_without_an_answer_halt_at_the_fifth(claude: Hook) -> None:
    for n in range(4):
        assert claude(common("UserPromptSubmit", prompt=f"step {n}", prompt_id=f"p{n}")) is None
        assert compaction(claude, prompt_id=f"p{n}") == [None, None, None]
        assert claude(common("Stop", stop_hook_active=False, prompt_id=f"p{n}")) is None
    assert claude(common("UserPromptSubmit", prompt="step 4", prompt_id="p4")) is None
    out = claude(common("PreCompact", trigger="manual", custom_instructions="",
                        prompt_id="p4"))
    reason = out["stopReason"]
    assert out == {"continue": False, "stopReason": reason, "systemMessage": reason}
    assert reason.startswith("tripwire: watchdog halted the session (compaction-storm): The "
                             "context was compacted 1 times in this turn and 5 times since a "
                             "turn last ended in an answer")


def test_codex_compactions_halt_with_the_universal_keys_only(codex: Hook) -> None:
    def codex_event(event: str, **fields) -> dict:
        return {"session_id": SESSION, "turn_id": "7", "cwd": "/home/u/app",
                "transcript_path": None, "hook_event_name": event, "model": "gpt-5-codex",
                **fields}

    assert codex(codex_event("SessionStart", source="startup", permission_mode="default")) \
        is None
    assert codex(codex_event("UserPromptSubmit", prompt="read everything")) is None
    for _ in range(2):
        assert codex(codex_event("PreCompact", trigger="auto")) is None
        assert codex(codex_event("PostCompact", trigger="auto")) is None
        assert codex(codex_event("SessionStart", source="compact",
                                 permission_mode="default")) is None
    # Codex parses every key strictly: continue and stopReason only
    assert codex(codex_event("PostCompact", trigger="auto")) == {
        "continue": False, "stopReason": storm_halt(codex.store)}


def test_codex_session_start_sources(codex: Hook) -> None:
    """startup, resume and clear are turn boundaries: the compactions of a turn start over at
    each (two per turn never make three in one); compact is the compaction's (above)."""
    def codex_event(event: str, turn: str, **fields) -> dict:
        return {"session_id": SESSION, "turn_id": turn, "cwd": "/home/u/app",
                "transcript_path": None, "hook_event_name": event, "model": "gpt-5-codex",
                **fields}

    for n, source in enumerate(("startup", "resume")):
        assert codex(codex_event("SessionStart", str(n), source=source,
                                 permission_mode="default")) is None
        for _ in range(2):
            assert codex(codex_event("PreCompact", str(n), trigger="auto")) is None
    assert codex(codex_event("SessionStart", "2", source="clear",
                             permission_mode="default")) is None
    out = codex(codex_event("PreCompact", "2", trigger="auto"))  # 5 in a row, 1 in the turn
    assert out == {"continue": False, "stopReason": out["stopReason"]}
    assert out["stopReason"].startswith(
        "tripwire: watchdog halted the session (compaction-storm): The context was compacted "
        "1 times in this turn and 5 times since a turn last ended in an answer")


# -- sub-agents and the session's end -----------------------------------------------------------


def subagent(event: str | dict, agent: str = "a2018e5", **fields) -> dict:
    """A sub-agent's event: ``event`` named (with ``fields``), or a payload of the parent's."""
    payload = common(event, **fields) if isinstance(event, str) else event
    return {**payload, "agent_id": agent, "agent_type": "general-purpose"}


def test_a_subagent_is_its_own_session(claude: Hook) -> None:
    assert claude(common("UserPromptSubmit", prompt="investigate")) is None
    assert claude(subagent("SubagentStart")) is None
    for n in range(1, 5):
        assert claude(subagent(pre(n))) is None
        assert claude(subagent(post(n))) is None
    out = claude(subagent(pre(5)))
    assert out["hookSpecificOutput"]["permissionDecision"] == "deny"
    assert f"--session {SESSION}/a2018e5" in out["stopReason"]
    # the parent session is not halted by its sub-agent's loop
    assert claude(pre(6)) is None
    assert claude(subagent("SubagentStop", stop_hook_active=False,
                           agent_transcript_path="/tmp/agent.jsonl",
                           last_assistant_message="found it")) == {
        "continue": False, "stopReason": out["stopReason"],
        "systemMessage": out["stopReason"]}


def test_a_subagents_task_is_a_child_of_the_parents(tmp_path: Path,
                                                    implementation: str) -> None:
    """The parent's cap of 6 tool calls bounds its sub-agent: 3 parent calls, then the
    sub-agent's 4th distinct call (the tree's 7th) is denied, with the budget's reason."""
    config = tmp_path / "tripwire.toml"
    config.write_text("[budget]\ntool_calls = 6\n")
    hook = Hook("claude-code", tmp_path / "state" / "tripwire.sqlite3", implementation)
    extra = ("--config", str(config))

    def run(payload: dict) -> dict | None:
        done = hook.raw(json.dumps(payload), *extra)
        assert done.returncode == 0 and "Traceback" not in done.stderr, done.stderr
        return json.loads(done.stdout) if done.stdout.strip() else None

    assert run(common("UserPromptSubmit", prompt="investigate")) is None
    for n in range(3):
        assert run(pre(n, {"command": f"ls dir{n}"})) is None
        assert run(post(n, {"command": f"ls dir{n}"}, stdout=f"file{n}")) is None
    assert run(subagent("SubagentStart")) is None
    for n in range(3, 6):
        assert run(subagent(pre(n, {"command": f"cat f{n}"}))) is None
        assert run(subagent(post(n, {"command": f"cat f{n}"},
                                                  stdout=f"text{n}"))) is None
    out = run(subagent(pre(6, {"command": "cat f6"})))
    assert out["hookSpecificOutput"]["permissionDecision"] == "deny"
    assert out["hookSpecificOutput"]["permissionDecisionReason"] == (
        f"task {SESSION}/a2018e5 exhausted the allowance of its parent task {SESSION} tool "
        "calls: 7 of 6")
    # the parent's allowance is used up: its own next call is denied too
    parent = run(pre(7, {"command": "ls"}))
    assert parent["hookSpecificOutput"]["permissionDecision"] == "deny"


def test_session_end_writes_the_sessions_tool_calls(claude: Hook, implementation: str) -> None:
    """An uncapped task writes its tool calls only with its next budget row: SessionEnd is that
    row's moment, so the store holds all of them when the session ends."""
    from tripwire.budgets.task_stored import open_stored_task
    from tripwire.durability.sqlite import SQLiteStore

    assert claude(common("SessionStart", source="startup")) is None
    for n in range(3):
        assert claude(pre(n, {"command": f"ls dir{n}"})) is None
        assert claude(post(n, {"command": f"ls dir{n}"}, stdout=f"file{n}")) is None
    assert claude(common("SessionEnd", reason="prompt_input_exit")) is None
    with SQLiteStore(str(claude.store)) as store:
        assert open_stored_task(store, SESSION).tool_calls == 3


# -- installed by --install ---------------------------------------------------------------------


@pytest.mark.parametrize("harness, events", [
    ("claude-code", {"PreToolUse", "PostToolUse", "PostToolUseFailure", "PostToolBatch",
                     "UserPromptSubmit", "SessionStart", "Stop", "SubagentStart",
                     "SubagentStop", "PreCompact", "PostCompact", "SessionEnd"}),
    ("codex", {"PreToolUse", "PostToolUse", "UserPromptSubmit", "SessionStart", "Stop",
               "PreCompact", "PostCompact"}),
])
def test_install_writes_every_event_it_reads(tmp_path: Path, harness: str,
                                             events: set) -> None:
    done = subprocess.run([sys.executable, "-m", "tripwire", "hook", harness, "--install"],
                          capture_output=True, text=True, timeout=60,
                          env={"PATH": "/usr/bin:/bin", "TRIPWIRE_STORE_KEY": "k",
                               "HOME": str(tmp_path)})
    assert done.returncode == 0, done.stderr
    assert set(json.loads(done.stdout)["hooks"]) == events
