"""The one dispatcher from an event, or a batch row, to a session's methods, with the one
rule for pricing a usage that carries no cost.

Every host that drives a ``Guardrails`` from a stream of events calls it: ``Fleet.observe_many``
for the rows its batch core hands back to Python, ``tripwire replay`` and ``tripwire serve``
for interchange events, the live hooks for what a harness's payload and transcript say. What
each kind of event does to a session is written here, once:

    call          on_call(name, args, id)
    result        on_result(name, payload=, error=, no_op=, id=, unknown_tool=)
    text          on_text(text)
    usage         on_usage(model=, input_tokens=, output_tokens=, cost_usd=, estimated=,
                  unpriced=)
    turn_start    start_turn(): its ``Turn``, or the refusal (``refusal()``, a ``Decision``)
                  when the turn is refused (a halted session, an exhausted task)
    turn_end      end_turn()
    reset         reset(guardrail, additional_budget_usd): the ``ResetOutcome``
                  (``ResetRefused`` and ``InvalidReset`` are raised to the caller)
    stop_attempt  on_stop_attempt(accepted, answer)
    retry         on_retry(reason)
    compaction    on_compaction(mechanical=, automatic=)

``observe_event`` takes an interchange event; ``observe`` a row: a kind and its fields
(``ROW_FIELDS``: a batch row's, in its order, trailing ones optional and None where a batch row
leaves one out; or by name). Both read the same fields by the same names (an event's are its
attributes), through one function per kind. A task's start and end are not a session's methods:
their host runs them (``tripwire replay``); both entry points refuse them (``InvalidEvent``).

Pricing (SPEC §11.3). A ``Usage`` *event* without ``cost_usd`` is priced from the model
catalogue (``interchange.prices``, the ``prices`` extra): its cost is marked estimated, or its
model unpriced (no cost: cost ceilings cannot trip on it). A *row* is never priced: a row has
no provider and no cached-token counts to price by, and the batch core charges usage rows
without the GIL, where no catalogue can be asked. A host that wants a usage priced prices the
event before it would become a row (``needs_pricing``: ``tripwire serve`` sends such a usage on
its own, between batches; docs/fleet.md says so for ``observe_many``).

A hook pays for every import on every event: the interchange events and the price catalogue
are imported here on first use only.
"""

from __future__ import annotations

from collections import namedtuple
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Union

from ..engine.batch import BATCH_KINDS
from ..errors import GuardrailHalted, InvalidEvent

if TYPE_CHECKING:
    from ..base.decision import Decision, Turn
    from ..interchange.events import Usage
    from ..interchange.prices import Priced
    from ..policy.halts import ResetOutcome
    from .guardrails import Guardrails

__all__ = ["Outcome", "observe", "observe_event", "usage_arguments", "needs_pricing",
           "ROW_FIELDS"]

#: What one event does: a decision, a started turn, a reset's outcome, or nothing.
Outcome = Union["Decision", "Turn", "ResetOutcome", None]

#: (usage, its price): told of each usage event priced here (replay counts them)
PriceListener = Callable[["Usage", "Priced"], object]

#: The fields of each kind of row, in order: a batch row's (``BATCH_KINDS``; a usage row may
#: also say how its cost was arrived at), and the kinds a batch does not take.
ROW_FIELDS: dict[str, tuple[str, ...]] = {
    **BATCH_KINDS,
    "usage": (*BATCH_KINDS["usage"], "estimated", "unpriced"),
    "stop_attempt": ("accepted", "answer"),
    "retry": ("reason", "calls"),
}
# a field a row leaves out: None, as the batch pads rows; but for these
_DEFAULTS = {"estimated": False, "unpriced": False, "accepted": True, "reason": ""}
# each kind's row as a named tuple, its fields read by name as an event's attributes are
# (made on first use: a hook observes a kind or two per process)
_ROWS: dict[str, Callable[..., Any]] = {}


def _row_class(kind: str) -> Callable[..., Any]:
    fields = ROW_FIELDS.get(kind)
    if fields is None:
        raise InvalidEvent(f"a {kind!r} event is not a session's to observe (its kinds: "
                           f"{', '.join(ROW_FIELDS)})")
    made = _ROWS[kind] = namedtuple(f"{kind}_row", fields,
                                    defaults=[_DEFAULTS.get(f) for f in fields])
    return made


# -- one function per kind: the session's method for it, given the event (or row) -------------

def _call(g: Guardrails, ev: Any) -> Decision:
    return g.on_call(ev.name, ev.args, ev.id)


def _result(g: Guardrails, ev: Any) -> Decision:
    return g.on_result(ev.name, id=ev.id, error=ev.error, no_op=ev.no_op, payload=ev.payload,
                       unknown_tool=bool(ev.unknown_tool))


def _text(g: Guardrails, ev: Any) -> Decision:
    return g.on_text(ev.text)


def _usage(g: Guardrails, ev: Any) -> Decision:
    """A usage row as it says (``_usage_event`` prices a usage event into one first)."""
    return g.on_usage(model=ev.model, input_tokens=ev.input_tokens,
                      output_tokens=ev.output_tokens, cost_usd=ev.cost_usd,
                      estimated=ev.estimated, unpriced=ev.unpriced)


def _turn_start(g: Guardrails, ev: Any) -> Turn | Decision:
    try:
        return g.start_turn()
    except GuardrailHalted:
        return g.refusal()  # the refused turn's decision, reported as every decision is


def _turn_end(g: Guardrails, ev: Any) -> Decision:
    return g.end_turn()


def _reset(g: Guardrails, ev: Any) -> ResetOutcome:
    # a row may leave either field out (None): a bare reset of every guardrail
    return g.reset(ev.guardrail or "all", ev.additional_budget_usd or 0.0)


def _stop_attempt(g: Guardrails, ev: Any) -> Decision:
    return g.on_stop_attempt(ev.accepted, ev.answer)


def _retry(g: Guardrails, ev: Any) -> Decision:
    return g.on_retry(ev.reason, ev.calls)


def _compaction(g: Guardrails, ev: Any) -> Decision:
    # a row may leave ``automatic`` out (None): the harness's own, as most are
    return g.on_compaction(mechanical=bool(ev.mechanical), automatic=ev.automatic is not False)


_BY_KIND: dict[str, Callable[[Guardrails, Any], Outcome]] = {
    "call": _call,
    "result": _result,
    "text": _text,
    "usage": _usage,
    "turn_start": _turn_start,
    "turn_end": _turn_end,
    "reset": _reset,
    "stop_attempt": _stop_attempt,
    "retry": _retry,
    "compaction": _compaction,
}


# -- the entry points --------------------------------------------------------------------------

def observe(g: Guardrails, kind: str, *fields: Any, **named: Any) -> Outcome:
    """One event as a row: its ``kind`` and its fields (``ROW_FIELDS``, in order or by name),
    through the session's method for it (the module docstring's table). Not priced."""
    row = _ROWS.get(kind) or _row_class(kind)
    return _BY_KIND[kind](g, row(*fields, **named))


def observe_event(g: Guardrails, event: Any, on_priced: PriceListener | None = None,
                  ) -> Outcome:
    """One interchange event through the session's method for it; a ``Usage`` priced first
    (``usage_arguments``; ``on_priced`` is told how)."""
    apply = _BY_CLASS.get(type(event)) or _by_class(type(event))
    return apply(g, event) if apply is not _usage else _usage_event(g, event, on_priced)


def _usage_event(g: Guardrails, usage: Usage, on_priced: PriceListener | None) -> Decision:
    row = _ROWS.get("usage") or _row_class("usage")
    return _usage(g, row(**usage_arguments(usage, on_priced)))


def usage_arguments(usage: Usage, on_priced: PriceListener | None = None) -> dict[str, Any]:
    """``on_usage``'s keyword arguments for a usage event, priced by the rule (the module
    docstring): a reported cost as it is, else the catalogue's estimate, or unpriced."""
    from ..interchange.prices import estimate

    priced = estimate(usage)
    if on_priced is not None:
        on_priced(usage, priced)
    return {"model": usage.model, "input_tokens": usage.input_tokens,
            "output_tokens": usage.output_tokens, "cost_usd": priced.cost_usd,
            "estimated": priced.estimated, "unpriced": priced.unpriced}


def needs_pricing(event: Any) -> bool:
    """Whether the pricing rule puts a price on this event (a usage that reports tokens and no
    cost): what a batch row cannot carry, so a host that batches sends it on its own."""
    from ..interchange.events import Usage

    return isinstance(event, Usage) and event.cost_usd is None and bool(
        event.input_tokens or event.output_tokens)


#: each event class's function (filled on first use: ``_by_class``)
_BY_CLASS: dict[type, Callable[[Guardrails, Any], Outcome]] = {}


def _by_class(cls: type) -> Callable[[Guardrails, Any], Outcome]:
    """The function of an event class (a subclass's is its event class's), remembered."""
    from ..interchange.events import EVENT_CLASSES

    for kind, event_class in EVENT_CLASSES.items():
        if issubclass(cls, event_class) and kind in _BY_KIND:
            _BY_CLASS[cls] = _BY_KIND[kind]
            return _BY_KIND[kind]
    raise InvalidEvent(f"not a session's event: a {cls.__name__} is its host's to run")
