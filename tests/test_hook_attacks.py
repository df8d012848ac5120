"""Attacks on the live hooks (issue 23), each with the real ``tripwire hook claude-code``
command run as a subprocess with the event as JSON on stdin, as Claude Code runs it:

- a ``tool_calls`` cap holds across invocations (each one a new process), sequential and with
  8 hooks at once;
- a held lock on the hook's store (SQLite's write lock, ``flock`` on ``<store>.lock``) or a full
  disk never turns the guard off under ``enforce``: the call is denied within a bounded time,
  naming the store problem (``warn`` fails open, as before);
- a corrupted store never hands a halted session a fresh allowance.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

SESSION = "9d2c0a4e-1b7f-4c55-8e0d-3a6f2b1c9e88"


def event(name: str, **fields: object) -> dict[str, object]:
    return {"session_id": SESSION, "transcript_path": None, "cwd": "/w",
            "permission_mode": "default", "hook_event_name": name, **fields}


def pre(n: int, command: str | None = None) -> dict[str, object]:
    """A distinct call each time (no watchdog signal fires): only a budget can stop it."""
    return event("PreToolUse", tool_name="Bash", tool_input={"command": command or f"ls {n}"},
                 tool_use_id=f"toolu_{n:03d}")


class Hook:
    def __init__(self, tmp: Path, implementation: str, *args: str,
                 env: dict[str, str] | None = None) -> None:
        self.store = tmp / "hooks.sqlite3"
        self.args = list(args)
        self.env = {**os.environ, "TRIPWIRE_IMPLEMENTATION": implementation,
                    "TRIPWIRE_STORE": str(self.store), **(env or {})}

    def run(self, payload: dict[str, object], *extra: str,
            timeout: float = 60) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [sys.executable, "-m", "tripwire", "hook", "claude-code", *self.args, *extra],
            input=json.dumps(payload), capture_output=True, text=True, env=self.env,
            timeout=timeout)

    def __call__(self, payload: dict[str, object]) -> dict[str, object] | None:
        done = self.run(payload)
        assert done.returncode == 0, done.stderr
        assert "Traceback" not in done.stderr, done.stderr
        return json.loads(done.stdout) if done.stdout.strip() else None


def denied(out: dict[str, object] | None) -> bool:
    specific = (out or {}).get("hookSpecificOutput")
    return isinstance(specific, dict) and specific.get("permissionDecision") == "deny"


def capped(tmp: Path, implementation: str, cap: int = 20) -> Hook:
    config = tmp / "tripwire.toml"
    config.write_text(f"[budget]\ntool_calls = {cap}\n")
    return Hook(tmp, implementation, "--mode", "enforce", "--config", str(config))


# -- attack 4: a tool_calls cap across hook processes ---------------------------------------


def test_a_tool_calls_cap_holds_across_hook_processes(tmp_path: Path,
                                                      implementation: str) -> None:
    hook = capped(tmp_path, implementation)
    hook(event("UserPromptSubmit", prompt="go", prompt_id="p1"))
    verdicts = [denied(hook(pre(n))) for n in range(24)]
    assert verdicts == [False] * 20 + [True] * 4


def test_a_tool_calls_cap_holds_with_8_hooks_at_once(tmp_path: Path,
                                                     implementation: str) -> None:
    hook = capped(tmp_path, implementation)
    hook(event("UserPromptSubmit", prompt="go", prompt_id="p1"))
    with ThreadPoolExecutor(8) as pool:
        verdicts = list(pool.map(lambda n: denied(hook(pre(n))), range(24)))
    assert verdicts.count(False) == 20 and verdicts.count(True) == 4
