"""tripwire: keeps AI agents from running away.

Watches an agent's tool calls, results, text and usage, and tells the harness when to feed a
correction back to the model, cut a turn, or halt a session until an operator resets it.
"""

from __future__ import annotations

from importlib import metadata as _metadata

from .decision import CONTINUE, Decision, Turn
from .errors import (
    BatchInterrupted,
    ConfigError,
    GuardrailHalted,
    InvalidEvent,
    InvalidReset,
    ResetRefused,
    SmallTierParentRefused,
    StoreError,
    TripwireError,
)
from .guardrails import Guardrails, GuardrailsConfig, ResetOutcome, Status
from .modes import Mode
from .reporting import Counters, OperatorEvent
from .signals import SIGNAL_IDS, SIGNALS, Alert, WatchdogConfig
from .watchdog import IMPLEMENTATION, Watchdog

__version__ = _metadata.version("tripwire")  # written once, in pyproject.toml

__all__ = [
    "CONTINUE",
    "IMPLEMENTATION",
    "SIGNALS",
    "SIGNAL_IDS",
    "Alert",
    "BatchInterrupted",
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
    "SmallTierParentRefused",
    "Status",
    "StoreError",
    "TripwireError",
    "Turn",
    "Watchdog",
    "WatchdogConfig",
    "__version__",
]
