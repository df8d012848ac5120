"""What a newcomer tripped over on a fresh clone (issue 36), each as they met it: real
transcripts from ../shared/corpus, the hook command as a real subprocess, both engines.

- ``status`` prints a capped task's caps (``budget``), and a hook session's task counts the
  calls its hook processes allowed (``tool_calls``);
- a warn-mode ``replay --store`` leaves a task whose ``used`` agrees with the session's spend;
- usage that names no model is "(no model)", said once as such (not a model named "");
- the ``[watchdog]`` block told in the turn it is about says so;
- replay's JSON Lines and its operator lines go to different streams, and ``--help`` says so.

(Elsewhere: the empty Gemini CLI recording in tests/test_format_gemini_cli.py, doctor's probes
in tests/test_doctor.py, Codex homes in tests/test_hook_install.py, serve's events and task
routes in tests/test_serve.py, ``-V`` in tests/test_cli_gaps.py, the default-key notice in
tests/test_cli_consistency.py.)
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from conftest import need_shared

from tripwire import Guardrails, GuardrailsConfig
from tripwire.policy.feedback import HEADER, HEADER_NOW

TRANSCRIPT = need_shared("corpus", "claude-code-samples", "samples", "claude-code-projects",
                         "0ccf1a04-1b4c-43b6-8aa5-79e41db43a68.jsonl")


def tripwire(*args: str, stdin: str | None = None, implementation: str = "native",
             env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "tripwire", *args], input=stdin,
                          capture_output=True, text=True, timeout=120,
                          env={**os.environ, "TRIPWIRE_IMPLEMENTATION": implementation,
                               **(env or {})})


def status(store: Path) -> list[dict[str, Any]]:
    done = tripwire("status", str(store))
    assert done.returncode == 0, done.stderr
    return [json.loads(line) for line in done.stdout.splitlines()]


def hook_events(transcript: Path, calls: int) -> list[dict[str, Any]]:
    """A Claude Code session's hook payloads: ``calls`` distinct Bash calls and their results,
    then the Stop that ends the turn (the transcript carries the usage)."""
    base = {"session_id": "s-first", "transcript_path": str(transcript), "cwd": "/w",
            "permission_mode": "default"}
    out = [{**base, "hook_event_name": "UserPromptSubmit", "prompt": "go"}]
    for n in range(calls):
        call = {**base, "tool_name": "Bash", "tool_input": {"command": f"ls {n}"},
                "tool_use_id": f"toolu_{n:02d}"}
        out.append({**call, "hook_event_name": "PreToolUse"})
        out.append({**call, "hook_event_name": "PostToolUse",
                    "tool_response": {"stdout": f"file{n}", "stderr": ""}})
    out.append({**base, "hook_event_name": "Stop", "stop_hook_active": False})
    return out


@pytest.mark.parametrize("capped", [False, True])
def test_status_shows_a_hook_tasks_caps_and_its_tool_calls(tmp_path: Path, implementation: str,
                                                          capped: bool) -> None:
    """Four allowed calls, each in its own hook process, with a real transcript's usage: the
    task's ``tool_calls`` is 4 (it was 0: an uncapped count was written only with the next
    budget row, in a process that had restored the count before the call), and its caps are
    printed (``budget`` was null for the implicit task, which wrote no start row)."""
    transcript = tmp_path / "t.jsonl"
    transcript.write_text("".join(TRANSCRIPT.read_text().splitlines(keepends=True)[:40]))
    store = tmp_path / "hooks.sqlite3"
    args = ["hook", "claude-code", "--store", str(store)]
    if capped:
        config = tmp_path / "tripwire.toml"
        config.write_text("[budget]\ntool_calls = 20\nsteps = 50\n")
        args += ["--config", str(config)]
    for payload in hook_events(transcript, 4):
        done = tripwire(*args, stdin=json.dumps(payload), implementation=implementation)
        assert (done.returncode, done.stdout) == (0, ""), done.stderr
    session, task = status(store)
    assert (session["kind"], task["kind"], task["task"]) == ("session", "task", "s-first")
    assert task["used"]["tool_calls"] == 4
    assert task["used"]["steps"] == 3  # the three responses of the transcript's first lines
    assert task["used"]["usd"] == session["spent_usd"] > 0
    assert task["budget"]["tool_calls"] == (20 if capped else 0)
    assert task["budget"]["steps"] == (50 if capped else 1000)  # hooks run unattended
    assert task["budget"]["stop_rejections"] == 8


def test_a_warn_mode_replay_store_task_agrees_with_the_spend(tmp_path: Path,
                                                             implementation: str) -> None:
    """A real recording replayed into a store in warn mode (no cap is armed, so no budget row
    was written as it ran): its end writes the task's consumption, equal to the spend."""
    store = tmp_path / "r.db"
    done = tripwire("replay", "--quiet", "--store", str(store), str(TRANSCRIPT),
                    implementation=implementation)
    assert done.returncode == 0, done.stderr
    summary = json.loads(done.stdout)
    session, task = status(store)
    assert task["used"]["usd"] == session["spent_usd"] > 0
    assert task["used"]["steps"] == summary["estimated_costs"] == 11  # one per response
    assert task["used"]["tool_calls"] == 7


def test_usage_without_a_model_is_no_model_said_once(tmp_path: Path,
                                                     implementation: str) -> None:
    events = tmp_path / "usage.jsonl"
    events.write_text("\n".join(json.dumps(e) for e in (
        {"type": "turn_start"},
        {"type": "usage", "input_tokens": 100, "output_tokens": 10},
        {"type": "usage", "model": "", "input_tokens": 200, "output_tokens": 20},
        {"type": "turn_end"})) + "\n")
    store = tmp_path / "u.db"
    done = tripwire("replay", "--store", str(store), str(events),
                    implementation=implementation)
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout.splitlines()[-1])["unpriced_models"] == ["(no model)"]
    notes = [x for x in done.stderr.splitlines() if "model" in x]
    assert notes == ["tripwire: usage that names no model cannot be priced: it has no cost, "
                     "and cost ceilings cannot trip on it (give its model, or its cost_usd)"]
    (session, _task) = status(store)
    assert session["unpriced_models"] == ["(no model)"]


def test_the_block_told_in_its_own_turn_says_current_turn(implementation: str) -> None:
    """In a turn, a hook's feedback (``take_feedback(now=True)``) is about the current turn;
    the block prepended to the next turn is about the previous one."""
    config = GuardrailsConfig(mode="feedback", unattended=False)
    for now, header in ((True, HEADER_NOW), (False, HEADER)):
        g = Guardrails(config, session_id="s", implementation=implementation,
                       feedback_at_once=now)
        g.start_turn()
        for n in range(3):
            g.on_call("run", json.dumps({"n": n}), id=f"c{n}")
            g.on_result("run", id=f"c{n}", error=f"failure {n}: exit 1")
        if now:
            block = g.take_feedback(now=True)
        else:
            g.end_turn()
            block = g.start_turn().prepend("go")
        assert block.startswith(header + "\n- repeated-failure: run has now failed 3 times"), \
            block
    assert "current turn" in HEADER_NOW and "previous turn" in HEADER


def test_replay_writes_records_and_operator_lines_to_their_own_streams(
        tmp_path: Path, implementation: str) -> None:
    """stdout holds JSON Lines only, stderr the operator's sentences only; --help says which
    goes where (they interleave on one terminal)."""
    events = tmp_path / "loop.jsonl"
    events.write_text("".join(json.dumps({"type": "call", "name": "read_file",
                                          "args": {"path": "a"}}) + "\n" for _ in range(6)))
    done = tripwire("replay", "--mode", "enforce", str(events), implementation=implementation)
    assert done.returncode == 0, done.stderr
    records = [json.loads(line) for line in done.stdout.splitlines()]
    assert [r["kind"] for r in records] == ["alert", "decision", "skipped", "summary"]
    lines = done.stderr.splitlines()
    assert lines and all(line.startswith("tripwire: ") for line in lines)
    assert any("watchdog halted the session (repeated-tool-call)" in x for x in lines)
    help_text = " ".join(tripwire("replay", "--help").stdout.split())
    assert "The JSON Lines go to standard output; the operator's log lines" in help_text
    assert "go to standard error, so on a terminal the two interleave" in help_text
