"""``Watchdog``: one session's eight signals, turning the engine's fired codes into ``Alert``s.

The engine (native or reference, see ``_engine``) counts and compares; it calls back into
``Watchdog._fired`` only when a signal trips, which is rare, so the texts (each signal module's
``texts``) cost nothing on the common path. Every observation returns a tuple of alerts, ``()``
when nothing fired.

``Watchdog(...)`` returns an instance of one of two static classes, ``NativeWatchdog`` (the C++
core) or ``PythonWatchdog`` (the reference); both are ``Watchdog``s, and ``Watchdog`` declares
the API they share so type checkers see it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from . import _engine, _reference
from ._common import EngineSettings
from .signals import SIGNALS, Alert, WatchdogConfig

__all__ = ["Watchdog", "NativeWatchdog", "PythonWatchdog", "IMPLEMENTATION", "watchdog_class"]

#: The default implementation ("native" or "python"), from TRIPWIRE_IMPLEMENTATION.
IMPLEMENTATION = _engine.DEFAULT


class Watchdog:
    """One session's watchdog. ``Watchdog()`` runs SPEC §1's eight signals with their defaults.

    ``Watchdog(config, implementation="python")`` picks an engine explicitly; by default it is
    ``TRIPWIRE_IMPLEMENTATION``'s. The instance is a ``NativeWatchdog`` or a ``PythonWatchdog``.

    Every observation returns a tuple of ``Alert`` (empty when nothing fired). Not thread-safe
    on its own: ``Guardrails`` serializes access per session.
    """

    implementation: str
    config: WatchdogConfig
    settings: EngineSettings
    events: int
    last_used: float
    if TYPE_CHECKING:  # the engine classes hold these (the native one in C slots)
        __slots__ = ("config", "events", "last_used", "settings")
    else:  # the native class then has no per-instance __dict__ (a fleet has many)
        __slots__ = ()

    def __new__(cls, config: WatchdogConfig | None = None, *,
                implementation: str | None = None) -> Watchdog:
        target = watchdog_class(implementation) if cls is Watchdog else cls
        # the engine's constructor along the concrete class's MRO (native: the C type's tp_new)
        instance: Watchdog = super(Watchdog, target).__new__(target)
        return instance

    def __init__(
        self, config: WatchdogConfig | None = None, *, implementation: str | None = None
    ):
        self.config = config if config is not None else WatchdogConfig()
        self._engine_init(self.config.engine_settings())

    def __repr__(self) -> str:
        return f"<Watchdog {self.implementation} events={self.events}>"

    def _fired(self, mask: int, name: str, detail: Any) -> tuple[Alert, ...]:
        event = self.events - 1
        alerts = []
        for spec in SIGNALS:
            if mask & spec.bit:
                reason, guidance, count = spec.texts(self, name, detail)
                alerts.append(
                    Alert(spec.id, spec.severity, spec.scope, reason, guidance, event, name, count)
                )
        return tuple(alerts)

    if TYPE_CHECKING:  # supplied by the engine class each concrete Watchdog derives from
        def _engine_init(self, settings: EngineSettings) -> None: ...

        def observe_call(self, name: str, args: Any = None) -> tuple[Alert, ...]:
            """A tool call: args as JSON ``str``/``bytes``, a decoded value, or None."""

        def observe_result(self, name: str = "", error: Any = None, no_op: bool = False,
                           payload: Any = None) -> tuple[Alert, ...]:
            """A tool's answer: ``error`` (true or a text: failed), ``no_op``, its ``payload``."""

        def observe_text(self, text: Any) -> tuple[Alert, ...]:
            """The agent's own words."""

        def end_turn(self) -> tuple[Alert, ...]:
            """A turn boundary."""

        def turn_boundary(self) -> None: ...

        def reset(self) -> tuple[Alert, ...]:
            """An operator reset of every detector."""

        def count_event(self) -> None: ...
        def recent_call(self, age: int) -> tuple[str, Any]: ...
        @property
        def repeat_run(self) -> int: ...
        @property
        def repeat_poll(self) -> int: ...
        @property
        def cycle_period(self) -> int: ...
        @property
        def dominant(self) -> tuple[int, int, int]: ...
        @property
        def name_run(self) -> int: ...
        @property
        def silent_calls(self) -> int: ...
        @property
        def failure_streak(self) -> int: ...
        @property
        def failure_names(self) -> list[str]: ...
        @property
        def no_op_run(self) -> int: ...
        @property
        def no_op_names(self) -> list[str]: ...
        @property
        def stale_results(self) -> int: ...


class PythonWatchdog(Watchdog, _reference.Engine):
    """A ``Watchdog`` on the pure-Python reference engine."""

    __slots__ = ()


try:
    from ._native import Engine as _NativeEngine
except ImportError:  # not built: _engine.load("native") raises the clear error when asked for
    _NativeEngine = None  # type: ignore[assignment,misc]

if _NativeEngine is not None:

    class NativeWatchdog(Watchdog, _NativeEngine):
        """A ``Watchdog`` on the C++ core."""

        __slots__ = ()


def watchdog_class(implementation: str | None = None) -> type[Watchdog]:
    """The concrete ``Watchdog`` class of an implementation ("native" or "python")."""
    name = _engine.resolve(implementation)
    if name == "python":
        return PythonWatchdog
    _engine.load(name)  # a clear ConfigError or ImportError when it is not "native" or not built
    return NativeWatchdog
