"""The ``Task`` a budget is charged to (SPEC §7.1): its identity, its children, the tree's lock,
its counters (``Budget``'s caps, ``caps.py``) and its outcome (``outcomes.py``).

A *task* is one objective, run as one or more sessions and turns, possibly with child tasks
(sub-agents, deliberation passes, retried attempts).

Children draw from the parent: ``task.child(allowance)`` gives the child caps of its own; every
unit the child consumes is charged to the child and to every ancestor at the same moment. A charge
that passes the child's cap exhausts the child; one that passes an ancestor's cap exhausts the
child naming that ancestor (``Exhaustion.by_task``; the ancestor, whose allowance is used up, is
exhausted too). An allowance is a cap, not a reservation.

Budget notes: when a counter passes 50% and again 80% of its cap, the task queues a note for the
model (``caps.note_text``), delivered in the ``[watchdog]`` block at the next turn start of a
session running the task (``feedback`` and ``enforce`` modes). At 100% the task is exhausted; its
outcome is ``exhausted(<counter>)``.

Time comes from the host's clock (``clock.py``).

Durability: with a ``store``, the task's start (objective, caps, start time), its consumption
(written at every step, stop attempt, retry, review, note and exhaustion, and at turn ends; tool
calls are written with the next such row), its children and its outcome are rows of the store's
hash chain, under the reserved session id ``task:<task_id>`` (a session's implicit task writes
into the session's own chain). A task constructed again with the same id and store resumes the
consumption; a deleted or edited row breaks the chain, and the task restores *blocked*.

Thread-safety: one lock per task tree: every charge takes it, but for the tool-call fast path
of a task one session runs alone (``calls.py``).
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any

from ..base.money import NANO, parse_dollars, to_nano
from ..base.validate import MAX_TOKENS, check_count
from ..durability.rows import TaskRow
from ..errors import ConfigError
from .calls import NEVER, CallCounter, call_mark
from .caps import (
    CHECKIN,
    CONSUMED,
    COUNTERS,
    NOTE_LEVELS,
    NOTE_SIGNAL,
    SPENT,
    Budget,
    Exhaustion,
    note_text,
)
from .clock import WALL_CLOCK
from .outcomes import Outcome
from .task_ending import HISTORY, TaskOutcomes
from .task_log import NO_LOG, TaskDurable, TaskLog
from .task_rare import RareFields, TaskRare
from .task_resume import TaskResume
from .task_rows import task_log_id

if TYPE_CHECKING:
    from ..durability.log import SessionLog

__all__ = ["Task", "HISTORY"]

#: The note levels of a task that has had no note (shared; copied on the first).
_NOT_NOTED: dict[str, int] = dict.fromkeys(COUNTERS, 0)
#: The counters batch ingest charges as totals (``charge_batch``).
_BATCHED = ("steps", "tokens", "usd", "tool_calls")


class Task(TaskOutcomes, TaskResume, TaskDurable, RareFields):
    """The unit a budget is charged to. ``task.child(allowance)`` makes a sub-task; a
    ``Guardrails`` (``task=``) or ``Fleet.session(id, task=)`` runs a session under it, and its
    observations charge it (usage: steps, tokens, usd; calls: tool_calls). A host charges what
    tripwire cannot see: ``step()`` (no usage events), ``on_stop_attempt``, ``on_retry``; a
    progress supervisor ``charge("reviews")`` and ``charge_usage(...)`` for its own model
    call, ``tell(text)`` for its guidance, and reads ``remaining()``, ``objective``,
    ``acceptance`` and ``revision``. It ends with ``finish``, ``interrupt`` or ``block`` (or on
    its own when a counter is exhausted); ``outcome`` is then its ``Outcome``.

    ``budget``: caps (unset counters take the defaults of ``unattended``: a bare task is off
    but for stop rejections and reviews). ``acceptance``: the acceptance criteria, for the
    progress supervisor. ``clock``: seconds (see ``WallClock``, ``ReplayClock``). ``store``:
    durable (see the module's docstring; the ``task_id`` must then be stable across restarts).

    What the sessions running it read: ``clock`` (the one given, or the parent's, or the wall
    clock), ``lock`` (the tree's lock, re-entrant: held by every charge, and by a session
    changing what the task's fast path depends on), ``calls`` (the tool-call counter the fast
    path increments, a plain attribute read once per call: ``calls.py``).
    """

    # calls, clock and lock: public (documented above); calls is a slot, not a property: the
    # fast path reads it on every call
    __slots__ = (
        "__weakref__",
        "_chain",     # (self, *the parent's chain) of a child; None: a root's, (self,)
        "_rare",      # the rarely-set fields (``task_rare``), None until one is set
        "_sessions",  # the BudgetPolicy running it: (), one policy, or a tuple of several
        "budget",
        "calls",
        "caps",
        "clock",
        "durable",
        "exhausted",
        "lock",
        "noted",
        "outcome",
        "started_at",
        "steps",
        "task_id",
        "tokens",
        "usd",
    )

    def __init__(self, objective: str = "", budget: Budget | Mapping[str, Any] | None = None, *,
                 task_id: str | None = None, acceptance: Any = None,
                 clock: Callable[[], float | None] | None = None, store: Any = None,
                 unattended: bool = False, _parent: Task | None = None,
                 _log: SessionLog | None = None, _history: Any = None,
                 _lock: Any = None):  # re-entrant: an RLock or a session's own lock
        if task_id is not None and (type(task_id) is not str or not task_id):
            raise ConfigError(f"task_id must be a non-empty str, not {task_id!r}")
        if not isinstance(objective, str):
            raise ConfigError(f"objective must be a str, not {type(objective).__name__}")
        if isinstance(budget, Mapping):
            budget = Budget.from_mapping(budget)
        elif budget is not None and not isinstance(budget, Budget):
            raise ConfigError(f"budget must be a Budget or a mapping, not "
                              f"{type(budget).__name__}")
        self.task_id = task_id or _anonymous_id()
        self._rare: TaskRare | None = None
        self.objective = objective
        self.acceptance = acceptance
        self._chain: tuple[Task, ...] | None = None if _parent is None else (self, *_parent.chain)
        if _parent is None:
            self.budget = (budget or Budget()).over(Budget.defaults(unattended))
        else:  # a child's unset caps are off: the parent's own caps bound it anyway
            self.budget = (budget or Budget()).over(Budget.defaults(False).over(
                Budget(steps=0, stop_rejections=0, reviews=0)))
        self.caps = self.budget.internal_caps()  # shared by the tasks of one Budget: read-only
        self.checkin = self.budget.internal_checkin()  # check-in windows (``task_resume``)
        self.calls: Any = CallCounter()      # tool_calls and call_mark (or the native twin)
        self.steps = self.tokens = self.usd = 0
        self.noted = _NOT_NOTED  # note levels given per counter: copied on the first note
        self.exhausted: Exhaustion | None = None
        self.outcome: Outcome | None = None
        self.clock: Callable[[], float | None] = clock if clock is not None else (
            _parent.clock if _parent is not None else WALL_CLOCK)
        self.lock: Any = _parent.lock if _parent is not None else (
            _lock if _lock is not None else threading.RLock())
        self._sessions: Any = ()
        self.started_at: float | None = self.clock()
        # the rows it writes (``task_log``; the shared NO_LOG while it has no log)
        self.durable = durable = NO_LOG if _log is None else TaskLog(_log)
        if _log is None and store is not None:
            from ..durability.log import SessionLog
            self.durable = durable = TaskLog(SessionLog(
                store, task_log_id(self.task_id), lambda text: f"[task {self.task_id}] {text}"))
        if durable.log is not None:
            durable.restore(self, _history)
        if _parent is not None:
            _parent.children = (*_parent.children, self)
        self.remark()
        if durable.log is not None and durable.written is None:
            durable.put(self.start_row())
            if _parent is not None:
                _parent.durable.persist_budget(_parent)
        self.mark_written()  # what the store holds (nothing to write yet)

    def start_row(self) -> TaskRow:
        """The task's start as the store keeps it: its objective, parent, caps and start."""
        parent = self.chain[1] if len(self.chain) > 1 else None
        return TaskRow(self.task_id, self.objective, parent.task_id if parent else None,
                       self.budget.to_dict(), self.started_at)

    def __repr__(self) -> str:
        state = str(self.outcome) if self.outcome else (
            f"exhausted({self.exhausted.counter})" if self.exhausted else "running")
        return f"<Task {self.task_id!r} {state} steps={self.steps} tool_calls={self.tool_calls}>"

    @property
    def tool_calls(self) -> int:
        """Tool calls consumed."""
        value: int = self.calls.tool_calls
        return value

    @tool_calls.setter
    def tool_calls(self, value: int) -> None:
        self.calls.tool_calls = value

    @property
    def call_mark(self) -> int:
        """The fast path's gate: the tool-call count at which something may happen (a note,
        the cap), or 0 when every call must take the locked path (see ``remark``)."""
        value: int = self.calls.call_mark
        return value

    @call_mark.setter
    def call_mark(self, value: int) -> None:
        self.calls.call_mark = value

    def use_call_counter(self, counter: Any) -> None:
        """Count tool calls in ``counter`` from now on: the native twin of ``CallCounter``
        (``_native.CallCounter``), holding the same two numbers, which a native session that
        runs the task alone swaps in (under the tree's lock) to keep them in its own core."""
        self.calls = counter

    # -- the tree and the sessions running it -----------------------------------------------------

    @property
    def chain(self) -> tuple[Task, ...]:
        """The task and its ancestors, nearest first (charged together)."""
        chain = self._chain
        return (self,) if chain is None else chain

    @property
    def parent(self) -> Task | None:
        chain = self._chain
        return None if chain is None else chain[1]

    @property
    def sessions(self) -> tuple[Any, ...]:
        """The ``BudgetPolicy`` of each session running the task, in the order they joined."""
        sessions = self._sessions
        return sessions if type(sessions) is tuple else (sessions,)

    def join(self, policy: Any) -> None:
        """A session runs the task from now on (its ``BudgetPolicy``; the tree's lock held)."""
        sessions = self.sessions
        self._sessions = (*sessions, policy) if sessions else policy
        self.remark()

    def leave(self, policy: Any) -> None:
        """The session of ``policy`` no longer runs the task (the tree's lock held)."""
        sessions = tuple(p for p in self.sessions if p is not policy)
        self._sessions = sessions[0] if len(sessions) == 1 else sessions
        self.remark()

    # -- children ------------------------------------------------------------------------------

    def child(self, allowance: Budget | Mapping[str, Any] | None = None, *, objective: str = "",
              task_id: str | None = None, acceptance: Any = None) -> Task:
        """A sub-task with caps of its own (``allowance``); its consumption is charged to it
        and to every ancestor at once. Durable when this task is (same store; a stable
        ``task_id`` restores it)."""
        store = self.durable.store
        with self.lock:
            child = Task(objective, allowance, task_id=task_id, acceptance=acceptance,
                         _parent=self, store=store)
            for t in self.chain:
                t.remark()
            return child

    # -- charging ------------------------------------------------------------------------------

    def _now(self) -> float | None:
        now = self.clock()
        if now is not None and self.started_at is None:
            self.started_at = now
        return now

    def elapsed(self, now: float | None = None) -> float:
        """Seconds since the task first started (0 while time is unknown)."""
        if now is None:
            now = self._ended_at if self._ended_at is not None else self.clock()
        if now is None or self.started_at is None:
            return 0.0
        return max(0.0, now - self.started_at)

    def _used(self, counter: str, now: float | None = None) -> float:
        if counter == "deadline_s":
            return self.elapsed(now)
        value: int = getattr(self, counter)
        return value

    def _over(self, counter: str, used: float, cap: float) -> bool:
        return used >= cap if counter in SPENT else used > cap

    def remark(self) -> None:
        """Recompute the fast path's gate, ``call_mark``: the tool-call count at which
        something may happen (a note, the cap), or 0 when every call must take the locked path
        (a child or a parent, several sessions, an exhaustion or outcome, a clock-based cap).
        Whoever changes one of these calls it, under the tree's lock (a session joining or
        leaving the task: ``BudgetPolicy``)."""
        cap = self.caps["tool_calls"]
        rare = self._rare  # a root's chain is itself: a child's ancestors are checked above
        if (self._chain is not None or (type(self._sessions) is tuple and self._sessions)
                or self.exhausted is not None or self.outcome is not None
                or (rare is not None and (rare.children or rare.tampered is not None
                                          or rare.checkin is not None))
                or self.caps["deadline_s"] or self.caps["tool_timeout_s"]):
            self.call_mark = 0
        else:
            self.call_mark = call_mark(cap, self.noted["tool_calls"])

    def charge(self, counter: str, units: float = 1) -> Exhaustion | None:
        """Charge ``units`` of ``counter`` to this task and every ancestor at once; returns the
        exhaustion it caused or found (None while within every cap). ``usd`` in dollars."""
        if counter not in CONSUMED or counter == "deadline_s":
            raise ConfigError(f"cannot charge {counter!r}: one of "
                              f"{', '.join(c for c in CONSUMED if c != 'deadline_s')}")
        amount = round(units * NANO) if counter == "usd" else int(units)
        if amount < 0:
            raise ConfigError(f"a charge is not negative: {units!r}")
        if amount >= NEVER:  # counters are 64-bit integers in the native core
            raise ConfigError(f"a charge is below 2**62 units: {units!r}")
        with self.lock:
            for t in self.chain:
                setattr(t, counter, getattr(t, counter) + amount)
            found = self._check((counter,))
            if counter != "tool_calls" or found is not None:
                self._persist_chain()
            return found

    def charge_request(self, tokens: int, nano: int) -> Exhaustion | None:
        """One model request, its figures checked already (the budget policy's, for an observed
        usage): a step, its tokens and its cost (nano-dollars), charged along the chain."""
        with self.lock:
            for t in self.chain:
                t.steps += 1
                t.tokens += tokens
                t.usd += nano
            found = self._check(("steps", "tokens", "usd", "deadline_s"))
            self._persist_chain()
            return found

    def charge_batch(self, steps: int, tokens: int, nano: int, calls: int) -> None:
        """Batch ingest's totals for the rows of one session it observed since its last
        hand-back (``Fleet.observe_many``): model steps, their tokens and cost (nano-dollars),
        tool calls, charged along the chain at once. The core charges a capped counter only
        below its next mark (``usage_room``), so nothing is noted or exhausted here; should
        the chain have been charged meanwhile by another thread, the check below still notes
        and exhausts, late rather than never. The consumption is then written (one budget row
        for the totals, when a capped counter moved)."""
        with self.lock:
            for t in self.chain:
                t.steps += steps
                t.tokens += tokens
                t.usd += nano
                t.tool_calls += calls
            if any(t.caps[c] for t in self.chain for c in _BATCHED):
                self._check(_BATCHED)
                self._persist_chain()

    def charge_usage(self, input_tokens: int | None = None, output_tokens: int | None = None,
                     cost_usd: float | None = None) -> Exhaustion | None:
        """One model request tripwire did not observe (the progress supervisor's, say): a
        step, its tokens and its cost, charged along the chain."""
        tokens = 0
        for v, what in ((input_tokens, "input_tokens"), (output_tokens, "output_tokens")):
            tokens += check_count(v, what, MAX_TOKENS, ConfigError) or 0
        nano = to_nano(parse_dollars(cost_usd, "cost_usd", allow_none=True) or 0.0)
        return self.charge_request(tokens, nano)

    def tell(self, text: str, signal: str = "progress-supervisor") -> None:
        """Queue a model-facing note (e.g. a supervisor's redirect): it joins the
        ``[watchdog]`` block at the next turn start of a session running this task, as
        ``- <signal>: <text>`` (``feedback`` and ``enforce`` modes)."""
        if not isinstance(text, str) or not text.strip():
            raise ConfigError("a note is a non-empty str")
        with self.lock:
            self.notes += ((signal, text),)

    def step(self, n: int = 1) -> Exhaustion | None:
        """Charge ``n`` model steps (for a host that reports no usage)."""
        return self.charge("steps", n)

    def on_retry(self, reason: str = "") -> Exhaustion | None:
        """One transport/provider retry of a failed model request (not a tool failure)."""
        return self.charge("retries")

    def on_stop_attempt(self, accepted: bool, answer: Any = None) -> Exhaustion | None:
        """The agent tried to finish and a stop hook accepted (``accepted``) or refused it.
        Past the ``stop_rejections`` cap the refused attempt exhausts the task, with the last
        answer attached, unverified."""
        if not isinstance(accepted, bool):
            raise ConfigError(f"accepted must be true or false, not {accepted!r}")
        if answer is not None:
            self.last_answer = answer
        if accepted:
            return self.exhausted_by()
        return self.charge("stop_rejections")

    def check_time(self) -> Exhaustion | None:
        """Judge the deadline now (observations do it too)."""
        with self.lock:
            return self._check(("deadline_s",))

    def _check(self, counters: tuple[str, ...]) -> Exhaustion | None:
        """After a charge: notes crossed and caps passed along the chain (lock held)."""
        now = self._now() if "deadline_s" in counters else None
        first: tuple[Task, str] | None = None
        for t in self.chain:
            windows = t.checkin
            for c in counters:
                cap = t.caps[c]
                if cap is not None:
                    used = t._used(c, now)
                    level = t.noted[c]
                    while level < len(NOTE_LEVELS) and used >= cap * NOTE_LEVELS[level]:
                        level += 1
                    if level != t.noted[c]:  # one note, however many levels one charge passed
                        t.set_note_level(c, level)
                        if not t._over(c, used, cap):
                            shown = used / NANO if c == "usd" else used
                            t.notes += ((NOTE_SIGNAL, note_text(
                                c, shown, cap / NANO if c == "usd" else cap)),)
                    if t._over(c, used, cap):
                        if first is None:
                            first = (t, c)
                        if t.exhausted is None:
                            t.mark_exhausted(c, t)
                if windows is not None and c in windows and t.window_over(c, windows[c], now):
                    if first is None:  # a check-in window: paused until the next check-in
                        first = (t, CHECKIN + c)
                    if t.exhausted is None:
                        t.mark_exhausted(CHECKIN + c, t)
        if first is not None and self.exhausted is None:
            self.mark_exhausted(first[1], first[0])
        for t in self.chain:
            t.remark()
        return self.exhausted_by()

    def set_note_level(self, counter: str, level: int) -> None:
        """The budget notes of ``counter`` given so far: ``level`` of ``NOTE_LEVELS``."""
        if self.noted is _NOT_NOTED:
            self.noted = dict(_NOT_NOTED)
        self.noted[counter] = level


def _anonymous_id() -> str:
    """A task's id when its host names none (a session's own task is named after it, so a
    hook event never imports ``uuid``)."""
    import uuid

    return uuid.uuid4().hex
