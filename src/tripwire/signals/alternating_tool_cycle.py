"""alternating-tool-cycle: identical laps of a 2..max_period call block (SPEC §1, §10.3),
unless a lap brought a new answer (issue 39): like repeated-tool-call's poll rule, the results
decide whether identical calls are stuck. A result's answer is *new* when the turn's seen-set
(no-new-state's, SPEC §12.1) has not held it; the cycle trips only when no new answer arrived
in its repeated laps (the ``(cycles - 1) * period`` calls after its first lap). Calls with no
results, or results that only repeat earlier answers, trip as before.

Native twin: ``native/alternating_tool_cycle.*``.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any

from ..base.alert import CRITICAL, SESSION
from ..errors import ConfigError
from ..identity.shell import tool_identity
from ._spec import CYCLE_OFF, Knob, SignalSpec, one_run, tool_label
from .tool_rules import PER_TOOL_OFF

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
        "arguments each lap and no new result after the first: a loop the consecutive-repeat "
        "detector cannot see."
    )
    guidance = (
        f"You ran the same sequence of {p} tool calls ({sequence}) {laps} times with identical "
        "arguments each lap, and after the first lap they returned nothing new: the loop is "
        "not making progress. Break the pattern: change the arguments, use a different "
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
    texts, resolve, per_tool=PER_TOOL_OFF,
)


def smallest_rotation(block: tuple[int, ...]) -> tuple[int, ...]:
    """One fingerprint per cyclic pattern: a,b and b,a are the same loop (SPEC §1)."""
    return min(block[i:] + block[:i] for i in range(len(block)))


#: ``CycleDetector.quiet`` before any answer was new: no progress shown (native: UINT32_MAX)
NEVER_NEW = 0xFFFFFFFF


class CycleDetector:
    """The last p*cycles calls are `cycles` laps of a p-call block, none of whose repeated laps
    brought a new answer."""

    def __init__(self, max_period: int, cycles: int, enabled: bool):
        self.max_period = max_period
        self.cycles = cycles
        self.enabled = enabled
        self.reset()

    def reset(self) -> None:
        self.fingerprint: tuple[int, ...] | None = None
        self.period = 0
        self.quiet = NEVER_NEW  # calls since a result last brought a new answer

    def new_answer(self) -> None:
        """A result's answer was new (not in the turn's seen-set): progress."""
        self.quiet = 0

    def retract(self, calls: int) -> None:
        """The last ``calls`` calls are taken back: so are their calls since a new answer (a
        new answer among their results stays progress)."""
        if self.quiet != NEVER_NEW:
            self.quiet = max(self.quiet - calls, 0)

    def called(self) -> None:
        """One more call (counted whether the signal is on or not: statistics read it)."""
        if self.quiet != NEVER_NEW:
            self.quiet += 1

    def observe(self, keys: deque[int], flags: deque[int]) -> bool:
        n = len(keys)
        for p in range(2, self.max_period + 1):
            span = p * self.cycles
            if n < span:
                break
            tail = list(keys)[n - span :]
            if any(tail[i] != tail[i - p] for i in range(p, span)):
                continue
            # SPEC §10.3: a block whose calls form one repeat run is the repeat detector's.
            if one_run(flags, p):
                continue
            if self.quiet < span - p:
                return False  # a repeated lap brought a new answer: progress, not a loop
            fingerprint = smallest_rotation(tuple(tail[span - p :]))
            if fingerprint == self.fingerprint:
                return False
            self.fingerprint = fingerprint
            # issue 39: a block with a call of a tool whose rule turns the signal off is held
            # as reported (quiet while it goes on; a new pattern re-arms)
            if any(flags[n - j] & CYCLE_OFF for j in range(1, p + 1)):
                return False
            self.period = p
            return True
        self.fingerprint = None  # any call that breaks the pattern re-arms
        return False
