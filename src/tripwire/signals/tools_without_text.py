"""tools-without-text: calls in a row with no agent text between them (SPEC §1, §10.11).

Its note is answered by the agent's own words: once the agent speaks, a queued note about the
silence is withdrawn (``withdrawn_by_words``). Native twin: ``native/tools_without_text.h``.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any

from ._spec import WARN, SignalSpec, threshold

if TYPE_CHECKING:
    from ..watchdog import Watchdog


def texts(wd: Watchdog, name: str, args: Any) -> tuple[str, str, int]:
    n = wd.silent_calls
    reason = (
        f"{n} tool calls in a row with no text from the agent: grinding in silence (a long "
        "legitimate sweep looks the same; raise the threshold if that is routine here)."
    )
    guidance = (
        f"You have made {n} tool calls in a row without saying anything. Before the next call, "
        "state briefly what you have found so far and what you are trying to establish."
    )
    return reason, guidance, n


def resolve(value: Callable[[str], Any], resolved: Mapping[str, Any]) -> dict[str, Any]:
    return {"silence_threshold": max(2, value("threshold"))}


SPEC = SignalSpec(
    "tools-without-text", WARN, None,
    "calls in a row with no agent text between them",
    (threshold(12, "calls in a row without agent text",
               "the longest textless run in 64 recorded good sessions was 10"),),
    texts, resolve,
    withdrawn_by_words=True,
)


class SilenceDetector:
    """N calls in a row with no agent text between them."""

    def __init__(self, threshold: int):
        self.threshold = threshold
        self.reset()

    def reset(self) -> None:
        self.run = 0
        self.reported = False

    def observe_call(self) -> bool:
        self.run += 1
        if self.run >= self.threshold and not self.reported:
            self.reported = True
            return True
        return False

    def observe_text(self, has_words: bool) -> None:
        if has_words:
            self.run = 0
            self.reported = False
