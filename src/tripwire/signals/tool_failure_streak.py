"""tool-failure-streak: results in a row that failed, no success between (SPEC §1).

Detector: ``StreakDetector`` (native: ``native/streak.h``).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ._spec import WARN, SignalSpec, error_text, threshold, threshold_setting, tool_list

if TYPE_CHECKING:
    from ..watchdog import Watchdog


def texts(wd: Watchdog, name: str, error: Any) -> tuple[str, str, int]:
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
    texts, resolve,
)
