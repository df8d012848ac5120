"""Watchdog modes (SPEC §3): a ladder where each rung includes the one below.

| mode | effect |
|---|---|
| off | nothing observed |
| warn | alerts go to the operator channel; nothing reaches the model |
| feedback | warn, plus alerts are prepended to the model's next turn |
| enforce | feedback, plus a critical alert cuts the turn; a session-scoped one halts the session |

Precedence: an explicit value > the config file > the default, which is ``enforce`` when the run
is unattended (one-shot, daemon, or stdin not a TTY) and ``warn`` when interactive: nobody reads
a daemon's warn-mode log in time, while an operator at the keyboard can interrupt.
"""

from __future__ import annotations

import enum
import sys

from ..errors import ConfigError

__all__ = ["Mode", "parse_mode", "resolve_mode", "detect_unattended"]


class Mode(enum.IntEnum):
    OFF = 0
    WARN = 1
    FEEDBACK = 2
    ENFORCE = 3

    def __str__(self) -> str:
        return self.name.lower()


def parse_mode(value: str | Mode) -> Mode:
    """Case- and space-insensitive; anything else is an error listing the four modes."""
    if isinstance(value, Mode):
        return value
    if isinstance(value, str):
        key = value.strip().lower()
        for mode in Mode:
            if str(mode) == key:
                return mode
    raise ConfigError(f"watchdog mode must be one of off, warn, feedback, enforce, not {value!r}")


def detect_unattended() -> bool:
    """Unattended when stdin is not an interactive terminal (daemons, pipes, CI, one-shots)."""
    stdin = sys.stdin
    try:
        return stdin is None or not stdin.isatty()
    except (ValueError, OSError):  # a closed or detached stdin
        return True


def resolve_mode(explicit: str | Mode | None, from_file: str | Mode | None,
                 unattended: bool) -> tuple[Mode, str]:
    """The mode and where it came from (for the startup line an operator reads)."""
    if explicit is not None:
        return parse_mode(explicit), "explicit"
    if from_file is not None:
        return parse_mode(from_file), "config file"
    if unattended:
        return Mode.ENFORCE, "unattended default"
    return Mode.WARN, "interactive default"
