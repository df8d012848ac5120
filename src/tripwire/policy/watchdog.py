"""``WatchdogPolicy``: what the watchdog's alerts do to a session (SPEC §3).

One job: given the alerts an observation raised, decide — keep them for the end of the turn
(``warn``, ``feedback``), or report them now and cut the turn or halt the session
(``enforce``), escalating a cut to a halt after ``escalate_after`` turns in a row cut by the
same signal. It owns the feedback queue, the alerts pending for the end of the turn and the
withdrawal of notes the agent's words answer, and the session's watchdog (``engine``: None
in ``off`` mode), whose run state a reset clears. ``Guardrails`` holds the lock and dispatches;
``snapshot()`` / ``apply(folded)`` are the policy's state in and out of the durable store.

Feedback at once (``at_once``: a host that can tell the model something after any tool
result, as a hook's ``additionalContext`` does, and shows it a cut's reason with the cut):
alerts join the queue when they fire, in ``feedback`` mode too (not at the turn's end); a cut's
or halt's critical alerts do not join it (the cut's reason, which the model is shown, says
them); and the queue is the host's to take (``take_feedback``), not the next turn start's.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

from ..base.decision import CUT_TURN, HALT_SESSION, PROCEED, Decision
from ..base.modes import Mode
from ..durability.fold import RESTORED_SIGNAL
from ..durability.rows import RowSink, TripRow
from ..signals import CRITICAL, SESSION, WITHDRAWN_BY_WORDS, Alert
from . import lines
from .feedback import FeedbackQueue, empty_queue, render_feedback

if TYPE_CHECKING:
    from ..durability.fold import Folded
    from ..engine.watchdog import Watchdog
    from .reporting import OperatorChannel

__all__ = ["WatchdogPolicy"]

class WatchdogPolicy:
    __slots__ = ("_channel", "_durable", "at_once", "cut_in_a_row", "cut_signal", "engine",
                 "escalate_after", "feedback", "halt", "mode", "pending",
                 "turn_cut_signal")

    def __init__(self, mode: Mode, escalate_after: int, feedback_queue: int,
                 channel: OperatorChannel, durable: RowSink, engine: Watchdog | None = None,
                 *, at_once: bool = False):
        self.engine = engine  # the session's watchdog (None in off mode)
        self.at_once = at_once  # feedback at once (the module docstring)
        self.mode = mode
        self.escalate_after = escalate_after
        # the notes for the model: the shared empty queue until the first (``queue``)
        self.feedback = empty_queue(feedback_queue)
        self._channel = channel
        self._durable = durable  # its trip rows (with the spend: ``Durability.trip``)
        # the watchdog's halt: (its reason, the alert that halted, if one did), or None
        self.halt: tuple[str, Alert | None] | None = None
        self.cut_signal: str | None = None   # the signal that cut the last turns...
        self.cut_in_a_row = 0                # ...and how many turns in a row
        self.turn_cut_signal: str | None = None
        # warn/feedback: (alert, still for the model), reported after the turn (a tuple, the
        # empty one until the first: a list per session would be 56 bytes a fleet session)
        self.pending: tuple[tuple[Alert, bool], ...] = ()

    @property
    def halted(self) -> bool:
        return self.halt is not None

    # -- decisions ---------------------------------------------------------------------------

    def on_alerts(self, alerts: tuple[Alert, ...]) -> Decision:
        """The decision for an observation's alerts; a cut or halt blocks the turn."""
        if self.mode < Mode.ENFORCE:
            if self.at_once and self.mode >= Mode.FEEDBACK:  # told now, reported after the turn
                for alert in alerts:
                    self.queue().push(alert)
                self.pending += tuple((a, False) for a in alerts)
            else:
                self.pending += tuple((a, True) for a in alerts)  # reported after the turn
            return Decision(PROCEED, alerts=alerts)
        for alert in alerts:  # enforce: in-turn
            self._channel.alert(alert)
            if not (self.at_once and alert.critical):  # at once: the cut's reason says it
                self.queue().push(alert)
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
        self._durable.trip(TripRow("watchdog", "turn", False, reason, alert.signal, in_a_row=n,
                              mode=str(self.mode)))
        self._channel.emit(
            "cut", lines.watchdog_cut(reason, n, limit), level=logging.WARNING,
            guardrail="watchdog", alert=alert, decision=decision, event=alert.event)
        return decision

    def _halt(self, alert: Alert, alerts: tuple[Alert, ...], why: str) -> Decision:
        reason = lines.watchdog_halt_reason(alert, why)
        self.halt = (reason, alert)
        decision = Decision(HALT_SESSION, "watchdog", reason, alerts)
        self.turn_cut_signal = alert.signal
        self._channel.counters.count_trip("watchdog")
        self._durable.trip(TripRow("watchdog", "session" if alert.scope != "turn" else "escalation",
                              True, reason, alert.signal, alert.model_text, self.cut_in_a_row,
                              str(self.mode)))
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
                self.queue().push(alert)
        self.pending = ()
        if self.turn_cut_signal is None:
            self.cut_signal, self.cut_in_a_row = None, 0
        self.turn_cut_signal = None

    def drain_feedback(self, notes: list[Alert]) -> str:
        """The turn's ``[watchdog]`` block: the queued notes, then ``notes`` (the task's),
        delivered once ("" when there are none). At once, the queue stays the host's to take
        (``take_feedback``): the block is the task's notes alone."""
        if self.at_once:
            return render_feedback(notes) if notes else ""
        if notes:
            queue = self.queue()
            for note in notes:
                queue.push(note)
        queue = self.feedback
        return queue.drain() if len(queue) else ""

    def take_feedback(self, now: bool = False) -> str:
        """The queued ``[watchdog]`` block, taken now (delivered once; "" when nothing is
        queued, or below ``feedback`` mode, where nothing reaches the model). ``now``: told in
        the turn in progress (its header says so), not at a turn's start."""
        queue = self.feedback
        if not len(queue):
            return ""
        block = queue.drain(now)
        return block if self.mode >= Mode.FEEDBACK else ""

    def queue(self) -> FeedbackQueue:
        """The queue to push notes to: the session's own, made at the first."""
        queue = self.feedback
        if queue.shared:
            queue = self.feedback = FeedbackQueue(queue.capacity)
        return queue

    def restore_turn(self, feedback: tuple[tuple[str, str], ...], cut: Decision | None) -> None:
        """A turn row's state (``durability.rows.TurnRow``): the queue as it was kept, and the
        signal that cut the turn in progress (its cut's first critical alert: the watchdog cut
        it), so the turn's end keeps the escalation count as it would have in one process."""
        if feedback or len(self.feedback):
            self.queue().restore(feedback)
        critical = [a for a in cut.alerts if a.critical] if cut is not None else []
        self.turn_cut_signal = critical[0].signal if critical else None

    def words_matter(self) -> bool:
        """Whether agent words now would withdraw queued notes (batch ingest asks: a text
        stops the batch only then; any other queued note, a repeated-text warning say, would
        make every later text of the session a stop)."""
        return self.mode >= Mode.FEEDBACK and (self.feedback.answerable() or any(
            for_model and alert.signal in WITHDRAWN_BY_WORDS for alert, for_model in self.pending))

    def withdraw_answered(self) -> None:
        """The agent spoke: queued notes its words answer (``withdrawn_by_words``) are moot."""
        withdrawn = self.feedback.withdraw_answered()
        answered = [alert for alert, for_model in self.pending
                    if for_model and alert.signal in WITHDRAWN_BY_WORDS]
        if answered:
            self.pending = tuple((alert, for_model and alert.signal not in WITHDRAWN_BY_WORDS)
                                 for alert, for_model in self.pending)
            withdrawn.extend(answered)
        for alert in withdrawn:
            self._channel.emit("feedback_withdrawn", lines.note_withdrawn(alert),
                               guardrail="watchdog", alert=alert, event=alert.event)

    # -- resets and persistence --------------------------------------------------------------

    @property
    def halt_reason(self) -> str | None:
        return self.halt[0] if self.halt is not None else None

    @property
    def halt_alert(self) -> Alert | None:
        return self.halt[1] if self.halt is not None else None

    def reset(self) -> None:
        """Clear the watchdog's halt (an operator reset: ``durability.reset.OperatorReset``).
        The queued feedback stays, so the resumed model learns why it was stopped; the
        watchdog's run state goes (a resumed run must build back up to a threshold)."""
        self.halt = None
        self.cut_signal, self.cut_in_a_row = None, 0
        if self.engine is not None:
            self.engine.reset()

    def snapshot(self) -> tuple[str | None, int]:
        """What a spend row carries of this policy (``rows.EscalationCounts``: the signal that
        cut the last turns, and how many in a row; ``fold_history`` reads it back)."""
        return self.cut_signal, self.cut_in_a_row

    def apply(self, folded: Folded, *, tell_model: bool = True) -> None:
        """Take a folded history forward in this mode: the escalation count; a halt feeds back
        to the model (feedback and up; not with ``tell_model`` False: a session whose queue is
        durable restores the queue itself) and holds the session (enforce). Nothing in ``off``
        mode (no watchdog)."""
        if self.engine is None:
            return
        self.cut_signal = folded.watchdog_cut_signal
        self.cut_in_a_row = folded.watchdog_in_a_row
        halt = folded.watchdog_halt
        if halt is not None and tell_model and self.mode >= Mode.FEEDBACK:
            # the resumed model must learn why it was stopped, even after a restart
            self.queue().push(Alert(
                RESTORED_SIGNAL, CRITICAL, SESSION, halt.reason,
                "Before a restart this session was halted for a runaway pattern "
                f"({halt.signal}): {halt.guidance or halt.reason} "
                "Do not resume that pattern.", -1, None, 0))
        if halt is not None and self.mode == Mode.ENFORCE:
            self.halt = (halt.reason, self.halt_alert)

    def hold(self, reason: str) -> None:
        """Halt without an alert: a history that cannot be trusted to show no halt."""
        self.halt = (reason, self.halt_alert)

    def sync(self, folded: Folded) -> bool:
        """An operator reset written to the store elsewhere clears this halt; True if it did."""
        if self.halt_reason is not None and folded.watchdog_halt is None \
                and folded.tampered is None:
            self.reset()
            return True
        return False
