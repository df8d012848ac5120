"""The signal catalogue: the eight watchdog signals of SPEC §1, their knobs, and their texts.

Each signal has an id, a severity, a scope, default thresholds (every one configurable) and two
texts built only when it fires: a ``reason`` for the operator and ``guidance`` for the model. The
guidance never names operator controls, flags or the cost ceiling: the model reads it, and a
model told how to clear its own halt is a model invited to try.

Why each default is what it is (from ``seeds/context-management.md``):

- repeated-tool-call 5: the ``read_file`` loop of the seed; five identical calls are no sweep.
- alternating-tool-cycle 3 laps of 2..4 calls: two laps is ordinary read-grep exploration; three
  laps with identical arguments cannot be progress.
- dominant-tool-call 8 of 12: converges inside the first full window of an interleaved loop the
  repeat detector's run counter keeps resetting on.
- repeated-tool-name 15: a name is almost no evidence; 12 distinct reads are work, so 15 clears
  that with margin and still fires before a 20-call grind.
- tool-failure-streak 3: three failures with no success means nothing has been verified.
- no-op-streak 3: a no-op is the tool's own confession and needs no margin.
- no-new-state 6: between the no-op streak's 3 and the name run's 15; an identical payload is
  strong evidence with one confound (polling), hence warn and the ``wait_and_verify`` exemption.
- tools-without-text 12: the longest textless run in 64 recorded good sessions was 10.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from ._common import SHELL_TOOLS, EngineSettings, json_text, safe_repr
from .errors import ConfigError

__all__ = [
    "Alert",
    "SignalSpec",
    "SIGNALS",
    "SIGNAL_IDS",
    "WatchdogConfig",
    "quote_args",
    "truncate_utf8",
]

CRITICAL = "critical"
WARN = "warn"
SESSION = "session"
TURN = "turn"


#: The largest count knob either engine takes (the native counters are 32-bit; a threshold
#: of a million calls is already "never").
MAX_COUNT = 1_000_000


@dataclass(frozen=True)
class Knob:
    """One configurable number (or list) of a signal, and its range: the one place both
    engines read it from. An integer above ``maximum`` is a ConfigError naming the knob and
    its range; below ``minimum`` it counts as ``minimum`` when ``clamps`` (SPEC §1: "counts
    below 2 become 2") and is a ConfigError otherwise."""

    name: str
    default: Any
    doc: str
    minimum: int | None = None
    maximum: int | None = MAX_COUNT
    kind: type = int
    clamps: bool = True

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
        if value is None and self.default is None:
            return None
        if isinstance(value, float) and value.is_integer():
            value = int(value)
        if isinstance(value, bool) or not isinstance(value, int) \
                or (self.maximum is not None and value > self.maximum) \
                or (not self.clamps and self.minimum is not None and value < self.minimum):
            raise ConfigError(f"{owner}.{self.name} must be {self.range_text()}, not {value!r}")
        return value

    def effective(self, value: int) -> int:
        """A checked value with SPEC §1's clamp applied."""
        return max(self.minimum, value) if self.minimum is not None and self.clamps else value


@dataclass(frozen=True)
class SignalSpec:
    id: str
    index: int  # position in the SPEC §1 table: bit `index` of the engine's fired mask
    severity: str
    scope: str | None  # warn signals carry no scope (SPEC §10.12)
    summary: str
    knobs: tuple[Knob, ...]

    @property
    def bit(self) -> int:
        return 1 << self.index

    def knob(self, name: str) -> Knob:
        for k in self.knobs:
            if k.name == name:
                return k
        raise KeyError(name)


def _threshold(default: int, doc: str) -> Knob:
    return Knob("threshold", default, doc, minimum=2)


SIGNALS: tuple[SignalSpec, ...] = (
    SignalSpec(
        "repeated-tool-call", 0, CRITICAL, SESSION,
        "calls in a row with equivalent arguments",
        (_threshold(5, "calls in a row with equivalent args"),),
    ),
    SignalSpec(
        "alternating-tool-cycle", 1, CRITICAL, SESSION,
        "identical laps of a 2..max_period call block",
        (
            Knob("max_period", 4, "longest block, in calls", minimum=2, maximum=16),
            Knob("cycles", 3, "laps that make a cycle", minimum=2, maximum=32),
        ),
    ),
    SignalSpec(
        "dominant-tool-call", 2, CRITICAL, SESSION,
        "one canonical call is `threshold` of the last `window` calls",
        (
            Knob("window", 12, "calls in the sliding window", minimum=2, maximum=64),
            Knob("threshold", 8, "occurrences of one call in the window", minimum=2),
            Knob("defer_run", None, "stand down for a repeat run this long (default: the "
                 "repeat threshold; <= 0 disables)", minimum=0),
            Knob("defer_cycle_period", None, "stand down for a clean cycle up to this period "
                 "(default: the cycle max_period; < 2 disables)", minimum=0, maximum=16),
        ),
    ),
    SignalSpec(
        "repeated-tool-name", 3, WARN, None,
        "calls in a row with the same tool name, whatever the args",
        (_threshold(15, "calls in a row with one tool name"),
         Knob("shell_tools", SHELL_TOOLS, "shell tools: their identity is tool:program, the "
              "first word of the command (SPEC §11.2)", kind=tuple)),
    ),
    SignalSpec(
        "tool-failure-streak", 4, WARN, None,
        "results in a row that failed, no success between",
        (_threshold(3, "failed results in a row"),),
    ),
    SignalSpec(
        "no-op-streak", 5, CRITICAL, TURN,
        "results in a row that report no_op: true",
        (_threshold(3, "no-op results in a row"),),
    ),
    SignalSpec(
        "no-new-state", 6, WARN, None,
        "successful results in a row whose payload this turn already saw",
        (
            _threshold(6, "already-seen payloads in a row"),
            Knob("memory", 64, "distinct payload digests remembered per turn", minimum=1,
                 maximum=1024, clamps=False),
            Knob("exempt_tools", ("wait_and_verify",), "tools whose results never count",
                 maximum=None, kind=tuple),
        ),
    ),
    SignalSpec(
        "tools-without-text", 7, WARN, None,
        "calls in a row with no agent text between them",
        (_threshold(12, "calls in a row without agent text"),),
    ),
)

SIGNAL_IDS: tuple[str, ...] = tuple(s.id for s in SIGNALS)
BY_ID: dict[str, SignalSpec] = {s.id: s for s in SIGNALS}

#: The longest call history the native rings hold (cycle laps x period, density window).
MAX_HISTORY = 64


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
    """

    signals: Mapping[str, Mapping[str, Any]] = field(default_factory=dict)
    only: frozenset[str] | None = None

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

    @classmethod
    def from_mapping(cls, mapping: Mapping[str, Any]) -> WatchdogConfig:
        """Build from a config file's table: ``{"signals": {<id>: {<knob>: value}}}``."""
        unknown = set(mapping) - {"signals"}
        if unknown:
            raise ConfigError(f"unknown watchdog setting(s): {', '.join(sorted(unknown))}")
        signals = mapping.get("signals", {})
        if not isinstance(signals, Mapping):
            raise ConfigError("'signals' must be a table keyed by signal id")
        return cls(signals=signals)

    def restricted_to(self, ids: frozenset[str] | set[str]) -> WatchdogConfig:
        return WatchdogConfig(signals=self.signals, only=frozenset(ids))

    def value(self, signal_id: str, knob: str) -> Any:
        spec = BY_ID[signal_id]
        override = self.signals.get(signal_id, {})
        if knob in override:
            return override[knob]
        return spec.knob(knob).default

    def is_enabled(self, signal_id: str) -> bool:
        if self.only is not None and signal_id not in self.only:
            return False
        return self.signals.get(signal_id, {}).get("enabled", True)

    def engine_settings(self) -> EngineSettings:
        """Resolve defaults and clamp (SPEC §1: counts below 2 become 2; density threshold is
        clamped to [2, window]). Computed once per config: a fleet shares it across sessions."""
        cached = self.__dict__.get("_engine_settings")
        if cached is None:
            cached = self._engine_settings()
            object.__setattr__(self, "_engine_settings", cached)
        return cached

    def _engine_settings(self) -> EngineSettings:

        def count(signal_id: str, knob: str = "threshold") -> int:
            return BY_ID[signal_id].knob(knob).effective(self.value(signal_id, knob))

        repeat = count("repeated-tool-call")
        max_period = count("alternating-tool-cycle", "max_period")
        cycles = count("alternating-tool-cycle", "cycles")
        if max_period * cycles > MAX_HISTORY:
            raise ConfigError(
                f"alternating-tool-cycle max_period x cycles is at most {MAX_HISTORY}, "
                f"not {max_period} x {cycles}"
            )
        window = count("dominant-tool-call", "window")
        density = min(count("dominant-tool-call"), window)
        defer_run = self.value("dominant-tool-call", "defer_run")
        defer_period = self.value("dominant-tool-call", "defer_cycle_period")
        density_spec = BY_ID["dominant-tool-call"]
        if defer_run is not None:  # <= 0 is off either way; the clamp keeps it in range
            defer_run = density_spec.knob("defer_run").effective(defer_run)
        if defer_period is not None:
            defer_period = density_spec.knob("defer_cycle_period").effective(defer_period)
        enabled = 0
        for spec in SIGNALS:
            if self.is_enabled(spec.id):
                enabled |= spec.bit
        return EngineSettings(
            enabled=enabled,
            repeat_threshold=repeat,
            cycle_max_period=max_period,
            cycle_cycles=cycles,
            density_window=window,
            density_threshold=density,
            density_defer_run=repeat if defer_run is None else defer_run,
            density_defer_cycle_period=max_period if defer_period is None else defer_period,
            name_threshold=count("repeated-tool-name"),
            failure_threshold=count("tool-failure-streak"),
            no_op_threshold=count("no-op-streak"),
            no_new_state_threshold=count("no-new-state"),
            silence_threshold=count("tools-without-text"),
            digest_memory=self.value("no-new-state", "memory"),
            exempt_tools=frozenset(self.value("no-new-state", "exempt_tools")),
            shell_tools=frozenset(self.value("repeated-tool-name", "shell_tools")),
        )


def _spec(signal_id: str) -> SignalSpec:
    try:
        return BY_ID[signal_id]
    except KeyError:
        raise ConfigError(
            f"unknown signal {signal_id!r} (known: {', '.join(SIGNAL_IDS)})"
        ) from None


# --------------------------------------------------------------------------------------------
# Alerts and their texts
# --------------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Alert:
    """One signal tripping at one event.

    ``event`` is the 0-based index of the observation that made it trip (every ``observe_*``,
    ``end_turn`` and ``reset`` call counts one). ``tool`` and ``count`` are the facts the texts
    state: the tool involved and the count at trip time.
    """

    signal: str
    severity: str
    scope: str | None
    reason: str
    guidance: str
    event: int
    tool: str | None = None
    count: int = 0

    @property
    def critical(self) -> bool:
        return self.severity == CRITICAL

    @property
    def model_text(self) -> str:
        """What the model is shown: the guidance, or the reason for a signal without one."""
        return self.guidance or self.reason

    def to_dict(self) -> dict[str, Any]:
        return {
            "signal": self.signal,
            "severity": self.severity,
            "scope": self.scope,
            "reason": self.reason,
            "guidance": self.guidance,
            "event": self.event,
        }


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


def tool_label(name: str) -> str:
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
    return truncate_utf8(error.encode("utf-8", "backslashreplace"))
