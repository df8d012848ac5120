"""no-op-streak: results in a row that report ``no_op: true`` (SPEC §1); turn-scoped (§10.5).

Detector: ``StreakDetector`` (native: ``native/streak.h``).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ..base.alert import CRITICAL, TURN
from ._spec import SignalSpec, threshold, threshold_setting, tool_list
from .tool_rules import PER_TOOL_OFF

if TYPE_CHECKING:
    from .view import EngineView


def texts(wd: EngineView, name: str, error: Any) -> tuple[str, str, int]:
    n = wd.no_op_run
    names = tool_list(wd.no_op_names)
    reason = (
        f"{n} tool results in a row reported no_op: nothing changed ({names}). The agent is "
        "repeating work its tools say is already done."
    )
    guidance = (
        f"Your last {n} tool calls each reported that they changed nothing ({names}). Repeating "
        "them cannot accomplish anything further. If the work is done, stop calling tools and "
        "give your answer; otherwise do something that changes state."
    )
    return reason, guidance, n


resolve = threshold_setting("no_op_threshold")


SPEC = SignalSpec(
    "no-op-streak", CRITICAL, TURN,
    "results in a row that report no_op: true",
    (threshold(3, "no-op results in a row",
               "a no-op is the tool's own confession and needs no margin"),),
    texts, resolve, per_tool=PER_TOOL_OFF,
)
