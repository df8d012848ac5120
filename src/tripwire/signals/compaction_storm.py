"""compaction-storm: compactions that cannot make room for progress (SPEC §12.4; OpenHands'
StuckDetector condensation loop, opencode #37871's 104 compactions in an hour). Native twin:
``native/compaction_storm.h``.

It trips at ``per_turn`` compactions within one turn, or at ``in_a_row`` compactions with no
turn ending in agent text between them, whichever comes first, counting only compactions with
no *new answer* between them; one alert until a turn ends in agent text (the context let the
agent answer) or a new answer arrives, either of which re-arms it.

Decisions (SPEC §12.4 leaves them open):

- *A compaction* is a recorded ``compaction`` event (``Guardrails.on_compaction``: a reader's
  compact boundary, condensation or ``compacted`` line) or a ``Guardrails.compact()`` that
  ran (not one skipped because context management is off), whoever started it: the operator's
  ``/compact`` that does not free enough loops the same way.
- *A turn ending in agent text*: at ``end_turn``, the agent said something with words in the
  turn and made no call after it (the silence run is 0). A turn cut or ended after a call is
  not one; a turn that never ends (no ``end_turn``) never re-arms.
- *Within one turn*: the per-turn count starts again at each turn boundary.
- *Work between compactions* (issue 39): a result whose answer the turn's seen-set had not held
  (no-new-state's notion of new information, SPEC §12.1) starts both counts again. A long turn
  that learns something between condensations is working, however many it needs; a storm
  re-reads what it already had (answers the seen-set holds), or does nothing at all, between
  them. Calls alone are not work (their results decide), nor are words.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any

from ..base.alert import CRITICAL, SESSION
from ._spec import Knob, SignalSpec

if TYPE_CHECKING:
    from .view import EngineView

__all__ = ["SPEC", "CompactionStormDetector"]


def texts(wd: EngineView, name: str, detail: Any) -> tuple[str, str, int]:
    turn, run = wd.compaction_storm
    reason = (
        f"The context was compacted {turn} times in this turn and {run} times since a turn "
        "last ended in an answer: compaction cannot free enough room for the agent to make "
        "progress, and each one costs a summarization."
    )
    guidance = (
        f"Your context has been compacted {run} times without you reaching an answer. Stop "
        "reading more material: write down what you have established and what remains, then "
        "answer with what you have or ask for the one thing you need."
    )
    return reason, guidance, max(turn, run)


def resolve(value: Callable[[str], Any], resolved: Mapping[str, Any]) -> dict[str, Any]:
    return {"compaction_per_turn": value("per_turn"),
            "compaction_in_a_row": value("in_a_row")}


SPEC = SignalSpec(
    "compaction-storm", CRITICAL, SESSION,
    "compactions within a turn, or in a row without a turn that ends in an answer, with "
    "no new answer between them",
    (
        Knob("per_turn", 3, "compactions within one turn with no new answer between them",
             minimum=2,
             why="three summarizations in one turn that let the agent learn nothing new are "
                 "not making room for work; OpenHands stops ten condensations with no event "
                 "between, opencode users reported 104 in an hour"),
        Knob("in_a_row", 5, "compactions with no new answer and no turn ending in agent text "
             "between them", minimum=2,
             why="across turns a compaction per turn is normal for long work; five without "
                 "one answer or one new result is a loop"),
    ),
    texts, resolve,
)


class CompactionStormDetector:
    """Compactions per turn and since the last turn that ended in agent text; one alert until
    such a turn."""

    def __init__(self, per_turn: int, in_a_row: int):
        self.per_turn, self.in_a_row = per_turn, in_a_row
        self.reset()

    def reset(self) -> None:
        self.turn = 0
        self.run = 0
        self.tripped = False
        self.spoke = False  # words in this turn

    def observe(self) -> bool:
        """One compaction; True when it trips."""
        self.turn += 1
        self.run += 1
        if (self.turn >= self.per_turn or self.run >= self.in_a_row) and not self.tripped:
            self.tripped = True
            return True
        return False

    def new_answer(self) -> None:
        """A result brought an answer the turn had not seen: the compactions made room for
        work, so both counts start again (and the alert re-arms)."""
        self.turn = self.run = 0
        self.tripped = False

    def observe_text(self, has_words: bool) -> None:
        if has_words:
            self.spoke = True

    def end_turn(self, silent_calls: int) -> None:
        """The turn ends: in agent text when it spoke and made no call since (the silence
        run is 0)."""
        if self.spoke and silent_calls == 0:
            self.run, self.tripped = 0, False

    def turn_boundary(self) -> None:
        self.turn = 0
        self.spoke = False
