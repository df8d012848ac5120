"""tools-without-text: calls in a row with no agent text between them (SPEC §1, §10.11).

Its note is answered by the agent's own words: once the agent speaks, a queued note about the
silence is withdrawn (``withdrawn_by_words``). Native twin: ``native/tools_without_text.h``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ..base.alert import WARN
from ._spec import SignalSpec, StreakDetector, threshold, threshold_setting
from .tool_rules import PER_TOOL_OFF

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
    withdrawn_by_words=True, per_tool=PER_TOOL_OFF,
)


class SilenceDetector(StreakDetector):
    """N calls in a row with no agent text between them: a streak of calls that words end.
    ``run`` is every call since the last words (repeated-text, empty-responses and
    compaction-storm read it); the streak leaves out the calls of tools whose per-tool rule
    turns the signal off (issue 39), counted in ``exempt``."""

    def reset(self) -> None:
        super().reset()
        self.exempt = 0

    @property
    def streak(self) -> int:
        return self.run - self.exempt

    def observe_call(self, counted: bool = True) -> bool:
        """One call; ``counted``: False for a tool whose rule turns the signal off."""
        self.run += 1
        if not counted:
            self.exempt += 1
            return False
        if self.run - self.exempt >= self.threshold and not self.tripped:
            self.tripped = True
            return True
        return False

    def observe_text(self, has_words: bool) -> None:
        if has_words:
            self.reset()

    def retract(self, calls: int, exempt_calls: int = 0) -> None:
        """The last `calls` calls are taken back (``exempt_calls`` of them uncounted): the run
        since the last words loses them."""
        if self.run <= calls:
            self.reset()
            return
        self.run -= calls
        self.exempt = min(max(self.exempt - exempt_calls, 0), self.run)
