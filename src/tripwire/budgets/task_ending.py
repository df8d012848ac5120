"""What a ``Task`` reports and how it ends (SPEC §7.2): ``TaskOutcomes``, the part of
``Task`` that reads its counters as people do (``used``, ``cap``, ``remaining``, ``report``)
and ends it in exactly one ``Outcome`` (``finish``, ``exhaust``, ``interrupt``, ``block``).

An exhausted task is never reported as answered: ``finish(answer)`` on an exhausted task
returns the exhausted outcome with the answer attached, unverified. Outcomes are written to the
store (``task_log``) before they are returned.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable
from dataclasses import replace
from typing import TYPE_CHECKING, Any

from ..base.money import NANO
from ..durability.rows import OutcomeRow
from .caps import CHECKIN, CONSUMED, COUNTERS, Exhaustion, exhaustion_reason
from .outcomes import (
    ANSWERED,
    BLOCKED,
    EXHAUSTED,
    HALTED,
    INTERRUPTED,
    CounterReport,
    Outcome,
    Report,
    UncertainCall,
)
from .task_log import TaskLog, storable

__all__ = ["TaskOutcomes", "HISTORY"]

#: Cuts and halts a task's report keeps (the latest; earlier ones are counted): a session cut
#: turn after turn for a million calls used to add some 21 MB to its task.
HISTORY = 64


class TaskOutcomes:
    """Reading and ending a task: a part of ``Task`` (its fields are ``Task``'s)."""

    if not TYPE_CHECKING:
        __slots__ = ()  # the fields are Task's
    task_id: str
    revision: int
    noted: dict[str, int]
    started_at: float | None
    objective: str
    caps: dict[str, Any]
    checkin: dict[str, Any] | None
    children: tuple[Any, ...]
    history: deque[dict[str, Any]] | tuple[()]
    history_dropped: int
    tool_timeouts: int
    _chain: tuple[Any, ...] | None  # a child's chain (``Task.chain``)
    lock: Any
    clock: Callable[[], float | None]
    outcome: Outcome | None
    last_answer: Any
    tampered: str | None
    durable: TaskLog
    _ended_at: float | None

    exhausted: Exhaustion | None
    if TYPE_CHECKING:
        @property
        def chain(self) -> tuple[Any, ...]: ...  # (Task, ...): the task module imports this one

        @property
        def sessions(self) -> tuple[Any, ...]: ...

        def _used(self, counter: str, now: float | None = None) -> float: ...

        def set_note_level(self, counter: str, level: int) -> None: ...

        def resume_from_ancestor(self) -> bool: ...

        def apply_raise(self, row: Any) -> None: ...

        def start_row(self) -> Any: ...  # TaskRow (the task module's)

        def apply_check_in(self, row: Any) -> None: ...

    # -- exhaustion ------------------------------------------------------------------------------

    def mark_exhausted(self, counter: str, by: Any) -> None:
        """``counter`` of task ``by`` (this one or an ancestor) passed its cap: the task is
        exhausted (the tree's own call, under its lock)."""
        if counter.startswith(CHECKIN):  # a check-in window
            base = counter[len(CHECKIN):]
            used, cap = by.window_used(base), by.checkin[base]
        else:
            base = counter
            used = by.elapsed() if counter == "deadline_s" else getattr(by, counter)
            cap = by.caps[counter]
        assert cap is not None
        scale = NANO if base == "usd" else 1
        reason = exhaustion_reason(counter, self.task_id, None if by is self else by.task_id,
                                   used / scale, cap / scale)
        self.exhausted = Exhaustion(counter, self.task_id, by.task_id, used / scale, cap / scale,
                                    max(0.0, (cap - used) / scale), reason)
        self._ended_at = self.clock()
        self.durable.persist_budget(self)
        self._end(Outcome(EXHAUSTED, self.task_id, self.report(), counter=counter,
                          by_task=by.task_id, reason=reason, answer=self.last_answer,
                          verified=False))

    def exhausted_by(self) -> Exhaustion | None:
        """This task's exhaustion, or one of an ancestor's that reaches it (an ancestor whose
        allowance is used up exhausts the task at its next charge or turn)."""
        ex = self.exhausted
        if ex is not None:
            if ex.by_task == self.task_id or not self.resume_from_ancestor():
                return ex
            if self.exhausted is not None:
                return self.exhausted
        for t in self._chain[1:] if self._chain is not None else ():  # its ancestors
            if t.exhausted is not None and t.exhausted.by_task == t.task_id:
                with self.lock:
                    if self.exhausted is None:
                        self.mark_exhausted(t.exhausted.counter, t)
                return self.exhausted
        return None

    # -- reading ---------------------------------------------------------------------------------

    def used(self, counter: str) -> float:
        """Units of ``counter`` consumed (``usd`` in dollars, ``deadline_s`` seconds elapsed)."""
        if counter not in COUNTERS:
            raise KeyError(counter)
        if counter == "tool_timeout_s":
            return float(self.tool_timeouts)
        value = self._used(counter)
        return value / NANO if counter == "usd" else value

    def cap(self, counter: str) -> float | None:
        cap = self.caps[counter]
        return None if cap is None else (cap / NANO if counter == "usd" else cap)

    def remaining(self) -> dict[str, float | None]:
        """Every counter's remaining allowance, the tightest along the chain (None: no cap)."""
        out: dict[str, float | None] = {}
        for c in CONSUMED:
            left: float | None = None
            for t in self.chain:
                cap = t.cap(c)
                if cap is not None:
                    r = max(0.0, cap - t.used(c))
                    left = r if left is None else min(left, r)
            out[c] = left
        return out

    def counters(self) -> tuple[CounterReport, ...]:
        out = []
        for c in COUNTERS:
            if c == "tool_timeout_s":
                out.append(CounterReport(c, float(self.tool_timeouts), self.cap(c)))
            else:
                out.append(CounterReport(c, self.used(c), self.cap(c)))
        return tuple(out)

    def report(self, unfinished: str | None = None) -> Report:
        """Consumption and caps (with the children's), uncertain calls, history."""
        uncertain: list[UncertainCall] = []
        for policy in self.sessions:
            uncertain.extend(policy.uncertain())
        return Report(self.task_id, self.objective, self.counters(),
                      tuple(c.report() for c in self.children), tuple(uncertain),
                      self.tool_timeouts, unfinished, tuple(self.history),
                      self.history_dropped)

    def record(self, entry: dict[str, Any]) -> None:
        """One cut or halt of a session running this task, for its report (the latest
        ``HISTORY`` are kept; the earlier ones are counted)."""
        with self.lock:
            history = self.history
            if not isinstance(history, deque):  # the first: made now (most tasks never cut)
                history = self.history = deque(maxlen=HISTORY)
            if len(history) == HISTORY:
                self.history_dropped += 1
            history.append(entry)

    # -- ending ----------------------------------------------------------------------------------

    def _end(self, outcome: Outcome) -> Outcome:
        self.outcome = outcome
        if self._ended_at is None:
            self._ended_at = self.clock()
        durable = self.durable
        if durable.log is not None:
            durable.put(OutcomeRow.of_outcome(self.task_id, storable(outcome.to_dict())))
            durable.flush()  # written before it is returned
        for t in self.chain:
            t.remark()
        return outcome

    def finish(self, answer: Any = None, *, evidence: Any = None,
               unfinished: str | None = None) -> Outcome:
        """The host finishes the task with ``answer``: ``answered``, unless a counter is
        exhausted (the exhausted outcome, the answer attached unverified), the task's history
        could not be trusted (``blocked``) or a session of it is halted (``halted``)."""
        with self.lock:
            if answer is not None:
                self.last_answer = answer
            current = self.outcome
            if current is not None:
                if current.kind == EXHAUSTED and answer is not None:
                    return self._end(replace(current, answer=answer, verified=False,
                                             report=self.report(unfinished)))
                return current
            if self.exhausted_by() is not None:
                return self.finish(answer, unfinished=unfinished)
            if self.tampered is not None:
                return self._end(Outcome(BLOCKED, self.task_id, self.report(unfinished),
                                         reason="history_tampered", answer=answer))
            for policy in self.sessions:
                halted = policy.halted_by()
                if halted:
                    return self._end(Outcome(HALTED, self.task_id, self.report(unfinished),
                                             guardrail=halted, answer=answer))
            return self._end(Outcome(ANSWERED, self.task_id, self.report(unfinished),
                                     answer=answer, verified=True, evidence=evidence))

    def exhaust(self, counter: str, reason: str, *, answer: Any = None,
                unfinished: str | None = None) -> Outcome:
        """The host ended the task on a cap of its own of ``counter`` (a harness's max turns
        is ``steps``, its max budget ``usd``): ``exhausted(counter)`` by this task, the answer
        attached unverified. A task that already has an outcome keeps it."""
        if counter not in COUNTERS:
            raise KeyError(counter)
        with self.lock:
            if answer is not None:
                self.last_answer = answer
            if self.outcome is not None:
                return self.outcome
            return self._end(Outcome(EXHAUSTED, self.task_id, self.report(unfinished),
                                     counter=counter, by_task=self.task_id, reason=reason,
                                     answer=self.last_answer, verified=False))

    def interrupt(self, reason: str = "cancelled", *, unfinished: str | None = None) -> Outcome:
        """The host or an operator cancelled the task (an exhausted task stays exhausted)."""
        return self._stop(INTERRUPTED, reason, unfinished)

    def block(self, reason: str, *, unfinished: str | None = None,
              evidence: Any = None) -> Outcome:
        """The task is stopped as blocked (the supervisor's ``stop_blocked``, an unavailable
        supervisor); an exhausted task stays exhausted."""
        return self._stop(BLOCKED, reason, unfinished, evidence)

    def _stop(self, kind: str, reason: str, unfinished: str | None,
              evidence: Any = None) -> Outcome:
        with self.lock:
            if self.outcome is not None:
                return self.outcome
            if self.exhausted_by() is not None:
                assert self.outcome is not None
                return self.outcome
            return self._end(Outcome(kind, self.task_id, self.report(unfinished), reason=reason,
                                     answer=self.last_answer, evidence=evidence))

    @property
    def ended(self) -> bool:
        return self.outcome is not None

    def new_revision(self) -> int:
        """The task's context changed (new user input, a compaction): a supervisor decision
        about an older revision is stale. Returns the new revision."""
        self.revision += 1
        return self.revision
