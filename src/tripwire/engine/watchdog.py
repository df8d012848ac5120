"""``Watchdog``: one session's ten signals, turning the engine's fired codes into ``Alert``s.

The engine (native or reference, see ``_engine``) counts and compares; it calls back into
``Watchdog._fired`` only when a signal trips, which is rare, so the texts (each signal module's
``texts``) cost nothing on the common path. Every observation returns a tuple of alerts, ``()``
when nothing fired.

``Watchdog(...)`` returns an instance of one of two static classes, ``NativeWatchdog`` (the C++
core) or ``PythonWatchdog`` (the reference); both are ``Watchdog``s, and ``Watchdog`` declares
the API they share so type checkers see it.
"""

from __future__ import annotations

import threading
from typing import TYPE_CHECKING, Any

from ..errors import InvalidEvent
from ..signals import SIGNALS, Alert, WatchdogConfig
from . import select as _engine

if TYPE_CHECKING:
    from . import reference as _reference

__all__ = [  # noqa: F822 (IMPLEMENTATION, PythonWatchdog: module __getattr__)
    "Watchdog", "NativeWatchdog", "PythonWatchdog", "IMPLEMENTATION", "watchdog_class"]


def __getattr__(name: str) -> Any:
    if name == "IMPLEMENTATION":  # the default implementation, chosen on first use
        return _engine.default()
    if name == "PythonWatchdog":
        return _python_watchdog()
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")



# Type checkers see the engine API on Watchdog itself (the reference engine's, which is typed);
# at run time each concrete class below takes it from its own engine.
if TYPE_CHECKING:
    _EngineAPI = _reference.Engine
else:
    _EngineAPI = object


class Watchdog(_EngineAPI):
    """One session's watchdog. ``Watchdog()`` runs the ten signals (SPEC §1's eight, §7.3's
    repeated-failure and §12.4's recycled-calls) with their defaults.

    ``Watchdog(config, implementation="python")`` picks an engine explicitly; by default it is
    ``TRIPWIRE_IMPLEMENTATION``'s. The instance is a ``NativeWatchdog`` or a ``PythonWatchdog``.

    Every observation returns a tuple of ``Alert`` (empty when nothing fired). Not thread-safe
    on its own: ``Guardrails`` serializes access per session.
    """

    config: WatchdogConfig
    __slots__ = ()  # the native class then has no per-instance __dict__ (a fleet has many)

    def __new__(cls, config: WatchdogConfig | None = None, *,
                implementation: str | None = None) -> Watchdog:
        target = watchdog_class(implementation) if cls is Watchdog else cls
        # the engine's constructor along the concrete class's MRO (native: the C type's tp_new)
        instance: Watchdog = super(Watchdog, target).__new__(target)
        return instance

    def __init__(
        self, config: WatchdogConfig | None = None, *, implementation: str | None = None
    ):
        config = config if config is not None else WatchdogConfig()
        self._engine_init(config.engine_settings(), config)

    def __repr__(self) -> str:
        return f"<Watchdog {self.implementation} events={self.events}>"

    def retract_calls(self, calls: int) -> None:
        """The last ``calls`` calls observed were refused by the host's permission gate and the
        turn ended: take them off the call-pattern state, so the next turn's first identical
        call is not counted as the next one in a row.

        Rewound: the repeat run, the name run and the run of calls without text lose those
        calls (a run made only of them is forgotten, and re-armed); they leave the call history
        that the cycle and density detectors read. Untouched: every alert already raised (a
        halt stays until an operator reset; a detector that reported a pattern still partly
        standing does not report it again), the result detectors (a refusal the host reported
        as a failed result stays a failure), the turn (the host ends it), the event index.
        """
        self._retract_calls(retracted_count(calls))

    def signal_ids(self, mask: int) -> list[str]:
        """The ids of the signals whose bits are set in ``mask``, in catalogue order."""
        return [spec.id for spec in SIGNALS if mask & spec.bit]

    def _fired(self, mask: int, name: str, detail: Any) -> tuple[Alert, ...]:
        event = self.events - 1
        alerts = []
        for spec in SIGNALS:
            if mask & spec.bit:
                reason, guidance, count = spec.texts(self, name, detail)
                severity, scope = spec.graded(self.config)
                alerts.append(
                    Alert(spec.id, severity, scope, reason, guidance, event, name, count)
                )
        return tuple(alerts)


if TYPE_CHECKING:
    class PythonWatchdog(Watchdog, _reference.Engine):
        """A ``Watchdog`` on the pure-Python reference engine."""

        __slots__ = ()

_PYTHON_LOCK = threading.Lock()


def _python_watchdog() -> type[Watchdog]:
    """``PythonWatchdog``, made at its first use (the module's ``__getattr__``): a process on
    the native engine (a hook event) never imports the reference engine."""
    with _PYTHON_LOCK:
        made: type[Watchdog] | None = globals().get("PythonWatchdog")
        if made is None:
            from .reference import Engine

            class PythonWatchdog(Watchdog, Engine):
                """A ``Watchdog`` on the pure-Python reference engine."""

                __slots__ = ()

            PythonWatchdog.__qualname__ = "PythonWatchdog"  # pickled by its module's name
            globals()["PythonWatchdog"] = made = PythonWatchdog
        return made


try:
    from .._native import Engine as _NativeEngine
except ImportError:  # not built: _engine.load("native") raises the clear error when asked for
    _NativeEngine = None  # type: ignore[assignment,misc]

if _NativeEngine is not None:

    class NativeWatchdog(Watchdog, _NativeEngine):
        """A ``Watchdog`` on the C++ core."""

        __slots__ = ()


def retracted_count(calls: Any) -> int:
    """``retract_calls``'s argument checked: a count of calls, an int >= 0."""
    if isinstance(calls, bool) or not isinstance(calls, int) or calls < 0:
        raise InvalidEvent(f"retract_calls takes a count of calls (an int >= 0), not {calls!r}")
    return int(calls)


def watchdog_class(implementation: str | None = None) -> type[Watchdog]:
    """The concrete ``Watchdog`` class of an implementation ("native" or "python")."""
    return _engine.concrete(implementation, _python_watchdog, lambda: NativeWatchdog)
