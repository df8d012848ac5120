"""Codex's last resort (codex-cli 0.147.0): no hook output ends a turn that keeps calling
tools (a denied call fires no PostToolUse; the model made 116 more requests), so under enforce
a halt interrupts the ``codex exec`` process that runs the hook (SIGINT: the turn is aborted,
codex exits 1), once per process; ``--no-interrupt`` and the modes below enforce never do.

A stand-in plays ``codex exec``: a process whose argv is ``codex … exec`` that runs the real
hook command for each event, as Codex does (the hook's parent is codex itself)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from test_hooks import codex_event

DRIVER = r'''
import json, os, signal, subprocess, sys
interrupted = []
signal.signal(signal.SIGINT, lambda *a: interrupted.append(1))
store, extra = sys.argv[1], sys.argv[2:-1]
def hook(event):
    argv = [os.environ["HOOK_PYTHON"], "-m", "tripwire", "hook", "codex", "--store", store]
    done = subprocess.run([*argv, *extra], input=json.dumps(event), capture_output=True,
                          text=True)
    return done.stdout.strip()
events = json.loads(sys.stdin.read())
for i, event in enumerate(events):
    out = hook(event)
    if interrupted:
        print(json.dumps({"interrupted_at": i, "out": out}))
        sys.exit(1)
print(json.dumps({"interrupted_at": None}))
'''


def run_codex_exec(tmp_path: Path, implementation: str, *options: str) -> dict:
    call = {"tool_name": "Bash", "tool_input": {"command": "echo hello"}}
    events = [codex_event("UserPromptSubmit", prompt="go")]
    for n in range(1, 9):
        events.append(codex_event("PreToolUse", tool_use_id=f"call_{n}", **call))
        events.append(codex_event("PostToolUse", tool_use_id=f"call_{n}",
                                  tool_response="hello\n", **call))
    driver = tmp_path / "driver.py"
    driver.write_text(DRIVER)
    done = subprocess.run(["bash", "-c", 'exec -a "$0" "$@"', str(tmp_path / "codex"),
                           sys.executable, str(driver), str(tmp_path / "s.db"), *options,
                           "exec"],
                          input=json.dumps(events), capture_output=True, text=True, timeout=300,
                          env={**os.environ, "TRIPWIRE_IMPLEMENTATION": implementation,
                               "HOOK_PYTHON": sys.executable,
                               "TRIPWIRE_STORE_KEY": "k"})
    assert done.stdout, done.stderr
    result = json.loads(done.stdout)
    result["code"] = done.returncode
    return result


@pytest.mark.skipif(not os.path.exists("/proc/self/stat"), reason="needs Linux /proc")
def test_a_halt_interrupts_codex_exec_under_enforce(tmp_path: Path,
                                                   implementation: str) -> None:
    result = run_codex_exec(tmp_path, implementation)
    assert result["code"] == 1
    assert result["interrupted_at"] == 9  # the 5th PreToolUse: the halting call
    assert json.loads(result["out"])["hookSpecificOutput"]["permissionDecision"] == "deny"


@pytest.mark.skipif(not os.path.exists("/proc/self/stat"), reason="needs Linux /proc")
@pytest.mark.parametrize("options", [["--no-interrupt"], ["--mode", "warn"]])
def test_no_interrupt_when_told_not_to_or_below_enforce(tmp_path: Path, implementation: str,
                                                        options: list) -> None:
    result = run_codex_exec(tmp_path, implementation, *options)
    assert (result["code"], result["interrupted_at"]) == (0, None)
