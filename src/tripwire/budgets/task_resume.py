"""Budgets that pause, raise and resume (SPEC §13): ``TaskResume``, the part of ``Task`` that
continues an exhausted task without pretending its spending never happened.

- ``task.raise_cap(counter, by=…)`` raises the task's cap of ``counter`` by ``by`` (its units:
  dollars for ``usd``, seconds for ``deadline_s``). The consumption is never reset. A raise
  that would leave the counter exhausted is refused (``RaiseRefused``, naming the smallest
  sufficient raise, ``raise_needed``); so is a bare resume (``by=0`` of an exhausted counter),
  as the cost ceiling's bare reset is. A raise of a task exhausted by its ancestor's allowance
  is refused too, naming the ancestor: raise that one. A raise that is enough continues the
  task: its exhaustion is lifted, its outcome is no longer final (``continued`` keeps the
  exhausted outcome; ``raises`` the raises), and the next turn starts. A child exhausted by this
  task's allowance resumes with it (at its next charge or turn).
- Check-in windows: ``Budget(checkin={"tool_calls": 50, "usd": 1.0})`` bounds what the task
  may consume between two check-ins of its operator. Reaching a window pauses the task
  (``exhausted(checkin:<counter>)``) until ``task.check_in()``, which opens a new window for
  every counter without touching the task's totals.

Durable: a raise is a ``raise`` row, a check-in a ``checkin`` row of the task's chain
(``durability.rows``), folded back in order by the next process (``task_log``); deleting one
breaks the chain, which ``tripwire verify`` reports.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from ..base.money import NANO
from ..durability.rows import CheckInRow, RaiseRow
from ..errors import ConfigError, RaiseRefused, TaskEnded
from .caps import CHECKIN, CONSUMED, NOTE_LEVELS, SPENT, Exhaustion
from .outcomes import EXHAUSTED, Outcome
from .task_log import TaskLog

__all__ = ["TaskResume", "smallest_raise"]


def _scale(counter: str) -> int:
    return NANO if counter == "usd" else 1


def smallest_raise(counter: str, used: float, cap: float) -> float:
    """The smallest raise of a cap of ``counter`` (``used`` and ``cap`` as a task counts them:
    nano-dollars for ``usd``) that leaves it not exhausted, in the counter's units (dollars for
    ``usd``): a spent counter needs its cap above the use, an attempt counter at it."""
    if counter == "deadline_s":
        return max(0.0, math.floor(used - cap) + 1.0)
    short = int(used - cap) + (1 if counter in SPENT else 0)
    return max(0, short) / NANO if counter == "usd" else max(0, short)


class TaskResume:
    """Raising caps and check-ins: a part of ``Task`` (its fields are ``Task``'s)."""

    if not TYPE_CHECKING:
        __slots__ = ()  # the fields are Task's
    task_id: str
    budget: Any
    caps: dict[str, Any]
    checkin: dict[str, Any] | None
    windows: dict[str, float]
    lock: Any
    clock: Callable[[], float | None]
    outcome: Outcome | None
    exhausted: Exhaustion | None
    durable: TaskLog
    noted: dict[str, int]
    raises: tuple[RaiseRow, ...]
    check_ins: int
    continued: tuple[Outcome, ...]
    _ended_at: float | None

    if TYPE_CHECKING:
        @property
        def chain(self) -> tuple[Any, ...]: ...

        def _used(self, counter: str, now: float | None = None) -> float: ...

        def _check(self, counters: tuple[str, ...]) -> Exhaustion | None: ...

        def _persist_chain(self) -> None: ...

        def set_note_level(self, counter: str, level: int) -> None: ...

        def cap(self, counter: str) -> float | None: ...

        def remark(self) -> None: ...

    # -- raising a cap ---------------------------------------------------------------------------

    def raise_cap(self, counter: str, by: float, *, who: str | None = None) -> float:
        """Raise the cap of ``counter`` by ``by`` (dollars for ``usd``, seconds for
        ``deadline_s``); returns the new cap. Continues the task when ``counter`` exhausted
        it; ``RaiseRefused`` (nothing changed) when the raise would leave it exhausted,
        ``TaskEnded`` when the task ended otherwise (answered, interrupted, halted,
        blocked). ``who``: who raised it, for the row (None: the library)."""
        if counter not in CONSUMED:
            hint = " (a check-in window is opened by check_in())" \
                if counter.startswith(CHECKIN) else ""
            raise ConfigError(f"cannot raise {counter!r}{hint}: one of {', '.join(CONSUMED)}")
        if isinstance(by, bool) or not isinstance(by, (int, float)) or not math.isfinite(by) \
                or by < 0 or by > 2**53:
            raise ConfigError(f"a raise is a number of at least 0, not {by!r}")
        amount: float = by if counter == "deadline_s" else round(by * _scale(counter))
        with self.lock:
            ended = self.outcome
            if ended is not None and ended.kind != EXHAUSTED:
                raise TaskEnded(ended)
            cap = self.caps[counter]
            if cap is None:
                raise ConfigError(f"task {self.task_id} has no cap of {counter} to raise")
            ex = self.exhausted
            if ex is not None and ex.counter == counter and ex.by_task != self.task_id:
                scale = _scale(counter)
                raise RaiseRefused(ex.by_task, counter, smallest_raise(
                    counter, ex.used * scale, ex.cap * scale), ex.used, ex.cap,
                    exhausted_task=self.task_id)
            now = self.clock() if counter == "deadline_s" else None
            used = self._used(counter, now)
            new = cap + amount
            if (used >= new) if counter in SPENT else (used > new):
                scale = _scale(counter)
                raise RaiseRefused(self.task_id, counter, smallest_raise(counter, used, cap),
                                   used / scale, cap / scale)
            resumed = counter if ex is not None and ex.counter == counter else None
            if counter == "usd":
                amount = int(amount)
            row = RaiseRow(self.task_id, counter, amount, new, used, resumed, None, who)
            self.durable.put(row)
            self.apply_raise(row)
            self.after_resume()
            return self.cap(counter) or 0.0

    def apply_raise(self, row: RaiseRow) -> None:
        """A raise row (made now, or read back): the cap raised to the row's (never lowered:
        a host that configures more keeps it), the exhaustion it resumed lifted."""
        counter, cap = row.counter, row.cap
        if counter in CONSUMED and cap is not None and cap > (self.caps[counter] or 0):
            shown = cap / NANO if counter == "usd" else cap  # a raise never lowers a cap
            self.budget = self.budget.with_cap(counter, shown)
            self.caps = {**self.caps, counter: cap}
            used = self._used(counter)
            self.set_note_level(counter, sum(1 for level in NOTE_LEVELS if used >= cap * level))
        self.raises += (row,)
        self._lift(row.resumed, row.via)

    def _lift(self, counter: str | None, via: str | None) -> None:
        """Lift the exhaustion of ``counter`` by this task (``via`` None) or by ``via``."""
        ex = self.exhausted
        if counter is None or ex is None or ex.counter != counter or \
                ex.by_task != (self.task_id if via is None else via):
            return
        if self.outcome is not None:
            self.continued += (self.outcome,)
        self.exhausted = self.outcome = self._ended_at = None

    def after_resume(self) -> None:
        """After a raise or check-in (lock held): every counter judged again (another may
        stand exhausted), the gates recomputed, the state written."""
        self._check(CONSUMED)
        self._persist_chain()
        self.durable.flush()

    def resume_from_ancestor(self) -> bool:
        """This task is exhausted by an ancestor's allowance (or check-in window) that stands
        no longer (raised, checked in): resume it, with a row saying so. Whether it did."""
        ex = self.exhausted
        if ex is None or ex.by_task == self.task_id:
            return False
        for t in self.chain[1:]:
            if t.task_id == ex.by_task:
                gone = t.exhausted is None or t.exhausted.counter != ex.counter
                if gone and not t.exceeds(ex.counter):
                    with self.lock:
                        row = RaiseRow(self.task_id, ex.counter, 0, None, None, ex.counter,
                                       t.task_id)
                        self.durable.put(row)
                        self.apply_raise(row)
                        self.after_resume()
                    return self.exhausted is None
        return False

    def exceeds(self, counter: str) -> bool:
        """Whether ``counter`` (or a ``checkin:<counter>`` window) is past this task's cap."""
        if counter.startswith(CHECKIN):
            base = counter[len(CHECKIN):]
            window = (self.checkin or {}).get(base)
            return window is not None and bool(self.window_over(base, window))
        cap = self.caps.get(counter)
        if cap is None:
            return False
        used = self._used(counter)
        return bool(used >= cap if counter in SPENT else used > cap)

    def sync_stored(self) -> bool:
        """Take the raises and check-ins another process wrote into the task's chain since
        (``tripwire reset --task``, ``serve``): a session calls it at a turn start while the
        task is exhausted. Whether one was taken."""
        log = self.durable.log
        folded = log.read() if log is not None and not len(log) else None
        if folded is None:
            return False
        seen: dict[type, int] = {RaiseRow: len(self.raises), CheckInRow: self.check_ins}
        taken = False
        with self.lock:
            for row in folded.task_rows:
                if row.task != self.task_id or not isinstance(row, RaiseRow | CheckInRow):
                    continue
                if seen[type(row)]:
                    seen[type(row)] -= 1
                    continue
                if isinstance(row, RaiseRow):
                    self.apply_raise(row)
                else:
                    self.apply_check_in(row)
                taken = True
            if taken:
                self.after_resume()
        return taken

    # -- check-in windows ------------------------------------------------------------------------

    def window_used(self, counter: str, now: float | None = None) -> float:
        """Units of ``counter`` consumed since the last check-in (as the task counts them)."""
        return self._used(counter, now) - self.windows.get(counter, 0)

    def window_over(self, counter: str, window: float, now: float | None = None) -> bool:
        used = self.window_used(counter, now)
        return used >= window if counter in SPENT else used > window

    def check_in(self, *, who: str | None = None) -> bool:
        """The operator checked in (a hook's user prompt, ``POST /tasks/{id}/check-in``): a
        new check-in window opens for every windowed counter, counted from the consumption
        now (the totals untouched); a task paused at a window continues. Nothing happens to
        a task without check-in windows. Whether a window opened."""
        if self.checkin is None:
            return False
        with self.lock:
            ended = self.outcome
            if ended is not None and ended.kind != EXHAUSTED:
                raise TaskEnded(ended)
            now = self.clock() if "deadline_s" in self.checkin else None
            window = {c: self._used(c, now) for c in self.checkin}
            ex = self.exhausted
            resumed = ex.counter if ex is not None and ex.counter.startswith(CHECKIN) \
                and ex.by_task == self.task_id else None
            row = CheckInRow(self.task_id, window, resumed, who)
            self.durable.put(row)
            self.apply_check_in(row)
            self.after_resume()
            return True

    def apply_check_in(self, row: CheckInRow) -> None:
        """A check-in row (made now, or read back): the new window, the pause it ended
        lifted."""
        if row.window:
            for c, start in row.window.items():
                if c in CONSUMED and isinstance(start, (int, float)) and \
                        not isinstance(start, bool):
                    self.windows = {**self.windows, c: start}
        self.check_ins += 1
        self._lift(row.resumed, None)
