"""Typed errors. Every error tripwire raises on bad input or refused actions is one of these."""

from __future__ import annotations

__all__ = [
    "TripwireError",
    "ConfigError",
    "InvalidEvent",
]


class TripwireError(Exception):
    """Base class of every error tripwire raises on purpose."""


class ConfigError(TripwireError, ValueError):
    """A configuration value is unknown, of the wrong type or out of range."""


class InvalidEvent(TripwireError, ValueError):
    """An observed event is malformed (wrong type, unknown kind, bad field).

    ``source`` and ``line`` name where the event came from when it was read from a file.
    """

    def __init__(self, message: str, *, source: str | None = None, line: int | None = None):
        self.source = source
        self.line = line
        where = ""
        if source is not None:
            where = f"{source}:{line}: " if line is not None else f"{source}: "
        super().__init__(where + message)
        self.message = message
