"""dominant-tool-call: one canonical call is `threshold` of the last `window` calls (SPEC §1,
§10.2, §10.4). Native twin: ``native/dominant_tool_call.*``.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any

from ..base.alert import CRITICAL, SESSION
from ._spec import DENSITY_OFF, JOINED, Knob, SignalSpec, quote_args, tool_label
from .tool_rules import PER_TOOL_OFF

if TYPE_CHECKING:
    from .view import EngineView


def texts(wd: EngineView, name: str, args: Any) -> tuple[str, str, int]:
    count, window, age = wd.dominant
    tool_name, first_args = wd.recent_call(age)
    tool = tool_label(tool_name)
    quoted = quote_args(first_args)
    reason = (
        f"{tool} was called with equivalent arguments {count} of the last {window} tool calls "
        f"({quoted}): a loop with other calls interleaved, which resets the consecutive-repeat "
        "count."
    )
    guidance = (
        f"{count} of your last {window} tool calls were {tool} with the same arguments "
        f"({quoted}); the calls in between changed nothing. Use what it already told you, change "
        "the arguments, or stop and say what you are stuck on."
    )
    return reason, guidance, count


def resolve(value: Callable[[str], Any], resolved: Mapping[str, Any]) -> dict[str, Any]:
    """Clamped to [2, window]; the stand-downs default to the repeat threshold and the cycle
    max_period (resolved before this signal: the catalogue's order)."""
    window = value("window")
    defer_run = value("defer_run")
    defer_period = value("defer_cycle_period")
    return {
        "density_window": window,
        "density_threshold": min(value("threshold"), window),
        "density_defer_run": resolved["repeat_threshold"] if defer_run is None else defer_run,
        "density_defer_cycle_period": (resolved["cycle_max_period"] if defer_period is None
                                       else defer_period),
    }


SPEC = SignalSpec(
    "dominant-tool-call", CRITICAL, SESSION,
    "one canonical call is `threshold` of the last `window` calls",
    (
        Knob("window", 12, "calls in the sliding window", minimum=2, maximum=64,
             why="with threshold 8: converges inside the first full window of an interleaved "
                 "loop the repeat detector's run counter keeps resetting on"),
        Knob("threshold", 8, "occurrences of one call in the window", minimum=2,
             why="see window"),
        Knob("defer_run", None, "stand down for a repeat run this long (default: the "
             "repeat threshold; <= 0 disables)", minimum=0,
             why="a plain run is the repeat detector's to report"),
        Knob("defer_cycle_period", None, "stand down for a clean cycle up to this period "
             "(default: the cycle max_period; < 2 disables)", minimum=0, maximum=16,
             why="a clean cycle is the cycle detector's to report"),
    ),
    texts, resolve, per_tool=PER_TOOL_OFF,
)

#: How many density-reported keys are remembered; more than a handful cannot be at threshold at
#: once, and the oldest is forgotten first.
DENSITY_REPORTED_CAPACITY = 8


class DensityDetector:
    """One canonical call is `threshold` of the last `window` calls."""

    def __init__(self, window: int, threshold: int, defer_run: int, defer_cycle_period: int):
        self.window = window
        self.threshold = threshold
        self.defer_run = defer_run
        self.defer_cycle_period = defer_cycle_period
        self.reset()

    def reset(self) -> None:
        self.reported: deque[int] = deque(maxlen=DENSITY_REPORTED_CAPACITY)
        self.count = 0
        self.length = 0
        self.first_age = 0  # calls between the dominant key's earliest window entry and now

    def observe(self, keys: deque[int], flags: deque[int]) -> bool:
        n = len(keys)
        length = min(n, self.window)
        window = list(keys)[n - length :]
        window_flags = list(flags)[n - length :]
        # the dominant key: highest count, ties to the earliest first occurrence
        counts: dict[int, int] = {}
        first: dict[int, int] = {}
        for i, k in enumerate(window):
            counts[k] = counts.get(k, 0) + 1
            first.setdefault(k, i)
        dominant = max(counts, key=lambda k: (counts[k], -first[k]))
        count = counts[dominant]
        if count < self.threshold:
            self.reported.clear()  # SPEC §10.4: re-arm only when the count falls below
            return False
        if self._deferred(window, window_flags, dominant):
            return False
        # issue 39: the key of a tool whose rule turns the signal off is never reported (its
        # calls still fill the window: the other keys' share is of every call)
        if window_flags[first[dominant]] & DENSITY_OFF:
            return False
        if dominant in self.reported:
            return False
        self.reported.append(dominant)
        self.count = count
        self.length = length
        self.first_age = length - 1 - first[dominant]
        return True

    def _deferred(self, window: list[int], flags: list[int], dominant: int) -> bool:
        if self.defer_run > 0:
            # SPEC §10.2: the longest stretch of window entries the repeat detector counted as
            # one run, containing the dominant key.
            best = stretch = 0
            has_dominant = False
            for i, k in enumerate(window):
                if i == 0 or not flags[i] & JOINED:
                    stretch, has_dominant = 0, False
                stretch += 1
                has_dominant = has_dominant or k == dominant
                if has_dominant:
                    best = max(best, stretch)
            if best >= self.defer_run:
                return True
        length = len(window)
        for p in range(2, self.defer_cycle_period + 1):
            if p < length and all(window[i] == window[i - p] for i in range(p, length)):
                return True  # a clean cycle: the cycle detector's territory
        return False
