"""``tripwire replay`` with the policy layer: decisions, feedback, skips, resets, --fail-on."""

from __future__ import annotations

import io
import json
from pathlib import Path

from conftest import ROOT

from tripwire.cli.main import main

EXAMPLE = ROOT / "corpus" / "examples" / "read-file-loop.jsonl"
LOOP = {"type": "call", "name": "read_file", "args": '{"path": "a.py"}'}
START, END = {"type": "turn_start"}, {"type": "turn_end"}


def run(*argv: str, implementation: str) -> tuple[int, list[dict]]:
    out, err = io.StringIO(), io.StringIO()
    code = main(["replay", *argv, "--implementation", implementation], out=out, err=err)
    assert err.getvalue() == "" or code != 0, err.getvalue()
    return code, [json.loads(line) for line in out.getvalue().splitlines()]


def write(path: Path, *events: dict) -> str:
    path.write_text("".join(json.dumps(e) + "\n" for e in events))
    return str(path)


def kinds(records: list[dict], *wanted: str) -> list[dict]:
    return [r for r in records if r["kind"] in wanted]


def test_default_is_warn_with_no_ceilings(implementation: str) -> None:
    _, records = run(str(EXAMPLE), implementation=implementation)
    assert kinds(records, "decision", "skipped") == []


def test_enforce_halts_at_the_tripping_event_and_skips_the_rest(implementation: str) -> None:
    code, records = run(str(EXAMPLE), "--mode", "enforce", implementation=implementation)
    assert code == 0
    (decision,) = kinds(records, "decision")
    assert (decision["event"], decision["action"], decision["guardrail"]) == (
        18,
        "halt_session",
        "watchdog",
    )
    assert "repeated-tool-call" in decision["reason"]
    assert kinds(records, "skipped") == [
        {"kind": "skipped", "event": 19, "count": 10, "reason": "session halted"}
    ]
    summary = records[-1]
    assert summary["decisions"] == {"halt_session": 1} and summary["halted_sessions"] == 1
    assert summary["skipped_events"] == 10 and summary["by_signal"] == {"repeated-tool-call": 1}


def test_refused_turn_reset_and_feedback(tmp_path: Path, implementation: str) -> None:
    path = write(
        tmp_path / "s.jsonl",
        START,
        *[LOOP] * 5,
        END,  # 0-6: halted at 5
        START,
        LOOP,
        END,  # 7-9: refused, 8-9 skipped
        {"type": "reset", "guardrail": "watchdog"},  # 10
        START,
        LOOP,
        END,  # 11-13: feedback delivered at 11
    )
    _, records = run(path, "--mode", "enforce", implementation=implementation)
    got = [
        (r["kind"], r["event"], r.get("action") or r.get("signal") or r.get("reason"))
        for r in records
        if r["kind"] != "summary"
    ]
    assert got == [
        ("alert", 5, "repeated-tool-call"),
        ("decision", 5, "halt_session"),
        ("skipped", 6, "session halted"),
        ("decision", 7, "refuse_turn"),
        ("skipped", 8, "turn refused"),
        ("reset", 10, None),
        ("feedback", 11, None),
    ]
    (reset,) = kinds(records, "reset")
    assert reset["cleared"] == ["watchdog"] and reset["still_halted_by"] == []
    (feedback,) = kinds(records, "feedback")
    assert feedback["text"].startswith("[watchdog] Automated observation")
    assert "- repeated-tool-call: You called read_file 5 times" in feedback["text"]


def test_cost_ceiling_cuts_the_turn_and_replay_resumes_at_the_next(
    tmp_path: Path, implementation: str
) -> None:
    usage = {"type": "usage", "model": "m", "input_tokens": 10, "cost_usd": 0.01}
    path = write(tmp_path / "s.jsonl", START, *[usage] * 7, END, START, usage, END)
    _, records = run(path, "--max-turn-cost-usd", "0.05", implementation=implementation)
    got = [(r["kind"], r["event"], r.get("action", r.get("count"))) for r in records[:-1]]
    # seven responses with nothing after them: empty-responses' warning at the fourth (SPEC §12.4)
    assert got == [("alert", 4, None), ("decision", 5, "cut_turn"), ("skipped", 6, 3)]
    assert "this turn cost $0.0500, ceiling is $0.0500" in records[1]["reason"]


def test_a_refused_reset_is_reported(tmp_path: Path, implementation: str) -> None:
    path = write(
        tmp_path / "s.jsonl",
        START,
        {"type": "usage", "cost_usd": 1.5},
        END,
        {"type": "reset"},
        {"type": "reset", "additional_budget_usd": 1.0},
        START,
        {"type": "usage", "cost_usd": 0.1},
        END,
    )
    _, records = run(path, "--max-session-cost-usd", "1", implementation=implementation)
    refused, accepted = kinds(records, "reset_refused", "reset")
    assert refused["kind"] == "reset_refused" and refused["event"] == 3
    assert refused["needed_usd"] == 0.5 and "add at least $0.5001" in refused["reason"]
    assert accepted["kind"] == "reset" and accepted["max_session_cost_usd"] == 2.0
    assert [d["action"] for d in kinds(records, "decision")] == ["halt_session"]


def test_budget_for_an_unconfigured_bound_is_an_invalid_reset(
    tmp_path: Path, implementation: str
) -> None:
    path = write(tmp_path / "s.jsonl", {"type": "reset", "additional_budget_usd": 5})
    _, records = run(path, implementation=implementation)
    (invalid,) = kinds(records, "reset_invalid")
    assert "no per-session cost ceiling" in invalid["reason"]


def test_feedback_withdrawn(tmp_path: Path, implementation: str) -> None:
    calls = [{"type": "call", "name": "grep", "args": {"pattern": f"p{i}"}} for i in range(12)]
    path = write(
        tmp_path / "s.jsonl",
        START,
        *calls,
        {"type": "text", "text": "Nothing matches yet."},
        END,
        START,
        END,
    )
    _, records = run(path, "--mode", "feedback", implementation=implementation)
    (withdrawn,) = kinds(records, "feedback_withdrawn")
    assert withdrawn == {
        "kind": "feedback_withdrawn",
        "event": 13,
        "signal": "tools-without-text",
        "alert_event": 12,
    }
    assert kinds(records, "feedback") == []  # nothing left to deliver


def test_fail_on_gates_ci(tmp_path: Path, implementation: str) -> None:
    assert run(str(EXAMPLE), "--fail-on", "critical", implementation=implementation)[0] == 3
    out, err = io.StringIO(), io.StringIO()
    code = main(["replay", str(EXAMPLE), "--fail-on", "halt", "--implementation",
                 implementation], out=out, err=err)
    assert code == 0  # warn mode, no ceiling: a halt cannot happen, and replay says so
    assert err.getvalue() == (
        "tripwire: note: --fail-on halt cannot fire: in warn mode the watchdog never halts "
        "and no cost ceiling is set (add --mode enforce, --unattended or a --max-*-cost-usd)\n")
    assert run(str(EXAMPLE), "--fail-on", "halt", "--max-session-cost-usd", "5",
               implementation=implementation)[0] == 0  # can fire: no note
    assert (
        run(str(EXAMPLE), "--fail-on", "halt", "--mode", "enforce", implementation=implementation)[
            0
        ]
        == 3
    )
    quiet = write(tmp_path / "q.jsonl", START, LOOP, END)
    assert run(quiet, "--fail-on", "critical", implementation=implementation)[0] == 0


def test_unattended_means_enforce_and_a_ten_dollar_ceiling(
    tmp_path: Path, implementation: str
) -> None:
    path = write(tmp_path / "s.jsonl", START, {"type": "usage", "cost_usd": 10.0}, END)
    _, records = run(path, "--unattended", implementation=implementation)
    (decision,) = kinds(records, "decision")
    assert decision["action"] == "halt_session" and "ceiling is $10.0000" in decision["reason"]
    _, records = run(
        path, "--unattended", "--max-session-cost-usd", "0", implementation=implementation
    )
    assert kinds(records, "decision") == []  # an explicit 0 beats the unattended default


def test_config_file_sets_the_policy(tmp_path: Path, implementation: str) -> None:
    config = tmp_path / "tw.toml"
    config.write_text('[watchdog]\nmode = "enforce"\n[cost]\nmax_turn_usd = 0.5\n')
    _, records = run(str(EXAMPLE), "--config", str(config), implementation=implementation)
    assert [d["action"] for d in kinds(records, "decision")] == ["halt_session"]
    _, records = run(
        str(EXAMPLE), "--config", str(config), "--mode", "warn", implementation=implementation
    )
    assert kinds(records, "decision") == []  # the flag beats the file


def test_bad_mode_is_a_usage_error(implementation: str, capsys) -> None:
    try:
        run(str(EXAMPLE), "--mode", "strict", implementation=implementation)
    except SystemExit as exc:
        assert exc.code == 2
    assert "off, warn, feedback, enforce" in capsys.readouterr().err


def test_context_lines(tmp_path: Path, implementation: str) -> None:
    usage = {"type": "usage", "model": "claude-opus-4-5", "input_tokens": 160000}
    result = {"type": "result", "name": "kubectl_get", "payload": "x" * 15000}
    path = write(tmp_path / "s.jsonl", START, usage, result, result,
                 {"type": "usage", "model": "claude-opus-4-5", "input_tokens": 190001},
                 result, END, START, END)
    _, records = run(path, implementation=implementation)  # warn: reported, nothing skipped
    got = [(r["kind"], r["event"], r.get("action")) for r in records[:-1]]
    assert got == [("context", 3, "compact"), ("context", 4, "turn_cut")]
    assert records[0]["utilization"] == 0.85 and records[0]["estimated"] is True
    assert records[1] == {"kind": "context", "event": 4, "utilization": 0.950005,
                          "estimated": False, "action": "turn_cut", "enforced": False}
    _, records = run(path, "--mode", "enforce", implementation=implementation)
    got = [(r["kind"], r["event"], r.get("action")) for r in records[:-1]]
    assert got == [("context", 3, "compact"), ("decision", 4, "cut_turn"),
                   ("context", 4, "turn_cut"), ("skipped", 5, None)]
    assert records[2]["enforced"] is True and records[1]["guardrail"] == "context"
