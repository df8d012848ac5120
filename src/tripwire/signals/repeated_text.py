"""repeated-text: the agent's text, whitespace collapsed, the same ``threshold`` times in a
row with nothing but calls between (SPEC §12.4; OpenHands' StuckDetector "monologue").
Native twin: ``native/repeated_text.h``.

Decisions (SPEC §12.4 leaves them open):

- *The same text*: its UTF-8 bytes with every run of ASCII whitespace made one space and the
  ends trimmed, hashed (XXH3-64, ``text_key``); the same bytes in both engines.
- *Nothing but calls between*: calls and their results neither count nor break the run;
  different words break it (and re-arm the signal), and so does a turn boundary (an operator's
  input between two messages is something between them). Text without words is not a message
  and changes nothing.
- *One behaviour, one alert*: it stands down while the calls between its messages (two or
  more) are one run of the repeat detector (the same thought before the same call is that
  detector's loop, which it reports at its own threshold), only while that detector is
  enabled; a run it stood down on counts as reported, as the name detector's does.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ..base.alert import WARN
from ..identity.canonical import xxh3_64
from ._spec import SignalSpec, threshold, threshold_setting

if TYPE_CHECKING:
    from .view import EngineView

__all__ = ["SPEC", "text_key", "RepeatedTextDetector"]


def text_key(text: str) -> int:
    """The 64-bit key of the agent's words, whitespace collapsed (native: tw::text_key)."""
    return xxh3_64(b" ".join(text.encode("utf-8", "surrogatepass").split()))


def texts(wd: EngineView, name: str, detail: Any) -> tuple[str, str, int]:
    n = wd.repeated_text_run
    reason = (
        f"The agent wrote the same message {n} times in a row with only tool calls between: "
        "a monologue, talking to itself without moving on."
    )
    guidance = (
        f"You have written the same message {n} times in a row. Repeating it does not move "
        "the task forward. Say what has changed since you first wrote it, or what is stopping "
        "you, and take a different step."
    )
    return reason, guidance, n


resolve = threshold_setting("repeated_text_threshold")


SPEC = SignalSpec(
    "repeated-text", WARN, None,
    "the same agent message in a row with nothing but calls between",
    (threshold(3, "identical agent messages in a row",
               "OpenHands' StuckDetector calls three identical agent messages a monologue"),),
    texts, resolve,
)


class RepeatedTextDetector:
    """The agent's messages in a row with one key; one alert per run."""

    def __init__(self, threshold: int):
        self.threshold = threshold
        self.reset()

    def reset(self) -> None:
        self.key = 0
        self.run = 0
        self.tripped = False
        self.calls = 0  # calls between the run's first message and its last

    def observe(self, key: int, silent_calls: int, repeat_run: int) -> bool:
        """One message with words, by its ``text_key``; ``silent_calls``: the calls since the
        last words, ``repeat_run``: the repeat detector's run (0 when it is off). True when
        the run trips."""
        if self.run and key == self.key:
            self.run += 1
            self.calls += silent_calls
        else:
            self.key, self.run, self.tripped, self.calls = key, 1, False, 0
        if self.run >= self.threshold and not self.tripped:
            self.tripped = True  # stood down or not: reported
            return not (self.calls >= 2 and repeat_run >= self.calls)
        return False
