"""looping-text: one agent message that ends in the same stretch of text repeated lap after
lap (issue 39: a model chanting until its output limit). Native twin: ``native/looping_text.h``.

A model that falls into degenerate repetition inside one response writes the same sentence or
line again and again until the response hits its output limit. Two of 500 recorded
mini-swe-agent runs of Gemini 3 Pro on SWE-bench Verified have one: ``scikit-learn-25102``, a
208,089-character message ending in 1,420 copies of one 146-byte block, and ``sympy-15976``,
900 copies of 176 bytes ("Wait, I am confused. Is it `msubsup` or ..."). ``repeated-text``
compares whole messages, so it sees neither.

Decisions, from the recorded messages (``docs/watchdog.md``, "looping-text"):

- *Laps*: how many copies of its last ``period`` bytes the message ends in, for the periods
  at which its last 16 bytes occur again (16 to ``max_period`` bytes back, nearest first; a
  shorter chant, "the the the", is found at a multiple of its own period). Only the end is
  read: a chant that is still going on is one the model has not left (through the gateway,
  the text so far of a response still streaming), and reading the end costs a few hundred
  byte compares, not a pass over every period.
- *Not a chant*: a lap with fewer than 8 letter bytes (ASCII letters, or any byte of a
  non-ASCII character): a rule of dashes, a table's separator, a run of dots or spaces.
- *The threshold*: of 22,127 distinct recorded agent messages (the shared corpus, every format
  sample, the 500 Gemini runs, the OpenHands runaway set), none ends in even 2 laps but the two
  chants; 8 laps is at most 8 x 512 bytes of a chant.
- *Severity*: warn by default (its guidance reaches the model), promotable to a turn-scoped
  critical. The message is degenerate, the session not always: the harness answered both
  chants with a format error, the model went on, and the sympy run resolved its issue (the
  scikit-learn one did not). Cutting the turn would have ended that run.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ..base.alert import WARN
from ._spec import Knob, SignalSpec, threshold

if TYPE_CHECKING:
    from collections.abc import Callable, Mapping

    from .view import EngineView

__all__ = ["SPEC", "LoopingTextDetector", "tail_laps", "LAP_CHUNK", "LAP_LETTERS"]

#: The shortest lap searched for: the message's last LAP_CHUNK bytes must recur.
LAP_CHUNK = 16
#: A lap holds at least this many letter bytes (ASCII letters, or bytes of non-ASCII text).
LAP_LETTERS = 8

_LETTER = bytes(range(65, 91)) + bytes(range(97, 123)) + bytes(range(128, 256))


def _letter_bytes(block: bytes) -> int:
    return len(block) - len(block.translate(None, _LETTER))


def tail_laps(data: bytes, max_period: int, threshold: int) -> tuple[int, int]:
    """(laps, period): how many copies of its last ``period`` bytes ``data`` ends in. The
    candidate periods are the distances (LAP_CHUNK..max_period) at which its last LAP_CHUNK
    bytes occur again, nearest first; the first to reach ``threshold`` laps is the answer, else
    the most laps ((1, 0): no repeat; (0, 0): too short to tell)."""
    n = len(data)
    if n < 2 * LAP_CHUNK:
        return 0, 0
    tail = data[n - LAP_CHUNK:]
    start = max(0, n - LAP_CHUNK - max_period)
    end = n - LAP_CHUNK  # a match at q ends at q + LAP_CHUNK <= end: period >= LAP_CHUNK
    best = (1, 0)
    while True:
        q = data.rfind(tail, start, end)
        if q < 0:
            return best
        end = q + LAP_CHUNK - 1  # the next nearest starts before q
        period = n - LAP_CHUNK - q
        block = data[n - period:]
        if _letter_bytes(block) < LAP_LETTERS:
            continue
        laps = 1
        while (laps + 1) * period <= n and \
                data[n - (laps + 1) * period:n - laps * period] == block:
            laps += 1
        if laps > best[0]:
            best = (laps, period)
        if laps >= threshold:
            return best


def texts(wd: EngineView, name: str, detail: Any) -> tuple[str, str, int]:
    laps, period = wd.looping_text
    reason = (
        f"The agent's message ends in the same {period}-byte stretch of text repeated {laps} "
        "times: the model is looping inside its own response (degenerate repetition), not "
        "working."
    )
    guidance = (
        f"Your last response repeated the same passage {laps} times in a row. Do not repeat "
        "it. State in one or two sentences what you have decided, then take the next step."
    )
    return reason, guidance, laps


def resolve(value: Callable[[str], Any], resolved: Mapping[str, Any]) -> dict[str, Any]:
    return {"looping_text_threshold": value("threshold"),
            "looping_text_max_period": value("max_period")}


SPEC = SignalSpec(
    "looping-text", WARN, None,
    "one agent message ends in the same stretch of text repeated lap after lap",
    (
        threshold(8, "laps of one stretch at the end of a message",
                  "of 22,127 recorded agent messages none ends in 2 laps but two chants (900 "
                  "and 1,420 laps); 8 leaves room for a list of like lines"),
        Knob("max_period", 512, "longest lap, in bytes", minimum=LAP_CHUNK, maximum=4096,
             why="the recorded chants' laps are 146 and 176 bytes, peers look for 50-150 "
                 "characters; 8 laps of 512 bytes is 4 KiB of a chant"),
        Knob("severity", WARN, "warn, or critical to cut the turn (a turn-scoped critical)",
             maximum=None, kind=str, choices=("warn", "critical"),
             why="warn by default: one of the two recorded chants was in a run that went on "
                 "to resolve its issue; promote where a chanting response should end the turn"),
    ),
    texts, resolve,
)


class LoopingTextDetector:
    """Each message with words on its own: trips when it ends in ``threshold`` laps."""

    def __init__(self, threshold: int, max_period: int):
        self.threshold = threshold
        self.max_period = max_period
        self.reset()

    def reset(self) -> None:
        self.last = (0, 0)  # the last message's (laps, period)

    def observe(self, text: str) -> bool:
        self.last = tail_laps(text.encode("utf-8", "surrogatepass"), self.max_period,
                              self.threshold)
        return self.last[0] >= self.threshold
