"""``Alert``: one signal tripping at one event, with its severity and scope (SPEC §1), the
vocabulary every layer above speaks: decisions carry alerts, policies act on them, reports
print them."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

__all__ = ["CRITICAL", "WARN", "SESSION", "TURN", "Alert"]

CRITICAL = "critical"
WARN = "warn"
SESSION = "session"
TURN = "turn"


@dataclass(frozen=True, slots=True)
class Alert:
    """One signal tripping at one event.

    ``event`` is the 0-based index of the observation that made it trip (every ``observe_*``,
    ``end_turn`` and ``reset`` call counts one). ``tool`` and ``count`` are the facts the texts
    state: the tool involved and the count at trip time.
    """

    signal: str
    severity: str
    scope: str | None
    reason: str
    guidance: str
    event: int
    tool: str | None = None
    count: int = 0

    @property
    def critical(self) -> bool:
        return self.severity == CRITICAL

    @property
    def model_text(self) -> str:
        """What the model is shown: the guidance, or the reason for a signal without one."""
        return self.guidance or self.reason

    def to_dict(self) -> dict[str, Any]:
        return {
            "signal": self.signal,
            "severity": self.severity,
            "scope": self.scope,
            "reason": self.reason,
            "guidance": self.guidance,
            "event": self.event,
        }
