"""The engine side of host-defined signals (the protocol: ``signals/custom.py``).

A hook that raises or returns nonsense never reaches the agent loop: the observation goes on
without it, and its first fault is logged at ERROR. Custom signals run after the built-in
detectors, on the same event (the alert's ``event`` index is that event's).

Cost. With none configured nothing here runs: ``Guardrails`` builds the plain engine class, and
the per-call path is the one without custom signals (not even a branch). With some configured,
the session's watchdog is a subclass of its engine's class whose observations call the built-in
detectors first, then each signal's hook (only the hooks a signal defines); batch ingest hands
such a session's rows to the per-event API.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

from ..base.log import LOGGER
from ..signals import Alert, WatchdogConfig
from ..signals.custom import SignalAlert, checked_signal, signal_hook, signal_instances
from .watchdog import Watchdog, watchdog_class

__all__ = ["custom_watchdog"]


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
            meta = checked_signal(signal, seen)
            for name, into in (("on_call", self.calls), ("on_result", self.results),
                               ("on_text", self.texts)):
                hook = signal_hook(signal, name)
                if hook is not None:
                    into.append((meta, hook))
            for name, hooks in (("on_turn_boundary", self.boundary), ("reset", self.resets)):
                hook = signal_hook(signal, name)
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
                       payload: Any = None, unknown_tool: bool = False) -> tuple[Alert, ...]:
        alerts: tuple[Alert, ...] = super().observe_result(  # type: ignore[misc]
            name, error=error, no_op=no_op, payload=payload, unknown_tool=unknown_tool)
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
    custom = _Custom(signal_instances(factories))
    watchdog: Watchdog = cls(config)
    watchdog._custom = custom  # type: ignore[attr-defined]
    return watchdog
