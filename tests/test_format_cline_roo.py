"""Cline and Roo Code (SPEC §11.5): every sample in ``../shared/format-samples/cline-roo`` with
exact counts — task folders (a folder is one transcript; XML tool calls inside the text) and
Cline SDK sessions — and generated edge cases."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import pytest
from conftest import need_shared
from transcript_counts import SKIPPED, counts, events_of

from tripwire.interchange.adapters import detect, transcripts
from tripwire.interchange.events import Call, Compaction, Result, Text, Usage

CLINE_ROO = {
    # the first Roo task: one XML call, attempt_completion, which ends the task unanswered
    "roo-task-6a716972": {"roo-task-6a716972": {
        "calls": 1, "turns": 1, "usage": 1, "input_tokens": 3 + 16041, "output_tokens": 384,
        "cost_usd": 0.06592275}},
    # condensed: its summary is a compaction, the requests before it still cost (32 of
    # them in ui_messages.json, 15 model messages left in the history); the first result
    # answers a call the summary replaced
    "roo-natural-already-condensed": {"roo-natural-already-condensed": {
        "calls": 13, "results": 12, "failures": 1, "texts": 12, "turns": 2, "usage": 32,
        "compactions": 1, "input_tokens": 2293053, "output_tokens": 32273,
        "cost_usd": 2.294409148}, SKIPPED: {"lines": 1}},  # the "you did not use a tool" nag
    # the first call was cut short by the extension (no closing tag) and refused in ask mode
    "roo-natural-mini-uncondensed": {"roo-natural-mini-uncondensed": {
        "calls": 9, "results": 8, "failures": 1, "texts": 3, "turns": 1, "usage": 10,
        "input_tokens": 535406, "output_tokens": 4547, "cost_usd": 0.5334765},
        SKIPPED: {"lines": 1}},
    "cline-sdk-session/session.messages.json": {"1784094124598_rruoq": {
        "calls": 11, "results": 11, "texts": 14, "turns": 5, "usage": 16,
        "input_tokens": 630254, "output_tokens": 4395, "cost_usd": 2.036022565}},
    "cline-sdk-session/success.messages.json": {"fixture-success-01": {
        "calls": 1, "results": 1, "texts": 1, "turns": 1, "usage": 1, "input_tokens": 21,
        "output_tokens": 8, "cost_usd": 0.13}},
}


def sample(name: str) -> Path:
    return need_shared("format-samples", "cline-roo", "samples", *name.split("/"))


@pytest.mark.parametrize("name", sorted(CLINE_ROO))
def test_every_cline_roo_sample(name: str) -> None:
    path = sample(name)
    assert detect(path) == "cline-roo"
    assert counts(path) == CLINE_ROO[name]


def test_the_samples_folder_lists_each_task_folder_as_one_transcript() -> None:
    root = need_shared("format-samples", "cline-roo", "samples")
    listed = [(t.name, t.format) for t in transcripts([str(root)])]
    assert listed == [("cline-sdk-session/session.messages.json", "cline-roo"),
                      ("cline-sdk-session/success.messages.json", "cline-roo"),
                      ("roo-natural-already-condensed", "cline-roo"),
                      ("roo-natural-mini-uncondensed", "cline-roo"),
                      ("roo-task-6a716972", "cline-roo")]
    # the SDK's session.json (metadata, no messages) and a task's other files are left out
    assert detect(root / "cline-sdk-session" / "session.json") is None


def test_a_task_s_history_file_given_alone_reads_its_folder(tmp_path: Path) -> None:
    history = sample("roo-natural-mini-uncondensed") / "api_conversation_history.json"
    assert detect(history) == "cline-roo"
    assert counts(history) == CLINE_ROO["roo-natural-mini-uncondensed"]
    # without ui_messages.json there is no usage to read
    alone = tmp_path / "t-1"
    alone.mkdir()
    shutil.copy(history, alone / history.name)
    got = counts(alone)["t-1"]
    assert "usage" not in got and got["calls"] == 9


def test_xml_calls_in_the_text() -> None:
    events = [e for _, e in events_of(sample("roo-natural-mini-uncondensed"))]
    calls = [e for e in events if isinstance(e, Call)]
    assert [c.name for c in calls] == ["execute_command"] + ["read_file"] * 7 + [
        "attempt_completion"]
    assert calls[0].args == {"command": "git log --oneline -10"}  # cut short, still read
    assert calls[1].args == {"args": "<file>\n<path>webview-ui/src/hooks/useAutosaveDraft.ts"
                                     "</path>\n</file>"}
    first = next(e for e in events if isinstance(e, Result))
    assert (first.id, first.name) == ("xml-1", "execute_command")
    assert first.error.startswith("The tool execution failed with the following error:")
    texts = [e.text for e in events if isinstance(e, Text)]
    # no XML, no <thinking>, no "[Response interrupted ...]" note in the agent's words
    assert texts[0] == ("Je vais d'abord vérifier l'historique des commits récents pour "
                        "obtenir les hash corrects, puis rédiger toutes les réponses.")
    usage = [e for e in events if isinstance(e, Usage)]
    # apiProtocol openai: tokensIn counts the cached tokens
    assert (usage[1].input_tokens, usage[1].cache_read_tokens, usage[1].cost_usd) == (
        38400, 37885, 0.01739925)


def _task(folder: Path, history: list[dict], ui: list[dict] | None = None) -> Path:
    folder.mkdir(parents=True)
    (folder / "api_conversation_history.json").write_text(json.dumps(history))
    if ui is not None:
        (folder / "ui_messages.json").write_text(json.dumps(ui))
    return folder


def _request(ts: int, tokens_in: int, cost: float, **more: Any) -> dict:
    return {"ts": ts, "type": "say", "say": "api_req_started", "text": json.dumps(
        {"request": "...", "tokensIn": tokens_in, "tokensOut": 5, "cacheWrites": 10,
         "cacheReads": 100, "cost": cost, **more})}


def test_native_tool_calls_condensing_truncation_and_usage_by_time(tmp_path: Path) -> None:
    history = [
        {"role": "user", "ts": 100, "content": [{"type": "text", "text": "<task>go</task>"}]},
        {"role": "assistant", "ts": 200, "content": [
            {"type": "thinking", "thinking": "private"},
            {"type": "text", "text": "<thinking>also private</thinking>Looking."},
            {"type": "tool_use", "id": "t1", "name": "read_file", "input": {"path": "a"}}]},
        {"role": "user", "ts": 300, "content": [
            {"type": "tool_result", "tool_use_id": "t1", "is_error": True,
             "content": "Unknown tool: read_file"}]},
        {"role": "assistant", "ts": 400, "isSummary": True, "content": "## Summary"},
        {"role": "user", "ts": 500, "truncationId": "tr-1", "content": "[truncated]"},
        {"role": "assistant", "ts": 600, "content": [
            {"type": "text", "text": "<execute_command>\n<command>ls</command>\n"
                                     "</execute_command>"}]},
        {"role": "user", "ts": 700, "content": [
            {"type": "text", "text": "[execute_command for 'ls'] Result:"},
            {"type": "text", "text": "The user denied this operation."},
            {"type": "text", "text": "<environment_details>\n...</environment_details>"}]},
    ]
    ui = [_request(150, 1, 0.1), _request(550, 2, 0.2, apiProtocol="openai"),
          _request(800, 3, 0.3)]  # after the last message: given at the end
    folder = _task(tmp_path / "tasks" / "1714000000000", history, ui)
    got = events_of(tmp_path / "tasks")
    assert {s for s, _ in got} == {"1714000000000"}
    events = [e for _, e in got]
    assert [type(e).__name__ for e in events] == [
        "TurnStart", "Usage", "Text", "Call", "Result", "Compaction", "Compaction", "Usage",
        "Call", "Result", "Usage", "TurnEnd"]
    assert [e for e in events if isinstance(e, Compaction)] == [
        Compaction(mechanical=False, automatic=False), Compaction(mechanical=True,
                                                                  automatic=True)]
    results = [(r.id, r.error, r.unknown_tool) for r in events if isinstance(r, Result)]
    assert results == [("t1", "Unknown tool: read_file", True),
                       ("xml-1", "The user denied this operation.", False)]
    usage = [(u.input_tokens, u.cost_usd) for u in events if isinstance(u, Usage)]
    assert usage == [(1 + 100 + 10, 0.1), (2, 0.2), (3 + 100 + 10, 0.3)]
    assert folder.name == "1714000000000"


def test_not_a_task(tmp_path: Path) -> None:
    folder = tmp_path / "x"
    folder.mkdir()
    (folder / "api_conversation_history.json").write_text('[{"role": "user", "content": "x"}]')
    # an Anthropic list without ts: no task folder (its file is read as what it is)
    assert detect(folder) is None
    assert detect(folder / "api_conversation_history.json") == "openai-chat"
