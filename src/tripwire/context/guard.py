"""The context-window guard (SPEC §6): how full is the context, must it be compacted, must this
turn be cut — answered in-turn — and the compaction policy around the host's summarizer.

Utilization is the last provider-measured input token count plus an estimate of the tool-result
bytes appended since, at 3 bytes per token (``TokenEstimator``: the total decides, so chunking
never changes it); model text is not estimated, the next usage record measures it. A measured
count replaces the estimate. Compaction becomes pending the moment the tier's threshold is
crossed; at 95% of the window the turn is cut, since the alternative is the provider rejecting
an oversized request with an error that points nowhere near compaction.

tripwire does not call models: the host passes ``summarize(messages, focus) -> SummaryResult``.
An empty summary with a terminal finish reason (the safety family, MAX_TOKENS, a malformed tool
call) is a property of the input and is not retried; an unexplained one is retried once.
Failures back off exponentially (2, 4, 8 ... turns, at most 32); after two in a row compaction
falls back to mechanical truncation: a deterministic digest of the dropped window plus its
verbatim tail. A successful fallback clears the cooldown but keeps the failure count, which
leaves exactly one summarizer attempt per refill cycle: both the cost and the recovery probe.

Two triggers, two contracts (seed, "When the summarizer comes back empty"): an *automatic*
compaction (run because ``start_turn().compact`` said so) or checkpoint (the model declared a
task boundary) writes its failure as a durable ``context-reduction-failed`` row and backs off;
a *manual* one (the operator's ``/compact [focus]`` or ``/done [note]``) reports its failure to
the caller alone, writes no row and leaves the backoff as it was. ``auto_compact=False`` (the
seed's ``--no-compact``) turns off only the automatic trigger: manual compaction and the 95%
cut keep working. Checkpoints (task-boundary slicing, the seed's Mechanism C) run through the
same summarizer policy with their own failure count, under their own switch (``checkpoint``).

The summarizer's prompt is the host's; tripwire ships the seed's: ``handover_prompt(focus)``
(the five-section teammate handover) and ``checkpoint_prompt(note)`` (the six-section completion
record). Every summary boundary reports which of its sections the summary lacks.
"""

from __future__ import annotations

import functools
import json
import math
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from fractions import Fraction
from typing import Any

from ..base.thresholds import context_crosses
from ..errors import ConfigError
from ..signals import quote_args
from .histories import kept_prefix, rebuild
from .tiers import DEFAULT_CATALOGUE, TIERS, ModelCatalogue, compaction_threshold

__all__ = [
    "ContextConfig",
    "ContextGuard",
    "Utilization",
    "SummaryResult",
    "Compaction",
    "mechanical_truncation",
    "TERMINAL_FINISH_REASONS",
    "HANDOVER_SECTIONS",
    "CHECKPOINT_SECTIONS",
    "CHECKPOINT_MODES",
    "handover_prompt",
    "checkpoint_prompt",
    "missing_sections",
    "ContextStats",
    "ModelUsage",
    "UsageByModel",
    "context_stats_from_rows",
    "usage_stats",
]

#: SPEC §6 / §10.14: past this share of the window the turn is cut.
CUT_AT = 0.95
#: Failure backoff is 2**failures turns, capped (seed: "the backoff then grows to 32 turns").
MAX_BACKOFF_TURNS = 32
#: Two consecutive failures escalate to mechanical truncation (one is often a transient).
FALLBACK_AFTER = 2
#: The verbatim tail a mechanical truncation keeps, in characters.
TAIL_CHARS = 8000
#: Tool calls listed in a mechanical digest (most recent first); older ones are counted.
LEDGER_LIMIT = 100
#: ``compact_at`` with automatic compaction off: a count no context reaches (int64-safe for the
#: batch core), so the threshold never marks compaction pending; the 95% cut is unaffected.
NEVER = 2 ** 62
#: Who may declare a task boundary (seed, "Choosing who declares a boundary"): ``model`` — the
#: model's automatic checkpoints and the operator's manual ones; ``operator`` — manual only;
#: ``off`` — none (compaction is a separate switch).
CHECKPOINT_MODES = ("model", "operator", "off")

#: Finish reasons that explain an empty summary and that an identical retry cannot change.
TERMINAL_FINISH_REASONS = frozenset({
    "safety", "image_safety", "recitation", "blocklist", "prohibited_content", "spii",
    "content_filter", "refusal", "max_tokens", "length", "malformed_function_call",
    "malformed_tool_call", "unexpected_tool_call",
})


def is_terminal(finish_reason: str | None) -> bool:
    if not finish_reason:
        return False
    reason = finish_reason.strip().lower()
    return reason in TERMINAL_FINISH_REASONS or "safety" in reason


@dataclass(frozen=True)
class SummaryResult:
    """What the host's summarizer returns: the summary text and the provider's finish reason."""

    text: str
    finish_reason: str | None = None


#: The keys of a config file's ``[context]`` section.
FILE_KEYS = frozenset({"enabled", "auto_compact", "checkpoint", "threshold",
                       "threshold_by_tier", "cut_at", "tier", "tail_chars", "fallback_after",
                       "max_backoff_turns"})


@dataclass(frozen=True)
class ContextConfig:
    """Knobs of the context guard; defaults are SPEC §6's.

    ``threshold`` is the fallback for models of no known tier (and what a task class sets);
    ``threshold_by_tier`` overrides win for their tier. ``tier`` forces the tier used for
    thresholds (``""``: none). ``catalogue`` holds tiers and windows (``[models]`` in a file).
    ``cut_turns=False`` reports the 95% crossing (a ``turn-cut`` record with
    ``enforced: false``) without cutting, also under ``enforce``; below ``enforce`` the
    crossing is only reported whatever it says (nothing is cut in ``warn`` or ``feedback``).

    ``enabled=False`` turns the whole guard off (utilization, compaction, the cut);
    ``auto_compact=False`` only the automatic compaction trigger: manual compaction and the 95%
    cut keep working. ``checkpoint`` is one of ``CHECKPOINT_MODES``.
    """

    enabled: bool = True
    cut_turns: bool = True
    auto_compact: bool = True
    checkpoint: str = "model"
    threshold: float | None = None
    threshold_by_tier: Mapping[str, float] = field(default_factory=dict)
    cut_at: float = CUT_AT
    tier: str | None = None
    catalogue: ModelCatalogue = DEFAULT_CATALOGUE
    tail_chars: int = TAIL_CHARS
    fallback_after: int = FALLBACK_AFTER
    max_backoff_turns: int = MAX_BACKOFF_TURNS

    def __post_init__(self) -> None:
        compaction_threshold(None, self.threshold_by_tier, self.threshold)  # validates both
        for name in ("enabled", "cut_turns", "auto_compact"):
            if not isinstance(getattr(self, name), bool):
                raise ConfigError(f"context {name} must be true or false, "
                                  f"not {getattr(self, name)!r}")
        if self.checkpoint not in CHECKPOINT_MODES:
            raise ConfigError(f"context checkpoint must be one of {', '.join(CHECKPOINT_MODES)}, "
                              f"not {self.checkpoint!r}")
        if isinstance(self.cut_at, bool) or not isinstance(self.cut_at, (int, float)) \
                or not 0 < self.cut_at <= 1:
            raise ConfigError(f"context cut_at must be in (0, 1], not {self.cut_at!r}")
        if self.tier not in (None, "", *TIERS):
            raise ConfigError(f"context tier must be one of {', '.join(TIERS)} or '', "
                              f"not {self.tier!r}")
        for name in ("tail_chars", "fallback_after", "max_backoff_turns"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise ConfigError(f"context {name} must be a positive integer, not {value!r}")

    @classmethod
    def from_mapping(cls, file: Mapping[str, Any]) -> ContextConfig:
        """From a config file's ``[context]`` and ``[models]`` sections."""
        section = file.get("context", {})
        if not isinstance(section, Mapping):
            raise ConfigError("config section [context] must be a table")
        known = FILE_KEYS
        unknown = sorted(set(section) - known)
        if unknown:
            raise ConfigError(f"unknown setting(s) in [context]: {', '.join(unknown)} "
                              f"(known: {', '.join(sorted(known))})")
        return cls(catalogue=ModelCatalogue.from_config(file), **section)


@dataclass(frozen=True)
class Utilization:
    """How full the context is. ``estimated``: some of ``tokens`` is the byte estimate."""

    tokens: int
    window: int
    fraction: float
    estimated: bool
    measured_tokens: int
    unmeasured_bytes: int
    model: str | None
    tier: str | None
    threshold: float
    window_assumed: bool

    @property
    def estimated_tokens(self) -> int:
        return self.tokens - self.measured_tokens


@dataclass(frozen=True)
class Compaction:
    """The outcome of ``compact()`` or ``checkpoint()`` (``operation``). ``kind``: ``summary``,
    ``mechanical``, ``failed`` or ``skipped`` (nothing to do). ``reason`` says why it failed or
    was skipped; ``missing_sections`` are the prompt's sections a summary lacks; ``manual``: the
    operator asked (a failure is then reported here only). ``apply(messages)`` returns the new
    history, a valid
    request for its format (``histories``: OpenAI chat, Anthropic Messages, OpenAI Responses,
    detected or named by ``fmt``): the system prompt and the first user message in place, the
    boundary message (``text``), then the last ``keep`` messages, with results whose call was
    dropped removed and calls whose result is missing answered by a synthesized result."""

    kind: str
    text: str = ""
    keep: int = 0
    records: tuple[dict[str, Any], ...] = ()
    reason: str = ""
    operation: str = "compaction"
    missing_sections: tuple[str, ...] = ()
    manual: bool = False

    @property
    def ok(self) -> bool:
        return self.kind in ("summary", "mechanical")

    def apply(self, messages: Sequence[Any], role: str = "user",
              fmt: str | None = None) -> list[Any]:
        if not self.ok:
            return list(messages)
        return rebuild(messages, self.keep, self.text, role, fmt)


def _exact(value: float) -> Fraction:
    return Fraction(repr(float(value)))  # 0.85 is 17/20, not the nearest binary fraction


@functools.lru_cache(maxsize=1024)  # per session and model: a replay makes hundreds
def _tokens_at(share: float, window: int) -> int:
    """The smallest token count whose share of the window is >= share (exactly)."""
    return math.ceil(_exact(share) * window)


# Models whose assumed window has been announced: once per model id per process.
_ANNOUNCED: set[str] = set()
_ANNOUNCED_LOCK = threading.Lock()


def _first_announcement(model: str) -> bool:
    with _ANNOUNCED_LOCK:
        if model in _ANNOUNCED:
            return False
        _ANNOUNCED.add(model)
        return True


class ContextGuard:
    """One session's context state. Not thread-safe on its own (Guardrails locks)."""

    __slots__ = (
        "_utf8_length",
        "checkpoint_cooldown",
        "checkpoint_failures",
        "compact_at",
        "config",
        "cooldown",
        "cut_this_turn",
        "cut_tokens",
        "estimator",
        "failures",
        "measured",
        "model",
        "pending",
        "shape",
        "streamed",
        "threshold",
        "tier",
        "window",
        "window_assumed",
    )

    def __init__(self, config: ContextConfig, estimator_class: type,
                 utf8_length: Callable[[Any], int]):
        self.config = config
        self.estimator = estimator_class()
        self._utf8_length = utf8_length
        self.measured = 0
        self.model: str | None = None
        self.pending = False
        self.cut_this_turn = False
        self.failures = 0
        self.cooldown = 0
        self.checkpoint_failures = 0
        self.checkpoint_cooldown = 0
        self.shape = _Shape()  # what compactions and checkpoints did (context_stats)
        self.streamed = False  # chunks of the current result were already counted
        self._set_model(None)

    # -- the model and its limits --------------------------------------------------------------

    def _set_model(self, model: str | None) -> list[dict[str, Any]]:
        records = []
        catalogue = self.config.catalogue
        key = model or ""
        found, window = catalogue.lookup(key)
        forced = self.config.tier
        tier = found if forced is None else (forced or None)  # "": no tier
        self.model, self.tier = model, tier
        self.window, self.window_assumed = window.tokens, window.assumed
        self.threshold = compaction_threshold(tier, self.config.threshold_by_tier,
                                              self.config.threshold)
        self.compact_at = (_tokens_at(self.threshold, self.window) if self.config.auto_compact
                           else NEVER)
        self.cut_tokens = _tokens_at(self.config.cut_at, self.window)
        if model is not None and window.assumed and _first_announcement(key):
            records.append({
                "event": "context-reduction-degraded", "operation": "assumed-window",
                "model": key, "window": window.tokens,
                "message": f"context window of model {key!r} is unknown: assuming "
                           f"{window.tokens:,} tokens (pin a catalogued model id, or add it "
                           "to [models] windows, for the exact threshold)",
            })
        return records

    # -- observations ------------------------------------------------------------------------

    def observe_usage(self, model: str | None, input_tokens: int | None) -> list[dict[str, Any]]:
        """A measured count replaces the estimate; a new model takes effect at once."""
        records = self._set_model(model) if model is not None and model != self.model else []
        if input_tokens is not None:
            self.measured = input_tokens
            self.estimator.reset()
        return records

    def observe_bytes(self, chunk: Any) -> None:
        self.estimator.feed(chunk)

    @property
    def tokens(self) -> int:
        return self.measured + int(self.estimator.tokens)

    def check(self) -> str | None:
        """After an observation: ``"turn_cut"`` (>= 95%, once a turn), ``"compact"`` (the
        threshold was just crossed), or None."""
        tokens = self.measured + self.estimator.tokens
        if not context_crosses(tokens, self.compact_at, self.pending, self.cut_tokens,
                               self.cut_this_turn):
            return None
        newly_pending = tokens >= self.compact_at and not self.pending
        if tokens >= self.compact_at:
            self.pending = True
        if tokens >= self.cut_tokens and not self.cut_this_turn:
            self.cut_this_turn = True
            self.pending = self.config.auto_compact  # off: nothing would run it
            return "turn_cut"
        return "compact" if newly_pending else None

    def utilization(self) -> Utilization:
        tokens = self.tokens
        return Utilization(
            tokens=tokens,
            window=self.window,
            fraction=tokens / self.window if self.window else 0.0,
            estimated=self.estimator.bytes > 0,
            measured_tokens=self.measured,
            unmeasured_bytes=self.estimator.bytes,
            model=self.model,
            tier=self.tier,
            threshold=self.threshold,
            window_assumed=self.window_assumed,
        )

    def turn_cut_record(self) -> dict[str, Any]:
        u = self.utilization()
        return {
            "event": "context-reduction-degraded", "operation": "turn-cut",
            "estimate_tokens": u.tokens, "window": u.window,
            "unmeasured_bytes": u.unmeasured_bytes, "utilization": round(u.fraction, 6),
        }

    # -- turns and compaction ----------------------------------------------------------------

    def start_turn(self) -> bool:
        """Consume the pending flag: True when compaction should run before this turn's model
        call. A cooling-down failure skips the turn (the flag is consumed anyway; crossing the
        threshold again re-flags it). A checkpoint's cooldown counts down here too."""
        self.cut_this_turn = False
        if self.checkpoint_cooldown > 0:
            self.checkpoint_cooldown -= 1
        if not self.pending:
            return False
        self.pending = False
        if self.cooldown > 0:
            self.cooldown -= 1
            return False
        return True

    def compact(self, messages: Sequence[Any], focus: str | None,
                summarize: Callable[[Sequence[Any], str | None], SummaryResult] | None,
                *, manual: bool = False) -> Compaction:
        """Compaction: automatic (``manual=False``: run because the threshold marked it pending)
        or manual (the operator's ``/compact [focus]``)."""
        return self._reduce("compaction", messages, focus, summarize, manual)

    def checkpoint(self, messages: Sequence[Any], note: str | None,
                   summarize: Callable[[Sequence[Any], str | None], SummaryResult] | None,
                   *, manual: bool = False) -> Compaction:
        """A task-boundary checkpoint: automatic (the model declared the boundary) or manual
        (the operator's ``/done [note]``); ``note`` is passed to the summarizer as its focus."""
        mode = self.config.checkpoint
        if mode == "off" or (mode == "operator" and not manual):
            who = "checkpoints are off" if mode == "off" else \
                "checkpoints are operator-only: the model cannot declare a task boundary"
            return Compaction("skipped", reason=who, operation="checkpoint", manual=manual)
        if not manual and self.checkpoint_cooldown > 0:
            return Compaction("skipped", operation="checkpoint", reason=(
                f"checkpoints are cooling down after {self.checkpoint_failures} failure(s) "
                f"({self.checkpoint_cooldown} turn(s) left)"))
        return self._reduce("checkpoint", messages, note, summarize, manual)

    def _reduce(self, operation: str, messages: Sequence[Any], focus: str | None,
                summarize: Callable[[Sequence[Any], str | None], SummaryResult] | None,
                manual: bool) -> Compaction:
        """The summarizer policy both operations share: a summary, else (automatic runs) a
        counted failure with backoff, then mechanical truncation after ``fallback_after``."""
        records: list[dict[str, Any]] = []
        if not messages:
            return Compaction("skipped", reason=f"no messages to {_VERB[operation]}",
                              operation=operation, manual=manual)
        checkpoint = operation == "checkpoint"
        trigger = "manual" if manual else "automatic"
        label = {"focus": focus} if not checkpoint else {"note": focus}
        reason = "no summarizer was given"
        if summarize is not None:
            summary, reason = self._summarize(messages, focus, summarize, operation)
            if summary is not None:
                sections = CHECKPOINT_SECTIONS if checkpoint else HANDOVER_SECTIONS
                missing = missing_sections(summary, sections)
                if checkpoint:
                    self.checkpoint_failures = self.checkpoint_cooldown = 0
                else:
                    self.failures, self.cooldown = 0, 0
                self.pending = False
                records.append({"event": "compaction-boundary", "operation": operation,
                                "kind": "summary", "trigger": trigger, **label,
                                "messages": len(messages), "summary_chars": len(summary),
                                "missing_sections": list(missing)})
                self.shape.boundary(operation, focus, len(summary))
                return Compaction("summary", summary, 0, tuple(records), operation=operation,
                                  missing_sections=missing, manual=manual)
            if manual:  # the operator hears it from the call; no row, no backoff
                return Compaction("failed", reason=f"{operation}: {reason}",
                                  operation=operation, manual=True)
            failures = self._fail(operation)
            records.append({
                "event": "context-reduction-failed", "operation": operation,
                "reason": reason, "consecutive_failures": failures,
                "cooldown_turns": self.checkpoint_cooldown if checkpoint else self.cooldown,
            })
            if failures < self.config.fallback_after:
                return Compaction("failed", records=tuple(records), reason=reason,
                                  operation=operation)
        mech = mechanical_truncation(messages, self.config.tail_chars,
                                     note=focus if checkpoint else None)
        if mech is None:
            why = "nothing to drop: the whole window fits the tail budget"
            if manual:
                return Compaction("failed", reason=f"{operation}: {why}", operation=operation,
                                  manual=True)
            records.append({"event": "context-reduction-failed",
                            "operation": "mechanical-truncation", "of": operation,
                            "reason": why})
            return Compaction("failed", records=tuple(records), reason=reason,
                              operation=operation)
        text, keep, calls = mech
        # a successful fallback clears the cooldown but keeps the failure count
        if checkpoint:
            self.checkpoint_cooldown = 0
        else:
            self.cooldown = 0
        self.pending = False
        failures = self.checkpoint_failures if checkpoint else self.failures
        records.append({"event": "context-reduction-degraded",
                        "operation": "mechanical-truncation", "of": operation, "reason": reason,
                        "consecutive_failures": failures,
                        "dropped_messages": len(messages) - keep, "tool_calls": calls})
        records.append({"event": "compaction-boundary", "operation": operation,
                        "kind": "mechanical", "trigger": trigger, **label,
                        "messages": len(messages), "kept_messages": keep,
                        "summary_chars": len(text)})
        self.shape.boundary(operation, focus, len(text))
        return Compaction("mechanical", text, keep, tuple(records), reason, operation=operation,
                          manual=manual)

    def _fail(self, operation: str) -> int:
        """Count an automatic run's failure and back off: 2, 4, 8 ... turns, capped."""
        if operation == "checkpoint":
            self.checkpoint_failures += 1
            self.checkpoint_cooldown = min(2 ** self.checkpoint_failures,
                                           self.config.max_backoff_turns)
            return self.checkpoint_failures
        self.failures += 1
        self.cooldown = min(2 ** self.failures, self.config.max_backoff_turns)
        return self.failures

    def _summarize(self, messages: Sequence[Any], focus: str | None,
                   summarize: Callable[[Sequence[Any], str | None], SummaryResult],
                   operation: str = "compaction") -> tuple[str | None, str]:
        """(summary, "") or (None, reason). An unexplained empty result is retried once."""
        finish: str | None = None
        for attempt in (1, 2):
            try:
                result = summarize(messages, focus)
            except Exception as exc:
                return None, f"summarizer raised {type(exc).__name__}: {exc}"
            text = getattr(result, "text", None)
            if isinstance(text, str) and text.strip():
                return text, ""
            finish = getattr(result, "finish_reason", None)
            if is_terminal(finish) or attempt == 2:
                return None, (f"model returned no {_NOUN[operation]} text (finish_reason="
                              f"{finish or 'none given'}) after {attempt} attempt"
                              f"{'s' if attempt > 1 else ''}")
        raise AssertionError("unreachable")  # pragma: no cover

    def stats(self, usage: UsageByModel | None = None) -> ContextStats:
        """The ``/context`` snapshot: what compaction and checkpoints did, the window, and the
        per-model usage (``usage``)."""
        u = self.utilization()
        return self.shape.stats(usage, u.tokens, None if u.window_assumed else u.window,
                                u.estimated)


_VERB = {"compaction": "compact", "checkpoint": "checkpoint"}
_NOUN = {"compaction": "summary", "checkpoint": "checkpoint"}


# --------------------------------------------------------------------------------------------
# The summary prompts (seed, "What the summary contains" / "What the checkpoint contains")

#: The five sections of the teammate handover, each with what it holds.
HANDOVER_SECTIONS: tuple[tuple[str, str], ...] = (
    ("Current state", "The exact user request. What's been completed. What's actively in "
                      "progress. What's specifically remaining."),
    ("Files & changes", "Files modified, read, or analyzed. Critical code locations with line "
                        "numbers when known."),
    ("Technical context", "Architectural decisions made and why. Patterns adopted. Commands "
                          "that worked or failed."),
    ("Strategy & approach", "The strategy chosen. Alternatives considered and rejected. "
                            "Gotchas. Blockers."),
    ("Exact next steps", "A concrete numbered list of the next developer-style actions."),
)

#: The six sections of a task-boundary checkpoint's completion record.
CHECKPOINT_SECTIONS: tuple[tuple[str, str], ...] = (
    ("Task", "What was the task? What's the headline outcome?"),
    ("Files & changes", "Files modified, read, or analyzed. Files considered and NOT changed "
                        "(with why)."),
    ("Technical context", "Architectural decisions, patterns, commands that worked or failed."),
    ("Strategy & approach", "Strategy chosen, alternatives rejected, gotchas, lessons."),
    ("Verification & next steps", "What's been verified, what's known-good but unverified, "
                                  "follow-up work queued."),
    ("Where we are", 'Status framed as "what the operator and I both know right now."'),
)


def _sections_text(sections: tuple[tuple[str, str], ...]) -> str:
    return "\n\n".join(f"# {name}\n{what}" for name, what in sections)


def handover_prompt(focus: str | None = None) -> str:
    """The summarizer prompt for compaction: a five-section teammate handover. ``focus`` (the
    operator's ``/compact <focus>``) biases it toward one thread without dropping a section."""
    text = ("Summarize the conversation above as a teammate handover: the developer who "
            "continues this work sees only your summary, not the conversation. Write exactly "
            "these five sections, each under its own markdown heading, in this order:\n\n"
            + _sections_text(HANDOVER_SECTIONS))
    if focus and focus.strip():
        text += (f"\n\nFocus: bias the summary toward {focus.strip()} — keep that thread's "
                 "detail, and still write every section.")
    return text


def checkpoint_prompt(note: str | None = None) -> str:
    """The summarizer prompt for a task-boundary checkpoint: a six-section completion record.
    ``note`` is the boundary's note (``/done <note>`` or the model's own)."""
    text = ("A task is complete. Write its completion record: the next task starts from your "
            "record alone, not from the conversation above. Write exactly these six sections, "
            "each under its own markdown heading, in this order:\n\n"
            + _sections_text(CHECKPOINT_SECTIONS))
    if note and note.strip():
        text += f"\n\nThe task boundary's note: {note.strip()}"
    return text


def _heading(line: str) -> str:
    return line.strip().lstrip("#").strip().strip("*_").strip().rstrip(":").strip().casefold()


def missing_sections(summary: str,
                     sections: tuple[tuple[str, str], ...] = HANDOVER_SECTIONS) -> tuple[str, ...]:
    """The sections whose heading (a line reading the section's name, as a markdown heading,
    bold or plain, any case, an optional colon) the summary lacks, in prompt order."""
    present = {_heading(line) for line in summary.splitlines() if line.strip()}
    return tuple(name for name, _ in sections if name.casefold() not in present)


# --------------------------------------------------------------------------------------------
# The /context view


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
    (``turn``, counted by the caller) it reported usage in. Costs are kept in nano-dollars."""

    __slots__ = ("models", "turn")

    def __init__(self) -> None:
        self.turn = 0
        # model -> [turns, input tokens, output tokens, cost nano-dollars, last turn seen]
        self.models: dict[str, list[int]] = {}

    def add(self, model: str | None, input_tokens: int | None, output_tokens: int | None,
            cost_nano: int) -> None:
        entry = self.models.get(model or "")
        if entry is None:
            entry = self.models[model or ""] = [0, 0, 0, 0, -1]
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


class _Shape:
    """What the context mechanisms did this session (the ``/context`` view's first rows)."""

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
    return _Shape().stats(usage, None, None, False)


def context_stats_from_rows(rows: Sequence[Any]) -> ContextStats:
    """A stored session's ``/context`` view, rebuilt from its rows: its compaction boundaries
    (``context`` rows, timed by the row) and the per-model usage of its latest spend row."""
    from ..durability.rows import ContextRow, SpendRow, parse

    shape = _Shape()
    models: Mapping[str, Sequence[int]] = {}
    for row in rows:
        record = parse(row.kind, row.data)
        if isinstance(record, ContextRow):
            boundary = record.boundary()
            if boundary is not None:
                shape.boundary(*boundary, at=row.time)
        elif isinstance(record, SpendRow) and record.models is not None:
            models = record.models
    return shape.stats(models, None, None, False)


# --------------------------------------------------------------------------------------------
# Mechanical truncation

TRUNCATION_NOTICE = (
    "[context truncated] This is a mechanical truncation, not a summary: the earlier part of "
    "this conversation was dropped to fit the context window, and its detail is lost. Below is "
    "a ledger of the tool calls that ran in the dropped part, most recent first, with their "
    "arguments but not their results. If you need what a dropped result said, re-run the tool "
    "rather than guess."
)


def message_text(message: Any) -> str:
    """A message rendered as text, for the tail budget: ``role: content``."""
    if isinstance(message, str):
        return message
    if isinstance(message, Mapping):
        role = message.get("role") or message.get("type") or "message"
        content = message.get("content", message.get("text", ""))
        if isinstance(content, list):
            parts = []
            for block in content:
                if isinstance(block, Mapping):
                    parts.append(str(block.get("text") or block.get("content") or
                                     json.dumps(block, ensure_ascii=False, default=repr)))
                else:
                    parts.append(str(block))
            content = "\n".join(parts)
        elif not isinstance(content, str):
            content = json.dumps(content, ensure_ascii=False, default=repr)
        return f"{role}: {content}"
    return repr(message)


def tool_calls(message: Any) -> list[tuple[str, Any]]:
    """The (name, args) tool calls a message carries, in the shapes harnesses log: OpenAI chat
    ``tool_calls``, Anthropic ``tool_use`` blocks, Responses ``function_call`` items, and this
    project's interchange ``call`` events."""
    if not isinstance(message, Mapping):
        return []
    calls: list[tuple[str, Any]] = []
    for call in message.get("tool_calls") or ():
        if isinstance(call, Mapping):
            fn = call.get("function", call)
            calls.append((str(fn.get("name", "")), fn.get("arguments", fn.get("args"))))
    content = message.get("content")
    if isinstance(content, list):
        for block in content:
            if isinstance(block, Mapping) and block.get("type") == "tool_use":
                calls.append((str(block.get("name", "")), block.get("input")))
    kind = message.get("type")
    if kind == "function_call":
        calls.append((str(message.get("name", "")), message.get("arguments")))
    elif kind == "call" and "name" in message:
        calls.append((str(message["name"]), message.get("args")))
    return calls


def mechanical_truncation(messages: Sequence[Any], tail_chars: int = TAIL_CHARS,
                          note: str | None = None) -> tuple[str, int, int] | None:
    """(digest text, messages kept verbatim, tool calls in the dropped part), or None when
    nothing can be dropped. Deterministic: the same history gives the same text. ``note``: a
    checkpoint's, stated after the opening notice."""
    keep, used = 0, 0
    for message in reversed(messages):
        size = len(message_text(message))
        if used + size > tail_chars:
            break
        keep += 1
        used += size
    if keep >= len(messages):
        if len(messages) < 2:
            return None
        keep = len(messages) - 1  # drop at least the oldest message
    start = len(messages) - keep
    kept = kept_prefix(messages, start)  # the system prompt and the task stay in place
    dropped = [m for i, m in enumerate(messages[:start]) if i not in kept]
    if not dropped:
        return None
    ledger = [call for message in dropped for call in tool_calls(message)]
    lines = [TRUNCATION_NOTICE]
    if note is not None:
        lines.append(f"It was cut at a task boundary (a checkpoint): {note or 'no note given'}.")
    lines.append(f"Dropped: {len(dropped)} messages, {len(ledger)} tool calls.")
    if ledger:
        lines.append("Tool calls, most recent first:")
        for n, (name, args) in enumerate(reversed(ledger[-LEDGER_LIMIT:]), start=1):
            lines.append(f"{n}. {name or 'unnamed tool'} {quote_args(args)}")
        if len(ledger) > LEDGER_LIMIT:
            lines.append(f"({len(ledger) - LEDGER_LIMIT} earlier calls not listed)")
    if kept:
        what = ("the system prompt and the first user message"
                if len(kept) > 1 else "the first user message")
        lines.append(f"Kept in place before this note: {what}.")
    lines.append(f"The most recent {keep} messages follow verbatim."
                 if keep else "No earlier message follows.")
    return "\n".join(lines), keep, len(ledger)
