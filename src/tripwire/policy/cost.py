"""The cost policy: what a tripped cost ceiling does to a session (SPEC §4). It returns the
``Decision`` and writes its row and its operator line; ``Guardrails`` holds the lock and makes
a cut or halt the session's blocked decision. The arithmetic is ``ceiling.CostCeiling``.
``snapshot()`` is what its durable rows carry, ``apply(folded)`` a folded history taken
forward, ``batch_state()`` what the batch core needs of it.
"""

from __future__ import annotations

import logging
from dataclasses import replace
from typing import TYPE_CHECKING

from ..base.decision import CUT_TURN, HALT_SESSION, Decision
from ..context.stats import UsageByModel
from ..durability.rows import RowSink, Spend, TripRow
from ..engine.batch import CostState
from . import lines

if TYPE_CHECKING:
    from ..durability.fold import Folded
    from .ceiling import CostCeiling, CostTrip
    from .reporting import OperatorChannel

__all__ = ["CostPolicy"]

_NO_MODELS: frozenset[str] = frozenset()


class CostPolicy:
    """A cost trip → a cut turn (per-turn bound) or a halted session (per-session bound, or the
    per-turn bound tripped ``escalate_after`` turns in a row). Also what the spend rows say of
    the spend: whether some was estimated from token prices, which models had no price
    (SPEC §11.3), and the per-model usage (``context_stats``)."""

    __slots__ = ("_durable", "ceiling", "estimated", "unpriced", "unpriced_changed", "usage")

    def __init__(self, ceiling: CostCeiling, durable: RowSink):
        self.ceiling = ceiling
        # its trip rows (with the spend: ``Durability.trip``), its lines (``durable.channel``)
        self._durable = durable
        self.estimated = False  # some spend was estimated from token prices (SPEC §11.3)
        # models whose usage had no price, so no cost (shared and empty until the first: a
        # set per session would be 216 bytes a fleet session)
        self.unpriced: frozenset[str] = _NO_MODELS
        self.unpriced_changed = False
        self.usage = UsageByModel()  # per-model turns, tokens and cost (context_stats)

    def charge(self, model: str | None, input_tokens: int | None, output_tokens: int | None,
               nano: int, estimated: bool, unpriced: bool) -> CostTrip | None:
        """One model call's usage: noted per model, its cost spent, the ceilings checked."""
        if estimated:
            self.estimated = True
        if unpriced:  # the catalogue is imported for an unpriced usage only (not at a hook's start)
            from ..interchange.prices import model_name

            if model_name(model) not in self.unpriced:
                self.unpriced = self.unpriced | {model_name(model)}
                self.unpriced_changed = True
        self.usage.add(model, input_tokens, output_tokens, nano)
        return self.ceiling.add(nano)  # spend counts even while halted or cut

    def start_turn(self) -> None:
        """A turn starts: the ceiling's per-turn baseline, the per-model usage's turn count."""
        self.ceiling.start_turn()
        self.usage.turn += 1

    def decide(self, trip: CostTrip, *, in_turn: bool) -> Decision:
        if self.estimated:
            trip = replace(trip, reason=lines.estimated_cost(trip.reason))
        decision = Decision(HALT_SESSION if trip.halts else CUT_TURN, "cost_ceiling", trip.reason)
        channel: OperatorChannel = self._durable.channel
        channel.counters.count_trip("cost_ceiling")
        self._durable.trip(TripRow("cost_ceiling", trip.kind, trip.halts, trip.reason,
                              in_a_row=trip.in_a_row))
        line = lines.cost_trip(trip.reason, in_turn=in_turn, halts=trip.halts,
                               in_a_row=trip.in_a_row, limit=self.ceiling.escalate_after)
        channel.emit("halt" if trip.halts else "cut", line,
                     level=logging.WARNING, guardrail="cost_ceiling", decision=decision)
        return decision

    # -- persistence and the batch core --------------------------------------------------------

    def snapshot(self) -> Spend:
        """What every trip, reset and spend row carries: the ceiling's snapshot, and whether
        the spend is partly estimated or some model was unpriced (SPEC §11.3)."""
        return self.ceiling.snapshot().priced(self.estimated, tuple(sorted(self.unpriced)))

    def apply(self, folded: Folded) -> None:
        """A folded history, under the live configuration (``CostCeiling.apply``)."""
        self.ceiling.apply(folded)

    def sync(self, folded: Folded) -> None:
        """An operator reset written to the store elsewhere (``CostCeiling.sync``)."""
        self.ceiling.sync(folded)

    def restore_turn(self, cut: Decision | None) -> None:
        """A turn row's cut (``durability.rows.TurnRow``): when the per-turn bound cut the turn in
        progress, the ceiling knows it tripped this turn (no second trip; its end keeps the
        count of turns in a row), as it would in one process."""
        if cut is not None and cut.action == CUT_TURN and cut.guardrail == "cost_ceiling":
            self.ceiling.turn_tripped = True

    def take_unpriced_news(self) -> bool:
        """Whether a model went unpriced since the last spend row (cleared: it is written)."""
        news, self.unpriced_changed = self.unpriced_changed, False
        return news

    def batch_state(self) -> CostState:
        c = self.ceiling
        return CostState(c.spent, c.baseline, c.max_turn, c.ceiling, c.halted or c.turn_tripped)

    def take_spent(self, spent: int) -> int:
        """The spend the batch core charged (it checked that no bound trips): the amount added."""
        added = spent - self.ceiling.spent
        trip = self.ceiling.add(added)
        assert trip is None, "the batch core charges only spend that trips no bound"
        return added
