"""The batch boundary: the rows batch ingest takes, what Fleet hands the batch core per
session, what the core hands back, and why it stops (both engines' ``Batch``)."""

from __future__ import annotations

import enum
from typing import Any, NamedTuple

from ..base.thresholds import context_crosses, cost_trips
from .tokens import estimate_tokens

#: Batch ingest rows: (session, kind, *fields), the fields of each kind in order (SPEC §0).
BATCH_KINDS: dict[str, tuple[str, ...]] = {
    "call": ("name", "args", "id"),
    "result": ("name", "payload", "error", "no_op", "id", "unknown_tool"),
    "text": ("text",),
    "usage": ("model", "input_tokens", "output_tokens", "cost_usd"),
    "turn_start": (),
    "turn_end": (),
    "reset": ("guardrail", "additional_budget_usd"),
    "compaction": ("mechanical", "automatic"),  # Python's row: rare, and it has policy
}


BATCH_FIELDS = {kind: len(fields) for kind, fields in BATCH_KINDS.items()}


class StopReason(enum.IntEnum):
    """Why ``Batch.run()`` returned at row ``i``."""

    END = 0     # every row was observed
    POLICY = 1  # row i was observed and needs policy: a signal fired, a context limit was
    #             crossed, or agent words answer queued notes
    PYTHON = 2  # row i was not observed: Python takes it whole (a usage that trips a ceiling,
    #             reaches its task's next mark, changes the model or crosses a context limit;
    #             a row of a session the batch does not drive; a kind only Python handles)


class ContextState(NamedTuple):
    """The context guard as the batch core needs it (token counts; ``carried``: estimate
    bytes not yet measured)."""

    measured: int
    carried: int
    compact_at: int
    cut_tokens: int
    pending: bool
    cut: bool
    model: str | None


class CostState(NamedTuple):
    """The cost ceiling as the batch core needs it (nano-dollars; ``baseline`` None until a
    turn starts; ``frozen``: halted or tripped this turn, so no bound is checked)."""

    spent: int
    baseline: int | None
    max_turn: int
    ceiling: int
    frozen: bool


class TaskState(NamedTuple):
    """A task bounding steps, tokens or dollars, as the batch core needs it: the room left
    below its next mark (the next 50% or 80% note, or the cap, of each counter, along the
    chain), in steps, tokens and nano-dollars. A usage row whose charge would reach a mark
    goes to Python, which charges it, notes and exhausts; rows below are charged in the core
    and handed back as totals."""

    steps: int
    tokens: int
    nano: int


class BatchState(NamedTuple):
    """One session, as ``SessionBatch.state()`` hands it to the batch core. ``engine`` is
    None when the batch must hand every row of the session to Python; ``cost`` is None when
    its usage rows must go to Python (a task it cannot count in the core charges each one);
    ``task``, when its task bounds steps, tokens or dollars: the room below the next mark;
    ``calls_to_python``: its tool calls go to Python (its task is exhausted, whose calls are
    cut, or bounded and charged by other sessions too, whose charges the core cannot see)."""

    engine: Any
    blocked: bool
    context: ContextState | None
    ids: dict[Any, str]
    words_matter: bool
    cost: CostState | None
    task: TaskState | None = None
    calls_to_python: bool = False


class BatchChange(NamedTuple):
    """What the batch core changed in a session since the last hand-back: the new spend, a
    context a usage measured (the estimate starts again from it), estimate bytes added."""

    slot: int
    spent: int | None
    measured: int | None
    added: int


class BatchSlot:
    """A session's policy state as of the last hand-over (``BatchState``), and what the batch
    changed since: the native ``_Slot``, field for field."""

    __slots__ = ("added", "blocked", "calls_python", "carried", "compact_at", "cost", "cut",
                 "cut_tokens", "has_context", "measured", "measured_reset", "model", "pending",
                 "room", "spent", "spent_changed", "taken", "used", "words")

    def __init__(self, state: BatchState):
        self.blocked = state.blocked
        self.words = state.words_matter
        self.calls_python = state.calls_to_python  # its task charges and judges each call
        c = state.context
        self.has_context = c is not None
        if c is not None:
            self.measured, self.carried = c.measured, c.carried
            self.compact_at, self.cut_tokens = c.compact_at, c.cut_tokens
            self.pending, self.cut, self.model = c.pending, c.cut, c.model
        self.cost = state.cost  # None: every usage row goes to Python (a task charges it)
        self.spent = state.cost.spent if state.cost is not None else 0
        self.added = self.taken = 0
        self.measured_reset = self.spent_changed = False
        # a task bounding steps, tokens or dollars: the room below its next mark, and what
        # usage rows charged since this hand-over (steps, tokens, nano-dollars)
        self.room = state.task
        self.used = [0, 0, 0]

    def tokens(self) -> int:
        return self.measured + estimate_tokens(self.carried + self.added)

    def crosses(self, tokens: int) -> bool:
        """A context limit the guard has not reported yet is reached."""
        return context_crosses(tokens, self.compact_at, self.pending, self.cut_tokens, self.cut)

    def take_usage(self, cost: int, model: Any, input_tokens: int | None, tokens: int) -> bool:
        """A usage row, as the native batch core handles it: charged here unless Python must
        see it (its task's next mark reached, a bound that trips, a new model, a context
        limit crossed); False then."""
        c = self.cost
        if c is None:
            return False
        room, used = self.room, self.used
        if room is not None and (used[0] + 1 >= room.steps or used[1] + tokens >= room.tokens
                                 or used[2] + cost >= room.nano):
            return False  # its task notes or exhausts: Python charges it
        spent = self.spent + cost
        if not c.frozen and cost_trips(spent, c.baseline, c.max_turn, c.ceiling):
            return False
        if self.has_context:
            if model is not None and model != self.model:
                return False
            if self.crosses(input_tokens if input_tokens is not None else self.tokens()):
                return False
        if room is not None:
            used[0] += 1
            used[1] += tokens
            used[2] += cost
        if cost:
            self.spent, self.spent_changed = spent, True
        if self.has_context and input_tokens is not None:
            self.measured = input_tokens  # a measured count replaces the estimate
            self.carried = self.added = self.taken = 0
            self.measured_reset = True
        return True

    def change(self, slot: int) -> BatchChange | None:
        added = self.added - self.taken
        if not (self.spent_changed or self.measured_reset or added):
            return None
        change = BatchChange(slot, self.spent if self.spent_changed else None,
                             self.measured if self.measured_reset else None, added)
        self.taken = self.added
        self.spent_changed = self.measured_reset = False
        return change
