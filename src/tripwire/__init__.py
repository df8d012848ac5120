"""tripwire: keeps AI agents from running away.

Watches an agent's tool calls, results, text and usage, and tells the harness when to feed a
correction back to the model, cut a turn, or halt a session until an operator resets it.
"""

from __future__ import annotations

from .errors import ConfigError, InvalidEvent, TripwireError
from .signals import SIGNAL_IDS, SIGNALS, Alert, WatchdogConfig
from .watchdog import IMPLEMENTATION, Watchdog

__version__ = "0.1.0"

__all__ = [
    "Alert",
    "ConfigError",
    "IMPLEMENTATION",
    "InvalidEvent",
    "SIGNALS",
    "SIGNAL_IDS",
    "TripwireError",
    "Watchdog",
    "WatchdogConfig",
    "__version__",
]
