"""The supervision evaluation (``benchmarks/supervision``): a small version of it, exact figures
for a fixed seed on both engines, and the command that prints the documented table."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
BENCH = ROOT / "benchmarks" / "supervision"
sys.path.insert(0, str(BENCH))

import sim  # noqa: E402

# (policy, supervision, success, false successes, unnecessary stops, useful redirects,
#  redirects, mean steps, mean cost, mean reviews, mean elapsed s, outcomes) for seed 1, 4 tasks
#  per policy, the default settings
EXPECTED = [
    ("loop", "without", 3, 0, 0, 0, 0, 18.75, 0.0225, 0.0, 165.75,
     {"answered": 3, "exhausted(steps)": 1}),
    ("loop", "with", 4, 0, 0, 3, 4, 9.25, 0.0279, 1.0, 86.25, {"answered": 4}),
    ("loop", "with+check", 4, 0, 0, 3, 4, 9.25, 0.0279, 1.0, 86.25, {"answered": 4}),
    ("alternate", "without", 2, 0, 0, 0, 0, 31.25, 0.0375, 0.0, 278.25,
     {"answered": 2, "exhausted(steps)": 2}),
    # alternate: persistent-warnings (issue 39) stops the warned-but-unchanged retries sooner
    ("alternate", "with", 4, 0, 0, 4, 7, 14.5, 0.0468, 1.75, 138.0, {"answered": 4}),
    ("alternate", "with+check", 4, 0, 0, 4, 7, 14.5, 0.0468, 1.75, 138.0, {"answered": 4}),
    ("poll", "without", 4, 0, 0, 0, 0, 14.5, 0.0174, 0.0, 127.5, {"answered": 4}),
    ("poll", "with", 4, 0, 0, 0, 0, 15.5, 0.0354, 1.0, 142.5, {"answered": 4}),
    ("poll", "with+check", 4, 0, 0, 0, 0, 15.5, 0.0354, 1.0, 142.5, {"answered": 4}),
    ("slow", "without", 4, 0, 0, 0, 0, 29.5, 0.0354, 0.0, 262.5, {"answered": 4}),
    ("slow", "with", 1, 0, 3, 0, 0, 17.75, 0.0465, 1.5, 168.0,
     {"answered": 1, "blocked(no progress toward the objective)": 3}),
    ("slow", "with+check", 1, 0, 3, 0, 0, 17.75, 0.0465, 1.5, 168.0,
     {"answered": 1, "blocked(no progress toward the objective)": 3}),
    ("false_claim", "without", 2, 0, 0, 0, 0, 17.0, 0.0204, 0.0, 130.5,
     {"answered": 2, "exhausted(stop_rejections)": 2}),
    ("false_claim", "with", 4, 0, 0, 4, 5, 8.75, 0.0315, 1.25, 79.5, {"answered": 4}),
    ("false_claim", "with+check", 4, 0, 0, 4, 5, 8.75, 0.0315, 1.25, 79.5, {"answered": 4}),
    # a worker claiming success on a passing subset, a supervisor that believes it: only the
    # host's acceptance check turns the false successes into real ones (SPEC §13)
    ("claim", "without", 0, 4, 0, 0, 0, 3.0, 0.0036, 0.0, 24.0, {"answered": 4}),
    ("claim", "with", 0, 3, 0, 0, 0, 4.0, 0.0216, 1.0, 39.0,
     {"answered": 3, "blocked(no progress toward the objective)": 1}),
    ("claim", "with+check", 3, 0, 0, 1, 1, 9.25, 0.0489, 2.25, 95.25,
     {"answered": 3, "blocked(no progress toward the objective)": 1}),
]


def figures(rows: list[sim.Row]) -> list[tuple[object, ...]]:
    return [(r.policy, r.arm, r.success, r.false_successes, r.unnecessary_stops,
             r.useful_redirects, r.redirects, r.steps, round(r.cost, 6), r.reviews, r.elapsed,
             r.outcomes) for r in rows]


def test_seed_1_small(implementation: str) -> None:
    rows = sim.evaluate(1, sim.Settings(tasks=4, implementation=implementation))
    assert figures(rows) == EXPECTED


def test_a_perfect_judge_stops_nothing_that_would_succeed(implementation: str) -> None:
    rows = sim.evaluate(2, sim.Settings(tasks=3, misjudge=0.0, implementation=implementation))
    by = {(r.policy, r.arm): r for r in rows}
    for policy in sim.POLICIES:
        assert by[(policy, "with")].unnecessary_stops == 0
    # poll and slow: nothing to correct, so no redirect; the reviews only cost
    for policy in ("poll", "slow"):
        assert by[(policy, "with")].redirects == 0
        assert by[(policy, "with")].cost > by[(policy, "without")].cost
    # the stuck policies: every task answered with the supervisor's redirects
    for policy in ("loop", "alternate", "false_claim"):
        assert by[(policy, "with")].success == 3
    # a believed false claim: answered but failing, unless the acceptance check runs
    assert (by[("claim", "with")].success, by[("claim", "with")].false_successes) == (0, 3)
    assert (by[("claim", "with+check")].success,
            by[("claim", "with+check")].false_successes) == (3, 0)


def test_the_command_prints_the_table() -> None:
    out = subprocess.run([sys.executable, str(BENCH / "run.py"), "--seed", "1", "--tasks", "4"],
                         capture_output=True, text=True, timeout=300, check=True).stdout
    lines = out.splitlines()
    assert lines[0].startswith("seed 1: 4 tasks per policy, 40 steps each")
    assert lines[1].startswith("| policy | supervision | success | false successes |")
    assert len(lines) == 3 + len(EXPECTED)
    assert lines[4] == ("| loop | with | 4/4 | 0 | 0 | 3 of 4 | 9.2 | 0.0279 | 1.0 | 86 | "
                        "answered 4 |")


@pytest.mark.parametrize("bad", [["--tasks", "x"], ["--policy", "nope"]])
def test_bad_arguments(bad: list[str]) -> None:
    done = subprocess.run([sys.executable, str(BENCH / "run.py"), *bad], capture_output=True,
                          text=True, timeout=60)
    assert done.returncode == 2 and done.stderr.strip().splitlines()[-1].startswith(
        "run.py: error:")
