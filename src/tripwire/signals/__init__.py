"""The signal catalogue: the sixteen watchdog signals (SPEC §1's eight, §7.3's
repeated-failure, §12.4's five: recycled-calls, unknown-tool, repeated-text,
empty-responses, compaction-storm, and issue 39's persistent-warnings and looping-text), one
module each.

Each module holds its signal whole: ``SPEC`` (id, severity, scope, knobs with the why of each
default, policy properties such as ``withdrawn_by_words``), ``texts`` (the ``reason`` for the
operator and the ``guidance`` for the model, built only when it fires) and its reference
detector. ``CATALOGUE`` lists the modules once, and that order *is* the bit order of the
engines' fired masks: bit ``i`` is ``SIGNALS[i]`` (native ``session.h`` is checked against it
by ``tests/test_parity.py``).
"""

from __future__ import annotations

import functools
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from ..base.alert import CRITICAL, SESSION, TURN, WARN, Alert
from ..errors import ConfigError
from ..identity.answer import ResultsConfig
from . import (
    alternating_tool_cycle,
    compaction_storm,
    dominant_tool_call,
    empty_responses,
    looping_text,
    no_new_state,
    no_op_streak,
    persistent_warnings,
    recycled_calls,
    repeated_failure,
    repeated_text,
    repeated_tool_call,
    repeated_tool_name,
    tool_failure_streak,
    tools_without_text,
    unknown_tool,
)
from ._spec import (
    MAX_COUNT,
    Knob,
    SignalSpec,
    error_text,
    quote_args,
    tool_label,
    tool_list,
    truncate_utf8,
)
from .alternating_tool_cycle import MAX_HISTORY
from .settings import EngineSettings
from .tool_rules import ToolRule, ToolRules, check_rules

__all__ = [
    "ResultsConfig",
    "Alert",
    "Knob",
    "SignalSpec",
    "SIGNALS",
    "SIGNAL_IDS",
    "BY_ID",
    "WatchdogConfig",
    "WITHDRAWN_BY_WORDS",
    "CRITICAL", "WARN", "SESSION", "TURN", "MAX_HISTORY", "MAX_COUNT",
    "quote_args",
    "truncate_utf8",
    "tool_label",
    "tool_list",
    "error_text",
]

#: The catalogue, in SPEC §1 table order, then SPEC §7.3's signal and SPEC §12.4's: the only
#: place the bit order is written (and the order of alerts within one event, SPEC §10.12).
CATALOGUE = (
    repeated_tool_call,
    alternating_tool_cycle,
    dominant_tool_call,
    repeated_tool_name,
    tool_failure_streak,
    no_op_streak,
    no_new_state,
    tools_without_text,
    repeated_failure,
    recycled_calls,
    unknown_tool,
    repeated_text,
    empty_responses,
    compaction_storm,
    persistent_warnings,
    looping_text,
)

SIGNALS: tuple[SignalSpec, ...] = tuple(m.SPEC.placed(i) for i, m in enumerate(CATALOGUE))
SIGNAL_IDS: tuple[str, ...] = tuple(s.id for s in SIGNALS)
BY_ID: dict[str, SignalSpec] = {s.id: s for s in SIGNALS}
#: Signals whose queued notes the agent's own words withdraw.
WITHDRAWN_BY_WORDS: frozenset[str] = frozenset(s.id for s in SIGNALS if s.withdrawn_by_words)


def _check_knob(signal: SignalSpec, name: str, value: Any) -> Any:
    if name == "enabled":
        if not isinstance(value, bool):
            raise ConfigError(f"{signal.id}.enabled must be true or false, not {value!r}")
        return value
    try:
        knob = signal.knob(name)
    except KeyError:
        known = ", ".join(["enabled"] + [k.name for k in signal.knobs])
        raise ConfigError(
            f"unknown knob {name!r} for signal {signal.id} (known: {known})"
        ) from None
    return knob.checked(signal.id, value)


@dataclass(frozen=True)
class WatchdogConfig:
    """Which signals run and with which knobs. ``WatchdogConfig()`` is SPEC §1's defaults.

    ``signals`` maps a signal id to knob overrides, e.g.
    ``{"repeated-tool-call": {"threshold": 3}, "no-new-state": {"enabled": False}}``.
    ``only`` restricts the run to a set of signal ids (every other one disabled).
    ``results`` says how results are compared (``[results]``: the volatile classes and the
    JSON keys an answer ignores, SPEC §12.1).
    ``tools`` maps a tool name or glob pattern to per-signal thresholds or ``"off"`` for
    that tool's calls (``[tools.<name>]``, ``signals/tool_rules.py``), e.g.
    ``{"mcp__gdb__*": {"repeated-tool-call": "off", "repeated-tool-name": 40}}``.
    """

    signals: Mapping[str, Mapping[str, Any]] = field(default_factory=dict)
    only: frozenset[str] | None = None
    results: ResultsConfig = field(default_factory=ResultsConfig)
    tools: Mapping[str, Mapping[str, Any]] = field(default_factory=dict)

    def __post_init__(self) -> None:
        checked: dict[str, dict[str, Any]] = {}
        for signal_id, knobs in self.signals.items():
            spec = _spec(signal_id)
            if not isinstance(knobs, Mapping):
                raise ConfigError(f"settings of signal {signal_id} must be a table of knobs")
            checked[signal_id] = {k: _check_knob(spec, k, v) for k, v in knobs.items()}
        object.__setattr__(self, "signals", checked)
        if self.only is not None:
            only = frozenset(self.only)
            for signal_id in only:
                _spec(signal_id)
            object.__setattr__(self, "only", only)
        object.__setattr__(self, "tools", check_rules(self.tools, BY_ID))
        if not isinstance(self.results, ResultsConfig):
            raise ConfigError("WatchdogConfig(results=...) must be a ResultsConfig, "
                              f"not {type(self.results).__name__}")

    @classmethod
    def from_mapping(cls, mapping: Mapping[str, Any]) -> WatchdogConfig:
        """Build from a config file's tables: ``{"signals": {<id>: {<knob>: value}},
        "results": {...}, "tools": {<name or glob>: {<id>: threshold or "off"}}}``
        (``[results]``: ``ResultsConfig.from_mapping``)."""
        unknown = set(mapping) - {"signals", "results", "tools"}
        if unknown:
            raise ConfigError(f"unknown watchdog setting(s): {', '.join(sorted(unknown))}")
        signals = mapping.get("signals", {})
        if not isinstance(signals, Mapping):
            raise ConfigError("'signals' must be a table keyed by signal id")
        return cls(signals=signals, results=ResultsConfig.from_mapping(mapping.get("results", {})),
                   tools=mapping.get("tools", {}))

    def with_knobs(self, signal_id: str, **knobs: Any) -> WatchdogConfig:
        """The same config with these knobs of one signal set (checked as any knob is)."""
        signals = {k: dict(v) for k, v in self.signals.items()}
        signals.setdefault(signal_id, {}).update(knobs)
        return WatchdogConfig(signals=signals, only=self.only, results=self.results,
                              tools=self.tools)

    def with_tools(self, tools: Mapping[str, Mapping[str, Any]]) -> WatchdogConfig:
        """The same config with these per-tool rules (all of them: they replace its own)."""
        return WatchdogConfig(signals=self.signals, only=self.only, results=self.results,
                              tools=tools)

    def restricted_to(self, ids: frozenset[str] | set[str]) -> WatchdogConfig:
        return WatchdogConfig(signals=self.signals, only=frozenset(ids), results=self.results,
                              tools=self.tools)

    def value(self, signal_id: str, knob: str) -> Any:
        spec = BY_ID[signal_id]
        override = self.signals.get(signal_id, {})
        if knob in override:
            return override[knob]
        return spec.knob(knob).default

    def effective(self, signal_id: str, knob: str) -> Any:
        """A knob's value as the engines use it: SPEC §1's clamp applied by the knob."""
        return BY_ID[signal_id].knob(knob).effective(self.value(signal_id, knob))

    def is_enabled(self, signal_id: str) -> bool:
        if self.only is not None and signal_id not in self.only:
            return False
        return bool(self.signals.get(signal_id, {}).get("enabled", True))

    def engine_settings(self) -> EngineSettings:
        """Resolve defaults and clamp (SPEC §1: counts below 2 become 2; each signal module's
        ``resolve``). Computed once per config: a fleet shares it across sessions."""
        cached: EngineSettings | None = self.__dict__.get("_engine_settings")
        if cached is None:
            resolved: dict[str, Any] = {}
            enabled = 0
            for spec in SIGNALS:
                resolved.update(spec.resolve(functools.partial(self.effective, spec.id), resolved))
                if self.is_enabled(spec.id):
                    enabled |= spec.bit
            resolved.update(self.results.settings())
            resolved["tool_rules"] = self._tool_rules(resolved)
            # persistent-warnings counts what alerts as warn under this config
            resolved["warn_signals"] = sum(spec.bit for spec in SIGNALS
                                           if spec.graded(self)[0] == WARN)
            cached = EngineSettings(enabled=enabled, **resolved)
            object.__setattr__(self, "_engine_settings", cached)
        return cached

    def _tool_rules(self, resolved: Mapping[str, Any]) -> ToolRules | None:
        exempt = resolved["exempt_tools"]
        if not self.tools and not exempt:
            return None
        defaults = ToolRule(off=0, repeat_threshold=resolved["repeat_threshold"],
                            name_threshold=resolved["name_threshold"],
                            repeated_failure_threshold=resolved["repeated_failure_threshold"])
        return ToolRules(self.tools, exempt, defaults, {s.id: s.bit for s in SIGNALS})


def _spec(signal_id: str) -> SignalSpec:
    try:
        return BY_ID[signal_id]
    except KeyError:
        raise ConfigError(
            f"unknown signal {signal_id!r} (known: {', '.join(SIGNAL_IDS)})"
        ) from None
