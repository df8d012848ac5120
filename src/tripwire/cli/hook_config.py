"""The hook's configuration: the command's options over the config file (``tripwire hook``
and its ``--install``, which checks it before it writes anything)."""

from __future__ import annotations

from typing import Any

__all__ = ["hook_config"]


def hook_config(mode: str | None, config: str | None) -> Any:
    """The hook's configuration: the command's options over the config file."""
    from ..context.config import ContextConfig
    from ..session.guardrails import GuardrailsConfig
    from ..signals import ResultsConfig, WatchdogConfig

    file: dict[str, Any] = {}
    signals: Any = {}
    if config:
        from ..session.config import builtin_signals, read_config_file

        file = read_config_file(config)
        signals = builtin_signals(file)  # [signals] custom: GuardrailsConfig loads those
    # Hooks see no agent text between tool calls, so tools-without-text would fire on every
    # session; the context guard needs the conversation, which the harness compacts itself.
    watchdog = WatchdogConfig(signals={**signals,
                                       "tools-without-text": {"enabled": False}},
                              results=ResultsConfig.from_mapping(file.get("results", {})),
                              tools=file.get("tools", {}))
    return GuardrailsConfig(mode=mode, unattended=True, watchdog=watchdog,
                            context=ContextConfig(enabled=False), file=file)
