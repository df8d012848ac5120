"""Getting one session's durable rows into the store: in order, promptly, never lost silently.

A guardrail decision appends its row before it returns (SPEC §5), but a decision must not wait
out another writer's lock: it waits at most ``DECISION_WAIT`` seconds. A row the store did not
take by then (locked, full disk, the file gone) stays in the session's ``Outbox``, in order, and
a background retrier writes it as soon as the store takes it (with the store's full timeout);
the next decision point tries too, and so does a last attempt at interpreter exit. While a row
waits, the decision still holds in memory.

``Durability`` is one session's durable side as its ``Guardrails`` holds it: the rows its
policies write, the outbox flushed, a folded history applied to each policy (``restore``), and
what other processes wrote since (an operator's reset, a shared store's halts and spend).

Durable turns (``turns``: a host whose every event is a new process, as a hook's is): the turn
in progress — whether one is open, its cut or the halt's decision, the feedback queued for the
model — is a ``turn`` row (``durability.rows.TurnRow``), written by ``keep_turn`` when it changed
since the last one (``Guardrails.flush``), and handed back by ``restore``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ..base.decision import CUT_TURN
from ..base.log import LOGGER
from ..base.modes import Mode
from ..durability.fold import Folded
from ..durability.log import DECISION_WAIT, SessionLog
from ..durability.rows import (
    ContextRow,
    EscalationCounts,
    SpendRow,
    StoredRow,
    TripRow,
    TurnRow,
)
from ..policy.lines import tampered_halt

if TYPE_CHECKING:
    from ..base.decision import Decision
    from ..policy.budget import BudgetPolicy
    from ..policy.cost import CostPolicy
    from ..policy.reporting import OperatorChannel
    from ..policy.watchdog import WatchdogPolicy

__all__ = ["Durability"]

_NO_TURN = TurnRow()  # a session no turn row speaks of: no turn open, nothing blocked


class Durability:
    """One session's durable side (SPEC §5): each row appended before its decision returns
    (trips, resets and spend rows carry the spend and escalation counts; context rows do not),
    what a turn end must write, the outbox flushed, and a folded history taken forward by each
    policy's ``apply`` — at restore, and at a turn start for what other processes wrote since.
    ``Guardrails`` holds the session's lock and makes a standing halt its blocked decision.
    Without a store (``log`` None) nothing is written."""

    __slots__ = ("channel", "cost", "log", "turn_kept", "turns", "watchdog")

    watchdog: WatchdogPolicy  # the policies whose state the rows carry (``bind``)
    cost: CostPolicy

    def __init__(self, store: Any, session_id: str, channel: OperatorChannel,
                 turns: bool = False):
        self.channel = channel  # its lines name the session (``session_id``)
        self.log = SessionLog(store, session_id, channel.line) if store is not None else None
        self.turns = turns  # durable turns (the module docstring)
        self.turn_kept = _NO_TURN  # the turn state the store holds (its last turn row)

    @property
    def session_id(self) -> str:
        return self.channel.session_id

    def bind(self, watchdog: WatchdogPolicy, cost: CostPolicy) -> None:
        self.watchdog, self.cost = watchdog, cost

    def __len__(self) -> int:
        """Rows decided but not yet in the store."""
        return len(self.log) if self.log is not None else 0

    # -- writing -------------------------------------------------------------------------------

    def put(self, row: StoredRow) -> None:
        """Append one row before the decision is returned (the store fsyncs), waiting for the
        store at most DECISION_WAIT: a row the store does not take by then stays in the outbox,
        in order, and is written in the background — a held lock must neither lose a halt nor
        hold the harness's decision."""
        log = self.log
        if log is None:
            return
        # trips, resets and spend rows all carry the spend and counts; context and turn rows
        # do not
        log.put(row, None if isinstance(row, ContextRow | TurnRow) else (
            self.cost.ceiling.spent, self.counts()))

    def trip(self, row: TripRow) -> None:
        """A policy's trip row, with the spend every trip row carries."""
        self.put(row.with_spend(self.cost.snapshot()))

    def counts(self) -> EscalationCounts:
        """The escalation counts a spend row carries (the watchdog's, the cost ceiling's)."""
        return EscalationCounts(*self.watchdog.snapshot(), self.cost.ceiling.in_a_row)

    def spend(self) -> None:
        """A spend row: the spend with the ceiling, the escalation counts, and the per-model
        usage (the ``/context`` view of a stored session)."""
        cost = self.cost
        self.put(SpendRow(cost.snapshot(), self.counts(),
                          cost.usage.snapshot() if cost.usage.first_model is not None else None))

    def persist_spend(self) -> None:
        """Write the spend if the store does not have it yet."""
        log = self.log
        if log is not None and not log.holds(self.cost.ceiling.spent):
            self.spend()

    def turn_end(self) -> None:
        """At a turn boundary, what a restart needs and no other row wrote: the escalation
        counts (a clean turn clears them), and any spend not written yet."""
        log = self.log
        if log is None:
            return
        cost = self.cost
        if cost.take_unpriced_news() or not log.holds(cost.ceiling.spent, self.counts()):
            self.spend()
        elif len(log):
            log.drain(DECISION_WAIT)

    def keep_turn(self, open_: bool, blocked: Decision | None) -> None:
        """Durable turns: the turn in progress as a ``turn`` row, when it is not the one the
        store holds. ``blocked``: the session's blocked decision, kept when it is a cut or a
        halt. That a turn is open is kept while ending it has a count to clear (a clean turn
        ends a run of cut turns, SPEC §3, §4): nothing else a turn's end does is lost with
        the process (the task's consumption and the spend have rows of their own), so a
        healthy session writes no turn rows at all."""
        if not self.turns or self.log is None:
            return
        _, watchdog_in_a_row, cost_in_a_row = self.counts()
        state = TurnRow(open_ and bool(watchdog_in_a_row or cost_in_a_row),
                          blocked if blocked is not None and blocked.action in TurnRow.KEPT
                          else None, self.watchdog.feedback.items())
        if state != self.turn_kept:
            self.put(state)
            self.turn_kept = state

    def flush(self, wait: float | None = None) -> bool:
        """Write rows the store did not take yet (waiting the store's full timeout, or at most
        ``wait`` seconds for each); True when none is left."""
        return self.log is None or self.log.flush(wait)

    @property
    def problem(self) -> str | None:
        return self.log.problem if self.log is not None else None

    # -- reading back --------------------------------------------------------------------------

    def attach(self, store: Any, budget: BudgetPolicy) -> None:
        """A store given after construction (a new log, into which the session's implicit task
        writes too), or in place of the log's."""
        if self.log is None:
            self.log = SessionLog(store, self.session_id, self.channel.line)
            budget.share_log(self.log, self.session_id)
        else:
            self.log.store = store

    def restore(self, budget: BudgetPolicy, history: Any = None) -> TurnRow | None:
        """Fold the store's history of this session forward into each policy, under the live
        configuration (``history``: read already, as ``Fleet.restore_all`` does). Durable
        turns: the turn in progress as stored, the queue restored (the session's lock holder
        applies the rest: ``Guardrails``); else None."""
        log = self.log
        assert log is not None  # restoring needs a store
        folded = log.read(history)
        if folded is None or (not folded.rows and folded.tampered is None):
            return None
        cost = self.cost
        budget.apply(folded)
        cost.apply(folded)
        self.watchdog.apply(folded, tell_model=not self.turns)
        if folded.tampered is not None and (self.watchdog.mode == Mode.ENFORCE
                                            or cost.ceiling.active):
            reason = tampered_halt(folded.tampered)
            self.watchdog.hold(reason)
            LOGGER.warning(self.channel.line(reason))
        log.mark_stored(cost.ceiling.spent, self.counts())
        if not self.turns or folded.turn is None:
            return None
        turn = self.turn_kept = folded.turn
        blocked = turn.blocked
        cut = blocked if blocked is not None and blocked.action == CUT_TURN else None
        self.watchdog.restore_turn(turn.feedback, cut)
        cost.restore_turn(cut)
        return turn

    def sync_resets(self) -> None:
        """Clear halts that an operator reset in the store (e.g. `tripwire reset` run by
        another process) and take the budget it granted."""
        folded = self.log.read() if self.log is not None else None
        if folded is not None:
            self._sync_resets_from(folded)

    def sync_shared(self, halted: bool) -> bool:
        """The store is shared with other processes that run this session too (a session that
        moved between daemons): take what they wrote since — a halt, spend, a reset, granted
        budget — as a restore would, before this turn may start. False when unreadable."""
        log = self.log
        assert log is not None
        folded = log.read()
        if folded is None:
            return False
        if halted:
            self._sync_resets_from(folded)
        cost, policy = self.cost, self.watchdog
        cost.apply(folded)  # every writer's spend summed (cost.SpendTally); budget; cost halts
        if policy.halt_reason is None and folded.watchdog_halt is not None:
            policy.apply(folded)  # halted elsewhere: held here too (in enforce)
        if folded.tampered is not None and policy.halt_reason is None and (
                policy.mode == Mode.ENFORCE or cost.ceiling.active):
            policy.hold(tampered_halt(folded.tampered))
        log.mark_stored(cost.ceiling.spent, self.counts())
        return True

    def _sync_resets_from(self, folded: Folded) -> None:
        self.watchdog.sync(folded)  # its reset clears the watchdog's run state too
        self.cost.sync(folded)
