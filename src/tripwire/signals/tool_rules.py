"""Per-tool rules (issue 39): ``[tools.<name>]`` in a config file, ``WatchdogConfig(tools=...)``
in Python: for calls of one tool (or of every tool a glob pattern matches), per signal a
threshold or ``"off"``.

    [tools."mcp__gdb__*"]
    repeated-tool-call = "off"
    repeated-tool-name = 40

Which signals take a rule is each signal's own ``SPEC.per_tool``: a threshold or ``"off"``
(repeated-tool-call, repeated-tool-name, repeated-failure: runs of one tool), ``"off"`` only
(no-new-state, recycled-calls, tool-failure-streak, no-op-streak: the tool's results neither
count nor break their runs; tools-without-text: its calls are not counted in the streak;
alternating-tool-cycle: a cycle with a call of the tool in its block is not reported;
dominant-tool-call: the tool's calls are never reported as dominant). The signals of events
without a tool (repeated-text, empty-responses, compaction-storm, persistent-warnings) and
unknown-tool (a tool the host does not have has no rule) take none.

Precedence, per signal: a rule naming the tool exactly wins over any glob; among globs, the one
with more literal (non-wildcard) characters wins. Two globs with as many literal characters
that can match one name and set the same signal are ambiguous: a ConfigError when the config
is built (never a guess at run time).

no-new-state's ``exempt_tools`` is the old spelling of one case: each of its tools is an exact
rule with no-new-state, repeated-failure and recycled-calls off (what "results never count"
has always meant), merged under any ``[tools.<that name>]`` the config also has.

Both engines take the same ``ToolRule`` from ``ToolRules.lookup`` (the one resolver): the
reference reads its fields, the native core a C struct of them (``native/session.h``
``ToolRule``).
"""

from __future__ import annotations

import fnmatch
import functools
from collections.abc import Iterable, Mapping
from typing import Any, NamedTuple

from ..errors import ConfigError

__all__ = ["OFF", "ToolRule", "ToolRules", "check_rules", "EXEMPT_SIGNALS", "PER_TOOL_THRESHOLD",
           "PER_TOOL_OFF"]

#: ``SignalSpec.per_tool``: a per-tool rule may set the signal's threshold, or turn it off
PER_TOOL_THRESHOLD = "threshold"
#: ``SignalSpec.per_tool``: a per-tool rule may only turn the signal off
PER_TOOL_OFF = "off"

#: A threshold no run reaches (the native counters are 32-bit): the signal is off for the tool.
OFF = 0xFFFFFFFF

#: The signals a rule changes on the call path (the others read only results): with none of
#: them in any rule, a call never looks its tool up.
CALL_SIGNALS = ("repeated-tool-call", "repeated-tool-name", "alternating-tool-cycle",
                "dominant-tool-call", "tools-without-text")

#: The signals no-new-state's old ``exempt_tools`` turns off for each of its tools.
EXEMPT_SIGNALS = ("no-new-state", "repeated-failure", "recycled-calls")

#: A rule's threshold fields, by the signal they set (native ``ToolRule`` has the same fields).
THRESHOLD_FIELDS = {
    "repeated-tool-call": "repeat_threshold",
    "repeated-tool-name": "name_threshold",
    "repeated-failure": "repeated_failure_threshold",
}

#: How many tool names a glob-resolving ``ToolRules`` remembers (names come from the agent:
#: past this, a name is resolved again each time rather than held).
CACHE_LIMIT = 4096


class ToolRule(NamedTuple):
    """What one tool's calls and results are judged by: complete (a signal no rule sets has
    the config's own threshold), as both engines read it."""

    off: int  # bits (``SignalSpec.bit``) of the signals that never alert for this tool
    repeat_threshold: int  # OFF when off
    name_threshold: int
    repeated_failure_threshold: int


def _literal_count(pattern: str) -> int:
    """A glob's specificity: its characters that match only themselves."""
    count, i = 0, 0
    while i < len(pattern):
        c = pattern[i]
        if c in "*?":
            i += 1
            continue
        if c == "[":
            end = pattern.find("]", i + 2 if pattern[i + 1:i + 2] in ("!", "]") else i + 1)
            if end > 0:
                i = end + 1  # a set matches one of several characters: not literal
                continue
        count += 1
        i += 1
    return count


def _tokens(pattern: str) -> tuple[str, ...]:
    """The glob as tokens: "*", "?" (a set counts as "?": any one character, an
    over-approximation that can only report more ambiguity, never less) or one literal."""
    out: list[str] = []
    i = 0
    while i < len(pattern):
        c = pattern[i]
        if c == "[":
            end = pattern.find("]", i + 2 if pattern[i + 1:i + 2] in ("!", "]") else i + 1)
            if end > 0:
                out.append("?")
                i = end + 1
                continue
        out.append(c if c in "*?" else "=" + c)
        i += 1
    return tuple(out)


def _overlap(a: str, b: str) -> bool:
    """Whether some name matches both globs (as fnmatch.fnmatchcase reads them)."""
    ta, tb = _tokens(a), _tokens(b)

    @functools.cache
    def can(i: int, j: int) -> bool:
        if i == len(ta) and j == len(tb):
            return True
        if i < len(ta) and ta[i] == "*":
            return can(i + 1, j) or (j < len(tb) and can(i, j + 1))
        if j < len(tb) and tb[j] == "*":
            return can(i, j + 1) or (i < len(ta) and can(i + 1, j))
        if i == len(ta) or j == len(tb):
            return False
        x, y = ta[i], tb[j]
        return (x == "?" or y == "?" or x == y) and can(i + 1, j + 1)

    return can(0, 0)


def _is_glob(pattern: str) -> bool:
    return any(c in pattern for c in "*?[")


def _value(signal: Any, pattern: str, value: Any) -> int:
    """A rule's value for one signal: "off" (OFF) or the signal's threshold, checked and
    clamped as its threshold knob is."""
    where = f"tools.{pattern!r}: {signal.id}"
    if value == OFF and type(value) is int:  # a checked table checked again (with_knobs)
        return OFF
    if isinstance(value, str):
        if value.strip().lower() == "off":
            return OFF
        raise ConfigError(f"{where} must be \"off\" or a threshold, not {value!r}")
    if signal.per_tool != PER_TOOL_THRESHOLD:
        raise ConfigError(f"{where} has no per-call threshold: only \"off\" applies to it")
    knob = signal.knob("threshold")
    if isinstance(value, float) and value.is_integer():
        value = int(value)
    low, high = knob.minimum or 2, knob.maximum or OFF - 1
    if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= high:
        # a rule is new: no clamp, a threshold out of range is a mistake
        raise ConfigError(f"{where} must be \"off\" or an integer in [{low}, {high}], "
                          f"not {value!r}")
    return value


def check_rules(tools: Any, by_id: Mapping[str, Any]) -> dict[str, dict[str, int]]:
    """``[tools]`` as a checked table: pattern -> {signal id: threshold, or OFF}; every
    mistake a one-line ConfigError naming the pattern and the signal. ``by_id``: the
    catalogue's ``SignalSpec``s by id (not imported here: the catalogue imports this)."""
    if not isinstance(tools, Mapping):
        raise ConfigError("'tools' must be a table keyed by tool name or glob pattern")
    checked: dict[str, dict[str, int]] = {}
    for pattern, rule in tools.items():
        if not isinstance(pattern, str) or not pattern:
            raise ConfigError(f"tools: a tool name or glob pattern is a non-empty string, "
                              f"not {pattern!r}")
        if not isinstance(rule, Mapping):
            raise ConfigError(f"tools.{pattern!r} must be a table of signal = threshold or "
                              f"\"off\", not {rule!r}")
        values: dict[str, int] = {}
        for signal_id, value in rule.items():
            signal = by_id.get(signal_id)
            if signal is None:
                raise ConfigError(f"tools.{pattern!r}: unknown signal {signal_id!r} (per-tool "
                                  f"rules take: {', '.join(ruled(by_id))})")
            if not signal.per_tool:
                raise ConfigError(f"tools.{pattern!r}: {signal_id} takes no per-tool rule "
                                  f"(per-tool rules take: {', '.join(ruled(by_id))})")
            values[signal_id] = _value(signal, pattern, value)
        checked[pattern] = values
    _check_ambiguity(checked)
    return checked


def ruled(by_id: Mapping[str, Any]) -> list[str]:
    """The signals a per-tool rule may set, in catalogue order."""
    return [s.id for s in by_id.values() if s.per_tool in (PER_TOOL_THRESHOLD, PER_TOOL_OFF)]


def _check_ambiguity(rules: Mapping[str, Mapping[str, int]]) -> None:
    globs = [p for p in rules if _is_glob(p)]
    for i, a in enumerate(globs):
        for b in globs[i + 1:]:
            common = sorted(set(rules[a]) & set(rules[b]))
            if common and _literal_count(a) == _literal_count(b) and _overlap(a, b):
                raise ConfigError(
                    f"tools: {a!r} and {b!r} can match the same tool and are as specific as "
                    f"each other for {common[0]}: name the tool exactly or make one pattern "
                    "more specific")


class ToolRules:
    """A config's per-tool rules resolved against its thresholds: ``lookup(name)`` is the one
    place a tool's rule is decided (the precedence above). Shared by every engine of one
    configuration (a fleet's sessions)."""

    def __init__(self, rules: Mapping[str, Mapping[str, int]], exempt_tools: Iterable[str],
                 defaults: ToolRule, bits: Mapping[str, int]):
        merged: dict[str, dict[str, int]] = {p: dict(v) for p, v in rules.items()}
        for tool in exempt_tools:  # the old key: its signals off, unless the tool's own rule
            own = merged.setdefault(tool, {})  # sets them
            for signal_id in EXEMPT_SIGNALS:
                own.setdefault(signal_id, OFF)
        self.defaults = defaults
        self._bits = dict(bits)
        self._exact = {p: self._rule([v]) for p, v in merged.items() if not _is_glob(p)}
        # most specific first; equally specific globs that overlap set different signals
        self._globs = sorted(((p, v) for p, v in merged.items() if _is_glob(p)),
                             key=lambda pv: -_literal_count(pv[0]))
        self._exact_values = {p: v for p, v in merged.items() if not _is_glob(p)}
        self._cache: dict[str, ToolRule | None] = {}
        call_bits = 0
        for signal_id in CALL_SIGNALS:
            call_bits |= bits[signal_id]
        #: some rule changes how calls are judged (else the call path never looks a tool up)
        self.for_calls = any(
            bits[s] & call_bits for v in merged.values() for s in v)
        #: no glob: a name without an exact rule has none
        self.exact_only = not self._globs

    def _rule(self, layers: list[Mapping[str, int]]) -> ToolRule:
        """The rule of values taken per signal from the first layer that sets it."""
        values: dict[str, int] = {}
        for layer in layers:
            for signal_id, v in layer.items():
                values.setdefault(signal_id, v)
        off = 0
        for signal_id, v in values.items():
            if v == OFF:
                off |= self._bits[signal_id]
        fields = {f: values.get(s, getattr(self.defaults, f))
                  for s, f in THRESHOLD_FIELDS.items()}
        return ToolRule(off=off, **fields)

    @property
    def named(self) -> tuple[str, ...]:
        """The tools a rule names exactly (without globs, the only ones with a rule)."""
        return tuple(self._exact)

    def lookup(self, name: str) -> ToolRule | None:
        """The rule of tool ``name``'s calls and results; None when no rule names or matches
        it (the config's thresholds apply)."""
        if self.exact_only:
            return self._exact.get(name)
        try:
            return self._cache[name]
        except KeyError:
            pass
        layers: list[Mapping[str, int]] = []
        exact = self._exact_values.get(name)
        if exact is not None:
            layers.append(exact)
        layers += [v for p, v in self._globs if fnmatch.fnmatchcase(name, p)]
        rule = self._rule(layers) if layers else None
        if len(self._cache) < CACHE_LIMIT:
            self._cache[name] = rule
        return rule

    def __repr__(self) -> str:
        return f"ToolRules({sorted(self._exact)} + {[p for p, _ in self._globs]})"
