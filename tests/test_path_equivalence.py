"""The path equivalences docs/watchdog.md states (and the README cites), as the engines apply
them (issue 23: the suffix rule was used, not stated)."""

from __future__ import annotations

import json

import pytest
from conftest import ROOT

from tripwire import Watchdog, WatchdogConfig

DOC = " ".join((ROOT / "docs" / "watchdog.md").read_text(encoding="utf-8").split())


def alerts(implementation: str, paths: list[str], signal: str = "repeated-tool-call") -> int:
    knobs = {"dominant-tool-call": {"defer_run": 0, "defer_cycle_period": 0}}  # no stand-down
    wd = Watchdog(WatchdogConfig(signals={signal: knobs.get(signal, {})},
                                 only=frozenset({signal})), implementation=implementation)
    return sum(len(wd.observe_call("read_file", json.dumps({"path": p}))) for p in paths)


@pytest.mark.parametrize("first, second, same", [
    ("./main.go", "main.go", True),
    ("src/../main.go", "main.go", True),
    ("/workspace/main.go", "main.go", True),   # the suffix rule
    ("/w/xmain.go", "main.go", False),          # not on a component boundary
    ("a/doc.go", "b/doc.go", False),
    ("/a/main.go", "/b/main.go", False),       # two absolute paths: only when equal
])
def test_the_repeat_detector_takes_the_stated_spellings(implementation: str, first: str,
                                                        second: str, same: bool) -> None:
    if first != "/a/main.go":
        assert f"`{second}`" in DOC and f"`{first}`" in DOC  # the page states this pair
    assert alerts(implementation, [first, second] * 2 + [first]) == (1 if same else 0)


def test_a_run_follows_its_longest_spelling(implementation: str) -> None:
    """``main.go``, ``a/main.go``, ``b/main.go`` are two files, not one run of three."""
    assert "`main.go`, `a/main.go`, `b/main.go` are two files, not one run of three" in DOC
    assert alerts(implementation, ["main.go", "a/main.go", "a/main.go", "main.go",
                                   "b/main.go"]) == 0
    assert alerts(implementation, ["main.go", "a/main.go", "a/main.go", "main.go",
                                   "a/main.go"]) == 1


def test_other_signals_compare_canonical_keys(implementation: str) -> None:
    """``/workspace/main.go`` is not ``main.go`` outside the repeat detector (density here)."""
    calls = ["/workspace/main.go", "main.go"] * 6
    assert alerts(implementation, calls, "dominant-tool-call") == 0
    assert alerts(implementation, ["./main.go", "main.go"] * 6, "dominant-tool-call") == 1
