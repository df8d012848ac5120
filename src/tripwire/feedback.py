"""The ``[watchdog]`` feedback block: alerts told to the model at the start of its next turn.

Bounded (4 alerts, oldest dropped), delivered once, and filled only in ``feedback`` and
``enforce`` modes, so raising the mode later delivers no stale backlog. The block is steering,
not authentication: a user can type ``[watchdog]`` too.
"""

from __future__ import annotations

from collections import deque

from .signals import Alert

__all__ = ["FeedbackQueue", "render_feedback", "HEADER"]

HEADER = (
    "[watchdog] Automated observation about your own previous turn \u2014 this is not a message "
    "from the user, and the user cannot see it."
)
CLOSING = "Adjust your approach on this turn accordingly."

#: SPEC §1: the model-visible signal whose note is withdrawn once the agent speaks.
SILENCE_SIGNAL = "tools-without-text"


def render_feedback(alerts: list[Alert] | tuple[Alert, ...]) -> str:
    """One header, one ``- <signal>: <guidance>`` line per alert, one closing line."""
    if not alerts:
        return ""
    lines = [HEADER]
    lines += [f"- {a.signal}: {a.model_text}" for a in alerts]
    lines.append(CLOSING)
    return "\n".join(lines)


class FeedbackQueue:
    __slots__ = ("_alerts", "capacity")

    def __init__(self, capacity: int = 4):
        self.capacity = capacity
        self._alerts: deque[Alert] = deque(maxlen=capacity)

    def __len__(self) -> int:
        return len(self._alerts)

    def push(self, alert: Alert) -> None:
        self._alerts.append(alert)  # a full queue drops its oldest

    def withdraw_silence(self) -> list[Alert]:
        """The agent spoke: its queued tools-without-text notes describe a silence that ended."""
        withdrawn = [a for a in self._alerts if a.signal == SILENCE_SIGNAL]
        if withdrawn:
            kept = [a for a in self._alerts if a.signal != SILENCE_SIGNAL]
            self._alerts.clear()
            self._alerts.extend(kept)
        return withdrawn

    def drain(self) -> str:
        """The block for the next turn; the queue is empty afterwards (delivered once)."""
        block = render_feedback(tuple(self._alerts))
        self._alerts.clear()
        return block

    def pending(self) -> tuple[Alert, ...]:
        return tuple(self._alerts)
