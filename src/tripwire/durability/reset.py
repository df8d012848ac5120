"""The operator reset's one rule (SPEC §3, §4): what a reset of guardrail G granting budget B
clears, and the row that records it.

A reset of ``watchdog`` clears the watchdog's halt and its run state (the signal that cut the
last turns and their count; a live session's detectors too); a reset of ``cost_ceiling``
clears the per-session ceiling's halt and the per-turn escalation's, zeroes the escalation
count and grants B (which raises the per-session ceiling); ``all`` does both. Its row names the
scope, the budget, the halts it cleared (as the operator's line does) and the spend with the
ceiling after it.

``OperatorReset.apply`` is that rule, over the halts of a live session (``policy.halts.Halts``:
``Guardrails.reset``, which ``serve`` and a fleet reach through ``Fleet.reset``), of a folded
history (``fold.Folded``: a reset row read back), and of a stored session without its live
process (``policy.halts.reset_stored``: ``tripwire reset``); ``OperatorReset.row`` is the
only writer of a reset row. Whether a reset may happen at all (it must not re-trip at once)
is the cost ceiling's ``check_reset``, which the library and the command line both call
first.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Protocol

from ..base.money import NANO
from ..base.names import Guardrail
from ..errors import InvalidReset
from .rows import ResetRow, Spend

__all__ = ["OperatorReset", "Resettable"]


class Resettable(Protocol):
    """What a reset acts on: a session's halts, live or folded from its rows."""

    def standing(self) -> tuple[bool, bool, bool]:
        """Which halts stand: the watchdog's, the per-session cost ceiling's, the per-turn
        cost escalation's."""
        ...

    def clear_watchdog(self) -> None:
        """Clear the watchdog's halt and its run state."""
        ...

    def clear_cost(self, reset: OperatorReset) -> None:
        """Clear the cost ceiling's halts and escalation count; grant ``reset``'s budget."""
        ...


@dataclass(frozen=True, slots=True)
class OperatorReset:
    """A reset of ``scope`` granting ``budget_nano`` nano-dollars (``budget_usd`` as a row
    records it). Build it with ``granting`` (a checked budget) or ``from_row`` (read back)."""

    scope: Guardrail
    budget_nano: int = 0
    budget_usd: float = 0.0

    @classmethod
    def granting(cls, scope: Guardrail, budget_nano: int = 0) -> OperatorReset:
        """A reset granting a budget already checked (``CostCeiling.check_reset``)."""
        return cls(scope, budget_nano, budget_nano / NANO)

    @classmethod
    def from_row(cls, row: ResetRow) -> OperatorReset | None:
        """The reset a stored row records; None when its scope is not one this version can
        read (such a row resets nothing)."""
        try:
            scope = Guardrail.parse_reset(row.guardrail)
        except InvalidReset:
            return None
        return cls(scope, round(row.budget_usd * NANO), row.budget_usd)

    def clears(self, guardrail: str) -> bool:
        """Whether this reset clears the halts of ``guardrail`` (``watchdog``,
        ``cost_ceiling``)."""
        return self.scope is Guardrail.ALL or self.scope.value == guardrail

    def apply(self, halts: Resettable) -> list[str]:
        """Clear what this reset clears of ``halts``; the halts that stood and are cleared,
        named as the reset row and the operator's line name them."""
        watchdog, session_ceiling, escalation = halts.standing()
        cleared: list[str] = []
        if self.scope.covers(Guardrail.WATCHDOG):
            if watchdog:
                cleared.append("watchdog")
            halts.clear_watchdog()
        if self.scope.covers(Guardrail.COST_CEILING):
            if session_ceiling:
                cleared.append("per-session cost ceiling")
            if escalation:
                cleared.append("per-turn cost escalation")
            halts.clear_cost(self)
        return cleared

    def row(self, cleared: Iterable[str], spend: Spend, *, by: str | None = None,
            carried: str | None = None) -> ResetRow:
        """The row that records this reset: the halts it cleared, the session's spend with
        the ceiling after it (``spend``), who wrote it (``by``: None for the library) and why
        a new chain carries it over (``carried``)."""
        return ResetRow(self.scope.value, self.budget_usd, tuple(cleared), spend, by, carried)
