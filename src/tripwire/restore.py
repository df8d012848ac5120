"""Folding a session's durable history into guardrail state (SPEC §5).

The store (``store.py``) keeps a session's rows in order, hash-chained; ``fold_history`` reads
them forward into what a restarted process needs: which halts stand, the spend, the budget
granted, the escalation counts. Last writer wins per guardrail: a reset after a trip clears
it; granted budget accumulates. ``Guardrails`` then applies the fold *subject to its live
configuration* (a process started in ``warn`` does not resurrect an ``enforce`` halt; budget is
not applied to a per-session ceiling that is no longer configured).

Tamper rule (SPEC §5 Decision). Let k be the chain's first broken link; rows before it are
trusted and folded. The session is restored **halted, needing an operator**, when the part that
can no longer be trusted may hide a halt: the store's (keyed) head records a halting trip at or
after k, or the head itself is missing or forged. An agent that deletes, edits or reorders its
own halt row therefore cannot resume; a break before any halt only drops the untrusted rows,
with a warning.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from .errors import InvalidReset
from .guardrail import Guardrail

__all__ = ["Folded", "fold_history", "RESTORED_SIGNAL"]

#: The synthetic alert a restored watchdog halt feeds back to the model.
RESTORED_SIGNAL = "restored-watchdog-halt"


@dataclass
class Folded:
    watchdog_halt: dict[str, Any] | None = None       # the standing halting trip's row data
    cost_session_halt: dict[str, Any] | None = None
    cost_escalation_halt: dict[str, Any] | None = None
    granted_usd: float = 0.0
    spent_usd: float = 0.0
    watchdog_cut_signal: str | None = None
    watchdog_in_a_row: int = 0
    cost_in_a_row: int = 0
    tampered: str | None = None  # why the history cannot be trusted to show no halt
    warnings: list[str] = field(default_factory=list)
    rows: int = 0

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
    for row in history.rows:
        data = row.data
        if "spent_usd" in data:
            folded.spent_usd = float(data["spent_usd"])
        if row.kind == "trip":
            _fold_trip(folded, data)
        elif row.kind == "reset":
            _fold_reset(folded, data)
        elif row.kind == "spend":
            folded.watchdog_cut_signal = data.get("watchdog_cut_signal")
            folded.watchdog_in_a_row = int(data.get("watchdog_in_a_row", 0))
            folded.cost_in_a_row = int(data.get("cost_in_a_row", 0))
    report = history.report
    if not report.intact:
        hidden_halt = (not report.head_valid or (
            report.last_halt_seq is not None and report.first_broken is not None
            and report.last_halt_seq >= report.first_broken))
        if hidden_halt:
            folded.tampered = (
                f"the session's guardrail history was tampered with ({report.problem}) where it "
                "may hide a halt, so the session stays halted until an operator resets it")
        else:
            folded.warnings.append(
                f"guardrail history broken ({report.problem}); rows from {report.first_broken} "
                "on are ignored (no halt was recorded there)")
    return folded


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
    if scope.covers(Guardrail.WATCHDOG):
        folded.watchdog_halt = None
        folded.watchdog_cut_signal, folded.watchdog_in_a_row = None, 0
    if scope.covers(Guardrail.COST_CEILING):
        folded.cost_session_halt = folded.cost_escalation_halt = None
        folded.cost_in_a_row = 0
        folded.granted_usd += float(data.get("budget_usd", 0.0))
