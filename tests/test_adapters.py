"""Transcript readers (SPEC §11.1): the recorded corpus with exact counts, hand-written fixtures
for each format's edge cases, detection, naming and bad input, through the API and the real
``tripwire`` command."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
from conftest import ROOT

from tripwire.errors import InvalidEvent, TruncatedLine, UnknownFormat
from tripwire.interchange.adapters import FORMAT_NAMES, detect, read, transcripts
from tripwire.interchange.events import (
    Call,
    Compaction,
    Result,
    Text,
    TurnEnd,
    TurnStart,
    Usage,
    parse_event,
)

FIXTURES = ROOT / "tests" / "fixtures" / "transcripts"
CLAUDE_SESSION = "5e1f0000-0000-4000-8000-000000000001"
CODEX_SESSION = "019a2d7a-0000-7000-8000-000000000002"


def shape(event: Any) -> tuple:
    """An event as a short comparable tuple."""
    if isinstance(event, Call):
        return ("call", event.name, event.id)
    if isinstance(event, Result):
        return ("result", event.name, event.id, bool(event.error))
    if isinstance(event, Text):
        return ("text", event.text)
    if isinstance(event, Usage):
        return ("usage", event.model, event.input_tokens, event.output_tokens, event.cost_usd)
    if isinstance(event, Compaction):
        return ("compaction", event.mechanical, event.automatic)
    return (type(event).__name__,)


def items(path: Path, fmt: str | None = None) -> list:
    (transcript,) = transcripts([str(path)], fmt or "auto")
    return list(read(transcript))


def events(path: Path, fmt: str | None = None) -> list[tuple]:
    return [(i.session, shape(i.event)) for i in items(path, fmt) if i.event is not None]


def tripwire(*argv: str, cwd: Path | None = None) -> subprocess.CompletedProcess:
    """The real command, in a fresh process, on the tripwire this process imports (installed
    or editable: a PYTHONPATH to src/ would pick up a tree without the built native core)."""
    return subprocess.run([sys.executable, "-m", "tripwire", *argv], capture_output=True,
                          text=True, cwd=cwd, timeout=300, check=False)


# -- the recorded corpus --------------------------------------------------------------------

#: counted once through the readers and checked by an independent look at the raw files
#: (tool_use / tool_result blocks and distinct message ids; ```bash blocks and <returncode>;
#: history actions and their observations; tool_calls, "Error:" outputs and ###STOP###)
CORPUS_COUNTS = {
    "claude-code-samples": dict(format="claude-code", files=8, sessions=8, calls=14, results=14,
                                failures=1, usage=25, turns=19, skipped=66),
    "mini-swe-agent-swebench": dict(format="mini-swe-agent", files=261, sessions=261,
                                    calls=10134, results=10134, failures=745, usage=261,
                                    turns=261, skipped=587),
    "swe-agent-demos": dict(format="swe-agent", files=22, sessions=22, calls=230, results=213,
                            failures=2, usage=6, turns=22, skipped=24),
    "tau-bench-airline": dict(format="tau-bench", files=1, sessions=200, calls=1164,
                              results=1164, failures=73, usage=0, turns=1343, skipped=200),
}


def test_every_reader_that_knows_an_exit_status_fails_a_non_zero_one() -> None:
    """SPEC §12.1's premise: a failed command is a failure, not a payload. mini-swe-agent
    records each command's return code: every non-zero one (and every timeout) is a failed
    result, counted here from the raw files. SWE-agent's .traj (every version among the
    samples: action/observation pairs, tool calls, replay configs) records no exit status at
    all: its only failures are the timeouts it announces. (Codex's exit codes: the rollout
    tests; OTel: an error status.)"""
    import re

    from conftest import need_shared

    corpus = need_shared("corpus")
    returncode = re.compile(r"<returncode>(-?\d+)</returncode>")
    nonzero = timeouts = 0
    for path in sorted((corpus / "mini-swe-agent-swebench").glob("*.traj.json")):
        messages = json.loads(path.read_text())["messages"]
        for message in messages[2:]:
            content = message["content"]
            if message["role"] != "user" or not isinstance(content, str):
                continue
            found = returncode.match(content)
            nonzero += found is not None and found.group(1) != "0"
            timeouts += content.startswith("The last command")
    assert (nonzero, timeouts) == (728, 17)
    failed = Counter()
    for transcript in transcripts([str(corpus / "mini-swe-agent-swebench"),
                                   str(corpus / "swe-agent-demos")]):
        for item in read(transcript):
            if isinstance(item.event, Result) and item.event.error:
                failed[transcript.format] += 1
    assert failed == {"mini-swe-agent": 728 + 17, "swe-agent": 2}
    exit_keys = re.compile(r'"(exit_code|exitCode|returncode|exit_status_code)"')
    for path in (corpus / "swe-agent-demos").rglob("*.traj"):
        document = json.loads(path.read_text())
        steps = document.get("history", []) + document.get("trajectory", [])
        assert not any(exit_keys.search(json.dumps(step)) for step in steps), path


@pytest.mark.parametrize("corpus", sorted(CORPUS_COUNTS))
def test_every_corpus_session_parses_with_exact_counts(corpus: str) -> None:
    from conftest import need_shared

    root = need_shared("corpus", corpus)
    found = transcripts([str(root)])
    counts: Counter = Counter()
    sessions = set()
    for transcript in found:
        counts["format:" + transcript.format] += 1
        for item in read(transcript):
            assert item.error is None, item.error
            if item.event is None:
                counts["skipped"] += 1
                continue
            sessions.add(item.session)
            counts[type(item.event).__name__] += 1
            counts["failures"] += isinstance(item.event, Result) and bool(item.event.error)
    want = CORPUS_COUNTS[corpus]
    assert {k: v for k, v in counts.items() if k.startswith("format:")} == {
        "format:" + want["format"]: want["files"]}
    assert len(found) == want["files"] and len(sessions) == want["sessions"]
    assert (counts["Call"], counts["Result"], counts["failures"], counts["Usage"]) == (
        want["calls"], want["results"], want["failures"], want["usage"])
    assert counts["TurnStart"] == counts["TurnEnd"] == want["turns"]
    assert counts["skipped"] == want["skipped"]


def test_replay_of_the_whole_corpus_through_the_real_command() -> None:
    from conftest import need_shared

    root = need_shared("corpus")
    proc = tripwire("replay", "--quiet", str(root))
    assert proc.returncode == 0, proc.stderr
    summary = json.loads(proc.stdout.splitlines()[-1])
    want = CORPUS_COUNTS.values()
    assert summary["files"] == sum(w["files"] for w in want)
    assert summary["sessions"] == sum(w["sessions"] for w in want)
    assert summary["invalid_lines"] == 0 and summary["truncated_lines"] == 0
    assert summary["skipped_lines"] == sum(w["skipped"] for w in want)


# -- fixtures: each format's edge cases -----------------------------------------------------

def test_claude_code_parallel_calls_usage_once_per_message_sidechain_and_interrupt() -> None:
    main, side = CLAUDE_SESSION, CLAUDE_SESSION + ":agent-abc1234"
    model = "claude-sonnet-4-5"
    assert events(FIXTURES / "claude-code.jsonl") == [
        (main, ("TurnStart",)),
        (main, ("text", "Running both.")),  # the thinking block is private: no event
        (main, ("call", "Bash", "toolu_1")),  # two tool_use lines of one response: parallel
        (main, ("call", "Read", "toolu_2")),
        (main, ("result", "Read", "toolu_2", False)),  # out of order, paired by id
        (main, ("result", "Bash", "toolu_1", True)),  # is_error
        # msg_A's four lines repeat its usage; once, from the last line (57 output tokens)
        (main, ("usage", model, 1104, 57, None)),
        (main, ("text", "One test fails.")),
        (main, ("usage", model, 1104, 12, None)),
        (main, ("TurnEnd",)),  # the next prompt ends the turn (isMeta lines are not prompts)
        (main, ("TurnStart",)),
        (main, ("call", "Edit", "toolu_3")),  # interrupted: it has no result
        (main, ("usage", model, 1104, 30, None)),
        (main, ("TurnEnd",)),  # [Request interrupted by user ...]
        # the compaction boundary (trigger auto) is a compaction; its summary message starts
        # nothing
        (main, ("compaction", False, True)),
        (main, ("TurnStart",)),
        (main, ("call", "Task", "toolu_4")),
        (side, ("TurnStart",)),  # the sub-agent's lines are their own session
        (side, ("call", "Grep", "toolu_5")),
        (side, ("result", "Grep", "toolu_5", False)),
        (side, ("usage", model, 1104, 8, None)),
        (side, ("text", "The bug is in a.py.")),
        (main, ("result", "Task", "toolu_4", False)),
        (main, ("usage", model, 1104, 20, None)),
        (main, ("text", "Fixed.")),
        (main, ("usage", model, 1104, 3, None)),
        (main, ("TurnEnd",)),
        (side, ("usage", model, 1104, 15, None)),
        (side, ("TurnEnd",)),
    ]
    usage = next(i.event for i in items(FIXTURES / "claude-code.jsonl")
                 if isinstance(i.event, Usage))
    assert (usage.cache_read_tokens, usage.cache_write_tokens, usage.provider) == (
        1000, 100, "anthropic")
    # snapshot, progress, system, isMeta, compact summary, summary, queue-operation, thinking
    # (its line carries usage only, given later from msg_A's last line)
    assert sum(1 for i in items(FIXTURES / "claude-code.jsonl")
               if i.event is None and i.error is None) == 8


def test_claude_code_sidechain_replaying_a_parent_response_counts_its_usage_once() -> None:
    """A sub-agent's line reusing the main conversation's ``message.id`` (with a new
    ``requestId``) is that provider response again: its usage is the main conversation's, once
    (SPEC §11.1: once per provider response; ccusage keeps the non-sidechain copy). Its content
    is still the sub-agent's."""
    main = "5e1f0000-0000-4000-8000-00000000000b"
    side = main + ":agent-f00d"
    model = "claude-sonnet-4-5"
    path = FIXTURES / "claude-code-sidechain-reuse.jsonl"
    assert events(path) == [
        (main, ("TurnStart",)),
        (main, ("text", "Asking a sub-agent.")),
        (main, ("call", "Task", "toolu_1")),
        (side, ("TurnStart",)),
        (side, ("text", "Asking a sub-agent.")),  # the replayed msg_P: content, no usage
        (side, ("call", "Grep", "toolu_2")),
        (side, ("result", "Grep", "toolu_2", False)),
        (side, ("usage", model, 1104, 9, None)),  # msg_S, the sub-agent's own response
        (side, ("text", "In a.py.")),
        (main, ("result", "Task", "toolu_1", False)),
        (main, ("usage", model, 1104, 40, None)),  # msg_P, from its last main line: once
        (main, ("text", "Found it.")),
        (main, ("usage", model, 1104, 11, None)),
        (main, ("TurnEnd",)),
        (side, ("usage", model, 1104, 6, None)),  # msg_T, held to the end of the file
        (side, ("TurnEnd",)),
    ]
    usage = [i.event for i in items(path) if isinstance(i.event, Usage)]
    assert len(usage) == 4  # msg_P, msg_S, msg_Q, msg_T: four provider responses
    assert sum(u.output_tokens for u in usage) == 40 + 9 + 11 + 6


def test_codex_rollout_exit_codes_token_counts_and_turns() -> None:
    s = CODEX_SESSION
    assert events(FIXTURES / "codex.jsonl") == [
        (s, ("TurnStart",)),  # user_message; the injected-context user items start nothing
        (s, ("call", "shell", "call_1")),
        (s, ("call", "shell", "call_2")),
        (s, ("result", "shell", "call_2", False)),
        (s, ("result", "shell", "call_1", True)),  # metadata.exit_code 1
        (s, ("usage", "gpt-5-codex", 3040, 70, None)),  # the repeat with equal totals: once
        (s, ("call", "apply_patch", "call_3")),
        (s, ("result", "apply_patch", "call_3", False)),
        (s, ("call", "exec_command", "call_4")),
        (s, ("result", "exec_command", "call_4", False)),  # "Process exited with code 0"
        (s, ("usage", "gpt-5-codex", 3460, 70, None)),
        (s, ("text", "The test passes now.")),  # agent_message, its mirror, is skipped
        (s, ("TurnEnd",)),  # task_complete
        (s, ("TurnStart",)),
        (s, ("call", "shell", "call_5")),  # interrupted: no output
        (s, ("TurnEnd",)),  # turn_aborted
        (s, ("compaction", False, False)),  # compacted: who started it is not recorded
    ]


def _token_count(total: dict | None, last: dict | None = None) -> dict:
    info = None if total is None else {"total_token_usage": total, "model_context_window": 1000}
    if info is not None and last is not None:
        info["last_token_usage"] = last
    return {"timestamp": "2026-05-01T10:00:00.000Z", "type": "event_msg",
            "payload": {"type": "token_count", "info": info}}


def _tokens(inp: int, cached: int, out: int) -> dict:
    return {"input_tokens": inp, "cached_input_tokens": cached, "output_tokens": out,
            "reasoning_output_tokens": 0, "total_tokens": inp + out}


def codex_usage_rollout(path: Path) -> Path:
    """A rollout whose token counts carry only the cumulative totals (and one both), with the
    model changing mid-session, a repeat and a rate-limit-only update."""
    def line(kind: str, payload: dict) -> dict:
        return {"timestamp": "2026-05-01T10:00:00.000Z", "type": kind, "payload": payload}

    lines = [
        line("session_meta", {"id": "019a2d7a-0000-7000-8000-00000000000c"}),
        line("turn_context", {"model": "gpt-5-codex"}),
        line("event_msg", {"type": "user_message", "message": "fix it"}),
        _token_count(_tokens(3040, 2900, 70)),  # the first: the totals are the request
        _token_count(_tokens(3040, 2900, 70)),  # the same totals again: once
        _token_count(None),  # rate limits only
        _token_count(_tokens(6500, 5800, 140)),  # 3460 / 2900 / 70 more
        line("turn_context", {"model": "gpt-5"}),
        _token_count(_tokens(10000, 8000, 200), _tokens(3500, 2200, 60)),  # last wins
        line("event_msg", {"type": "task_complete", "last_agent_message": "done"}),
    ]
    path.write_text("".join(json.dumps(x) + "\n" for x in lines))
    return path


def test_codex_usage_from_cumulative_totals(tmp_path: Path) -> None:
    path = codex_usage_rollout(tmp_path / "rollout.jsonl")
    usage = [i.event for i in items(path) if isinstance(i.event, Usage)]
    assert [(u.model, u.input_tokens, u.cache_read_tokens, u.output_tokens, u.provider)
            for u in usage] == [
        ("gpt-5-codex", 3040, 2900, 70, "openai"),
        ("gpt-5-codex", 3460, 2900, 70, "openai"),
        ("gpt-5", 3500, 2200, 60, "openai"),
    ]


def test_mini_swe_agent_one_bash_block_is_one_call() -> None:
    s = str(FIXTURES / "mini-swe-agent.traj.json")
    assert events(FIXTURES / s) == [
        (s, ("TurnStart",)),
        (s, ("text", "THOUGHT: look around.")),
        (s, ("call", "bash", "call-1")),
        (s, ("result", "bash", "call-1", False)),
        (s, ("text", "THOUGHT: two at once.")),  # two blocks: rejected, nothing ran
        (s, ("text", "THOUGHT: run the tests.")),
        (s, ("call", "bash", "call-2")),
        (s, ("result", "bash", "call-2", True)),  # <returncode>1
        (s, ("text", "THOUGHT: slow one.")),
        (s, ("call", "bash", "call-3")),
        (s, ("result", "bash", "call-3", True)),  # timed out
        (s, ("text", "THOUGHT: done.")),
        (s, ("call", "bash", "call-4")),
        (s, ("result", "bash", "call-4", False)),  # the submitted diff
        (s, ("usage", "anthropic/claude-sonnet-4-5", None, None, 0.25)),  # the run's total
        (s, ("TurnEnd",)),
    ]
    calls = [i.event for i in items(FIXTURES / s) if isinstance(i.event, Call)]
    assert calls[1].args == '{"command":"cd /testbed && python -m pytest -x"}'  # JSON text


def test_swe_agent_history_actions_function_calls_and_demos() -> None:
    s = str(FIXTURES / "swe-agent.traj")
    assert events(FIXTURES / s) == [
        (s, ("TurnStart",)),  # the demonstration before it is skipped
        (s, ("text", "Find it.")),
        (s, ("call", "bash", "call-1")),
        (s, ("result", "bash", "call-1", False)),
        (s, ("text", "Run it.")),
        (s, ("call", "bash", "call-2")),
        (s, ("result", "bash", "call-2", True)),  # EXECUTION TIMED OUT
        (s, ("text", "Open it.")),
        (s, ("call", "open", "call_X")),  # function calling names the tool
        (s, ("result", "open", "call_X", False)),
        (s, ("text", "Submit.")),
        (s, ("call", "bash", "call-4")),  # the last action has no observation
        (s, ("usage", None, None, None, 0.5)),  # cost only: token totals span every call
        (s, ("TurnEnd",)),
    ]


def test_openai_chat_parallel_calls_and_a_call_without_result() -> None:
    s = str(FIXTURES / "openai-chat.json")
    assert events(FIXTURES / s) == [
        (s, ("TurnStart",)),
        (s, ("call", "get_weather", "call_1")),
        (s, ("call", "get_weather", "call_2")),
        (s, ("result", "get_weather", "call_2", False)),
        (s, ("result", "get_weather", "call_1", False)),
        (s, ("text", "Paris 12C, Rome 18C.")),
        (s, ("TurnEnd",)),
        (s, ("TurnStart",)),
        (s, ("text", "Checking.")),
        (s, ("call", "get_weather", "call_3")),  # truncated JSON args are kept as given
        (s, ("TurnEnd",)),
    ]
    last = [i.event for i in items(FIXTURES / s) if isinstance(i.event, Call)][-1]
    assert last.args == '{"city":"Oslo"'


def test_openai_responses_items() -> None:
    s = str(FIXTURES / "openai-responses.json")
    assert events(FIXTURES / s) == [
        (s, ("TurnStart",)),
        (s, ("call", "shell", "call_1")),
        (s, ("call", "shell", "call_2")),
        (s, ("result", "shell", "call_1", False)),
        (s, ("result", "shell", "call_2", True)),  # Exit code: 1
        (s, ("text", "One file, and false fails.")),
        (s, ("usage", "gpt-5", 900, 40, None)),
        (s, ("TurnEnd",)),
    ]


def test_anthropic_messages_parallel_tool_use_and_usage() -> None:
    s = str(FIXTURES / "anthropic.json")
    assert events(FIXTURES / s) == [
        (s, ("TurnStart",)),
        (s, ("text", "Running tests.")),
        (s, ("call", "run", "toolu_1")),
        (s, ("call", "run", "toolu_2")),
        (s, ("usage", "claude-sonnet-4-5", 2310, 80, None)),  # 10 + 2000 read + 300 written
        (s, ("result", "run", "toolu_1", True)),
        (s, ("result", "run", "toolu_2", False)),  # is_error absent: success
        (s, ("text", "One test fails.")),
        (s, ("TurnEnd",)),
    ]


def test_tau_bench_results_are_one_session_each() -> None:
    ok, failed = (f"{FIXTURES / 'tau-bench.json'}#task-0-trial-{n}" for n in (0, 1))
    assert events(FIXTURES / "tau-bench.json") == [
        (ok, ("TurnStart",)),
        (ok, ("call", "cancel_reservation", "c1")),
        (ok, ("result", "cancel_reservation", "c1", False)),
        (ok, ("text", "Done.")),
        (ok, ("TurnEnd",)),  # ###STOP### ends the conversation, starts no turn
        (failed, ("TurnStart",)),
        (failed, ("call", "cancel_reservation", "c1")),
        (failed, ("result", "cancel_reservation", "c1", True)),  # "Error: ..."
        (failed, ("text", "I could not find it.")),
        (failed, ("TurnEnd",)),
    ]


def test_otel_spans_in_time_order_per_conversation(tmp_path: Path) -> None:
    trace = f"{FIXTURES / 'otel.jsonl'}#trace-4bf92f3577b34da6a3ce929d0e0e4736"
    expected = [
        ("conv-42", ("TurnStart",)),  # invoke_agent
        ("conv-42", ("usage", "gpt-4o-2024-08-06", 1200, 40, None)),  # the response model
        ("conv-42", ("call", "read_file", "call_2")),  # two tool spans starting together
        ("conv-42", ("call", "run_tests", "call_1")),
        ("conv-42", ("result", "run_tests", "call_1", True)),  # error status: a failure
        ("conv-42", ("result", "read_file", "call_2", False)),
        ("conv-42", ("text", "Tests fail in a.py.")),  # gen_ai.output.messages text parts
        ("conv-42", ("usage", "gpt-4o", 1500, 20, None)),
        ("conv-42", ("TurnEnd",)),
        (trace, ("call", "search", "c9")),  # no conversation id: the trace is the session
        (trace, ("result", "search", "c9", False)),
    ]
    assert events(FIXTURES / "otel.jsonl") == expected
    # one pretty-printed export document is read whole
    pretty = tmp_path / "export.json"
    batch = json.loads((FIXTURES / "otel.jsonl").read_text().splitlines()[0])
    pretty.write_text(json.dumps(batch, indent=2))
    assert detect(pretty) == "otel"
    assert [e for _, e in events(pretty)] == [e for _, e in expected[:9]]


@pytest.mark.parametrize("name, fmt", [
    ("claude-code.jsonl", "claude-code"), ("codex.jsonl", "codex"),
    ("mini-swe-agent.traj.json", "mini-swe-agent"), ("swe-agent.traj", "swe-agent"),
    ("openai-chat.json", "openai-chat"), ("openai-responses.json", "openai-responses"),
    ("anthropic.json", "anthropic"), ("tau-bench.json", "tau-bench"), ("otel.jsonl", "otel"),
])
def test_detection_by_content_and_forcing_the_format(name: str, fmt: str,
                                                     tmp_path: Path) -> None:
    copy = tmp_path / "renamed.data"  # the suffix plays no part in detection
    shutil.copy(FIXTURES / name, copy)
    assert detect(copy) == fmt
    assert events(copy, fmt) == events(copy)


def test_every_format_name_is_offered() -> None:
    assert set(FORMAT_NAMES) == {"agentdojo", "anthropic", "atif", "claude-code",
                                 "claude-code-headless", "cline-roo",
                                 "codex", "codex-exec", "gemini-cli", "goose", "opencode",
                                 "openhands",
                                 "interchange", "mini-swe-agent", "openai-chat",
                                 "openai-responses", "otel", "swe-agent", "tau-bench"}


# -- bad input -------------------------------------------------------------------------------

def test_truncated_last_line_is_reported_and_the_rest_kept(tmp_path: Path) -> None:
    text = (FIXTURES / "claude-code.jsonl").read_text()
    path = tmp_path / "live.jsonl"
    path.write_text(text + '{"type":"assistant","message":{"id":"msg_Z","con')
    got = items(path)
    assert isinstance(got[-1].error, TruncatedLine) or any(
        isinstance(i.error, TruncatedLine) for i in got)
    truncated = [i for i in got if i.error is not None]
    assert len(truncated) == 1 and isinstance(truncated[0].error, TruncatedLine)
    assert truncated[0].line == text.count("\n") + 1
    assert [e for e in events(path)] == events(FIXTURES / "claude-code.jsonl")
    proc = tripwire("replay", "--quiet", str(path))  # without --skip-invalid: still exit 0
    assert proc.returncode == 0
    assert proc.stderr == (f"tripwire: {path}:{text.count(chr(10)) + 1}: truncated last line "
                           "(no newline, not complete JSON): ignored, the lines before it are "
                           "kept\n")
    assert json.loads(proc.stdout)["truncated_lines"] == 1


def test_truncated_last_line_of_an_interchange_file(tmp_path: Path) -> None:
    path = tmp_path / "s.jsonl"
    path.write_text('{"type": "turn_start"}\n{"type": "call", "name": "x", "ar')
    proc = tripwire("replay", str(path))
    assert proc.returncode == 0 and "truncated last line" in proc.stderr
    summary = json.loads(proc.stdout.splitlines()[-1])
    assert (summary["events"], summary["truncated_lines"], summary["invalid_lines"]) == (1, 1, 0)


def test_unknown_format_is_one_line_naming_the_file_and_what_was_expected(
        tmp_path: Path) -> None:
    path = tmp_path / "x.json"
    path.write_text('{"hello": "world"}\n')
    proc = tripwire("replay", str(path))
    assert proc.returncode == 2 and proc.stdout == ""
    assert proc.stderr == (f"tripwire: {path}: not a transcript of a known format (expected "
                           f"one of: {', '.join(FORMAT_NAMES)})\n")


def test_mixed_format_lines_are_invalid(tmp_path: Path) -> None:
    path = tmp_path / "mixed.jsonl"
    lines = (FIXTURES / "claude-code.jsonl").read_text().splitlines()[:3]
    codex_line = (FIXTURES / "codex.jsonl").read_text().splitlines()[0]
    path.write_text("\n".join([*lines, codex_line]) + "\n")
    proc = tripwire("replay", str(path))
    assert proc.returncode == 2
    assert proc.stderr == (f"tripwire: {path}:4: not a Claude Code transcript line (expected an "
                           "object with a 'type' such as user or assistant, and a sessionId)\n")


def test_a_file_no_line_of_which_yielded_an_event_is_an_error_even_when_skipping(
        tmp_path: Path) -> None:
    path = tmp_path / "garbage.jsonl"
    path.write_text("not json\nnor this\n")
    proc = tripwire("replay", "--skip-invalid", str(path))
    assert proc.returncode == 2
    assert proc.stderr.splitlines() == [
        f"tripwire: {path}:1: skipped: not JSON (Expecting value at column 1)",
        f"tripwire: {path}:2: skipped: not JSON (Expecting value at column 1)",
        f"tripwire: {path}: no line yielded an event (read as interchange; expected one of: "
        f"{', '.join(FORMAT_NAMES)})",
    ]
    metadata_only = tmp_path / "snapshots.jsonl"
    metadata_only.write_text((FIXTURES / "claude-code.jsonl").read_text().splitlines()[0] + "\n")
    proc = tripwire("replay", str(metadata_only))
    assert proc.returncode == 2 and "no line yielded an event (read as claude-code" in proc.stderr


def test_forcing_the_wrong_format_is_a_clear_error(tmp_path: Path) -> None:
    proc = tripwire("replay", "--format", "mini-swe-agent", str(FIXTURES / "anthropic.json"))
    assert proc.returncode == 2
    assert proc.stderr == (f"tripwire: {FIXTURES / 'anthropic.json'}: not a mini-swe-agent "
                           "trajectory (expected an object with 'messages' and "
                           "trajectory_format mini-swe-agent-1)\n")
    with pytest.raises(UnknownFormat):
        transcripts([str(FIXTURES)], "teleport")


def test_an_invalid_message_in_a_document_names_its_position(tmp_path: Path) -> None:
    path = tmp_path / "chat.json"
    path.write_text(json.dumps([{"role": "user", "content": "hi"},
                                {"role": "assistant", "tool_calls": [{"function": {}}]}]))
    (bad,) = [i for i in items(path) if i.error is not None]
    assert isinstance(bad.error, InvalidEvent) and bad.line == 2
    assert str(bad.error) == (f"{path}:2: a tool call needs a function with a string 'name'")


# -- naming, directories, convert -------------------------------------------------------------

def test_same_file_name_in_two_folders_are_two_sessions_in_the_store(tmp_path: Path) -> None:
    """Regression: the bare stem made dup/a/s.jsonl and dup/b/s.jsonl one store session, so
    b/s.jsonl was refused at once by a/s.jsonl's halt."""
    loop = json.dumps({"type": "call", "name": "x", "args": "{}"})
    for sub in ("a", "b"):
        (tmp_path / "dup" / sub).mkdir(parents=True)
        (tmp_path / "dup" / sub / "s.jsonl").write_text(
            "\n".join(['{"type": "turn_start"}', *[loop] * 5]) + "\n")
    db = tmp_path / "g.sqlite"
    proc = tripwire("replay", "--mode", "enforce", "--store", str(db), "dup", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    records = [json.loads(x) for x in proc.stdout.splitlines()]
    assert [(r["file"], r["kind"], r["event"]) for r in records[:-1]] == [
        (str(Path("dup/a/s.jsonl")), "alert", 5), (str(Path("dup/a/s.jsonl")), "decision", 5),
        (str(Path("dup/b/s.jsonl")), "alert", 5), (str(Path("dup/b/s.jsonl")), "decision", 5)]
    assert records[-1]["sessions"] == 2
    status = tripwire("status", str(db))
    lines = [json.loads(line) for line in status.stdout.splitlines()]
    # each a session and its implicit task (replay --store writes the task's counters)
    assert [(x["kind"], x["session"]) for x in lines] == [
        ("session", "a/s.jsonl"), ("task", "a/s.jsonl"), ("session", "b/s.jsonl"),
        ("task", "b/s.jsonl")]


def test_a_directory_holds_every_recognized_transcript(tmp_path: Path) -> None:
    shutil.copytree(FIXTURES, tmp_path / "mix")
    (tmp_path / "mix" / "preds.jsonl").write_text('{"instance_id": "x", "model_patch": ""}\n')
    (tmp_path / "mix" / "notes.txt").write_text("not a transcript")
    found = transcripts([str(tmp_path / "mix")])
    assert [(t.name, t.format) for t in found] == [
        ("anthropic.json", "anthropic"),
        ("claude-code-sidechain-reuse.jsonl", "claude-code"), ("claude-code.jsonl", "claude-code"),
        ("codex.jsonl", "codex"), ("mini-swe-agent.traj.json", "mini-swe-agent"),
        ("openai-chat.json", "openai-chat"), ("openai-responses.json", "openai-responses"),
        ("otel.jsonl", "otel"), ("swe-agent.traj", "swe-agent"), ("tau-bench.json", "tau-bench"),
    ]
    assert [t.name for t in transcripts([str(tmp_path / "mix")], "codex")] == ["codex.jsonl"]


def test_a_directory_walk_lists_what_a_sorted_recursive_glob_lists(tmp_path: Path) -> None:
    """The walk reads directory entries alone (no stat per file): its files, their order and
    names are those of ``sorted(rglob("*"))``'s files with a transcript suffix, links and all;
    listed undetected (a parallel corpus run's parent), every one of them is listed."""
    root = tmp_path / "tree"
    for rel in ("a-b/x.jsonl", "a/b/y.jsonl", "a/z.json", "a.jsonl", ".hidden/h.traj",
                "B.jsonl", "c/notes.txt", "c/d.traj.json", "c/e.jsonl.bak", "dir.jsonl/w.jsonl"):
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text('{"type": "turn_start"}\n')
    (root / "link.jsonl").symlink_to(root / "a.jsonl")  # a link to a file is a file
    (root / "linked").symlink_to(root / "a", target_is_directory=True)  # not followed
    (root / "broken.jsonl").symlink_to(root / "nowhere.jsonl")  # not a file
    names = [".hidden/h.traj", "B.jsonl", "a/b/y.jsonl", "a/z.json", "a-b/x.jsonl", "a.jsonl",
             "c/d.traj.json", "dir.jsonl/w.jsonl", "link.jsonl"]  # sorted by path parts
    globbed = sorted(p for p in root.rglob("*") if p.is_file()
                     and p.name.endswith((".jsonl", ".json", ".traj")))
    assert [p.relative_to(root).as_posix() for p in globbed] == names
    for detecting in (True, False):
        listed = transcripts([str(root)], detect=detecting)
        assert [(t.path, t.name) for t in listed] == [(root / n, n) for n in names]
        assert {t.format for t in listed} == ({"interchange"} if detecting else {None})


def test_convert_writes_interchange_that_replay_reads_back(tmp_path: Path) -> None:
    proc = tripwire("convert", str(FIXTURES / "codex.jsonl"), "--to", "interchange")
    assert proc.returncode == 0 and proc.stderr == ""
    records = [json.loads(line) for line in proc.stdout.splitlines()]
    assert records[0] == {"type": "turn_start", "session": CODEX_SESSION}
    assert records[1] == {"type": "call", "name": "shell", "id": "call_1", "session": CODEX_SESSION,
                          "args": '{"command": ["bash", "-lc", "pytest -x"], "workdir": "/w"}'}
    assert records[5] == {"type": "usage", "model": "gpt-5-codex", "input_tokens": 3040,
                          "output_tokens": 70, "cache_read_tokens": 2900, "provider": "openai",
                          "session": CODEX_SESSION}
    assert [shape(parse_event(r)) for r in records] == [
        e for _, e in events(FIXTURES / "codex.jsonl")]
    converted = tmp_path / "codex-interchange.jsonl"
    converted.write_text(proc.stdout)
    direct = tripwire("replay", str(FIXTURES / "codex.jsonl"), "--quiet")
    again = tripwire("replay", str(converted), "--quiet")
    assert json.loads(direct.stdout)["events"] == json.loads(again.stdout)["events"] == 17


def test_replay_records_of_a_transcript_name_their_session(tmp_path: Path) -> None:
    traj: list[dict] = [{"role": "user", "content": "book it"}]
    for n in range(3):
        traj.append({"role": "assistant", "content": None, "tool_calls": [{
            "id": f"c{n}", "type": "function",
            "function": {"name": "book", "arguments": json.dumps({"try": n})}}]})
        traj.append({"role": "tool", "tool_call_id": f"c{n}", "content": "Error: sold out"})
    path = tmp_path / "results.json"
    path.write_text(json.dumps([{"task_id": 7, "trial": 0, "traj": traj[:3]},
                                {"task_id": 7, "trial": 1, "traj": traj}]))
    proc = tripwire("replay", str(path), "--signals", "tool-failure-streak")
    assert proc.returncode == 0, proc.stderr
    alerts = [json.loads(x) for x in proc.stdout.splitlines() if '"kind": "alert"' in x]
    # the third failure in a row, at event 6 of the second result's session
    assert [(a["session"], a["event"], a["signal"]) for a in alerts] == [
        (f"{path}#task-7-trial-1", 6, "tool-failure-streak")]


def test_turn_ends_and_starts_are_well_formed_in_every_fixture() -> None:
    for path in sorted(FIXTURES.iterdir()):
        depth: Counter = Counter()
        for session, event in events(path):
            if event == ("TurnStart",):
                assert depth[session] == 0, path
                depth[session] += 1
            elif event == ("TurnEnd",):
                assert depth[session] == 1, path
                depth[session] -= 1
        assert not any(depth.values()), path
    assert TurnStart() != TurnEnd()


def test_json_lines_transcripts_stream_without_reading_the_file_whole(tmp_path: Path) -> None:
    """A reader yields a line's events before the rest of the file exists: a named pipe is
    fed the first lines and held open while they are read."""
    import threading

    fifo = tmp_path / "live.jsonl"
    os.mkfifo(fifo)
    lines = (FIXTURES / "claude-code.jsonl").read_text().splitlines(keepends=True)
    release = threading.Event()

    def writer() -> None:
        with open(fifo, "w") as pipe:
            pipe.writelines(lines[:5])  # snapshot, prompt, thinking, text, first tool_use
            pipe.flush()
            release.wait(30)
            pipe.writelines(lines[5:])

    thread = threading.Thread(target=writer)
    thread.start()
    try:
        from tripwire.interchange.adapters import Transcript

        stream = read(Transcript(fifo, "claude-code", "live"))
        first = [next(stream) for _ in range(5)]
        assert [shape(i.event) for i in first if i.event is not None] == [
            ("TurnStart",), ("text", "Running both."), ("call", "Bash", "toolu_1")]
        assert thread.is_alive()  # the writer still holds the rest
        release.set()
        rest = list(stream)
    finally:
        release.set()
        thread.join(30)
    got = [(i.session, shape(i.event)) for i in first + rest if i.event is not None]
    assert got == events(FIXTURES / "claude-code.jsonl")


def test_session_names_one_session_only() -> None:
    proc = tripwire("replay", "--session", "mine", str(FIXTURES / "tau-bench.json"))
    assert proc.returncode == 2
    assert proc.stderr == (f"tripwire: {FIXTURES / 'tau-bench.json'}: --session names one "
                           "session, but this transcript holds several\n")
    proc = tripwire("replay", "--session", "mine", "--quiet", str(FIXTURES / "codex.jsonl"))
    assert proc.returncode == 0 and json.loads(proc.stdout)["sessions"] == 1
