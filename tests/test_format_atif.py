"""ATIF trajectories (SPEC §11.5): every sample in ``../shared/format-samples/atif`` with exact
counts, sub-agents in both reference styles (v1.7's embedded ``subagent_trajectories`` by
``trajectory_id``; files by ``trajectory_path``), continuations, and generated edge cases of
v1.2 to v1.7."""

from __future__ import annotations

import io
import json
import shutil
from pathlib import Path
from typing import Any

import pytest
from conftest import need_shared
from transcript_counts import SKIPPED, counts, events_of

from tripwire.cli.main import main
from tripwire.interchange.adapters import detect, read, transcripts
from tripwire.interchange.events import Call, Compaction, Result, Text, TurnStart, Usage

NORM = "NORMALIZED_SESSION_ID"
SUMMARY = "test-session-context-summarization-summarization-1-summary"
QUESTIONS = "test-session-context-summarization-summarization-1-questions"
ANSWERS = "test-session-context-summarization-summarization-1-answers"

#: each sample given as a file: its sub-agent and continuation files are read with it
ATIF = {
    "harbor-golden-openhands/hello-world.trajectory.json": {
        # the finish call has no result; the three system steps are prompts and notices
        NORM: {"calls": 2, "results": 1, "texts": 2, "turns": 1, "usage": 2,
               "input_tokens": 220, "output_tokens": 80, "cost_usd": 0.00135},
        SKIPPED: {"lines": 3}},
    "harbor-golden-terminus_2/hello-world-context-summarization.trajectory.json": {
        # step 5 summarizes the context (a compaction) and hands off to three sub-agents
        NORM: {"calls": 7, "results": 7, "texts": 7, "turns": 2, "usage": 7,
               "compactions": 1, "input_tokens": 6502, "output_tokens": 690,
               "cost_usd": 0.023155},
        SUMMARY: {"texts": 1, "turns": 1, "usage": 1, "input_tokens": 500,
                  "output_tokens": 200, "cost_usd": 0.00325},
        QUESTIONS: {"texts": 1, "turns": 1, "usage": 1, "input_tokens": 100,
                    "output_tokens": 20, "cost_usd": 0.00045},
        ANSWERS: {"texts": 1, "turns": 1, "usage": 1, "input_tokens": 700,
                  "output_tokens": 120, "cost_usd": 0.00295},
        SKIPPED: {"lines": 8}},  # the sub-agents' copied steps (3 + 5) ...
    "harbor-golden-terminus_2/hello-world-context-summarization.trajectory.summarization-1-"
    "summary.json": {
        SUMMARY: {"texts": 1, "turns": 1, "usage": 1, "input_tokens": 500,
                  "output_tokens": 200, "cost_usd": 0.00325},
        SKIPPED: {"lines": 3}},
    "harbor-golden-terminus_2/hello-world-context-summarization.trajectory.summarization-1-"
    "questions.json": {
        QUESTIONS: {"texts": 1, "turns": 1, "usage": 1, "input_tokens": 100,
                    "output_tokens": 20, "cost_usd": 0.00045}},
    "harbor-golden-terminus_2/hello-world-context-summarization.trajectory.summarization-1-"
    "answers.json": {
        ANSWERS: {"texts": 1, "turns": 1, "usage": 1, "input_tokens": 700,
                  "output_tokens": 120, "cost_usd": 0.00295},
        SKIPPED: {"lines": 5}},
    # the linear-history run records the command batches in its messages, no tool_calls: its
    # terminal screens answer no call (no event); its continuation is the same session
    "harbor-golden-terminus_2/hello-world-context-summarization-linear-history.trajectory."
    "json": {
        NORM: {"texts": 7, "turns": 1, "usage": 7, "compactions": 1, "input_tokens": 6502,
               "output_tokens": 690, "cost_usd": 0.023155},
        SKIPPED: {"lines": 4}},  # the continuation's four copied steps
    "harbor-golden-terminus_2/hello-world-context-summarization-linear-history.trajectory."
    "cont-1.json": {
        NORM: {"texts": 4, "usage": 4, "input_tokens": 4250, "output_tokens": 530,
               "cost_usd": 0.015925},
        SKIPPED: {"lines": 4}},
    # the parser error step has no call: its error text is the harness's feedback
    "harbor-golden-terminus_2/hello-world-invalid-json.trajectory.json": {
        NORM: {"calls": 3, "results": 3, "texts": 4, "turns": 1, "usage": 4,
               "input_tokens": 2417, "output_tokens": 200, "cost_usd": 0.0080425}},
    "harbor-golden-terminus_2/hello-world-timeout.trajectory.json": {
        NORM: {"calls": 3, "results": 3, "texts": 3, "turns": 1, "usage": 3,
               "input_tokens": 882, "output_tokens": 115, "cost_usd": 0.003355}},
    # v1.7, NeMo: no metrics recorded (no usage)
    "nemo-atof_to_atif/exmp04_atif.json": {
        "agent-004": {"calls": 1, "results": 1, "texts": 2, "turns": 1}},
    "nemo-atof_to_atif/exmp06_atif.json": {
        "orchestrator-006": {"texts": 3, "turns": 3}, SKIPPED: {"lines": 1}},
}


def sample(name: str) -> Path:
    return need_shared("format-samples", "atif", "samples", *name.split("/"))


@pytest.mark.parametrize("name", sorted(ATIF))
def test_every_atif_sample(name: str) -> None:
    path = sample(name)
    assert detect(path) == "atif"
    assert counts(path) == ATIF[name]


def test_every_atif_sample_file_is_one_of_those() -> None:
    root = need_shared("format-samples", "atif", "samples")
    assert {p.relative_to(root).as_posix() for p in root.rglob("*.json")} == set(ATIF)
    # the ATOF inputs beside NeMo's outputs are no transcripts of a known format
    for atof in root.rglob("*_atof.jsonl"):
        assert detect(atof) is None


def test_in_a_directory_each_trajectory_file_is_read_once() -> None:
    """Found in a directory, a trajectory does not read the files it refers to: they are
    the directory's own transcripts, each read once."""
    root = sample("harbor-golden-terminus_2/hello-world-timeout.trajectory.json").parent
    found = transcripts([str(root)])
    assert len(found) == 8 and {t.format for t in found} == {"atif"}
    sessions: dict[str, int] = {}
    for t in found:
        for item in read(t):
            if isinstance(item.event, Usage):
                sessions[item.session] = sessions.get(item.session, 0) + 1
    # 7 (the summarization run) + 3 + 4 (the linear run and its continuation) + 4 + 3
    assert sessions == {NORM: 21, SUMMARY: 1, QUESTIONS: 1, ANSWERS: 1}


def test_the_summarization_hands_off_to_sub_agents_where_the_step_refers_to_them() -> None:
    path = sample("harbor-golden-terminus_2/hello-world-context-summarization.trajectory.json")
    got = events_of(path)
    order = [s for s, _ in got]
    compaction = next(i for i, (_, e) in enumerate(got) if isinstance(e, Compaction))
    assert got[compaction] == (NORM, Compaction(mechanical=False, automatic=True))
    # the sub-agents' events come right after the summarization step, then the main session
    assert order[compaction + 1:compaction + 13] == [SUMMARY] * 4 + [QUESTIONS] * 4 + \
        [ANSWERS] * 4
    assert order[compaction + 13] == NORM
    calls = [e for s, e in got if isinstance(e, Call)]
    assert [c.id for c in calls] == ["call_0_1", "call_1_1", "call_2_1", "call_3_1",
                                     "call_4_1", "call_5_task_complete", "call_6_task_complete"]
    results = [e for s, e in got if isinstance(e, Result)]
    # the terminal screens have no source_call_id: each answers its step's call
    assert [(r.id, r.name) for r in results][:2] == [("call_0_1", "bash_command"),
                                                     ("call_1_1", "bash_command")]


# -- generated: each version's shapes --------------------------------------------------------

def trajectory(version: str, steps: list[dict], **root: Any) -> dict:
    numbered = [{"step_id": n, **step} for n, step in enumerate(steps, start=1)]
    return {"schema_version": f"ATIF-v{version}", "agent": {"name": "a", "version": "1",
                                                            "model_name": "gpt-4o"},
            "steps": numbered, **root}


def agent(message: Any = "", calls: list[tuple[str, str]] = (), results: list[dict] = (),
          **fields: Any) -> dict:
    step: dict[str, Any] = {"source": "agent", "message": message, **fields}
    if calls:
        step["tool_calls"] = [{"tool_call_id": i, "function_name": n, "arguments": {"x": i}}
                              for i, n in calls]
    if results:
        step["observation"] = {"results": list(results)}
    return step


def write(path: Path, document: dict) -> Path:
    path.write_text(json.dumps(document, indent=2))
    return path


@pytest.mark.parametrize("version", ["1.2", "1.3", "1.4", "1.5", "1.6", "1.7"])
def test_each_version_reads_the_same_run(tmp_path: Path, version: str) -> None:
    message: Any = "Reading." if version < "1.6" else [{"type": "text", "text": "Reading."}]
    ids = {"session_id": "run-1"} if version < "1.7" else {"session_id": "run-1",
                                                           "trajectory_id": "traj-1"}
    path = write(tmp_path / "t.json", trajectory(version, [
        {"source": "system", "message": "You are an agent."},
        {"source": "user", "message": "fix it"},
        agent(message, [("c1", "read"), ("c2", "run")],
              [{"source_call_id": "c2", "content": "1 failed",
                "extra": {"tool_result_is_error": True}},
               {"source_call_id": "c1", "content": "text"}],
              reasoning_content="private", metrics={
                  "prompt_tokens": 1000, "cached_tokens": 900, "completion_tokens": 50,
                  "cost_usd": 0.01, "extra": {"cache_creation_input_tokens": 10}}),
        {"source": "system", "message": "checkpoint", "observation": {"results": [
            {"content": "saved"}]}},  # a system step's observation (v1.2+): no event
        agent("Done.", metrics={"prompt_tokens": 1100, "completion_tokens": 5}),
    ], **ids))
    got = events_of(path)
    name = "run-1" if version < "1.7" else "traj-1"
    assert {s for s, _ in got} == {name}
    kinds = [type(e).__name__ for _, e in got]
    assert kinds == ["TurnStart", "Text", "Call", "Call", "Usage", "Result", "Result", "Text",
                     "Usage", "TurnEnd"]
    events = [e for _, e in got]
    assert events[1] == Text("Reading.")  # the reasoning is no text
    assert [(r.id, r.name, bool(r.error)) for r in events if isinstance(r, Result)] == [
        ("c2", "run", True), ("c1", "read", False)]
    usage = events[4]
    assert isinstance(usage, Usage)
    assert (usage.model, usage.input_tokens, usage.cache_read_tokens, usage.cache_write_tokens,
            usage.output_tokens, usage.cost_usd) == ("gpt-4o", 1000, 900, 10, 50, 0.01)


def test_embedded_sub_agents_by_trajectory_id(tmp_path: Path) -> None:
    """v1.7: the sub-agents are in the file; a ref names one by ``trajectory_id`` (their
    ``session_id`` is the run's, shared)."""
    sub = trajectory("1.7", [{"source": "user", "message": "search"},
                             agent("", [("s1", "grep")], [{"source_call_id": "s1",
                                                           "content": "no match"}],
                                   metrics={"prompt_tokens": 10, "completion_tokens": 1})],
                     session_id="run-7", trajectory_id="sub-a")
    unused = trajectory("1.7", [{"source": "user", "message": "x"}], trajectory_id="sub-b")
    root = trajectory("1.7", [
        {"source": "user", "message": "go"},
        agent("Delegating.", [("d1", "delegate")], [
            {"source_call_id": "d1", "content": "found nothing",
             "subagent_trajectory_ref": [{"trajectory_id": "sub-a", "session_id": "run-7"}]}]),
        agent("Done."),
    ], session_id="run-7", subagent_trajectories=[sub, unused])
    path = write(tmp_path / "trajectory.json", root)
    got = events_of(path)
    assert [(s, type(e).__name__) for s, e in got] == [
        ("run-7", "TurnStart"), ("run-7", "Text"), ("run-7", "Call"), ("run-7", "Result"),
        ("sub-a", "TurnStart"), ("sub-a", "Call"), ("sub-a", "Usage"), ("sub-a", "Result"),
        ("sub-a", "TurnEnd"), ("run-7", "Text"), ("run-7", "TurnEnd")]


def test_sub_agent_files_by_path_and_a_continuation(tmp_path: Path) -> None:
    """≤ v1.6: a ref names a sub-agent file (``trajectory_path``) and its ``session_id``; the
    continuation file goes on with the same session (its copied steps are not read again)."""
    run = tmp_path / "trial"
    run.mkdir()
    write(run / "trajectory.sub-1.json", trajectory("1.5", [
        {"source": "user", "message": "summarize"}, agent("Summary.")],
        session_id="run-5-sub-1"))
    write(run / "trajectory.cont-1.json", trajectory("1.5", [
        {"source": "user", "message": "go", "is_copied_context": True},
        agent("", [("c1", "ls")], [{"content": "a.py"}], is_copied_context=True),
        agent("", [("c3", "cat")], [{"content": "x = 1"}])], session_id="run-5"))
    write(run / "trajectory.json", trajectory("1.5", [
        {"source": "user", "message": "go"},
        agent("", [("c1", "ls")], [{"content": "a.py"}]),
        {"source": "system", "message": "Context compacted: the story so far",
         "observation": {"results": [{"subagent_trajectory_ref": [
             {"session_id": "run-5-sub-1", "trajectory_path": "trajectory.sub-1.json"},
             {"session_id": "gone", "trajectory_path": "s3://bucket/gone.json"}]}]}},
    ], session_id="run-5", continued_trajectory_ref="trajectory.cont-1.json"))
    got = events_of(run / "trajectory.json")
    assert [(s, type(e).__name__) for s, e in got] == [
        ("run-5", "TurnStart"), ("run-5", "Call"), ("run-5", "Result"),
        ("run-5", "Compaction"),
        ("run-5-sub-1", "TurnStart"), ("run-5-sub-1", "Text"), ("run-5-sub-1", "TurnEnd"),
        ("run-5", "Call"), ("run-5", "Result"), ("run-5", "TurnEnd")]
    assert got[3][1] == Compaction(mechanical=False, automatic=False)
    # the directory: each file once, by itself
    assert sorted(t.name for t in transcripts([str(run)])) == [
        "trajectory.cont-1.json", "trajectory.json", "trajectory.sub-1.json"]
    in_dir = [(i.session, type(i.event).__name__) for t in transcripts([str(run)])
              for i in read(t) if i.event is not None]
    assert len(in_dir) == len(got)


def test_a_renamed_trajectory_finds_its_renamed_siblings(tmp_path: Path) -> None:
    """Harbor writes ``trajectory.json`` and refers to ``trajectory.<rest>``; copies renamed
    ``<prefix>trajectory.json`` carry the prefix on every file (Harbor's own goldens)."""
    source = sample("harbor-golden-terminus_2/hello-world-context-summarization.trajectory."
                    "json").parent
    for name in ("hello-world-context-summarization.trajectory.json",
                 "hello-world-context-summarization.trajectory.summarization-1-answers.json"):
        shutil.copy(source / name, tmp_path / name)
    sessions = set(counts(tmp_path / "hello-world-context-summarization.trajectory.json"))
    assert sessions == {NORM, ANSWERS, SKIPPED}  # the other two files were not copied


def test_calls_written_twice_results_without_ids_and_failures(tmp_path: Path) -> None:
    path = write(tmp_path / "t.json", trajectory("1.5", [
        {"source": "user", "message": "go"},
        # three commands, two terminal screens without ids: the last two calls' answers
        agent("", [("k1", "keys"), ("k2", "keys"), ("k3", "keys")],
              [{"content": "screen 1"}, {"content": "screen 2", "extra": {"exit_code": 2}}]),
        # Harbor's OpenHands conversion writes a call again beside its result
        agent("", [("k1", "keys")], [{"source_call_id": "k1", "content": "late"}]),
        agent("", [("u1", "Serach")], [{"source_call_id": "u1", "extra": {"is_error": True},
                                        "content": "No such tool available: Serach"}]),
        agent("", results=[{"content": "ERROR: Missing required fields"}]),  # feedback
        agent("", [("z", "noop")], metrics={"prompt_tokens": 5}, llm_call_count=0),
    ], session_id="s", final_metrics={"total_cost_usd": 0.5}))
    events = [e for _, e in events_of(path)]
    assert [c.id for c in events if isinstance(c, Call)] == ["k1", "k2", "k3", "u1", "z"]
    assert [(r.id, r.payload, r.error, r.unknown_tool) for r in events
            if isinstance(r, Result)] == [
        ("k2", "screen 1", None, False), ("k3", "screen 2", "screen 2", False),
        ("k1", "late", None, False),
        ("u1", "No such tool available: Serach", "No such tool available: Serach", True)]
    # no step had metrics a model call made: the run's total is one cost-only usage
    assert [(u.input_tokens, u.cost_usd) for u in events if isinstance(u, Usage)] == [
        (None, 0.5)]
    assert sum(isinstance(e, TurnStart) for e in events) == 1


def test_a_bad_step_is_an_invalid_line_and_the_rest_is_read(tmp_path: Path) -> None:
    path = write(tmp_path / "t.json", trajectory("1.5", [
        {"source": "user", "message": "go"}, {"source": "robot", "message": "?"},
        agent("", [("c", 5)]), agent("ok")], session_id="s"))
    (t,) = transcripts([str(path)])
    items = list(read(t))
    bad = [(i.line, str(i.error)) for i in items if i.error is not None]
    assert bad == [(2, f"{path}:2: a step's source must be system, user or agent, not 'robot'"),
                   (3, f"{path}:3: a tool call needs a string 'function_name'")]
    out, err = io.StringIO(), io.StringIO()
    assert main(["replay", str(path)], out=out, err=err) == 2
    assert err.getvalue() == f"tripwire: {bad[0][1]}\n"
    forced = tmp_path / "not.json"
    forced.write_text('{"steps": []}')
    assert main(["replay", "--format", "atif", str(forced)], out=io.StringIO(), err=err) == 2
    assert err.getvalue().endswith(
        "not an ATIF trajectory (expected an object with schema_version ATIF-v1.x and "
        "'steps')\n")
