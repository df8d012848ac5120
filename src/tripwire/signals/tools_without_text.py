"""tools-without-text: calls in a row with no agent text between them (SPEC §1, §10.11).

Its note is answered by the agent's own words: once the agent speaks, a queued note about the
silence is withdrawn (``withdrawn_by_words``). Native twin: ``native/tools_without_text.h``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ..base.alert import WARN
from ._spec import SignalSpec, StreakDetector, threshold, threshold_setting

if TYPE_CHECKING:
    from .view import EngineView


def texts(wd: EngineView, name: str, args: Any) -> tuple[str, str, int]:
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


resolve = threshold_setting("silence_threshold")


SPEC = SignalSpec(
    "tools-without-text", WARN, None,
    "calls in a row with no agent text between them",
    (threshold(12, "calls in a row without agent text",
               "the longest textless run in 64 recorded good sessions was 10"),),
    texts, resolve,
    withdrawn_by_words=True,
)


class SilenceDetector(StreakDetector):
    """N calls in a row with no agent text between them: a streak of calls that words end."""

    def observe_call(self) -> bool:
        return self.extend()

    def observe_text(self, has_words: bool) -> None:
        if has_words:
            self.reset()

    def retract(self, calls: int) -> None:
        """The last `calls` calls are taken back: the run since the last words loses them."""
        if self.run > calls:
            self.run -= calls
        else:
            self.reset()
