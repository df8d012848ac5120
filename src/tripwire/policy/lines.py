"""Every line tripwire writes for an operator, in one place (the policies decide; these say).

The cut lines open with one sentence, ``CUT_IN_FLIGHT``: a harness operator reading a cancelled
turn must learn that the cancellation is tripwire's cut, not a provider failure.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from ..base.names import halted_by
from .ceiling import usd

if TYPE_CHECKING:
    from ..context.guard import Utilization
    from ..signals import Alert

CUT_IN_FLIGHT = ("{guardrail} cut the turn in flight \u2014 the cancellation that follows is "
                 "this cut, not a provider failure: ")

#: The one-shot reader's sentence (seed, #1140): a turn-scoped cut leaves the session available,
#: but nothing inside the agent starts the next turn. Under a driver the run goes on; a one-shot
#: run has no next turn. One sentence true in both worlds, on every in-turn cut's log line (never
#: in a durable row: a client reading a row queried a session, so it has a caller).
ONE_SHOT = ("Nothing starts that turn on its own, though: under a driver (TUI, attach, "
            "auto-continue) the run goes on, and a one-shot (-p) run ends here with exit 1.")


def cut_in_flight(guardrail: str) -> str:
    """The opening of every in-flight cut or halt line."""
    return CUT_IN_FLIGHT.format(guardrail=guardrail)


def _escalation_tail(fresh: str, in_a_row: int, limit: int) -> str:
    return (f"The turn was stopped with its work unfinished; the session is NOT halted, and a "
            f"further turn would start {fresh}. {ONE_SHOT} {in_a_row} in a row now \u2014 at "
            f"{limit} the session halts and needs an operator reset.")


# -- watchdog -----------------------------------------------------------------------------------


def watchdog_cut_reason(alert: Alert) -> str:
    return f"watchdog cut the turn ({alert.signal}): {alert.reason}"


def watchdog_escalation(alert: Alert, in_a_row: int) -> str:
    return (f"{alert.signal} cut {in_a_row} turns in a row (latest: {alert.reason}); a model "
            "that restarts the loop on every fresh turn is not stopped by cutting turns")


def watchdog_halt_reason(alert: Alert, why: str) -> str:
    return (f"watchdog halted the session ({alert.signal}): {why} The session refuses new "
            "turns until an operator resets it (Guardrails.reset, or `tripwire reset`).")


def watchdog_cut(reason: str, in_a_row: int, limit: int) -> str:
    return (f"{cut_in_flight('watchdog guardrail')}{reason} "
            f"{_escalation_tail('fresh', in_a_row, limit)}")


def watchdog_halt(reason: str) -> str:
    return f"{cut_in_flight('watchdog guardrail')}{reason}"


def note_withdrawn(alert: Alert) -> str:
    return (f"watchdog note withdrawn: {alert.signal} at event {alert.event} "
            "(the model has spoken since)")


def tampered_halt(why: str) -> str:
    return f"watchdog halted the session: {why}."


# -- cost ceiling -------------------------------------------------------------------------------


def estimated_cost(reason: str) -> str:
    return reason + " (estimated: the spend includes costs computed from token prices)"


def cost_trip(reason: str, *, in_turn: bool, halts: bool, in_a_row: int, limit: int) -> str:
    head = (cut_in_flight("cost_ceiling guardrail") if in_turn
            else "cost_ceiling guardrail tripped: ")
    if halts:
        tail = "The session is halted: every later turn is refused until an operator reset."
    else:
        tail = _escalation_tail("from a fresh per-turn budget", in_a_row, limit)
    return f"{head}{reason}. {tail}"


# -- context guard ------------------------------------------------------------------------------


def compaction_pending(u: Utilization) -> str:
    return (f"compaction pending: the context is {u.fraction:.1%} full ({u.tokens:,} of "
            f"{u.window:,} tokens{', partly estimated' if u.estimated else ''}), past the "
            f"{u.threshold:.0%} threshold for {u.tier or 'an unknown'} tier")


def context_cut_reason(u: Utilization, cut_at: float, *, auto_compact: bool = True) -> str:
    """The context cut's reason: also the durable row's text, so it promises no remedy that a
    one-shot run never reaches (the subjunctive is in the text itself)."""
    head = (f"the context window is {u.fraction:.1%} full ({u.tokens:,} of {u.window:,} "
            f"tokens, {u.unmeasured_bytes:,} bytes of it estimated), past the {cut_at:.0%} hard "
            "ceiling; ")
    if auto_compact:
        return head + "compaction is pending, so a next turn would start by reducing context"
    return head + ("automatic compaction is off, so a next turn would need the context reduced "
                   "first (a manual compaction)")


def context_cut(reason: str) -> str:
    """The context cut's log line: the reason, then the one-shot sentence (the cut needs no
    reset and does not escalate)."""
    return f"{cut_in_flight('context guard')}{reason}. {ONE_SHOT}"


def compaction_record(record: Mapping[str, Any]) -> str:
    """The line of a compaction record."""
    event = record["event"]
    operation = record.get("of") or record.get("operation") or "compaction"
    if event == "compaction-boundary":
        missing = record.get("missing_sections")
        lacks = f"; the summary lacks: {', '.join(missing)}" if missing else ""
        return f"{operation} boundary written ({record['kind']}, {record['trigger']}){lacks}"
    if event == "context-reduction-failed":
        return f"context reduction failed ({record['operation']}): {record['reason']}"
    if event == "context-reduction-degraded":
        return f"{operation} degraded to mechanical truncation: {record.get('reason', '')}"
    return str(event)


# -- turns, resets and the store ------------------------------------------------------------------


def refused_turn(reason: str) -> str:
    return f"turn refused before any model call: {reason}"


def reset_done(cleared: list[str], budget: int, ceiling: int, still: tuple[str, ...]) -> str:
    parts = []
    if cleared:
        parts.append("cleared " + ", ".join(cleared))
    if budget:
        parts.append(f"session ceiling raised by {usd(budget)} to {usd(ceiling)}")
    if not parts:
        parts.append("nothing in scope to reset" + (
            f"; the session is still {halted_by(still)}" if still
            else "; no guardrail was tripped"))
    elif still:
        parts.append(f"still {halted_by(still)}")
    return "reset: " + "; ".join(parts)


