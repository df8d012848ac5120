"""What each kind of stored row says (SPEC §5): the one definition of every row's fields.

A store keeps a row as its kind and a msgpack map (``chain.py``); this module says, kind by kind,
which keys the map holds and what they mean, as one record per kind. Every writer builds a
record and stores ``to_data()`` (``append``, or a session's ``log.SessionLog.put``); every
reader takes ``from_data(data)`` (``parse``) and reads fields, never keys. ``from_data`` is
total and tolerant: a key an earlier version did not write reads as its default, a value of the
wrong type as absent, and nothing raises, so old stores fold exactly as they always did.
``to_data`` writes the keys in the order today's writers always wrote them (the encoding, and so
the rows' MACs, are what they were).

Kinds and their writers:

- ``trip`` (``TripRow``): a guardrail's cut or halt; the watchdog and cost policies, the rows
  ``fold.carried_rows`` carries over an unreadable store. Carries the spend.
- ``reset`` (``ResetRow``): an operator reset, built by ``reset.OperatorReset.row`` only (the
  library, ``tripwire reset``, ``serve`` through the library). Carries the spend.
- ``spend`` (``SpendRow``): the spend and the escalation counts at a turn end (``session.
  durability.Durability``), per-model usage.
- ``context`` (``ContextRow``): the context guard's records (compactions, checkpoints, cuts).
- ``turn`` (``TurnRow``): the turn in progress of a session with durable turns (a hook's).
- ``task`` / ``budget`` / ``outcome`` (``TaskRow`` / ``BudgetRow`` / ``OutcomeRow``): a task's
  start, its consumption, how it ended (``budgets.task.Task``).
- ``raise`` / ``checkin`` (``RaiseRow`` / ``CheckInRow``): an operator's raise of a task's cap,
  a check-in opening a new window (``budgets.task_resume``; ``tripwire reset --task``).

``Spend`` is the part trip, reset and spend rows share: the writer's spend (see
``policy.ceiling``'s docstring: a row carries its writer's own running total) and the ceiling it
counts against.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any, ClassVar, NamedTuple, Protocol

from ..base.alert import Alert
from ..base.decision import CUT_TURN, HALT_SESSION, Decision

__all__ = [
    "Spend",
    "NO_SPEND",
    "EscalationCounts",
    "TripRow",
    "ResetRow",
    "SpendRow",
    "ContextRow",
    "TaskRow",
    "BudgetRow",
    "OutcomeRow",
    "RaiseRow",
    "CheckInRow",
    "TurnRow",
    "StoredRow",
    "RowSink",
    "TaskRecord",
    "KINDS",
    "TASK_KINDS",
    "parse",
    "spend_of",
    "append",
]


# The readers of the kinds a restore reads most (spend, trip) check a value's class, not
# isinstance (the cheapest test that keeps bools from passing as numbers), and build their
# record with ``tuple.__new__`` and every field, skipping the generated constructor's defaults:
# a restore reads every row of a session.
_NUMBERS: frozenset[Any] = frozenset({int, float})
_new = tuple.__new__


def _number(value: Any) -> float | None:
    """A stored number, as stored (an int stays an int: it is written back the same); None
    for anything else (bools are not numbers here)."""
    return value if value.__class__ in _NUMBERS else None


def _count(value: Any) -> int | None:
    """A stored count; None for anything else (a finite float count is cut to int, as
    ``int()`` always read it)."""
    if value.__class__ is int:
        return value
    return int(value) if value.__class__ is float and math.isfinite(value) else None


def _text(value: Any) -> str | None:
    return value if value.__class__ is str else None


def _mapping(value: Any) -> Mapping[str, Any] | None:
    return value if value.__class__ is dict or isinstance(value, Mapping) else None


def _texts(value: Any) -> tuple[str, ...]:
    return tuple(v for v in value if isinstance(v, str)) if isinstance(value, list | tuple) \
        else ()


class Spend(NamedTuple):
    """The spend fields of a trip, reset or spend row. ``spent_usd``: the session's spend as
    the writer saw it (informational; in rows of the previous format, which have no writer,
    the session's whole spend); ``writer`` (``spend_writer``) and ``own_nano``
    (``spend_nano``): the writer's id and its own running total (nano-dollars); the ceiling
    as the writer had it; whether some of the spend was estimated from token prices, and the
    models whose usage had no price (SPEC §11.3). None: not written."""

    spent_usd: float | None = None
    writer: str | None = None
    own_nano: int | None = None
    max_session_usd: float | None = None
    max_turn_usd: float | None = None
    granted_usd: float | None = None
    estimated: bool = False
    unpriced_models: tuple[str, ...] = ()

    def priced(self, estimated: bool, unpriced_models: tuple[str, ...]) -> Spend:
        """This spend, saying whether some of it was estimated and which models had no
        price."""
        return Spend(*self[:6], estimated, unpriced_models)

    @property
    def bounds_recorded(self) -> bool:
        """Whether the row records the ceiling (``policy.ceiling.CostCeiling.from_history``
        takes the last row that does)."""
        return self.max_session_usd is not None

    def to_data(self) -> dict[str, Any]:
        data: dict[str, Any] = {}
        if self.spent_usd is not None:
            data["spent_usd"] = self.spent_usd
        if self.writer is not None:
            data["spend_writer"] = self.writer
        if self.own_nano is not None:
            data["spend_nano"] = self.own_nano
        if self.max_session_usd is not None:
            data["max_session_usd"] = self.max_session_usd
        if self.max_turn_usd is not None:
            data["max_turn_usd"] = self.max_turn_usd
        if self.granted_usd is not None:
            data["granted_usd"] = self.granted_usd
        if self.estimated:
            data["estimated"] = True
        if self.unpriced_models:
            data["unpriced_models"] = list(self.unpriced_models)
        return data

    @classmethod
    def from_data(cls, data: Mapping[str, Any]) -> Spend:
        get = data.get
        spent, writer, own = get("spent_usd"), get("spend_writer"), get("spend_nano")
        session, turn, granted = get("max_session_usd"), get("max_turn_usd"), get("granted_usd")
        unpriced = get("unpriced_models")
        return _new(cls, (spent if spent.__class__ in _NUMBERS else None,
                          writer if writer.__class__ is str else None,
                          own if own.__class__ is int else None,
                          session if session.__class__ in _NUMBERS else None,
                          turn if turn.__class__ in _NUMBERS else None,
                          granted if granted.__class__ in _NUMBERS else None,
                          bool(get("estimated")), () if unpriced is None else _texts(unpriced)))


#: A row that carries no spend.
NO_SPEND = Spend()


class EscalationCounts(NamedTuple):
    """The escalation counts a spend row carries: the signal that cut the last turns and how
    many turns in a row (the watchdog's), and the cost ceiling's per-turn trips in a row."""

    watchdog_cut_signal: str | None = None
    watchdog_in_a_row: int = 0
    cost_in_a_row: int = 0


class _TripRowFields(NamedTuple):
    guardrail: str | None
    kind: str | None
    halts: bool
    reason: str
    signal: str | None = None
    guidance: str | None = None
    in_a_row: int | None = None
    mode: str | None = None
    spend: Spend = NO_SPEND


class TripRow(_TripRowFields):
    """A guardrail's cut (``halts`` False) or halt. ``guardrail``: ``watchdog`` or
    ``cost_ceiling``; ``kind``: ``turn`` (a cut), ``session``, ``escalation`` (the Nth cut in
    a row), ``halt`` (carried over); ``signal``, ``guidance`` (the model-facing text of a
    halt) and ``mode``: the watchdog's; ``in_a_row``: the cuts in a row it ends (None: not
    written); ``spend``: the session's spend when it tripped."""

    __slots__ = ()
    KIND: ClassVar[str] = "trip"

    def with_spend(self, spend: Spend) -> TripRow:
        return TripRow(*self[:-1], spend)

    def to_data(self) -> dict[str, Any]:
        data: dict[str, Any] = {"guardrail": self.guardrail, "kind": self.kind,
                                "halts": self.halts}
        if self.signal is not None:
            data["signal"] = self.signal
        data["reason"] = self.reason
        if self.guidance is not None:
            data["guidance"] = self.guidance
        if self.in_a_row is not None:
            data["in_a_row"] = self.in_a_row
        if self.mode is not None:
            data["mode"] = self.mode
        data.update(self.spend.to_data())
        return data

    @classmethod
    def from_data(cls, data: Mapping[str, Any]) -> TripRow:
        get = data.get
        guardrail, kind, reason = get("guardrail"), get("kind"), get("reason")
        signal, guidance, mode = get("signal"), get("guidance"), get("mode")
        in_a_row = get("in_a_row")
        return _new(cls, (guardrail if guardrail.__class__ is str else None,
                          kind if kind.__class__ is str else None, get("halts") is True,
                          reason if reason.__class__ is str else "",
                          signal if signal.__class__ is str else None,
                          guidance if guidance.__class__ is str else None,
                          in_a_row if in_a_row.__class__ is int else _count(in_a_row),
                          mode if mode.__class__ is str else None, Spend.from_data(data)))


class _ResetRowFields(NamedTuple):
    guardrail: str | None = "all"
    budget_usd: float = 0.0
    cleared: tuple[str, ...] = ()
    spend: Spend = NO_SPEND
    by: str | None = None
    carried: str | None = None


class ResetRow(_ResetRowFields):
    """An operator reset (``reset.OperatorReset`` builds it): ``guardrail`` the scope
    (``watchdog``, ``cost_ceiling``, ``all``; None: a value this version cannot read),
    ``budget_usd`` the budget it granted, ``cleared`` the halts it cleared (as the operator's
    line names them), ``spend`` the session's spend with the ceiling after the reset, ``by``
    who wrote it (``tripwire reset``; None: the library), ``carried`` why a new chain carries
    it over (``fold.carried_rows``)."""

    __slots__ = ()
    KIND: ClassVar[str] = "reset"

    def to_data(self) -> dict[str, Any]:
        data: dict[str, Any] = {"guardrail": self.guardrail, "budget_usd": self.budget_usd,
                                "cleared": list(self.cleared), **self.spend.to_data()}
        if self.by is not None:
            data["by"] = self.by
        if self.carried is not None:
            data["carried"] = self.carried
        return data

    @classmethod
    def from_data(cls, data: Mapping[str, Any]) -> ResetRow:
        get = data.get
        return cls(_text(get("guardrail", "all")), _number(get("budget_usd")) or 0.0,
                   _texts(get("cleared")), Spend.from_data(data), _text(get("by")),
                   _text(get("carried")))


class _SpendRowFields(NamedTuple):
    spend: Spend = NO_SPEND
    counts: EscalationCounts | None = None
    models: Mapping[str, Any] | None = None
    carried: str | None = None


class SpendRow(_SpendRowFields):
    """The spend at a turn end (or carried over), with the escalation counts (None: not
    written, as in a carried row) and the per-model usage (``models``: model -> [turns, input
    tokens, output tokens, nano-dollars], the ``/context`` view of a stored session)."""

    __slots__ = ()
    KIND: ClassVar[str] = "spend"

    def to_data(self) -> dict[str, Any]:
        data = self.spend.to_data()
        counts = self.counts
        if counts is not None:
            data["watchdog_cut_signal"] = counts.watchdog_cut_signal
            data["watchdog_in_a_row"] = counts.watchdog_in_a_row
            data["cost_in_a_row"] = counts.cost_in_a_row
        if self.models is not None:
            data["models"] = self.models
        if self.carried is not None:
            data["carried"] = self.carried
        return data

    @classmethod
    def from_data(cls, data: Mapping[str, Any]) -> SpendRow:
        get = data.get
        signal, watchdog, cost = (get("watchdog_cut_signal"), get("watchdog_in_a_row"),
                                  get("cost_in_a_row"))
        counts = None
        if watchdog is not None or cost is not None or "watchdog_cut_signal" in data:
            counts = _new(EscalationCounts, (
                signal if signal.__class__ is str else None,
                watchdog if watchdog.__class__ is int else _count(watchdog) or 0,
                cost if cost.__class__ is int else _count(cost) or 0))
        models, carried = get("models"), get("carried")
        return _new(cls, (Spend.from_data(data), counts, _mapping(models),
                          carried if carried.__class__ is str else None))


class _ContextRowFields(NamedTuple):
    record: Mapping[str, Any]


class ContextRow(_ContextRowFields):
    """A record of the context guard (``context.guard``): ``record["event"]`` names it
    (``compaction-boundary``, ``context-reduction-failed``, ``context-reduction-degraded``),
    the rest are its fields as the guard reports them (a turn cut's also ``enforced`` and
    ``reason``)."""

    __slots__ = ()
    KIND: ClassVar[str] = "context"

    @property
    def event(self) -> str | None:
        return _text(self.record.get("event"))

    def boundary(self) -> tuple[str, Any, int] | None:
        """A compaction boundary as ``(operation, label, summary characters)`` (the label: a
        checkpoint's note, a compaction's focus); None for any other record."""
        record = self.record
        if record.get("event") != "compaction-boundary":
            return None
        operation = record.get("operation", "compaction")
        label = record.get("note") if operation == "checkpoint" else record.get("focus")
        return operation, label, _count(record.get("summary_chars")) or 0

    def to_data(self) -> dict[str, Any]:
        return dict(self.record)

    @classmethod
    def from_data(cls, data: Mapping[str, Any]) -> ContextRow:
        return cls(data)


class _TaskRowFields(NamedTuple):
    task: str | None
    objective: Any = None
    parent: str | None = None
    budget: Mapping[str, Any] | None = None
    started_at: float | None = None


class TaskRow(_TaskRowFields):
    """A task's start: its objective, its parent's id, its budget (``Budget.to_dict``) and its
    start time (the task's clock)."""

    __slots__ = ()
    KIND: ClassVar[str] = "task"

    def to_data(self) -> dict[str, Any]:
        return {"task": self.task, "objective": self.objective, "parent": self.parent,
                "budget": self.budget, "started_at": self.started_at}

    @classmethod
    def from_data(cls, data: Mapping[str, Any]) -> TaskRow:
        get = data.get
        return cls(_text(get("task")), get("objective"), _text(get("parent")),
                   _mapping(get("budget")), _number(get("started_at")))


class _BudgetRowFields(NamedTuple):
    task: str | None
    used: Mapping[str, Any] | None = None
    tool_timeouts: int | None = None
    noted: Mapping[str, Any] | None = None
    exhausted: Mapping[str, Any] | None = None
    children: tuple[str, ...] | None = None
    started_at: float | None = None
    carried: str | None = None


class BudgetRow(_BudgetRowFields):
    """A task's consumption: ``used`` (counter -> amount; ``usd`` in nano-dollars), the tool
    calls timed out, the notes already given per counter, its exhaustion (``Exhaustion.
    to_dict``), its children's ids, its start time; ``carried``: why a new chain carries it
    over. None: not written."""

    __slots__ = ()
    KIND: ClassVar[str] = "budget"

    def to_data(self) -> dict[str, Any]:
        data = {"task": self.task, "used": self.used, "tool_timeouts": self.tool_timeouts,
                "noted": self.noted, "exhausted": self.exhausted,
                "children": None if self.children is None else list(self.children),
                "started_at": self.started_at}
        if self.carried is not None:
            data["carried"] = self.carried
        return data

    @classmethod
    def from_data(cls, data: Mapping[str, Any]) -> BudgetRow:
        get = data.get
        tool_timeouts = get("tool_timeouts")
        return cls(_text(get("task")), _mapping(get("used")),
                   tool_timeouts if isinstance(tool_timeouts, int) else None,
                   _mapping(get("noted")), _mapping(get("exhausted")),
                   _texts(get("children")) if isinstance(get("children"), list) else None,
                   _number(get("started_at")), _text(get("carried")))


#: The outcome fields ``OutcomeRow`` names; any other key of a stored outcome is ``extra``.
_OUTCOME_KEYS = frozenset({"task", "outcome", "counter", "by_task", "guardrail", "reason",
                           "answer", "verified", "evidence", "report", "carried"})


class _OutcomeRowFields(NamedTuple):
    task: str | None
    outcome: str | None
    counter: Any = None
    by_task: Any = None
    guardrail: Any = None
    reason: str | None = None
    answer: Any = None
    verified: bool = False
    evidence: Any = None
    report: Mapping[str, Any] | None = None
    extra: Mapping[str, Any] | None = None
    carried: str | None = None


class OutcomeRow(_OutcomeRowFields):
    """How a task ended: the outcome's JSON object (``budgets.outcomes.Outcome.to_dict``, made
    storable) under the task's id. ``outcome``: its kind; ``counter`` / ``by_task``: what
    exhausted it; ``guardrail``: what halted it; ``answer`` (with ``verified``) and
    ``evidence`` as the host gave them; ``report``: its ``Report.to_dict``; ``extra``: the
    outcome's extra fields. None: not written."""

    __slots__ = ()
    KIND: ClassVar[str] = "outcome"

    @classmethod
    def of_outcome(cls, task: str, outcome: Mapping[str, Any]) -> OutcomeRow:
        """The row of ``task``'s outcome, given as its JSON object (every value storable)."""
        return cls.from_data({"task": task, **outcome})

    def to_data(self) -> dict[str, Any]:
        data: dict[str, Any] = {"task": self.task, "outcome": self.outcome}
        if self.counter is not None or self.by_task is not None:
            data["counter"] = self.counter
            data["by_task"] = self.by_task
        if self.guardrail is not None:
            data["guardrail"] = self.guardrail
        if self.reason is not None:
            data["reason"] = self.reason
        if self.answer is not None:
            data["answer"] = self.answer
            data["verified"] = self.verified
        if self.evidence is not None:
            data["evidence"] = self.evidence
        if self.extra:
            data.update(self.extra)
        if self.report is not None:
            data["report"] = self.report
        if self.carried is not None:
            data["carried"] = self.carried
        return data

    @classmethod
    def from_data(cls, data: Mapping[str, Any]) -> OutcomeRow:
        get = data.get
        extra = {k: v for k, v in data.items() if k not in _OUTCOME_KEYS}
        return cls(_text(get("task")), _text(get("outcome")), get("counter"), get("by_task"),
                   get("guardrail"), None if get("reason") is None else str(get("reason")),
                   get("answer"), bool(get("verified", False)), get("evidence"),
                   _mapping(get("report")), extra or None, _text(get("carried")))



class _RaiseRowFields(NamedTuple):
    task: str | None
    counter: str | None = None
    by: int | float | None = None
    cap: int | float | None = None
    used: int | float | None = None
    resumed: str | None = None
    via: str | None = None
    who: str | None = None


class RaiseRow(_RaiseRowFields):
    """A raise of a task's cap of ``counter`` by ``by`` (``usd`` in nano-dollars, as a task
    counts it; ``deadline_s`` in seconds), to ``cap``, with ``used`` consumed then (never
    reset). ``resumed``: the exhaustion it continued (its counter; None: the task was not
    exhausted by it); ``via``: the ancestor whose raise resumed this task (its own ``by`` is
    then 0); ``who``: who wrote it (``tripwire reset``, ``serve``; None: the library)."""

    __slots__ = ()
    KIND: ClassVar[str] = "raise"

    def to_data(self) -> dict[str, Any]:
        data: dict[str, Any] = {"task": self.task, "counter": self.counter, "by": self.by,
                                "cap": self.cap, "used": self.used}
        for key in ("resumed", "via", "who"):
            if getattr(self, key) is not None:
                data[key] = getattr(self, key)
        return data

    @classmethod
    def from_data(cls, data: Mapping[str, Any]) -> RaiseRow:
        get = data.get
        return cls(_text(get("task")), _text(get("counter")), _number(get("by")),
                   _number(get("cap")), _number(get("used")), _text(get("resumed")),
                   _text(get("via")), _text(get("who")))


class _CheckInRowFields(NamedTuple):
    task: str | None
    window: Mapping[str, Any] | None = None
    resumed: str | None = None
    who: str | None = None


class CheckInRow(_CheckInRowFields):
    """An operator's check-in: a new check-in window opens for each counter of ``window``
    (counter -> its consumption at the check-in, where the window counts from; ``usd`` in
    nano-dollars); ``resumed``: the pause it ended (``checkin:<counter>``; None: none);
    ``who``: who wrote it (None: the library)."""

    __slots__ = ()
    KIND: ClassVar[str] = "checkin"

    def to_data(self) -> dict[str, Any]:
        data: dict[str, Any] = {"task": self.task, "window": self.window}
        if self.resumed is not None:
            data["resumed"] = self.resumed
        if self.who is not None:
            data["who"] = self.who
        return data

    @classmethod
    def from_data(cls, data: Mapping[str, Any]) -> CheckInRow:
        get = data.get
        return cls(_text(get("task")), _mapping(get("window")), _text(get("resumed")),
                   _text(get("who")))


class TurnRow:
    """The turn in progress, as a session with durable turns keeps it (``turn`` rows, written
    by ``Guardrails.flush`` when it changed; the last one stands): whether a turn is open
    (``session.durability.Durability.keep_turn`` says when that is kept), the decision its
    later events get (a cut, or the session's halt: with the alerts that made it, so what the
    model was told can be told again), and the feedback queued for the model, ``(signal,
    text)`` pairs. A reset row after it clears the decision (a reset unblocks).
    (A plain class, not a NamedTuple: its equality compares the decision, whose alerts are
    rebuilt from the row.)"""

    __slots__ = ("blocked", "feedback", "open")
    KIND: ClassVar[str] = "turn"
    #: the blocked decisions a turn row keeps: a refused turn or a timed-out call is not one
    KEPT: ClassVar[tuple[str, ...]] = (CUT_TURN, HALT_SESSION)

    def __init__(self, open: bool = False, blocked: Decision | None = None,
                 feedback: tuple[tuple[str, str], ...] = ()):
        self.open = open
        self.blocked = blocked
        self.feedback = feedback

    def __eq__(self, other: object) -> bool:
        return isinstance(other, TurnRow) and (self.open, self.blocked, self.feedback) == (
            other.open, other.blocked, other.feedback)

    __hash__ = None  # type: ignore[assignment]  # mutable fields: compared, never hashed

    def __repr__(self) -> str:
        return f"TurnRow(open={self.open}, blocked={self.blocked!r}, feedback={self.feedback!r})"

    def unblocked(self) -> TurnRow:
        """The same turn without its blocked decision (a reset's)."""
        return TurnRow(self.open, None, self.feedback)

    def to_data(self) -> dict[str, Any]:
        """``open``; ``blocked`` (action, guardrail, reason, alerts as ``[signal, severity,
        text]``) and ``feedback`` (``[signal, text]`` pairs) when any."""
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
    def from_data(cls, data: Mapping[str, Any]) -> TurnRow:
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


StoredRow = (TripRow | ResetRow | SpendRow | ContextRow | TaskRow | BudgetRow | OutcomeRow
             | RaiseRow | CheckInRow | TurnRow)
#: The rows of a task (``fold.Folded.task_rows``, ``budgets.task_log.apply_rows``).
TaskRecord = TaskRow | BudgetRow | OutcomeRow | RaiseRow | CheckInRow

_RECORDS: dict[str, Any] = {r.KIND: r for r in (TripRow, ResetRow, SpendRow, ContextRow,
                                                 TaskRow, BudgetRow, OutcomeRow, RaiseRow,
                                                 CheckInRow, TurnRow)}

#: Row kinds a store accepts.
KINDS = frozenset(_RECORDS)
#: Row kinds of task budgets (SPEC §7, §13): a task's start, its consumption, its outcome,
#: its raises and check-ins.
TASK_KINDS = frozenset({TaskRow.KIND, BudgetRow.KIND, OutcomeRow.KIND, RaiseRow.KIND,
                        CheckInRow.KIND})


def parse(kind: str, data: Mapping[str, Any]) -> StoredRow:
    """The record of a stored row of ``kind`` (one of ``KINDS``)."""
    record: StoredRow = _RECORDS[kind].from_data(data)
    return record


def spend_of(row: StoredRow) -> Spend:
    """The spend ``row`` carries (trip, reset and spend rows; ``NO_SPEND`` for the others)."""
    return row.spend if isinstance(row, TripRow | ResetRow | SpendRow) else NO_SPEND


class RowSink(Protocol):
    """Where a session's policies append their rows, each before its decision returns: the
    session's ``Durability`` (held, not a bound method of it per policy: a fleet has many
    sessions; without a store it writes nothing). Its ``channel`` is where their operator
    lines go (read through it: one reference a policy, not two)."""

    @property
    def channel(self) -> Any:  # policy.reporting.OperatorChannel (a layer above this one)
        ...

    def put(self, row: StoredRow) -> None: ...

    def trip(self, row: TripRow) -> None:
        """A trip row, with the spend every trip row carries."""


class _Appends(Protocol):
    def append(self, session: str, kind: str, data: Mapping[str, Any], *,
               wait: float | None = None) -> Any: ...


def append(store: _Appends, session: str, row: StoredRow) -> Any:
    """Append ``row`` to ``session``'s chain in ``store`` (an ``EventStore``): the stored row."""
    return store.append(session, row.KIND, row.to_data())
