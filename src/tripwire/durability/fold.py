"""Folding a session's durable history into guardrail state (SPEC §5).

The store (``store.py``) keeps a session's rows in order, hash-chained; ``fold_history`` reads
them forward into what a restarted process needs: which halts stand, the spend, the budget
granted, the escalation counts. Last writer wins per guardrail: a reset after a trip clears
it; granted budget accumulates; the spend is the sum over the rows' writers of each one's own
running total (``SpendTally``: exact when several processes charge the session at once). ``Guardrails``
then applies the fold *subject to its live
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

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, ClassVar

from ..base.alert import Alert
from ..base.decision import CUT_TURN, HALT_SESSION, Decision
from ..base.money import NANO
from ..base.names import Guardrail
from ..errors import InvalidReset

__all__ = ["Folded", "TurnState", "fold_history", "fold_unreadable", "carried_rows",
           "RESTORED_SIGNAL", "UNREADABLE"]

#: Row kinds of task budgets (SPEC §7): a task's start, its consumption, its outcome; folded
#: by ``budget.Task`` (``Folded.task_rows``).
TASK_KINDS = frozenset({"task", "budget", "outcome"})

#: The synthetic alert a restored watchdog halt feeds back to the model.
RESTORED_SIGNAL = "restored-watchdog-halt"
#: The reason's name for a session restored from a store that cannot be read.
UNREADABLE = "store_unreadable"


@dataclass(slots=True)
class SpendTally:
    """A session's spend from its stored rows, in row order (``restore.fold_history`` feeds
    it every row): the last previous-format total, plus each writer's latest own total."""

    legacy: int = 0  # nano-dollars: the last row of the previous format (no spend_writer)
    writers: dict[str, int] = field(default_factory=dict)  # spend_writer -> its spend_nano

    def add(self, data: Mapping[str, Any]) -> None:
        writer = data.get("spend_writer")
        if isinstance(writer, str):
            own = data.get("spend_nano")
            if type(own) is int and own > self.writers.get(writer, 0):
                self.writers[writer] = own  # a writer's total only grows: its largest is latest
        elif "spent_usd" in data:  # the previous format: the session's total as written
            self.legacy = round(float(data["spent_usd"]) * NANO)

    @property
    def total(self) -> int:
        """The session's spend in nano-dollars."""
        return self.legacy + sum(self.writers.values())

    def others(self, writer: str | None) -> int:
        """The session's spend but what ``writer`` charged (as far as the rows say)."""
        return self.total - (self.writers.get(writer, 0) if writer is not None else 0)



class TurnState:
    """The turn in progress, as a session with durable turns keeps it (``turn`` rows, written
    by ``Guardrails.flush`` when it changed; the last one stands): whether a turn is open
    (``session.durability.Durability.keep_turn`` says when that is kept), the decision its
    later events get (a cut, or the session's halt: with the alerts that made it, so what the
    model was told can be told again), and the feedback queued for the model, ``(signal,
    text)`` pairs. A reset row after it clears the decision (a reset unblocks).
    (A plain class, not a dataclass: a hook imports this module on every event.)"""

    __slots__ = ("blocked", "feedback", "open")

    def __init__(self, open: bool = False, blocked: Decision | None = None,
                 feedback: tuple[tuple[str, str], ...] = ()):
        self.open = open
        self.blocked = blocked
        self.feedback = feedback

    def __eq__(self, other: object) -> bool:
        return isinstance(other, TurnState) and (self.open, self.blocked, self.feedback) == (
            other.open, other.blocked, other.feedback)

    __hash__ = None  # type: ignore[assignment]  # mutable fields: compared, never hashed

    def __repr__(self) -> str:
        return f"TurnState(open={self.open}, blocked={self.blocked!r}, feedback={self.feedback!r})"

    def unblocked(self) -> TurnState:
        """The same turn without its blocked decision (a reset's)."""
        return TurnState(self.open, None, self.feedback)

    #: the blocked decisions a turn row keeps: a refused turn or a timed-out call is not one
    KEPT: ClassVar[tuple[str, ...]] = (CUT_TURN, HALT_SESSION)

    def row(self) -> dict[str, Any]:
        """The ``turn`` row's data: ``open``; ``blocked`` (action, guardrail, reason, alerts as
        ``[signal, severity, text]``) and ``feedback`` (``[signal, text]`` pairs) when any."""
        data: dict[str, Any] = {"open": self.open}
        blocked = self.blocked
        if blocked is not None:
            data["blocked"] = {"action": blocked.action, "guardrail": blocked.guardrail,
                               "reason": blocked.reason,
                               "alerts": [[a.signal, a.severity, a.model_text]
                                          for a in blocked.alerts]}
        if self.feedback:
            data["feedback"] = [list(item) for item in self.feedback]
        return data

    @classmethod
    def from_row(cls, data: Mapping[str, Any]) -> TurnState:
        """A ``turn`` row's state; what does not read as one is left out (the row is sealed,
        but a reader stays total: an odd field never stops a restore)."""
        blocked = None
        raw = data.get("blocked")
        if isinstance(raw, Mapping) and raw.get("action") in cls.KEPT and \
                isinstance(raw.get("reason"), str):
            guardrail = raw.get("guardrail")
            alerts = tuple(Alert(a[0], a[1], None, a[2], a[2], -1)
                           for a in raw.get("alerts") or () if _strings(a, 3))
            blocked = Decision(raw["action"], guardrail if isinstance(guardrail, str) else None,
                               raw["reason"], alerts)
        feedback = tuple((item[0], item[1]) for item in data.get("feedback") or ()
                         if _strings(item, 2))
        return cls(data.get("open") is True, blocked, feedback)


def _strings(value: Any, n: int) -> bool:
    return isinstance(value, list) and len(value) == n and all(isinstance(v, str) for v in value)


@dataclass
class Folded:
    watchdog_halt: dict[str, Any] | None = None       # the standing halting trip's row data
    cost_session_halt: dict[str, Any] | None = None
    cost_escalation_halt: dict[str, Any] | None = None
    granted_usd: float = 0.0
    spend: SpendTally = field(default_factory=SpendTally)  # every writer's charges
    watchdog_cut_signal: str | None = None
    watchdog_in_a_row: int = 0
    cost_in_a_row: int = 0
    tampered: str | None = None  # why the history cannot be trusted to show no halt
    unreadable: bool = False  # the store could not be read at all (``tampered`` says why)
    warnings: list[str] = field(default_factory=list)
    rows: int = 0
    task_rows: list[dict[str, Any]] = field(default_factory=list)  # task/budget/outcome rows
    turn: TurnState | None = None  # the last turn row's state (durable turns), None: no row

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
        parts = [d["reason"] for d in (self.watchdog_halt, self.cost_session_halt,
                                        self.cost_escalation_halt) if d is not None]
        if self.tampered is not None:
            parts.append(self.tampered)
        return " ".join(parts)


def fold_history(history: Any) -> Folded:
    """Fold a ``SessionHistory`` (trusted rows + chain report) forward."""
    folded = Folded(rows=len(history.rows))
    spend = folded.spend
    for row in history.rows:
        data = row.data
        if "spent_usd" in data or "spend_writer" in data:
            spend.add(data)
        if row.kind == "trip":
            _fold_trip(folded, data)
        elif row.kind == "reset":
            _fold_reset(folded, data)
        elif row.kind in TASK_KINDS:
            folded.task_rows.append(data)
        elif row.kind == "turn":
            folded.turn = TurnState.from_row(data)
        elif row.kind == "spend":
            folded.watchdog_cut_signal = data.get("watchdog_cut_signal")
            folded.watchdog_in_a_row = int(data.get("watchdog_in_a_row", 0))
            folded.cost_in_a_row = int(data.get("cost_in_a_row", 0))
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


def fold_unreadable(problem: str, entry: Any = None) -> Folded:
    """A session of a store that exists but cannot be read (``StoreUnreadable``): not
    transient, and not absent either. What it held (a halt, spend) cannot be known, so the
    session restores halted (``store_unreadable``), with the spend and task consumption the
    anchor proves (``entry``: ``store.AnchorEntry``, or None without an anchor or with
    nothing anchored for it: then nothing is proven and the spend is 0)."""
    folded = Folded(unreadable=True)
    folded.tampered = (
        f"{UNREADABLE}: the guardrail store cannot be read ({problem}); what it held (a halt, "
        "spend) cannot be known, so the session stays halted until an operator resets it "
        "(`tripwire reset` moves the unreadable store aside and starts a new chain)")
    if entry is not None:
        folded.spend.add({"spend_writer": "anchor", "spend_nano": entry.spend_nano})
        for task, kept in entry.tasks.items():
            folded.task_rows.append({"task": task, **kept})
    return folded


def carried_rows(entry: Any, why: str) -> list[tuple[str, dict[str, Any]]]:
    """What a new chain starts with for a session of a store moved aside as unreadable
    (``tripwire reset``): the rows that fold back to what the anchor proved of it (``entry``,
    a ``store.AnchorEntry``): its spend, its tasks' consumption, and each standing halt, whose
    reason says where it came from (``why``)."""
    rows: list[tuple[str, dict[str, Any]]] = []
    bounds = {b: entry.bounds[b] for b in ("max_session_usd", "max_turn_usd")
              if b in entry.bounds}
    spend = {"spend_writer": "carried", "spend_nano": entry.spend_nano,
             "spent_usd": entry.spend_nano / NANO, **bounds}
    granted = entry.bounds.get("granted_usd", 0.0)
    if granted:  # budget the operator granted: a reset row grants it, before any halt
        rows.append(("reset", {"guardrail": "cost_ceiling", "budget_usd": granted,
                               "cleared": [], **spend, "granted_usd": granted,
                               "by": "tripwire reset (carried)", "carried": why}))
    if entry.spend_nano or bounds:
        rows.append(("spend", {**spend, "carried": why}))
    for task, kept in entry.tasks.items():
        rows.append(("budget", {"task": task, **{k: v for k, v in kept.items()
                                                 if k != "outcome"}, "carried": why}))
        if kept.get("outcome") is not None:
            rows.append(("outcome", {"task": task, "outcome": kept["outcome"],
                                     "carried": why}))
    for halt in entry.halted:
        guardrail, _, kind = halt.partition(":")
        rows.append(("trip", {"guardrail": guardrail, "kind": kind or "halt", "halts": True,
                              "reason": f"{guardrail} halt carried over: {why}", **spend}))
    return rows


def _fold_trip(folded: Folded, data: dict[str, Any]) -> None:
    guardrail, kind = data.get("guardrail"), data.get("kind")
    if guardrail == "watchdog":
        if data.get("halts"):
            folded.watchdog_halt = data
        folded.watchdog_cut_signal = data.get("signal")
        folded.watchdog_in_a_row = int(data.get("in_a_row", 0))
    elif guardrail == "cost_ceiling":
        if kind == "session":
            folded.cost_session_halt = data
        elif kind == "escalation":
            folded.cost_escalation_halt = data
        folded.cost_in_a_row = int(data.get("in_a_row", folded.cost_in_a_row))


def _fold_reset(folded: Folded, data: dict[str, Any]) -> None:
    try:
        scope = Guardrail.parse_reset(data.get("guardrail", "all"))
    except InvalidReset:
        return  # a row this version cannot read resets nothing
    if folded.turn is not None and folded.turn.blocked is not None:
        folded.turn = folded.turn.unblocked()  # a reset unblocks the turn
    if scope.covers(Guardrail.WATCHDOG):
        folded.watchdog_halt = None
        folded.watchdog_cut_signal, folded.watchdog_in_a_row = None, 0
    if scope.covers(Guardrail.COST_CEILING):
        folded.cost_session_halt = folded.cost_escalation_halt = None
        folded.cost_in_a_row = 0
        folded.granted_usd += float(data.get("budget_usd", 0.0))
