"""``tripwire hook copilot`` (GitHub Copilot CLI) and ``tripwire hook kiro`` (Kiro CLI), run as
the harnesses run them (one process per event), fed payloads shaped as their documented
contracts describe them (docs.github.com "GitHub Copilot CLI hooks reference": camelCase
payloads, ``permissionDecision`` deny; kiro.dev "CLI hooks": exit 2 with the reason on stderr
blocks a ``preToolUse``), asserting the exact stdout, stderr and exit status. No binary of
either harness runs here."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from test_hooks import INSTALLED, Hook, block, repeat_guidance

SESSION = "8c2d4e6f-1a3b-4c5d-9e7f-0a1b2c3d4e5f"
ARGS = {"command": "npm test"}


def guidance(tool: str) -> str:
    """The denial's reason for the model: repeated-tool-call's guidance for ``tool``."""
    text = repeat_guidance('{"command":"npm test"}').replace("You called Bash",
                                                              f"You called {tool}")
    return block(("repeated-tool-call", text))


def copilot_call(n: int, args: dict = ARGS) -> dict:
    # toolArgs as the older reference shows it: a JSON string
    return {"sessionId": SESSION, "timestamp": 1765000000000 + 2 * n, "cwd": "/home/u/app",
            "toolName": "bash", "toolArgs": json.dumps(args)}


def copilot_result(n: int, args: dict = ARGS, text: str = "1 failing") -> dict:
    return {"sessionId": SESSION, "timestamp": 1765000000001 + 2 * n, "cwd": "/home/u/app",
            "toolName": "bash", "toolArgs": args,
            "toolResult": {"resultType": "success", "textResultForLlm": text}}


def copilot_failure(n: int, args: dict, error: str) -> dict:
    return {"sessionId": SESSION, "timestamp": 1765000000001 + 2 * n, "cwd": "/home/u/app",
            "toolName": "bash", "toolArgs": args, "error": error}


def kiro(event: str, **fields) -> dict:
    return {"hook_event_name": event, "cwd": "/home/u/app", **fields}


def kiro_call(args: dict = ARGS) -> dict:
    return kiro("preToolUse", tool_name="execute_bash", tool_input=args)


def kiro_result(args: dict = ARGS, output: str = "1 failing") -> dict:
    return kiro("postToolUse", tool_name="execute_bash", tool_input=args,
                tool_response={"success": True, "result": [output]})


@pytest.fixture
def cop(tmp_path: Path, implementation: str) -> Hook:
    return Hook("copilot", tmp_path / "state" / "s.sqlite3", implementation)


@pytest.fixture
def kir(tmp_path: Path, implementation: str) -> Hook:
    return Hook("kiro", tmp_path / "state" / "s.sqlite3", implementation)


def answer(hook: Hook, payload: dict) -> tuple[int, str, str]:
    done = hook.raw(json.dumps(payload))
    assert "Traceback" not in done.stderr, done.stderr
    return done.returncode, done.stdout, done.stderr


# -- GitHub Copilot CLI -------------------------------------------------------------------------


def test_copilot_denies_the_fifth_identical_call(cop: Hook) -> None:
    assert answer(cop, {"sessionId": SESSION, "timestamp": 1, "cwd": "/home/u/app",
                        "source": "new", "initialPrompt": "make the tests pass"})[:2] == (0, "")
    assert answer(cop, {"sessionId": SESSION, "timestamp": 2, "cwd": "/home/u/app",
                        "prompt": "make the tests pass"})[:2] == (0, "")
    for n in range(1, 5):
        assert answer(cop, copilot_call(n))[:2] == (0, "")
        assert answer(cop, copilot_result(n))[:2] == (0, "")
    code, out, _ = answer(cop, copilot_call(5))
    assert code == 0
    assert json.loads(out) == {"permissionDecision": "deny",
                               "permissionDecisionReason": guidance("bash")}
    # halted: a different call in a later process is denied too (no Copilot output ends it)
    code, out, _ = answer(cop, copilot_call(6, {"command": "ls"}))
    assert json.loads(out)["permissionDecision"] == "deny"
    assert json.loads(out)["permissionDecisionReason"].startswith(
        "[watchdog] Automated observation")


def test_copilot_an_event_delivered_twice_is_observed_once(cop: Hook) -> None:
    for n in range(1, 5):
        for _ in range(2):  # the same event (same timestamp) from two hooks files
            assert answer(cop, copilot_call(n))[:2] == (0, "")
    assert json.loads(answer(cop, copilot_call(5))[1])["permissionDecision"] == "deny"


def test_copilot_failures_get_recovery_guidance_as_exit_2(cop: Hook) -> None:
    """postToolUseFailure: exit 2 returns stderr to the agent as recovery guidance."""
    error = "Command failed with exit code 2: make: *** No rule to make target"
    said = None
    for n in range(3):
        args = {"command": f"make test-{n}"}
        assert answer(cop, copilot_call(n, args))[:2] == (0, "")
        said = answer(cop, copilot_failure(n, args, error))
        if n < 2:
            assert said == (0, "", "")
    assert said == (2, "", block((
        "repeated-failure",
        f"bash has now failed 3 times with the same error, and nothing changed in between: "
        f"{error}. Running it again, even spelled differently, will fail the same way. Find "
        "out why it fails (the environment, a missing dependency, the input) and change that "
        "before you run it again, or say what is blocking you.")) + "\n")


def test_copilot_garbage_fails_open(cop: Hook) -> None:
    code, out, err = answer(cop, {"sessionId": SESSION, "what": "is this"})
    assert (code, out) == (0, "")
    assert err.strip().endswith("; no decision") and "no field says which event" in err


# -- Kiro ---------------------------------------------------------------------------------------


def test_kiro_denies_the_fifth_identical_call_with_exit_2(kir: Hook) -> None:
    assert answer(kir, kiro("agentSpawn")) == (0, "", "")
    assert answer(kir, kiro("userPromptSubmit", prompt="make the tests pass")) == (0, "", "")
    for _ in range(4):
        assert answer(kir, kiro_call()) == (0, "", "")
        assert answer(kir, kiro_result()) == (0, "", "")
    # stderr goes to the model: the guidance alone, none of the operator's lines
    assert answer(kir, kiro_call()) == (2, "", guidance("execute_bash") + "\n")
    # a halted session's prompt cannot be refused: the user is warned how to resume
    code, out, err = answer(kir, kiro("userPromptSubmit", prompt="try again"))
    assert (code, out) == (1, "")
    assert err.startswith("tripwire: watchdog halted the session (repeated-tool-call)")
    assert f"tripwire reset {kir.store} --session kiro:/home/u/app" in err


def test_kiro_reads_a_session_id_when_the_payload_has_one(kir: Hook) -> None:
    for _ in range(4):
        assert answer(kir, {**kiro_call(), "session_id": "sess_1"})[0] == 0
    assert answer(kir, {**kiro_call(), "session_id": "sess_2"})[0] == 0  # another session
    assert answer(kir, {**kiro_call(), "session_id": "sess_1"})[0] == 2


# -- --install and doctor -----------------------------------------------------------------------


def tripwire(*args: str, cwd: Path, home: Path) -> subprocess.CompletedProcess:
    bin_dir = os.path.dirname(sys.executable)
    return subprocess.run([sys.executable, "-m", "tripwire", *args], capture_output=True,
                          text=True, cwd=cwd, timeout=300,
                          env={**os.environ, "HOME": str(home), "TRIPWIRE_STORE_KEY": "k",
                               "CODEX_HOME": str(home / ".codex"),
                               "PATH": f"{bin_dir}{os.pathsep}{os.environ['PATH']}"})


def test_copilot_install_writes_a_hooks_file_and_doctor_checks_it(tmp_path: Path) -> None:
    home = tmp_path / "home"
    (home / ".github" / "hooks").mkdir(parents=True)
    done = tripwire("hook", "copilot", "--install", cwd=home, home=home)
    handler = {"type": "command", "bash": f"{INSTALLED} copilot", "timeoutSec": 10}
    assert json.loads(done.stdout) == {"version": 1, "hooks": {e: [handler] for e in (
        "sessionStart", "userPromptSubmitted", "preToolUse", "postToolUse",
        "postToolUseFailure", "agentStop", "preCompact", "sessionEnd")}}
    target = home / ".github" / "hooks" / "tripwire.json"
    done = tripwire("hook", "copilot", "--install", "--store", "state/s.db", "--write",
                    str(target), cwd=home, home=home)
    assert done.returncode == 0, done.stderr
    assert done.stdout == f"tripwire: hooks for copilot written to {target} (8 events)\n"
    assert json.loads(target.read_text())["version"] == 1
    done = tripwire("doctor", cwd=home, home=home)
    records = [json.loads(x) for x in done.stdout.splitlines()]
    assert done.returncode == 0, done.stdout + done.stderr
    assert [(r["harness"], r["decides"], r["denies_call"], r["problem"])
            for r in records if r["kind"] == "hook"] == [("copilot", True, 5, None)]
    done = tripwire("hook", "copilot", "--uninstall", str(target), cwd=home, home=home)
    assert done.stdout == f"tripwire: 8 tripwire hook entries for copilot removed from " \
                          f"{target}\n"


def test_kiro_install_adds_hooks_to_an_agent_and_doctor_checks_it(tmp_path: Path) -> None:
    home = tmp_path / "home"
    agents = home / ".kiro" / "agents"
    agents.mkdir(parents=True)
    missing = agents / "new.json"
    done = tripwire("hook", "kiro", "--install", "--write", str(missing), cwd=home, home=home)
    assert done.returncode == 2 and not missing.exists()
    assert "no such file; --write takes a Kiro agent configuration that exists" in done.stderr
    agent = agents / "dev.json"
    agent.write_text(json.dumps({"name": "dev", "tools": ["*"], "allowedTools": ["read"]}))
    done = tripwire("hook", "kiro", "--install", "--store", "state/s.db", "--write",
                    str(agent), cwd=home, home=home)
    assert done.returncode == 0, done.stderr
    assert done.stdout == f"tripwire: hooks for kiro written to {agent} (5 events)\n"
    written = json.loads(agent.read_text())
    assert written["tools"] == ["*"] and written["allowedTools"] == ["read"]
    assert written["hooks"]["preToolUse"][0]["matcher"] == "*"
    assert "matcher" not in written["hooks"]["stop"][0]
    done = tripwire("doctor", cwd=home, home=home)
    records = [json.loads(x) for x in done.stdout.splitlines()]
    assert done.returncode == 0, done.stdout + done.stderr
    assert [(r["harness"], r["decides"], r["denies_call"], r["problem"])
            for r in records if r["kind"] == "hook"] == [("kiro", True, 5, None)]
