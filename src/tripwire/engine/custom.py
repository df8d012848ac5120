"""Host-defined signals: a small protocol beside the eight built-in detectors.

A custom signal observes what the built-ins observe — calls, results, the agent's text, turn
boundaries, resets — and answers with a ``SignalAlert(reason, guidance=None)`` when it trips, or
``None``. Its ``id``, ``severity`` (``warn`` or ``critical``) and ``scope`` (``session`` or
``turn``, for a critical one) place it under the same policy as the built-ins: the mode decides
whether the alert is reported, fed back to the model or enforced; a critical one cuts the turn
or halts the session by its scope; three turns in a row cut by it escalate to a halt; a reset
clears its state. ``guidance`` is the model's text under feedback and falls back to ``reason``,
so a signal that sets none is never silently inert.

    class SlowDown(CustomSignal):
        id = "too-many-greps"
        def __init__(self): self.n = 0
        def on_call(self, name, args):
            self.n = self.n + 1 if name == "grep" else 0
            return SignalAlert(f"{self.n} greps in a row") if self.n == 10 else None
        def reset(self): self.n = 0

A hook that raises or returns nonsense never reaches the agent loop: the observation goes on
without it, and its first fault is logged at ERROR. Custom signals run after the built-in
detectors, on the same event (the alert's ``event`` index
is that event's). They are given as factories — a callable returning a fresh signal, one per
session, since a signal holds session state — in ``GuardrailsConfig(custom_signals=[...])`` or
by entry point in a config file: ``[signals] custom = ["pkg.module:factory"]``.

Cost. With none configured nothing here runs: ``Guardrails`` builds the plain engine class, and
the per-call path is the one without custom signals (not even a branch). With some configured,
the session's watchdog is a subclass of its engine's class whose observations call the built-in
detectors first, then each signal's hook (only the hooks a signal defines); batch ingest hands
such a session's rows to the per-event API.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any, Protocol, runtime_checkable

from ..base.log import LOGGER
from ..errors import ConfigError
from ..signals import CRITICAL, SESSION, SIGNAL_IDS, TURN, WARN, Alert, WatchdogConfig
from .watchdog import Watchdog, watchdog_class

__all__ = [
    "CustomSignal",
    "Signal",
    "SignalAlert",
    "SignalFactory",
    "custom_watchdog",
    "factories_from_config",
    "load_factory",
    "signal_ids",
]


@dataclass(frozen=True, slots=True)
class SignalAlert:
    """What a custom signal returns when it trips. ``guidance`` (for the model) falls back to
    ``reason`` (for the operator); ``tool`` and ``count`` are facts for the alert record."""

    reason: str
    guidance: str | None = None
    tool: str | None = None
    count: int = 0


@runtime_checkable
class Signal(Protocol):
    """The protocol: ``id``, ``severity``, ``scope``, and any of the hooks of ``CustomSignal``."""

    id: str
    severity: str
    scope: str


class CustomSignal:
    """A convenient base: every hook is a no-op, so a signal defines only the ones it needs.
    Hooks a subclass does not override are never called."""

    id: str = ""
    severity: str = WARN
    scope: str = SESSION

    def on_call(self, name: str, args: Any) -> SignalAlert | None:
        return None

    def on_result(self, name: str, error: Any, no_op: bool, payload: Any) -> SignalAlert | None:
        return None

    def on_text(self, text: str) -> SignalAlert | None:
        return None

    def on_turn_boundary(self) -> None:
        """A turn boundary (SPEC §10.5's): turn-scoped state resets here."""

    def reset(self) -> None:
        """An operator reset of the watchdog: clear every run."""


#: A factory of signals: called once per session.
SignalFactory = Callable[[], Any]

_HOOKS = ("on_call", "on_result", "on_text", "on_turn_boundary", "reset")


def _hook(signal: Any, name: str) -> Callable[..., Any] | None:
    method = getattr(signal, name, None)
    if method is None:
        return None
    if not callable(method):
        raise ConfigError(f"custom signal {signal.id!r}: {name} must be a method")
    base = getattr(CustomSignal, name)
    if getattr(method, "__func__", None) is base:
        return None  # the base class's no-op: not worth a call
    return method  # type: ignore[no-any-return]


def _check(signal: Any, seen: set[str]) -> tuple[str, str, str | None]:
    sid = getattr(signal, "id", None)
    if not isinstance(sid, str) or not sid.strip():
        raise ConfigError(f"a custom signal needs a non-empty str id, not {sid!r} "
                          f"(from {type(signal).__name__})")
    if sid in SIGNAL_IDS:
        raise ConfigError(f"custom signal id {sid!r} is a built-in signal's")
    if sid in seen:
        raise ConfigError(f"custom signal id {sid!r} is configured twice")
    seen.add(sid)
    severity = getattr(signal, "severity", WARN)
    if severity not in (CRITICAL, WARN):
        raise ConfigError(f"custom signal {sid!r}: severity must be {CRITICAL!r} or {WARN!r}, "
                          f"not {severity!r}")
    scope = getattr(signal, "scope", SESSION)
    if scope not in (SESSION, TURN):
        raise ConfigError(f"custom signal {sid!r}: scope must be {SESSION!r} or {TURN!r}, "
                          f"not {scope!r}")
    return sid, severity, (scope if severity == CRITICAL else None)  # warn: scope null


def _instances(factories: Iterable[Any]) -> list[Any]:
    out = []
    for factory in factories:
        if isinstance(factory, str):
            factory = load_factory(factory)
        if not callable(factory):
            raise ConfigError(f"a custom signal factory must be callable, not {factory!r}")
        try:
            out.append(factory())
        except ConfigError:
            raise
        except Exception as exc:
            raise ConfigError(f"custom signal factory {factory!r} raised "
                              f"{type(exc).__name__}: {exc}") from None
    return out


def signal_ids(factories: Iterable[Any]) -> tuple[str, ...]:
    """The ids of the signals these factories make (each factory called once, checked)."""
    seen: set[str] = set()
    return tuple(_check(s, seen)[0] for s in _instances(factories))


def load_factory(spec: str) -> SignalFactory:
    """``"pkg.module:factory"`` -> the factory (an attribute path after the colon)."""
    module_name, sep, attr = spec.partition(":")
    if not sep or not module_name or not attr:
        raise ConfigError(f"custom signal {spec!r}: expected 'package.module:factory'")
    try:
        target: Any = importlib.import_module(module_name)
    except ImportError as exc:
        raise ConfigError(f"custom signal {spec!r}: cannot import {module_name} ({exc})") from None
    for part in attr.split("."):
        try:
            target = getattr(target, part)
        except AttributeError:
            raise ConfigError(f"custom signal {spec!r}: {module_name} has no {attr}") from None
    if not callable(target):
        raise ConfigError(f"custom signal {spec!r} is not callable")
    return target  # type: ignore[no-any-return]


def factories_from_config(file: Mapping[str, Any]) -> tuple[SignalFactory, ...]:
    """The factories a config file names in ``[signals] custom`` (imported now, so a typo is
    a ConfigError at startup)."""
    section = file.get("signals", {})
    if not isinstance(section, Mapping) or "custom" not in section:
        return ()
    specs = section["custom"]
    if isinstance(specs, str):
        specs = [specs]
    if not isinstance(specs, list) or not all(isinstance(s, str) for s in specs):
        raise ConfigError("[signals] custom must be a list of 'package.module:factory' strings")
    return tuple(load_factory(s) for s in specs)


class _Custom:
    """The hooks of one session's custom signals, by observation kind."""

    __slots__ = ("boundary", "calls", "faults", "resets", "results", "texts")

    def __init__(self, signals: list[Any]):
        seen: set[str] = set()
        self.calls: list[tuple[tuple[str, str, str | None], Callable[..., Any]]] = []
        self.results: list[tuple[tuple[str, str, str | None], Callable[..., Any]]] = []
        self.texts: list[tuple[tuple[str, str, str | None], Callable[..., Any]]] = []
        self.boundary: list[tuple[str, Callable[[], Any]]] = []
        self.resets: list[tuple[str, Callable[[], Any]]] = []
        self.faults: dict[str, int] = {}  # signal id -> hook faults (see _broken)
        for signal in signals:
            meta = _check(signal, seen)
            for name, into in (("on_call", self.calls), ("on_result", self.results),
                               ("on_text", self.texts)):
                hook = _hook(signal, name)
                if hook is not None:
                    into.append((meta, hook))
            for name, hooks in (("on_turn_boundary", self.boundary), ("reset", self.resets)):
                hook = _hook(signal, name)
                if hook is not None:
                    hooks.append((meta[0], hook))


def _broken(custom: _Custom, sid: str, what: str, exc: BaseException | None) -> None:
    """A signal's hook raised or returned nonsense: the agent loop never sees it. The first
    fault of each signal is logged at ERROR (with its traceback); later ones are counted."""
    custom.faults[sid] = custom.faults.get(sid, 0) + 1
    if custom.faults[sid] == 1:
        LOGGER.error(f"custom signal {sid!r} {what}; the observation goes on without it "
                     "(later faults of this signal are counted, not logged)",
                     exc_info=exc if exc is not None else None)


def _alerts(custom: _Custom, hooks: list[tuple[tuple[str, str, str | None], Callable[..., Any]]],
            event: int, args: tuple[Any, ...]) -> list[Alert]:
    out = []
    for (sid, severity, scope), hook in hooks:
        try:
            got = hook(*args)
        except Exception as exc:
            _broken(custom, sid, f"raised {type(exc).__name__}: {exc}", exc)
            continue
        if got is None:
            continue
        if isinstance(got, str):
            got = SignalAlert(got)
        if not isinstance(got, SignalAlert) or not isinstance(got.reason, str) \
                or not got.reason.strip():
            _broken(custom, sid, f"returned {got!r}, not None, a reason or a SignalAlert with "
                                 "a non-empty reason", None)
            continue
        out.append(Alert(sid, severity, scope, got.reason, got.guidance or got.reason, event,
                         got.tool, got.count))
    return out


def _run(custom: _Custom, hooks: list[tuple[str, Callable[[], Any]]]) -> None:
    for sid, hook in hooks:
        try:
            hook()
        except Exception as exc:
            _broken(custom, sid, f"raised {type(exc).__name__}: {exc}", exc)


class _CustomSignals:
    """Mixed in before an engine's ``Watchdog`` class: the built-ins observe, then the custom
    signals; their alerts follow the built-ins' in one tuple."""

    __slots__ = ()
    _custom: _Custom

    def observe_call(self, name: str, args: Any = None) -> tuple[Alert, ...]:
        alerts: tuple[Alert, ...] = super().observe_call(name, args)  # type: ignore[misc]
        hooks = self._custom.calls
        if not hooks:
            return alerts
        extra = _alerts(self._custom, hooks, self.events - 1,  # type: ignore[attr-defined]
                        (name, args))
        return alerts + tuple(extra) if extra else alerts

    def observe_result(self, name: str = "", error: Any = None, no_op: bool = False,
                       payload: Any = None) -> tuple[Alert, ...]:
        alerts: tuple[Alert, ...] = super().observe_result(  # type: ignore[misc]
            name, error=error, no_op=no_op, payload=payload)
        hooks = self._custom.results
        if not hooks:
            return alerts
        extra = _alerts(self._custom, hooks, self.events - 1,  # type: ignore[attr-defined]
                        (name, error, no_op, payload))
        return alerts + tuple(extra) if extra else alerts

    def observe_text(self, text: Any) -> tuple[Alert, ...]:
        alerts: tuple[Alert, ...] = super().observe_text(text)  # type: ignore[misc]
        hooks = self._custom.texts
        if not hooks:
            return alerts
        extra = _alerts(self._custom, hooks, self.events - 1,  # type: ignore[attr-defined]
                        (text,))
        return alerts + tuple(extra) if extra else alerts

    def turn_boundary(self) -> None:
        super().turn_boundary()  # type: ignore[misc]
        if self._custom.boundary:
            _run(self._custom, self._custom.boundary)

    # end_turn() is the engine's: it calls self.turn_boundary(), which is the override above

    def reset(self) -> tuple[Alert, ...]:
        alerts: tuple[Alert, ...] = super().reset()  # type: ignore[misc]
        if self._custom.resets:
            _run(self._custom, self._custom.resets)
        return alerts


_CLASSES: dict[type, type] = {}


def custom_watchdog(config: WatchdogConfig, factories: Iterable[Any], *,
                    implementation: str | None = None) -> Watchdog:
    """A session's watchdog running the built-ins of ``config``, then fresh signals from
    ``factories``."""
    base = watchdog_class(implementation)
    cls = _CLASSES.get(base)
    if cls is None:
        cls = _CLASSES[base] = type(f"Custom{base.__name__}", (_CustomSignals, base),
                                    {"__slots__": ("_custom",)})
    custom = _Custom(_instances(factories))
    watchdog: Watchdog = cls(config)
    watchdog._custom = custom  # type: ignore[attr-defined]
    return watchdog
