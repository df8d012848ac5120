"""Host-defined signals: a small protocol beside the built-in detectors.

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

They are given as factories — a callable returning a fresh signal, one per session, since a
signal holds session state — in ``GuardrailsConfig(custom_signals=[...])`` or by entry point in a
config file: ``[signals] custom = ["pkg.module:factory"]``. This module holds the protocol, the
checks of a signal and the entry points; the engine runs them (``engine/custom.py``)."""

from __future__ import annotations

import importlib
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any, Protocol, runtime_checkable

from ..errors import ConfigError
from . import CRITICAL, SESSION, SIGNAL_IDS, TURN, WARN

__all__ = ["CustomSignal", "Signal", "SignalAlert", "SignalFactory", "HOOKS", "signal_hook",
           "checked_signal", "signal_instances", "signal_ids", "load_factory",
           "factories_from_config"]


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


HOOKS = ("on_call", "on_result", "on_text", "on_turn_boundary", "reset")


def signal_hook(signal: Any, name: str) -> Callable[..., Any] | None:
    method = getattr(signal, name, None)
    if method is None:
        return None
    if not callable(method):
        raise ConfigError(f"custom signal {signal.id!r}: {name} must be a method")
    base = getattr(CustomSignal, name)
    if getattr(method, "__func__", None) is base:
        return None  # the base class's no-op: not worth a call
    return method  # type: ignore[no-any-return]


def checked_signal(signal: Any, seen: set[str]) -> tuple[str, str, str | None]:
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


def signal_instances(factories: Iterable[Any]) -> list[Any]:
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
    return tuple(checked_signal(s, seen)[0] for s in signal_instances(factories))


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
