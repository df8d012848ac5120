"""Bad input is a one-line typed error, never a traceback (issue 8 §5), and the Python API
validates exactly what replay validates (§6)."""

from __future__ import annotations

import io
import json
import logging
import os
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import ROOT

from tripwire import (
    ConfigError,
    Guardrails,
    GuardrailsConfig,
    InvalidEvent,
    TripwireError,
    Watchdog,
    WatchdogConfig,
)
from tripwire.base.money import MAX_USD
from tripwire.cli.main import main
from tripwire.interchange.events import parse_event
from tripwire.signals import SIGNALS

EXAMPLE = ROOT / "corpus" / "examples" / "read-file-loop.jsonl"


def cli(*argv: str, stdin: str | None = None, env: dict | None = None
        ) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "tripwire", *argv], capture_output=True,
                          text=True, input=stdin, timeout=60,
                          env={**os.environ, **(env or {})})


def one_line_error(proc: subprocess.CompletedProcess, *parts: str) -> None:
    assert proc.returncode == 2, proc.stderr
    assert "Traceback" not in proc.stderr
    lines = proc.stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith("tripwire"), proc.stderr
    for part in parts:
        assert part in lines[0]


# -- knob ranges: one range per knob, the same in both engines -----------------------------------

INT_KNOBS = [(s.id, k) for s in SIGNALS for k in s.knobs if k.kind is int]


@pytest.mark.parametrize("signal, knob", INT_KNOBS, ids=[f"{s}.{k.name}" for s, k in INT_KNOBS])
def test_every_knob_takes_its_maximum_and_refuses_one_more(implementation: str, signal: str,
                                                           knob) -> None:
    top = WatchdogConfig(signals={signal: {knob.name: knob.maximum}})
    if signal == "alternating-tool-cycle":  # the product is bounded too: pin the other one
        other = "cycles" if knob.name == "max_period" else "max_period"
        top = WatchdogConfig(signals={signal: {knob.name: knob.maximum, other: 2}})
    Watchdog(top, implementation=implementation).observe_call("t", "{}")
    with pytest.raises(ConfigError) as refused:
        WatchdogConfig(signals={signal: {knob.name: knob.maximum + 1}})
    message = str(refused.value)
    assert message.startswith(f"{signal}.{knob.name} must be an integer")
    assert str(knob.maximum) in message and str(knob.maximum + 1) in message


def test_a_huge_threshold_is_a_config_error_in_both_engines(implementation: str) -> None:
    with pytest.raises(ConfigError, match=r"^repeated-tool-call\.threshold must be an integer "
                                          r"at most 1000000 \(values below 2 count as 2\), "
                                          r"not 1000000000000$"):
        Watchdog(WatchdogConfig(signals={"repeated-tool-call": {"threshold": 10**12}}),
                 implementation=implementation)
    # below the floor is SPEC §1's clamp in the engines' API, in both alike, however far below
    # (the conformance data pins -3 as 2); a config file refuses a negative count (below)
    low = WatchdogConfig(signals={"repeated-tool-call": {"threshold": -10**12}})
    wd = Watchdog(low, implementation=implementation)
    assert [bool(wd.observe_call("t", "{}")) for _ in range(2)] == [False, True]


CLAMPED = [(s, k) for s, k in INT_KNOBS if k.clamps]  # the others refuse below their minimum


@pytest.mark.parametrize("signal, knob", CLAMPED, ids=[f"{s}.{k.name}" for s, k in CLAMPED])
def test_a_negative_count_in_a_config_file_is_a_config_error(tmp_path: Path, signal: str,
                                                             knob) -> None:
    """Issue 23: ``threshold = -3`` in a config file was silently read as 2; 0 and 1 still
    count as 2, as documented."""
    from tripwire.session.config import builtin_signals, read_config_file

    path = tmp_path / "t.toml"
    path.write_text(f"[signals.{signal}]\n{knob.name} = -3\n")
    with pytest.raises(ConfigError, match=rf"^{signal}\.{knob.name} must not be negative: it "
                                          r"must be an integer .*, not -3$"):
        GuardrailsConfig.from_file(path).resolve()
    path.write_text(f"[signals.{signal}]\n{knob.name} = 0\n")
    builtin_signals(read_config_file(path))  # taken


def test_a_negative_count_in_a_config_file_is_one_line_exit_2(tmp_path: Path) -> None:
    config = tmp_path / "t.toml"
    config.write_text('[signals.repeated-tool-call]\nthreshold = -3\n')
    one_line_error(cli("replay", "--config", str(config), str(EXAMPLE)),
                   "repeated-tool-call.threshold must not be negative")


def test_memory_below_one_is_refused_not_clamped() -> None:
    with pytest.raises(ConfigError, match=r"no-new-state\.memory must be an integer in "
                                          r"\[1, 1024\], not 0"):
        WatchdogConfig(signals={"no-new-state": {"memory": 0}})


def test_a_huge_threshold_in_a_config_file_is_one_line_exit_2(tmp_path: Path) -> None:
    config = tmp_path / "c.toml"
    config.write_text("[signals.repeated-tool-call]\nthreshold = 1000000000000\n")
    one_line_error(cli("replay", str(EXAMPLE), "--config", str(config)),
                   "repeated-tool-call.threshold", "at most 1000000")


# -- dollars: one parser, one range ---------------------------------------------------------------


def test_dollars_out_of_range_are_typed_errors_everywhere(implementation: str) -> None:
    with pytest.raises(ConfigError, match=r"max_turn_cost_usd must be at most \$1,000,000,000"):
        GuardrailsConfig(max_turn_cost_usd=1e308).resolve()
    with pytest.raises(ConfigError, match="max_session_cost_usd must be a finite"):
        GuardrailsConfig(max_session_cost_usd=float("inf")).resolve()
    with pytest.raises(ConfigError, match=r"\[cost\] max_session_usd must not be negative"):
        GuardrailsConfig(file={"cost": {"max_session_usd": -5}}).resolve()
    g = Guardrails(GuardrailsConfig(mode="warn", unattended=False, max_session_cost_usd=5.0),
                   implementation=implementation)
    g.start_turn()
    with pytest.raises(InvalidEvent, match=r"cost_usd must be at most \$1,000,000,000"):
        g.on_usage(cost_usd=1e308)
    g.on_usage(cost_usd=MAX_USD)  # the top of the range is fine, and trips the ceiling
    assert g.halted
    with pytest.raises(TripwireError, match="additional_budget_usd must be at most"):
        g.reset(additional_budget_usd=1e308)


def test_a_huge_cost_in_an_event_file_is_one_line_exit_2(tmp_path: Path) -> None:
    path = tmp_path / "s.jsonl"
    path.write_text('{"type": "usage", "cost_usd": 1e308}\n')
    one_line_error(cli("replay", str(path)), f"{path}:1:", "'cost_usd' must be at most")
    one_line_error(cli("replay", str(EXAMPLE), "--max-turn-cost-usd", "1e308"),
                   "--max-turn-cost-usd", "at most $1,000,000,000")


# -- the API's types ------------------------------------------------------------------------------


def test_wrong_types_at_construction_are_config_errors() -> None:
    with pytest.raises(ConfigError, match=r"must be a WatchdogConfig, e\.g\. WatchdogConfig"):
        GuardrailsConfig(watchdog={"repeated-tool-call": {"threshold": 3}}).resolve()
    with pytest.raises(ConfigError, match=r"for a mode alone: GuardrailsConfig\(mode='enforce'\)"):
        Guardrails("enforce")
    with pytest.raises(ConfigError, match="on_event must be a callable or None, not list"):
        Guardrails(on_event=[])
    with pytest.raises(ConfigError, match="summarize must be a callable or None, not str"):
        Guardrails(summarize="gpt")


def make(implementation: str, mode: str = "enforce") -> Guardrails:
    g = Guardrails(GuardrailsConfig(mode=mode, unattended=False), implementation=implementation)
    g.start_turn()
    return g


def api_error(call) -> str:
    with pytest.raises(InvalidEvent) as raised:
        call()
    return raised.value.message


def replay_error(event: dict) -> str:
    with pytest.raises(InvalidEvent) as raised:
        parse_event(event)
    return raised.value.message


@pytest.mark.parametrize("mode", ["off", "warn", "enforce"])
def test_the_api_refuses_what_replay_refuses(implementation: str, mode: str) -> None:
    g = make(implementation, mode)
    cases = [
        (lambda: g.on_result("t", no_op="false"),
         {"type": "result", "name": "t", "no_op": "false"}),
        (lambda: g.on_call("t", "{}", id=5), {"type": "call", "name": "t", "id": 5}),
        (lambda: g.on_result("t", id=5), {"type": "result", "name": "t", "id": 5}),
    ]
    for call, event in cases:
        assert api_error(call) == replay_error(event)
    assert api_error(lambda: g.on_text(b"hello")) == "agent text must be a str, not bytes"
    assert api_error(lambda: g.on_usage(model=5)) == "model must be a string, not int"
    assert replay_error({"type": "usage", "model": 5}).startswith("field 'model' must be a string")


def test_no_op_strings_never_count_as_no_ops(implementation: str) -> None:
    g = make(implementation)
    for _ in range(3):
        with pytest.raises(InvalidEvent):
            g.on_result("t", no_op="false")
    assert g.on_result("t", no_op=False, payload="x").proceed  # no streak was counted
    wd = Watchdog(implementation=implementation)
    with pytest.raises(InvalidEvent, match="'no_op' must be a boolean, not int"):
        wd.observe_result("t", no_op=1)
    with pytest.raises(InvalidEvent, match="agent text must be a str, not bytes"):
        wd.observe_text(b"words")


def test_a_broken_hook_is_logged_once(implementation: str, caplog) -> None:
    caplog.set_level(logging.INFO, logger="tripwire")

    def broken(event) -> None:
        raise ValueError("hook bug")

    g = Guardrails(GuardrailsConfig(mode="warn", unattended=False), on_event=broken,
                   implementation=implementation)
    for turn in range(3):
        g.start_turn()
        g.on_text("Reading.")
        for _ in range(5):
            g.on_call("read_file", json.dumps({"path": f"{turn}.py"}))
        g.end_turn()
    logged = [r for r in caplog.records if "operator callback (on_event) raised" in r.getMessage()]
    assert len(logged) == 1 and logged[0].levelno == logging.ERROR
    assert logged[0].exc_info[1].args == ("hook bug",)
    assert g.counters.snapshot()["callback_errors"] == 3  # one alert per turn, all counted


# -- the process: environment, signals, encodings ------------------------------------------------


def test_a_bad_implementation_variable_is_one_line_not_an_import_traceback() -> None:
    env = {"TRIPWIRE_IMPLEMENTATION": "fast"}
    imported = subprocess.run([sys.executable, "-c", "import tripwire"], capture_output=True,
                              text=True, env={**os.environ, **env}, timeout=60)
    assert imported.returncode == 0 and imported.stderr == ""
    one_line_error(cli("replay", str(EXAMPLE), env=env),
                   "TRIPWIRE_IMPLEMENTATION must be native, python or auto, not 'fast'")


class _Interrupting(io.BytesIO):
    """A terminal the user presses Ctrl-C at, while tripwire reads it."""

    def read(self, *args):
        raise KeyboardInterrupt

    readinto = readline = read

    def __iter__(self):
        raise KeyboardInterrupt


def test_ctrl_c_exits_130_without_a_traceback(monkeypatch: pytest.MonkeyPatch) -> None:
    stdin = io.TextIOWrapper(_Interrupting())
    monkeypatch.setattr(sys, "stdin", stdin)
    out, err = io.StringIO(), io.StringIO()
    assert main(["replay", "-"], out=out, err=err) == 130
    assert err.getvalue() == "tripwire: interrupted\n" and out.getvalue() == ""


def test_an_ascii_only_stdout_gets_escaped_json(tmp_path: Path) -> None:
    path = tmp_path / "s.jsonl"
    call = {"type": "call", "name": "read_file", "args": '{"path": "caf\u00e9.py"}'}
    path.write_text("".join(json.dumps(call) + "\n" for _ in range(5)), encoding="utf-8")
    proc = cli("replay", str(path), env={"PYTHONIOENCODING": "ascii"})
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.isascii()
    records = [json.loads(line) for line in proc.stdout.splitlines()]
    assert records[0]["signal"] == "repeated-tool-call" and "caf\u00e9.py" in records[0]["reason"]
