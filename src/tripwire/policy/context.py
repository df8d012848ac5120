"""The context policy: what a crossed context limit does to a session (SPEC §6): pending
compaction, the hard cut, compaction records through the host's summarizer, and what
``compact`` / ``checkpoint`` / ``context_stats`` / ``utilization`` answer while the guard is
disabled. The arithmetic is ``context.guard.ContextGuard``; ``Guardrails`` holds the lock.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from ..base.decision import CUT_TURN, Decision
from ..durability.rows import ContextRow, RowSink
from ..engine.batch import ContextState
from . import lines

if TYPE_CHECKING:  # the guard is imported by the session that makes one (its guard enabled)
    from ..context.guard import Compaction, ContextGuard, SummaryResult, Utilization
    from ..context.stats import ContextStats, UsageByModel
    from ..durability.fold import Folded
    from .reporting import OperatorChannel

__all__ = ["ContextPolicy"]

#: Why ``compact`` and ``checkpoint`` skip while the context guard is disabled
DISABLED = "the context guard is disabled"


class ContextPolicy:
    """After an observation that moved the context estimate: compaction pending (reported), or
    the hard cut of the turn; the records of compaction, kept in the durable log; what the
    context's operations answer while the guard is disabled (``guard`` None: the observations
    never reach this policy then)."""

    __slots__ = ("_durable", "cuts", "guard", "summarize")

    def __init__(self, guard: ContextGuard | None, durable: RowSink,
                 summarize: Callable[[Any, str | None], SummaryResult] | None = None,
                 *, enforce: bool = True):
        self.guard = guard
        self.summarize = summarize  # the host's summarizer (None: mechanical truncation)
        # its context records, in the session's durable log; its lines (``durable.channel``)
        self._durable = durable
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
        reason = lines.context_cut_reason(u, guard.config.cut_at,
                                          auto_compact=guard.config.auto_compact)
        if not decision.proceed or not self.cuts:
            # already cut or halted by another guardrail, or report-only (below enforce)
            self.record({**record, "enforced": False, "message": reason})
            return decision
        cut = Decision(CUT_TURN, "context", reason, decision.alerts)
        channel: OperatorChannel = self._durable.channel
        channel.counters.count_trip("context")
        # the durable row carries the reason (a subjunctive, no promise); the one-shot sentence
        # is the log line's alone
        self._durable.put(ContextRow({**record, "enforced": True, "reason": reason}))
        channel.emit("cut", lines.context_cut(reason), level=logging.WARNING,
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
            self._durable.put(ContextRow(record))
        self._durable.channel.emit("context", message, level=level, guardrail="context",
                                   record=record)

    def compact(self, messages: Any, focus: str | None, *, manual: bool = False) -> Compaction:
        """Automatic (its failures are durable rows) or manual (a failure is the caller's
        alone: ``Compaction.reason``, no row)."""
        if self.guard is None:
            from ..context.guard import Compaction

            return Compaction("skipped", reason=DISABLED, manual=manual)
        return self._records(self.guard.compact(messages, focus, self.summarize,
                                                manual=manual))

    def checkpoint(self, messages: Any, note: str | None, *, manual: bool = False) -> Compaction:
        if self.guard is None:
            from ..context.guard import Compaction

            return Compaction("skipped", reason=DISABLED, operation="checkpoint", manual=manual)
        return self._records(self.guard.checkpoint(messages, note, self.summarize,
                                                   manual=manual))

    def stats(self, usage: UsageByModel) -> ContextStats:
        """The ``/context`` view (the per-model usage alone while the guard is disabled)."""
        from ..context.stats import usage_stats

        return usage_stats(usage) if self.guard is None else self.guard.stats(usage)

    def utilization(self) -> Utilization | None:
        return None if self.guard is None else self.guard.utilization()

    def _records(self, result: Compaction) -> Compaction:
        for record in result.records:
            self.record({**record, "message": lines.compaction_record(record)})
        return result
