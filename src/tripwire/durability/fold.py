"""Folding a session's durable history into guardrail state (SPEC §5).

The store (``chain.py``) keeps a session's rows in order, hash-chained; ``fold_history`` reads
them forward, each through its record (``rows.py``), into what a restarted process needs:
which halts stand, the spend, the budget granted, the escalation counts, the task rows. Last
writer wins per guardrail: a reset after a trip clears what ``reset.OperatorReset`` says it
clears; granted budget accumulates; the spend is the sum over the rows' writers of each one's
own running total (``SpendTally``, the one reader of spend: exact when several processes
charge the session at once). ``Guardrails`` then applies the fold *subject to its live
configuration* (a process started in ``warn`` does not resurrect an ``enforce`` halt; budget is
not applied to a per-session ceiling that is no longer configured).

Tamper rule (SPEC §5 Decision, issue 13). Let k be the chain's first broken link; rows before
it are trusted and folded. Whatever the untrusted part held (a halt, spend, a reset) cannot be
known, and restoring less would hand out a fresh budget: so a session whose chain is broken
anywhere is restored **halted, needing an operator**, with the spend it can still prove. The
same holds for every session when the store as a whole shows tampering (its manifest missing,
forged or short of rows, or the store behind its anchor): no session's history can then be
proven complete (a replayed older head, a session deleted with its manifest record).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from ..base.money import NANO
from .reset import OperatorReset
from .rows import (
    BudgetRow,
    CheckInRow,
    EscalationCounts,
    OutcomeRow,
    RaiseRow,
    ResetRow,
    Spend,
    SpendRow,
    StoredRow,
    TaskRecord,
    TaskRow,
    TripRow,
    TurnRow,
    parse,
)

__all__ = ["Folded", "SpendTally", "fold_history", "fold_unreadable", "carried_rows",
           "anchored_task_rows", "RESTORED_SIGNAL", "UNREADABLE"]

#: The synthetic alert a restored watchdog halt feeds back to the model.
RESTORED_SIGNAL = "restored-watchdog-halt"
#: The reason's name for a session restored from a store that cannot be read.
UNREADABLE = "store_unreadable"
#: Escalation counts a row that carries none leaves behind.
_NO_COUNTS = EscalationCounts()


@dataclass(slots=True)
class SpendTally:
    """A session's spend from its stored rows, in row order (``fold_history`` feeds it every
    row's ``rows.Spend``): the last previous-format total, plus each writer's latest own
    total."""

    legacy: int = 0  # nano-dollars: the last row of the previous format (no spend_writer)
    writers: dict[str, int] = field(default_factory=dict)  # spend_writer -> its spend_nano

    def add(self, spend: Spend) -> None:
        writer = spend.writer
        if writer is not None:
            own = spend.own_nano
            if own is not None and own > self.writers.get(writer, 0):
                self.writers[writer] = own  # a writer's total only grows: its largest is latest
        elif spend.spent_usd is not None:  # the previous format: the session's total as written
            self.legacy = round(spend.spent_usd * NANO)

    @property
    def total(self) -> int:
        """The session's spend in nano-dollars."""
        return self.legacy + sum(self.writers.values())

    def others(self, writer: str | None) -> int:
        """The session's spend but what ``writer`` charged (as far as the rows say)."""
        return self.total - (self.writers.get(writer, 0) if writer is not None else 0)


@dataclass
class Folded:
    """A session's history folded forward: the standing halts (the trip rows that hold it),
    the spend, the budget granted by resets, the escalation counts, whether the history can
    be trusted, and its task rows. A reset row acts on it through ``reset.OperatorReset``
    (``standing``, ``clear_watchdog``, ``clear_cost``: the rule a live session's reset
    follows too)."""

    watchdog_halt: TripRow | None = None       # the standing halting trip
    cost_session_halt: TripRow | None = None
    cost_escalation_halt: TripRow | None = None
    granted_usd: float = 0.0
    spend: SpendTally = field(default_factory=SpendTally)  # every writer's charges
    watchdog_cut_signal: str | None = None
    watchdog_in_a_row: int = 0
    cost_in_a_row: int = 0
    tampered: str | None = None  # why the history cannot be trusted to show no halt
    unreadable: bool = False  # the store could not be read at all (``tampered`` says why)
    warnings: list[str] = field(default_factory=list)
    rows: int = 0
    task_rows: list[TaskRecord] = field(default_factory=list)  # task/budget/outcome rows
    turn: TurnRow | None = None  # the last turn row (durable turns), None: no row

    @property
    def spent_nano(self) -> int:
        """The session's spend (nano-dollars): the sum over the writers of its rows."""
        return self.spend.total

    @property
    def spent_usd(self) -> float:
        return self.spend.total / NANO

    @property
    def halted_by(self) -> tuple[str, ...]:
        by = []
        if self.watchdog_halt is not None or self.tampered is not None:
            by.append("watchdog")
        if self.cost_session_halt is not None or self.cost_escalation_halt is not None:
            by.append("cost_ceiling")
        return tuple(by)

    @property
    def reason(self) -> str:
        parts = [trip.reason for trip in (self.watchdog_halt, self.cost_session_halt,
                                          self.cost_escalation_halt) if trip is not None]
        if self.tampered is not None:
            parts.append(self.tampered)
        return " ".join(parts)

    # what a reset clears (``reset.Resettable``)

    def standing(self) -> tuple[bool, bool, bool]:
        """The halts that stand: the watchdog's (or an untrusted history's), the per-session
        cost ceiling's, the per-turn escalation's."""
        return (self.watchdog_halt is not None or self.tampered is not None,
                self.cost_session_halt is not None, self.cost_escalation_halt is not None)

    def clear_watchdog(self) -> None:
        self.watchdog_halt = None
        self.watchdog_cut_signal, self.watchdog_in_a_row = None, 0

    def clear_cost(self, reset: OperatorReset) -> None:
        self.cost_session_halt = self.cost_escalation_halt = None
        self.cost_in_a_row = 0
        self.granted_usd += reset.budget_usd


def fold_history(history: Any) -> Folded:
    """Fold a ``SessionHistory`` (trusted rows + chain report) forward."""
    folded = Folded(rows=len(history.rows))
    for row in history.rows:
        _fold(folded, parse(row.kind, row.data))
    report = history.report
    store_problem = getattr(history, "store_problem", None)
    if not report.intact:
        # Whatever the untrusted part held — a halt, spend, a reset — cannot be known; restoring
        # less than it held would hand out a fresh budget, so the session halts instead.
        folded.tampered = (
            f"the session's guardrail history was tampered with ({report.problem}); what it "
            "hid (a halt, spend) cannot be known, so the session stays halted until an "
            "operator resets it")
    elif store_problem is not None:
        # The store as a whole lost or rolled back rows: no session's history can be proven
        # complete (a replayed older head, a session deleted with its manifest record).
        folded.tampered = (
            f"the guardrail store was tampered with ({store_problem}); no session's history "
            "can be proven complete, so the session stays halted until an operator resets it")
    return folded


def _fold(folded: Folded, row: StoredRow) -> None:
    """One row taken forward (the spend of every row that carries it, in row order)."""
    if isinstance(row, SpendRow):
        folded.spend.add(row.spend)
        counts = row.counts or _NO_COUNTS
        folded.watchdog_cut_signal = counts.watchdog_cut_signal
        folded.watchdog_in_a_row = counts.watchdog_in_a_row
        folded.cost_in_a_row = counts.cost_in_a_row
    elif isinstance(row, TripRow):
        folded.spend.add(row.spend)
        _fold_trip(folded, row)
    elif isinstance(row, ResetRow):
        folded.spend.add(row.spend)
        reset = OperatorReset.from_row(row)
        if reset is not None:  # a row this version cannot read resets nothing
            if folded.turn is not None and folded.turn.blocked is not None:
                folded.turn = folded.turn.unblocked()  # a reset unblocks the turn
            reset.apply(folded)
    elif isinstance(row, TurnRow):
        folded.turn = row
    elif isinstance(row, TaskRow | BudgetRow | OutcomeRow | RaiseRow | CheckInRow):
        folded.task_rows.append(row)


def _fold_trip(folded: Folded, trip: TripRow) -> None:
    if trip.guardrail == "watchdog":
        if trip.halts:
            folded.watchdog_halt = trip
        folded.watchdog_cut_signal = trip.signal
        folded.watchdog_in_a_row = trip.in_a_row or 0
    elif trip.guardrail == "cost_ceiling":
        if trip.kind == "session":
            folded.cost_session_halt = trip
        elif trip.kind == "escalation":
            folded.cost_escalation_halt = trip
        if trip.in_a_row is not None:
            folded.cost_in_a_row = trip.in_a_row


def fold_unreadable(problem: str, entry: Any = None) -> Folded:
    """A session of a store that exists but cannot be read (``StoreUnreadable``): not
    transient, and not absent either. What it held (a halt, spend) cannot be known, so the
    session restores halted (``store_unreadable``), with the spend and task consumption the
    anchor proves (``entry``: ``anchor.AnchorEntry``, or None without an anchor or with
    nothing anchored for it: then nothing is proven and the spend is 0)."""
    folded = Folded(unreadable=True)
    folded.tampered = (
        f"{UNREADABLE}: the guardrail store cannot be read ({problem}); what it held (a halt, "
        "spend) cannot be known, so the session stays halted until an operator resets it "
        "(`tripwire reset` moves the unreadable store aside and starts a new chain)")
    if entry is not None:
        folded.spend.add(Spend(writer="anchor", own_nano=entry.spend_nano))
        for task, kept in entry.tasks.items():
            folded.task_rows.extend(anchored_task_rows(task, kept))
    return folded


def anchored_task_rows(task: str, kept: dict[str, Any],
                       carried: str | None = None) -> list[TaskRecord]:
    """The rows that fold back to what an anchor proved of a task (``kept``: its latest
    ``used``, ``exhausted``, ``started_at`` and ``outcome``, its ``raised`` caps and last
    check-in ``window``): its consumption, its raises and window, and its outcome if it had
    one (``carried``: why a new chain carries them over)."""
    used, exhausted, started = kept.get("used"), kept.get("exhausted"), kept.get("started_at")
    found: list[TaskRecord] = [BudgetRow(
        task, used if isinstance(used, dict) else None, exhausted=exhausted
        if isinstance(exhausted, dict) else None, started_at=started
        if isinstance(started, int | float) and not isinstance(started, bool) else None,
        carried=carried)]
    raised, window = kept.get("raised"), kept.get("window")
    if isinstance(raised, dict):  # its raises since: the raised caps
        found.extend(RaiseRow(task, c, None, cap, who=carried or "anchor")
                     for c, cap in raised.items() if isinstance(cap, int | float))
    if isinstance(window, dict):  # its last check-in's window
        found.append(CheckInRow(task, window, who=carried or "anchor"))
    if isinstance(kept.get("outcome"), str):
        found.append(OutcomeRow(task, kept["outcome"], carried=carried))
    return found


def carried_rows(entry: Any, why: str) -> list[StoredRow]:
    """What a new chain starts with for a session of a store moved aside as unreadable
    (``tripwire reset``): the rows that fold back to what the anchor proved of it (``entry``,
    an ``anchor.AnchorEntry``): its spend, its tasks' consumption, and each standing halt,
    whose reason says where it came from (``why``)."""
    found: list[StoredRow] = []
    bounds = entry.bounds

    def spend(granted: float | None = None) -> Spend:
        return Spend(entry.spend_nano / NANO, "carried", entry.spend_nano,
                     bounds.get("max_session_usd"), bounds.get("max_turn_usd"), granted)

    granted = bounds.get("granted_usd", 0.0)
    if granted:  # budget the operator granted: a reset row grants it, before any halt
        grant = OperatorReset.from_row(ResetRow("cost_ceiling", granted))
        assert grant is not None
        found.append(grant.row((), spend(granted), by="tripwire reset (carried)",
                               carried=why))
    if entry.spend_nano or "max_session_usd" in bounds or "max_turn_usd" in bounds:
        found.append(SpendRow(spend(), carried=why))
    for task, kept in entry.tasks.items():
        found.extend(anchored_task_rows(task, kept, why))
    for halt in entry.halted:
        guardrail, _, kind = halt.partition(":")
        found.append(TripRow(guardrail, kind or "halt", True,
                             f"{guardrail} halt carried over: {why}", spend=spend()))
    return found
