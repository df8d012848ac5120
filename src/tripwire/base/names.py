"""``Guardrail``: the names of tripwire's guardrails, parsed in one place.

Decisions, log lines, store rows and resets name a guardrail by these strings (the enum is a
``str``, so ``Guardrail.WATCHDOG == "watchdog"``). A reset targets one of ``RESET_SCOPES``:
``watchdog``, ``cost_ceiling`` or ``all``; the context guard cuts turns but never halts, so
there is nothing of it to reset.
"""

from __future__ import annotations

import enum
from collections.abc import Iterable

from ..errors import InvalidReset, TripwireError

__all__ = ["Guardrail", "RESET_SCOPES", "halted_by"]


class Guardrail(str, enum.Enum):
    WATCHDOG = "watchdog"
    COST_CEILING = "cost_ceiling"
    CONTEXT = "context"
    ALL = "all"  # a reset's scope: every guardrail that can halt

    def __str__(self) -> str:
        return self.value

    @classmethod
    def parse_reset(cls, value: object, *, error: type[TripwireError] = InvalidReset,
                    prefix: str = "guardrail") -> Guardrail:
        """A reset's scope, case- and space-insensitive; else ``error`` listing the scopes."""
        key = value.strip().lower() if isinstance(value, str) else value
        for scope in RESET_SCOPES:
            if scope.value == key:
                return scope
        raise error(f"{prefix} must be one of {', '.join(RESET_SCOPES)}, not {value!r}")

    def covers(self, guardrail: Guardrail) -> bool:
        """Whether a reset of this scope clears ``guardrail``."""
        return self is guardrail or self is Guardrail.ALL


RESET_SCOPES = (Guardrail.WATCHDOG, Guardrail.COST_CEILING, Guardrail.ALL)


def halted_by(guardrails: Iterable[str]) -> str:
    """The one wording of what holds a session: ``halted by watchdog, cost_ceiling``."""
    return "halted by " + ", ".join(guardrails)
