"""Gemini CLI chat recordings (SPEC §11.5): every sample of the single-JSON form in
``../shared/format-samples/gemini-cli`` with exact counts; the JSON Lines log (no real sample
exists) generated as ``chatRecordingService.ts`` writes it: rewritten records (the last one
wins), ``$set`` checkpoints and ``$rewindTo``."""

from __future__ import annotations

import io
import json
from pathlib import Path
from typing import Any

import pytest
from conftest import need_shared
from transcript_counts import SKIPPED, counts, events_of

from tripwire.cli.main import main
from tripwire.errors import InvalidEvent
from tripwire.interchange.adapters import detect, read, transcripts
from tripwire.interchange.events import Call, Compaction, Result, Text, Usage

AIM = "50316244-145e-46cb-b42b-db11410ad87a"
GEMINI = {
    "ai-sessions-example/gemini-cli-pomodoro-timer.json": {
        # one write_file/replace answered with an error; 14 model responses (one of them
        # with all-zero tokens, as that build wrote them)
        "0b23371a-ce2e-4b1c-81a0-44af5d94d9ce": {
            "calls": 11, "results": 11, "failures": 1, "texts": 14, "turns": 5, "usage": 14,
            "input_tokens": 120730, "output_tokens": 6223}},
    "aim-legacy-json/session-2026-03-18T01-46-50316244.json": {
        # run_shell_command is no tool of this session: "Tool ... not found"
        AIM: {"calls": 6, "results": 6, "failures": 1, "unknown_tools": 1, "texts": 7,
              "turns": 1, "usage": 7, "input_tokens": 56750, "output_tokens": 2198}},
    # the parent's sub-agents share its sessionId: named by their first message
    "aim-legacy-json/session-2026-03-18T01-47-50316244.json": {
        f"{AIM}:subagent-99c8fb88-fdc9-4f58-a9bc-8cab86858976": {
            "turns": 1, "usage": 6, "input_tokens": 7674, "output_tokens": 17068}},
    "aim-legacy-json/session-2026-03-18T01-49-50316244.json": {
        f"{AIM}:subagent-ba0c8b72-0ae9-40c7-85ed-745dcfa49b9e": {
            "turns": 2, "usage": 4, "input_tokens": 5068, "output_tokens": 5354}},
    "aim-legacy-json/session-2026-03-18T01-58-b26e4930.json": {
        # a cancelled cli_help call is a failure; the error and info notices are skipped
        "b26e4930-a5eb-4800-bed1-3d8b7929eddf": {
            "calls": 8, "results": 8, "failures": 1, "texts": 2, "turns": 2, "usage": 2,
            "input_tokens": 19451, "output_tokens": 638},
        SKIPPED: {"lines": 3}},
    "harbor-rfc-example/gemini-cli-trajectory.json": {
        "cdd63974-c2a3-4f1c-931d-cce1db22ec03": {
            "texts": 1, "turns": 1, "usage": 1, "input_tokens": 5915, "output_tokens": 24}},
}
#: a recording of one warning (a hook failed at the session's start): no event at all
NO_EVENT = "aim-legacy-json/session-2026-03-18T15-20-76d8ed24.json"


def sample(name: str) -> Path:
    return need_shared("format-samples", "gemini-cli", "samples", *name.split("/"))


@pytest.mark.parametrize("name", sorted(GEMINI))
def test_every_gemini_cli_sample(name: str) -> None:
    path = sample(name)
    assert detect(path) == "gemini-cli"
    assert counts(path) == GEMINI[name]


def test_the_recording_of_a_warning_only_is_an_empty_session() -> None:
    """A real recording that holds no event (one warning: a hook failed at the session's
    start) is a session with no events, counted in the summary, alone or in its folder, with
    --skip-invalid too; --per-file says which format each file was read as."""
    path = sample(NO_EVENT)
    assert detect(path) == "gemini-cli"
    for extra in ([], ["--skip-invalid"]):
        out, err = io.StringIO(), io.StringIO()
        assert main(["replay", *extra, str(path)], out=out, err=err) == 0, err.getvalue()
        assert err.getvalue() == ""
        (summary,) = [json.loads(line) for line in out.getvalue().splitlines()]
        assert (summary["files"], summary["sessions"], summary["events"],
                summary["skipped_lines"]) == (1, 1, 0, 1)
    folder = need_shared("format-samples", "gemini-cli")
    out, err = io.StringIO(), io.StringIO()
    assert main(["replay", "--quiet", "--per-file", str(folder)], out=out, err=err) == 0
    summary = json.loads(out.getvalue().splitlines()[-1])
    assert summary["files"] == summary["sessions"] == len(GEMINI) + 1
    entry = next(f for f in summary["per_file"] if f["file"] == str(path))
    assert (entry["format"], entry["sessions"], entry["events"]) == ("gemini-cli", 1, 0)
    assert {f["format"] for f in summary["per_file"]} == {"gemini-cli"}


def test_an_empty_json_lines_file_of_no_format_is_still_an_error(tmp_path: Path) -> None:
    """Only a whole-document recording its reader took is an empty session: lines of which
    none yielded an event, read as a line format, may be another format's (SPEC §11.1)."""
    path = tmp_path / "garbage.jsonl"
    path.write_text('{"type": "file-history-snapshot", "messageId": "m"}\n')
    err = io.StringIO()
    assert main(["replay", "--format", "claude-code", str(path)], out=io.StringIO(),
                err=err) == 2
    assert "no line yielded an event (read as claude-code" in err.getvalue()


def test_every_gemini_sample_file_is_one_of_those() -> None:
    root = need_shared("format-samples", "gemini-cli", "samples")
    assert {p.relative_to(root).as_posix() for p in root.rglob("*.json")} == {*GEMINI, NO_EVENT}


def test_a_recording_s_calls_results_and_thoughts() -> None:
    events = [e for _, e in events_of(sample(
        "aim-legacy-json/session-2026-03-18T01-46-50316244.json"))]
    first = next(e for e in events if isinstance(e, Call))
    assert (first.name, first.id) == ("cli_help", "cli_help_1773798370644_0")
    failed = next(e for e in events if isinstance(e, Result) and e.error)
    assert (failed.name, failed.unknown_tool) == ("run_shell_command", True)
    assert failed.error.startswith('Tool "run_shell_command" not found.')
    usage = next(e for e in events if isinstance(e, Usage))
    # input 7295 (+ tool 0), output 34 + thoughts 37
    assert (usage.model, usage.input_tokens, usage.output_tokens, usage.cache_read_tokens,
            usage.provider) == ("gemini-3-flash-preview", 7295, 71, 0, "google")
    texts = [e.text for e in events if isinstance(e, Text)]
    assert texts[0].startswith("I will use the `cli_help` tool")  # no thought among them


# -- the JSON Lines log ------------------------------------------------------------------------

META = {"sessionId": "6d1f0000-0000-4000-8000-000000000010", "projectHash": "ab",
        "startTime": "2026-05-01T10:00:00.000Z", "lastUpdated": "2026-05-01T10:00:00.000Z",
        "kind": "main"}
SID = META["sessionId"]


def gemini(ident: str, calls: list[dict] | None = None, tokens: dict | None = None,
           content: str = "") -> dict:
    return {"id": ident, "timestamp": "2026-05-01T10:00:01.000Z", "type": "gemini",
            "content": content, "toolCalls": calls or [], "thoughts": [
                {"subject": "s", "description": "private", "timestamp": "t"}],
            "model": "gemini-2.5-pro", "tokens": tokens}


def call(ident: str, status: str, output: str | None = None, error: str | None = None,
         name: str = "run_shell_command") -> dict:
    response: dict[str, Any] = {}
    if output is not None:
        response["output"] = output
    if error is not None:
        response["error"] = error
    return {"id": ident, "name": name, "args": {"command": "make"}, "status": status,
            "result": [{"functionResponse": {"id": ident, "name": name,
                                             "response": response}}] if response else []}


def user(ident: str, text: str = "go") -> dict:
    return {"id": ident, "timestamp": "2026-05-01T10:00:00.000Z", "type": "user",
            "content": [{"text": text}]}


def write(path: Path, lines: list[Any]) -> Path:
    path.write_text("".join(json.dumps(x) + "\n" for x in lines))
    return path


def test_the_log_gives_each_message_once_as_its_last_record_says(tmp_path: Path) -> None:
    tokens = {"input": 1000, "output": 10, "cached": 800, "thoughts": 5, "tool": 2,
              "total": 1017}
    path = write(tmp_path / "session-2026-05-01T10-00-6d1f0000.jsonl", [
        META,
        user("u1"),
        gemini("g1", [call("c1", "executing")]),  # written when the call starts ...
        gemini("g1", [call("c1", "success", output="ok")]),  # ... again with its result ...
        gemini("g1", [call("c1", "success", output="ok")], tokens),  # ... and its tokens
        {"$set": {"lastUpdated": "2026-05-01T10:00:02.000Z"}},
        gemini("g2", [call("c2", "error", error="exit 1"), call("c3", "executing")]),
        user("u2", "again"),
        gemini("g2", [call("c2", "error", error="exit 1"),
                      call("c3", "success", output="late")]),  # an earlier message's update
        {"$rewindTo": "u2"},  # the model's context lost u2; the run did not
        gemini("g3", content="Done.", tokens=tokens),
    ])
    assert detect(path) == "gemini-cli"
    got = events_of(path)
    assert {s for s, _ in got} == {SID}
    assert [type(e).__name__ for _, e in got] == [
        "TurnStart", "Call", "Usage", "Result",  # g1, with its last record's tokens
        "Call", "Call", "Result",  # g2: c3 is still executing
        "TurnEnd", "TurnStart",  # u2
        "Result",  # c3's result, written into g2 later
        "Text", "Usage", "TurnEnd"]
    results = [(e.id, e.error) for _, e in got if isinstance(e, Result)]
    assert results == [("c1", None), ("c2", "exit 1"), ("c3", None)]
    usage = next(e for _, e in got if isinstance(e, Usage))
    assert (usage.input_tokens, usage.output_tokens, usage.cache_read_tokens) == (1002, 15, 800)
    # the metadata, the rewrites, the patch and the rewind: lines without events of their own
    assert counts(path)[SKIPPED] == {"lines": 5}


def test_checkpoints_resume_and_compress(tmp_path: Path) -> None:
    """A ``$set.messages`` checkpoint before any message is the history a resumed recording
    starts with; after messages were read, one that drops them and brings new records (a
    summary) is a compaction, and its records are no events."""
    path = write(tmp_path / "s.jsonl", [
        META,
        {"$set": {"messages": [user("u0", "earlier"), gemini("g0", content="Earlier.")]}},
        user("u1"),
        gemini("g1", [call("c1", "success", output="x")]),
        {"$set": {"messages": [user("summary", "<state_snapshot>...</state_snapshot>"),
                               gemini("g1", [call("c1", "success", output="x")])]}},
        {"$set": {"messages": [user("summary", "<state_snapshot>...</state_snapshot>")]}},
        gemini("g2", content="After.")])
    kinds = [type(e).__name__ for _, e in events_of(path)]
    assert kinds == ["TurnStart", "Text", "TurnEnd", "TurnStart", "Call", "Result",
                     "Compaction", "Text", "TurnEnd"]


def test_a_sub_agent_log_and_its_compression_notice(tmp_path: Path) -> None:
    path = write(tmp_path / "sub.jsonl", [
        {**META, "kind": "subagent"}, user("u9", "find x"),
        {"id": "i1", "timestamp": "t", "type": "info",
         "content": "Chat history compressed from 1000 to 100 tokens."},
        gemini("g9", content="found", tokens={"input": 1, "output": 1})])
    got = events_of(path)
    assert {s for s, _ in got} == {f"{SID}:subagent-u9"}
    assert [e for _, e in got if isinstance(e, Compaction)] == [Compaction(False, False)]


def test_a_legacy_record_on_one_line_and_a_cut_last_line(tmp_path: Path) -> None:
    record = {**META, "messages": [user("u1"), gemini("g1", content="hi")]}
    path = tmp_path / "s.jsonl"
    path.write_text(json.dumps(record) + "\n" + json.dumps(gemini("g2", content="more"))[:30])
    (transcript,) = transcripts([str(path)])
    items = list(read(transcript))
    assert [type(i.event).__name__ for i in items if i.event] == ["TurnStart", "Text",
                                                                 "TurnEnd"]
    (cut,) = [i for i in items if i.error is not None]
    assert cut.session == SID and "truncated" in str(cut.error)


def test_bad_lines_and_records(tmp_path: Path) -> None:
    path = write(tmp_path / "s.jsonl", [
        META, user("u1"), {"type": "gemini"}, {"id": "g1", "type": "robot"},
        gemini("g2", [{"id": "x", "status": "success"}])])
    (transcript,) = transcripts([str(path)])
    errors = [(i.line, str(i.error)) for i in read(transcript) if i.error is not None]
    assert errors == [
        (3, f"{path}:3: not a Gemini CLI recording line (expected its metadata, a message with "
            "an 'id' and a 'type', $set or $rewindTo)"),
        (4, f"{path}:4: not a Gemini CLI recording line (expected its metadata, a message with "
            "an 'id' and a 'type', $set or $rewindTo)"),
        (5, f"{path}:5: a tool call needs a string 'name'")]
    document = tmp_path / "d.json"
    document.write_text(json.dumps({"sessionId": "x", "projectHash": "y", "messages": "no"},
                                   indent=2))
    with pytest.raises(InvalidEvent, match="not a Gemini CLI chat recording"):
        list(read(transcripts([str(document)], "gemini-cli")[0]))
    document.write_text(json.dumps({"sessionId": "x", "projectHash": "y", "messages": "no"}))
    first = next(read(transcripts([str(document)], "gemini-cli")[0]))
    assert "not a Gemini CLI recording line" in str(first.error)
