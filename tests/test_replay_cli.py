"""``tripwire replay``: the public JSON Lines contract, options and bad input, both engines."""

from __future__ import annotations

import io
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import ROOT

from tripwire.cli.main import main

EXAMPLE = ROOT / "corpus" / "examples" / "read-file-loop.jsonl"


def run(*argv: str, implementation: str) -> tuple[int, list[dict], str]:
    out, err = io.StringIO(), io.StringIO()
    code = main(["replay", *argv, "--implementation", implementation], out=out, err=err)
    return code, [json.loads(line) for line in out.getvalue().splitlines()], err.getvalue()


def write(path: Path, *events: object) -> Path:
    path.write_text("".join((e if isinstance(e, str) else json.dumps(e)) + "\n" for e in events))
    return path


def test_shipped_example_trips_the_repeat_detector(implementation: str) -> None:
    code, records, err = run(str(EXAMPLE), implementation=implementation)
    assert code == 0 and err == ""
    alerts = [r for r in records if r["kind"] == "alert"]
    assert [(a["event"], a["signal"], a["severity"], a["scope"]) for a in alerts] == [
        (18, "repeated-tool-call", "critical", "session"),
        (25, "no-new-state", "warn", None),
    ]
    assert set(alerts[0]) == {"kind", "event", "signal", "severity", "scope", "reason", "guidance"}
    assert records[-1] == {
        "kind": "summary",
        "v": 1,
        "files": 1,
        "sessions": 1,
        "events": 29,
        "invalid_lines": 0,
        "skipped_lines": 0,
        "truncated_lines": 0,
        "skipped_events": 0,
        "alerts": 2,
        "by_signal": {"no-new-state": 1, "repeated-tool-call": 1},
        "decisions": {},
        "halted_sessions": 0,
        "estimated_costs": 0,
        "unpriced_models": [],
    }


def test_quiet_prints_only_the_summary(implementation: str) -> None:
    code, records, _ = run(str(EXAMPLE), "--quiet", implementation=implementation)
    assert code == 0 and [r["kind"] for r in records] == ["summary"]
    assert records[0]["alerts"] == 2


def test_signals_restricts_the_run(implementation: str) -> None:
    _, records, _ = run(
        str(EXAMPLE), "--signals", "no-new-state,tools-without-text", implementation=implementation
    )
    assert [r["signal"] for r in records if r["kind"] == "alert"] == ["no-new-state"]


def test_unknown_signal_is_a_usage_error(implementation: str) -> None:
    # checked once the config file (which may define custom signals) is read: one line, exit 2
    code, records, err = run(str(EXAMPLE), "--signals", "repeated-tool-cal",
                             implementation=implementation)
    assert code == 2 and records == []
    assert err.startswith("tripwire: --signals: unknown signal(s) repeated-tool-cal (known: ")
    assert err.count("\n") == 1


@pytest.mark.parametrize(
    "suffix, text",
    [
        (".json", '{"signals": {"repeated-tool-call": {"threshold": 3}}}'),
        (".toml", "[signals.repeated-tool-call]\nthreshold = 3\n"),
        (".cfg", "[signals.repeated-tool-call]\nthreshold = 3\n"),  # sniffed
    ],
)
def test_config_file_sets_knobs(
    tmp_path: Path, implementation: str, suffix: str, text: str
) -> None:
    config = tmp_path / f"tripwire{suffix}"
    config.write_text(text)
    _, records, _ = run(
        str(EXAMPLE),
        "--config",
        str(config),
        "--signals",
        "repeated-tool-call",
        implementation=implementation,
    )
    assert [(r["event"], r["signal"]) for r in records if r["kind"] == "alert"] == [
        (12, "repeated-tool-call")
    ]


@pytest.mark.parametrize(
    "text, message",
    [
        (
            '{"signals": {"repeated-tool-cal": {"threshold": 3}}}',
            "unknown signal 'repeated-tool-cal'",
        ),
        ('{"signals": {"repeated-tool-call": {"treshold": 3}}}', "unknown knob 'treshold'"),
        ('{"signal": {}}', "unknown config section(s) 'signal'"),
        ('{"store": {"path": "t.db"}}', "unknown config section(s) 'store'"),  # it set nothing
        ("{not json", "cannot parse config file"),
        ('["a"]', "must hold a table"),
    ],
)
def test_bad_config_file_is_a_clear_error(
    tmp_path: Path, implementation: str, text: str, message: str
) -> None:
    config = tmp_path / "bad.json"
    config.write_text(text)
    code, records, err = run(str(EXAMPLE), "--config", str(config), implementation=implementation)
    assert code == 2 and records == []
    assert message in err


def test_missing_config_file(tmp_path: Path, implementation: str) -> None:
    code, _, err = run(
        str(EXAMPLE), "--config", str(tmp_path / "nope.toml"), implementation=implementation
    )
    assert code == 2 and "config file not found" in err


def test_missing_event_file(tmp_path: Path, implementation: str) -> None:
    code, records, err = run(str(tmp_path / "nope.jsonl"), implementation=implementation)
    assert code == 2 and records == []
    assert "nope.jsonl: no such file or directory" in err


def test_empty_file_is_zero_events(tmp_path: Path, implementation: str) -> None:
    empty = tmp_path / "empty.jsonl"
    empty.write_text("")
    code, records, _ = run(str(empty), implementation=implementation)
    assert code == 0
    assert records == [
        {
            "kind": "summary",
            "v": 1,
            "files": 1,
            "sessions": 0,
            "events": 0,
            "invalid_lines": 0,
            "skipped_lines": 0,
            "truncated_lines": 0,
            "skipped_events": 0,
            "alerts": 0,
            "by_signal": {},
            "decisions": {},
            "halted_sessions": 0,
            "estimated_costs": 0,
            "unpriced_models": [],
        }
    ]


def test_directory_replays_each_file_as_its_own_session(
    tmp_path: Path, implementation: str
) -> None:
    loop = {"type": "call", "name": "x", "args": "{}"}
    write(tmp_path / "a.jsonl", *[loop] * 3)
    (tmp_path / "sub").mkdir()
    write(tmp_path / "sub" / "b.jsonl", *[loop] * 5)
    (tmp_path / "notes.txt").write_text("not an event file")
    code, records, _ = run(str(tmp_path), implementation=implementation)
    assert code == 0
    alerts = [
        (Path(r["file"]).name, r["event"], r["signal"]) for r in records if r["kind"] == "alert"
    ]
    assert alerts == [("b.jsonl", 4, "repeated-tool-call")]  # a.jsonl's 3 do not carry over
    assert records[-1]["files"] == 2 and records[-1]["events"] == 8


def test_directory_without_event_files(tmp_path: Path, implementation: str) -> None:
    code, _, err = run(str(tmp_path), implementation=implementation)
    assert code == 2 and f"no transcripts in directory {tmp_path}" in err


@pytest.mark.parametrize(
    "line, message",
    [
        ("{not json", "not JSON"),
        ('["call"]', "must be a JSON object"),
        ('{"type": "teleport"}', "unknown event type 'teleport'"),
        ('{"type": "call"}', "needs a 'name' field"),
        ('{"type": "call", "name": 7}', "'name' must be a string"),
        ('{"type": "usage", "cost_usd": -0.5}', "must not be negative"),
        ('{"type": "usage", "cost_usd": NaN}', "must be a finite number"),
        ('{"type": "usage", "input_tokens": 1.5}', "'input_tokens' must be an integer"),
        ('{"type": "result", "name": "x", "no_op": "yes"}', "'no_op' must be a boolean"),
        (
            '{"type": "reset", "guardrail": "everything"}',
            "must be one of watchdog, cost_ceiling, all",
        ),
        ('{"type": "text"}', "needs a 'text' field"),
    ],
)
def test_invalid_line_names_file_and_line(
    tmp_path: Path, implementation: str, line: str, message: str
) -> None:
    path = write(tmp_path / "s.jsonl", {"type": "turn_start"}, "", line)
    code, records, err = run(str(path), implementation=implementation)
    assert code == 2 and records == []
    assert f"{path}:3: " in err and message in err


def test_non_utf8_line(tmp_path: Path, implementation: str) -> None:
    path = tmp_path / "s.jsonl"
    path.write_bytes(b'{"type": "text", "text": "\xff"}\n')
    code, _, err = run(str(path), implementation=implementation)
    assert code == 2 and f"{path}:1: not UTF-8" in err


def test_skip_invalid_reports_and_goes_on(tmp_path: Path, implementation: str) -> None:
    call = {"type": "call", "name": "x", "args": "{}"}
    path = write(tmp_path / "s.jsonl", call, call, "garbage", call, call, call)
    code, records, err = run(str(path), "--skip-invalid", implementation=implementation)
    assert code == 0
    assert f"{path}:3: skipped: not JSON" in err
    # the invalid line keeps its event index, so indices match the file
    assert [(r["event"], r["signal"]) for r in records if r["kind"] == "alert"] == [
        (5, "repeated-tool-call")
    ]
    assert records[-1]["invalid_lines"] == 1 and records[-1]["events"] == 5


def test_results_by_id_take_the_calls_name(tmp_path: Path, implementation: str) -> None:
    events = []
    for i in range(3):
        events.append({"type": "call", "id": f"c{i}", "name": "kubectl_get", "args": {"i": i}})
        events.append({"type": "result", "id": f"c{i}", "error": "Forbidden"})
    path = write(tmp_path / "s.jsonl", *events)
    _, records, _ = run(
        str(path), "--signals", "tool-failure-streak", implementation=implementation
    )
    (alert,) = [r for r in records if r["kind"] == "alert"]
    assert alert["event"] == 5 and "kubectl_get" in alert["reason"]


def test_conformance_kind_spelling_is_accepted(tmp_path: Path, implementation: str) -> None:
    path = write(tmp_path / "s.jsonl", *[{"kind": "call", "name": "x", "args": "{}"}] * 5)
    _, records, _ = run(str(path), implementation=implementation)
    assert records[-1]["alerts"] == 1


@pytest.mark.parametrize("implementation_env", ["native", "python"])
def test_the_module_entry_point_runs_in_a_fresh_process(implementation_env: str) -> None:
    env = {**os.environ, "TRIPWIRE_IMPLEMENTATION": implementation_env}
    proc = subprocess.run(
        [sys.executable, "-m", "tripwire", "replay", str(EXAMPLE), "--quiet"],
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr
    summary = json.loads(proc.stdout.strip().splitlines()[-1])
    assert summary["alerts"] == 2
