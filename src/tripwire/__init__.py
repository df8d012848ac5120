"""tripwire: keeps AI agents from running away.

Watches an agent's tool calls, results, text and usage, and tells the harness when to feed a
correction back to the model, cut a turn, or halt a session until an operator resets it.
"""

from __future__ import annotations

from .decision import CONTINUE, Decision, Turn
from .errors import (
    ConfigError,
    GuardrailHalted,
    InvalidEvent,
    InvalidReset,
    ResetRefused,
    TripwireError,
)
from .guardrails import Guardrails, GuardrailsConfig, ResetOutcome, Status
from .modes import Mode
from .reporting import Counters, OperatorEvent
from .signals import SIGNAL_IDS, SIGNALS, Alert, WatchdogConfig
from .watchdog import Watchdog

__version__ = "0.1.0"


def __getattr__(name: str) -> object:
    if name == "IMPLEMENTATION":  # "native" or "python": chosen on first use, not at import
        from . import _engine

        return _engine.default()
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


__all__ = [
    "CONTINUE",
    "IMPLEMENTATION",
    "SIGNALS",
    "SIGNAL_IDS",
    "Alert",
    "ConfigError",
    "Counters",
    "Decision",
    "GuardrailHalted",
    "Guardrails",
    "GuardrailsConfig",
    "InvalidEvent",
    "InvalidReset",
    "Mode",
    "OperatorEvent",
    "ResetOutcome",
    "ResetRefused",
    "Status",
    "TripwireError",
    "Turn",
    "Watchdog",
    "WatchdogConfig",
    "__version__",
]
