"""repeated-tool-call: N calls in a row with equivalent arguments (SPEC §1, §2.3).

Native twin: ``native/repeated_tool_call.*``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from .._canonical import CanonicalCall, paths_suffix_match
from ._spec import (
    CRITICAL,
    SESSION,
    SignalSpec,
    quote_args,
    threshold,
    threshold_setting,
    tool_label,
)

if TYPE_CHECKING:
    from ..watchdog import Watchdog


def texts(wd: Watchdog, name: str, args: Any) -> tuple[str, str, int]:
    n = wd.repeat_run
    quoted = quote_args(args)
    tool = tool_label(name)
    reason = (
        f"{tool} was called {n} times in a row with equivalent arguments ({quoted}): a likely "
        "loop, since the same call returns the same result."
    )
    guidance = (
        f"You called {tool} {n} times in a row with the same arguments ({quoted}). The same call "
        "with the same arguments returns the same result, so repeating it cannot make progress. "
        "Change the arguments, use a different tool, or, if you have no next step that differs, "
        "stop calling tools and say what you are stuck on. Do not repeat this call unchanged."
    )
    return reason, guidance, n


resolve = threshold_setting("repeat_threshold")


SPEC = SignalSpec(
    "repeated-tool-call", CRITICAL, SESSION,
    "calls in a row with equivalent arguments",
    (threshold(5, "calls in a row with equivalent args",
               "the read_file loop of the seed; five identical calls are no sweep"),),
    texts, resolve,
)


class RepeatDetector:
    """N calls in a row with equivalent args, run-consistent (SPEC §2.3)."""

    def __init__(self, threshold: int, enabled: bool):
        self.threshold = threshold
        self.enabled = enabled
        self.reset()

    def reset(self) -> None:
        self.run = 0
        self.rest = 0
        self.is_object = False
        self.longest: list[str] = []  # the longest spelling seen in the run, per path key
        self.tripped = False

    def continues(self, call: CanonicalCall) -> bool:
        return (
            self.run > 0
            and call.rest == self.rest
            and call.is_object == self.is_object
            and all(paths_suffix_match(p, q) for p, q in zip(call.paths, self.longest, strict=True))
        )

    def observe(self, call: CanonicalCall) -> tuple[bool, bool]:
        """Returns (joined the current run, fired)."""
        joined = self.continues(call)
        if joined:
            self.run += 1
            self.longest = [
                p if len(p) > len(q) else q for p, q in zip(call.paths, self.longest, strict=True)
            ]
        else:
            self.run = 1
            self.rest = call.rest
            self.is_object = call.is_object
            self.longest = list(call.paths)
            self.tripped = False
        if self.enabled and self.run >= self.threshold and not self.tripped:
            self.tripped = True
            return joined, True
        return joined, False
