"""Compactions and unknown tools as the existing readers find them (SPEC §12.4, last
paragraph): Claude Code's ``compact_boundary`` lines and "No such tool available" errors,
Codex's ``compacted`` lines (and their ``context_compacted`` notices)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from tripwire.interchange.adapters import read, transcripts
from tripwire.interchange.events import Compaction, Result

SESSION = "5e1f0000-0000-4000-8000-00000000000e"


def _events(path: Path) -> list[tuple[str, Any]]:
    (transcript,) = transcripts([str(path)])
    return [(i.session, i.event) for i in read(transcript) if i.event is not None]


def _cc(kind: str, **fields: Any) -> dict:
    return {"type": kind, "sessionId": SESSION, "uuid": f"u{len(fields)}", "isSidechain": False,
            **fields}


def test_claude_code_compact_boundaries_and_unknown_tools(tmp_path: Path) -> None:
    lines = [
        _cc("user", message={"role": "user", "content": "go"}),
        _cc("assistant", message={"id": "m1", "role": "assistant", "model": "claude-sonnet-4-5",
                                  "content": [{"type": "tool_use", "id": "t1",
                                               "name": "Serach", "input": {}}],
                                  "usage": {"input_tokens": 5, "output_tokens": 7}}),
        _cc("user", message={"role": "user", "content": [{
            "type": "tool_result", "tool_use_id": "t1", "is_error": True,
            "content": "<tool_use_error>Error: No such tool available: Serach</tool_use_error>"}]}),
        _cc("system", subtype="compact_boundary",
            compactMetadata={"trigger": "manual", "preTokens": 90000}),
        _cc("system", subtype="compact_boundary", compactMetadata={"trigger": "auto"}),
        _cc("system", subtype="turn_duration", durationMs=5),
        _cc("assistant", message={"id": "m2", "role": "assistant", "content": [
            {"type": "tool_use", "id": "t2", "name": "Bash", "input": {"command": "ls"}}]}),
        _cc("user", message={"role": "user", "content": [{
            "type": "tool_result", "tool_use_id": "t2", "is_error": True,
            "content": "ls: No such tool available here"}]}),
        _cc("user", message={"role": "user", "content": [{
            "type": "tool_result", "tool_use_id": "t2", "is_error": False,
            "content": "No such tool available (quoted in a file)"}]}),
    ]
    path = tmp_path / "s.jsonl"
    path.write_text("".join(json.dumps(x) + "\n" for x in lines))
    events = _events(path)
    assert {s for s, _ in events} == {SESSION}
    compactions = [e for _, e in events if isinstance(e, Compaction)]
    assert compactions == [Compaction(False, False), Compaction(False, True)]
    results = [e for _, e in events if isinstance(e, Result)]
    # Claude Code's error: flagged; a tool's own error or output quoting the words: not
    assert [(r.id, r.unknown_tool) for r in results] == [("t1", True), ("t2", False),
                                                          ("t2", False)]
    kinds = [type(e).__name__ for _, e in events]
    # the usage of m1 is given before the boundary: that response was complete
    assert kinds == ["TurnStart", "Call", "Result", "Usage", "Compaction", "Compaction", "Call",
                     "Result", "Result", "TurnEnd"]


def _codex(kind: str, payload: dict) -> str:
    return json.dumps({"timestamp": "2026-05-01T10:00:00.000Z", "type": kind,
                       "payload": payload}) + "\n"


def test_codex_compacted_lines_and_their_notices_are_one_compaction_each(tmp_path: Path) -> None:
    path = tmp_path / "rollout.jsonl"
    path.write_text("".join([
        _codex("session_meta", {"id": "019a2d7a-0000-7000-8000-00000000000f"}),
        _codex("event_msg", {"type": "user_message", "message": "go"}),
        _codex("compacted", {"message": "summary 1"}),
        _codex("event_msg", {"type": "context_compacted"}),  # the notice of the same one
        _codex("turn_context", {"model": "gpt-5"}),
        _codex("compacted", {"message": "summary 2", "replacement_history": []}),
        _codex("compacted", {"message": "summary 3"}),  # two in a row: two
        _codex("event_msg", {"type": "context_compacted"}),  # 3's notice
        _codex("response_item", {"type": "message", "role": "assistant",
                                 "content": [{"type": "output_text", "text": "ok"}]}),
        _codex("event_msg", {"type": "context_compacted"}),  # a notice alone (no line): one
        _codex("compacted", {"message": "its line, after it"}),  # the same one again
    ]))
    kinds = [type(e).__name__ for _, e in _events(path)]
    assert kinds == ["TurnStart", "Compaction", "Compaction", "Compaction", "Text",
                     "Compaction", "TurnEnd"]
