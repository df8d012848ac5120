"""What a harness acts on: a ``Decision`` per observation, a ``Turn`` per started turn.

The common case is ``CONTINUE``, one shared object: checking ``decision.proceed`` (or
``decision.cut_turn``) costs an attribute read.
"""

from __future__ import annotations

from dataclasses import dataclass

from .alert import Alert

__all__ = ["Decision", "Turn", "CONTINUE", "CUT_TURN", "HALT_SESSION", "REFUSE_TURN",
           "CANCEL_TOOL"]

PROCEED = "continue"
CUT_TURN = "cut_turn"          # cancel the turn in flight; the session goes on
HALT_SESSION = "halt_session"  # cancel the turn, and refuse every later turn until a reset
REFUSE_TURN = "refuse_turn"    # the turn was refused before any model call (halted session)
CANCEL_TOOL = "cancel_tool"    # cancel the tool calls ``call_ids`` (timed out); the turn goes on


@dataclass(frozen=True, slots=True)
class Decision:
    """``action`` is ``continue``, ``cut_turn``, ``halt_session``, ``refuse_turn`` or
    ``cancel_tool``; ``guardrail`` (``watchdog``, ``cost_ceiling``, ``context``, ``budget``) and
    ``reason`` say who and why; ``alerts`` are the watchdog alerts raised by this observation
    (also when it continues); ``call_ids``, for ``cancel_tool``, the calls to cancel (they had
    no result within the task's tool timeout; the turn goes on)."""

    action: str = PROCEED
    guardrail: str | None = None
    reason: str = ""
    alerts: tuple[Alert, ...] = ()
    call_ids: tuple[str, ...] = ()

    @property
    def proceed(self) -> bool:
        """The harness may go on with the turn (after cancelling ``call_ids``, if any)."""
        return self.action == PROCEED or self.action == CANCEL_TOOL

    @property
    def cut_turn(self) -> bool:
        """The harness must cancel the turn in flight (a cut, or a halt)."""
        return self.action != PROCEED and self.action != CANCEL_TOOL

    @property
    def cancel_tool(self) -> bool:
        """The harness must cancel the tool calls ``call_ids`` (the turn goes on)."""
        return self.action == CANCEL_TOOL

    @property
    def halt_session(self) -> bool:
        """The session is halted: every later turn is refused until an operator reset."""
        return self.action in (HALT_SESSION, REFUSE_TURN)

    def to_dict(self) -> dict[str, object]:
        out: dict[str, object] = {"action": self.action, "guardrail": self.guardrail,
                                  "reason": self.reason}
        if self.call_ids:
            out["call_ids"] = list(self.call_ids)
        return out


CONTINUE = Decision()


#: how strong each action is: at one event, the stronger decision stands
_STRENGTH = {PROCEED: 0, CANCEL_TOOL: 1, CUT_TURN: 2, HALT_SESSION: 3, REFUSE_TURN: 3}


def stronger(first: Decision, second: Decision) -> Decision:
    """Two guardrails' decisions at one event (a budget's cut and the watchdog's verdict on
    the same call): the stronger action stands (a halt over a cut over a cancel; ``first`` on
    a tie, as the one that happened first), and it carries both decisions' alerts, so an alert
    is never lost to another guardrail's cut."""
    win = second if _STRENGTH[second.action] > _STRENGTH[first.action] else first
    other = first if win is second else second
    alerts = win.alerts + tuple(a for a in other.alerts if a not in win.alerts)
    if alerts == win.alerts:
        return win
    return Decision(win.action, win.guardrail, win.reason, alerts, win.call_ids)


def with_cancel(decision: Decision, cancel: Decision) -> Decision:
    """An observation's decision, carrying the calls a timeout cancels (a cut cancels all)."""
    if not decision.proceed:
        return decision
    return Decision(cancel.action, cancel.guardrail, cancel.reason,
                    decision.alerts + cancel.alerts, cancel.call_ids)


@dataclass(frozen=True, slots=True)
class Turn:
    """A started turn. ``feedback`` is the ``[watchdog]`` block to prepend to the model's input
    ("" when there is none); ``compact`` says context compaction is pending (the context
    guard); ``prepend(prompt)`` puts the block first, separated as the seed does."""

    feedback: str = ""
    compact: bool = False

    def prepend(self, prompt: str) -> str:
        return f"{self.feedback}\n\n---\n\n{prompt}" if self.feedback else prompt

    def __bool__(self) -> bool:  # a turn that carries something for the harness to do
        return bool(self.feedback) or self.compact
