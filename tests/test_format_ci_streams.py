"""The CI forms of Claude Code and Codex: ``claude -p --output-format json|stream-json`` and
``codex exec --json`` (SPEC §11.5): every sample in ``../shared/format-samples`` with exact
counts, and generated edge cases."""

from __future__ import annotations

import io
import json
from pathlib import Path
from typing import Any

import pytest
from conftest import need_shared
from transcript_counts import SKIPPED, counts, events_of

from tripwire.cli.main import main
from tripwire.interchange.adapters import detect
from tripwire.interchange.events import Call, Compaction, Result, TaskEnd, Text, Usage

THREAD = "01a24333-1b3c-7403-9ea6-bd238f4d8115"


def samples(*parts: str) -> Path:
    return need_shared("format-samples", *parts)


def replay(path: Path, implementation: str, *argv: str) -> list[dict]:
    out = io.StringIO()
    assert main(["replay", str(path), "--implementation", implementation, *argv], out=out,
                err=io.StringIO()) == 0
    return [json.loads(line) for line in out.getvalue().splitlines()]


def write_lines(path: Path, lines: list[Any]) -> Path:
    path.write_text("".join(json.dumps(x) + "\n" for x in lines))
    return path


# -- codex exec --json ---------------------------------------------------------------------------

CODEX_EXEC = {
    "exec-turn1.jsonl": {
        THREAD: {"calls": 3, "results": 3, "failures": 1, "texts": 1, "turns": 1, "usage": 1,
                 "input_tokens": 17873, "output_tokens": 170},
        SKIPPED: {"lines": 4}},  # thread.started, the model-metadata error item, 2 reasoning
    "exec-resume-turn2.jsonl": {
        # the resumed thread's first turn in its own stream: the thread's total so far
        THREAD: {"calls": 1, "results": 1, "texts": 1, "turns": 1, "usage": 1,
                 "input_tokens": 27748, "output_tokens": 201},
        SKIPPED: {"lines": 2}},
    "exec-upstream-error.jsonl": {
        "01a24333-1f9e-7972-9469-39e635eb05a8": {"turns": 1},  # error + turn.failed
        SKIPPED: {"lines": 3}},
}


@pytest.mark.parametrize("name", sorted(CODEX_EXEC))
def test_every_codex_exec_sample(name: str) -> None:
    path = samples("codex-exec-json", "samples", "generated-codex-0.147.0-mock-llm", name)
    assert detect(path) == "codex-exec"
    assert counts(path) == CODEX_EXEC[name]


def test_codex_exec_commands_unwrapped_and_failures() -> None:
    path = samples("codex-exec-json", "samples", "generated-codex-0.147.0-mock-llm",
                   "exec-turn1.jsonl")
    events = [e for _, e in events_of(path)]
    calls = [e for e in events if isinstance(e, Call)]
    assert [(c.name, c.id, json.loads(c.args)["command"]) for c in calls] == [
        ("exec_command", "item_2", "ls -la"),
        ("exec_command", "item_3", "cat notes.txt"),
        ("exec_command", "item_5", "printf 'Hello, world!\\n' > hello.txt && cat hello.txt")]
    failed = [e for e in events if isinstance(e, Result) and e.error]
    assert [(r.id, r.error) for r in failed] == [
        ("item_3", "cat: notes.txt: No such file or directory\n")]
    # reasoning is never the agent's words
    assert [e.text for e in events if isinstance(e, Text)] == [
        "Created `hello.txt` containing `Hello, world!`. The directory was empty before, and "
        "`notes.txt` does not exist (cat exited with status 1)."]


def test_codex_exec_usage_is_charged_by_difference_within_a_thread(tmp_path: Path) -> None:
    """A stream holding a thread's turns one after another (``codex exec`` then ``codex exec
    resume`` appended): each turn is charged what its total added."""
    first = samples("codex-exec-json", "samples", "generated-codex-0.147.0-mock-llm",
                    "exec-turn1.jsonl")
    second = first.with_name("exec-resume-turn2.jsonl")
    both = tmp_path / "thread.jsonl"
    both.write_text(first.read_text() + second.read_text())
    usage = [e for _, e in events_of(both) if isinstance(e, Usage)]
    assert [(u.input_tokens, u.cache_read_tokens, u.output_tokens, u.provider)
            for u in usage] == [(17873, 12928, 170, "openai"), (27748 - 17873, 22400 - 12928,
                                                                201 - 170, "openai")]
    assert counts(both)[THREAD]["turns"] == 2


def test_codex_exec_items_of_every_kind(tmp_path: Path) -> None:
    def item(event: str, **fields: Any) -> dict:
        return {"type": event, "item": fields}

    path = write_lines(tmp_path / "exec.jsonl", [
        {"type": "thread.started", "thread_id": "t-1"},
        {"type": "turn.started"},
        item("item.started", id="item_0", type="command_execution",
             command="bash -lc 'pytest -x'", aggregated_output="", exit_code=None,
             status="in_progress"),
        item("item.updated", id="item_0", type="command_execution",
             command="bash -lc 'pytest -x'", aggregated_output="..", exit_code=None,
             status="in_progress"),
        item("item.completed", id="item_0", type="command_execution",
             command="bash -lc 'pytest -x'", aggregated_output="", exit_code=2,
             status="failed"),
        item("item.completed", id="item_1", type="command_execution", command="rm -rf /",
             aggregated_output="", exit_code=None, status="declined"),
        item("item.completed", id="item_2", type="file_change",
             changes=[{"path": "a.py", "kind": "update"}], status="failed"),
        item("item.started", id="item_3", type="mcp_tool_call", server="gh", tool="search",
             arguments={"q": "x"}, result=None, error=None, status="in_progress"),
        item("item.completed", id="item_3", type="mcp_tool_call", server="gh", tool="search",
             arguments={"q": "x"}, result=None, error={"message": "rate limited"},
             status="failed"),
        item("item.completed", id="item_4", type="web_search", query="tripwire",
             action={"type": "search"}),
        item("item.completed", id="item_5", type="collab_tool_call", tool="spawn_agent",
             sender_thread_id="t-1", receiver_thread_ids=["t-2"], prompt="look",
             agents_states={}, status="completed"),
        item("item.completed", id="item_6", type="todo_list", items=[]),
        item("item.started", id="item_7", type="command_execution", command="sleep 100",
             aggregated_output="", exit_code=None, status="in_progress"),
        {"type": "turn.completed", "usage": {"input_tokens": 100, "cached_input_tokens": 20,
                                             "output_tokens": 5}},
    ])
    events = [e for _, e in events_of(path)]
    calls = [(e.name, e.id) for e in events if isinstance(e, Call)]
    assert calls == [("exec_command", "item_0"), ("exec_command", "item_1"),
                     ("apply_patch", "item_2"), ("mcp__gh__search", "item_3"),
                     ("web_search", "item_4"), ("spawn_agent", "item_5"),
                     ("exec_command", "item_7")]  # started, never completed: no result
    results = [(e.id, e.error) for e in events if isinstance(e, Result)]
    assert results == [("item_0", "exit code 2"), ("item_1", "declined"), ("item_2", True),
                       ("item_3", "rate limited"), ("item_4", None), ("item_5", None)]
    assert json.loads(next(e for e in events if isinstance(e, Call)).args) == {
        "command": "pytest -x"}


# -- claude -p --output-format json / stream-json ------------------------------------------------

HEADLESS = {
    "gleam-sdk-fixtures/basic_query.ndjson": {"1d1e46f9-35c7-4834-b529-846d5bb82288": {
        "texts": 1, "turns": 1, "usage": 1, "input_tokens": 21580, "output_tokens": 5,
        "outcome:answered": 1}},
    "gleam-sdk-fixtures/result_success.json": {"40e7b02d-c0f9-4876-9010-f514d4eb0603": {
        "texts": 1, "turns": 1, "usage": 1, "input_tokens": 38 + 28775 + 31159,
        "output_tokens": 765, "cost_usd": 0.22844625, "outcome:answered": 1}},
    "gleam-sdk-fixtures/assistant_message.json": {"40e7b02d-c0f9-4876-9010-f514d4eb0603": {
        "calls": 1, "turns": 1, "usage": 1, "input_tokens": 20820, "output_tokens": 4}},
    "gleam-sdk-fixtures/user_message.json": {"40e7b02d-c0f9-4876-9010-f514d4eb0603": {
        "results": 1}},
    "gleam-sdk-fixtures/system_message.json": {"40e7b02d-c0f9-4876-9010-f514d4eb0603": {
        "turns": 1}},
    "claude-code-action-fixture/sample-turns.json": {"sample-session-id": {
        "calls": 3, "results": 3, "texts": 4, "turns": 1, "usage": 4, "input_tokens": 945,
        "output_tokens": 265, "outcome:answered": 1}},
}


@pytest.mark.parametrize("name", sorted(HEADLESS))
def test_every_claude_code_headless_sample(name: str) -> None:
    path = samples("claude-code-headless", "samples", *name.split("/"))
    assert detect(path) == "claude-code-headless"
    assert counts(path) == HEADLESS[name]


def test_every_headless_sample_file_is_one_of_those() -> None:
    root = samples("claude-code-headless", "samples")
    found = {p.relative_to(root).as_posix() for p in root.rglob("*")
             if p.suffix in (".json", ".ndjson", ".jsonl")}
    assert found == set(HEADLESS)


def _headless(session: str = "s-1", **fields: Any) -> dict:
    return {"session_id": session, "uuid": "u", **fields}


def _assistant(mid: str, content: list, parent: str | None = None,
               output_tokens: int = 3) -> dict:
    return _headless(type="assistant", parent_tool_use_id=parent, message={
        "id": mid, "model": "claude-sonnet-4-5", "role": "assistant", "content": content,
        "usage": {"input_tokens": 10, "cache_read_input_tokens": 90, "output_tokens":
                  output_tokens}})


def _result(**fields: Any) -> dict:
    return _headless(type="result", duration_ms=1, num_turns=3, total_cost_usd=0.5, **fields)


@pytest.mark.parametrize("result, outcome", [
    (_result(subtype="success", is_error=False, result="done"), (None, None, "done")),
    (_result(subtype="error_max_turns", is_error=False), ("steps", None, None)),
    (_result(subtype="error_max_turns", is_error=True, result="partial"),
     ("steps", None, "partial")),
    (_result(subtype="error_max_budget_usd", is_error=True), ("usd", None, None)),
    (_result(subtype="error_during_execution", is_error=True, errors=["boom"]),
     (None, "Claude Code ended the run with an error: error_during_execution", None)),
    # subtype success is no success when is_error says otherwise (an API error)
    (_result(subtype="success", is_error=True, result="Prompt is too long",
             terminal_reason="prompt_too_long", api_error_status=400),
     (None, "Claude Code ended the run with an error: prompt_too_long", "Prompt is too long")),
])
def test_headless_result_subtype_and_is_error_become_the_outcome(
        tmp_path: Path, result: dict, outcome: tuple) -> None:
    path = write_lines(tmp_path / "run.jsonl", [
        _headless(type="system", subtype="init", model="claude-sonnet-4-5"),
        _assistant("m1", [{"type": "text", "text": "working"}]), result])
    (end,) = [e for _, e in events_of(path) if isinstance(e, TaskEnd)]
    assert (end.exhausted, end.interrupted, end.answer) == outcome


@pytest.mark.parametrize("subtype, counter", [("error_max_turns", "steps"),
                                              ("error_max_budget_usd", "usd")])
def test_replay_prints_the_harness_cap_as_the_task_outcome(
        tmp_path: Path, implementation: str, subtype: str, counter: str) -> None:
    path = write_lines(tmp_path / "run.jsonl", [
        _headless(type="system", subtype="init"),
        _assistant("m1", [{"type": "tool_use", "id": "t1", "name": "Bash",
                           "input": {"command": "make"}}]),
        _headless(type="user", message={"role": "user", "content": [
            {"type": "tool_result", "tool_use_id": "t1", "content": "ok"}]}),
        _result(subtype=subtype, is_error=True)])
    records = replay(path, implementation)
    (outcome,) = [r for r in records if r["kind"] == "outcome"]
    assert (outcome["outcome"], outcome["counter"], outcome["session"], outcome["event"]) == (
        "exhausted", counter, "s-1", 4)  # turn start, call, result, usage, task end
    assert outcome["reason"] == f"Claude Code stopped the run: {subtype} after 3 turns"
    assert records[-1]["outcomes"] == {"exhausted": 1}


def test_headless_stream_edges(tmp_path: Path) -> None:
    path = write_lines(tmp_path / "run.jsonl", [
        _headless(type="system", subtype="init"),
        _headless(type="user", message={"role": "user", "content": "fix it"}),  # init's prompt
        _assistant("m1", [{"type": "thinking", "thinking": "private"}], output_tokens=1),
        _assistant("m1", [{"type": "tool_use", "id": "t1", "name": "Task", "input": {}}],
                   output_tokens=8),
        _assistant("m2", [{"type": "tool_use", "id": "t2", "name": "Grep", "input": {}}],
                   parent="t1"),
        _headless(type="user", parent_tool_use_id="t1", message={"role": "user", "content": [
            {"type": "tool_result", "tool_use_id": "t2", "is_error": True,
             "content": "<tool_use_error>Error: No such tool available: Grep</tool_use_error>"}]}),
        _headless(type="stream_event", event={"type": "message_start"}),
        _headless(type="system", subtype="compact_boundary",
                  compact_metadata={"trigger": "auto", "pre_tokens": 100}),
        _headless(type="assistant", message={
            "id": "m3", "model": "<synthetic>", "role": "assistant",
            "content": [{"type": "text", "text": "Prompt is too long"}],
            "usage": {"input_tokens": 0, "output_tokens": 0}}, is_api_error_message=True),
        _headless(type="user", message={"role": "user", "content": [
            {"type": "tool_result", "tool_use_id": "t1", "content": "found"}]}),
        _result(subtype="success", is_error=False, result="done",
                modelUsage={"claude-sonnet-4-5": {"inputTokens": 1, "costUSD": 0.5}}),
    ])
    got = events_of(path)
    sub = "s-1:task-t1"
    assert [(s, type(e).__name__) for s, e in got] == [
        ("s-1", "TurnStart"), ("s-1", "Call"),
        (sub, "TurnStart"), (sub, "Call"), (sub, "Result"),
        ("s-1", "Usage"), ("s-1", "Compaction"), ("s-1", "Result"), ("s-1", "TaskEnd"),
        ("s-1", "TurnEnd"), (sub, "Usage"), (sub, "TurnEnd")]
    usage = [e for _, e in got if isinstance(e, Usage)]
    # m1 once, from its last line (8 output tokens); a stream's result adds no usage
    assert [(u.input_tokens, u.output_tokens, u.cost_usd) for u in usage] == [
        (100, 8, None), (100, 3, None)]
    unknown = [e for _, e in got if isinstance(e, Result) and e.unknown_tool]
    assert [r.id for r in unknown] == ["t2"]
    assert [e for _, e in got if isinstance(e, Compaction)] == [Compaction(False, True)]


def test_a_transcript_line_is_not_a_headless_line(tmp_path: Path) -> None:
    """The transcript's lines carry ``sessionId`` and are Claude Code's; an interchange
    ``result`` line is interchange."""
    transcript = write_lines(tmp_path / "t.jsonl", [
        {"type": "user", "sessionId": "s", "uuid": "u", "session_id": "s",
         "message": {"role": "user", "content": "hi"}}])
    assert detect(transcript) == "claude-code"
    interchange = write_lines(tmp_path / "i.jsonl", [{"type": "result", "name": "x"}])
    assert detect(interchange) == "interchange"
