"""Replay and the context guard: a recording analysis reports the 95% crossing as a
``context`` line and skips nothing below ``enforce``; under ``enforce`` the cut skips the rest
of the turn (SPEC §6, §10.15). The recording has no usage events (the unknown model's
128,000-token window is assumed) and more than 370 KB of tool output before a late critical
alert: exactly the shape whose alert replay used to drop."""

from __future__ import annotations

from pathlib import Path

from test_replay_policy import END, START, kinds, run, write

LOOP = {"type": "call", "name": "read_file", "args": '{"path": "a.py"}'}
CHUNK = 40_000  # bytes per result: 10 of them are 400 KB, 133,334 estimated tokens


def recording(tmp_path: Path) -> str:
    events: list[dict] = [START]
    for n in range(10):
        events += [{"type": "call", "name": "kubectl_get", "args": {"page": n}},
                   {"type": "result", "name": "kubectl_get", "payload": f"{n:02d}" + "x" * (CHUNK - 2)}]
    events += [{"type": "text", "text": "Reading the config."}]
    events += [LOOP, {"type": "result", "name": "read_file", "payload": "same"}] * 5
    events += [END, START, {"type": "text", "text": "done"}, END]
    return write(tmp_path / "big.jsonl", *events)


# event indices: 0 turn_start, calls at 1, 3, ... results at 2, 4, ..., 20; text 21;
# the loop's calls at 22, 24, 26, 28, 30 (the 5th trips repeated-tool-call); turn_end 32
NINTH_RESULT, TENTH_RESULT, FIFTH_LOOP_CALL = 18, 20, 30


def test_warn_reports_the_context_and_every_later_alert(tmp_path: Path,
                                                        implementation: str) -> None:
    code, records = run(recording(tmp_path), implementation=implementation)
    assert code == 0
    assert kinds(records, "context") == [
        {"kind": "context", "event": NINTH_RESULT, "utilization": 0.9375, "estimated": True,
         "action": "compact"},
        {"kind": "context", "event": TENTH_RESULT, "utilization": 1.041672, "estimated": True,
         "action": "turn_cut", "enforced": False},
    ]
    assert [(a["event"], a["signal"]) for a in kinds(records, "alert")] == [
        (FIFTH_LOOP_CALL, "repeated-tool-call")]
    assert kinds(records, "decision", "skipped") == []
    summary = records[-1]
    assert summary["skipped_events"] == 0 and summary["by_signal"] == {"repeated-tool-call": 1}


def test_off_mode_skips_nothing_either(tmp_path: Path, implementation: str) -> None:
    _, records = run(recording(tmp_path), "--mode", "off", implementation=implementation)
    assert [r["action"] for r in kinds(records, "context")] == ["compact", "turn_cut"]
    assert kinds(records, "decision", "skipped", "alert") == []
    assert records[-1]["skipped_events"] == 0


def test_enforce_cuts_and_skips_the_rest_of_the_turn(tmp_path: Path,
                                                     implementation: str) -> None:
    _, records = run(recording(tmp_path), "--mode", "enforce", implementation=implementation)
    (cut,) = kinds(records, "decision")
    assert (cut["event"], cut["action"], cut["guardrail"]) == (TENTH_RESULT, "cut_turn",
                                                               "context")
    assert kinds(records, "context")[-1] == {
        "kind": "context", "event": TENTH_RESULT, "utilization": 1.041672, "estimated": True,
        "action": "turn_cut", "enforced": True}
    # the harness would have cancelled the turn: its remaining 12 events are not observed
    assert kinds(records, "skipped") == [
        {"kind": "skipped", "event": TENTH_RESULT + 1, "count": 12, "reason": "turn cut"}]
    assert kinds(records, "alert") == []
