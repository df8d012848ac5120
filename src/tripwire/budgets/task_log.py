"""A task's durable side (SPEC §7.1, §5): ``TaskLog``, the rows a ``Task`` writes and how it
folds them back.

With a ``store``, the task's start (objective, caps, start time), its consumption (written at
every step, stop attempt, retry, review, note and exhaustion, and at turn ends; tool calls are
written with the next such row), its children, its raises and check-ins and its outcome are
rows of the store's hash chain, under the reserved session id ``task:<task_id>``
(``task_rows.task_log_id``); a session's implicit task writes into the session's own chain. A
task constructed again with the same id and store resumes the consumption (folding its rows
forward, never lowering a counter: a restart never refills); a deleted or edited row breaks
the chain, and the task restores *blocked*.

``TaskLog`` is owned by its ``Task`` (``Task.durable``): it holds the log and what the store
holds already (``written``: a budget row is written only when something worth one moved), and
reads and writes the task's public fields. A task without a log whose store would hold a fresh
task's state (most: a fleet's sessions without a store) shares one, ``NO_LOG``, until that
changes. ``TaskDurable`` is the part of ``Task`` that writes, shares and restores its rows.
"""

from __future__ import annotations

import contextlib
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any, Protocol, cast

from ..durability.rows import (
    BudgetRow,
    CheckInRow,
    OutcomeRow,
    RaiseRow,
    StoredRow,
    TaskRecord,
    TaskRow,
)
from .calls import NEVER
from .caps import CONSUMED, COUNTERS, Exhaustion
from .outcomes import Outcome, Report

if TYPE_CHECKING:
    from ..durability.log import SessionLog

__all__ = ["TaskLog", "TaskDurable", "NO_LOG", "FRESH", "storable"]

#: Counters a budget row is written for when they move (and are capped).
_WRITTEN = ("tool_calls", "steps", "tokens", "usd", "stop_rejections", "retries", "reviews")


#: The state of a task that used nothing yet (``TaskLog.state``), shared by every such task.
FRESH: tuple[Any, ...] = ((0,) * len(_WRITTEN), 0, False, (0,) * len(COUNTERS), None)


class Task(Protocol):
    """What a task's durable side reads and writes of it (``task.Task`` is one; a protocol:
    the task module imports this one)."""

    task_id: str
    caps: dict[str, Any]
    checkin: dict[str, Any] | None
    children: tuple[Any, ...]
    exhausted: Exhaustion | None
    noted: dict[str, int]
    started_at: float | None
    tool_timeouts: int
    tampered: str | None
    outcome: Outcome | None

    def report(self) -> Report: ...

    def start_row(self) -> TaskRecord: ...

    def set_note_level(self, counter: str, level: int) -> None: ...

    def apply_raise(self, row: RaiseRow) -> None: ...

    def apply_check_in(self, row: CheckInRow) -> None: ...


class TaskLog:
    """The durable side of one task: its log (None: not durable) and the state of the task
    the store holds (``written``; None while the task's start row is not written yet).
    ``start``: a task sharing a session's chain owes its start row (its caps, which ``status``
    shows), written before its first budget row unless the chain holds one already."""

    __slots__ = ("log", "written", "start")

    def __init__(self, log: SessionLog | None = None):
        self.log = log
        self.written: tuple[Any, ...] | None = None
        self.start = False

    @property
    def store(self) -> Any:
        return self.log.store if self.log is not None else None

    def put(self, row: StoredRow) -> None:
        if self.log is not None:
            self.log.put(row)

    def flush(self) -> bool:
        return self.log is None or self.log.flush()

    @staticmethod
    def state(task: Task) -> tuple[Any, ...]:
        """What a budget row must keep: the capped and windowed counters (a row carries every
        counter, but only such a one moving is worth a write: nothing else can be exhausted), the
        children, notes, exhaustion, and the start time when a deadline counts from it."""
        caps, windows = task.caps, task.checkin
        used = tuple(getattr(task, c) if caps[c] else 0 for c in _WRITTEN) if windows is None \
            else tuple(getattr(task, c) if caps[c] or c in windows else 0 for c in _WRITTEN)
        return (used, len(task.children), task.exhausted is not None, tuple(task.noted.values()),
                task.started_at if caps["deadline_s"] else None)

    @classmethod
    def written_state(cls, task: Task) -> tuple[Any, ...]:
        """``task``'s state as the store is to hold it: ``FRESH``, shared, when it used
        nothing yet (as most tasks when constructed), not three tuples of its own."""
        state = cls.state(task)
        return FRESH if state == FRESH else state

    @staticmethod
    def snapshot(task: Task) -> BudgetRow:
        return BudgetRow(task.task_id,
                         {c: getattr(task, c) for c in CONSUMED if c != "deadline_s"},
                         task.tool_timeouts, {c: n for c, n in task.noted.items() if n},
                         task.exhausted.to_dict() if task.exhausted else None,
                         tuple(c.task_id for c in task.children), task.started_at)

    def persist_budget(self, task: Task) -> None:
        """A budget row, if the store does not hold this consumption yet."""
        if self.log is None:
            return
        state = self.state(task)
        if state != self.written:
            self.write(task, state)

    def write(self, task: Task, state: tuple[Any, ...] | None = None) -> None:
        """A budget row of the task's consumption now (after its start row, if it owes one)."""
        assert self.log is not None
        self.written = self.state(task) if state is None else state
        if self.start:
            self.start = False
            self.log.put(task.start_row())
        self.log.put(self.snapshot(task))

    def restore(self, task: Task, history: Any) -> None:
        """Fold the task's stored rows into ``task`` (its construction)."""
        log = self.log
        assert log is not None
        folded = log.read(history)
        if folded is None:
            return
        rows = [r for r in folded.task_rows if r.task == task.task_id]
        if folded.tampered is not None:
            task.tampered = folded.tampered
        if not rows and task.tampered is None:
            return
        self.written = ()
        apply_rows(task, rows)


def apply_rows(task: Task, rows: Sequence[TaskRecord]) -> None:
    """Fold a task's rows forward (never lowering a counter: a restart never refills)."""
    for row in rows:
        if isinstance(row, OutcomeRow):
            if row.outcome is not None:
                task.outcome = _restored_outcome(row, task.report())
            continue
        if isinstance(row, RaiseRow):
            task.apply_raise(row)
            continue
        if isinstance(row, CheckInRow):
            task.apply_check_in(row)
            continue
        if row.started_at is not None:
            task.started_at = float(row.started_at)
        if isinstance(row, BudgetRow):
            _apply_budget(task, row)


def _apply_budget(task: Task, row: BudgetRow) -> None:
    used = row.used
    if used is not None:
        for c in CONSUMED:
            v = used.get(c)
            if isinstance(v, int) and not isinstance(v, bool) and v < NEVER:
                setattr(task, c, max(getattr(task, c), v))
    if row.tool_timeouts is not None:
        task.tool_timeouts = max(task.tool_timeouts, row.tool_timeouts)
    if row.noted is not None:
        for c, n in row.noted.items():
            if c in task.noted and isinstance(n, int) and n > task.noted[c]:
                task.set_note_level(c, n)
    if row.exhausted is not None:
        with contextlib.suppress(KeyError, TypeError, ValueError):
            task.exhausted = Exhaustion.from_dict(row.exhausted)


def storable(value: Any) -> Any:
    """An outcome's dict, with values the store cannot hold made text."""
    if value is None or isinstance(value, (str, bool, int, float)):
        return value
    if isinstance(value, (list, tuple)):
        return [storable(v) for v in value]
    if isinstance(value, Mapping):
        return {str(k): storable(v) for k, v in value.items()}
    return str(value)


def _restored_outcome(row: OutcomeRow, report: Report) -> Outcome:
    return Outcome(str(row.outcome), row.task if row.task is not None else report.task_id,
                   report, counter=row.counter, by_task=row.by_task, guardrail=row.guardrail,
                   reason=row.reason or "", answer=row.answer, verified=row.verified,
                   evidence=row.evidence)


#: The durable side of every task without a log that the store would hold ``FRESH`` of (most
#: tasks: one object, not one each). Never changed: a task that would change it (a log given,
#: a start deferred, another state marked written) makes its own first (``TaskDurable._own_log``).
NO_LOG = TaskLog()
NO_LOG.written = FRESH


class TaskDurable:
    """Writing and restoring a task's rows: a part of ``Task`` (its fields are ``Task``'s)."""

    if not TYPE_CHECKING:
        __slots__ = ()  # the fields are Task's
    durable: TaskLog
    lock: Any
    if TYPE_CHECKING:
        @property
        def chain(self) -> tuple[Any, ...]: ...

        def remark(self) -> None: ...

    def _persist_chain(self) -> None:
        for t in self.chain:
            t.durable.persist_budget(t)

    def persist(self) -> None:
        """Write the consumption if the store does not hold it yet (at a turn end)."""
        with self.lock:
            self._persist_chain()

    def flush(self) -> bool:
        return self.durable.flush()

    def seal(self) -> None:
        """Write the consumption now, every counter as it is, capped or not (a host whose
        process ends with the event: the hook, at the end of a turn)."""
        with self.lock:
            if self.durable.log is not None:
                self.durable.write(cast(Task, self))

    def apply_rows(self, rows: Sequence[TaskRecord]) -> None:
        """Fold a task's rows forward (never lowering a counter: a restart never refills)."""
        apply_rows(cast(Task, self), rows)

    def share_log(self, log: SessionLog | None) -> bool:
        """A session's implicit task writes into the session's own chain (``log``), when it
        has no log of its own yet; whether it does now."""
        durable = self.durable
        if durable.log is None and log is not None:
            if durable is NO_LOG:  # the store held a fresh task's state: it still does
                self.durable = durable = TaskLog(log)
                durable.written = FRESH
            else:
                durable.log = log
            durable.start = True  # unless its rows come back with the session's (restore_from)
        return log is not None and durable.log is log

    def writes_to(self, log: SessionLog | None) -> bool:
        """Whether the task's rows go into ``log`` (a session's implicit task's do)."""
        return log is not None and self.durable.log is log

    def defer_start(self) -> None:
        """Write the task's start row at the next write (a deadline counts from its start,
        which the first decision point fixes)."""
        self._own_log().written = None

    def _own_log(self) -> TaskLog:
        """The task's own ``TaskLog`` (made now if it shares ``NO_LOG``)."""
        durable = self.durable
        if durable is NO_LOG:
            self.durable = durable = TaskLog()
        return durable

    def mark_written(self) -> None:
        """The store holds the task's state as it is now (a task without a log keeps sharing
        ``NO_LOG`` while that is ``FRESH``)."""
        state = TaskLog.written_state(cast(Task, self))
        if state is not FRESH or self.durable is not NO_LOG:
            self._own_log().written = state

    def restore_from(self, rows: Sequence[TaskRecord]) -> None:
        """Fold rows read back with the session whose chain the task shares; the store holds
        the state they give."""
        with self.lock:
            apply_rows(cast(Task, self), rows)
            if any(type(r) is TaskRow for r in rows):
                self.durable.start = False
            self.remark()
            self.mark_written()
