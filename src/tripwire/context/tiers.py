"""The model catalogue: a model id's tier, its context window and its compaction threshold.

Three lookups, all case-insensitive on the model id:

- ``tier(model)``: the **first** matching rule of an ordered substring table wins
  (``reference/core-agent-behaviour.md`` §9, amended by SPEC §10.14: ``gemini-3.<n>-pro`` for any
  ``n`` and ``gemini-3.8-flash`` are frontier, as in the seed's tier table). A model no rule
  matches has no tier (``None``): it is never small, and the small-tier-parent guard skips it.
- ``context_window(model)``: an exact-id table, then ordered substring rules (reference §10.2)
  *without* the reference's catch-alls. A model no entry matches, the empty id included, gets
  SPEC §6's assumed 128,000 tokens and ``ContextWindow.assumed`` is true, so the caller can say
  so (once per model id: that is the caller's job, not this module's).
- ``compaction_threshold(tier)``: frontier 0.85, mid 0.65, small 0.35; no tier -> the single
  fallback, 0.85 (SPEC §6; seed "Per-tier thresholds").

Configuration (the file is parsed elsewhere; ``ModelCatalogue.from_config`` takes the resulting
plain mapping). Every key is optional; user entries are tried before the built-in ones::

    {"models": {
        "tiers": [                                  # ordered; first match wins
            {"match": ["my-proxy-opus"], "tier": "frontier"},
            {"regex": ["^acme-[0-9]+b$"], "tier": "small"},
        ],
        "windows": {"my-proxy-opus": 200000},       # exact ids (case-insensitive)
        "window_rules": [                           # ordered; first match wins
            {"match": ["my-proxy"], "tokens": 200000},
            {"match": ["acme-"], "requires": ["-1m"], "tokens": 1000000},
        ],
        "assumed_window": 128000,                   # for models nothing matches
    }}

A rule matches when any ``match`` string is a substring of the lower-cased id, or any ``regex``
is found in it (``re.search``, case-insensitive), and every ``requires`` string is a substring
too. ``match`` may be a single string. Bad entries raise ``ConfigError`` (a ``ValueError``)
naming the entry, e.g. ``models.tiers[1].tier``.

Per-tier threshold overrides (``compaction.threshold_by_tier`` in the seed) are passed straight
to ``compaction_threshold``; they win for their tier only.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any, Literal, TypeVar, cast

from ..errors import ConfigError

__all__ = [
    "ASSUMED_CONTEXT_WINDOW",
    "BUILTIN_EXACT_WINDOWS",
    "BUILTIN_TIER_RULES",
    "BUILTIN_WINDOW_RULES",
    "DEFAULT_CATALOGUE",
    "DEFAULT_TIER_THRESHOLDS",
    "FALLBACK_THRESHOLD",
    "TIERS",
    "ContextWindow",
    "ModelCatalogue",
    "Tier",
    "TierRule",
    "WindowRule",
    "classify",
    "compaction_threshold",
    "context_window",
    "is_small",
]

Tier = Literal["frontier", "mid", "small"]

#: Known tiers, largest first.
TIERS: tuple[Tier, ...] = ("frontier", "mid", "small")

#: SPEC §6: a window nothing in the catalogue knows is assumed to be this big (and said so).
ASSUMED_CONTEXT_WINDOW = 128_000

#: SPEC §6 / seed "Per-tier thresholds (since v2.5)": smaller models degrade earlier, so they
#: compact earlier. Invariant (pinned by the reference's tests): small < mid < frontier.
DEFAULT_TIER_THRESHOLDS: Mapping[Tier, float] = MappingProxyType(
    {"frontier": 0.85, "mid": 0.65, "small": 0.35}
)

#: SPEC §6: the single threshold for a model without a tier (the seed's compaction.threshold).
FALLBACK_THRESHOLD = 0.85


# --------------------------------------------------------------------------------------------
# Rules
# --------------------------------------------------------------------------------------------


def _strings(value: object, what: str, *, lower: bool = True) -> tuple[str, ...]:
    # A bare string would otherwise be iterated character by character: accept it as one entry.
    if isinstance(value, str):
        value = (value,)
    if not isinstance(value, (list, tuple)) or not all(isinstance(s, str) for s in value):
        raise ConfigError(f"{what} must be a string or a list of strings, got {value!r}")
    if any(s == "" for s in value):
        # An empty substring is contained in every id: it would swallow every later rule.
        raise ConfigError(f"{what} must not contain an empty string")
    return tuple(s.lower() for s in value) if lower else tuple(value)


def _compile(patterns: tuple[str, ...], what: str) -> tuple[re.Pattern[str], ...]:
    compiled = []
    for p in patterns:
        try:
            compiled.append(re.compile(p, re.IGNORECASE))
        except re.error as exc:
            raise ConfigError(f"{what}: invalid regular expression {p!r}: {exc}") from None
    return tuple(compiled)


@dataclass(frozen=True)
class _Matcher:
    """The matching half of a rule; ``model`` is already lower-cased by the catalogue."""

    substrings: tuple[str, ...]
    patterns: tuple[str, ...]
    requires: tuple[str, ...]
    _compiled: tuple[re.Pattern[str], ...] = field(repr=False, compare=False)

    @classmethod
    def build(cls, substrings: object, patterns: object, requires: object) -> _Matcher:
        subs = _strings(substrings, "match")
        # Regexes are kept as written (lower-casing would turn \D into \d) and compiled
        # case-insensitive instead.
        pats = _strings(patterns, "regex", lower=False)
        if not subs and not pats:
            raise ConfigError("a rule needs at least one 'match' substring or 'regex' pattern")
        return cls(subs, pats, _strings(requires, "requires"), _compile(pats, "regex"))

    def matches(self, model: str) -> bool:
        hit = any(s in model for s in self.substrings) or any(
            p.search(model) for p in self._compiled
        )
        return hit and all(s in model for s in self.requires)


class _Rule:
    """What TierRule and WindowRule share: the matcher and its read-only views."""

    matcher: _Matcher

    @property
    def substrings(self) -> tuple[str, ...]:
        return self.matcher.substrings

    @property
    def patterns(self) -> tuple[str, ...]:
        return self.matcher.patterns

    @property
    def requires(self) -> tuple[str, ...]:
        return self.matcher.requires

    def matches(self, model: str) -> bool:
        """Whether this rule matches ``model`` (any case)."""
        return self.matcher.matches(model.lower())


@dataclass(frozen=True, init=False)
class TierRule(_Rule):
    """Models matching this rule belong to ``tier``.

    ``substrings``: any one contained in the id matches; ``patterns``: regexes, any one found
    matches; ``requires``: substrings that must all be present as well.
    """

    tier: Tier
    matcher: _Matcher

    def __init__(
        self,
        substrings: str | Sequence[str],
        tier: Tier,
        patterns: str | Sequence[str] = (),
        requires: str | Sequence[str] = (),
    ) -> None:
        if tier not in TIERS:
            raise ConfigError(f"unknown tier {tier!r} (expected one of {', '.join(TIERS)})")
        object.__setattr__(self, "tier", tier)
        object.__setattr__(self, "matcher", _Matcher.build(substrings, patterns, requires))


@dataclass(frozen=True, init=False)
class WindowRule(_Rule):
    """Models matching this rule have a context window of ``tokens`` (same matching as TierRule)."""

    tokens: int
    matcher: _Matcher

    def __init__(
        self,
        substrings: str | Sequence[str],
        tokens: int,
        patterns: str | Sequence[str] = (),
        requires: str | Sequence[str] = (),
    ) -> None:
        object.__setattr__(self, "tokens", _window_tokens(tokens, "tokens"))
        object.__setattr__(self, "matcher", _Matcher.build(substrings, patterns, requires))


def _window_tokens(value: object, what: str) -> int:
    # bool is an int subclass; True is not a window size.
    if isinstance(value, bool) or not isinstance(value, int):
        raise ConfigError(f"{what} must be an integer number of tokens, got {value!r}")
    if value <= 0:
        raise ConfigError(f"{what} must be positive, got {value}")
    return value


@dataclass(frozen=True)
class ContextWindow:
    """A model's context window; ``assumed`` is true when no catalogue entry knew the model."""

    tokens: int
    assumed: bool


# --------------------------------------------------------------------------------------------
# Built-in tables
# --------------------------------------------------------------------------------------------

#: Reference §9, first match wins, with SPEC §10.14's amendments (rows 9 and 10).
BUILTIN_TIER_RULES: tuple[TierRule, ...] = (
    TierRule(("claude-fable-5", "claude-mythos", "claude-opus-5"), "frontier"),
    # The 5-generation rows precede the 4-generation ones only for readability: no overlap.
    TierRule(("claude-sonnet-5",), "mid"),
    TierRule(("claude-opus-4",), "frontier"),
    TierRule(("claude-sonnet-4",), "mid"),
    TierRule(("claude-haiku-4",), "small"),
    TierRule(("claude-3-5-sonnet", "claude-3-7-sonnet"), "mid"),
    TierRule(("claude-3-5-haiku", "claude-3-haiku"), "small"),
    # Any vendor's, any generation's flash-lite is small: it must precede every flash rule,
    # or "gemini-3.7-flash-lite" would be frontier.
    TierRule(("flash-lite",), "small"),
    # gemini-3.8-flash: the seed's tier table (SPEC §10.14); the reference lacks it.
    TierRule(("gemini-3.8-flash", "gemini-3.7-flash", "gemini-3.6-flash"), "frontier"),
    # SPEC §10.14: gemini-3.<n>-pro for any n (the reference lists only 3 and 3.1).
    TierRule(("gemini-3-pro",), "frontier", patterns=(r"gemini-3\.\d+-pro",)),
    TierRule(("gemini-3.5-flash",), "mid"),
    TierRule(("gemini-3-flash", "gemini-3.1-flash"), "small"),
    TierRule(("gemini-2.5-pro", "gemini-2.0-pro"), "mid"),
    TierRule(("gemini-2.5-flash", "gemini-2.0-flash"), "small"),
)

_1M = 1_000_000
_200K = 200_000
_GEMINI = 1_048_576  # LiteLLM's max_input_tokens for the Gemini 1M-class ids

#: Reference §10.2 step 1, the table generated from LiteLLM ``max_input_tokens``. Dated Claude
#: ids whose date the reference does not give are left to the substring rules, which give the
#: same window; only the Gemini entries differ from the rules (1,048,576 vs 1,000,000).
BUILTIN_EXACT_WINDOWS: Mapping[str, int] = MappingProxyType(
    {
        "claude-fable-5": _1M,
        "claude-mythos-5": _1M,
        "claude-mythos-preview": _1M,
        "claude-opus-4-6": _1M,
        "claude-opus-4-7": _1M,
        "claude-opus-4-8": _1M,
        "claude-opus-5": _1M,
        "claude-sonnet-4-6": _1M,
        "claude-sonnet-5": _1M,
        "claude-haiku-4-5": _200K,
        "claude-haiku-4-5-20251001": _200K,
        "claude-opus-4-5": _200K,
        "claude-opus-4-5-20251101": _200K,
        "claude-sonnet-4-5": _200K,
        "claude-sonnet-4-5-20250929": _200K,
        "gemini-2.5-flash": _GEMINI,
        "gemini-2.5-flash-lite": _GEMINI,
        # The reference says "2.5-flash-lite(+preview)"; LiteLLM has two such preview ids.
        "gemini-2.5-flash-lite-preview-06-17": _GEMINI,
        "gemini-2.5-flash-lite-preview-09-2025": _GEMINI,
        "gemini-2.5-pro": _GEMINI,
        "gemini-3-flash-preview": _GEMINI,
        "gemini-3.1-flash-lite": _GEMINI,
        "gemini-3.1-flash-lite-preview": _GEMINI,
        "gemini-3.1-pro-preview": _GEMINI,
        "gemini-3.1-pro-preview-customtools": _GEMINI,
        "gemini-3.5-flash": _GEMINI,
        "gemini-3.5-flash-lite": _GEMINI,
        "gemini-3.6-flash": _GEMINI,
        "gemini-3.7-flash": _GEMINI,
    }
)

#: Reference §10.2 step 2, first match wins. SPEC §10.14 drops the reference's two catch-alls
#: ("any other claude -> 200,000 assumed", "anything else -> 0 = unknown"): both become the
#: assumed 128,000 window instead.
BUILTIN_WINDOW_RULES: tuple[WindowRule, ...] = (
    WindowRule(("gemini-3.1-pro", "gemini-3-pro"), _1M),
    WindowRule(
        (
            "gemini-3.7-flash",
            "gemini-3.6-flash",
            "gemini-3.5-flash",
            "gemini-3-flash",
            "gemini-3.1-flash",
        ),
        _1M,
    ),
    WindowRule(("gemini-2.5-pro",), _GEMINI),
    WindowRule(("gemini-2.5-flash", "gemini-2.0-flash"), _1M),
    WindowRule(("claude-opus-4-6", "claude-opus-4-7", "claude-opus-4-8", "claude-sonnet-4-6"), _1M),
    WindowRule(("claude-fable-5", "claude-mythos", "claude-opus-5", "claude-sonnet-5"), _1M),
    # Earlier 4-generation ids: the 1M-context beta is spelled with a -1m suffix (even Haiku).
    WindowRule(("claude-opus-4", "claude-sonnet-4", "claude-haiku-4"), _1M, requires=("-1m",)),
    WindowRule(("claude-opus-4", "claude-sonnet-4", "claude-haiku-4"), _200K),
)


# --------------------------------------------------------------------------------------------
# The catalogue
# --------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class _WindowLayer:
    exact: Mapping[str, int]
    rules: tuple[WindowRule, ...]


def _exact_table(windows: Mapping[str, int], what: str) -> Mapping[str, int]:
    table: dict[str, int] = {}
    for model, tokens in windows.items():
        if not isinstance(model, str):
            raise ConfigError(f"{what}: model ids must be strings, got {model!r}")
        key = model.lower()
        value = _window_tokens(tokens, f"{what}[{model!r}]")
        if table.get(key, value) != value:
            raise ConfigError(f"{what}: {model!r} is listed twice with different windows")
        table[key] = value
    return MappingProxyType(table)


_R = TypeVar("_R", TierRule, WindowRule)


#: how many model ids a catalogue remembers its lookups of (a bound: model ids come from input)
_LOOKUPS_KEPT = 4096


#: The keys of a config file's ``[models]`` section.
MODELS_KEYS = frozenset({"tiers", "windows", "window_rules", "assumed_window"})


class ModelCatalogue:
    """Tier rules and window tables. Immutable; ``extended`` makes a new one in front of this.

    ``None`` for a table means the built-in one; pass ``()`` / ``{}`` for an empty one.
    """

    __slots__ = ("_assumed", "_layers", "_looked_up", "_tier_rules")

    def __init__(
        self,
        tier_rules: Iterable[TierRule] | None = None,
        exact_windows: Mapping[str, int] | None = None,
        window_rules: Iterable[WindowRule] | None = None,
        assumed_window: int = ASSUMED_CONTEXT_WINDOW,
    ) -> None:
        self._tier_rules = _rule_tuple(
            BUILTIN_TIER_RULES if tier_rules is None else tier_rules, TierRule, "tier_rules"
        )
        layer = _WindowLayer(
            _exact_table(
                BUILTIN_EXACT_WINDOWS if exact_windows is None else exact_windows, "exact_windows"
            ),
            _rule_tuple(
                BUILTIN_WINDOW_RULES if window_rules is None else window_rules,
                WindowRule,
                "window_rules",
            ),
        )
        self._layers: tuple[_WindowLayer, ...] = (layer,)
        self._assumed = ContextWindow(_window_tokens(assumed_window, "assumed_window"), True)
        self._looked_up: dict[str, tuple[Tier | None, ContextWindow]] = {}

    # -- lookups ------------------------------------------------------------------------------

    def lookup(self, model: str) -> tuple[Tier | None, ContextWindow]:
        """``(tier(model), context_window(model))``, remembered per model id (the catalogue is
        immutable; every session of a replay or a fleet looks up the same few models)."""
        key = _model_key(model)
        found = self._looked_up.get(key)
        if found is None:
            found = (self.tier(key), self.context_window(key))
            if len(self._looked_up) < _LOOKUPS_KEPT:
                self._looked_up[key] = found
        return found

    def tier(self, model: str) -> Tier | None:
        """The first matching rule's tier, or ``None`` for a model no rule knows."""
        key = _model_key(model)
        for rule in self._tier_rules:
            if rule.matcher.matches(key):
                return rule.tier
        return None

    def is_small(self, model: str) -> bool:
        """True only for the small tier: an unknown model is never small."""
        return self.tier(model) == "small"

    def context_window(self, model: str) -> ContextWindow:
        """Exact id, then substring rules, newest layer first; else the assumed window."""
        key = _model_key(model)
        for layer in self._layers:
            tokens = layer.exact.get(key)
            if tokens is not None:
                return ContextWindow(tokens, False)
            for rule in layer.rules:
                if rule.matcher.matches(key):
                    return ContextWindow(rule.tokens, False)
        return self._assumed

    @property
    def tier_rules(self) -> tuple[TierRule, ...]:
        """Every tier rule, in the order they are tried."""
        return self._tier_rules

    @property
    def assumed_window(self) -> int:
        return self._assumed.tokens

    # -- building -----------------------------------------------------------------------------

    def extended(
        self,
        *,
        tier_rules: Iterable[TierRule] = (),
        exact_windows: Mapping[str, int] | None = None,
        window_rules: Iterable[WindowRule] = (),
        assumed_window: int | None = None,
    ) -> ModelCatalogue:
        """A new catalogue trying the given entries first, then everything in this one.

        The new exact ids and window rules both come before this catalogue's exact ids, so a
        user's rule can override a built-in exact entry.
        """
        new = object.__new__(ModelCatalogue)
        new._tier_rules = _rule_tuple(tier_rules, TierRule, "tier_rules") + self._tier_rules
        layer = _WindowLayer(
            _exact_table(exact_windows or {}, "exact_windows"),
            _rule_tuple(window_rules, WindowRule, "window_rules"),
        )
        new._layers = (layer, *self._layers) if layer.exact or layer.rules else self._layers
        new._assumed = (
            self._assumed
            if assumed_window is None
            else ContextWindow(_window_tokens(assumed_window, "assumed_window"), True)
        )
        new._looked_up = {}
        return new

    @classmethod
    def from_config(
        cls, config: Mapping[str, Any] | None, *, base: ModelCatalogue | None = None
    ) -> ModelCatalogue:
        """``base`` (default: the built-in catalogue) extended by the config's ``models`` section.

        ``config`` is the whole parsed configuration; keys other than ``models`` are ignored.
        Raises ``ConfigError`` naming the bad entry.
        """
        base = cls() if base is None else base
        if config is None:
            return base
        if not isinstance(config, Mapping):
            raise ConfigError(f"configuration must be a mapping, got {type(config).__name__}")
        models = config.get("models")
        if models is None:
            return base
        if not isinstance(models, Mapping):
            raise ConfigError(f"models must be a mapping, got {type(models).__name__}")
        unknown = set(models) - MODELS_KEYS
        if unknown:
            raise ConfigError(
                f"models: unknown key(s) {', '.join(sorted(map(repr, unknown)))} "
                "(expected tiers, windows, window_rules, assumed_window)"
            )

        tier_rules = [
            _with_where(f"models.tiers[{i}]", _tier_rule_from, entry)
            for i, entry in enumerate(_entry_list(models.get("tiers"), "models.tiers"))
        ]
        window_rules = [
            _with_where(f"models.window_rules[{i}]", _window_rule_from, entry)
            for i, entry in enumerate(
                _entry_list(models.get("window_rules"), "models.window_rules")
            )
        ]
        windows = models.get("windows")
        if windows is None:
            windows = {}
        if not isinstance(windows, Mapping):
            raise ConfigError(f"models.windows must be a mapping, got {type(windows).__name__}")
        exact = _exact_table(windows, "models.windows")
        assumed = models.get("assumed_window")
        if assumed is not None:
            _window_tokens(assumed, "models.assumed_window")
        return base.extended(
            tier_rules=tier_rules,
            exact_windows=exact,
            window_rules=window_rules,
            assumed_window=assumed,
        )

    def __repr__(self) -> str:
        windows = sum(len(layer.exact) + len(layer.rules) for layer in self._layers)
        return (
            f"ModelCatalogue({len(self._tier_rules)} tier rules, {windows} window entries, "
            f"assumed_window={self._assumed.tokens})"
        )


def _model_key(model: str) -> str:
    if not isinstance(model, str):
        raise TypeError(f"model id must be a string, got {type(model).__name__}")
    return model.lower()


def _rule_tuple(rules: Iterable[object], kind: type[_R], what: str) -> tuple[_R, ...]:
    out: list[_R] = []
    for i, rule in enumerate(rules):
        if not isinstance(rule, kind):
            raise ConfigError(f"{what}[{i}] must be a {kind.__name__}, got {rule!r}")
        out.append(rule)
    return tuple(out)


def _entry_list(value: object, what: str) -> list[Mapping[str, Any]]:
    if value is None:
        return []
    if not isinstance(value, (list, tuple)):
        raise ConfigError(f"{what} must be a list, got {type(value).__name__}")
    for i, entry in enumerate(value):
        if not isinstance(entry, Mapping):
            raise ConfigError(f"{what}[{i}] must be a mapping, got {entry!r}")
    return list(value)


def _check_keys(entry: Mapping[str, Any], value_key: str) -> None:
    allowed = {"match", "regex", "requires", value_key}
    unknown = set(entry) - allowed
    if unknown:
        raise ConfigError(
            f"unknown key(s) {', '.join(sorted(map(repr, unknown)))} "
            f"(expected {', '.join(sorted(allowed))})"
        )
    if value_key not in entry:
        raise ConfigError(f"missing {value_key!r}")


def _tier_rule_from(entry: Mapping[str, Any]) -> TierRule:
    _check_keys(entry, "tier")
    tier = entry["tier"]
    if not isinstance(tier, str):
        raise ConfigError(f"tier must be a string, got {tier!r}")
    return TierRule(
        entry.get("match", ()),
        cast(Tier, tier.lower()),
        entry.get("regex", ()),
        entry.get("requires", ()),
    )


def _window_rule_from(entry: Mapping[str, Any]) -> WindowRule:
    _check_keys(entry, "tokens")
    return WindowRule(
        entry.get("match", ()), entry["tokens"], entry.get("regex", ()), entry.get("requires", ())
    )


def _with_where(where: str, build: Any, entry: Mapping[str, Any]) -> Any:
    try:
        return build(entry)
    except ConfigError as exc:
        raise ConfigError(f"{where}: {exc}") from None


# --------------------------------------------------------------------------------------------
# Module-level shortcuts and thresholds
# --------------------------------------------------------------------------------------------

#: The built-in catalogue, with no user configuration.
DEFAULT_CATALOGUE = ModelCatalogue()


def classify(model: str) -> Tier | None:
    """The built-in catalogue's tier for ``model`` (``None`` = unknown)."""
    return DEFAULT_CATALOGUE.tier(model)


def is_small(model: str) -> bool:
    """The built-in catalogue's ``is_small``."""
    return DEFAULT_CATALOGUE.is_small(model)


def context_window(model: str) -> ContextWindow:
    """The built-in catalogue's window for ``model``."""
    return DEFAULT_CATALOGUE.context_window(model)


def _threshold(value: object, what: str) -> float | None:
    """A validated threshold; ``None`` when unset (absent or 0, as the reference reads 0)."""
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise ConfigError(f"{what} must be a number, got {value!r}")
    if value == 0:
        return None
    if not (0 < value <= 1) or math.isnan(value):
        raise ConfigError(f"{what} must be in (0, 1] (or 0 for unset), got {value!r}")
    return float(value)


def compaction_threshold(
    tier: str | None,
    overrides: Mapping[str, float] | None = None,
    fallback: float | None = None,
) -> float:
    """The utilization at which compaction becomes pending for a model of ``tier``.

    - ``overrides`` (per-tier, e.g. ``{"small": 0.30}``) win for their tier, whatever the
      fallback (seed: per-tier settings survive a task class's fallback).
    - A tier without an override uses ``DEFAULT_TIER_THRESHOLDS``.
    - ``None``, ``""`` or any other non-tier uses ``fallback``, default ``FALLBACK_THRESHOLD``.
    - A value of 0 means "unset", as in the reference: a 0 override sends its tier to the
      fallback, a 0 fallback means 0.85. Anything else outside (0, 1] raises ``ConfigError``,
      as does an override for an unknown tier (a typo would otherwise be ignored silently).
    """
    fb = _threshold(fallback, "fallback threshold")
    per_tier: float | None = None
    overridden = False
    for name, value in (overrides or {}).items():
        if name not in TIERS:
            raise ConfigError(
                f"threshold for unknown tier {name!r} (expected one of {', '.join(TIERS)})"
            )
        checked = _threshold(value, f"threshold for tier {name!r}")
        if name == tier:
            overridden, per_tier = True, checked
    if tier in TIERS:
        if not overridden:
            return DEFAULT_TIER_THRESHOLDS[tier]
        if per_tier is not None:
            return per_tier
    return FALLBACK_THRESHOLD if fb is None else fb
