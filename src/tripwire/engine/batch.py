"""The batch boundary: the rows batch ingest takes, what Fleet hands the batch core per
session, what the core hands back, and why it stops (both engines' ``Batch``)."""

from __future__ import annotations

import enum
from typing import Any, NamedTuple

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
