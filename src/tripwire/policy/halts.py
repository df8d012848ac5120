"""What holds a session, and the operator's view and reset of it (SPEC §3, §4).

``Halts`` answers for one session's ``Guardrails``: whether it is halted and by which
guardrails (the watchdog's halt, the cost ceiling's), the decision for a refused turn, the
operator's reset (checked by the cost ceiling's ``check_reset`` before anything changes, then
``durability.reset.OperatorReset``'s rule), and the ``Status`` view. ``Guardrails`` holds the
lock and its blocked decision. ``reset_stored`` is the same reset of a session in a store
without its live process (``tripwire reset``).
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from ..base.decision import REFUSE_TURN, Decision
from ..base.money import NANO
from ..base.names import Guardrail
from ..durability.fold import Folded, fold_history
from ..durability.reset import OperatorReset
from ..durability.rows import ResetRow, RowSink
from ..errors import ResetRefused
from . import lines
from .budget import BUDGET
from .ceiling import CostCeiling

if TYPE_CHECKING:
    from ..base.modes import Mode
    from ..context.guard import ContextGuard, Utilization
    from .budget import BudgetPolicy
    from .cost import CostPolicy
    from .reporting import OperatorChannel
    from .watchdog import WatchdogPolicy

__all__ = ["Status", "ResetOutcome", "Halts", "reset_stored"]

@dataclass(frozen=True)
class Status:
    session_id: str
    mode: str
    halted: bool
    halted_by: tuple[str, ...]
    watchdog_reason: str | None
    cost_reason: str | None
    spent_usd: float
    turn_spent_usd: float
    max_turn_cost_usd: float
    max_session_cost_usd: float  # the ceiling with granted budget (0: no per-session bound)
    granted_budget_usd: float
    would_retrip: bool
    budget_needed_usd: float  # add more than this for a reset to be accepted (0: none needed)
    queued_feedback: int
    counters: dict[str, Any]
    context: Utilization | None
    compaction_pending: bool


@dataclass(frozen=True)
class ResetOutcome:
    cleared: tuple[str, ...]
    still_halted_by: tuple[str, ...]
    max_session_cost_usd: float
    message: str


class Halts:
    """One session's halts: the watchdog policy's and the cost ceiling's (what a reset clears
    of them: ``reset.Resettable``)."""

    __slots__ = ("_channel", "_durable", "cost", "watchdog")

    def __init__(self, watchdog: WatchdogPolicy, cost: CostPolicy, channel: OperatorChannel,
                 durable: RowSink):
        self.watchdog = watchdog
        self.cost = cost
        self._channel = channel
        self._durable = durable  # its reset rows, in the session's durable log

    @property
    def halted(self) -> bool:
        return self.watchdog.halt_reason is not None or self.cost.ceiling.halted

    def by(self) -> tuple[str, ...]:
        """The guardrails holding the session, watchdog first."""
        by = []
        if self.watchdog.halted:
            by.append("watchdog")
        if self.cost.ceiling.halted:
            by.append("cost_ceiling")
        return tuple(by)

    def reason(self) -> str:
        return " ".join(r for r in (self.watchdog.halt_reason, self.cost.ceiling.reason) if r)

    def refusal(self, budget: BudgetPolicy) -> Decision:
        """The decision for a turn refused at its start: while halted, or while the task is
        exhausted under ``enforce`` (guardrail ``budget``)."""
        halted = self.halted
        if not halted:
            refused = budget.refusal()
            if refused is not None:
                return Decision(REFUSE_TURN, BUDGET, refused)
        return Decision(REFUSE_TURN, self.by()[0] if halted else None, self.reason())

    def refuse_turn(self, budget: BudgetPolicy) -> Decision | None:
        """A turn start: the refusal (counted and reported) while halted or while the task is
        exhausted under ``enforce``, else None."""
        decision = self.refusal(budget)
        if decision.guardrail is None:
            return None
        self._channel.counters.count_refused()
        self._channel.emit("refused_turn", lines.refused_turn(decision.reason),
                           guardrail=decision.guardrail)
        return decision

    def reset(self, guardrail: str, additional_budget_usd: float,
              unblock: Callable[[], None]) -> ResetOutcome:
        """An operator reset of ``guardrail``: ``ResetRefused`` (nothing changed) while the
        spend is at least the per-session ceiling plus the budget added; ``unblock`` is called
        once the session is no longer halted, before the reset's row and line."""
        scope = Guardrail.parse_reset(guardrail)
        ceiling = self.cost.ceiling
        try:
            budget = ceiling.check_reset(additional_budget_usd, scope)
        except ResetRefused as refused:
            self._channel.emit("reset_refused", refused.reason, level=logging.WARNING,
                               guardrail="cost_ceiling")
            raise
        reset = OperatorReset.granting(scope, budget)
        cleared = reset.apply(self)
        if not self.halted:
            unblock()
        still = self.by()
        message = lines.reset_done(cleared, budget, ceiling.ceiling, still)
        self._durable.put(reset.row(cleared, self.cost.snapshot()))
        self._channel.emit("reset", message,
                           guardrail=None if scope is Guardrail.ALL else scope.value)
        return ResetOutcome(tuple(cleared), still, ceiling.ceiling / NANO, message)

    # what a reset clears (``reset.Resettable``)

    def standing(self) -> tuple[bool, bool, bool]:
        ceiling = self.cost.ceiling
        return (self.watchdog.halted, ceiling.session_reason is not None,
                ceiling.escalation_reason is not None)

    def clear_watchdog(self) -> None:
        self.watchdog.reset()  # the watchdog's run state too

    def clear_cost(self, reset: OperatorReset) -> None:
        self.cost.ceiling.reset(reset.budget_nano)

    def status(self, session_id: str, mode: Mode, context: ContextGuard | None) -> Status:
        cost = self.cost.ceiling
        needed = 0.0
        if cost.session_reason is not None and cost.would_retrip:
            needed = (cost.spent - cost.ceiling) / NANO
        return Status(
            session_id=session_id,
            mode=str(mode),
            halted=self.halted,
            halted_by=self.by(),
            watchdog_reason=self.watchdog.halt_reason,
            cost_reason=cost.reason,
            spent_usd=cost.spent / NANO,
            turn_spent_usd=cost.turn_spent() / NANO,
            max_turn_cost_usd=cost.max_turn / NANO,
            max_session_cost_usd=cost.ceiling / NANO,
            granted_budget_usd=cost.granted / NANO,
            would_retrip=cost.would_retrip,
            budget_needed_usd=needed,
            queued_feedback=len(self.watchdog.feedback),
            counters=self._channel.counters.snapshot(),
            context=context.utilization() if context is not None else None,
            compaction_pending=context.pending if context is not None else False,
        )


class _StoredHalts:
    """A stored session's halts, without its live process: its folded history, and the
    ceiling its rows describe (which takes the budget, so the reset row records the ceiling
    after it)."""

    __slots__ = ("ceiling", "folded")

    def __init__(self, folded: Folded, ceiling: CostCeiling):
        self.folded = folded
        self.ceiling = ceiling

    def standing(self) -> tuple[bool, bool, bool]:
        # the folded halts, not the ceiling's: it holds only those of bounds still recorded
        return self.folded.standing()

    def clear_watchdog(self) -> None:
        self.folded.clear_watchdog()

    def clear_cost(self, reset: OperatorReset) -> None:
        self.folded.clear_cost(reset)
        self.ceiling.reset(reset.budget_nano)


def reset_stored(history: Any, guardrail: Guardrail, additional_budget_usd: float,
                 by: str) -> tuple[ResetRow, ResetOutcome]:
    """An operator reset of a session in a store, by a process that does not host it
    (``tripwire reset``): refused as a live reset is (``ResetRefused``, against the ceiling
    the session's rows describe), cleared by the same rule; the row to append (``by``: who
    writes it), which the hosting process applies at the session's next turn (or when it
    restores), and what it did. ``history``: the session's ``SessionHistory``."""
    folded = fold_history(history)
    ceiling = CostCeiling.from_history(folded, history.rows)
    budget = ceiling.check_reset(additional_budget_usd, guardrail)
    reset = OperatorReset.granting(guardrail, budget)
    cleared = reset.apply(_StoredHalts(folded, ceiling))
    still = folded.halted_by
    message = lines.reset_done(cleared, budget, ceiling.ceiling, still)
    return (reset.row(cleared, ceiling.snapshot(), by=by),
            ResetOutcome(tuple(cleared), still, ceiling.ceiling / NANO, message))
