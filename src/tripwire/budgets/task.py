"""Task budgets (SPEC §7.1): the ``Task`` a budget is charged to, its counters and children.

A *task* is one objective, run as one or more sessions and turns, possibly with child tasks
(sub-agents, deliberation passes, retried attempts). Its counters are separate and optional:

    counter          one unit is                                         interactive / unattended
    steps            one model request (each usage; or ``task.step()``)      off / 1,000
    tool_calls       one tool call                                          off / off
    tokens           input + output tokens of one usage                     off / off
    usd              the cost of one usage (dollars)                        off / off
    deadline_s       wall-clock seconds since the task first started        off / off
    tool_timeout_s   seconds one tool call may stay without its result      off / off
    stop_rejections  one refusal of the agent's attempt to finish           8 / 8
    retries          one transport/provider retry of a model request        off / off
    reviews          one progress-supervisor call                           10 / 10

``Budget`` holds caps (None: not set here, the default applies; 0: off). Caps are reached in two
ways. Spent counters (``steps``, ``tokens``, ``usd``, ``deadline_s``) measure work already done:
the task is exhausted when the use *reaches* the cap (the 1,000th step exhausts a 1,000-step
task). Attempt counters (``tool_calls``, ``stop_rejections``, ``retries``, ``reviews``) count a
unit before it happens: the unit that would *pass* the cap exhausts (the 9th stop rejection of
a cap of 8). Compaction, retries and resets never refill a counter.

Children draw from the parent: ``task.child(allowance)`` gives the child caps of its own; every
unit the child consumes is charged to the child and to every ancestor at the same moment. A charge
that passes the child's cap exhausts the child; one that passes an ancestor's cap exhausts the
child naming that ancestor (``Exhaustion.by_task``; the ancestor, whose allowance is used up, is
exhausted too). An allowance is a cap, not a reservation.

Budget notes: when a counter passes 50% and again 80% of its cap, the task queues a note for the
model (``You have used 500 of 1,000 model steps for this task.``), delivered in the
``[watchdog]`` block at the next turn start of a session running the task (``feedback`` and
``enforce`` modes). At 100% the task is exhausted; its outcome is ``exhausted(<counter>)``.

Time comes from the host's clock (``clock``: a callable returning seconds; the default is the
wall clock, never running backwards, so a deadline persisted by one process holds in the next).
Replay uses the events' ``ts``.

Durability: with a ``store``, the task's start (objective, caps, start time), its consumption
(written at every step, stop attempt, retry, review, note and exhaustion, and at turn ends; tool
calls are written with the next such row), its children and its outcome are rows of the store's
hash chain, under the reserved session id ``task:<task_id>`` (a session's implicit task writes
into the session's own chain). A task constructed again with the same id and store resumes the
consumption; a deleted or edited row breaks the chain, and the task restores *blocked*.

Thread-safety: one lock per task tree. A task run by one session at a time charges tool calls on
a lock-free fast path (the session's own lock serializes it); a task shared by several sessions,
a child, or a task with a clock-based counter takes the tree's lock on every charge.
"""

from __future__ import annotations

import contextlib
import math
import threading
import time
import uuid
from collections import deque
from collections.abc import Callable, Mapping
from dataclasses import dataclass, fields, replace
from typing import TYPE_CHECKING, Any

from ..base.money import NANO, parse_dollars, to_nano
from ..base.validate import MAX_COUNT, MAX_TOKENS, check_count, shown_value
from ..errors import ConfigError
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

if TYPE_CHECKING:
    from ..durability.log import SessionLog

__all__ = ["Budget", "Task", "Exhaustion", "COUNTERS", "TASK_PREFIX", "WallClock",
           "ReplayClock", "task_log_id"]

#: Every counter, in SPEC §7.1's order.
COUNTERS = ("steps", "tool_calls", "tokens", "usd", "deadline_s", "tool_timeout_s",
            "stop_rejections", "retries", "reviews")
#: Counters whose cap is reached when the use reaches it (the work is already done).
SPENT = frozenset({"steps", "tokens", "usd", "deadline_s"})
#: Counters a task consumes units of (``tool_timeout_s`` is a per-call limit, not consumption).
CONSUMED = tuple(c for c in COUNTERS if c != "tool_timeout_s")
#: Store session ids of tasks start with this (``task:fix-the-test``): reserved.
TASK_PREFIX = "task:"
#: Cuts and halts a task's report keeps (the latest; earlier ones are counted): a session cut
#: turn after turn for a million calls used to add some 21 MB to its task.
HISTORY = 64
#: The signal name budget notes carry in the feedback block.
NOTE_SIGNAL = "task-budget"
#: The note levels: a counter passing 50% and then 80% of its cap.
NOTE_LEVELS = (0.5, 0.8)
#: Counters a budget row is written for when they move (and are capped).
_WRITTEN = ("tool_calls", "steps", "tokens", "usd", "stop_rejections", "retries", "reviews")
#: The note levels of a task that has had no note (shared; copied on the first).
_NOT_NOTED: dict[str, int] = dict.fromkeys(COUNTERS, 0)
#: The fast path's "nothing to check until this count" for a counter without a cap.
_NEVER = 1 << 62
#: The counters batch ingest charges as totals (``charge_batch``).
_BATCHED = ("steps", "tokens", "usd", "tool_calls")
#: Tasks of a tree ``usage_room`` looks through for another session (a larger tree's usage
#: rows are charged one by one).
_MAX_TREE = 64

_NOUNS = {
    "steps": "model steps",
    "tool_calls": "tool calls",
    "tokens": "tokens",
    "stop_rejections": "refused attempts to finish",
    "retries": "model request retries",
    "reviews": "progress reviews",
}


def task_log_id(task_id: str) -> str:
    """The store session id under which a task's rows are chained."""
    return TASK_PREFIX + task_id


class WallClock:
    """Seconds since the epoch, never running backwards (a clock stepped back by the system
    does not hand a task time back)."""

    __slots__ = ("_last",)

    def __init__(self) -> None:
        self._last = 0.0

    def __call__(self) -> float:
        now = time.time()
        if now < self._last:
            return self._last
        self._last = now
        return now


#: The default clock, shared (its only state is the latest reading).
WALL_CLOCK = WallClock()


class ReplayClock:
    """A recording's clock: the ``ts`` of the latest event that carried one (None before
    any did: time is then unknown, and nothing clock-based is judged)."""

    __slots__ = ("now",)

    def __init__(self) -> None:
        self.now: float | None = None

    def advance(self, ts: float | None) -> None:
        if ts is not None and (self.now is None or ts > self.now):
            self.now = ts

    def __call__(self) -> float | None:
        return self.now


def _cap(value: Any, name: str, *, integer: bool) -> float | int | None:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, (int, float)) or \
            (isinstance(value, int) and abs(value) > MAX_COUNT) or \
            not math.isfinite(value) or not 0 <= value <= MAX_COUNT:
        raise ConfigError(f"budget {name} must be a number from 0 (off) to {MAX_COUNT:,}, "
                          f"not {shown_value(value)}")
    if integer and value != int(value):
        raise ConfigError(f"budget {name} counts whole units, not {value!r}")
    return int(value) if integer else float(value)


@dataclass(frozen=True)
class Budget:
    """A task's caps. None: not set here (the default, or the parent's only, applies); 0: off.

    ``usd`` is in dollars; ``deadline_s`` and ``tool_timeout_s`` in seconds."""

    steps: int | None = None
    tool_calls: int | None = None
    tokens: int | None = None
    usd: float | None = None
    deadline_s: float | None = None
    tool_timeout_s: float | None = None
    stop_rejections: int | None = None
    retries: int | None = None
    reviews: int | None = None

    def __post_init__(self) -> None:
        for f in fields(self):
            integer = f.name not in ("usd", "deadline_s", "tool_timeout_s")
            object.__setattr__(self, f.name, _cap(getattr(self, f.name), f.name,
                                                  integer=integer))

    @classmethod
    def defaults(cls, unattended: bool) -> Budget:
        """SPEC §7.1's defaults: 1,000 steps when unattended; 8 stop rejections; 10 reviews.
        Made once each (a Budget is immutable; every task asks for them)."""
        made = _DEFAULTS.get((cls, unattended))
        if made is None:
            made = _DEFAULTS[(cls, unattended)] = cls(
                steps=1000 if unattended else 0, tool_calls=0, tokens=0, usd=0.0,
                deadline_s=0.0, tool_timeout_s=0.0, stop_rejections=8, retries=0, reviews=10)
        return made

    @classmethod
    def from_mapping(cls, data: Mapping[str, Any], where: str = "budget") -> Budget:
        """From a config section or an event's ``budget`` object; unknown keys are errors."""
        if not isinstance(data, Mapping):
            raise ConfigError(f"{where} must be a table/object of counters")
        unknown = sorted(set(data) - set(COUNTERS))
        if unknown:
            raise ConfigError(f"unknown {where} counter(s) {', '.join(map(repr, unknown))} "
                              f"(known: {', '.join(COUNTERS)})")
        return cls(**dict(data))

    def over(self, base: Budget) -> Budget:
        """These caps where set, ``base``'s elsewhere."""
        if all(getattr(self, f.name) is not None for f in fields(self)):
            return self  # complete already (a resolved config's): shared, not copied
        return Budget(**{f.name: getattr(base, f.name) if getattr(self, f.name) is None
                         else getattr(self, f.name) for f in fields(self)})

    def caps(self) -> dict[str, float | int | None]:
        """Every counter's cap, None for off (0 and unset alike)."""
        return {f.name: getattr(self, f.name) or None for f in fields(self)}

    def internal_caps(self) -> dict[str, Any]:
        """``caps()`` with ``usd`` in nano-dollars: what a task counts in. Computed once per
        budget and shared (read-only) by every task made from it."""
        cached: dict[str, Any] | None = self.__dict__.get("_internal")
        if cached is None:
            cached = self.caps()
            if cached["usd"] is not None:
                cached["usd"] = round(cached["usd"] * NANO)
            object.__setattr__(self, "_internal", cached)
        return cached

    def marks(self) -> dict[str, tuple[int, ...]]:
        """The use at which each capped spent counter (steps, tokens, usd in nano-dollars)
        notes at 50%, at 80%, and reaches its cap, by note level: ``used >= cap * f`` (a
        float) exactly when ``used >= ceil(cap * f)``. Computed once per budget, shared."""
        cached: dict[str, tuple[int, ...]] | None = self.__dict__.get("_marks")
        if cached is None:
            caps = self.internal_caps()
            cached = {c: (*(math.ceil(cap * f) for f in NOTE_LEVELS), int(cap))
                      for c in ("steps", "tokens", "usd") if (cap := caps[c]) is not None}
            object.__setattr__(self, "_marks", cached)
        return cached

    def calls_armed(self) -> bool:
        """Tool calls or time capped (each call is charged or timed one by one). Cached."""
        cached: bool | None = self.__dict__.get("_calls_armed")
        if cached is None:
            caps = self.internal_caps()
            cached = any(caps[c] for c in ("tool_calls", "deadline_s", "tool_timeout_s"))
            object.__setattr__(self, "_calls_armed", cached)
        return cached

    def to_dict(self) -> dict[str, Any]:
        return {f.name: getattr(self, f.name) for f in fields(self)
                if getattr(self, f.name) is not None}


#: the default budgets, by (class, unattended)
_DEFAULTS: dict[tuple[type[Budget], bool], Budget] = {}


@dataclass(frozen=True, slots=True)
class Exhaustion:
    """A counter reached its cap. ``task_id`` is the task that exhausted; ``by_task`` the task
    whose cap was passed (itself, or an ancestor); ``used``/``cap``/``remaining`` are that
    task's (``usd`` in dollars)."""

    counter: str
    task_id: str
    by_task: str
    used: float
    cap: float
    remaining: float
    reason: str

    def to_dict(self) -> dict[str, Any]:
        return {"counter": self.counter, "task": self.task_id, "by_task": self.by_task,
                "used": self.used, "cap": self.cap, "remaining": self.remaining,
                "reason": self.reason}

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> Exhaustion:
        return cls(str(d["counter"]), str(d["task"]), str(d["by_task"]), float(d["used"]),
                   float(d["cap"]), float(d["remaining"]), str(d.get("reason", "")))


def _fmt(counter: str, value: float) -> str:
    if counter == "usd":
        return f"${value:.4f}"
    if counter == "deadline_s":
        return f"{value:,.0f} s"
    return f"{int(value):,}"


def note_text(counter: str, used: float, cap: float) -> str:
    """The model-facing budget note (names no operator control)."""
    if counter == "usd":
        return f"You have used {_fmt(counter, used)} of the {_fmt(counter, cap)} allowed for " \
               "this task."
    if counter == "deadline_s":
        return f"You have used {_fmt(counter, used)} of the {_fmt(counter, cap)} of time " \
               "allowed for this task."
    return f"You have used {_fmt(counter, used)} of {_fmt(counter, cap)} " \
           f"{_NOUNS.get(counter, counter)} for this task."


def shown_used(used: Mapping[str, Any]) -> dict[str, Any]:
    """A stored ``used`` map (a budget row's: ``usd`` in nano-dollars, as a task counts it) as
    people read it: ``usd`` in dollars, like every other dollar amount tripwire prints."""
    out = dict(used)
    nano = out.get("usd")
    if isinstance(nano, int) and not isinstance(nano, bool):
        out["usd"] = round(nano / NANO, 9)
    return out


class CallCounter:
    """A task's tool-call count and the fast path's mark, in an object of their own. A task
    starts with this one; a native session that runs it alone swaps in the native twin
    (``_native.CallCounter``, the same two numbers), which keeps them in that session's own
    core while it runs the task, so a call below the mark reads no other object; the session
    hands them back when it leaves the task. ``Task.tool_calls`` and ``Task.call_mark`` read
    and write through whichever it holds."""

    __slots__ = ("call_mark", "tool_calls")

    def __init__(self, tool_calls: int = 0, call_mark: int = 0):
        self.tool_calls = tool_calls
        self.call_mark = call_mark


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
    """

    # the fast path reads _calls (tool_calls and call_mark)
    __slots__ = (
        "__weakref__",
        "_calls",
        "_clock",
        "_ended_at",
        "_lock",
        "_log",
        "_noted",
        "_written",
        "acceptance",
        "budget",
        "caps",
        "chain",
        "children",
        "exhausted",
        "history",
        "history_dropped",
        "last_answer",
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
        self._calls: Any = CallCounter()     # tool_calls and call_mark (or the native twin)
        self.steps = self.tokens = self.usd = 0
        self.stop_rejections = self.retries = self.reviews = self.tool_timeouts = 0
        self._noted = _NOT_NOTED              # copied on the first note (most tasks have none)
        # model-facing notes not delivered yet: (signal, text)
        self.notes: tuple[tuple[str, str], ...] = ()
        self.exhausted: Exhaustion | None = None
        self.outcome: Outcome | None = None
        self.tampered: str | None = None
        self._clock: Callable[[], float | None] = clock if clock is not None else (
            _parent._clock if _parent is not None else WALL_CLOCK)
        self._lock: Any = _parent._lock if _parent is not None else (
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
        self.started_at: float | None = self._clock()
        self._log = _log
        if _log is None and store is not None:
            from ..durability.log import SessionLog
            self._log = SessionLog(store, task_log_id(self.task_id),
                                   lambda text: f"[task {self.task_id}] {text}")
        if self._log is not None:
            self._restore(_history)
        if _parent is not None:
            _parent.children = (*_parent.children, self)
        self._remark()
        if self._log is not None and self._written is None:
            self._persist("task", {"task": self.task_id, "objective": objective,
                                   "parent": _parent.task_id if _parent else None,
                                   "budget": self.budget.to_dict(),
                                   "started_at": self.started_at})
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
        value: int = self._calls.tool_calls
        return value

    @tool_calls.setter
    def tool_calls(self, value: int) -> None:
        self._calls.tool_calls = value

    @property
    def call_mark(self) -> int:
        """The fast path's gate: the tool-call count at which something may happen (a note,
        the cap), or 0 when every call must take the locked path (see ``_remark``)."""
        value: int = self._calls.call_mark
        return value

    @call_mark.setter
    def call_mark(self, value: int) -> None:
        self._calls.call_mark = value

    # -- children ------------------------------------------------------------------------------

    def child(self, allowance: Budget | Mapping[str, Any] | None = None, *, objective: str = "",
              task_id: str | None = None, acceptance: Any = None) -> Task:
        """A sub-task with caps of its own (``allowance``); its consumption is charged to it
        and to every ancestor at once. Durable when this task is (same store; a stable
        ``task_id`` restores it)."""
        store = self._log.store if self._log is not None else None
        with self._lock:
            child = Task(objective, allowance, task_id=task_id, acceptance=acceptance,
                         _parent=self, store=store)
            for t in self.chain:
                t._remark()
            return child

    # -- charging ------------------------------------------------------------------------------

    def _now(self) -> float | None:
        now = self._clock()
        if now is not None and self.started_at is None:
            self.started_at = now
        return now

    def elapsed(self, now: float | None = None) -> float:
        """Seconds since the task first started (0 while time is unknown)."""
        if now is None:
            now = self._ended_at if self._ended_at is not None else self._clock()
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

    def _remark(self) -> None:
        """Recompute the fast path's gate: the tool-call count at which something may happen
        (a note, the cap), or 0 when every call must take the locked path."""
        cap = self.caps["tool_calls"]
        if (self.parent is not None or self.children or len(self.sessions) > 1
                or self.exhausted is not None or self.outcome is not None
                or self.tampered is not None or any(
                    t.caps["deadline_s"] or t.caps["tool_timeout_s"] for t in self.chain)):
            self.call_mark = 0
        elif cap is None:
            self.call_mark = _NEVER
        else:
            level = self._noted["tool_calls"]
            marks = [math.ceil(cap * f) for f in NOTE_LEVELS[level:]] + [int(cap) + 1]
            self.call_mark = max(1, min(marks))

    def charge(self, counter: str, units: float = 1) -> Exhaustion | None:
        """Charge ``units`` of ``counter`` to this task and every ancestor at once; returns the
        exhaustion it caused or found (None while within every cap). ``usd`` in dollars."""
        if counter not in CONSUMED or counter == "deadline_s":
            raise ConfigError(f"cannot charge {counter!r}: one of "
                              f"{', '.join(c for c in CONSUMED if c != 'deadline_s')}")
        amount = round(units * NANO) if counter == "usd" else int(units)
        if amount < 0:
            raise ConfigError(f"a charge is not negative: {units!r}")
        if amount >= _NEVER:  # counters are 64-bit integers in the native core
            raise ConfigError(f"a charge is below 2**62 units: {units!r}")
        with self._lock:
            for t in self.chain:
                setattr(t, counter, getattr(t, counter) + amount)
            found = self._check((counter,))
            if counter != "tool_calls" or found is not None:
                self._persist_chain()
            return found

    def _charge_usage(self, tokens: int, nano: int) -> Exhaustion | None:
        """One model request: a step, its tokens, its cost (nano-dollars)."""
        with self._lock:
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
        with self._lock:
            for t in self.chain:
                t.steps += steps
                t.tokens += tokens
                t.usd += nano
                t.tool_calls += calls
            if any(t.caps[c] for t in self.chain for c in _BATCHED):
                self._check(_BATCHED)
                self._persist_chain()

    def usage_room(self, session: Any) -> tuple[int, int, int] | None:
        """The steps, tokens and nano-dollars this task may be charged before a charge could
        reach a mark: the next note level (50%, 80%) or the cap of that counter, of this task
        or an ancestor (each is charged the same units). A charge that leaves the use below
        every mark notes and exhausts nothing; batch ingest charges those in its core. None
        when a session other than ``session`` (a ``BudgetPolicy``) runs a task of the tree
        (its charges would move the marks unseen), or the tree has more than ``_MAX_TREE``
        tasks."""
        with self._lock:
            if self.parent is not None or self.children or self.sessions[1:] or \
                    (self.sessions and self.sessions[0] is not session):
                seen, todo = 0, [self.chain[-1]]
                while todo:  # the whole tree: a sibling's session charges the ancestors too
                    t = todo.pop()
                    seen += 1
                    if seen > _MAX_TREE or any(p is not session for p in t.sessions):
                        return None
                    todo.extend(t.children)
            steps = tokens = usd = _NEVER - 1
            for t in self.chain:
                noted = t._noted
                for c, mark in t.budget.marks().items():  # the next mark: a note or the cap
                    room = mark[min(noted[c], 2)] - getattr(t, c)
                    if c == "steps":
                        steps = min(steps, room)
                    elif c == "tokens":
                        tokens = min(tokens, room)
                    else:
                        usd = min(usd, room)
            return max(0, steps), max(0, tokens), max(0, usd)

    def charge_usage(self, input_tokens: int | None = None, output_tokens: int | None = None,
                     cost_usd: float | None = None) -> Exhaustion | None:
        """One model request tripwire did not observe (the progress supervisor's, say): a
        step, its tokens and its cost, charged along the chain."""
        tokens = 0
        for v, what in ((input_tokens, "input_tokens"), (output_tokens, "output_tokens")):
            tokens += check_count(v, what, MAX_TOKENS, ConfigError) or 0
        nano = to_nano(parse_dollars(cost_usd, "cost_usd", allow_none=True) or 0.0)
        return self._charge_usage(tokens, nano)

    def tell(self, text: str, signal: str = "progress-supervisor") -> None:
        """Queue a model-facing note (e.g. a supervisor's redirect): it joins the
        ``[watchdog]`` block at the next turn start of a session running this task, as
        ``- <signal>: <text>`` (``feedback`` and ``enforce`` modes)."""
        if not isinstance(text, str) or not text.strip():
            raise ConfigError("a note is a non-empty str")
        with self._lock:
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
        with self._lock:
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
            t._remark()
        return self.exhausted_by()

    def _exhaust(self, counter: str, by: Task) -> None:
        used, cap = by._used(counter), by.caps[counter]
        assert cap is not None
        scale = NANO if counter == "usd" else 1
        whose = "this task's" if by is self else f"the allowance of its parent task {by.task_id}"
        noun = {"usd": "spending", "deadline_s": "time"}.get(counter, _NOUNS.get(counter,
                                                                                   counter))
        reason = (f"task {self.task_id} exhausted {whose} {noun}: "
                  f"{_fmt(counter, used / scale)} of {_fmt(counter, cap / scale)}")
        self.exhausted = Exhaustion(counter, self.task_id, by.task_id, used / scale, cap / scale,
                                    max(0.0, (cap - used) / scale), reason)
        self._ended_at = self._clock()
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
                with self._lock:
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
        with self._lock:
            if len(self.history) == HISTORY:
                self.history_dropped += 1
            self.history.append(entry)

    # -- ending ----------------------------------------------------------------------------------

    def _end(self, outcome: Outcome) -> Outcome:
        self.outcome = outcome
        if self._ended_at is None:
            self._ended_at = self._clock()
        self._persist("outcome", {"task": self.task_id, **_storable(outcome.to_dict())})
        if self._log is not None:
            self._log.flush()  # written before it is returned
        for t in self.chain:
            t._remark()
        return outcome

    def finish(self, answer: Any = None, *, evidence: Any = None,
               unfinished: str | None = None) -> Outcome:
        """The host finishes the task with ``answer``: ``answered``, unless a counter is
        exhausted (the exhausted outcome, the answer attached unverified), the task's history
        could not be trusted (``blocked``) or a session of it is halted (``halted``)."""
        with self._lock:
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
        with self._lock:
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
        with self._lock:
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

    def _snapshot(self) -> dict[str, Any]:
        return {"task": self.task_id,
                "used": {c: getattr(self, c) for c in CONSUMED if c != "deadline_s"},
                "tool_timeouts": self.tool_timeouts,
                "noted": {c: n for c, n in self._noted.items() if n},
                "exhausted": self.exhausted.to_dict() if self.exhausted else None,
                "children": [c.task_id for c in self.children],
                "started_at": self.started_at}

    def _persist(self, kind: str, data: dict[str, Any]) -> None:
        if self._log is not None:
            self._log.put(kind, data)

    def _persist_budget(self) -> None:
        """A budget row, if the store does not hold this consumption yet."""
        if self._log is None:
            return
        state = self._state()
        if state != self._written:
            self._written = state
            self._persist("budget", self._snapshot())

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
        with self._lock:
            self._persist_chain()

    def flush(self) -> bool:
        return self._log is None or self._log.flush()

    def _restore(self, history: Any) -> None:
        log = self._log
        assert log is not None
        folded = log.read(history)
        if folded is None:
            return
        rows = [d for d in folded.task_rows if d.get("task") == self.task_id]
        if folded.tampered is not None:
            self.tampered = folded.tampered
        if not rows and self.tampered is None:
            return
        self._written = ()
        self.apply_rows(rows)

    def apply_rows(self, rows: list[dict[str, Any]]) -> None:
        """Fold a task's rows forward (never lowering a counter: a restart never refills)."""
        for data in rows:
            started = data.get("started_at")
            if isinstance(started, (int, float)) and not isinstance(started, bool):
                self.started_at = float(started)
            used = data.get("used")
            if isinstance(used, Mapping):
                for c in CONSUMED:
                    v = used.get(c)
                    if isinstance(v, int) and not isinstance(v, bool) and v < _NEVER:
                        setattr(self, c, max(getattr(self, c), v))
            v = data.get("tool_timeouts")
            if isinstance(v, int):
                self.tool_timeouts = max(self.tool_timeouts, v)
            noted = data.get("noted")
            if isinstance(noted, Mapping):
                for c, n in noted.items():
                    if c in self._noted and isinstance(n, int) and n > self._noted[c]:
                        self._set_noted(c, n)
            ex = data.get("exhausted")
            if isinstance(ex, Mapping):
                with contextlib.suppress(KeyError, TypeError, ValueError):
                    self.exhausted = Exhaustion.from_dict(ex)
            if "outcome" in data and isinstance(data.get("outcome"), str):
                self.outcome = _restored_outcome(data, self.report())


def _storable(value: Any) -> Any:
    """An outcome's dict, with values the store cannot hold made text."""
    if value is None or isinstance(value, (str, bool, int, float)):
        return value
    if isinstance(value, (list, tuple)):
        return [_storable(v) for v in value]
    if isinstance(value, Mapping):
        return {str(k): _storable(v) for k, v in value.items()}
    return str(value)


def _restored_outcome(data: Mapping[str, Any], report: Report) -> Outcome:
    return Outcome(str(data["outcome"]), str(data.get("task", report.task_id)), report,
                   counter=data.get("counter"), by_task=data.get("by_task"),
                   guardrail=data.get("guardrail"), reason=str(data.get("reason", "")),
                   answer=data.get("answer"), verified=bool(data.get("verified", False)),
                   evidence=data.get("evidence"))
