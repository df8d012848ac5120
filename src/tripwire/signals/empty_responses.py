"""empty-responses: model responses in a row with neither a call nor agent text after them
(SPEC §12.4; OpenHands' StuckDetector empty-response loop). Native twin:
``native/empty_responses.h``.

Decisions (SPEC §12.4 leaves them open):

- *A model response* is a usage event (``on_usage``), or ``on_response()`` for a host that
  reports no usage (one or the other per response, never both).
- *Empty*: nothing between it and the next response: no call and no words. Readers emit a
  response's usage before its content (OpenAI-style) or after it (Claude Code); counting the
  empty gaps between consecutive responses reads both orders the same, so the signal trips at
  the response that shows the ``threshold``-th empty one in a row. A call or words end the run
  and re-arm it.
- *Output tokens are an answer*: a response whose usage reports output tokens produced
  something (thinking, a call, a thought signature) even when the recording kept none of it
  (Gemini CLI's legacy sub-agent files keep only ``thoughts``; a condensed Roo history drops the
  condensed responses but not their usage): it ends the run as words or a call do. A response
  with no output tokens, or a host's ``on_response`` (no count), is judged by what follows.
- *No cost on the call path*: the detector reads the silence run (``tools-without-text``'s
  count of calls since the agent last spoke), which every call already advances, and notes at
  each response where it stood: a call since moved it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ..base.alert import WARN
from ._spec import SignalSpec, StreakDetector, threshold, threshold_setting

if TYPE_CHECKING:
    from .view import EngineView

__all__ = ["SPEC", "EmptyResponsesDetector"]


def texts(wd: EngineView, name: str, detail: Any) -> tuple[str, str, int]:
    n = wd.empty_responses
    reason = (
        f"{n} model responses in a row had neither a tool call nor any text: the model is "
        "answering with nothing."
    )
    guidance = (
        f"Your last {n} responses were empty: no tool call and no text. Reply with the next "
        "step you will take, or with your answer."
    )
    return reason, guidance, n


resolve = threshold_setting("empty_responses_threshold")


SPEC = SignalSpec(
    "empty-responses", WARN, None,
    "model responses in a row with neither a call nor agent text",
    (threshold(3, "empty model responses in a row",
               "OpenHands' StuckDetector stops at three empty responses in a row"),),
    texts, resolve,
)


class EmptyResponsesDetector(StreakDetector):
    """Empty gaps between consecutive model responses, in a row; one alert per run."""

    def reset(self) -> None:
        super().reset()
        self.primed = False  # a response has been seen (the gap after it is open)
        self.spoke = False   # words since that response
        self.mark = 0        # the silence run at that response

    def observe_text(self, has_words: bool) -> None:
        if has_words:
            self.spoke = True

    def observe_response(self, silent_calls: int, produced: bool = False) -> bool:
        """One model response; ``silent_calls``: the silence run now; ``produced``: its usage
        reported output tokens. True when it trips."""
        empty = self.primed and not self.spoke and silent_calls == self.mark and not produced
        self.primed, self.spoke, self.mark = True, False, silent_calls
        if empty:
            return self.extend()
        self.run, self.tripped = 0, False
        return False
