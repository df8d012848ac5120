"""tool-failure-streak: results in a row that failed, no success between (SPEC §1), standing
down for repeated-failure (SPEC §12.3).

Detector: ``FailureStreakDetector`` (native: ``native/tool_failure_streak.h``).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ..base.alert import WARN
from ._spec import SignalSpec, StreakDetector, error_text, threshold, threshold_setting, tool_list
from .tool_rules import PER_TOOL_OFF

if TYPE_CHECKING:
    from .view import EngineView


def texts(wd: EngineView, name: str, error: Any) -> tuple[str, str, int]:
    n = wd.failure_streak
    names = tool_list(wd.failure_names)
    last = error_text(error)
    reason = (
        f"{n} tool calls in a row failed with no success in between ({names}), so the agent "
        f"has no tool-verified evidence; watch its next answer. Last error: {last}"
    )
    guidance = (
        f"Your last {n} tool calls all failed ({names}) and none succeeded, so nothing has been "
        f"verified. Last error: {last}. Do not describe anything as healthy, fixed or resolved on "
        "this evidence. Find a call that works, or tell the user what you could not check and "
        "why, and stop."
    )
    return reason, guidance, n


resolve = threshold_setting("failure_threshold")


SPEC = SignalSpec(
    "tool-failure-streak", WARN, None,
    "results in a row that failed, no success between",
    (threshold(3, "failed results in a row",
               "three failures with no success means nothing has been verified"),),
    texts, resolve, per_tool=PER_TOOL_OFF,
)


class FailureStreakDetector(StreakDetector):
    """Failed results in a row, one alert per streak; it stands down while the last
    ``threshold`` failures of the streak are one tool with one error signature, which is
    repeated-failure's run (SPEC §12.3: one behaviour, one alert, as the name detector stands
    down for the repeat detector, §1), and a streak it stood down on counts as reported. Only
    failures repeated-failure counts (it is enabled, the tool is not exempt: SPEC §10.19)
    compare, by the low 32 bits of their pair key (``repeated_failure.pair_key``), as the
    native twin keeps them."""

    def reset(self) -> None:
        super().reset()
        self.pair = 0  # the last failure's (tool, signature) pair key, its low 32 bits
        self.same = 0  # failures in a row, at the streak's end, with that pair

    def fail(self, pair: int | None) -> bool:
        """One failure; ``pair``: its pair key when repeated-failure counts it, else None.
        True when the streak alerts."""
        tag = (pair or 0) & 0xFFFFFFFF
        self.same = (self.same + 1 if self.same and tag == self.pair else 1) \
            if pair is not None else 0
        self.pair = tag
        if not self.extend():
            return False
        return not (pair is not None and self.same >= self.threshold)  # counts as reported
