"""no-new-state: successful results in a row whose payload this turn already saw (SPEC §1,
§10.5, §10.7). Detector: ``StreakDetector`` over ``DigestMemory`` (native: ``native/streak.h``,
``native/digest_lru.*``).
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any

from ..base.alert import WARN
from ._spec import Knob, SignalSpec, threshold, tool_label
from .tool_rules import PER_TOOL_OFF

if TYPE_CHECKING:
    from .view import EngineView


def texts(wd: EngineView, name: str, error: Any) -> tuple[str, str, int]:
    n = wd.stale_results
    exempt = sorted(wd.settings.exempt_tools)
    reason = (
        f"{n} successful tool results in a row returned a payload already seen this turn (last "
        f"from {tool_label(name)}): no new information is arriving, a stall or a hand-rolled poll."
    )
    wait = (
        f" If you are waiting for something to change, use {exempt[0]} instead of polling by hand."
        if exempt
        else ""
    )
    guidance = (
        f"Your last {n} tool results returned information you already had this turn. Asking "
        "again, even reworded or with another tool, will not produce anything new. Use what you "
        f"have or change approach.{wait}"
    )
    return reason, guidance, n


def resolve(value: Callable[[str], Any], resolved: Mapping[str, Any]) -> dict[str, Any]:
    return {
        "no_new_state_threshold": value("threshold"),
        "digest_memory": value("memory"),
        "exempt_tools": frozenset(value("exempt_tools")),
    }


SPEC = SignalSpec(
    "no-new-state", WARN, None,
    "successful results in a row whose payload this turn already saw",
    (
        threshold(6, "already-seen payloads in a row",
                  "between the no-op streak's 3 and the name run's 15; an identical payload is "
                  "strong evidence with one confound (polling), hence warn and the "
                  "wait_and_verify exemption"),
        Knob("memory", 64, "distinct payload digests remembered per turn", minimum=1,
             maximum=1024, clamps=False,
             why="bounded so a session's memory is fixed: 64 digests are 1,152 native bytes"),
        Knob("exempt_tools", ("wait_and_verify",), "tools whose results never count",
             maximum=None, kind=tuple, why="polling by the tool made for it is not a stall"),
    ),
    texts, resolve, per_tool=PER_TOOL_OFF,
)


class DigestMemory:
    """The turn's last `capacity` distinct payload digests, least recently seen evicted."""

    def __init__(self, capacity: int):
        self.capacity = capacity
        self.seen: OrderedDict[bytes, None] = OrderedDict()

    def seen_before(self, digest: bytes) -> bool:
        """Remember the digest; True if it was already remembered (and refresh it)."""
        if digest in self.seen:
            self.seen.move_to_end(digest)
            return True
        if len(self.seen) >= self.capacity:
            self.seen.popitem(last=False)
        self.seen[digest] = None
        return False

    def clear(self) -> None:
        self.seen.clear()
