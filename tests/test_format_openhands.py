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
        # non-zero exit codes, a bad tool parameter and the file editor's refusals ("ERROR:"
        # and "No replacement was performed ...") are failures; the third instance hit
        # the iteration cap: its task is exhausted(steps). A think (one in 4595, one in 4588)
        # is no call: its thought is one more text (after its response's), its observation
        # a skipped line
        F + "#ponylang__ponyc-4595": {
            "calls": 22, "results": 21, "failures": 6, "texts": 25, "turns": 1, "usage": 23,
            "input_tokens": 565158, "output_tokens": 2558},
        F + "#ponylang__ponyc-4593": {
            "calls": 33, "results": 32, "failures": 13, "texts": 34, "turns": 1, "usage": 33,
            "input_tokens": 410169, "output_tokens": 5156},
        F + "#ponylang__ponyc-4588": {
            "calls": 48, "results": 48, "failures": 24, "texts": 50, "turns": 1, "usage": 49,
            "input_tokens": 938015, "output_tokens": 5627, "outcome:exhausted:steps": 1},
        SKIPPED: {"lines": 13}},
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
        # a think without tool_call_metadata (no function calling): words too
        {"id": 7, "source": "agent", "action": "think", "args": {"thought": "Pondering."}},
        {"id": 8, "source": "agent", "action": "message", "args": {"content": "Done."}},
    ]
    path = tmp_path / "trajectory.json"
    path.write_text(json.dumps(trajectory, indent=2))
    events = [e for _, e in events_of(path)]
    assert [type(e).__name__ for e in events] == [
        "TurnStart", "Text", "Usage", "Call", "Call", "Result", "Result", "Compaction",
        "Text", "Text", "TurnEnd"]
    assert [e.text for e in events if isinstance(e, Text)] == ["Both.", "Pondering.", "Done."]
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


# -- V0 session stores and think ----------------------------------------------------------------

MAX_ITERATION = "RuntimeError: Agent reached maximum iteration. Current iteration: 30, " \
    "max iteration: 30"


def _response(rid: str, call_id: str, function: str, arguments: dict[str, Any],
              content: str | None = None) -> dict[str, Any]:
    """A model response as CodeActAgent records it in ``tool_call_metadata``."""
    return {"id": rid, "created": 1770006889, "model": "gpt-4o-2024-08-06",
            "object": "chat.completion",
            "choices": [{"finish_reason": "tool_calls", "index": 0, "message": {
                "content": content, "role": "assistant", "tool_calls": [{
                    "function": {"arguments": json.dumps(arguments), "name": function},
                    "id": call_id, "type": "function"}]}}],
            "usage": {"completion_tokens": 20, "prompt_tokens": 1000, "total_tokens": 1020,
                      "prompt_tokens_details": {"cached_tokens": 0}}}


def _store_events(steps: list[tuple[str, str]]) -> list[dict[str, Any]]:
    """A V0 session store's events, shaped as OpenHands 0.x writes them (the real stores of a
    CodeActAgent run stopped at ``max_iterations``): the system prompt, the task, its recall,
    then per step an action of ``tool_call_metadata`` and its observation, then the
    controller's ``agent_state_changed`` to ``error``. ``steps``: (``run`` and a command, or
    ``think`` and a thought)."""
    events: list[dict[str, Any]] = [
        {"id": 0, "timestamp": "2026-02-02T04:34:48.307199", "source": "agent",
         "message": "You are OpenHands agent.", "action": "system",
         "args": {"content": "You are OpenHands agent.", "tools": [], "agent_class":
                  "CodeActAgent"}},
        {"id": 1, "timestamp": "2026-02-02T04:34:48.310889", "source": "user",
         "message": "Fix the bug.", "action": "message",
         "args": {"content": "Fix the bug.", "file_urls": None, "image_urls": None,
                  "wait_for_response": False}},
        {"id": 2, "timestamp": "2026-02-02T04:34:48.321792", "source": "user",
         "message": "Retrieving content for: Fix the bug.", "action": "recall",
         "args": {"recall_type": "workspace_context", "query": "Fix the bug."}},
        {"id": 3, "timestamp": "2026-02-02T04:34:48.325879", "source": "environment",
         "message": "", "observation": "agent_state_changed", "content": "",
         "extras": {"agent_state": "running", "reason": ""}},
        {"id": 4, "timestamp": "2026-02-02T04:34:48.332351", "source": "environment",
         "message": "Added workspace context", "cause": 2, "observation": "recall",
         "content": "Added workspace context", "extras": {"recall_type": "workspace_context"}},
    ]
    for n, (kind, value) in enumerate(steps):
        at, call_id, rid = len(events), f"call_{n}", f"chatcmpl-{n}"
        if kind == "think":
            function, arguments = "think", {"thought": value}
            action = {"message": f"I am thinking...: {value}", "action": "think",
                      "args": {"thought": value}}
            observation = {"message": "Your thought has been logged.", "observation": "think",
                           "content": "Your thought has been logged.", "extras": {}}
        else:
            function, arguments = "execute_bash", {"command": value, "security_risk": "LOW"}
            action = {"message": f"Running command: {value}", "action": "run",
                      "args": {"command": value, "is_input": False, "thought": "",
                               "blocking": False, "is_static": False, "cwd": None,
                               "hidden": False, "confirmation_state": "confirmed",
                               "security_risk": 0}}
            observation = {"message": f"Command `{value}` executed with exit code 0.",
                           "observation": "run", "content": f"output of {value}",
                           "extras": {"command": value, "metadata": {
                               "exit_code": 0, "pid": -1, "username": "root",
                               "working_dir": "/workspace", "py_interpreter_path": None,
                               "prefix": "", "suffix": ""}, "hidden": False}}
        metadata = {"function_name": function, "tool_call_id": call_id,
                    "model_response": _response(rid, call_id, function, arguments),
                    "total_calls_in_response": 1}
        events.append({"id": at, "timestamp": "2026-02-02T04:35:00.000000", "source": "agent",
                       **{k: v for k, v in action.items() if k != "args"},
                       "tool_call_metadata": metadata,
                       "llm_metrics": {"accumulated_cost": 0.01 * (n + 1),
                                       "max_budget_per_task": None, "accumulated_token_usage": {
                                           "model": "default", "prompt_tokens": 1000 * (n + 1),
                                           "completion_tokens": 20 * (n + 1),
                                           "cache_read_tokens": 0, "cache_write_tokens": 0,
                                           "context_window": 128000, "per_turn_token": 1020,
                                           "response_id": ""},
                                       "costs": [], "response_latencies": [],
                                       "token_usages": []},
                       "args": action["args"]})
        events.append({"id": at + 1, "timestamp": "2026-02-02T04:35:00.100000",
                       "source": "agent", "cause": at, "tool_call_metadata": metadata,
                       **observation})
    events.append({"id": len(events), "timestamp": "2026-02-02T04:37:43.753213",
                   "source": "environment", "message": "", "observation": "agent_state_changed",
                   "content": "", "extras": {"agent_state": "error", "reason": MAX_ITERATION}})
    return events


def v0_store(root: Path, steps: list[tuple[str, str]],
             name: str = "6264da56-66cb-4b-cba1e27b28adc65") -> Path:
    """OpenHands 0.x's ``sessions/<sid>/`` (``openhands/storage/locations.py``): each event in
    ``events/<id>.json``, and, once 25 events filled a page, ``event_cache/<start>-<end>.json``
    (``EventStream._store_cache_page``, a copy of the page's events), as the stream wrote it;
    the files written in any order."""
    folder = root / name
    (folder / "events").mkdir(parents=True)
    events = _store_events(steps)
    for event in reversed(events):
        (folder / "events" / f"{event['id']}.json").write_text(json.dumps(event))
    (folder / "event_cache").mkdir()
    for start in range(0, len(events) - 24, 25):
        page = events[start:start + 25]
        (folder / "event_cache" / f"{start}-{start + 25}.json").write_text(json.dumps(page))
    (folder / "agent_state.pkl").write_bytes(b"\x80\x04K\x00.")
    (folder / "TASKS.md").write_text("# Task List\n")
    return folder


RUNS = [("run", f"echo {n}") for n in range(14)]


def test_a_v0_session_store_is_one_session_in_numeric_order(tmp_path: Path) -> None:
    folder = v0_store(tmp_path / "sessions", RUNS)  # events 0..33: two cache pages
    assert sorted(p.name for p in (folder / "event_cache").iterdir()) == ["0-25.json"]
    assert detect(folder) == "openhands"
    # its last agent_state_changed, the controller's stop at max_iterations: the outcome
    want = {"calls": 14, "results": 14, "turns": 1, "usage": 14, "input_tokens": 14000,
            "output_tokens": 280, "cost_usd": 0.14, "outcome:exhausted:steps": 1}
    # the walk: the folder is one transcript (its event_cache/ page no session of its own)
    (found,) = transcripts([str(tmp_path / "sessions")])
    assert (found.path, found.format, found.name) == (folder, "openhands", folder.name)
    assert counts(tmp_path / "sessions") == {
        folder.name: want, SKIPPED: {"lines": 5}}  # system, recall, its answer, 2 states
    # events in the order of their number: 10.json after 9.json (not after 1.json)
    calls = [e.args for _, e in events_of(folder) if isinstance(e, Call)]
    assert [json.loads(a)["command"] for a in calls] == [f"echo {n}" for n in range(14)]
    # the same events as the store's array form (a V0 trajectory.json)
    array = tmp_path / "trajectory.json"
    array.write_text(json.dumps(_store_events(RUNS)))
    assert [e for _, e in events_of(folder)] == [e for _, e in events_of(array)]


def test_a_v0_store_s_cache_pages_are_not_read(tmp_path: Path) -> None:
    folder = v0_store(tmp_path, RUNS)
    # a page that differs from the event files (a stale copy) changes nothing
    (folder / "event_cache" / "0-25.json").write_text("[]")
    assert counts(folder)[str(folder)]["calls"] == 14  # the folder given: its path
    # a store whose events/ is gone has no session (OpenHands counts events from events/)
    for path in (folder / "events").iterdir():
        path.unlink()
    (folder / "events").rmdir()
    assert detect(folder) is None


def test_a_bad_event_file_of_a_v0_store_is_named(tmp_path: Path) -> None:
    folder = v0_store(tmp_path, RUNS[:2])
    (folder / "events" / "5.json").write_text("{not json")
    (folder / "events" / "6.json").write_text(json.dumps({"id": 6, "source": "agent"}))
    (t,) = transcripts([str(folder)])
    errors = [str(i.error) for i in read(t) if i.error is not None]
    assert len(errors) == 2
    assert errors[0].startswith(f"{folder / 'events' / '5.json'}: not JSON")
    assert errors[1] == (f"{folder / 'events'}:6: an OpenHands event needs 'source' and an "
                         "'action' or 'observation'")


THOUGHT = "The validation lives in the rules directory; next, reproduce the error."


def test_a_think_is_the_agent_s_words_not_a_call(tmp_path: Path) -> None:
    folder = v0_store(tmp_path, [("run", "ls"), ("think", THOUGHT), ("run", "pytest")])
    events = [e for _, e in events_of(folder)]
    assert [type(e).__name__ for e in events] == [
        "TurnStart", "Usage", "Call", "Result", "Usage", "Text", "Usage", "Call", "Result",
        "TaskEnd", "TurnEnd"]
    assert [e.text for e in events if isinstance(e, Text)] == [THOUGHT]
    assert [e.name for e in events if isinstance(e, Call)] == ["execute_bash"] * 2
    # its model call is billed as any other
    assert sum(isinstance(e, Usage) for e in events) == 3


def test_a_think_s_thought_is_read_once_beside_its_response_s_text(tmp_path: Path) -> None:
    # CodeActAgent's combine_thought starts the action's thought with the response's text
    response = _response("r1", "toolu_09", "think", {"thought": THOUGHT}, content="Found it.")
    trajectory = [
        {"id": 1, "source": "user", "action": "message", "args": {"content": "go"}},
        {"id": 2, "source": "agent", "action": "think",
         "message": f"I am thinking...: Found it.\n{THOUGHT}",
         "args": {"thought": f"Found it.\n{THOUGHT}"},
         "tool_call_metadata": {"function_name": "think", "tool_call_id": "toolu_09",
                                "model_response": response, "total_calls_in_response": 1}},
        {"id": 3, "source": "agent", "cause": 2, "observation": "think",
         "content": "Your thought has been logged.", "extras": {}},
    ]
    path = tmp_path / "trajectory.json"
    path.write_text(json.dumps(trajectory))
    assert [e.text for _, e in events_of(path) if isinstance(e, Text)] == ["Found it.", THOUGHT]
    # without the tool call in the response: the action's thought, the response's text cut
    response["choices"][0]["message"]["tool_calls"] = []
    path.write_text(json.dumps(trajectory))
    assert [e.text for _, e in events_of(path) if isinstance(e, Text)] == ["Found it.", THOUGHT]


def test_a_v1_think_is_the_agent_s_words_not_a_call(tmp_path: Path) -> None:
    lines = [
        _v1("MessageEvent", source="user", llm_message={"role": "user", "content": [
            {"type": "text", "text": "fix it"}]}),
        _v1("ActionEvent", source="agent", tool_name="think", tool_call_id="t1",
            action={"kind": "ThinkAction", "thought": THOUGHT},
            tool_call={"id": "t1", "name": "think",
                       "arguments": json.dumps({"thought": THOUGHT})}),
        _v1("ObservationEvent", source="environment", tool_name="think", tool_call_id="t1",
            observation={"kind": "ThinkObservation",
                         "content": [{"type": "text", "text": "Your thought has been logged."}]}),
    ]
    path = tmp_path / "events.jsonl"
    path.write_text("".join(json.dumps(x) + "\n" for x in lines))
    events = [e for _, e in events_of(path)]
    assert [type(e).__name__ for e in events] == ["TurnStart", "Text", "TurnEnd"]


def _signals(path: Path, implementation: str) -> list[tuple[str, int]]:
    out, err = io.StringIO(), io.StringIO()
    assert main(["replay", str(path), "--implementation", implementation], out=out,
                err=err) == 0, err.getvalue()
    records = [json.loads(line) for line in out.getvalue().splitlines()]
    return [(r["signal"], r["event"]) for r in records if r["kind"] == "alert"]


def test_thinks_between_calls_keep_tools_without_text_quiet(tmp_path: Path,
                                                            implementation: str) -> None:
    # 14 commands with no words: tools-without-text at the 12th call (event 35: the turn's
    # start is 0, then a usage, a call and a result per step)
    silent = v0_store(tmp_path / "a", RUNS)
    assert _signals(silent, implementation) == [("tools-without-text", 35)]
    # the same with a think after the 7th: two stretches of 7 calls, no warning (read as a
    # call, the think made it 15 calls with no words)
    thinking = v0_store(tmp_path / "b", [*RUNS[:7], ("think", THOUGHT), *RUNS[7:]])
    assert _signals(thinking, implementation) == []


def test_the_file_editor_s_refusal_is_a_failed_result(tmp_path: Path) -> None:
    # the runtime answers an edit or read the editor refused with "ERROR:\n" and its message
    # in the observation's content (the edit observation's own kind, not "error")
    folder = v0_store(tmp_path, [("run", "ls")])
    events = sorted((folder / "events").iterdir(), key=lambda p: int(p.stem))
    observation = json.loads(events[6].read_text())
    assert observation["observation"] == "run"
    for kind, content, failed in [
            ("edit", "ERROR:\nNo replacement was performed, old_str `x` did not appear "
                     "verbatim in /workspace/a.py.", True),
            ("read", "ERROR:\nInvalid `path` parameter: /workspace/b. The path does not "
                     "exist.", True),
            ("edit", "The file /workspace/a.py has been edited. ERROR:\n is in it", False),
            ("run", "ERROR:\nsomething the command printed", False)]:
        observation.update(observation=kind, content=content)
        events[6].write_text(json.dumps(observation))
        (result,) = [e for _, e in events_of(folder) if isinstance(e, Result)]
        assert bool(result.error) is failed, (kind, content)


def test_the_controller_s_last_stop_is_the_task_s_outcome(tmp_path: Path) -> None:
    """A trajectory or store without an evaluation record: its last agent_state_changed to
    error is the outcome; an error the agent ran on from (a later state change to running)
    is not."""
    events = _store_events([("run", "ls")])
    stopped = tmp_path / "stopped" / "trajectory.json"
    stopped.parent.mkdir()
    stopped.write_text(json.dumps(events))
    outcomes = [e for _, e in events_of(stopped) if isinstance(e, TaskEnd)]
    assert outcomes == [TaskEnd(unfinished=MAX_ITERATION, exhausted="steps")]
    resumed = tmp_path / "resumed" / "trajectory.json"
    resumed.parent.mkdir()
    resumed.write_text(json.dumps(events + [
        {"id": len(events), "timestamp": "2026-02-02T04:38:00.000000", "source": "environment",
         "message": "", "observation": "agent_state_changed", "content": "",
         "extras": {"agent_state": "running", "reason": ""}}]))
    assert not [e for _, e in events_of(resumed) if isinstance(e, TaskEnd)]
