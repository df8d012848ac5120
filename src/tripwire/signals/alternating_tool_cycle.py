"""alternating-tool-cycle: identical laps of a 2..max_period call block (SPEC §1, §10.3).

Native twin: ``native/alternating_tool_cycle.*``.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any

from ..base.alert import CRITICAL, SESSION
from ..errors import ConfigError
from ..identity.shell import tool_identity
from ._spec import Knob, SignalSpec, tool_label

if TYPE_CHECKING:
    from .view import EngineView

#: The longest call history the native rings hold (cycle laps x period, density window).
MAX_HISTORY = 64


def texts(wd: EngineView, name: str, args: Any) -> tuple[str, str, int]:
    p = wd.cycle_period
    laps = wd.settings.cycle_cycles
    shells = wd.settings.shell_tools
    names = [tool_label(tool_identity(*wd.recent_call(age), shells))
             for age in range(p - 1, -1, -1)]
    sequence = " \u2192 ".join(names)
    reason = (
        f"The same {p}-call sequence ({sequence}) ran {laps} times in a row with identical "
        "arguments each lap: a loop the consecutive-repeat detector cannot see."
    )
    guidance = (
        f"You ran the same sequence of {p} tool calls ({sequence}) {laps} times with identical "
        "arguments each lap. Nothing in the inputs changed, so nothing in the results can have: "
        "the loop cannot make progress. Break the pattern: change the arguments, use a different "
        "tool, or stop and say what you need."
    )
    return reason, guidance, laps


def resolve(value: Callable[[str], Any], resolved: Mapping[str, Any]) -> dict[str, Any]:
    max_period = value("max_period")
    cycles = value("cycles")
    if max_period * cycles > MAX_HISTORY:
        raise ConfigError(
            f"alternating-tool-cycle max_period x cycles is at most {MAX_HISTORY}, "
            f"not {max_period} x {cycles}"
        )
    return {"cycle_max_period": max_period, "cycle_cycles": cycles}


SPEC = SignalSpec(
    "alternating-tool-cycle", CRITICAL, SESSION,
    "identical laps of a 2..max_period call block",
    (
        Knob("max_period", 4, "longest block, in calls", minimum=2, maximum=16,
             why="the seed's rule is 3 laps of 2..4 calls"),
        Knob("cycles", 3, "laps that make a cycle", minimum=2, maximum=32,
             why="two laps is ordinary read-grep exploration; three laps with identical "
                 "arguments cannot be progress"),
    ),
    texts, resolve,
)


def smallest_rotation(block: tuple[int, ...]) -> tuple[int, ...]:
    """One fingerprint per cyclic pattern: a,b and b,a are the same loop (SPEC §1)."""
    return min(block[i:] + block[:i] for i in range(len(block)))


class CycleDetector:
    """The last p*cycles calls are `cycles` laps of a p-call block."""

    def __init__(self, max_period: int, cycles: int, enabled: bool):
        self.max_period = max_period
        self.cycles = cycles
        self.enabled = enabled
        self.reset()

    def reset(self) -> None:
        self.fingerprint: tuple[int, ...] | None = None
        self.period = 0

    def observe(self, keys: deque[int], joins: deque[bool]) -> bool:
        n = len(keys)
        for p in range(2, self.max_period + 1):
            span = p * self.cycles
            if n < span:
                break
            tail = list(keys)[n - span :]
            if any(tail[i] != tail[i - p] for i in range(p, span)):
                continue
            # SPEC §10.3: a block whose calls form one repeat run is the repeat detector's.
            if all(joins[n - j] for j in range(1, p)):
                continue
            fingerprint = smallest_rotation(tuple(tail[span - p :]))
            if fingerprint == self.fingerprint:
                return False
            self.fingerprint = fingerprint
            self.period = p
            return True
        self.fingerprint = None  # any call that breaks the pattern re-arms
        return False
