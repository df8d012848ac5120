"""The operator channel: one log line per cut or halt, an optional callback, and counters.

Every line goes to the standard ``logging`` logger ``tripwire`` and starts
``[session <id>]``, so ``grep '\\[session s-7\\]'`` finds everything one session said in a
daemon's interleaved log. The logger's name is the ``tripwire`` part: a host's own format
(``logging.basicConfig``: ``WARNING:tripwire:[session s-7] ...``) shows it once. When the host
configured no logging at all, warnings and errors go to stderr as
``tripwire: [session s-7] ...`` (``logging``'s own last resort would drop the name).

The callback receives an ``OperatorEvent`` for every alert, cut, halt, refused turn, withdrawn
note and reset. An exception it raises never reaches the agent loop: the first one is logged
with its traceback, later ones are counted (``Counters.callback_errors``), not logged again.
"""

from __future__ import annotations

import logging
import threading
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from ..base import log as _log
from ..signals import Alert

__all__ = ["OperatorEvent", "Counters", "OperatorChannel", "LOGGER"]

# the logger, with its stderr fallback for a host that configured no logging (``_log``)
LOGGER = _log.LOGGER


@dataclass(frozen=True, slots=True)
class OperatorEvent:
    """``kind``: alert, cut, halt, trip, refused_turn, feedback_withdrawn, reset,
    reset_refused, context. ``message`` is the log line."""

    kind: str
    session_id: str
    message: str
    guardrail: str | None = None
    alert: Alert | None = None
    decision: Any = None
    event: int | None = None
    record: dict[str, Any] | None = None  # context guard records (SPEC §6)


class Counters:
    """What an embedding daemon exports: alerts by (signal, severity), trips by guardrail,
    refused turns. ``merge`` adds another session's counters (fleet totals)."""

    __slots__ = ("_lock", "alerts", "callback_errors", "refused_turns", "trips")

    def __init__(self) -> None:
        self.alerts: Counter[tuple[str, str]] = Counter()
        self.trips: Counter[str] = Counter()
        self.refused_turns = 0
        self.callback_errors = 0  # exceptions the operator callback raised
        self._lock = threading.Lock()

    def count_alert(self, alert: Alert) -> None:
        with self._lock:
            self.alerts[(alert.signal, alert.severity)] += 1

    def count_trip(self, guardrail: str) -> None:
        with self._lock:
            self.trips[guardrail] += 1

    def count_refused(self) -> None:
        with self._lock:
            self.refused_turns += 1

    def merge(self, other: Counters) -> None:
        with self._lock:
            self.alerts.update(other.alerts)
            self.trips.update(other.trips)
            self.refused_turns += other.refused_turns
            self.callback_errors += other.callback_errors

    def snapshot(self) -> dict[str, Any]:
        with self._lock:
            return {
                "alerts": {f"{s}/{sev}": n for (s, sev), n in sorted(self.alerts.items())},
                "trips": dict(sorted(self.trips.items())),
                "refused_turns": self.refused_turns,
                "callback_errors": self.callback_errors,
            }


class OperatorChannel:
    __slots__ = ("callback", "counters", "logger", "session_id")

    def __init__(self, session_id: str, callback: Callable[[OperatorEvent], object] | None,
                 counters: Counters | None = None, logger: logging.Logger = LOGGER):
        self.session_id = session_id
        self.callback = callback
        self.counters = counters if counters is not None else Counters()
        self.logger = logger

    def line(self, text: str) -> str:
        return f"[session {self.session_id}] {text}"

    def emit(self, kind: str, text: str, *, level: int = logging.INFO, guardrail: str | None = None,
             alert: Alert | None = None, decision: Any = None, event: int | None = None,
             record: dict[str, Any] | None = None) -> None:
        message = self.line(text)
        # the kind rides on the record, so a handler can tell operator lines from notices
        self.logger.log(level, message, extra={"tripwire_event": kind})
        if self.callback is not None:
            try:
                self.callback(OperatorEvent(kind, self.session_id, message, guardrail, alert,
                                            decision, event, record))
            except Exception:
                with self.counters._lock:
                    self.counters.callback_errors += 1
                    first = self.counters.callback_errors == 1
                if first:
                    self.logger.exception(self.line(
                        "operator callback (on_event) raised; the agent loop goes on. Later "
                        "errors of this callback are counted (callback_errors), not logged"))

    def alert(self, alert: Alert) -> None:
        self.counters.count_alert(alert)
        level = logging.WARNING if alert.critical else logging.INFO
        self.emit("alert", f"watchdog alert {alert.signal} ({alert.severity}) at event "
                  f"{alert.event}: {alert.reason}", level=level, guardrail="watchdog",
                  alert=alert, event=alert.event)
