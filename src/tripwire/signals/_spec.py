"""What every signal module is made of: ``Knob``, ``SignalSpec``, ``Alert`` and the text helpers.

A signal module (one per signal, in this package) holds its ``SPEC`` — id, severity, scope,
knobs with the why of each default, its texts and its policy properties — and its reference
detector. The catalogue (``signals/__init__.py``) lists the modules once; that order is the bit
order of the engines' fired masks.

The guidance texts never name operator controls, flags or the cost ceiling: the model reads
them, and a model told how to clear its own halt is a model invited to try.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any

from ..base.alert import CRITICAL, SESSION, TURN, WARN, Alert
from ..base.inputs import json_text, safe_repr
from ..errors import ConfigError

if TYPE_CHECKING:
    from .view import EngineView

__all__ = [
    "CRITICAL", "WARN", "SESSION", "TURN", "MAX_COUNT", "Knob", "SignalSpec", "Alert", "Texts",
    "Resolve", "StreakDetector", "quote_args", "truncate_utf8", "tool_label", "tool_list",
    "error_text",
]


#: (watchdog, tool name, the call's args or the result's error) -> (reason, guidance, count)
Texts = Callable[["EngineView", str, Any], tuple[str, str, int]]
#: (this signal's knob value by name, the settings resolved so far) -> its EngineSettings fields
Resolve = Callable[[Callable[[str], Any], Mapping[str, Any]], dict[str, Any]]


#: The largest count knob either engine takes (the native counters are 32-bit; a threshold
#: of a million calls is already "never").
MAX_COUNT = 1_000_000


@dataclass(frozen=True)
class Knob:
    """One configurable number (or list) of a signal, and its range: the one place both
    engines read it from; ``why`` says where the default comes from. An integer above
    ``maximum`` is a ConfigError naming the knob and its range; below ``minimum`` it counts as
    ``minimum`` when ``clamps`` (SPEC §1: "counts below 2 become 2") and is a ConfigError
    otherwise."""

    name: str
    default: Any
    doc: str
    minimum: int | None = None
    maximum: int | None = MAX_COUNT
    kind: type = int
    why: str = ""
    clamps: bool = True
    #: a ``kind=str`` knob: the values it takes (case- and space-insensitive)
    choices: tuple[str, ...] = ()

    def range_text(self) -> str:
        if not self.clamps:
            return f"an integer in [{self.minimum}, {self.maximum}]"
        below = f" (values below {self.minimum} count as {self.minimum})" if self.minimum else ""
        return f"an integer at most {self.maximum}{below}"

    def checked(self, owner: str, value: Any) -> Any:
        """The value as the engines will use it, or a ConfigError naming knob and range."""
        if self.kind is tuple:
            if isinstance(value, str) or not isinstance(value, (list, tuple, set, frozenset)) \
                    or not all(isinstance(v, str) for v in value):
                raise ConfigError(f"{owner}.{self.name} must be a list of tool names, "
                                  f"not {value!r}")
            return tuple(value)
        if self.kind is str:
            if isinstance(value, str) and value.strip().lower() in self.choices:
                return value.strip().lower()
            raise ConfigError(f"{owner}.{self.name} must be one of "
                              f"{', '.join(self.choices)}, not {value!r}")
        if value is None and self.default is None:
            return None
        if isinstance(value, float) and value.is_integer():
            value = int(value)
        if isinstance(value, bool) or not isinstance(value, int) \
                or (self.maximum is not None and value > self.maximum) \
                or (not self.clamps and self.minimum is not None and value < self.minimum):
            raise ConfigError(f"{owner}.{self.name} must be {self.range_text()}, not {value!r}")
        return value

    def effective(self, value: Any) -> Any:
        """A checked value with SPEC §1's clamp applied (lists, choices and an unset None
        pass)."""
        if self.kind is not int or value is None or self.minimum is None or not self.clamps:
            return value
        return max(self.minimum, value)


@dataclass(frozen=True)
class SignalSpec:
    """One signal of SPEC §1. ``index`` is its place in the catalogue, set there (bit ``index``
    of the engines' fired masks); a module's own ``SPEC`` has none yet."""

    id: str
    severity: str
    scope: str | None  # warn signals carry no scope (SPEC §10.12)
    summary: str
    knobs: tuple[Knob, ...]
    texts: Texts = field(compare=False, repr=False)
    resolve: Resolve = field(compare=False, repr=False)
    #: the model's own words answer it: a queued note is withdrawn once the agent speaks
    withdrawn_by_words: bool = False
    #: what a per-tool rule (``[tools.<name>]``, ``signals/tool_rules.py``) may set for calls
    #: of one tool: ``PER_TOOL_THRESHOLD`` (a threshold or "off"), ``PER_TOOL_OFF`` ("off"
    #: only: the signal has no per-call threshold), or ``""`` (no per-tool rule)
    per_tool: str = ""
    index: int = -1

    @property
    def bit(self) -> int:
        return 1 << self.index

    @property
    def critical(self) -> bool:
        return self.severity == CRITICAL

    def graded(self, config: Any) -> tuple[str, str | None]:
        """(severity, scope) of its alerts under a ``WatchdogConfig``: a warn signal with a
        ``severity`` knob set to critical alerts as a turn-scoped critical (it cuts the turn
        under enforce, and escalates like any turn-scoped cut)."""
        if self.severity == WARN and any(k.name == "severity" for k in self.knobs) \
                and config.value(self.id, "severity") == CRITICAL:
            return CRITICAL, TURN
        return self.severity, self.scope

    def knob(self, name: str) -> Knob:
        for k in self.knobs:
            if k.name == name:
                return k
        raise KeyError(name)

    def placed(self, index: int) -> SignalSpec:
        return replace(self, index=index)


def threshold(default: int, doc: str, why: str) -> Knob:
    """A signal's ``threshold`` knob: a count, clamped to at least 2."""
    return Knob("threshold", default, doc, minimum=2, why=why)


def threshold_setting(field: str) -> Resolve:
    """The ``resolve`` of a signal whose one setting is its threshold (clamped by its knob)."""

    def resolve(value: Callable[[str], Any], resolved: Mapping[str, Any]) -> dict[str, Any]:
        return {field: value("threshold")}

    return resolve


# --------------------------------------------------------------------------------------------
# Alerts and their texts
# --------------------------------------------------------------------------------------------


#: Quoted args are cut to this many bytes (SPEC §1).
QUOTE_LIMIT = 200


def truncate_utf8(data: bytes, limit: int = QUOTE_LIMIT) -> str:
    """Keep the head and tail around an ellipsis, cutting only on UTF-8 character boundaries
    (SPEC §1 Decision: the reference cuts mid-character)."""
    if len(data) <= limit:
        return data.decode("utf-8", "backslashreplace")
    keep = (limit - 3) // 2
    head = keep
    while head > 0 and (data[head] & 0xC0) == 0x80:
        head -= 1
    tail = len(data) - keep
    while tail < len(data) and (data[tail] & 0xC0) == 0x80:
        tail += 1
    return (
        data[:head].decode("utf-8", "backslashreplace")
        + "\u2026"
        + data[tail:].decode("utf-8", "backslashreplace")
    )


def quote_args(args: Any) -> str:
    """The args as the caller wrote them (not canonicalized), truncated for quoting."""
    if isinstance(args, str):
        data = args.encode("utf-8", "surrogatepass")
    elif isinstance(args, (bytes, bytearray, memoryview)):
        data = bytes(args)
    elif args is None:
        data = b""
    else:
        data = json_text(args).encode("utf-8", "surrogatepass")
    return truncate_utf8(data)


def tool_label(name: str | None) -> str:
    return name if name else "unnamed tool"


def tool_list(names: list[str]) -> str:
    """Distinct names in first-seen order (a name repeated three times is named once)."""
    distinct = list(dict.fromkeys(tool_label(n) for n in names))
    return ", ".join(distinct) if distinct else "unknown tools"


def error_text(error: Any) -> str:
    if error is True:
        return "(the tool gave no error text)"
    if isinstance(error, (bytes, bytearray)):
        error = bytes(error).decode("utf-8", "backslashreplace")
    elif not isinstance(error, str):
        try:
            error = json.dumps(error, ensure_ascii=False, default=safe_repr)
        except (TypeError, ValueError, RecursionError):  # deeper than json.dumps recurses
            error = json_text(error)
    text: str = error
    return truncate_utf8(text.encode("utf-8", "backslashreplace"))


# --------------------------------------------------------------------------------------------
# The call ring's flags (native: native/call_history.h CallFlag): per call, whether it joined
# the previous call's repeat run, and the ring-reading signals its tool's per-tool rule turns
# off (issue 39; zero for a tool without a rule)
# --------------------------------------------------------------------------------------------

JOINED = 1
CYCLE_OFF = 2  # alternating-tool-cycle: a cycle with this call in its block is not reported
DENSITY_OFF = 4  # dominant-tool-call: this call's key is never reported as dominant
SILENCE_OFF = 8  # tools-without-text: this call is not counted in the streak


def one_run(flags: Sequence[int], n: int) -> bool:
    """Whether the last ``n`` calls of the ring (``flags``, oldest first) form one repeat run:
    each joined its predecessor (native: ``CallHistory::one_run``)."""
    size = len(flags)
    return all(flags[size - j] & JOINED for j in range(1, n))


# --------------------------------------------------------------------------------------------
# The detector three result signals share (native: native/streak.h)
# --------------------------------------------------------------------------------------------


class StreakDetector:
    """A run of results with one property; one alert per run, re-armed when the run resets."""

    def __init__(self, threshold: int):
        self.threshold = threshold
        self.reset()

    def reset(self) -> None:
        self.run = 0
        self.tripped = False

    def extend(self) -> bool:
        self.run += 1
        if self.run >= self.threshold and not self.tripped:
            self.tripped = True
            return True
        return False
