"""What every framework integration does to a session: ``GuardedRun``.

A framework's run is one turn of one session's ``Guardrails`` (a ``Fleet`` session is one:
``fleet.session(id, task=...)``). The integration modules translate their framework's hooks
into the five things a run does here, each through the one dispatcher (``session.dispatch``):

    start()                 the run's turn opens; the refusal when the session is halted
    call(name, args, id)    a tool call, before it runs: a cut means it must not run
    result(name, id, ...)   its result (or failure)
    response(text, usage)   a model response: its words, then its usage (priced by the
                            catalogue when it carries no cost; each usage is a task step)
    end()                   the run is over (its turn closes)

What the framework then does with a ``Decision`` is its module's: refuse the call the way the
framework refuses one, feed ``feedback()`` to the model the way it feeds text back, and end the
run with the framework's own stop type once ``stopped`` is set. The texts the model and the
user are shown are here, so that every framework says the same thing.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Union

from ...base.decision import CONTINUE, Decision, Turn
from ...interchange.events import Usage
from ...session.dispatch import observe, observe_event

if TYPE_CHECKING:
    from ...session.guardrails import Guardrails

#: what an integration guards: one session's ``Guardrails``, or the session of each of the
#: framework's own sessions by its id (``fleet.session``, or any callable returning one)
Sessions = Union["Guardrails", Callable[[str], "Guardrails"]]

__all__ = ["GuardedRun", "GuardedRuns", "Guarding", "refused_call", "stopped_run",
           "content_text"]


def refused_call(decision: Decision) -> str:
    """The text the model is given for a call tripwire did not let run."""
    return f"[tripwire] This tool call was not run: {decision.reason}"


def stopped_run(decision: Decision) -> str:
    """The text a run ends with when tripwire stopped it (the framework's final message)."""
    return f"[tripwire] The run was stopped: {decision.reason}"


def content_text(content: Any) -> str:
    """A message's text: a string, or the text of its content blocks (strings, or dicts with
    a ``text``), as the frameworks' messages carry it."""
    if isinstance(content, str):
        return content
    if isinstance(content, (list, tuple)):
        return "".join(b if isinstance(b, str) else str(b.get("text") or "")
                       if isinstance(b, dict) else content_text(getattr(b, "text", None))
                       for b in content)
    return "" if content is None else str(content)


class GuardedRun:
    """One session's ``Guardrails`` as a framework's runs drive it (one run = one turn).

    ``stopped`` is the cut or halt that ends the run in flight (or the refusal of a run of a
    halted session), None while it may go on; every later call of that run gets it without
    being observed again. Thread-safe as the session is: frameworks run tools in threads.
    """

    def __init__(self, guardrails: Guardrails):
        self.guardrails = guardrails
        self.stopped: Decision | None = None
        self._open = False     # a run started and not ended (refused or not)
        self._in_turn = False  # ... and its turn is open
        self._pending = ""  # feedback for the model not delivered yet (the turn's block)
        self._lock = threading.Lock()

    # -- the run ---------------------------------------------------------------------------

    def start(self) -> Decision | None:
        """Open the run (once per run): its turn opens, or the session refuses it (a halted
        session, an exhausted task), returned as a ``refuse_turn`` decision and left in
        ``stopped``: the run must end before any model call."""
        with self._lock:
            if self._open:
                return None if self._in_turn else self.stopped
            self._open = True
            outcome = observe(self.guardrails, "turn_start")
            if isinstance(outcome, Decision):
                self.stopped = outcome
                return outcome
            self._in_turn = True
            self.stopped = None
            if isinstance(outcome, Turn) and outcome.feedback:
                self._pending = outcome.feedback
            return None

    def end(self) -> None:
        """The run is over: its turn closes (the next run opens a new one). ``stopped`` stays
        readable until then."""
        with self._lock:
            self._open = False
            self._pending = ""
            if self._in_turn:
                self._in_turn = False
                self.guardrails.end_turn()

    @property
    def in_run(self) -> bool:
        return self._in_turn

    # -- what happens in it ----------------------------------------------------------------

    def call(self, name: str, args: Any = None, id: str | None = None) -> Decision:
        """A tool call the model asked for, before it runs: ``decision.cut_turn`` means it must
        not run (and the run must end)."""
        if self._refused():
            return self._stop()
        return self._note(observe(self.guardrails, "call", name, args, id))

    def result(self, name: str | None, id: str | None = None, *, payload: Any = None,
               error: str | None = None) -> Decision:
        """A tool's result (``payload``) or failure (``error``, its message)."""
        if self.stopped is not None:
            return self._stop()
        return self._note(observe(self.guardrails, "result", name=name, id=id,
                                  payload=payload, error=error))

    def response(self, text: str | None = None, *, model: str | None = None,
                 input_tokens: int | None = None, output_tokens: int | None = None,
                 cost_usd: float | None = None, cache_read_tokens: int | None = None,
                 cache_write_tokens: int | None = None, provider: str | None = None,
                 ) -> Decision:
        """One model response: the agent's words (if any), then its usage, priced from the
        catalogue when the framework reports no cost. Each response is one step of the task."""
        if self._refused():
            return self._stop()
        if text:
            decision = self._note(observe(self.guardrails, "text", text))
            if decision.cut_turn:
                return decision
        usage = Usage(model=model, input_tokens=input_tokens, output_tokens=output_tokens,
                      cost_usd=cost_usd, cache_read_tokens=cache_read_tokens,
                      cache_write_tokens=cache_write_tokens, provider=provider)
        return self._note(observe_event(self.guardrails, usage))

    def feedback(self) -> str:
        """The ``[watchdog]`` block for the model now ("" when there is none), delivered once:
        the turn's block from its start, then what the session queued since (at once with
        ``Guardrails(..., feedback_at_once=True)``, else at the next turn's start)."""
        with self._lock:
            pending, self._pending = self._pending, ""
        queued = self.guardrails.take_feedback()
        return "\n\n".join(b for b in (pending, queued) if b)

    # -- decisions -------------------------------------------------------------------------

    def _refused(self) -> bool:
        """Whether the run is stopped: cut already, or refused at its start (opened here when
        the framework's first hook is a call or a response)."""
        if not self._open:
            self.start()
        return self.stopped is not None

    def _note(self, outcome: Any) -> Decision:
        decision = outcome if isinstance(outcome, Decision) else CONTINUE
        if decision.cut_turn and self.stopped is None:
            self.stopped = decision
        return decision

    def _stop(self) -> Decision:
        assert self.stopped is not None
        return self.stopped


class Guarding:
    """What an integration's object of one session says of it (its ``run``, a ``GuardedRun``):
    the session's ``Guardrails`` and what stopped its last run."""

    run: GuardedRun

    @property
    def guardrails(self) -> Guardrails:
        return self.run.guardrails

    @property
    def stopped(self) -> Decision | None:
        """The cut or halt that ended the last run (or its refusal), None if none did."""
        return self.run.stopped


class GuardedRuns:
    """The ``GuardedRun`` of each of a framework's sessions, for a framework whose hooks are
    registered once for many sessions (a runner's plugins, process-wide hooks): one
    ``Guardrails`` for them all, or ``sessions(id)`` (``fleet.session``) for each id."""

    def __init__(self, sessions: Sessions):
        self._factory = sessions if callable(sessions) else None
        self._single = None if callable(sessions) else GuardedRun(sessions)
        self._runs: dict[str, GuardedRun] = {}
        self._lock = threading.Lock()

    def __call__(self, key: str) -> GuardedRun:
        if self._single is not None:
            return self._single
        with self._lock:
            run = self._runs.get(key)
            if run is None:
                assert self._factory is not None
                run = self._runs[key] = GuardedRun(self._factory(key))
            return run

    def release(self, key: str) -> None:
        """Forget a framework session's run once it ended (its ``Guardrails`` stays the
        factory's: a fleet keeps it, or restores it from its store)."""
        if self._single is None:
            with self._lock:
                self._runs.pop(key, None)
