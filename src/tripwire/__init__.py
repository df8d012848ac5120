"""tripwire: keeps AI agents from running away.

Watches an agent's tool calls, results, text and usage, and tells the harness when to feed a
correction back to the model, cut a turn, or halt a session until an operator resets it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

# Public names are imported on first use (PEP 562): a hook command that runs on every event of
# a harness imports only what it needs (SPEC §11.4: < 100 ms per invocation).
_LAZY = {
    "CONTINUE": "base.decision", "Decision": "base.decision", "Turn": "base.decision",
    "ConfigError": "errors", "GuardrailHalted": "errors", "InvalidEvent": "errors",
    "InvalidReset": "errors", "ResetRefused": "errors", "TripwireError": "errors",
    "BatchInterrupted": "errors", "SmallTierParentRefused": "errors", "StoreError": "errors",
    "StoreUnreadable": "errors", "StoreKeyMismatch": "errors", "MalformedDecision": "errors",
    "TaskEnded": "errors", "RaiseRefused": "errors",
    "Guardrails": "session.guardrails", "GuardrailsConfig": "session.guardrails",
    "ResetOutcome": "session.guardrails", "Status": "session.guardrails",
    "Mode": "base.modes",
    "Counters": "policy.reporting", "OperatorEvent": "policy.reporting",
    "SIGNAL_IDS": "signals", "SIGNALS": "signals", "Alert": "signals",
    "WatchdogConfig": "signals",
    "IMPLEMENTATION": "engine.watchdog", "Watchdog": "engine.watchdog",
}

if TYPE_CHECKING:
    from .base.decision import CONTINUE, Decision, Turn
    from .base.modes import Mode
    from .engine.watchdog import IMPLEMENTATION, Watchdog
    from .errors import (
        BatchInterrupted,
        ConfigError,
        GuardrailHalted,
        InvalidEvent,
        InvalidReset,
        MalformedDecision,
        RaiseRefused,
        ResetRefused,
        SmallTierParentRefused,
        StoreError,
        StoreKeyMismatch,
        StoreUnreadable,
        TaskEnded,
        TripwireError,
    )
    from .policy.reporting import Counters, OperatorEvent
    from .session.guardrails import Guardrails, GuardrailsConfig, ResetOutcome, Status
    from .signals import SIGNAL_IDS, SIGNALS, Alert, WatchdogConfig


def __getattr__(name: str) -> object:
    import importlib

    if name == "__version__":  # written once, in pyproject.toml
        from importlib.metadata import version

        return version("tripwire")
    module = _LAZY.get(name)
    if module is None:  # a submodule, as `import tripwire` used to import them all
        if name.startswith("__"):
            raise AttributeError(f"module 'tripwire' has no attribute {name!r}")
        try:
            return importlib.import_module(f".{name}", __name__)
        except ModuleNotFoundError:
            raise AttributeError(f"module 'tripwire' has no attribute {name!r}") from None
    value = getattr(importlib.import_module(f".{module}", __name__), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(__all__)


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
    "MalformedDecision",
    "Mode",
    "OperatorEvent",
    "RaiseRefused",
    "ResetOutcome",
    "ResetRefused",
    "SmallTierParentRefused",
    "Status",
    "StoreError",
    "StoreKeyMismatch",
    "StoreUnreadable",
    "TaskEnded",
    "TripwireError",
    "Turn",
    "Watchdog",
    "WatchdogConfig",
    "__version__",
]
