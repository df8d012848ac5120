"""The shipped example scripts run and tell their story."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest
from conftest import ROOT


@pytest.mark.parametrize("implementation_env", ["native", "python"])
def test_agent_loop_example(implementation_env: str) -> None:
    env = {**os.environ, "TRIPWIRE_IMPLEMENTATION": implementation_env}
    proc = subprocess.run(
        [sys.executable, str(ROOT / "examples" / "agent_loop.py")],
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr
    out = proc.stdout
    assert "- tools-without-text: You have made 12 tool calls in a row" in out
    assert "call 5 (read_file src/app.py): halt_session by watchdog" in out
    assert "turn 3: 'Any progress?'\n  refused before any model call: halted by watchdog" in out
    assert "operator: reset: cleared watchdog" in out
    assert "- repeated-tool-call: You called read_file 5 times in a row" in out
    assert "status: halted=False" in out
    assert "tripwire: [session demo] watchdog guardrail cut the turn in flight" in proc.stderr
