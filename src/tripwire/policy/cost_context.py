"""The cost and context policies: what a tripped cost ceiling or a crossed context limit does
to a session (SPEC §4, §6). Each returns the ``Decision`` and writes its row and its operator
line; ``Guardrails`` holds the lock and makes a cut or halt the session's blocked decision.
(The watchdog's policy is ``watchdog_policy.py``; the arithmetic is ``cost.CostCeiling`` and
``context.ContextGuard``.) Each exposes ``snapshot()`` (what its durable rows carry) and
``apply(folded)`` (a folded history taken forward), and the state the batch core needs of it.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import replace
from typing import TYPE_CHECKING, Any

from ..base.decision import CUT_TURN, HALT_SESSION, Decision
from ..context.guard import Compaction, ContextGuard, SummaryResult, Utilization
from ..context.stats import ContextStats, UsageByModel, usage_stats
from ..durability.rows import ContextRow, Spend, TripRow
from ..engine.batch import ContextState, CostState
from . import lines

if TYPE_CHECKING:
    from ..durability.fold import Folded
    from .ceiling import CostCeiling, CostTrip
    from .reporting import OperatorChannel

__all__ = ["CostPolicy", "ContextPolicy"]

#: append a trip row to the session's durable log (with the spend: ``Durability.trip``)
PersistTrip = Callable[[TripRow], None]
#: append a context record to the session's durable log
PersistContext = Callable[[ContextRow], None]
#: Why ``compact`` and ``checkpoint`` skip while the context guard is disabled
DISABLED = "the context guard is disabled"


class CostPolicy:
    """A cost trip → a cut turn (per-turn bound) or a halted session (per-session bound, or the
    per-turn bound tripped ``escalate_after`` turns in a row). Also what the spend rows say of
    the spend: whether some was estimated from token prices, which models had no price
    (SPEC §11.3), and the per-model usage (``context_stats``)."""

    __slots__ = ("_channel", "_persist", "ceiling", "estimated", "unpriced", "unpriced_changed",
                 "usage")

    def __init__(self, ceiling: CostCeiling, channel: OperatorChannel, persist: PersistTrip):
        self.ceiling = ceiling
        self._channel = channel
        self._persist = persist
        self.estimated = False  # some spend was estimated from token prices (SPEC §11.3)
        self.unpriced: set[str] = set()  # models whose usage had no price, so no cost
        self.unpriced_changed = False
        self.usage = UsageByModel()  # per-model turns, tokens and cost (context_stats)

    def charge(self, model: str | None, input_tokens: int | None, output_tokens: int | None,
               nano: int, estimated: bool, unpriced: bool) -> CostTrip | None:
        """One model call's usage: noted per model, its cost spent, the ceilings checked."""
        if estimated:
            self.estimated = True
        if unpriced and (model or "") not in self.unpriced:
            self.unpriced.add(model or "")
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
        self._channel.counters.count_trip("cost_ceiling")
        self._persist(TripRow("cost_ceiling", trip.kind, trip.halts, trip.reason,
                              in_a_row=trip.in_a_row))
        line = lines.cost_trip(trip.reason, in_turn=in_turn, halts=trip.halts,
                               in_a_row=trip.in_a_row, limit=self.ceiling.escalate_after)
        self._channel.emit("halt" if trip.halts else "cut", line,
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


class ContextPolicy:
    """After an observation that moved the context estimate: compaction pending (reported), or
    the hard cut of the turn; the records of compaction, kept in the durable log; what the
    context's operations answer while the guard is disabled (``guard`` None: the observations
    never reach this policy then)."""

    __slots__ = ("_channel", "_persist", "cut_at", "cuts", "guard", "summarize")

    def __init__(self, guard: ContextGuard | None, cut_at: float, channel: OperatorChannel,
                 persist: PersistContext,
                 summarize: Callable[[Any, str | None], SummaryResult] | None = None,
                 *, enforce: bool = True):
        self.guard = guard
        self.summarize = summarize  # the host's summarizer (None: mechanical truncation)
        self.cut_at = cut_at
        self._channel = channel
        self._persist = persist
        # the 95% crossing cuts the turn only under enforce (and ``cut_turns``); in warn and
        # feedback nothing is cut (SPEC §3's ladder, as for a task's budget, SPEC §7.1): the
        # crossing is reported and its record written (``enforced: false``). The cost ceiling
        # is the one guardrail that cuts in every mode.
        self.cuts = enforce and (guard is None or guard.config.cut_turns)

    def check(self, decision: Decision) -> Decision:
        """``decision`` as it stands, or the context cut that replaces it."""
        guard = self.guard
        assert guard is not None  # observations reach this policy only with a guard
        verdict = guard.check()
        if verdict is None:
            return decision
        u = guard.utilization()
        if verdict == "compact":
            self.record({
                "event": "compaction-pending", "utilization": round(u.fraction, 6),
                "estimated": u.estimated, "tokens": u.tokens, "window": u.window,
                "threshold": u.threshold, "model": u.model,
                "message": lines.compaction_pending(u),
            })
            return decision
        record = guard.turn_cut_record()
        reason = lines.context_cut_reason(u, self.cut_at, auto_compact=guard.config.auto_compact)
        if not decision.proceed or not self.cuts:
            # already cut or halted by another guardrail, or report-only (below enforce)
            self.record({**record, "enforced": False, "message": reason})
            return decision
        cut = Decision(CUT_TURN, "context", reason, decision.alerts)
        self._channel.counters.count_trip("context")
        # the durable row carries the reason (a subjunctive, no promise); the one-shot sentence
        # is the log line's alone
        self._persist(ContextRow({**record, "enforced": True, "reason": reason}))
        self._channel.emit("cut", lines.context_cut(reason), level=logging.WARNING,
                           guardrail="context", decision=cut, record=record)
        return cut

    def snapshot(self) -> dict[str, Any]:
        """Nothing: the context's rows are records of what happened (cuts, compactions), not
        state to restore — a restarted session measures its context afresh."""
        return {}

    def apply(self, folded: Folded) -> None:
        """Nothing to take forward (``snapshot``)."""

    def batch_state(self) -> ContextState:
        c = self.guard
        assert c is not None  # the batch asks only with a guard
        return ContextState(c.measured, c.estimator.bytes, c.compact_at, c.cut_tokens,
                            c.pending, c.cut_this_turn, c.model)

    def take_change(self, measured: int | None, added: int) -> None:
        """What the batch core changed: a context a usage measured, estimate bytes added."""
        guard = self.guard
        assert guard is not None  # the batch changes a context only with a guard
        if measured is not None:
            guard.observe_usage(None, measured)
        if added:
            guard.estimator.add_bytes(added)

    def observe_usage(self, model: str | None, input_tokens: int | None) -> None:
        """A usage's measured context (and a model change): the guard's records kept."""
        assert self.guard is not None  # observations reach this policy only with a guard
        for record in self.guard.observe_usage(model, input_tokens):
            self.record(record)

    def record(self, record: dict[str, Any]) -> None:
        message = record.pop("message", None) or record["event"]
        level = logging.WARNING if record["event"].startswith("context-reduction") else logging.INFO
        if record["event"] != "compaction-pending":  # pending is a state, not an event to keep
            self._persist(ContextRow(record))
        self._channel.emit("context", message, level=level, guardrail="context", record=record)

    def compact(self, messages: Any, focus: str | None, *, manual: bool = False) -> Compaction:
        """Automatic (its failures are durable rows) or manual (a failure is the caller's
        alone: ``Compaction.reason``, no row)."""
        if self.guard is None:
            return Compaction("skipped", reason=DISABLED, manual=manual)
        return self._records(self.guard.compact(messages, focus, self.summarize,
                                                manual=manual))

    def checkpoint(self, messages: Any, note: str | None, *, manual: bool = False) -> Compaction:
        if self.guard is None:
            return Compaction("skipped", reason=DISABLED, operation="checkpoint", manual=manual)
        return self._records(self.guard.checkpoint(messages, note, self.summarize,
                                                   manual=manual))

    def stats(self, usage: UsageByModel) -> ContextStats:
        """The ``/context`` view (the per-model usage alone while the guard is disabled)."""
        return usage_stats(usage) if self.guard is None else self.guard.stats(usage)

    def utilization(self) -> Utilization | None:
        return None if self.guard is None else self.guard.utilization()

    def _records(self, result: Compaction) -> Compaction:
        for record in result.records:
            self.record({**record, "message": lines.compaction_record(record)})
        return result
