"""Issue 29's reading bugs, each with the test that failed before its fix:

- a transcript cut mid-line counted a phantom second session (the cut line was given the
  file's fallback name, not its conversation's);
- auto-detection rejected Claude Code lines that ``--format claude-code`` reads;
- ``convert``'s output replayed as one merged session (the per-line ``session`` was ignored),
  and its alerts did not say their session;
- AgentDojo message logs were read as OpenAI chat: every assistant message invalid;
- ``--skip-invalid`` turned such half-parsed input into alerts (tool answers observed without
  the calls they answer).
"""

from __future__ import annotations

import io
import json
from pathlib import Path
from typing import Any

import pytest
from conftest import ROOT

from tripwire.cli.main import main
from tripwire.errors import InvalidEvent, TruncatedLine
from tripwire.interchange.adapters import detect, format_module, read, transcripts
from tripwire.interchange.events import Call, Result, Text, TurnEnd, TurnStart

FIXTURES = ROOT / "tests" / "fixtures" / "transcripts"


def replay(*argv: str, implementation: str = "python") -> tuple[int, list[dict], str]:
    out, err = io.StringIO(), io.StringIO()
    code = main(["replay", *argv, "--implementation", implementation], out=out, err=err)
    return code, [json.loads(line) for line in out.getvalue().splitlines()], err.getvalue()


def items(path: Path, fmt: str = "auto") -> list:
    (transcript,) = transcripts([str(path)], fmt)
    return list(read(transcript))


# -- a cut last line is not a session of its own ----------------------------------------------

CUT = {
    "claude-code.jsonl": '{"type":"assistant","message":{"id":"msg_Z","con',
    "codex.jsonl": '{"timestamp":"2026-05-01T10:00:09.000Z","type":"event_msg","pay',
    "otel.jsonl": '{"resourceSpans": [{"scopeSpans": [{"spans": [{"traceId": "ab',
}


@pytest.mark.parametrize("fixture", sorted(CUT))
def test_a_transcript_cut_mid_line_has_the_sessions_of_the_whole_one(
        fixture: str, tmp_path: Path, implementation: str) -> None:
    whole, cut = tmp_path / "whole" / fixture, tmp_path / "cut" / fixture
    whole.parent.mkdir()
    cut.parent.mkdir()
    whole.write_text((FIXTURES / fixture).read_text())
    cut.write_text(whole.read_text() + CUT[fixture])
    code, records, err = replay("--quiet", str(whole), implementation=implementation)
    assert code == 0
    sessions = records[-1]["sessions"]
    code, records, err = replay("--quiet", str(cut), implementation=implementation)
    assert code == 0 and "truncated last line" in err
    assert (records[-1]["sessions"], records[-1]["truncated_lines"]) == (sessions, 1)
    # the cut line belongs to a conversation of the file (the one of the line before it)
    (bad,) = [i for i in items(cut) if i.error is not None]
    assert isinstance(bad.error, TruncatedLine)
    sessions_of_whole = {i.session.replace(str(whole), str(cut)) for i in items(whole)}
    assert bad.session in sessions_of_whole


def test_the_truncated_record_names_the_conversation(tmp_path: Path) -> None:
    cut = tmp_path / "cut.jsonl"
    cut.write_text((FIXTURES / "claude-code.jsonl").read_text() + CUT["claude-code.jsonl"])
    _, records, _ = replay(str(cut))
    assert records[-1]["sessions"] == 2
    assert {r.get("session") for r in records[:-1]} <= {
        "5e1f0000-0000-4000-8000-000000000001",
        "5e1f0000-0000-4000-8000-000000000001:agent-abc1234"}


# -- detection = the reader ---------------------------------------------------------------------

def _claude_line(kind: str, **fields: Any) -> str:
    return json.dumps({"type": kind, "sessionId": "5e1f0000-0000-4000-8000-00000000000d",
                       "uuid": f"u-{kind}", **fields})


def test_claude_code_lines_of_types_newer_than_the_reader_are_detected(tmp_path: Path) -> None:
    """Newer Claude Code versions write line types of their own at the top of a transcript;
    the reader reads any line with the transcript envelope, and detection must too: it
    refused a file whose leading lines were all of such types."""
    lines = [_claude_line(kind, value="x") for kind in (
        "custom-title", "agent-name", "permission-mode", "last-prompt", "tag", "pr-link",
        "mode", "worktree-state")]
    lines.append(_claude_line("user", message={"role": "user", "content": "fix the bug"}))
    path = tmp_path / "newer.jsonl"
    path.write_text("\n".join(lines) + "\n")
    assert detect(path) == "claude-code"
    forced = items(path, "claude-code")
    assert [i for i in forced if i.error] == []
    assert [(i.session, i.event) for i in items(path)] == [(i.session, i.event) for i in forced]
    code, records, _ = replay("--quiet", str(path))
    assert code == 0 and records[-1]["skipped_lines"] == 8 and records[-1]["events"] == 2


def _every_claude_code_line() -> list[Any]:
    from conftest import SHARED

    paths = [FIXTURES / "claude-code.jsonl", FIXTURES / "claude-code-sidechain-reuse.jsonl"]
    corpus = SHARED / "corpus" / "claude-code-samples"
    paths += sorted(corpus.rglob("*.jsonl")) if corpus.exists() else []
    return [json.loads(line) for path in paths for line in path.read_text().splitlines()]


def test_claude_code_detection_accepts_exactly_the_lines_its_reader_reads(
        tmp_path: Path) -> None:
    module = format_module("claude-code")
    values: list[Any] = _every_claude_code_line() + [
        {"type": "user", "message": {"role": "user", "content": "no envelope"}},
        {"type": "x-new-kind", "sessionId": "s"}, {"type": 3, "sessionId": "s"},
        {"sessionId": "s"}, [1, 2], "text", {"type": "call", "name": "ls"}]
    for n, value in enumerate(values):
        path = tmp_path / f"{n}.jsonl"
        path.write_text(json.dumps(value) + "\n")
        (item, *_) = list(module.read(path, "s")) or [None]
        read_it = item is not None and item.error is None
        assert module.sniff(value) == read_it, value


# -- convert's output replays as its sessions ---------------------------------------------------

def _tau_results(path: Path) -> Path:
    traj: list[dict] = [{"role": "user", "content": "book it"}]
    for n in range(3):
        traj.append({"role": "assistant", "content": None, "tool_calls": [{
            "id": f"c{n}", "type": "function",
            "function": {"name": "book", "arguments": json.dumps({"try": n})}}]})
        traj.append({"role": "tool", "tool_call_id": f"c{n}", "content": "Error: sold out"})
    path.write_text(json.dumps([{"task_id": 7, "trial": 0, "traj": traj[:3]},
                                {"task_id": 7, "trial": 1, "traj": traj},
                                {"task_id": 8, "trial": 0, "traj": traj}]))
    return path


def test_convert_then_replay_keeps_the_sessions_and_alerts_say_theirs(
        tmp_path: Path, implementation: str) -> None:
    source = _tau_results(tmp_path / "results.json")
    code, direct, _ = replay(str(source), "--signals", "tool-failure-streak",
                             implementation=implementation)
    assert code == 0 and direct[-1]["sessions"] == 3
    out = io.StringIO()
    assert main(["convert", str(source)], out=out, err=io.StringIO()) == 0
    converted = tmp_path / "converted.jsonl"
    converted.write_text(out.getvalue())
    code, again, _ = replay(str(converted), "--signals", "tool-failure-streak",
                            implementation=implementation)
    assert code == 0
    assert again[-1]["sessions"] == 3 and again[-1]["events"] == direct[-1]["events"]
    alerts = [(r["session"], r["event"], r["signal"]) for r in again if r["kind"] == "alert"]
    assert alerts == [(r["session"], r["event"], r["signal"]) for r in direct
                      if r["kind"] == "alert"]
    assert alerts == [(f"{source}#task-7-trial-1", 6, "tool-failure-streak"),
                      (f"{source}#task-8-trial-0", 6, "tool-failure-streak")]


def test_an_interchange_file_without_sessions_is_still_one_unlabelled_session(
        tmp_path: Path) -> None:
    path = tmp_path / "s.jsonl"
    lines = [{"type": "turn_start"}] + [{"type": "call", "name": "x", "args": "{}"}] * 5
    path.write_text("".join(json.dumps(x) + "\n" for x in lines))
    _, records, _ = replay(str(path))
    alert = next(r for r in records if r["kind"] == "alert")
    assert "session" not in alert and records[-1]["sessions"] == 1


def test_a_line_session_must_be_a_non_empty_string(tmp_path: Path) -> None:
    path = tmp_path / "s.jsonl"
    path.write_text('{"type": "turn_start", "session": "a"}\n'
                    '{"type": "turn_end", "session": 3}\n'
                    '{"type": "turn_end", "session": "b"}\n')
    got = items(path)
    assert [(i.session, type(i.event).__name__, i.error is not None) for i in got] == [
        ("a", "TurnStart", False), ("a", "NoneType", True), ("b", "TurnEnd", False)]
    assert str(got[1].error) == f"{path}:2: field 'session' must be a non-empty string"


# -- AgentDojo logs -------------------------------------------------------------------------------

def agentdojo_log(path: Path, *, blocks: bool, wrapped: bool = True) -> Path:
    """An AgentDojo run log as its TraceLogger writes it (``agentdojo/logging.py``): eight
    identical reads of one file, a failing call, an unknown tool, then the answer."""
    def content(text: str) -> Any:
        return [{"type": "text", "content": text}] if blocks else text

    messages: list[dict] = [{"role": "system", "content": content("You are a helpful assistant.")},
                            {"role": "user", "content": content("Pay the bill in bill.txt")}]
    calls = [("read_file", {"file_path": "bill.txt"}, "bill: 98.70 USD", None)] * 8 + [
        ("send_money", {"amount": 98.7}, "", "ValueError: unknown recipient"),
        ("pay_bill", {}, "", "Invalid tool pay_bill provided.")]
    for n, (name, args, output, error) in enumerate(calls):
        call = {"function": name, "args": args, "id": f"toolu_{n}", "placeholder_args": None}
        thinking = [{"type": "thinking", "content": "private", "id": None}] if blocks else None
        messages.append({"role": "assistant", "content": thinking, "tool_calls": [call]})
        messages.append({"role": "tool", "content": content(output), "tool_call_id": f"toolu_{n}",
                         "tool_call": call, "error": error})
    messages.append({"role": "assistant", "content": content("Done."), "tool_calls": None})
    document: Any = messages if not wrapped else {
        "suite_name": "banking", "pipeline_name": "gpt-4o-2024-05-13",
        "user_task_id": "user_task_0", "injection_task_id": None, "attack_type": None,
        "injections": {}, "messages": messages, "error": None, "utility": False,
        "security": True, "duration": 3.2}
    path.write_text(json.dumps(document, indent=4))
    return path


@pytest.mark.parametrize("blocks", [False, True])
@pytest.mark.parametrize("wrapped", [True, False])
def test_agentdojo_logs_are_read(tmp_path: Path, blocks: bool, wrapped: bool) -> None:
    path = agentdojo_log(tmp_path / "none.json", blocks=blocks, wrapped=wrapped)
    assert detect(path) == "agentdojo"
    got = items(path)
    assert [i.error for i in got if i.error] == []
    events = [i.event for i in got if i.event is not None]
    assert {i.session for i in got} == {str(path)}
    assert isinstance(events[0], TurnStart) and isinstance(events[-1], TurnEnd)
    calls = [e for e in events if isinstance(e, Call)]
    results = [e for e in events if isinstance(e, Result)]
    assert [(c.name, c.id) for c in calls] == [
        ("read_file", f"toolu_{n}") for n in range(8)] + [
        ("send_money", "toolu_8"), ("pay_bill", "toolu_9")]
    assert calls[0].args == {"file_path": "bill.txt"}
    assert [(r.name, r.id, r.error, r.unknown_tool) for r in results[-3:]] == [
        ("read_file", "toolu_7", None, False),
        ("send_money", "toolu_8", "ValueError: unknown recipient", False),
        ("pay_bill", "toolu_9", "Invalid tool pay_bill provided.", True)]
    assert results[0].payload == "bill: 98.70 USD"
    # thinking blocks are private: the only words are the answer
    assert [e.text for e in events if isinstance(e, Text)] == ["Done."]


def test_an_agentdojo_log_replays_with_its_loop_found(tmp_path: Path,
                                                      implementation: str) -> None:
    path = agentdojo_log(tmp_path / "none.json", blocks=False)
    code, records, err = replay(str(path), implementation=implementation)
    assert code == 0 and err == ""
    assert [(r["event"], r["signal"]) for r in records if r["kind"] == "alert"][0] == (
        9, "repeated-tool-call")
    assert (records[-1]["invalid_lines"], records[-1]["events"]) == (0, 23)


# -- --skip-invalid never turns half-parsed input into alerts -----------------------------------

def test_skipping_invalid_messages_skips_the_answers_to_their_calls(
        tmp_path: Path, implementation: str) -> None:
    """An AgentDojo log forced through the OpenAI chat reader: every assistant message is
    invalid there; the tool answers used to be observed on their own (no-new-state warned
    about the 'unnamed tool' that answered the same payload six times)."""
    path = agentdojo_log(tmp_path / "none.json", blocks=False)
    code, records, err = replay("--format", "openai-chat", "--skip-invalid", str(path),
                                implementation=implementation)
    assert code == 0
    assert [r for r in records if r["kind"] == "alert"] == []
    summary = records[-1]
    assert (summary["invalid_lines"], summary["events"]) == (20, 3)  # turn start, "Done.", end
    lines = err.splitlines()
    assert lines[0] == (f"tripwire: {path}:3: skipped: a tool call needs a function with a "
                        "string 'name'")
    assert lines[1] == (f"tripwire: {path}:4: skipped: the result of call 'toolu_0', which was "
                        "not read (a line before it could not be read)")


def test_answers_to_calls_on_unreadable_interchange_lines_are_not_observed(
        tmp_path: Path, implementation: str) -> None:
    path = tmp_path / "s.jsonl"
    lines = ['{"type": "turn_start"}']
    for n in range(8):
        lines.append('{"type": "call", "name": "read", "args": {"p": 1}, "id": "c%d", ' % n)
        lines.append(json.dumps({"type": "result", "id": f"c{n}", "payload": "same"}))
    path.write_text("\n".join(lines) + "\n")
    code, records, _ = replay("--skip-invalid", str(path), implementation=implementation)
    assert code == 0 and [r for r in records if r["kind"] == "alert"] == []
    assert (records[-1]["invalid_lines"], records[-1]["events"]) == (16, 1)


def test_answers_to_calls_that_were_read_are_still_observed_after_a_bad_line(
        tmp_path: Path) -> None:
    path = tmp_path / "s.jsonl"
    path.write_text('{"type": "call", "name": "a", "id": "c1"}\n'
                    'not json\n'
                    '{"type": "result", "id": "c1", "payload": "ok"}\n'
                    '{"type": "result", "id": "c2", "payload": "orphan"}\n'
                    '{"type": "result", "name": "b", "payload": "no id: kept"}\n')
    got = items(path)
    assert [(type(i.event).__name__, i.error is not None) for i in got] == [
        ("Call", False), ("NoneType", True), ("Result", False), ("NoneType", True),
        ("Result", False)]
    assert isinstance(got[3].error, InvalidEvent) and got[3].line == 4


def test_a_tau_bench_file_with_a_bad_result_is_refused_before_any_is_read(
        tmp_path: Path) -> None:
    path = tmp_path / "results.json"
    path.write_text(json.dumps([{"task_id": 1, "traj": [{"role": "user", "content": "hi"}]},
                                {"task_id": 2, "traj": "not a list"}]))
    (transcript,) = transcripts([str(path)])
    stream = read(transcript)
    with pytest.raises(InvalidEvent, match="needs a 'traj' message list"):
        next(stream)
