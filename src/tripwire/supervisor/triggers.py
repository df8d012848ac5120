"""When a review is due (SPEC §7.4): the triggers a run raises between reviews — a critical
alert under ``feedback``/``enforce``, a ``repeated-failure`` or ``tool-failure-streak`` alert, an
attempted stop, every ``review_every_steps`` model steps — and the alerts and stop attempts the
next review names. Every trigger is a switch of ``SupervisorConfig``.
"""

from __future__ import annotations

from ..base.decision import Decision
from ..base.modes import Mode

__all__ = ["TRIGGERS", "FAILURE_SIGNALS", "ReviewTriggers"]

#: Why a review was asked for (``Review.triggers``).
TRIGGERS = ("steps", "critical", "failure", "stop_attempt")

#: The alerts that ask for a review whatever their severity (SPEC §7.4).
FAILURE_SIGNALS = frozenset({"repeated-failure", "tool-failure-streak"})

#: Alerts remembered as already noted (a blocked turn hands the same decision to every later
#: event); past this many the memory starts over.
_SEEN_ALERTS = 4096


class ReviewTriggers:
    """The triggers noted since the last answered review (in the order first noted), the
    alerts that raised them, and the model steps and stop attempts counted toward them. Not
    thread-safe on its own (``Supervision`` locks)."""

    __slots__ = ("_alerts", "_pending", "_seen_alerts", "_steps", "every_steps", "on_critical",
                 "on_failure", "on_stop_attempt", "stop_attempts")

    def __init__(self, *, every_steps: int | None, on_critical: bool, on_failure: bool,
                 on_stop_attempt: bool):
        self.every_steps = every_steps
        self.on_critical = on_critical
        self.on_failure = on_failure
        self.on_stop_attempt = on_stop_attempt
        self._pending: dict[str, None] = {}
        self._alerts: list[str] = []
        self._seen_alerts: set[tuple[str, int]] = set()
        self._steps = 0              # model steps since the last review
        self.stop_attempts = 0       # stop attempts since the last review

    @property
    def due(self) -> bool:
        """A trigger is pending: the next turn start reviews."""
        return bool(self._pending)

    @property
    def pending(self) -> tuple[str, ...]:
        return tuple(self._pending)

    @property
    def alerts(self) -> tuple[str, ...]:
        """The signals of the alerts that raised a trigger, in order."""
        return tuple(self._alerts)

    def stepped(self, n: int) -> None:
        self._steps += n
        if self.every_steps is not None and self._steps >= self.every_steps:
            self._pending["steps"] = None

    def stop_attempt(self) -> None:
        self.stop_attempts += 1
        if self.on_stop_attempt:
            self._pending["stop_attempt"] = None

    def note(self, decision: Decision, mode: Mode) -> None:
        """The triggers among an observation's alerts, under the session's ``mode`` (each
        alert once: a blocked turn hands the same decision to every later event)."""
        for alert in decision.alerts:
            seen = (alert.signal, alert.event)
            if seen in self._seen_alerts:
                continue
            self._seen_alerts.add(seen)
            if len(self._seen_alerts) > _SEEN_ALERTS:
                self._seen_alerts = {seen}
            if alert.signal in FAILURE_SIGNALS and self.on_failure:
                self._pending["failure"] = None
                self._alerts.append(alert.signal)
            elif alert.critical and self.on_critical and mode >= Mode.FEEDBACK:
                self._pending["critical"] = None
                self._alerts.append(alert.signal)

    def answered(self) -> None:
        """A fresh decision answered the triggers: the count starts over."""
        self._pending.clear()
        self._alerts.clear()
        self._steps = 0
        self.stop_attempts = 0
