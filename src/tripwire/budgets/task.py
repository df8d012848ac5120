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

import contextlib
import threading
import uuid
from collections import deque
from collections.abc import Callable, Mapping, Sequence
from dataclasses import replace
from typing import TYPE_CHECKING, Any

from ..base.money import NANO, parse_dollars, to_nano
from ..base.validate import MAX_TOKENS, check_count
from ..durability.rows import BudgetRow, OutcomeRow, StoredRow, TaskRecord, TaskRow
from ..errors import ConfigError
from .calls import NEVER, CallCounter, call_mark
from .caps import (
    CONSUMED,
    COUNTERS,
    NOTE_LEVELS,
    NOTE_SIGNAL,
    SPENT,
    Budget,
    Exhaustion,
    exhaustion_reason,
    note_text,
)
from .clock import WALL_CLOCK
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
from .task_rows import task_log_id

if TYPE_CHECKING:
    from ..durability.log import SessionLog

__all__ = ["Task", "HISTORY"]

#: Cuts and halts a task's report keeps (the latest; earlier ones are counted): a session cut
#: turn after turn for a million calls used to add some 21 MB to its task.
HISTORY = 64
#: Counters a budget row is written for when they move (and are capped).
_WRITTEN = ("tool_calls", "steps", "tokens", "usd", "stop_rejections", "retries", "reviews")
#: The note levels of a task that has had no note (shared; copied on the first).
_NOT_NOTED: dict[str, int] = dict.fromkeys(COUNTERS, 0)


class Task:
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
        "_ended_at",
        "_log",
        "_noted",
        "_written",
        "acceptance",
        "budget",
        "calls",
        "caps",
        "chain",
        "children",
        "clock",
        "exhausted",
        "history",
        "history_dropped",
        "last_answer",
        "lock",
        "notes",
        "objective",
        "outcome",
        "parent",
        "retries",
        "reviews",
        "revision",
        "sessions",
        "started_at",
        "steps",
        "stop_rejections",
        "tampered",
        "task_id",
        "tokens",
        "tool_timeouts",
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
        self.task_id = task_id or uuid.uuid4().hex
        self.objective = objective
        self.acceptance = acceptance
        self.parent = _parent
        self.children: tuple[Task, ...] = ()
        self.chain: tuple[Task, ...] = (self,) if _parent is None else (self, *_parent.chain)
        if _parent is None:
            self.budget = (budget or Budget()).over(Budget.defaults(unattended))
        else:  # a child's unset caps are off: the parent's own caps bound it anyway
            self.budget = (budget or Budget()).over(Budget.defaults(False).over(
                Budget(steps=0, stop_rejections=0, reviews=0)))
        self.caps = self.budget.internal_caps()  # shared by the tasks of one Budget: read-only
        self.calls: Any = CallCounter()      # tool_calls and call_mark (or the native twin)
        self.steps = self.tokens = self.usd = 0
        self.stop_rejections = self.retries = self.reviews = self.tool_timeouts = 0
        self._noted = _NOT_NOTED              # copied on the first note (most tasks have none)
        # model-facing notes not delivered yet: (signal, text)
        self.notes: tuple[tuple[str, str], ...] = ()
        self.exhausted: Exhaustion | None = None
        self.outcome: Outcome | None = None
        self.tampered: str | None = None
        self.clock: Callable[[], float | None] = clock if clock is not None else (
            _parent.clock if _parent is not None else WALL_CLOCK)
        self.lock: Any = _parent.lock if _parent is not None else (
            _lock if _lock is not None else threading.RLock())
        self.sessions: list[Any] = []        # the BudgetPolicy of each session run under it
        # cuts and halts of its sessions, the latest HISTORY of them (``history_dropped``
        # earlier ones: a session cut turn after turn must not grow the task without bound)
        self.history: deque[dict[str, Any]] = deque(maxlen=HISTORY)
        self.history_dropped = 0
        self.revision = 0                    # the context revision (the supervisor's staleness)
        self.last_answer: Any = None
        self._written: tuple[Any, ...] | None = None
        self._ended_at: float | None = None
        self.started_at: float | None = self.clock()
        self._log = _log
        if _log is None and store is not None:
            from ..durability.log import SessionLog
            self._log = SessionLog(store, task_log_id(self.task_id),
                                   lambda text: f"[task {self.task_id}] {text}")
        if self._log is not None:
            self._restore(_history)
        if _parent is not None:
            _parent.children = (*_parent.children, self)
        self.remark()
        if self._log is not None and self._written is None:
            self._persist(TaskRow(self.task_id, objective,
                                  _parent.task_id if _parent else None,
                                  self.budget.to_dict(), self.started_at))
            if _parent is not None:
                _parent._persist_budget()
        self._written = self._state()  # what the store holds (nothing to write yet)

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

    # -- children ------------------------------------------------------------------------------

    def child(self, allowance: Budget | Mapping[str, Any] | None = None, *, objective: str = "",
              task_id: str | None = None, acceptance: Any = None) -> Task:
        """A sub-task with caps of its own (``allowance``); its consumption is charged to it
        and to every ancestor at once. Durable when this task is (same store; a stable
        ``task_id`` restores it)."""
        store = self._log.store if self._log is not None else None
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
        if (self.parent is not None or self.children or len(self.sessions) > 1
                or self.exhausted is not None or self.outcome is not None
                or self.tampered is not None or any(
                    t.caps["deadline_s"] or t.caps["tool_timeout_s"] for t in self.chain)):
            self.call_mark = 0
        else:
            self.call_mark = call_mark(cap, self._noted["tool_calls"])

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
        tool calls, charged along the chain at once. Only for a chain that caps none of
        these (nor time): nothing can then be noted or exhausted, and nothing new is worth a
        store row (a bounded chain's rows are charged one by one)."""
        with self.lock:
            for t in self.chain:
                t.steps += steps
                t.tokens += tokens
                t.usd += nano
                t.tool_calls += calls

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
            for c in counters:
                cap = t.caps[c]
                if cap is None:
                    continue
                used = t._used(c, now)
                level = t._noted[c]
                while level < len(NOTE_LEVELS) and used >= cap * NOTE_LEVELS[level]:
                    level += 1
                if level != t._noted[c]:  # one note, however many levels one charge passed
                    t._set_noted(c, level)
                    if not t._over(c, used, cap):
                        shown = used / NANO if c == "usd" else used
                        t.notes += ((NOTE_SIGNAL, note_text(c, shown, cap / NANO if c == "usd"
                                                            else cap)),)
                if t._over(c, used, cap):
                    if first is None:
                        first = (t, c)
                    if t.exhausted is None:
                        t._exhaust(c, t)
        if first is not None and self.exhausted is None:
            self._exhaust(first[1], first[0])
        for t in self.chain:
            t.remark()
        return self.exhausted_by()

    def _exhaust(self, counter: str, by: Task) -> None:
        used, cap = by._used(counter), by.caps[counter]
        assert cap is not None
        scale = NANO if counter == "usd" else 1
        reason = exhaustion_reason(counter, self.task_id, None if by is self else by.task_id,
                                   used / scale, cap / scale)
        self.exhausted = Exhaustion(counter, self.task_id, by.task_id, used / scale, cap / scale,
                                    max(0.0, (cap - used) / scale), reason)
        self._ended_at = self.clock()
        self._persist_budget()
        self._end(Outcome(EXHAUSTED, self.task_id, self.report(), counter=counter,
                          by_task=by.task_id, reason=reason, answer=self.last_answer,
                          verified=False))

    def _set_noted(self, counter: str, level: int) -> None:
        if self._noted is _NOT_NOTED:
            self._noted = dict(_NOT_NOTED)
        self._noted[counter] = level

    def exhausted_by(self) -> Exhaustion | None:
        """This task's exhaustion, or one of an ancestor's that reaches it (an ancestor whose
        allowance is used up exhausts the task at its next charge or turn)."""
        if self.exhausted is not None:
            return self.exhausted
        for t in self.chain[1:]:
            if t.exhausted is not None and t.exhausted.by_task == t.task_id:
                with self.lock:
                    if self.exhausted is None:
                        self._exhaust(t.exhausted.counter, t)
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
            if len(self.history) == HISTORY:
                self.history_dropped += 1
            self.history.append(entry)

    # -- ending ----------------------------------------------------------------------------------

    def _end(self, outcome: Outcome) -> Outcome:
        self.outcome = outcome
        if self._ended_at is None:
            self._ended_at = self.clock()
        self._persist(OutcomeRow.of_outcome(self.task_id, _storable(outcome.to_dict())))
        if self._log is not None:
            self._log.flush()  # written before it is returned
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

    # -- durability ------------------------------------------------------------------------------

    def _snapshot(self) -> BudgetRow:
        return BudgetRow(self.task_id,
                         {c: getattr(self, c) for c in CONSUMED if c != "deadline_s"},
                         self.tool_timeouts, {c: n for c, n in self._noted.items() if n},
                         self.exhausted.to_dict() if self.exhausted else None,
                         tuple(c.task_id for c in self.children), self.started_at)

    def _persist(self, row: StoredRow) -> None:
        if self._log is not None:
            self._log.put(row)

    def _persist_budget(self) -> None:
        """A budget row, if the store does not hold this consumption yet."""
        if self._log is None:
            return
        state = self._state()
        if state != self._written:
            self._written = state
            self._persist(self._snapshot())

    def _state(self) -> tuple[Any, ...]:
        """What a budget row must keep: the capped counters (a row carries every counter,
        but only a capped one moving is worth a write: nothing else can be exhausted), the
        children, notes, exhaustion, and the start time when a deadline counts from it."""
        caps = self.caps
        return (tuple(getattr(self, c) if caps[c] else 0 for c in _WRITTEN),
                len(self.children), self.exhausted is not None, tuple(self._noted.values()),
                self.started_at if caps["deadline_s"] else None)

    def _persist_chain(self) -> None:
        for t in self.chain:
            t._persist_budget()

    def persist(self) -> None:
        """Write the consumption if the store does not hold it yet (at a turn end)."""
        with self.lock:
            self._persist_chain()

    def flush(self) -> bool:
        return self._log is None or self._log.flush()

    def _restore(self, history: Any) -> None:
        log = self._log
        assert log is not None
        folded = log.read(history)
        if folded is None:
            return
        rows = [r for r in folded.task_rows if r.task == self.task_id]
        if folded.tampered is not None:
            self.tampered = folded.tampered
        if not rows and self.tampered is None:
            return
        self._written = ()
        self.apply_rows(rows)

    def apply_rows(self, rows: Sequence[TaskRecord]) -> None:
        """Fold a task's rows forward (never lowering a counter: a restart never refills)."""
        for row in rows:
            if isinstance(row, OutcomeRow):
                if row.outcome is not None:
                    self.outcome = _restored_outcome(row, self.report())
                continue
            if row.started_at is not None:
                self.started_at = float(row.started_at)
            if isinstance(row, BudgetRow):
                self._apply_budget(row)

    def _apply_budget(self, row: BudgetRow) -> None:
        used = row.used
        if used is not None:
            for c in CONSUMED:
                v = used.get(c)
                if isinstance(v, int) and not isinstance(v, bool) and v < NEVER:
                    setattr(self, c, max(getattr(self, c), v))
        if row.tool_timeouts is not None:
            self.tool_timeouts = max(self.tool_timeouts, row.tool_timeouts)
        if row.noted is not None:
            for c, n in row.noted.items():
                if c in self._noted and isinstance(n, int) and n > self._noted[c]:
                    self._set_noted(c, n)
        if row.exhausted is not None:
            with contextlib.suppress(KeyError, TypeError, ValueError):
                self.exhausted = Exhaustion.from_dict(row.exhausted)


def _storable(value: Any) -> Any:
    """An outcome's dict, with values the store cannot hold made text."""
    if value is None or isinstance(value, (str, bool, int, float)):
        return value
    if isinstance(value, (list, tuple)):
        return [_storable(v) for v in value]
    if isinstance(value, Mapping):
        return {str(k): _storable(v) for k, v in value.items()}
    return str(value)


def _restored_outcome(row: OutcomeRow, report: Report) -> Outcome:
    return Outcome(str(row.outcome), row.task if row.task is not None else report.task_id,
                   report, counter=row.counter, by_task=row.by_task, guardrail=row.guardrail,
                   reason=row.reason or "", answer=row.answer, verified=row.verified,
                   evidence=row.evidence)
