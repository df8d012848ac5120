"""The cost ceiling (SPEC §4): a dollar bound per turn and per session.

Spend is the sum of the provider-reported ``cost_usd`` of every usage event, kept as an integer
number of nano-dollars so that five $0.01 calls are exactly $0.05 (``>=`` on float sums would
trip a cent late). A per-turn trip cuts that turn only; three turns in a row that each trip it
halt the session, because a driver that simply re-drives would otherwise turn a hard stop into
an unbounded spend loop. A per-session trip halts the session, and a reset is refused while the
spend is at least the ceiling plus the budget the operator adds: budget raises the ceiling and
never zeroes or re-windows the spend.

Spend in the durable store (SPEC §5). Several processes may charge one session at the same
moment (fleet daemons on one database), so a row cannot carry "the session's total": two
writers' totals each miss the other's charges. Each row carries its writer's own running total
instead: ``spend_writer`` (a random id per ``CostCeiling``: one process's guardrails of the
session) and ``spend_nano`` (what that writer charged, in nano-dollars, since it started), plus
``spent_usd``, the session's spend as the writer saw it (informational). The session's spend is
the sum over writers of each writer's latest total (``SpendTally``): exact under concurrent
writers, and a row written twice (a retry after a commit whose answer was lost) counts once.
Rows of the previous format carry ``spent_usd`` alone (the session's total, last row wins);
their total is the base the writers' charges add to.
"""

from __future__ import annotations

import functools
import os
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from ..base.money import NANO, bound_nano, parse_dollars, to_nano, usd, usd_more_than
from ..base.names import Guardrail
from ..base.thresholds import session_bound_reached, turn_bound_reached
from ..durability.rows import NO_SPEND, Spend, parse, spend_of
from ..errors import InvalidReset, ResetRefused

if TYPE_CHECKING:
    from ..durability.fold import Folded

__all__ = ["CostCeiling", "CostTrip", "usd", "NANO", "reset_refusal"]


def reset_refusal(spent: int, ceiling_with_budget: int) -> str:
    """The one sentence of a refused reset (SPEC §4), in the library and on the CLI alike."""
    return (f"reset refused: the session has spent {usd(spent)} and its ceiling with the added "
            f"budget would be {usd(ceiling_with_budget)}, so it would re-trip at once; add at "
            f"least {usd_more_than(spent - ceiling_with_budget)}")


@dataclass(frozen=True, slots=True)
class CostTrip:
    """``kind``: ``turn`` (cut the turn), ``escalation`` (the Nth per-turn trip in a row: halt)
    or ``session`` (halt)."""

    kind: str
    reason: str
    in_a_row: int = 0

    @property
    def halts(self) -> bool:
        return self.kind != "turn"


@functools.lru_cache(maxsize=64)
def _bounds(max_turn_usd: float | None, max_session_usd: float | None,
            escalate_after: int) -> tuple[int, int, int]:
    """(max_turn, max_session, escalate_after) in nano-dollars, checked: once per configuration,
    the one tuple every session of a fleet shares (its integers are 32 bytes each a session
    otherwise)."""
    return (bound_nano(max_turn_usd, "max_turn_cost_usd"),
            bound_nano(max_session_usd, "max_session_cost_usd"), max(1, escalate_after))


class CostCeiling:
    __slots__ = (
        "_bounds",
        "baseline",
        "escalation_reason",
        "granted",
        "in_a_row",
        "others",
        "own",
        "session_reason",
        "turn_tripped",
        "writer",
    )

    def __init__(self, max_turn_usd: float | None = None, max_session_usd: float | None = None,
                 escalate_after: int = 3):
        self._bounds = _bounds(max_turn_usd, max_session_usd, escalate_after)
        self.granted = 0          # budget added by operator resets (raises the session ceiling)
        # nano-dollars, never zeroed: what this ceiling charged itself (its rows carry it), and
        # what other writers of the session charged (``apply``); ``spent`` is their sum
        self.own = 0
        self.others = 0
        self.writer: str | None = None  # its id in the store's rows (drawn at the first row)
        self.baseline: int | None = None  # spend at turn start; None until a turn starts
        self.turn_tripped = False
        self.in_a_row = 0         # consecutive turns ended by a per-turn trip
        self.session_reason: str | None = None     # per-session trip
        self.escalation_reason: str | None = None  # halt after per-turn trips in a row

    # -- state ---------------------------------------------------------------------------------

    @property
    def max_turn(self) -> int:
        return self._bounds[0]

    @property
    def max_session(self) -> int:
        return self._bounds[1]

    @property
    def escalate_after(self) -> int:
        return self._bounds[2]

    @property
    def spent(self) -> int:
        """Nano-dollars, never zeroed: the session's, every writer's."""
        return self.own + self.others if self.others else self.own

    @property
    def active(self) -> bool:
        return self.max_turn > 0 or self.max_session > 0

    @property
    def ceiling(self) -> int:
        """The per-session ceiling with granted budget (0: no per-session bound)."""
        return self.max_session + self.granted if self.max_session else 0

    @property
    def halted(self) -> bool:
        return self.session_reason is not None or self.escalation_reason is not None

    @property
    def reason(self) -> str | None:
        return self.session_reason or self.escalation_reason

    @property
    def would_retrip(self) -> bool:
        return bool(self.max_session) and self.spent >= self.ceiling

    def turn_spent(self) -> int:
        return self.spent - self.baseline if self.baseline is not None else 0

    # -- turns and usage -----------------------------------------------------------------------

    def start_turn(self) -> None:
        self.baseline = self.spent
        self.turn_tripped = False

    def end_turn(self) -> None:
        if not self.turn_tripped:
            self.in_a_row = 0  # a turn inside its bound clears the count

    def add(self, cost_nano: int) -> CostTrip | None:
        """Spend (nano-dollars, checked by ``usage_cost_nano``), then the ceilings."""
        self.own += cost_nano
        return self.check()

    def check(self) -> CostTrip | None:
        """Per-turn first, then per-session; ``>=`` trips. Nothing once halted or cut."""
        if self.halted or self.turn_tripped:
            return None
        turn = self.turn_spent()
        if self.baseline is not None and turn_bound_reached(turn, self.max_turn):
            self.turn_tripped = True
            self.in_a_row += 1
            detail = f"this turn cost {usd(turn)}, ceiling is {usd(self.max_turn)}"
            if self.in_a_row >= self.escalate_after:
                self.escalation_reason = (
                    f"per-turn cost ceiling exceeded {self.in_a_row} turns in a row ({detail}): "
                    "cutting each turn is not stopping the spending, so the session is halted "
                    "until an operator resets it (a bare reset is enough)"
                )
                return CostTrip("escalation", self.escalation_reason, self.in_a_row)
            return CostTrip("turn", f"per-turn cost ceiling exceeded: {detail}", self.in_a_row)
        if session_bound_reached(self.spent, self.ceiling):
            self.session_reason = (
                f"per-session cost ceiling exceeded: the session cost {usd(self.spent)}, "
                f"ceiling is {usd(self.ceiling)}; a reset must add budget "
                "(additional_budget_usd) because a bare reset would re-trip at once"
            )
            return CostTrip("session", self.session_reason)
        return None

    # -- operator reset ------------------------------------------------------------------------

    # -- persistence -----------------------------------------------------------------------------

    def snapshot(self) -> Spend:
        """The spend every trip, reset and spend row carries (``fold.fold_history`` reads it
        back; the spend fields are the module docstring's)."""
        if self.writer is None:
            self.writer = os.urandom(8).hex()  # as secrets.token_hex(8), without its imports
        return Spend(self.spent / NANO, self.writer, self.own, self.max_session / NANO,
                     self.max_turn / NANO, self.granted / NANO)

    def apply(self, folded: Folded) -> None:
        """Take a folded history forward under this ceiling's configuration: the spend stays
        spent: every other writer's charges as the rows say, plus this ceiling's own (whether
        its rows are stored yet or not); budget and halts only for bounds still configured."""
        self.others = max(self.others, folded.spend.others(self.writer))
        if self.max_session:
            self.granted = round(folded.granted_usd * NANO)
            if folded.cost_session_halt is not None:
                self.session_reason = folded.cost_session_halt.reason
        if self.max_turn:
            if folded.cost_escalation_halt is not None:
                self.escalation_reason = folded.cost_escalation_halt.reason
            self.in_a_row = folded.cost_in_a_row

    def sync(self, folded: Folded) -> None:
        """Take an operator reset written to the store elsewhere: its budget, and the halts it
        cleared."""
        if self.max_session:
            self.granted = max(self.granted, round(folded.granted_usd * NANO))
        if self.session_reason is not None and folded.cost_session_halt is None:
            self.session_reason = None
        if self.escalation_reason is not None and folded.cost_escalation_halt is None:
            self.escalation_reason = None
            self.in_a_row = 0

    @classmethod
    def from_history(cls, folded: Folded, rows: Sequence[Any]) -> CostCeiling:
        """The ceiling a session's rows describe (its bounds as last recorded), with the folded
        history applied: what an out-of-process reset (``tripwire reset``) checks against."""
        last = next((spend for spend in (spend_of(parse(r.kind, r.data)) for r in reversed(rows))
                     if spend.bounds_recorded), NO_SPEND)
        ceiling = cls(float(last.max_turn_usd or 0.0), float(last.max_session_usd or 0.0))
        ceiling.apply(folded)
        return ceiling

    def check_reset(self, budget_usd: float, scope: Guardrail = Guardrail.ALL) -> int:
        """Validate a reset of ``scope``; returns the budget in nano-dollars. Raises before
        changing anything: ``InvalidReset`` for budget that cannot apply, ``ResetRefused`` for
        a reset that would re-trip at once (SPEC §4)."""
        budget = to_nano(parse_dollars(budget_usd, "additional_budget_usd", error=InvalidReset))
        if budget_usd and scope is Guardrail.WATCHDOG:
            raise InvalidReset("additional budget applies to the cost ceiling, not the watchdog")
        if not scope.covers(Guardrail.COST_CEILING):
            return 0
        if budget and not self.max_session:
            raise InvalidReset(
                "no per-session cost ceiling is configured: added budget cannot arm one"
            )
        if self.session_reason is not None and self.would_retrip and \
                self.spent >= self.ceiling + budget:
            needed = self.spent - self.ceiling - budget
            raise ResetRefused(
                reset_refusal(self.spent, self.ceiling + budget),
                spent_usd=self.spent / NANO,
                ceiling_usd=(self.ceiling + budget) / NANO,
                needed_usd=needed / NANO,
            )
        return budget

    def reset(self, budget: int) -> None:
        """Apply a checked reset (``durability.reset.OperatorReset``): raise the ceiling, clear
        trips and the count."""
        self.granted += budget
        self.session_reason = None
        self.escalation_reason = None
        self.in_a_row = 0

