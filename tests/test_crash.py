"""Real processes killed with SIGKILL at random points lose no halt, no cent, no chain.

``crash_trials.py`` (beside this file) forks one worker per trial from a clean interpreter and
kills it after a random delay; see its docstring. 200 trials per engine.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

HERE = Path(__file__).resolve().parent
TRIALS = int(os.environ.get("TRIPWIRE_CRASH_TRIALS", "200"))


@pytest.mark.skipif(not hasattr(os, "fork"), reason="the trials fork their workers")
def test_sigkill_at_random_points_loses_nothing(tmp_path: Path, implementation: str) -> None:
    proc = subprocess.run(
        [sys.executable, str(HERE / "crash_trials.py"), str(tmp_path), "--trials", str(TRIALS),
         "--implementation", implementation, "--seed", "7"],
        capture_output=True, text=True, timeout=600, check=False)
    assert proc.returncode == 0, proc.stderr[-2000:]
    summary = json.loads(proc.stdout.splitlines()[-1])
    assert summary["trials"] == TRIALS
    assert summary["halts_told"] > 0 and summary["final_spend_cents"] > 0  # the trials did work
    assert (summary["spend_lost_nano"], summary["halts_lost"], summary["broken_chains"]) == (
        0, 0, 0), summary
