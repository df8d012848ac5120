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
"""

from __future__ import annotations

import json
import math
import threading
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from fractions import Fraction
from typing import Any

from .errors import ConfigError
from .histories import kept_prefix, rebuild
from .signals import quote_args
from .thresholds import context_crosses
from .tiers import DEFAULT_CATALOGUE, TIERS, ModelCatalogue, compaction_threshold

__all__ = [
    "ContextConfig",
    "ContextGuard",
    "Utilization",
    "SummaryResult",
    "Compaction",
    "mechanical_truncation",
    "TERMINAL_FINISH_REASONS",
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


@dataclass(frozen=True)
class ContextConfig:
    """Knobs of the context guard; defaults are SPEC §6's.

    ``threshold`` is the fallback for models of no known tier (and what a task class sets);
    ``threshold_by_tier`` overrides win for their tier. ``tier`` forces the tier used for
    thresholds (``""``: none). ``catalogue`` holds tiers and windows (``[models]`` in a file).
    ``cut_turns=False`` reports the 95% crossing (a ``turn-cut`` record with
    ``enforced: false``) without cutting: what replay does when it analyses a recording in
    ``warn``/``feedback``/``off`` mode, where nothing may be skipped.
    """

    enabled: bool = True
    cut_turns: bool = True
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
        if not isinstance(self.cut_turns, bool):
            raise ConfigError(f"context cut_turns must be true or false, not {self.cut_turns!r}")
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
        known = {"enabled", "threshold", "threshold_by_tier", "cut_at", "tier", "tail_chars",
                 "fallback_after", "max_backoff_turns"}
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
    """The outcome of ``compact()``. ``kind``: ``summary``, ``mechanical``, ``failed`` or
    ``skipped`` (nothing to compact). ``apply(messages)`` returns the new history, a valid
    request for its format (``histories``: OpenAI chat, Anthropic Messages, OpenAI Responses,
    detected or named by ``fmt``): the system prompt and the first user message in place, the
    boundary message (``text``), then the last ``keep`` messages, with results whose call was
    dropped removed and calls whose result is missing answered by a synthesized result."""

    kind: str
    text: str = ""
    keep: int = 0
    records: tuple[dict[str, Any], ...] = ()
    reason: str = ""

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
        self.compact_at = _tokens_at(self.threshold, self.window)
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
            self.pending = True
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
        threshold again re-flags it)."""
        self.cut_this_turn = False
        if not self.pending:
            return False
        self.pending = False
        if self.cooldown > 0:
            self.cooldown -= 1
            return False
        return True

    def compact(self, messages: Sequence[Any], focus: str | None,
                summarize: Callable[[Sequence[Any], str | None], SummaryResult] | None,
                ) -> Compaction:
        records: list[dict[str, Any]] = []
        if not messages:
            return Compaction("skipped", reason="no messages to compact")
        reason = "no summarizer was given"
        if summarize is not None:
            summary, reason = self._summarize(messages, focus, summarize)
            if summary is not None:
                self.failures, self.cooldown, self.pending = 0, 0, False
                records.append({"event": "compaction-boundary", "kind": "summary",
                                "messages": len(messages), "summary_chars": len(summary)})
                return Compaction("summary", summary, 0, tuple(records))
            self.failures += 1
            self.cooldown = min(2 ** self.failures, self.config.max_backoff_turns)
            records.append({
                "event": "context-reduction-failed", "operation": "compaction",
                "reason": reason, "consecutive_failures": self.failures,
                "cooldown_turns": self.cooldown,
            })
            if self.failures < self.config.fallback_after:
                return Compaction("failed", records=tuple(records), reason=reason)
        mech = mechanical_truncation(messages, self.config.tail_chars)
        if mech is None:
            records.append({"event": "context-reduction-failed",
                            "operation": "mechanical-truncation",
                            "reason": "nothing to drop: the whole window fits the tail budget"})
            return Compaction("failed", records=tuple(records), reason=reason)
        text, keep, calls = mech
        self.cooldown, self.pending = 0, False  # the failure count stays
        records.append({"event": "context-reduction-degraded",
                        "operation": "mechanical-truncation", "reason": reason,
                        "consecutive_failures": self.failures,
                        "dropped_messages": len(messages) - keep, "tool_calls": calls})
        records.append({"event": "compaction-boundary", "kind": "mechanical",
                        "messages": len(messages), "kept_messages": keep})
        return Compaction("mechanical", text, keep, tuple(records), reason)

    def _summarize(self, messages: Sequence[Any], focus: str | None,
                   summarize: Callable[[Sequence[Any], str | None], SummaryResult],
                   ) -> tuple[str | None, str]:
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
                return None, (f"model returned no summary text (finish_reason="
                              f"{finish or 'none given'}) after {attempt} attempt"
                              f"{'s' if attempt > 1 else ''}")
        raise AssertionError("unreachable")  # pragma: no cover


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
                          ) -> tuple[str, int, int] | None:
    """(digest text, messages kept verbatim, tool calls in the dropped part), or None when
    nothing can be dropped. Deterministic: the same history gives the same text."""
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
    lines = [TRUNCATION_NOTICE, f"Dropped: {len(dropped)} messages, {len(ledger)} tool calls."]
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
