"""What an operator and a host do to a session beside its observations: its halts, a reset,
its status, the retraction of refused calls, and its durability (flush, restore, what the
store does not hold yet: SPEC §3–§5). A part of ``Guardrails`` (``fields.SessionFields``)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ..base.decision import HALT_SESSION, Decision
from ..durability.log import SessionLog
from ..engine.watchdog import retracted_count
from ..policy.halts import Halts, ResetOutcome, Status
from .fields import SessionFields

__all__ = ["OperatorMethods"]


class OperatorMethods(SessionFields):
    if not TYPE_CHECKING:
        __slots__ = ()

    @property
    def _halts(self) -> Halts:
        """The session's halts, the watchdog policy's and the cost ceiling's (``Halts``): made
        when asked, as it holds nothing the policies do not (a fleet has many sessions)."""
        return Halts(self._policy, self._cost_policy, self._channel, self._durable)

    @property
    def halted(self) -> bool:
        return self._halts.halted

    def refusal(self) -> Decision:
        """The decision for a turn refused at its start (``refuse_turn``), while halted (or
        while the task is exhausted, under ``enforce``: guardrail ``budget``)."""
        return self._halts.refusal(self._budget)

    def reset(self, guardrail: str = "all", additional_budget_usd: float = 0.0) -> ResetOutcome:
        """An operator reset (SPEC §3, §4). Clears halts and the watchdog's run state but keeps
        the queued feedback, so the resumed model learns why it was stopped.

        Raises ``ResetRefused`` (nothing changed) while the spend is at least the per-session
        ceiling plus ``additional_budget_usd``, and ``InvalidReset`` for budget the reset
        cannot apply.
        """
        with self._lock:
            return self._halts.reset(guardrail, additional_budget_usd, self._unblock)

    def _unblock(self) -> None:
        self._blocked = None

    def retract_calls(self, calls: int) -> None:
        """The last ``calls`` tool calls were refused by the host's permission gate and the
        turn ended: they come off the watchdog's run state (``Watchdog.retract_calls``), so
        the next turn's first identical call is not the next one in a row. A halt, a cut and
        every alert already raised stay as they are (docs/guardrails.md)."""
        with self._lock:
            count = retracted_count(calls)  # checked in every mode
            if self._watchdog is not None:
                self._watchdog.retract_calls(count)

    def status(self) -> Status:
        with self._lock:
            return self._halts.status(self.session_id, self.mode, self._context)

    def flush(self, wait: float | None = None) -> bool:
        """Write what the store does not hold yet — the task's consumption (the tool calls
        the fast path counts without a row: a process that exits after this keeps them, as a
        hook must) and the rows it did not take yet — waiting the store's full timeout (or at
        most ``wait`` seconds for each row); True when none is left (else ``store_problem``
        says why). With durable turns, the turn in progress too, when it changed."""
        self._task.persist()
        with self._lock:
            self._durable.keep_turn(self._in_turn, self._blocked)
        return self._durable.flush(wait)

    @property
    def store_problem(self) -> str | None:
        """Why rows are waiting for the store (its last error), or None when none is."""
        return self._durable.problem

    @property
    def unpersisted_rows(self) -> int:
        """Rows decided but not yet in the store (0 without a store)."""
        return len(self._durable)

    @property
    def durable_log(self) -> SessionLog | None:
        """The session's durable log: its rows on their way to the store, its history read
        back (None without a store)."""
        return self._durable.log

    @property
    def halted_by(self) -> tuple[str, ...]:
        """The guardrails holding the session halted, in the order they tripped (empty when it
        is not halted)."""
        halts = self._halts
        return halts.by() if halts.halted else ()

    def restore(self, store: Any) -> None:
        """Fold a store's history of this session forward (done at construction when a store
        is given). Fails open: an unreadable store means the session runs unrestored, with a
        logged warning naming it."""
        with self._lock:
            self._durable.attach(store, self._budget)
            self._restore()

    def _restore(self, history: Any = None) -> None:
        turn = self._durable.restore(self._budget, history)
        if self.halted:
            self._blocked = self.refusal()
        if turn is None:  # no durable turn, or none stored
            return
        # the turn in progress, as the last process left it: its cut stands until the turn
        # ends (unless the session is halted now); a halt's own decision, while it holds,
        # says again what the model was told
        self._in_turn = turn.open
        blocked = turn.blocked
        if blocked is not None and (blocked.action == HALT_SESSION) == self.halted:
            self._blocked = blocked

