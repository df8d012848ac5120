"""The ``[watchdog]`` feedback block: alerts told to the model at the start of its next turn
(``HEADER``: about its previous turn), or in the turn they fired in (``HEADER_NOW``: a call
denied in flight, feedback a hook delivers with the next tool result).

Bounded (4 alerts, oldest dropped), delivered once, and filled only in ``feedback`` and
``enforce`` modes, so raising the mode later delivers no stale backlog. The block is steering,
not authentication: a user can type ``[watchdog]`` too.
"""

from __future__ import annotations

from collections.abc import Sequence

from ..signals import WITHDRAWN_BY_WORDS, Alert

__all__ = ["FeedbackQueue", "empty_queue", "render_feedback", "render_feedback_items", "HEADER",
           "HEADER_NOW"]

HEADER = (
    "[watchdog] Automated observation about your own previous turn \u2014 this is not a message "
    "from the user, and the user cannot see it."
)
#: The header of a block told in the turn it is about (``render_feedback(..., now=True)``).
HEADER_NOW = (
    "[watchdog] Automated observation about your own current turn \u2014 this is not a message "
    "from the user, and the user cannot see it."
)
CLOSING = "Adjust your approach on this turn accordingly."


def render_feedback(alerts: list[Alert] | tuple[Alert, ...], *, now: bool = False) -> str:
    """One header, one ``- <signal>: <guidance>`` line per alert, one closing line. ``now``:
    told in the turn the alerts fired in (``HEADER_NOW``), not at the next one's start."""
    return render_feedback_items([(a.signal, a.model_text) for a in alerts], now=now)


def render_feedback_items(items: Sequence[Sequence[str]], *, now: bool = False) -> str:
    """The block from ``(signal, text the model is shown)`` pairs."""
    if not items:
        return ""
    lines = [HEADER_NOW if now else HEADER]
    lines += [f"- {signal}: {text}" for signal, text in items]
    lines.append(CLOSING)
    return "\n".join(lines)


class FeedbackQueue:
    """At most ``capacity`` alerts, oldest dropped. The list exists only while something is
    queued: a fleet holds one queue per session, and most are empty."""

    __slots__ = ("_alerts", "capacity")

    def __init__(self, capacity: int = 4):
        self.capacity = capacity
        self._alerts: list[Alert] | None = None

    def __len__(self) -> int:
        return len(self._alerts) if self._alerts else 0

    def push(self, alert: Alert) -> None:
        if self._alerts is None:
            self._alerts = []
        self._alerts.append(alert)
        if len(self._alerts) > self.capacity:
            del self._alerts[0]  # a full queue drops its oldest

    def answerable(self) -> bool:
        """Some queued note is one the agent's words withdraw."""
        alerts = self._alerts
        return alerts is not None and any(a.signal in WITHDRAWN_BY_WORDS for a in alerts)

    def withdraw_answered(self) -> list[Alert]:
        """The agent spoke: queued notes its words answer (``SignalSpec.withdrawn_by_words``,
        e.g. a silence that ended) are withdrawn; returns them."""
        if not self._alerts:
            return []
        withdrawn = [a for a in self._alerts if a.signal in WITHDRAWN_BY_WORDS]
        if withdrawn:
            self._alerts = [a for a in self._alerts if a.signal not in WITHDRAWN_BY_WORDS] or None
        return withdrawn

    def drain(self, now: bool = False) -> str:
        """The block for the next turn (``now``: for the turn in progress); the queue is empty
        afterwards (delivered once)."""
        block = render_feedback(self._alerts or (), now=now)
        self._alerts = None
        return block

    def items(self) -> tuple[tuple[str, str], ...]:
        """What is queued, as ``(signal, text the model is shown)`` pairs (a turn row keeps
        them: ``durability.rows.TurnRow``)."""
        return tuple((a.signal, a.model_text) for a in self._alerts or ())

    @property
    def shared(self) -> bool:
        """This is a capacity's shared empty queue (``empty_queue``): never pushed to."""
        return _EMPTY.get(self.capacity) is self

    def restore(self, items: Sequence[Sequence[str]]) -> None:
        """The queue as a turn row kept it (``items()``), in place of what it holds."""
        self._alerts = None
        for signal, text in items:
            self.push(Alert(signal, "info", None, text, text, -1))


# capacity -> the empty queue every session of that capacity holds until its first note (a
# queue per session would be 48 bytes a fleet session, and most never queue one)
_EMPTY: dict[int, FeedbackQueue] = {}


def empty_queue(capacity: int) -> FeedbackQueue:
    """The shared empty queue of ``capacity``: read it, but push to a queue of one's own."""
    queue = _EMPTY.get(capacity)
    if queue is None:
        queue = _EMPTY.setdefault(capacity, FeedbackQueue(capacity))
    return queue
