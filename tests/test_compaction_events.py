"""The ``compaction`` event and the result's ``unknown_tool`` flag (SPEC §0, §12.4): strict
parsing, ``convert``'s records, and every consumer taking them without error — replay and
``Fleet.observe_many`` count a compaction as an event (its index advances); two of them act on
nothing (compaction-storm's thresholds are 3 and 5: tests/test_anchor_signals.py)."""

from __future__ import annotations

import io
import json
from pathlib import Path

import pytest

from tripwire.cli.main import main
from tripwire.errors import InvalidEvent
from tripwire.fleet.fleet import Fleet
from tripwire.interchange.events import Compaction, Result, event_record, parse_event, read_events
from tripwire.session.guardrails import GuardrailsConfig


def test_a_compaction_parses_strictly_and_round_trips() -> None:
    assert parse_event({"type": "compaction"}) == Compaction(False, False)
    assert parse_event({"type": "compaction", "mechanical": True, "automatic": False,
                        "ts": 5}) == Compaction(True, False, 5.0)
    assert parse_event({"type": "compaction", "automatic": None}) == Compaction()
    for bad in ("yes", 1, 0, [], {}):
        with pytest.raises(InvalidEvent, match="field 'mechanical' must be a boolean"):
            parse_event({"type": "compaction", "mechanical": bad})
    with pytest.raises(InvalidEvent, match="field 'automatic' must be a boolean"):
        parse_event({"type": "compaction", "automatic": "true"})
    record = event_record(Compaction(mechanical=False, automatic=True))
    assert record == {"type": "compaction", "mechanical": False, "automatic": True}
    assert parse_event(record) == Compaction(False, True)


def test_unknown_tool_is_a_validated_boolean_carried_on_the_result() -> None:
    result = parse_event({"type": "result", "id": "c1", "error": "No such tool available: X",
                          "unknown_tool": True})
    assert isinstance(result, Result) and result.unknown_tool is True
    assert result.error == "No such tool available: X" and result.id == "c1"
    assert parse_event({"type": "result", "unknown_tool": False}).unknown_tool is False
    assert parse_event({"type": "result"}).unknown_tool is False
    for bad in ("true", 1, [True]):
        with pytest.raises(InvalidEvent, match="field 'unknown_tool' must be a boolean"):
            parse_event({"type": "result", "unknown_tool": bad})
    assert event_record(Result(id="c1", error=True, unknown_tool=True)) == {
        "type": "result", "id": "c1", "error": True, "unknown_tool": True}
    assert "unknown_tool" not in event_record(Result(id="c1"))  # false: left out, as no_op


def test_the_interchange_reader_reads_both(tmp_path: Path) -> None:
    path = tmp_path / "s.jsonl"
    path.write_text('{"type": "compaction", "automatic": true}\n'
                    '{"type": "result", "id": "x", "unknown_tool": true, "error": true}\n'
                    '{"type": "compaction", "mechanical": "no"}\n')
    lines = list(read_events(path))
    assert lines[0].event == Compaction(False, True)
    assert isinstance(lines[1].event, Result) and lines[1].event.unknown_tool
    assert lines[2].event is None and lines[2].error is not None
    assert str(lines[2].error) == (f"{path}:3: field 'mechanical' must be a boolean, "
                                   "not str")


def _loop(*between: dict) -> list[dict]:
    call = {"type": "call", "name": "read_file", "args": {"path": "a.py"}}
    result = {"type": "result", "name": "read_file", "payload": "same"}
    events: list[dict] = [{"type": "turn_start"}]
    for n in range(5):
        events += [call, result]
        if n == 1:
            events += list(between)
    return events


def test_replay_counts_a_compaction_as_an_event(
        implementation: str, tmp_path: Path) -> None:
    plain, compacted = tmp_path / "plain.jsonl", tmp_path / "compacted.jsonl"
    plain.write_text("".join(json.dumps(e) + "\n" for e in _loop()))
    compacted.write_text("".join(json.dumps(e) + "\n" for e in _loop(
        {"type": "compaction", "automatic": True}, {"type": "compaction", "mechanical": True})))

    def alerts(path: Path) -> tuple[list[tuple[int, str]], dict]:
        out = io.StringIO()
        assert main(["replay", str(path), "--implementation", implementation], out=out,
                    err=io.StringIO()) == 0
        records = [json.loads(line) for line in out.getvalue().splitlines()]
        return ([(r["event"], r["signal"]) for r in records if r["kind"] == "alert"],
                records[-1])

    before, summary = alerts(plain)
    assert before[0] == (9, "repeated-tool-call") and summary["events"] == 11
    after, summary = alerts(compacted)
    # the same alerts, each two events later: the compactions took indexes 5 and 6
    assert after == [(i + 2, signal) for i, signal in before]
    assert summary["events"] == 13 and summary["invalid_lines"] == 0


def test_fleet_observe_many_counts_a_compaction_in_its_indexes(implementation: str) -> None:
    def outcomes(rows: list) -> list[tuple[int, str, list[str]]]:
        fleet = Fleet(GuardrailsConfig(mode="warn"), implementation=implementation)
        return [(i, sid, [a.signal for a in getattr(o, "alerts", ())])
                for i, sid, o in fleet.observe_many(rows)]

    loop = [parse_event(e) for e in _loop()]
    plain = outcomes([("s", e) for e in loop])
    assert plain and plain[0][:2] == (9, "s")
    with_pairs = [("s", e) for e in loop[:5]] + [("s", Compaction(automatic=True))] + \
        [("s", e) for e in loop[5:]]
    assert outcomes(with_pairs) == [(i + 1, sid, a) for i, sid, a in plain]
    # a tuple row of kind "compaction", two sessions interleaved, a compaction at the start
    rows = [("t", "compaction")] + [("s", e) for e in loop[:5]] + [("t", "compaction")] + \
        [("s", e) for e in loop[5:]]
    assert outcomes(rows) == [(i + 2, sid, a) for i, sid, a in plain]
    # a column batch takes the kind too
    fleet = Fleet(GuardrailsConfig(mode="warn"), implementation=implementation)
    assert fleet.observe_many({"session": ["s", "s"], "kind": ["compaction", "turn_start"]}) \
        == []
    assert outcomes([("s", Compaction())]) == []


def test_convert_writes_both_and_replay_reads_them_back(tmp_path: Path) -> None:
    source = tmp_path / "s.jsonl"
    source.write_text('{"type": "compaction", "automatic": true}\n'
                      '{"type": "result", "id": "x", "unknown_tool": true, "error": "no"}\n')
    out = io.StringIO()
    assert main(["convert", str(source)], out=out, err=io.StringIO()) == 0
    records = [json.loads(line) for line in out.getvalue().splitlines()]
    assert [{k: v for k, v in r.items() if k != "session"} for r in records] == [
        {"type": "compaction", "mechanical": False, "automatic": True},
        {"type": "result", "id": "x", "error": "no", "unknown_tool": True}]


def test_a_task_end_says_how_the_host_ended_it() -> None:
    """A harness that ended the task itself (its max turns, its budget, an error) says so on
    its ``task_end``: ``exhausted`` names the counter of the cap, ``interrupted`` the
    reason (the headless Claude Code and OpenHands readers write them)."""
    from tripwire.interchange.events import TaskEnd

    assert parse_event({"type": "task_end", "exhausted": "steps", "unfinished": "max turns"}) \
        == TaskEnd(unfinished="max turns", exhausted="steps")
    assert parse_event({"type": "task_end", "interrupted": "error_during_execution"}) == \
        TaskEnd(interrupted="error_during_execution")
    with pytest.raises(InvalidEvent, match="field 'exhausted' must name a counter"):
        parse_event({"type": "task_end", "exhausted": "turns"})
    with pytest.raises(InvalidEvent, match="exhausted or interrupted, not both"):
        parse_event({"type": "task_end", "exhausted": "usd", "interrupted": "x"})
    with pytest.raises(InvalidEvent, match="field 'interrupted' must be a string"):
        parse_event({"type": "task_end", "interrupted": True})
    assert event_record(TaskEnd(exhausted="usd")) == {"type": "task_end", "exhausted": "usd"}


def test_replay_prints_the_outcome_a_task_end_names(tmp_path: Path,
                                                    implementation: str) -> None:
    path = tmp_path / "s.jsonl"
    path.write_text('{"type": "turn_start"}\n'
                    '{"type": "task_end", "interrupted": "the run failed", "answer": "x"}\n')
    out = io.StringIO()
    assert main(["replay", str(path), "--implementation", implementation], out=out,
                err=io.StringIO()) == 0
    (outcome,) = [json.loads(x) for x in out.getvalue().splitlines() if '"outcome"' in x
                  and '"kind": "outcome"' in x]
    assert (outcome["outcome"], outcome["reason"], outcome["event"]) == (
        "interrupted", "the run failed", 1)
