"""The command line's small gaps (issue 8 §8): quiet means quiet, one prefix per log line,
--version, stdin, BOM, columns, refused negative ceilings, honest reset amounts, the summary's
schema version and the per-file breakdown."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import ROOT
from test_replay_policy import END, LOOP, START, run, write

from tripwire import Guardrails, GuardrailsConfig, ResetRefused, __version__

EXAMPLE = ROOT / "corpus" / "examples" / "read-file-loop.jsonl"


def cli(*argv: str, stdin: bytes | None = None) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "tripwire", *argv], capture_output=True,
                          input=stdin, timeout=60, env=os.environ.copy())


def test_quiet_prints_the_summary_line_only() -> None:
    loud = cli("replay", str(EXAMPLE), "--mode", "enforce")
    assert b"] watchdog guardrail cut the turn in flight" in loud.stderr
    proc = cli("replay", str(EXAMPLE), "--mode", "enforce", "--quiet")
    assert proc.returncode == 0 and proc.stderr == b""
    (line,) = proc.stdout.decode().splitlines()
    assert json.loads(line)["kind"] == "summary"


LOOP_SCRIPT = """
import logging, sys
if sys.argv[1] == "configured":
    logging.basicConfig()
from tripwire import Guardrails, GuardrailsConfig
g = Guardrails(GuardrailsConfig(mode="enforce", unattended=False), session_id="s-7",
               implementation=sys.argv[2])
g.start_turn()
for _ in range(5):
    g.on_call("read_file", '{"path": "a.py"}')
"""


@pytest.mark.parametrize("setup, prefix", [
    ("configured", "WARNING:tripwire:[session s-7] "),  # the host's format names the logger
    ("unconfigured", "tripwire: [session s-7] "),       # no logging set up: stderr, prefixed
])
def test_log_lines_carry_the_tripwire_prefix_once(implementation: str, setup: str,
                                                  prefix: str) -> None:
    proc = subprocess.run([sys.executable, "-c", LOOP_SCRIPT, setup, implementation],
                          capture_output=True, text=True, timeout=60)
    lines = proc.stderr.splitlines()
    assert lines and all(line.startswith(prefix) for line in lines), proc.stderr
    assert "tripwire: tripwire" not in proc.stderr and ":tripwire:tripwire:" not in proc.stderr


def test_version() -> None:
    for flag in ("--version", "-V"):  # -V as most tools spell it (issue 36)
        proc = cli(flag)
        assert proc.returncode == 0 and proc.stdout.decode() == f"tripwire {__version__}\n"
        assert proc.stderr == b""


def test_dash_reads_standard_input() -> None:
    from_file = cli("replay", str(EXAMPLE))
    from_stdin = cli("replay", "-", stdin=EXAMPLE.read_bytes())
    assert from_stdin.returncode == 0, from_stdin.stderr
    assert from_stdin.stdout == from_file.stdout


def test_a_utf8_bom_is_skipped(tmp_path: Path, implementation: str) -> None:
    path = tmp_path / "bom.jsonl"
    path.write_bytes(b"\xef\xbb\xbf" + EXAMPLE.read_bytes())
    _, with_bom = run(str(path), implementation=implementation)
    _, plain = run(str(EXAMPLE), implementation=implementation)
    assert with_bom == plain


def test_a_truncated_line_names_its_own_column(tmp_path: Path) -> None:
    path = tmp_path / "cut.jsonl"
    path.write_bytes(b'{"type": "call", "name": "x"\r\n')
    proc = cli("replay", str(path))
    assert proc.returncode == 2
    assert proc.stderr.decode() == (f"tripwire: {path}:1: not JSON (Expecting ',' delimiter at "
                                    "column 29)\n")


@pytest.mark.parametrize("flag", ["--max-turn-cost-usd", "--max-session-cost-usd"])
def test_negative_ceilings_are_refused(flag: str, tmp_path: Path) -> None:
    proc = cli("replay", str(EXAMPLE), flag, "-1")
    assert proc.returncode == 2
    assert proc.stderr.decode() == (
        f"tripwire replay: argument {flag}: must not be negative (0 means none), not -1.0 "
        "(see tripwire replay --help)\n")
    config = tmp_path / "c.toml"
    config.write_text("[cost]\nmax_turn_usd = -0.5\n")
    proc = cli("replay", str(EXAMPLE), "--config", str(config))
    assert proc.returncode == 2
    assert proc.stderr.decode() == ("tripwire: [cost] max_turn_usd must not be negative "
                                    "(0 means none), not -0.5\n")


def test_a_refused_reset_never_asks_for_nothing(implementation: str) -> None:
    g = Guardrails(GuardrailsConfig(mode="warn", unattended=False, max_session_cost_usd=1.0),
                   implementation=implementation)
    g.start_turn()
    g.on_usage(cost_usd=1.0)  # exactly the ceiling: tripped, and short by nothing at all
    with pytest.raises(ResetRefused) as refused:
        g.reset()
    assert refused.value.reason.endswith("so it would re-trip at once; add at least $0.0001")
    assert "$0.0000" not in refused.value.reason
    g.reset(additional_budget_usd=0.0001)  # and that amount is indeed enough
    assert not g.halted


def test_the_summary_is_versioned_and_breaks_down_per_file(tmp_path: Path,
                                                           implementation: str) -> None:
    quiet = write(tmp_path / "b-quiet.jsonl", START, LOOP, END)
    loop = write(tmp_path / "a-loop.jsonl", START, *[LOOP] * 5, END)
    _, records = run(str(tmp_path), "--per-file", implementation=implementation)
    alert, summary = records
    assert alert["file"] == loop and alert["signal"] == "repeated-tool-call"
    assert summary["v"] == 1 and summary["files"] == 2 and summary["events"] == 10
    assert summary["per_file"] == [
        {"file": loop, "format": "interchange", "sessions": 1, "events": 7, "invalid_lines": 0, "skipped_lines": 0,
         "truncated_lines": 0, "skipped_events": 0, "alerts": 1,
         "by_signal": {"repeated-tool-call": 1}, "decisions": {}, "halted_sessions": 0,
         "estimated_costs": 0, "unpriced_models": []},
        {"file": quiet, "format": "interchange", "sessions": 1, "events": 3, "invalid_lines": 0, "skipped_lines": 0,
         "truncated_lines": 0, "skipped_events": 0, "alerts": 0, "by_signal": {},
         "decisions": {}, "halted_sessions": 0, "estimated_costs": 0, "unpriced_models": []},
    ]
    _, records = run(loop, implementation=implementation)
    assert "per_file" not in records[-1] and "file" not in records[0]  # one file: no file field
