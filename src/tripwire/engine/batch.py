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


class BatchState(NamedTuple):
    """One session, as ``SessionBatch.state()`` hands it to the batch core. ``engine`` is
    None when the batch must hand every row of the session to Python; ``cost`` is None when
    its usage rows must go to Python (its task charges each one)."""

    engine: Any
    blocked: bool
    context: ContextState | None
    ids: dict[Any, str]
    words_matter: bool
    cost: CostState | None


class BatchChange(NamedTuple):
    """What the batch core changed in a session since the last hand-back: the new spend, a
    context a usage measured (the estimate starts again from it), estimate bytes added."""

    slot: int
    spent: int | None
    measured: int | None
    added: int
