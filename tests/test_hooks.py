"""Live hooks (SPEC §11.4): the real ``tripwire hook ...`` command run as a subprocess, fed
hook payloads shaped as the harnesses send them, event by event, asserting the exact stdout
JSON and exit code. Each invocation is a new process: the session continues through the store.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tripwire.policy.feedback import render_feedback
from tripwire.signals import Alert

SESSION = "3f1c9a2e-7b4d-4e21-9c3a-5d8e1f2a6b70"
#: the executable --install writes: tripwire's absolute path when it is on the PATH
_FOUND = shutil.which("tripwire")
TRIPWIRE = os.path.abspath(_FOUND) if _FOUND else "tripwire"
#: the command --install writes for a harness: the native client beside it where one is
#: installed (no Python start per event), else ``tripwire hook``
_CLIENT = os.path.join(os.path.dirname(TRIPWIRE), "tripwire-hook")
INSTALLED = _CLIENT if _FOUND and os.access(_CLIENT, os.X_OK) else f"{TRIPWIRE} hook"
TRANSCRIPT = f"/home/u/.claude/projects/-home-u-app/{SESSION}.jsonl"
PYTEST = {"command": "pytest -x", "description": "run tests"}


def repeat_guidance(args: str = '{"command":"pytest -x","description":"run tests"}') -> str:
    return (f"You called Bash 5 times in a row with the same arguments ({args}). The same call "
            "with the same arguments returns the same result, so repeating it cannot make "
            "progress. Change the arguments, use a different tool, or, if you have no next step "
            "that differs, stop calling tools and say what you are stuck on. Do not repeat this "
            "call unchanged.")


class Hook:
    """Runs ``tripwire hook <harness>`` as the harness would: one process per event."""

    def __init__(self, harness: str, store: Path, implementation: str):
        self.harness = harness
        self.store = store
        self.env = {**os.environ, "TRIPWIRE_IMPLEMENTATION": implementation,
                    "TRIPWIRE_STORE": str(store)}

    def raw(self, stdin: str, *args: str) -> subprocess.CompletedProcess:
        return subprocess.run([sys.executable, "-m", "tripwire", "hook", self.harness, *args],
                              input=stdin, capture_output=True, text=True, env=self.env,
                              timeout=60)

    def __call__(self, payload: dict) -> dict | None:
        done = self.raw(json.dumps(payload))
        assert done.returncode == 0, done.stderr
        assert "Traceback" not in done.stderr, done.stderr
        return json.loads(done.stdout) if done.stdout.strip() else None


def common(event: str, **fields) -> dict:
    return {"session_id": SESSION, "transcript_path": TRANSCRIPT, "cwd": "/home/u/app",
            "permission_mode": "default", "hook_event_name": event, **fields}


def pre(n: int, tool_input: dict = PYTEST, tool: str = "Bash") -> dict:
    return common("PreToolUse", tool_name=tool, tool_input=tool_input, tool_use_id=f"toolu_{n:02d}")


def post(n: int, tool_input: dict = PYTEST, stdout: str = "1 failed", tool: str = "Bash",
         **response) -> dict:
    return common("PostToolUse", tool_name=tool, tool_input=tool_input,
                  tool_response={"stdout": stdout, "stderr": "", "interrupted": False,
                                 "isImage": False, **response},
                  tool_use_id=f"toolu_{n:02d}", duration_ms=812)


def failure(n: int, tool_input: dict, error: str) -> dict:
    return common("PostToolUseFailure", tool_name="Bash", tool_input=tool_input,
                  tool_use_id=f"toolu_{n:02d}", error=error, is_interrupt=False, duration_ms=90)


def halt_reason(store: Path, tool: str = "Bash", args: str = '{"command":"pytest -x","description":"run tests"}') -> str:
    return (f"tripwire: watchdog halted the session (repeated-tool-call): {tool} was called 5 "
            f"times in a row with equivalent arguments ({args}): a likely loop, since the same "
            "call returns the same result. The session refuses new turns until an operator "
            "resets it (Guardrails.reset, or `tripwire reset`). To resume: tripwire reset "
            f"{store} --session {SESSION}")


def block(*lines: tuple[str, str], now: bool = True) -> str:
    """The ``[watchdog]`` block of these alerts as a hook tells it: in the turn they fired in
    (a denial's reason, a result's feedback: "about your own current turn"), or at the next
    turn's start (``now=False``: "about your own previous turn")."""
    return render_feedback([Alert(s, "warn", None, "", g, 0) for s, g in lines], now=now)


@pytest.fixture
def claude(tmp_path: Path, implementation: str) -> Hook:
    return Hook("claude-code", tmp_path / "state" / "tripwire.sqlite3", implementation)


@pytest.fixture
def codex(tmp_path: Path, implementation: str) -> Hook:
    return Hook("codex", tmp_path / "state" / "tripwire.sqlite3", implementation)


def looping_until_denied(hook: Hook) -> dict:
    """Four identical Bash calls run; the fifth one's PreToolUse output is returned."""
    assert hook(common("UserPromptSubmit", prompt="make the tests pass")) is None
    for n in range(1, 5):
        assert hook(pre(n)) is None
        assert hook(post(n)) is None
    return hook(pre(5))


# -- Claude Code ------------------------------------------------------------------------------


def test_claude_code_denies_the_fifth_identical_call_and_halts(claude: Hook) -> None:
    assert looping_until_denied(claude) == {
        "continue": False,
        "stopReason": halt_reason(claude.store),
        "systemMessage": halt_reason(claude.store),
        "hookSpecificOutput": {
            "hookEventName": "PreToolUse",
            "permissionDecision": "deny",
            "permissionDecisionReason": block(("repeated-tool-call", repeat_guidance())),
        },
    }


def test_a_halted_session_is_denied_in_later_processes_until_a_reset(claude: Hook) -> None:
    looping_until_denied(claude)
    other = {"file_path": "/home/u/app/src/a.py"}
    # a different call, in a new process: still denied, the agent is stopped
    assert claude(pre(6, other, tool="Read")) == {
        "continue": False,
        "stopReason": halt_reason(claude.store),
        "systemMessage": halt_reason(claude.store),
        "hookSpecificOutput": {
            "hookEventName": "PreToolUse", "permissionDecision": "deny",
            "permissionDecisionReason": block(("repeated-tool-call", repeat_guidance())),
        },
    }
    # a new prompt is refused before any model call; the user reads why
    assert claude(common("UserPromptSubmit", prompt="try again")) == {
        "decision": "block", "reason": halt_reason(claude.store)}
    assert claude(common("Stop", stop_hook_active=False, last_assistant_message="done")) == {
        "continue": False, "stopReason": halt_reason(claude.store),
        "systemMessage": halt_reason(claude.store)}
    # an operator reset (another process) lets the session run again, its runs started over
    done = subprocess.run([sys.executable, "-m", "tripwire", "reset", str(claude.store),
                           "--session", SESSION], capture_output=True, text=True, env=claude.env)
    assert done.returncode == 0, done.stderr
    assert claude(common("UserPromptSubmit", prompt="try again")) is None
    for n in range(7, 11):
        assert claude(pre(n)) is None
        assert claude(post(n)) is None


def test_feedback_reaches_the_model_in_post_tool_use_additional_context(claude: Hook) -> None:
    failing = [{"command": f"make test-{i}"} for i in range(3)]
    assert claude(common("UserPromptSubmit", prompt="run the test targets")) is None
    for n, command in enumerate(failing[:2]):
        assert claude(pre(n, command)) is None
        assert claude(failure(n, command, "Exit code 2\nmake: *** No rule")) is None
    assert claude(pre(2, failing[2])) is None
    assert claude(failure(2, failing[2], "Exit code 2\nmake: *** No rule")) == {
        "hookSpecificOutput": {
            "hookEventName": "PostToolUseFailure",
            # one error three times: repeated-failure's alone (SPEC §12.3)
            "additionalContext": block((
                "repeated-failure",
                "Bash has now failed 3 times with the same error, and nothing changed in "
                "between: Exit code 2\nmake: *** No rule. Running it again, even spelled "
                "differently, will fail the same way. Find out why it fails (the environment, "
                "a missing dependency, the input) and change that before you run it again, or "
                "say what is blocking you.")),
        },
    }
    # delivered once
    assert claude(pre(3, {"command": "ls"})) is None
    assert claude(post(3, {"command": "ls"}, stdout="Makefile")) is None


def test_a_turn_cut_denies_the_rest_of_the_turn_only(claude: Hook) -> None:
    assert claude(common("UserPromptSubmit", prompt="record the task", prompt_id="p1")) is None
    for n in range(3):
        args = {"detail": f"v{n}"}
        assert claude(pre(n, args, tool="mark_task_done")) is None
        out = claude(post(n, args, tool="mark_task_done", no_op=True))
    assert out == {"decision": "block", "reason": block((
        "no-op-streak",
        "Your last 3 tool calls each reported that they changed nothing (mark_task_done). "
        "Repeating them cannot accomplish anything further. If the work is done, stop calling "
        "tools and give your answer; otherwise do something that changes state."))}
    assert claude(pre(3, {"command": "ls"})) == {"hookSpecificOutput": {
        "hookEventName": "PreToolUse", "permissionDecision": "deny",
        "permissionDecisionReason": out["reason"]}}
    # the next prompt is a new turn: the session was not halted
    assert claude(common("UserPromptSubmit", prompt="go on", prompt_id="p2")) is None
    assert claude(pre(4, {"command": "ls"})) is None


def test_the_stop_hook_cap_is_the_sessions_task_budget(claude: Hook) -> None:
    """A permanently blocking stop hook: each Stop with stop_hook_active records one refusal
    of the attempt before it on the session's task (its store rows: every invocation is a
    new process); the 9th refusal exhausts the task and stops the agent, across turns (a
    task's counters never refill), and the session refuses later prompts."""
    assert claude(common("UserPromptSubmit", prompt="finish the task", prompt_id="p1")) is None
    assert claude(common("Stop", stop_hook_active=False, last_assistant_message="done")) is None
    for _ in range(5):  # each later attempt comes after a stop hook refused the previous one
        assert claude(common("Stop", stop_hook_active=True, prompt_id="p1",
                             last_assistant_message="done")) is None
    assert claude(common("UserPromptSubmit", prompt="really finish", prompt_id="p2")) is None
    assert claude(common("Stop", stop_hook_active=False, prompt_id="p2",
                         last_assistant_message="done")) is None
    for _ in range(3):  # refusals 6-8: at the cap, not past it
        assert claude(common("Stop", stop_hook_active=True, prompt_id="p2",
                             last_assistant_message="done")) is None
    capped = (f"tripwire: budget guardrail: task {SESSION} exhausted this task's refused "
              "attempts to finish: 9 of 8, so the agent stops here: this cap overrides the "
              "stop hooks. Its last answer was not accepted by the stop hook and is "
              "unverified. The session refuses new turns.")
    assert claude(common("Stop", stop_hook_active=True, prompt_id="p2",
                         last_assistant_message="done, all tests pass")) == {
        "continue": False, "stopReason": capped, "systemMessage": capped}
    done = subprocess.run([sys.executable, "-m", "tripwire", "status", str(claude.store)],
                          capture_output=True, text=True, timeout=60)
    (task,) = [line for line in map(json.loads, done.stdout.splitlines())
               if line["kind"] == "task"]
    assert (task["task"], task["outcome"], task["counter"]) == (
        SESSION, "exhausted", "stop_rejections")
    assert task["used"]["stop_rejections"] == 9
    assert claude(common("UserPromptSubmit", prompt="go on", prompt_id="p3")) == {
        "decision": "block",
        "reason": f"tripwire: task {SESSION} exhausted this task's refused attempts to "
                  "finish: 9 of 8. The session's task is paused at its cap: the operator "
                  f"raises it to resume (tripwire reset STORE --task {SESSION} --raise "
                  "stop_rejections=+N), and the next prompt continues."}
    # SPEC §13: an insufficient raise is refused (exit 4, naming the smallest), then a raise
    # resumes the session at its next prompt, its consumption kept
    reset = [sys.executable, "-m", "tripwire", "reset", str(claude.store), "--task", SESSION]
    short = subprocess.run([*reset, "--raise", "stop_rejections=+0"], capture_output=True,
                           text=True, timeout=60)
    assert short.returncode == 4 and "by at least 1 (stop_rejections=+1)" in short.stderr
    raised = subprocess.run([*reset, "--raise", "stop_rejections=+3"], capture_output=True,
                            text=True, timeout=60)
    assert raised.returncode == 0, raised.stderr
    assert json.loads(raised.stdout)["resumed"] == "exhausted(stop_rejections)"
    assert claude(common("UserPromptSubmit", prompt="go on", prompt_id="p4")) is None
    for _ in range(2):  # refusals 10 and 11: within the raised cap of 11
        assert claude(common("Stop", stop_hook_active=True, prompt_id="p4",
                             last_assistant_message="done")) is None
    again = claude(common("Stop", stop_hook_active=True, prompt_id="p4",
                          last_assistant_message="done"))
    assert again is not None and "12 of 11" in again["stopReason"]


def test_below_enforce_the_stop_hook_cap_is_reported_only(tmp_path: Path,
                                                          implementation: str) -> None:
    hook = Hook("claude-code", tmp_path / "s.sqlite3", implementation)
    for active in [False] + [True] * 9:
        done = hook.raw(json.dumps(common("Stop", stop_hook_active=active,
                                          last_assistant_message="done")), "--mode", "warn")
        assert done.returncode == 0 and done.stdout == "", done.stderr
    assert "budget guardrail tripped" in done.stderr
    assert "9 of 8" in done.stderr


@pytest.mark.parametrize("stdin", ["", "not json at all", "[1, 2]", '{"hook_event_name": 3}',
                                   '{"session_id": "s", "hook_event_name": "PreToolUse", "tool_input": {'])
def test_garbage_on_stdin_fails_open(claude: Hook, stdin: str) -> None:
    done = claude.raw(stdin)
    assert done.returncode == 0
    assert done.stdout == ""
    lines = done.stderr.splitlines()
    assert len(lines) == 1, done.stderr
    assert lines[0].startswith("tripwire hook claude-code: ")
    assert lines[0].endswith("; no decision")


def test_a_directory_in_place_of_the_store_is_unreadable_not_absent(claude: Hook,
                                                                      tmp_path: Path) -> None:
    """Issue 23: a directory where the store should be is a store that fails its integrity,
    not a transient fault: under enforce the call is denied and the session halted
    (store_unreadable); as for a tampered store, below enforce and without a cost ceiling
    (hooks run unattended: $10 unless the config says 0) nothing is halted."""
    claude.env["TRIPWIRE_STORE"] = str(tmp_path)  # a directory, not a database file
    out = claude(pre(1))
    assert out is not None and out["continue"] is False
    assert out["stopReason"].startswith(
        "tripwire: watchdog halted the session: store_unreadable: the guardrail store cannot "
        f"be read ({tmp_path}: is a directory, not a database file)")
    assert out["hookSpecificOutput"]["permissionDecision"] == "deny"
    config = tmp_path.parent / f"{tmp_path.name}-no-ceiling.toml"
    config.write_text("[cost]\nmax_session_usd = 0\n")
    done = claude.raw(json.dumps(pre(2)), "--mode", "warn", "--config", str(config))
    assert (done.returncode, done.stdout) == (0, "")
    assert "Traceback" not in done.stderr


def test_install_prints_and_merges_the_settings_block(tmp_path: Path) -> None:
    handler = [{"type": "command", "command": f"{INSTALLED} claude-code", "timeout": 10}]
    expected = {"hooks": {
        "PreToolUse": [{"matcher": "*", "hooks": handler}],
        "PostToolUse": [{"matcher": "*", "hooks": handler}],
        "PostToolUseFailure": [{"matcher": "*", "hooks": handler}],
        "UserPromptSubmit": [{"hooks": handler}],
        "SessionStart": [{"hooks": handler}],
        "Stop": [{"hooks": handler}],
        "SubagentStop": [{"hooks": handler}],
        "PostToolBatch": [{"hooks": handler}],
        "PreCompact": [{"hooks": handler}],
        "PostCompact": [{"hooks": handler}],
        "SubagentStart": [{"hooks": handler}],
        "SessionEnd": [{"hooks": handler}],
    }}
    run = [sys.executable, "-m", "tripwire", "hook", "claude-code", "--install"]
    done = subprocess.run(run, capture_output=True, text=True)
    assert done.returncode == 0
    assert json.loads(done.stdout) == expected
    settings = tmp_path / ".claude" / "settings.json"
    settings.parent.mkdir()
    mine = {"matcher": "Bash", "hooks": [{"type": "command", "command": "my-check"}]}
    settings.write_text(json.dumps({"model": "opus", "hooks": {"PreToolUse": [mine]}}))
    for _ in range(2):  # writing twice adds nothing twice
        done = subprocess.run([*run, "--write", str(settings)], capture_output=True, text=True)
        assert done.returncode == 0, done.stderr
    merged = json.loads(settings.read_text())
    assert merged["model"] == "opus"
    assert merged["hooks"]["PreToolUse"] == [mine, {"matcher": "*", "hooks": handler}]
    assert {k: v for k, v in merged["hooks"].items() if k != "PreToolUse"} == \
        {k: v for k, v in expected["hooks"].items() if k != "PreToolUse"}


# -- Codex ------------------------------------------------------------------------------------


def codex_event(event: str, turn: str = "1", **fields) -> dict:
    return {"session_id": "019a2d7a-5b1c-7e00-8a11-3c4d5e6f7a8b", "turn_id": turn,
            "transcript_path": None, "cwd": "/home/u/app", "hook_event_name": event,
            "model": "gpt-5-codex", "permission_mode": "default", **fields}


def test_codex_denies_the_fifth_identical_call_without_keys_codex_rejects(codex: Hook) -> None:
    session = "019a2d7a-5b1c-7e00-8a11-3c4d5e6f7a8b"
    assert codex(codex_event("UserPromptSubmit", prompt="make the tests pass")) is None
    for n in range(1, 5):
        assert codex(codex_event("PreToolUse", tool_name="Bash",
                                 tool_input={"command": "pytest -x"}, tool_use_id=f"call_{n}")) is None
        assert codex(codex_event("PostToolUse", tool_name="Bash",
                                 tool_input={"command": "pytest -x"}, tool_use_id=f"call_{n}",
                                 tool_response="1 failed")) is None
    guidance = block(("repeated-tool-call", repeat_guidance('{"command":"pytest -x"}')))
    reason = halt_reason(codex.store, args='{"command":"pytest -x"}').replace(SESSION, session)
    # Codex rejects continue/stopReason on PreToolUse: the denial alone
    assert codex(codex_event("PreToolUse", tool_name="Bash", tool_input={"command": "pytest -x"},
                             tool_use_id="call_5")) == {"hookSpecificOutput": {
        "hookEventName": "PreToolUse", "permissionDecision": "deny",
        "permissionDecisionReason": guidance}}
    # ...and stops the agent where Codex allows it
    assert codex(codex_event("Stop", stop_hook_active=False, last_assistant_message=None)) == {
        "continue": False, "stopReason": reason}
    # a new turn of the halted session: the prompt is refused
    assert codex(codex_event("UserPromptSubmit", turn="2", prompt="again")) == {
        "decision": "block", "reason": reason}


def test_codex_spend_comes_from_the_rollout_priced(codex: Hook) -> None:
    """Codex hooks carry no usage: the hook reads the rollout's token counts (each once, a
    repeat with the same totals skipped, across invocations too), prices them by the latest
    turn_context's model, marked estimated."""
    pytest.importorskip("genai_prices", reason="the price catalogue is the prices extra")
    from tripwire.interchange.events import Usage
    from tripwire.interchange.prices import estimate

    rollout = codex.store.parent.parent / "rollout.jsonl"

    def line(kind: str, payload: dict) -> str:
        return json.dumps({"timestamp": "2026-05-01T10:00:00.000Z", "type": kind,
                           "payload": payload}) + "\n"

    def tokens(inp: int, cached: int, out: int) -> str:
        counts = {"input_tokens": inp, "cached_input_tokens": cached, "output_tokens": out,
                  "reasoning_output_tokens": 0, "total_tokens": inp + out}
        return line("event_msg", {"type": "token_count", "info": {
            "total_token_usage": counts, "last_token_usage": counts}})

    rollout.write_text(line("session_meta", {"id": "019a2d7a-5b1c-7e00-8a11-3c4d5e6f7a8b"})
                       + line("turn_context", {"model": "gpt-5-codex"})
                       + tokens(3040, 2900, 70))
    event = {**codex_event("PostToolUse", tool_name="Bash", tool_input={"command": "ls"},
                           tool_use_id="call_1", tool_response="a.py"),
             "transcript_path": str(rollout)}
    assert codex(codex_event("UserPromptSubmit", prompt="go")) is None
    assert codex(event) is None
    with rollout.open("a") as f:
        f.write(tokens(3040, 2900, 70))  # the same count again
    assert codex(event) is None
    expected = estimate(Usage(model="gpt-5-codex", input_tokens=3040, output_tokens=70,
                              cache_read_tokens=2900, provider="openai")).cost_usd
    assert expected and expected > 0
    status = subprocess.run([sys.executable, "-m", "tripwire", "status", str(codex.store)],
                            capture_output=True, text=True, env=codex.env, timeout=60)
    (record,) = [r for r in (json.loads(x) for x in status.stdout.splitlines()
                             if x.startswith("{")) if r["kind"] == "session"]
    assert record["spent_usd"] == pytest.approx(expected, abs=1e-9)
    assert record["cost_estimated"] is True


def no_op_turn(hook: Hook, turn: str, first: int) -> dict | None:
    """A turn whose three reworded calls each come back no_op; the last result's output."""
    assert hook(common("UserPromptSubmit", prompt="record it", prompt_id=turn)) is None
    out = None
    for n in range(first, first + 3):
        args = {"detail": f"{turn} v{n}"}
        assert hook(pre(n, args, tool="mark_task_done")) is None
        out = hook(post(n, args, tool="mark_task_done", no_op=True))
    return out


def test_three_cut_turns_in_a_row_halt_across_processes(claude: Hook) -> None:
    assert set(no_op_turn(claude, "p1", 0)) == {"decision", "reason"}
    assert set(no_op_turn(claude, "p2", 3)) == {"decision", "reason"}
    out = no_op_turn(claude, "p3", 6)
    assert out["continue"] is False
    assert out["stopReason"].startswith(
        "tripwire: watchdog halted the session (no-op-streak): no-op-streak cut 3 turns in a row")


def test_a_clean_turn_between_cuts_clears_the_count_across_processes(claude: Hook) -> None:
    for k, turn in enumerate(("p1", "p3", "p5")):
        assert set(no_op_turn(claude, turn, 10 * k)) == {"decision", "reason"}  # cut, not halted
        clean = f"p{2 * k + 2}"
        assert claude(common("UserPromptSubmit", prompt="go on", prompt_id=clean)) is None
        assert claude(pre(10 * k + 5, {"command": "ls"})) is None
        assert claude(post(10 * k + 5, {"command": "ls"}, stdout="Makefile")) is None


def test_a_resident_server_answers_exactly_as_the_command_does(claude: Hook, tmp_path: Path) -> None:
    sock = tmp_path / "hook.sock"
    server = subprocess.Popen([sys.executable, "-m", "tripwire", "hook", "serve", "--socket",
                               str(sock), "--idle-timeout", "60"], env=claude.env,
                              stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.monotonic() + 30
        while not sock.exists() and server.poll() is None and time.monotonic() < deadline:
            time.sleep(0.05)
        assert sock.exists(), "the server did not start"
        # the client's own engine setting is broken: only the server can give these answers
        client = Hook("claude-code", claude.store, "python")
        client.env.update(TRIPWIRE_HOOK_SOCKET=str(sock), TRIPWIRE_IMPLEMENTATION="no-such")
        assert looping_until_denied(client) == {
            "continue": False,
            "stopReason": halt_reason(claude.store),
            "systemMessage": halt_reason(claude.store),
            "hookSpecificOutput": {
                "hookEventName": "PreToolUse", "permissionDecision": "deny",
                "permissionDecisionReason": block(("repeated-tool-call", repeat_guidance())),
            },
        }
    finally:
        server.kill()
        server.wait()
    # no server listening any more: the command runs the event itself, from the same store
    claude.env["TRIPWIRE_HOOK_SOCKET"] = str(sock)
    assert claude(pre(6))["hookSpecificOutput"]["permissionDecision"] == "deny"


def test_a_broken_environment_denies_calls_under_enforce_and_fails_open_below(
        claude: Hook) -> None:
    """An error the hook cannot decide past (issue 36: an agent could cause one) is a denial
    of the call under enforce, with a reason for the model and a line for the operator; a
    result has nothing to deny (no decision); below enforce it fails open, as before."""
    claude.env["TRIPWIRE_IMPLEMENTATION"] = "no-such-engine"
    problem = ("TRIPWIRE_IMPLEMENTATION must be native, python or auto, not 'no-such-engine'")
    done = claude.raw(json.dumps(pre(1)))
    assert done.returncode == 0
    assert json.loads(done.stdout) == {"hookSpecificOutput": {
        "hookEventName": "PreToolUse", "permissionDecision": "deny",
        "permissionDecisionReason": f"[watchdog] tripwire could not decide on this tool call "
                                    f"({problem}), so it is denied: under enforce a call that "
                                    "is not observed does not run. Do not retry it now; end "
                                    "your turn with a short summary of where you are."}}
    assert done.stderr.splitlines() == [
        f"tripwire hook claude-code: {problem}; the call is denied: under enforce a call "
        "tripwire cannot decide does not run"]
    done = claude.raw(json.dumps(post(1)))
    assert (done.returncode, done.stdout) == (0, "")
    assert done.stderr.splitlines() == [f"tripwire hook claude-code: {problem}; no decision"]
    done = claude.raw(json.dumps(pre(2)), "--mode", "warn")
    assert (done.returncode, done.stdout) == (0, "")
    assert done.stderr.splitlines() == [f"tripwire hook claude-code: {problem}; no decision"]


def test_a_recorded_halt_still_denies_when_the_hook_fails(claude: Hook) -> None:
    import sqlite3

    looping_until_denied(claude)
    with sqlite3.connect(claude.store) as db:  # the hook's own table no longer reads
        db.execute("ALTER TABLE hook_sessions RENAME COLUMN state TO other")
    done = claude.raw(json.dumps(pre(6, {"file_path": "/home/u/app/a.py"}, tool="Read")))
    assert done.returncode == 0
    assert json.loads(done.stdout) == {
        "continue": False,
        "stopReason": halt_reason(claude.store).split(" To resume:")[0].removeprefix("tripwire: "),
        "systemMessage": halt_reason(claude.store).split(" To resume:")[0].removeprefix(
            "tripwire: "),
        "hookSpecificOutput": {
            "hookEventName": "PreToolUse", "permissionDecision": "deny",
            "permissionDecisionReason": "[watchdog] This session was halted for a runaway "
                                        "pattern and refuses further tool calls."},
    }
    assert len(done.stderr.splitlines()) == 1, done.stderr
    # a result, whose hook cannot deny anything, just fails open
    done = claude.raw(json.dumps(post(6, {"file_path": "/home/u/app/a.py"}, tool="Read")))
    assert (done.returncode, done.stdout, len(done.stderr.splitlines())) == (0, "", 1)


def test_an_edited_window_reads_as_a_fresh_one_and_the_hook_still_decides(claude: Hook
                                                                          ) -> None:
    """The window table is not sealed: bytes that do not read as a window are a fresh window
    (they may hide a pattern in progress), never a hook that fails open on every event."""
    import sqlite3

    looping_until_denied(claude)
    with sqlite3.connect(claude.store) as db:
        db.execute("UPDATE hook_sessions SET state = x'c1c1c1'")
    out = claude(pre(6, {"file_path": "/home/u/app/a.py"}, tool="Read"))
    assert out is not None and out["continue"] is False  # the halt is the sealed store's
    assert out["hookSpecificOutput"]["permissionDecision"] == "deny"


def test_claude_code_spend_comes_from_the_transcript_priced(tmp_path: Path,
                                                           implementation: str) -> None:
    """Claude Code records tokens, never a cost: the hook reads each response's usage once
    (from the last line of its message id) and prices it from the catalogue, marked estimated."""
    pytest.importorskip("genai_prices", reason="the price catalogue is the prices extra")
    from tripwire.interchange.events import Usage
    from tripwire.interchange.prices import estimate

    transcript = tmp_path / "session.jsonl"
    usage = {"input_tokens": 1200, "cache_read_input_tokens": 30000, "output_tokens": 800}
    lines = [{"type": "user", "sessionId": SESSION, "message": {"role": "user", "content": "go"}}]
    for chunk in ({**usage, "output_tokens": 1}, usage):  # the first chunk's output is partial
        lines.append({"type": "assistant", "sessionId": SESSION, "isSidechain": False,
                      "message": {"id": "msg_01", "role": "assistant",
                                  "model": "claude-sonnet-4-5-20250929", "usage": chunk,
                                  "content": [{"type": "text", "text": "running"}]}})
    lines.append({"type": "user", "sessionId": SESSION,
                  "message": {"role": "user", "content": [{"type": "tool_result",
                                                           "tool_use_id": "toolu_01",
                                                           "content": "ok"}]}})
    transcript.write_text("".join(json.dumps(x) + "\n" for x in lines))
    hook = Hook("claude-code", tmp_path / "state" / "tripwire.sqlite3", implementation)
    payload = {**post(1), "transcript_path": str(transcript)}
    assert hook(common("UserPromptSubmit", prompt="go")) is None
    assert hook(payload) is None
    assert hook(payload) is None  # read once: the offset is kept in the hook's state
    expected = estimate(Usage(model="claude-sonnet-4-5-20250929", input_tokens=31200,
                              output_tokens=800, cache_read_tokens=30000,
                              provider="anthropic")).cost_usd
    assert expected and expected > 0
    status = subprocess.run([sys.executable, "-m", "tripwire", "status", str(hook.store)],
                            capture_output=True, text=True, env=hook.env, timeout=60)
    (record,) = [r for r in (json.loads(x) for x in status.stdout.splitlines()
                             if x.startswith("{")) if r["kind"] == "session"]
    assert record["spent_usd"] == pytest.approx(expected, abs=1e-9)
    assert record["cost_estimated"] is True


def test_a_user_prompt_checks_in_a_paused_task(claude: Hook, tmp_path: Path) -> None:
    """SPEC §13: a check-in window of two tool calls pauses the session's task at the third
    call (denied, exhausted(checkin:tool_calls)); the user's next prompt is the operator's
    check-in (each prompt is one): the task continues, its totals kept."""
    config = tmp_path / "checkin.toml"
    config.write_text("[budget]\ncheckin = { tool_calls = 2 }\n")

    def hook(payload: dict) -> dict | None:
        done = claude.raw(json.dumps(payload), "--config", str(config))
        assert done.returncode == 0 and "Traceback" not in done.stderr, done.stderr
        return json.loads(done.stdout) if done.stdout.strip() else None

    hook(common("UserPromptSubmit", prompt="list things", prompt_id="p1"))
    for n in (1, 2):
        assert hook(pre(n, {"command": f"ls dir{n}"})) is None
        hook(post(n, {"command": f"ls dir{n}"}, stdout="a b"))
    denied = hook(pre(3, {"command": "ls dir3"}))
    assert denied is not None
    assert denied["hookSpecificOutput"]["permissionDecision"] == "deny"
    assert "check-in window of tool calls: 3 of 2" in json.dumps(denied)
    assert hook(common("UserPromptSubmit", prompt="go on", prompt_id="p2")) is None
    assert hook(pre(4, {"command": "ls dir4"})) is None
    done = subprocess.run([sys.executable, "-m", "tripwire", "status", str(claude.store)],
                          capture_output=True, text=True, timeout=60)
    (task,) = [line for line in map(json.loads, done.stdout.splitlines())
               if line["kind"] == "task"]
    assert (task["outcome"], task["check_ins"], task["used"]["tool_calls"]) == (None, 2, 4)
