"""The ``tripwire`` logger, and what prints its warnings when the host configured no logging.

Every module that logs takes ``LOGGER`` from here (the store too, which is imported without
the rest of the operator channel), so a warning always reads ``tripwire: ...`` on stderr when
no handler of the host's would print it: ``logging``'s own last resort drops the name.
"""

from __future__ import annotations

import logging
import sys

__all__ = ["LOGGER", "ONCE"]

LOGGER = logging.getLogger("tripwire")
#: ``extra=ONCE`` marks a one-time notice (said once per process; a host whose every event is
#: a new process, the hook, keeps what it said per session and says it once per session).
ONCE = {"once": True}


class _UnconfiguredStderr(logging.Handler):
    """Warnings and errors on stderr, prefixed ``tripwire: ``, only while no other handler
    would print them (the host configured no logging): what ``logging.lastResort`` does,
    with the logger's name kept."""

    def emit(self, record: logging.LogRecord) -> None:
        logger: logging.Logger | None = LOGGER
        while logger is not None:
            if any(h is not self for h in logger.handlers):
                return  # the host's logging prints it, in the host's format
            if not logger.propagate:
                break
            logger = logger.parent
        try:
            text = self.format(record)
            stream = sys.stderr
            if stream is not None:
                stream.write(text if text.startswith("tripwire: ") else f"tripwire: {text}")
                stream.write("\n")
        except Exception:
            self.handleError(record)


_FALLBACK = _UnconfiguredStderr(logging.WARNING)
if not any(isinstance(h, _UnconfiguredStderr) for h in LOGGER.handlers):
    LOGGER.addHandler(_FALLBACK)
