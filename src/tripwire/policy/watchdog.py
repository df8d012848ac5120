"""``WatchdogPolicy``: what the watchdog's alerts do to a session (SPEC §3).

One job: given the alerts an observation raised, decide — keep them for the end of the turn
(``warn``, ``feedback``), or report them now and cut the turn or halt the session
(``enforce``), escalating a cut to a halt after ``escalate_after`` turns in a row cut by the
same signal. It owns the feedback queue, the alerts pending for the end of the turn and the
withdrawal of notes the agent's words answer, and the session's watchdog (``engine``: None
in ``off`` mode), whose run state a reset clears. ``Guardrails`` holds the lock and dispatches;
``snapshot()`` / ``apply(folded)`` are the policy's state in and out of the durable store.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from ..base.decision import CUT_TURN, HALT_SESSION, PROCEED, Decision
from ..base.modes import Mode
from ..durability.fold import RESTORED_SIGNAL
from ..signals import CRITICAL, SESSION, WITHDRAWN_BY_WORDS, Alert
from . import lines
from .feedback import FeedbackQueue

if TYPE_CHECKING:
    from ..durability.fold import Folded
    from ..engine.watchdog import Watchdog
    from .reporting import OperatorChannel

__all__ = ["WatchdogPolicy"]

#: (row kind, row data): append a row to the session's durable log
Persist = Callable[[str, dict[str, Any]], None]


class WatchdogPolicy:
    __slots__ = ("_channel", "_persist", "cut_in_a_row", "cut_signal", "engine",
                 "escalate_after", "feedback", "halt_alert", "halt_reason", "mode", "pending",
                 "turn_cut_signal")

    def __init__(self, mode: Mode, escalate_after: int, feedback_queue: int,
                 channel: OperatorChannel, persist: Persist, engine: Watchdog | None = None):
        self.engine = engine  # the session's watchdog (None in off mode)
        self.mode = mode
        self.escalate_after = escalate_after
        self.feedback = FeedbackQueue(feedback_queue)
        self._channel = channel
        self._persist = persist
        self.halt_reason: str | None = None  # the watchdog's halt
        self.halt_alert: Alert | None = None
        self.cut_signal: str | None = None   # the signal that cut the last turns...
        self.cut_in_a_row = 0                # ...and how many turns in a row
        self.turn_cut_signal: str | None = None
        self.pending: list[tuple[Alert, bool]] = []  # warn/feedback: (alert, still for the model)

    @property
    def halted(self) -> bool:
        return self.halt_reason is not None

    # -- decisions ---------------------------------------------------------------------------

    def on_alerts(self, alerts: tuple[Alert, ...]) -> Decision:
        """The decision for an observation's alerts; a cut or halt blocks the turn."""
        if self.mode < Mode.ENFORCE:
            self.pending.extend((a, True) for a in alerts)  # reported after the turn
            return Decision(PROCEED, alerts=alerts)
        for alert in alerts:  # enforce: in-turn
            self._channel.alert(alert)
            self.feedback.push(alert)
        critical = [a for a in alerts if a.critical]
        if not critical:
            return Decision(PROCEED, alerts=alerts)
        for alert in critical:
            if alert.scope != "turn":
                return self._halt(alert, alerts, alert.reason)
        return self._cut(critical[0], alerts)

    def _cut(self, alert: Alert, alerts: tuple[Alert, ...]) -> Decision:
        n = self.cut_in_a_row + 1 if self.cut_signal == alert.signal else 1
        self.cut_signal, self.cut_in_a_row, self.turn_cut_signal = alert.signal, n, alert.signal
        limit = self.escalate_after
        if n >= limit:
            return self._halt(alert, alerts, lines.watchdog_escalation(alert, n))
        reason = lines.watchdog_cut_reason(alert)
        decision = Decision(CUT_TURN, "watchdog", reason, alerts)
        self._channel.counters.count_trip("watchdog")
        self._persist("trip", {"guardrail": "watchdog", "kind": "turn", "halts": False,
                               "signal": alert.signal, "reason": reason, "in_a_row": n,
                               "mode": str(self.mode)})
        self._channel.emit(
            "cut", lines.watchdog_cut(reason, n, limit), level=logging.WARNING,
            guardrail="watchdog", alert=alert, decision=decision, event=alert.event)
        return decision

    def _halt(self, alert: Alert, alerts: tuple[Alert, ...], why: str) -> Decision:
        reason = lines.watchdog_halt_reason(alert, why)
        self.halt_reason = reason
        self.halt_alert = alert
        decision = Decision(HALT_SESSION, "watchdog", reason, alerts)
        self.turn_cut_signal = alert.signal
        self._channel.counters.count_trip("watchdog")
        self._persist("trip", {
            "guardrail": "watchdog", "kind": "session" if alert.scope != "turn" else "escalation",
            "halts": True, "signal": alert.signal, "reason": reason,
            "guidance": alert.model_text, "in_a_row": self.cut_in_a_row, "mode": str(self.mode)})
        self._channel.emit(
            "halt", lines.watchdog_halt(reason), level=logging.WARNING,
            guardrail="watchdog", alert=alert, decision=decision, event=alert.event)
        return decision

    # -- turns and words ---------------------------------------------------------------------

    def close_turn(self) -> None:
        """The end of a turn: warn and feedback report now; a turn without a cut clears the
        escalation count."""
        for alert, for_model in self.pending:
            self._channel.alert(alert)
            if for_model and self.mode >= Mode.FEEDBACK:
                self.feedback.push(alert)
        self.pending.clear()
        if self.turn_cut_signal is None:
            self.cut_signal, self.cut_in_a_row = None, 0
        self.turn_cut_signal = None

    def drain_feedback(self, notes: list[Alert]) -> str:
        """The turn's ``[watchdog]`` block: the queued notes, then ``notes`` (the task's),
        delivered once ("" when there are none)."""
        queue = self.feedback
        for note in notes:
            queue.push(note)
        return queue.drain() if len(queue) else ""

    def words_matter(self) -> bool:
        """Whether agent words now would withdraw queued notes (batch ingest asks: a text
        stops the batch only then; any other queued note, a repeated-text warning say, would
        make every later text of the session a stop)."""
        return self.mode >= Mode.FEEDBACK and (self.feedback.answerable() or any(
            for_model and alert.signal in WITHDRAWN_BY_WORDS for alert, for_model in self.pending))

    def withdraw_answered(self) -> None:
        """The agent spoke: queued notes its words answer (``withdrawn_by_words``) are moot."""
        withdrawn = self.feedback.withdraw_answered()
        for i, (alert, for_model) in enumerate(self.pending):
            if for_model and alert.signal in WITHDRAWN_BY_WORDS:
                self.pending[i] = (alert, False)
                withdrawn.append(alert)
        for alert in withdrawn:
            self._channel.emit("feedback_withdrawn", lines.note_withdrawn(alert),
                               guardrail="watchdog", alert=alert, event=alert.event)

    # -- resets and persistence --------------------------------------------------------------

    def reset(self) -> list[str]:
        """An operator reset of the watchdog: what it cleared. The queued feedback stays, so
        the resumed model learns why it was stopped; the watchdog's run state goes (a resumed
        run must build back up to a threshold)."""
        cleared = ["watchdog"] if self.halt_reason is not None else []
        self.halt_reason = None
        self.halt_alert = None
        self.cut_signal, self.cut_in_a_row = None, 0
        if self.engine is not None:
            self.engine.reset()
        return cleared

    def snapshot(self) -> dict[str, Any]:
        """What a spend row carries of this policy (``fold_history`` reads it back)."""
        return {"watchdog_cut_signal": self.cut_signal, "watchdog_in_a_row": self.cut_in_a_row}

    def apply(self, folded: Folded) -> None:
        """Take a folded history forward in this mode: the escalation count; a halt feeds back
        to the model (feedback and up) and holds the session (enforce). Nothing in ``off``
        mode (no watchdog)."""
        if self.engine is None:
            return
        self.cut_signal = folded.watchdog_cut_signal
        self.cut_in_a_row = folded.watchdog_in_a_row
        halt = folded.watchdog_halt
        if halt is not None and self.mode >= Mode.FEEDBACK:
            # the resumed model must learn why it was stopped, even after a restart
            self.feedback.push(Alert(
                RESTORED_SIGNAL, CRITICAL, SESSION, halt["reason"],
                "Before a restart this session was halted for a runaway pattern "
                f"({halt.get('signal')}): {halt.get('guidance') or halt['reason']} "
                "Do not resume that pattern.", -1, None, 0))
        if halt is not None and self.mode == Mode.ENFORCE:
            self.halt_reason = halt["reason"]

    def hold(self, reason: str) -> None:
        """Halt without an alert: a history that cannot be trusted to show no halt."""
        self.halt_reason = reason

    def sync(self, folded: Folded) -> bool:
        """An operator reset written to the store elsewhere clears this halt; True if it did."""
        if self.halt_reason is not None and folded.watchdog_halt is None \
                and folded.tampered is None:
            self.reset()
            return True
        return False
