"""``BudgetPolicy``: what a task's budget does to one session running it (SPEC §7.1).

One job: charge the session's observations to its ``Task`` (usage: steps, tokens, usd; calls:
tool calls) and turn what the task says into the session's decisions — under ``enforce`` an
exhausted task cuts the turn in flight and refuses later turns (guardrail ``budget``); below
``enforce`` the exhaustion is reported and recorded, nothing is cut. A call without its result
past ``tool_timeout_s`` yields a ``cancel_tool`` decision for its id (in every mode: it is the
harness's call, not a punishment) and counts as a failed result for the watchdog. Budget notes
(50%, 80%) join the ``[watchdog]`` block at the next turn start (``feedback``, ``enforce``).

``Guardrails`` holds the session's lock and dispatches; the tool-call fast path
(``Guardrails.on_call``) increments the task's counter inline while the count is below the
task's ``call_mark`` and calls ``on_call`` here only past it.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any, Protocol

from ..base.decision import CANCEL_TOOL, CUT_TURN, Decision
from ..base.inputs import MAX_CALL_IDS
from ..base.modes import Mode
from ..budgets.caps import NOTE_SIGNAL
from ..budgets.outcomes import UncertainCall
from ..budgets.room import usage_room
from ..budgets.task import Task
from ..errors import ConfigError
from ..signals import Alert
from . import lines

if TYPE_CHECKING:
    from ..durability.fold import Folded
    from ..durability.log import SessionLog
    from .reporting import OperatorChannel

__all__ = ["BudgetSession", "BudgetPolicy", "BUDGET", "NOTE_SIGNAL", "TIMEOUT_ERROR",
           "checked_task"]

#: The guardrail name of budget cuts and refusals.
BUDGET = "budget"
#: The error text of a timed-out call's synthesized failed result.
TIMEOUT_ERROR = "the tool call timed out and was cancelled"


def checked_task(task: Any) -> Task:
    """A task a host gives a session: a tripwire ``Task``, else ``ConfigError``."""
    if not isinstance(task, Task):
        raise ConfigError(f"task must be a tripwire Task, not {type(task).__name__}")
    return task


class BudgetSession(Protocol):
    """What the budget policy reads of the session it charges (``Guardrails`` is one)."""

    @property
    def session_id(self) -> str: ...

    @property
    def durable_log(self) -> SessionLog | None:
        """The session's durable log (None without a store): its implicit task shares it."""
        ...

    @property
    def halted_by(self) -> tuple[str, ...]:
        """The guardrails holding the session halted (empty: not halted)."""
        ...

    def timed_out(self, name: str) -> Decision:
        """A call of tool ``name`` cancelled for its timeout, observed as a failed result."""
        ...


class BudgetPolicy:
    __slots__ = ("_channel", "_reported", "_session", "cancelled", "last_text", "mode", "open",
                 "started", "task")

    def __init__(self, task: Task, session: BudgetSession, mode: Mode,
                 channel: OperatorChannel):
        self.task = task
        self.mode = mode
        self.open: dict[str, str] | None = None  # call id -> tool name, without a result yet
        # timed calls: id -> (name, start); ids of calls cancelled for a timeout (made when
        # first needed: most sessions never time a call)
        self.started: dict[str, tuple[str, float]] | None = None
        self.cancelled: set[str] | None = None
        self.last_text: str | None = None    # the agent's last words (the attempted answer)
        self._channel = channel
        self._session = session
        self._reported: Any = None  # the exhaustion reported (a raise may bring another)
        with task.lock:
            task.join(self)

    def open_calls(self) -> dict[str, str]:
        """``open``, made at the first call id (many hosts give none; the native core keeps
        the dict once made)."""
        if self.open is None:
            self.open = {}
        return self.open

    def detach(self) -> None:
        """The session runs another task from now on: this one is no longer charged."""
        task = self.task
        with task.lock:
            task.leave(self)

    # -- persistence ---------------------------------------------------------------------------

    def snapshot(self) -> dict[str, Any]:
        """Nothing of the session's rows: the task writes its own (``budget`` rows)."""
        return {}

    def apply(self, folded: Folded) -> None:
        """The implicit task shares the session's chain: its rows come back with the
        session's history (a host's task restores from its own chain)."""
        task = self.task
        if not folded.task_rows or not task.writes_to(self._session.durable_log):
            return
        task.restore_from([r for r in folded.task_rows if r.task == task.task_id])

    def share_log(self, log: SessionLog, session_id: str) -> None:
        """A store given after construction: the implicit task writes into the session's
        chain too."""
        task = self.task
        if task.task_id == session_id and not task.sessions[1:]:
            task.share_log(log)

    def batch_room(self) -> tuple[int, int, int] | None:
        """The room below the task's next marks (``budgets.room.usage_room``) for batch ingest to
        charge usage rows in its core, or None when this session's usage rows and calls must
        be charged here: a tree another session also charges (the batch holds this session's
        lock, not the tree's: its room would not be its own, nor would it see a sibling
        exhaust the tree) or a tree too large to look through."""
        return usage_room(self.task, self)

    # -- observations --------------------------------------------------------------------------

    def on_call(self, name: str, id: str | None) -> Decision | None:
        """A tool call past the fast path's gate: charge it along the chain, start its
        timeout; a cut (exhausted) or a cancel for calls timed out meanwhile, or None."""
        task = self.task
        if id is not None:
            self.open_calls()[id] = name
        expired = self.poll_time()
        task.charge("tool_calls")
        if id is not None and self._timeout() is not None:
            now = task.clock()
            if now is not None:
                if self.started is None:
                    self.started = {}
                self.started[id] = (name, now)
        cut = self.exhaustion()
        return cut if cut is not None else expired

    def on_result(self, id: str | None) -> bool:
        """A tool's result: the call has answered. False for the late result of a call
        already cancelled for its timeout (counted as failed then; not observed again)."""
        if id is not None:
            if self.cancelled and id in self.cancelled:
                self.cancelled.discard(id)
                return False
            if self.open:
                self.open.pop(id, None)
            if self.started:
                self.started.pop(id, None)
        return True

    def on_usage(self, input_tokens: int | None, output_tokens: int | None,
                 nano: int) -> Decision | None:
        self.task.charge_request((input_tokens or 0) + (output_tokens or 0), nano)
        return self.exhaustion()

    def on_text(self, text: str) -> None:
        self.last_text = text

    def poll_time(self) -> Decision | None:
        """Clock-based limits now: calls past ``tool_timeout_s`` (a ``cancel_tool``
        decision), the deadline (a cut under enforce)."""
        task = self.task
        cancel = None
        if self.started:
            timeout = self._timeout()
            now = task.clock()
            if timeout is not None and now is not None:
                expired = [(i, n) for i, (n, t0) in self.started.items() if now - t0 >= timeout]
                if expired:
                    cancel = self._cancel(expired, timeout)
        if any(t.caps["deadline_s"] for t in task.chain):
            task.check_time()
            cut = self.exhaustion()
            if cut is not None:
                return cut
        return cancel

    def _timeout(self) -> float | None:
        caps = [t.caps["tool_timeout_s"] for t in self.task.chain if t.caps["tool_timeout_s"]]
        return min(caps) if caps else None

    def _cancel(self, expired: list[tuple[str, str]], timeout: float) -> Decision:
        task = self.task
        alerts: tuple[Alert, ...] = ()
        assert self.started is not None
        if self.cancelled is None:
            self.cancelled = set()
        for ident, name in expired:
            del self.started[ident]
            if self.open:
                self.open.pop(ident, None)
            self.cancelled.add(ident)
            if len(self.cancelled) > MAX_CALL_IDS:
                self.cancelled.clear()
            with task.lock:
                for t in task.chain:
                    t.tool_timeouts += 1
            decision = self._session.timed_out(name)  # a failed result, for the watchdog
            alerts += decision.alerts
            if not decision.proceed:
                return decision
        task.persist()
        ids = tuple(i for i, _ in expired)
        reason = (f"tool call{'s' if len(ids) > 1 else ''} {', '.join(ids)} had no result "
                  f"within {timeout:g} s: cancel {'them' if len(ids) > 1 else 'it'} "
                  "(its side effects are uncertain)")
        decision = Decision(CANCEL_TOOL, BUDGET, reason, alerts, ids)
        self._channel.emit("cancel_tool", reason, level=logging.WARNING, guardrail=BUDGET,
                           decision=decision)
        return decision

    # -- exhaustion ----------------------------------------------------------------------------

    def exhaustion(self) -> Decision | None:
        """The task is exhausted: a cut under ``enforce`` (None below it, after reporting it
        once to the operator)."""
        ex = self.task.exhausted_by()
        if ex is None:
            return None
        first = self._reported is not ex
        self._reported = ex
        if self.mode >= Mode.ENFORCE:
            decision = Decision(CUT_TURN, BUDGET, ex.reason)
            if first:
                self._channel.counters.count_trip(BUDGET)
                self._channel.emit("cut", lines.cut_in_flight("budget guardrail") + ex.reason
                                   + ". The task's later turns are refused.",
                                   level=logging.WARNING, guardrail=BUDGET, decision=decision)
                self.record(decision)
            return decision
        if first:
            self._channel.emit("trip", f"budget guardrail tripped: {ex.reason} (reported "
                               f"only: {self.mode} mode cuts nothing)", level=logging.WARNING,
                               guardrail=BUDGET)
        return None

    def refusal(self) -> str | None:
        """Why a turn is refused before any model call (enforce: an exhausted task, a task
        whose durable history was tampered with), or None."""
        if self.mode < Mode.ENFORCE:
            return None
        task = self.task
        if any(t.caps["deadline_s"] for t in task.chain):
            task.check_time()
        ex = task.exhausted_by()
        if ex is not None:
            return ex.reason
        if task.tampered is not None:
            return task.tampered
        return None

    # -- turns ---------------------------------------------------------------------------------

    def notes(self) -> list[Alert]:
        """The task's notes (budget notes, ``Task.tell``) for the next turn's feedback block
        (taken: delivered once)."""
        task = self.task
        if not task.notes:
            return []
        with task.lock:
            notes, task.notes = task.notes, ()
        if self.mode < Mode.FEEDBACK:
            return []  # nothing reaches the model below feedback: no stale backlog either
        return [Alert(signal, "info", None, text, text, -1) for signal, text in notes]

    def end_turn(self) -> None:
        self.task.persist()
        open_ = self.open  # trimmed in place: the native core holds this dict
        if open_ and len(open_) > MAX_CALL_IDS:  # results that came by name only: keep the newest
            for ident in list(open_)[:-MAX_CALL_IDS]:
                del open_[ident]

    def stop_attempt(self, accepted: bool, answer: Any) -> Decision | None:
        if answer is None:
            answer = self.last_text
        self.task.on_stop_attempt(accepted, answer)
        return self.exhaustion()

    def retry(self, reason: str) -> Decision | None:
        self.task.on_retry(reason)
        return self.exhaustion()

    # -- reports -------------------------------------------------------------------------------

    def record(self, decision: Decision) -> None:
        """A cut or halt of this session, for the task's report."""
        self.task.record({"session": self._session.session_id, "action": decision.action,
                          "guardrail": decision.guardrail, "reason": decision.reason})

    def uncertain(self) -> list[UncertainCall]:
        sid = self._session.session_id
        return [UncertainCall(sid, i, n) for i, n in (self.open or {}).items()]  # None: none

    def halted_by(self) -> str | None:
        by = self._session.halted_by
        return by[0] if by else None

    # batch ingest asks these at every hand-back: a chain of one task reads its budget's
    # (computed once per budget)

    @property
    def usage_armed(self) -> bool:
        """The chain caps steps, tokens or dollars: batch ingest charges this session's usage
        rows in its core only below the next mark (``batch_room``)."""
        chain = self.task.chain
        if len(chain) == 1:
            return bool(chain[0].budget.marks())
        return any(t.budget.marks() for t in chain)

    @property
    def calls_armed(self) -> bool:
        """The chain caps tool calls or time: batch ingest then hands every row of this
        session to Python, which charges and times them one by one."""
        return any(t.budget.calls_armed() for t in self.task.chain)
