"""The supervisor's redirects and what became of them: a redirect's guidance is delivered in
the next turn's ``[watchdog]`` block, its ``Check`` is watched on the calls that follow
(``followed``: a call of the tool it names was made; ``held``: its condition was observed), and
it is judged at the next trigger. Redirects in a row whose check did not hold are what ends a
task ``blocked(redirects_exhausted)``; that rule, like every other decision, is
``Supervision``'s.
"""

from __future__ import annotations

from ..base.decision import Turn
from ..policy.feedback import CLOSING, HEADER
from .decision import Check, CheckedCall
from .review import PriorGuidance

__all__ = ["Redirect", "Guidance", "with_guidance", "GUIDANCE_SHOWN"]

#: Earlier redirects shown in a review.
GUIDANCE_SHOWN = 5


class Redirect:
    """One redirect given at review ``review``: its guidance, its check, and whether a call
    since followed it (``followed``) and showed its condition (``held``)."""

    __slots__ = ("check", "followed", "guidance", "held", "review")

    def __init__(self, review: int, guidance: str, check: Check):
        self.review = review
        self.guidance = guidance
        self.check = check
        self.followed = False
        self.held = False


class Guidance:
    """One run's redirects: the last one given (not judged yet), those judged (oldest first),
    ``failed_in_a_row`` (judged redirects in a row whose check did not hold) and the guidance
    lines the next turn start delivers. Not thread-safe on its own (``Supervision`` locks)."""

    __slots__ = ("_deliver", "_judged", "_last", "failed_in_a_row")

    def __init__(self) -> None:
        self._last: Redirect | None = None  # the last redirect, not judged yet
        self._judged: list[Redirect] = []   # redirects judged, oldest first
        self._deliver: list[str] = []       # guidance for the turn being started
        self.failed_in_a_row = 0

    def give(self, review: int, guidance: str, check: Check) -> None:
        """A redirect decided at review ``review``: watched from now on, delivered at the next
        turn start."""
        self._last = Redirect(review, guidance, check)
        self._deliver.append(f"{guidance} Checkpoint: {check.describe()}.")

    def tell(self, line: str) -> None:
        """Guidance without a check of its own (a failed acceptance check's evidence),
        delivered at the next turn start."""
        self._deliver.append(line)

    def observe_call(self, call: CheckedCall) -> None:
        """A call made: does it follow the last redirect, or (a ``called`` check) show it?"""
        redirect = self._last
        if redirect is not None:
            if redirect.check.followed_by(call):
                redirect.followed = True
            if redirect.check.held_by(call):
                redirect.held = True

    def observe_result(self, call: CheckedCall, result: str) -> None:
        """A call's result (its full payload or error text): does it show the last redirect's
        condition?"""
        redirect = self._last
        if redirect is not None and redirect.check.held_by(call, result):
            redirect.held = True

    def judge(self) -> int:
        """At a trigger: the last redirect, which has had the calls since to show its check,
        is judged. Returns ``failed_in_a_row``."""
        redirect = self._last
        if redirect is not None:
            self._last = None
            self._judged.append(redirect)
            self.failed_in_a_row = 0 if redirect.held else self.failed_in_a_row + 1
        return self.failed_in_a_row

    def prior(self, shown: int = GUIDANCE_SHOWN) -> tuple[PriorGuidance, ...]:
        """The last ``shown`` judged redirects, as a review shows them."""
        return tuple(PriorGuidance(g.review, g.guidance, g.check, g.followed, g.held)
                     for g in self._judged[-shown:])

    def held(self) -> int:
        """Redirects whose check held (judged or not yet)."""
        given = [*self._judged, *([self._last] if self._last else [])]
        return sum(1 for r in given if r.held)

    def take_lines(self) -> list[str]:
        """The guidance lines for the turn being started (each delivered once)."""
        lines, self._deliver = self._deliver, []
        return lines


def with_guidance(turn: Turn, lines: list[str]) -> Turn:
    """The turn with the supervisor's guidance in its ``[watchdog]`` block (one made if the
    guardrails had none), before the block's closing line."""
    extra = [f"- supervisor: {line}" for line in lines]
    feedback = turn.feedback
    if not feedback:
        text = "\n".join([HEADER, *extra, CLOSING])
    elif feedback.endswith("\n" + CLOSING):
        text = feedback[: -len(CLOSING)] + "\n".join([*extra, CLOSING])
    else:
        text = "\n".join([feedback, *extra])
    return Turn(text, turn.compact)
