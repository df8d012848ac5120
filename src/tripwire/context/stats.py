"""The ``/context`` view: what compaction and checkpoints did in a session, how full its window
is, and what each model it used cost (``ContextStats``), built from a live context guard, from
a session's per-model usage alone, or from a stored session's rows.
"""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

__all__ = [
    "ModelUsage",
    "UsageByModel",
    "ContextActivity",
    "ContextStats",
    "usage_stats",
    "context_stats_from_rows",
]

@dataclass(frozen=True)
class ModelUsage:
    """One model's share of a session: turns it reported usage in, tokens and cost."""

    model: str
    turns: int
    input_tokens: int
    output_tokens: int
    cost_usd: float

    def to_dict(self) -> dict[str, Any]:
        return {"model": self.model, "turns": self.turns, "input_tokens": self.input_tokens,
                "output_tokens": self.output_tokens, "cost_usd": round(self.cost_usd, 9)}


class UsageByModel:
    """Per-model usage: ``add`` per usage record; a model's turns are the distinct turns
    (``turn``, counted by the caller) it reported usage in. Costs are kept in nano-dollars.

    Each model's entry: [turns, input tokens, output tokens, cost nano-dollars, last turn
    seen]. The first model's is held in this object's own fields (most sessions use one model:
    a list would be 104 bytes a fleet session, a dict of one 184), the others' in a dict made
    for the second."""

    __slots__ = ("cost", "first_model", "input_tokens", "last_turn", "more", "output_tokens",
                 "turn", "turns")

    def __init__(self) -> None:
        self.turn = 0
        self.first_model: str | None = None  # None: no usage yet
        # the first model's entry
        self.turns = self.input_tokens = self.output_tokens = self.cost = 0
        self.last_turn = -1
        self.more: dict[str, list[int]] | None = None  # the later models', in order

    @property
    def first(self) -> list[int] | None:
        """The first model's entry (None: no usage yet)."""
        if self.first_model is None:
            return None
        return [self.turns, self.input_tokens, self.output_tokens, self.cost, self.last_turn]

    @property
    def models(self) -> dict[str, list[int]]:
        """model -> its entry, in the order they first reported usage."""
        first, model = self.first, self.first_model
        if first is None or model is None:
            return {}
        return {model: first, **(self.more or {})}

    def add(self, model: str | None, input_tokens: int | None, output_tokens: int | None,
            cost_nano: int) -> None:
        key = model or ""
        if self.first_model is None:
            self.first_model = key
        if key == self.first_model:
            if self.last_turn != self.turn:
                self.turns += 1
                self.last_turn = self.turn
            self.input_tokens += input_tokens or 0
            self.output_tokens += output_tokens or 0
            self.cost += cost_nano
            return
        if self.more is None:
            self.more = {}
        entry = self.more.get(key)
        if entry is None:
            entry = self.more[key] = [0, 0, 0, 0, -1]
        if entry[4] != self.turn:
            entry[0] += 1
            entry[4] = self.turn
        entry[1] += input_tokens or 0
        entry[2] += output_tokens or 0
        entry[3] += cost_nano

    def snapshot(self) -> dict[str, list[int]]:
        """For a durable row: model -> [turns, input tokens, output tokens, cost nano]."""
        return {m: e[:4] for m, e in self.models.items()}

    def breakdown(self) -> tuple[ModelUsage, ...]:
        return _breakdown(self.snapshot())


def _breakdown(models: Mapping[str, Sequence[int]]) -> tuple[ModelUsage, ...]:
    rows = [ModelUsage(m or "(no model)", int(e[0]), int(e[1]), int(e[2]), int(e[3]) / 1e9)
            for m, e in models.items()]
    return tuple(sorted(rows, key=lambda r: (-r.cost_usd, r.model)))  # the priciest leads


class ContextActivity:
    """What the context mechanisms did this session (the ``/context`` view's first rows): the
    compactions and checkpoints, when the last of each ran and with what focus or note, and the
    characters summarized across all boundaries. ``boundary`` counts one; ``stats`` is the view."""

    __slots__ = ("checkpoints", "compactions", "last_checkpoint_at", "last_compaction_at",
                 "last_focus", "last_note", "summarized_chars")

    def __init__(self) -> None:
        self.compactions = self.checkpoints = self.summarized_chars = 0
        self.last_compaction_at: float | None = None
        self.last_checkpoint_at: float | None = None
        self.last_focus: str | None = None
        self.last_note: str | None = None

    def boundary(self, operation: str, label: str | None, chars: int,
                 at: float | None = None) -> None:
        at = time.time() if at is None else at
        self.summarized_chars += chars
        if operation == "checkpoint":
            self.checkpoints += 1
            self.last_checkpoint_at, self.last_note = at, label
        else:
            self.compactions += 1
            self.last_compaction_at, self.last_focus = at, label

    def stats(self, usage: UsageByModel | Mapping[str, Sequence[int]] | None,
              tokens: int | None, window: int | None, estimated: bool) -> ContextStats:
        models = () if usage is None else (
            usage.breakdown() if isinstance(usage, UsageByModel) else _breakdown(usage))
        return ContextStats(
            compactions=self.compactions, last_compaction_at=self.last_compaction_at,
            last_focus=self.last_focus, checkpoints=self.checkpoints,
            last_checkpoint_at=self.last_checkpoint_at, last_note=self.last_note,
            summarized_chars=self.summarized_chars, models=models, tokens=tokens,
            window=window, estimated=estimated)


@dataclass(frozen=True)
class ContextStats:
    """The ``/context`` snapshot: the shape of what compaction and checkpoints did.

    ``models`` is by descending cost (the priciest model leads); ``show_models`` is true when
    more than one model was used. ``window`` is None when unknown (the guard assumes one for its
    thresholds, but this view never renders an assumption as a measured percentage), and then
    ``utilization`` is None too. ``tokens`` is None where it is not known (a stored session)."""

    compactions: int
    last_compaction_at: float | None
    last_focus: str | None
    checkpoints: int
    last_checkpoint_at: float | None
    last_note: str | None
    summarized_chars: int
    models: tuple[ModelUsage, ...]
    tokens: int | None = None
    window: int | None = None
    estimated: bool = False

    @property
    def utilization(self) -> float | None:
        if self.tokens is None or not self.window:
            return None
        return self.tokens / self.window

    @property
    def show_models(self) -> bool:
        return len(self.models) > 1

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "compactions": self.compactions, "last_compaction_at": self.last_compaction_at,
            "last_focus": self.last_focus, "checkpoints": self.checkpoints,
            "last_checkpoint_at": self.last_checkpoint_at, "last_note": self.last_note,
            "summarized_chars": self.summarized_chars,
        }
        if self.tokens is not None:
            u = self.utilization
            out.update(tokens=self.tokens, estimated=self.estimated,
                       window=self.window if self.window else "unknown",
                       utilization=round(u, 6) if u is not None else "unknown")
        if self.show_models:
            out["models"] = [m.to_dict() for m in self.models]
        return out

    def render(self, now: float | None = None) -> str:
        """The seed's ``/context`` text."""
        now = time.time() if now is None else now

        def ago(at: float | None, what: str, label: str | None) -> str:
            if at is None:
                return ""
            bits = [f"last {_age(now - at)} ago"] + ([f"{what}: {label}"] if label else [])
            return f" ({', '.join(bits)})"

        lines = ["Context-management activity:",
                 f"  Compactions:  {self.compactions}"
                 f"{ago(self.last_compaction_at, 'focus', self.last_focus)}",
                 f"  Checkpoints:  {self.checkpoints}"
                 f"{ago(self.last_checkpoint_at, 'note', self.last_note)}",
                 f"  Summarized:   {self.summarized_chars} chars across all boundaries"]
        if self.tokens is not None:
            u = self.utilization
            est = ", partly estimated" if self.estimated else ""
            lines.append(f"  Context:      {self.tokens:,} of {self.window:,} tokens ({u:.1%}{est})"
                         if u is not None and self.window else
                         f"  Context:      {self.tokens:,} tokens{est}, of an unknown window")
        if self.show_models:
            for i, m in enumerate(self.models):
                lines.append(("  Models:       " if i == 0 else "              + ")
                             + f"{m.model} ({m.turns} turns, {m.input_tokens} in / "
                               f"{m.output_tokens} out, ${m.cost_usd:.4f})")
        return "\n".join(lines)


def _age(seconds: float) -> str:
    s = max(0, int(seconds))
    if s < 60:
        return f"{s}s"
    if s < 3600:
        return f"{s // 60}m{s % 60}s"
    return f"{s // 3600}h{s % 3600 // 60}m"


def usage_stats(usage: UsageByModel) -> ContextStats:
    """The ``/context`` view of a session without a context guard: its per-model usage."""
    return ContextActivity().stats(usage, None, None, False)


def context_stats_from_rows(rows: Sequence[Any]) -> ContextStats:
    """A stored session's ``/context`` view, rebuilt from its rows: its compaction boundaries
    (``context`` rows, timed by the row) and the per-model usage of its latest spend row."""
    from ..durability.rows import ContextRow, SpendRow, parse

    activity = ContextActivity()
    models: Mapping[str, Sequence[int]] = {}
    for row in rows:
        record = parse(row.kind, row.data)
        if isinstance(record, ContextRow):
            boundary = record.boundary()
            if boundary is not None:
                activity.boundary(*boundary, at=row.time)
        elif isinstance(record, SpendRow) and record.models is not None:
            models = record.models
    return activity.stats(models, None, None, False)
