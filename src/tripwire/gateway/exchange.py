"""One request's life against its session, from what the wire says to what the session
decides: the session's methods are reached through the one dispatcher
(``session.dispatch.observe_event``) with interchange events, and every reaction is a
``Decision`` the session returned (no policy here).

Before the request is forwarded (``Exchange.before``):

- a request of the user's own words ends the turn still open and starts one (``turn_start``):
  a halted session or an exhausted task refuses it — the gateway answers with an error the
  harness shows its user, naming the halt and the reset (``Refusal``);
- a request of tool results continues the turn: each result is observed (its error flag a
  failure); a result that cuts the turn (a detector, the context guard at 95% of the window)
  is answered by the gateway with the guidance as the model's last words, never forwarded;
  a turn cut earlier (a call released before a later one was denied) likewise;
- the clock's limits (``poll``: the deadline) the same way;
- the feedback queued for the model (the turn's block, alerts as they fired) is added to the
  request where the model reads it next.

After (``decide`` for each complete call, ``observe`` for text and usage): a call the session
cuts is replaced by the guidance and the turn ends; the usage is charged (priced by the
dispatcher's rule when the provider reports no cost). A response that released no call ends
the turn.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Any

from ..base.decision import Decision, Turn
from ..harnesses.hooks._session import told
from ..interchange.events import Call, Compaction, Event, Retry, TurnEnd, TurnStart, Usage
from ..interchange.wire import Request
from ..session.dispatch import observe_event
from .identity import Role

__all__ = ["Exchange", "Refusal", "Answer", "Unwatched"]

LOGGER = logging.getLogger("tripwire")


@dataclass(frozen=True)
class Refusal:
    """The request is refused with an error (a halted session, an exhausted task): the
    harness shows ``message`` to its user."""

    message: str


@dataclass(frozen=True)
class Answer:
    """The request is answered by the gateway itself: ``text`` as the model's last words, the
    turn ended (a cut turn, an over-window request); nothing is sent upstream."""

    text: str


def _decision(outcome: object) -> Decision:
    """An observation's outcome, which for a call or a result is a ``Decision``."""
    assert isinstance(outcome, Decision)
    return outcome


class Exchange:
    """The session side of one request: ``before()``, then ``decide``/``observe`` as the
    response is read, then ``done()``."""

    def __init__(self, gateway: Any, role: Role, request: Request):
        self.gateway = gateway
        self.role = role
        self.request = request
        self.fleet = gateway.fleet
        self.g = self.fleet.session(role.session)
        self.feedback = ""
        self.cut: Decision | None = None
        self.released = 0
        self.finished = False

    # -- before the request goes upstream -------------------------------------------------------

    def before(self) -> Refusal | Answer | None:
        role, g = self.role, self.g
        if role.parent is not None:
            parent = self.fleet.session(role.parent)
            if parent.halted:
                return Refusal(self.gateway.halt_message(parent))
        if role.part == "side":
            return None
        if self.request.prompt:
            if g.in_turn:
                observe_event(g, TurnEnd())
            started = observe_event(g, TurnStart())
            if not isinstance(started, Turn):
                return Refusal(self.gateway.halt_message(g, started))
            self.feedback = started.feedback
        else:
            if g.halted:
                return Refusal(self.gateway.halt_message(g))
            if not g.in_turn:
                g.continue_turn()
        if role.compacted:
            observe_event(g, Compaction(automatic=True))
        for result in self.request.results:
            decision = _decision(observe_event(g, result))
            if decision.cut_turn:
                return self._answer(decision)
        blocked = g.blocked
        if blocked is not None and blocked.cut_turn:
            return self._answer(blocked)
        polled = g.poll()
        if polled.cut_turn:
            return self._answer(polled)
        queued = g.take_feedback()
        self.feedback = "\n\n".join(x for x in (self.feedback, queued) if x)
        return None

    def _answer(self, decision: Decision) -> Answer:
        text = self.told(decision)
        observe_event(self.g, TurnEnd())
        self.finished = True
        return Answer(text)

    def told(self, decision: Decision) -> str:
        """A cut's or halt's text as the model's last words: what the model is told, and for
        a halt what the user needs (how to resume)."""
        text = told(decision)
        if decision.halt_session:
            text += "\n\n" + self.gateway.resume_line(self.g.session_id, decision.reason)
        return text

    # -- the response ---------------------------------------------------------------------------

    def decide(self, call: Call) -> str | None:
        if self.role.part == "side":
            return None
        if self.cut is not None:
            return self.told(self.cut)
        decision = _decision(observe_event(self.g, call))
        if decision.cut_turn:
            self.cut = decision
            return self.told(decision)
        self.released += 1
        return None

    def observe(self, event: Event) -> None:
        if self.role.part == "side" and not isinstance(event, Usage):
            return
        observe_event(self.g, event)

    def observe_all(self, events: list[Event]) -> str | None:
        """A whole (non-streamed) response's events in order: the guidance that replaces its
        calls when one is cut, else None."""
        guidance = None
        for event in events:
            if isinstance(event, Call):
                if guidance is None:
                    guidance = self.decide(event)
                    if guidance is not None:
                        self.released = 0  # the whole response's calls are replaced
            else:
                self.observe(event)
        return guidance

    def retry(self, reason: str) -> None:
        """The upstream failed this request (5xx, a timeout, a refused connection): a retry."""
        if self.role.part != "side":
            observe_event(self.g, Retry(reason))

    def done(self) -> None:
        """The response is over: a turn whose response released no call ended."""
        if self.finished or self.role.part == "side":
            return
        self.finished = True
        if self.cut is not None or self.released == 0:
            if self.g.in_turn:
                observe_event(self.g, TurnEnd())


class Unwatched:
    """A request the session could not take (a fault of tripwire's own outside ``enforce``):
    relayed as it is, nothing observed."""

    request = Request(None, False, (), b"")
    feedback = ""

    def decide(self, call: Call) -> str | None:
        return None

    def observe(self, event: Event) -> None:
        pass

    def observe_all(self, events: list[Event]) -> str | None:
        return None

    def retry(self, reason: str) -> None:
        pass

    def done(self) -> None:
        pass
