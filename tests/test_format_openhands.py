"""OpenHands (SPEC §11.5): every sample in ``../shared/format-samples/openhands`` with exact
counts (V1 events, V0 trajectories and evaluation output); a V1 conversation folder built
from the real events (the SDK's on-disk layout, one event per file); generated edge cases."""

from __future__ import annotations

import io
import json
from pathlib import Path
from typing import Any

import pytest
from conftest import need_shared
from transcript_counts import SKIPPED, counts, events_of

from tripwire.cli.main import main
from tripwire.interchange.adapters import detect, read, transcripts
from tripwire.interchange.events import Call, Compaction, Result, TaskEnd, Text, Usage

F = "{file}"
OPENHANDS = {
    "v0-harbor-rfc-example/openhands_trajectory.json": {
        # run and finish are calls (finish has no observation); usage from llm_metrics, the
        # running totals charged by difference, with their cost
        F: {"calls": 2, "results": 1, "texts": 1, "turns": 1, "usage": 2,
            "input_tokens": 11859, "output_tokens": 1086, "cost_usd": 0.01934775},
        SKIPPED: {"lines": 3}},  # system, recall and its observation
    "v0-openhands-repo/basic_gui_mode.json": {
        # the server started with exit code -1: a failure; usage per model response
        F: {"calls": 4, "results": 4, "failures": 1, "texts": 5, "turns": 1, "usage": 4,
            "input_tokens": 17297, "output_tokens": 2024},
        SKIPPED: {"lines": 8}},
    "v0-openhands-repo/wrong_initial_state.json": {
        F: {"calls": 4, "results": 3, "texts": 5, "turns": 1, "usage": 4,
            "input_tokens": 14828, "output_tokens": 358}},
    "v0-openhands-repo/output.jsonl": {
        # non-zero exit codes and a bad tool parameter are failures; the third instance hit
        # the iteration cap: its task is exhausted(steps)
        F + "#ponylang__ponyc-4595": {
            "calls": 23, "results": 22, "failures": 5, "texts": 24, "turns": 1, "usage": 23,
            "input_tokens": 565158, "output_tokens": 2558},
        F + "#ponylang__ponyc-4593": {
            "calls": 33, "results": 32, "failures": 2, "texts": 34, "turns": 1, "usage": 33,
            "input_tokens": 410169, "output_tokens": 5156},
        F + "#ponylang__ponyc-4588": {
            "calls": 49, "results": 49, "failures": 12, "texts": 49, "turns": 1, "usage": 49,
            "input_tokens": 938015, "output_tokens": 5627, "outcome:exhausted:steps": 1},
        SKIPPED: {"lines": 11}},
    "v0-openhands-repo/resolver-mock_output/output.jsonl": {
        # the earliest event shape (no source, id or cause): each action's thought beside it
        # is the agent's words (the finish's too); usage: the record's costs, one before each
        # agent action
        F + "#issue-5": {"calls": 3, "results": 3, "texts": 4, "turns": 1, "usage": 4,
                         "cost_usd": 0.070713},
        F + "#issue-1": {"calls": 21, "results": 21, "texts": 22, "turns": 1, "usage": 22,
                         "cost_usd": 1.152933}},
    # a slice of a real run, starting mid-run: an observation of a call before it; usage
    # from the stats updates (the first one holds the run's totals so far)
    "v1-sdk/events.jsonl": {
        F: {"calls": 2, "results": 3, "failures": 3, "texts": 1, "usage": 4,
            "input_tokens": 107458, "output_tokens": 1347},
        SKIPPED: {"lines": 1}},
}


def sample(name: str) -> Path:
    return need_shared("format-samples", "openhands", "samples", *name.split("/"))


def _named(path: Path, want: dict[str, Any]) -> dict[str, Any]:
    return {k.replace(F, str(path)): v for k, v in want.items()}


@pytest.mark.parametrize("name", sorted(OPENHANDS))
def test_every_openhands_sample(name: str) -> None:
    path = sample(name)
    assert detect(path) == "openhands"
    assert counts(path) == _named(path, OPENHANDS[name])


def test_every_openhands_sample_file_is_one_of_those() -> None:
    root = need_shared("format-samples", "openhands", "samples")
    found = {p.relative_to(root).as_posix() for p in root.rglob("*")
             if p.suffix in (".json", ".jsonl")}
    assert found == {*OPENHANDS, "v1-sdk/base_state.json"}
    # a conversation's state alone holds no event: no transcript of a known format
    assert detect(root / "v1-sdk" / "base_state.json") is None


def v1_folder(root: Path) -> Path:
    """The SDK's layout (``persistence_const.py``): ``<id>/base_state.json`` and
    ``<id>/events/event-<index:05d>-<event id>.json``, from the real sample's events."""
    folder = root / "e18b827d3440425a9ff7353c4a6d6a3a"
    (folder / "events").mkdir(parents=True)
    (folder / "base_state.json").write_bytes((sample("v1-sdk/base_state.json")).read_bytes())
    lines = sample("v1-sdk/events.jsonl").read_text().splitlines()
    for index, line in reversed(list(enumerate(lines))):  # written in any order
        event = json.loads(line)
        (folder / "events" / f"event-{index:05d}-{event['id']}.json").write_text(line)
    return folder


def test_a_v1_conversation_folder_is_one_transcript(tmp_path: Path) -> None:
    folder = v1_folder(tmp_path / "conversations")
    assert detect(folder) == "openhands"
    state_id = "11111111-2222-3333-4444-555555555555"  # base_state.json's id
    want = {state_id: OPENHANDS["v1-sdk/events.jsonl"][F], SKIPPED: {"lines": 1}}
    assert counts(folder) == want
    # in a directory walk the folder is one transcript, not one per event file
    (found,) = transcripts([str(tmp_path / "conversations")])
    assert (found.path, found.format, found.name) == (folder, "openhands",
                                                      "e18b827d3440425a9ff7353c4a6d6a3a")
    # the same events, in the files' index order
    in_order = [type(e).__name__ for _, e in events_of(folder)]
    assert in_order == [type(e).__name__ for _, e in events_of(sample("v1-sdk/events.jsonl"))]
    out = io.StringIO()
    assert main(["replay", "--quiet", str(tmp_path / "conversations")], out=out,
                err=io.StringIO()) == 0
    summary = json.loads(out.getvalue())
    assert (summary["files"], summary["sessions"], summary["events"]) == (1, 1, 10)


def _v1(kind: str, **fields: Any) -> dict:
    return {"kind": kind, "id": f"{kind}-{len(fields)}", "timestamp": "2026-06-16T05:39:18",
            **fields}


def _stats(prompt: int, completion: int, cost: float) -> dict:
    return _v1("ConversationStateUpdateEvent", source="environment", key="stats", value={
        "usage_to_metrics": {"default": {
            "model_name": "anthropic/claude-sonnet-4-5", "accumulated_cost": cost,
            "accumulated_token_usage": {"prompt_tokens": prompt,
                                        "completion_tokens": completion}}}})


def test_v1_events_of_every_kind(tmp_path: Path) -> None:
    lines = [
        _v1("SystemPromptEvent", source="agent", system_prompt={"text": "You are."}),
        _v1("MessageEvent", source="user", llm_message={"role": "user", "content": [
            {"type": "text", "text": "fix it"}]}),
        _stats(100, 10, 0.01),
        _v1("ActionEvent", source="agent", tool_name="terminal", tool_call_id="t1",
            thought=[{"type": "text", "text": "<think>private</think>Running the tests."}],
            reasoning_content="private", tool_call={"id": "t1", "name": "terminal",
                                                    "arguments": '{"command": "pytest"}'}),
        _v1("ObservationEvent", source="environment", tool_name="terminal", tool_call_id="t1",
            observation={"content": [{"type": "text", "text": "1 failed"}], "exit_code": 1}),
        _stats(100, 10, 0.01),  # unchanged: no usage
        _stats(250, 30, 0.03),
        _v1("ActionEvent", source="agent", tool_name="serach", tool_call_id="t2",
            tool_call={"id": "t2", "name": "serach", "arguments": "{}"}),
        _v1("AgentErrorEvent", source="agent", tool_name="serach", tool_call_id="t2",
            error="Tool 'serach' not found. Available: ['terminal']"),
        _v1("ActionEvent", source="agent", tool_name="terminal", tool_call_id="t3",
            action={"command": "rm -rf /"}),
        _v1("UserRejectObservation", source="user", tool_name="terminal", tool_call_id="t3",
            rejection_reason="no", action_id="x"),
        _v1("Condensation", source="environment", forgotten_event_ids=["a"],
            summary="the story so far"),
        _v1("Condensation", source="environment", forgotten_event_ids=["b"]),
        _v1("MessageEvent", source="agent", llm_message={"role": "assistant", "content": [
            {"type": "text", "text": "Done."}]}),
        _v1("ConversationErrorEvent", source="environment", code="x", detail="y"),
    ]
    path = tmp_path / "events.jsonl"
    path.write_text("".join(json.dumps(x) + "\n" for x in lines))
    events = [e for _, e in events_of(path)]
    assert [type(e).__name__ for e in events] == [
        "TurnStart", "Usage", "Text", "Call", "Result", "Usage", "Call", "Result", "Call",
        "Result", "Compaction", "Compaction", "Text", "TurnEnd"]
    assert [e.text for e in events if isinstance(e, Text)] == ["Running the tests.", "Done."]
    usage = [(u.model, u.input_tokens, u.output_tokens, u.cost_usd) for u in events
             if isinstance(u, Usage)]
    assert usage == [("anthropic/claude-sonnet-4-5", 100, 10, 0.01),
                     ("anthropic/claude-sonnet-4-5", 150, 20, 0.02)]
    results = [(r.id, bool(r.error), r.unknown_tool) for r in events if isinstance(r, Result)]
    assert results == [("t1", True, False), ("t2", True, True), ("t3", True, False)]
    assert [e for e in events if isinstance(e, Compaction)] == [
        Compaction(mechanical=False, automatic=True), Compaction(mechanical=True,
                                                                 automatic=True)]
    call = next(e for e in events if isinstance(e, Call))
    assert call.args == '{"command": "pytest"}'


def test_v0_events_of_every_kind(tmp_path: Path) -> None:
    def response(rid: str, calls: list[tuple[str, str]], content: str | None = None) -> dict:
        return {"id": rid, "model": "gpt-4o", "choices": [{"message": {
            "content": content, "tool_calls": [
                {"id": i, "function": {"name": n, "arguments": '{"a": 1}'}} for i, n in calls]}}],
            "usage": {"prompt_tokens": 50, "completion_tokens": 5,
                      "prompt_tokens_details": {"cached_tokens": 40}}}

    two = response("r1", [("c1", "execute_bash"), ("c2", "str_replace_editor")], "Both.")
    trajectory = [
        {"id": 1, "source": "user", "action": "message", "args": {"content": "go"}},
        {"id": 2, "source": "agent", "action": "run", "args": {"command": "ls"},
         "tool_call_metadata": {"function_name": "execute_bash", "tool_call_id": "c1",
                                "model_response": two, "total_calls_in_response": 2}},
        {"id": 3, "source": "agent", "action": "edit", "args": {"path": "a"},
         "tool_call_metadata": {"function_name": "str_replace_editor", "tool_call_id": "c2",
                                "model_response": two, "total_calls_in_response": 2}},
        {"id": 4, "source": "agent", "observation": "error", "cause": 3,
         "content": "Tool str_replace_editor is not registered.", "extras": {}},
        {"id": 5, "source": "agent", "observation": "run", "cause": 2, "content": "a.py",
         "extras": {"metadata": {"exit_code": 0}}},
        {"id": 6, "source": "agent", "action": "condensation",
         "args": {"forgotten_event_ids": [1], "summary": None}},
        {"id": 7, "source": "agent", "action": "think", "args": {"thought": "private"}},
        {"id": 8, "source": "agent", "action": "message", "args": {"content": "Done."}},
    ]
    path = tmp_path / "trajectory.json"
    path.write_text(json.dumps(trajectory, indent=2))
    events = [e for _, e in events_of(path)]
    assert [type(e).__name__ for e in events] == [
        "TurnStart", "Text", "Usage", "Call", "Call", "Result", "Result", "Compaction",
        "Text", "TurnEnd"]
    # the response shared by the two calls: its text and usage once
    usage = next(e for e in events if isinstance(e, Usage))
    assert (usage.model, usage.input_tokens, usage.cache_read_tokens) == ("gpt-4o", 50, 40)
    assert [(r.id, r.name, bool(r.error), r.unknown_tool) for r in events
            if isinstance(r, Result)] == [("c2", "str_replace_editor", True, True),
                                          ("c1", "execute_bash", False, False)]
    assert next(e for e in events if isinstance(e, Call)).args == '{"a": 1}'
    assert Compaction(mechanical=True, automatic=True) in events


@pytest.mark.parametrize("error, outcome", [
    ("RuntimeError: Agent reached maximum iteration in headless mode.", ("steps", None)),
    ("RuntimeError: Agent reached maximum budget for conversation.", ("usd", None)),
    ("AgentStuckInLoopError: Agent got stuck in a loop", (None, "AgentStuckInLoopError: "
                                                          "Agent got stuck in a loop")),
])
def test_an_evaluation_record_s_error_is_the_task_s_outcome(tmp_path: Path, error: str,
                                                             outcome: tuple) -> None:
    record = {"instance_id": "x__y-1", "instruction": "fix", "metrics": {}, "error": error,
              "history": [{"id": 1, "source": "user", "action": "message",
                           "args": {"content": "fix"}}]}
    path = tmp_path / "output.jsonl"
    path.write_text(json.dumps(record) + "\n")
    (end,) = [e for _, e in events_of(path) if isinstance(e, TaskEnd)]
    assert (end.exhausted, end.interrupted) == outcome


def test_bad_openhands_input(tmp_path: Path) -> None:
    path = tmp_path / "events.jsonl"
    path.write_text(json.dumps(_v1("ActionEvent", source="agent")) + "\n"
                    + json.dumps({"kind": "Nope"}) + "\n"
                    + json.dumps(_v1("MessageEvent", source="user")) + "\n")
    (t,) = transcripts([str(path)])
    errors = [str(i.error) for i in read(t) if i.error is not None]
    assert errors == [f"{path}:1: an ActionEvent needs a string 'tool_name'",
                      f"{path}:2: not an OpenHands event (expected an object with a 'kind' such "
                      "as ActionEvent or ObservationEvent, and an 'id')"]
