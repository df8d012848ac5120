"""empty-responses on real recordings (issue 39): a response whose usage reports output tokens
produced something (thinking, a call, a thought signature) even where the recording kept none
of it, so healthy recordings raise no empty-responses; a run of responses with no output and
nothing after them still does. Both engines, on the replay (batch) path and on
``Guardrails.on_usage``."""

from __future__ import annotations

import io
import json
from pathlib import Path

import pytest
from conftest import need_shared

from tripwire import Guardrails, GuardrailsConfig
from tripwire.cli.main import main

SAMPLES = need_shared("format-samples")
GEMINI = SAMPLES / "gemini-cli" / "samples" / "aim-legacy-json"
HEALTHY = [
    # Gemini CLI legacy sub-agent recordings: every response has empty content and only
    # thoughts (the sub-agent's calls are not recorded), 5 to 200 output tokens each
    GEMINI / "session-2026-03-18T01-47-50316244.json",
    GEMINI / "session-2026-03-18T01-49-50316244.json",
    # Roo's condensed task: the responses condensed into the summary keep their usage
    # (ui_messages.json) but not their content
    SAMPLES / "cline-roo" / "samples" / "roo-natural-already-condensed",
]


def replay(path: Path | str, implementation: str) -> list[dict]:
    out, err = io.StringIO(), io.StringIO()
    code = main(["replay", str(path), "--implementation", implementation], out=out, err=err)
    assert code == 0, err.getvalue()
    return [json.loads(line) for line in out.getvalue().splitlines()]


def converted(path: Path) -> list[dict]:
    out, err = io.StringIO(), io.StringIO()
    assert main(["convert", str(path)], out=out, err=err) == 0, err.getvalue()
    return [json.loads(line) for line in out.getvalue().splitlines()]


def signals(records: list[dict]) -> list[str]:
    return [r["signal"] for r in records if r["kind"] == "alert"]


@pytest.mark.parametrize("path", HEALTHY, ids=lambda p: p.name)
def test_healthy_recordings_raise_no_empty_responses(path: Path, implementation: str) -> None:
    records = replay(path, implementation)
    assert "empty-responses" not in signals(records)
    assert records[-1]["kind"] == "summary" and records[-1]["alerts"] == 0


@pytest.mark.parametrize(("path", "at"), [(HEALTHY[0], 4), (HEALTHY[1], 6)],
                         ids=lambda p: getattr(p, "name", str(p)))
def test_the_same_recording_without_output_tokens_fires(
        path: Path, at: int, implementation: str, tmp_path: Path) -> None:
    # the Gemini sub-agents' events with their output counts dropped: nothing tells the
    # responses from empty ones any more, so the rule fires at the fourth response in a row
    # (01-49: three, a user message, a fourth)
    events = [{k: v for k, v in e.items() if k != "output_tokens"} for e in converted(path)]
    assert events[at]["type"] == "usage"
    file = tmp_path / "stripped.jsonl"
    file.write_text("".join(json.dumps(e) + "\n" for e in events))
    alerts = [r for r in replay(file, implementation) if r["kind"] == "alert"]
    assert [(a["event"], a["signal"]) for a in alerts] == [(at, "empty-responses")]


def test_a_really_empty_run_still_fires_on_replay(implementation: str, tmp_path: Path) -> None:
    usage = {"type": "usage", "model": "m", "input_tokens": 10, "output_tokens": 0}
    file = tmp_path / "empty.jsonl"
    file.write_text("".join(json.dumps(e) + "\n" for e in
                            [{"type": "turn_start"}, *[usage] * 5, {"type": "turn_end"}]))
    alerts = [r for r in replay(file, implementation) if r["kind"] == "alert"]
    assert [(a["event"], a["signal"]) for a in alerts] == [(4, "empty-responses")]
    # one response in the run that reported output ends it: three more are needed
    spoke = dict(usage, output_tokens=12)
    file.write_text("".join(json.dumps(e) + "\n" for e in
                            [{"type": "turn_start"}, usage, usage, spoke, usage, usage, usage,
                             {"type": "turn_end"}]))
    alerts = [r for r in replay(file, implementation) if r["kind"] == "alert"]
    assert [(a["event"], a["signal"]) for a in alerts] == [(6, "empty-responses")]


def test_on_usage_output_tokens_are_an_answer(implementation: str) -> None:
    def run(outputs: list[int | None]) -> list[list[str]]:
        g = Guardrails(GuardrailsConfig(mode="warn"), implementation=implementation)
        g.start_turn()
        return [[a.signal for a in g.on_usage(model="m", input_tokens=10,
                                              output_tokens=n).alerts] for n in outputs]

    assert run([0, 0, 0, 0]) == [[], [], [], ["empty-responses"]]
    assert run([None, None, None, None]) == [[], [], [], ["empty-responses"]]
    assert run([40, 16, 5, 12, 31, 200]) == [[]] * 6  # the Gemini sub-agent's thinking
    assert run([0, 0, 0, 7, 0, 0, 0]) == [[], [], [], [], [], [], ["empty-responses"]]


def test_openhands_record_costs_go_before_their_responses(implementation: str) -> None:
    # an OpenHands resolver record bills its model calls in ``metrics.costs`` at its end, one
    # per agent action: placed before each action, not as a run of four empty responses
    path = SAMPLES / "openhands" / "samples" / "v0-openhands-repo" / "resolver-mock_output" / \
        "output.jsonl"
    assert "empty-responses" not in signals(replay(path, implementation))
    first = [e for e in converted(path) if e["session"].endswith("#issue-5")]
    assert [e["type"] for e in first[:7]] == [
        "turn_start", "usage", "text", "call", "result", "usage", "text"]
    assert [e["cost_usd"] for e in first if e["type"] == "usage"] == [
        0.015396, 0.019719, 0.016742999999999997, 0.018855]
