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

The prompts, the section check and mechanical truncation itself are ``prompts.py``'s; the
``/context`` view this guard feeds is ``stats.py``'s.
"""

from __future__ import annotations

import functools
import math
import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from ..base.thresholds import context_crosses
from .config import ContextConfig
from .prompts import (
    CHECKPOINT_SECTIONS,
    HANDOVER_SECTIONS,
    mechanical_truncation,
    missing_sections,
)
from .stats import ContextActivity, ContextStats, UsageByModel
from .tiers import compaction_threshold

if TYPE_CHECKING:
    from fractions import Fraction

__all__ = [
    "ContextGuard",
    "Utilization",
    "SummaryResult",
    "Compaction",
    "TERMINAL_FINISH_REASONS",
]

#: ``compact_at`` with automatic compaction off: a count no context reaches (int64-safe for the
#: batch core), so the threshold never marks compaction pending; the 95% cut is unaffected.
NEVER = 2 ** 62

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
        from .histories import rebuild  # only a compaction applied needs it: not a hook's start
        return rebuild(messages, self.keep, self.text, role, fmt)


def _exact(value: float) -> Fraction:
    from fractions import Fraction  # loaded with the first limits, not with the config type
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


class ModelLimits:
    """What a configuration makes of one model: its tier, window and thresholds in tokens. The
    same for every session of that configuration on that model, so made once and shared
    (``model_limits``): a fleet's sessions hold one reference, not six fields each."""

    __slots__ = ("compact_at", "cut_tokens", "threshold", "tier", "window", "window_assumed")

    def __init__(self, config: ContextConfig, model: str | None):
        found, window = config.catalogue.lookup(model or "")
        forced = config.tier
        self.tier = tier = found if forced is None else (forced or None)  # "": no tier
        self.window, self.window_assumed = window.tokens, window.assumed
        self.threshold = compaction_threshold(tier, config.threshold_by_tier, config.threshold)
        self.compact_at = (_tokens_at(self.threshold, self.window) if config.auto_compact
                           else NEVER)
        self.cut_tokens = _tokens_at(config.cut_at, self.window)


# (id(config), model) -> (config, its limits): the config is kept alive with its entry, so
# its id is not reused while the entry stands. Configurations and models are few.
_LIMITS: dict[tuple[int, str | None], tuple[ContextConfig, ModelLimits]] = {}
_LIMITS_MAX = 1024


def model_limits(config: ContextConfig, model: str | None) -> ModelLimits:
    """``ModelLimits(config, model)``, shared."""
    key = (id(config), model)
    entry = _LIMITS.get(key)
    if entry is None:
        if len(_LIMITS) >= _LIMITS_MAX:
            _LIMITS.clear()  # a process cycling through configurations: start over
        entry = _LIMITS[key] = (config, ModelLimits(config, model))
    return entry[1]


class ContextGuard:
    """One session's context state. Not thread-safe on its own (Guardrails locks)."""

    __slots__ = (
        "_utf8_length",
        "activity",
        "checkpoint_cooldown",
        "checkpoint_failures",
        "config",
        "cooldown",
        "cut_this_turn",
        "estimator",
        "failures",
        "limits",
        "measured",
        "model",
        "pending",
        "streamed",
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
        # what compactions and checkpoints did (/context): made at the first of them
        self.activity: ContextActivity | None = None
        self.streamed = False  # chunks of the current result were already counted
        self._set_model(None)

    # -- the model and its limits --------------------------------------------------------------

    @property
    def tier(self) -> str | None:
        return self.limits.tier

    @property
    def window(self) -> int:
        return self.limits.window

    @property
    def window_assumed(self) -> bool:
        return self.limits.window_assumed

    @property
    def threshold(self) -> float:
        return self.limits.threshold

    @property
    def compact_at(self) -> int:
        return self.limits.compact_at

    @property
    def cut_tokens(self) -> int:
        return self.limits.cut_tokens

    def _set_model(self, model: str | None) -> list[dict[str, Any]]:
        records = []
        key = model or ""
        limits = model_limits(self.config, model)
        self.model, self.limits = model, limits
        if model is not None and limits.window_assumed and _first_announcement(key):
            records.append({
                "event": "context-reduction-degraded", "operation": "assumed-window",
                "model": key, "window": limits.window,
                "message": f"context window of model {key!r} is unknown: assuming "
                           f"{limits.window:,} tokens (pin a catalogued model id, or add it "
                           "to [models] windows, for the exact threshold)",
            })
        return records

    # -- observations ------------------------------------------------------------------------

    def observe_usage(self, model: str | None, input_tokens: int | None) -> list[dict[str, Any]]:
        """A measured count replaces the estimate; a new model takes effect at once (an empty
        name is no model: nothing to look up)."""
        model = model or None
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
        limits = self.limits
        if not context_crosses(tokens, limits.compact_at, self.pending, limits.cut_tokens,
                               self.cut_this_turn):
            return None
        newly_pending = tokens >= limits.compact_at and not self.pending
        if tokens >= limits.compact_at:
            self.pending = True
        if tokens >= limits.cut_tokens and not self.cut_this_turn:
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
                self._activity().boundary(operation, focus, len(summary))
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
        self._activity().boundary(operation, focus, len(text))
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
        activity = self.activity if self.activity is not None else _NO_ACTIVITY
        return activity.stats(usage, u.tokens, None if u.window_assumed else u.window,
                              u.estimated)

    def _activity(self) -> ContextActivity:
        if self.activity is None:
            self.activity = ContextActivity()
        return self.activity


#: The activity of a session no compaction or checkpoint ran in yet (read only)
_NO_ACTIVITY = ContextActivity()


_VERB = {"compaction": "compact", "checkpoint": "checkpoint"}
_NOUN = {"compaction": "summary", "checkpoint": "checkpoint"}
