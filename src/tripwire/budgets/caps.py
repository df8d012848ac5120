"""A task's caps and counters (SPEC §7.1): ``Budget``, the counters, how a cap is reached, and the
texts people and the model read about them (budget notes, exhaustion reasons).

A task's counters are separate and optional:

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

Budget notes: when a counter passes 50% and again 80% of its cap, the task queues a note for the
model (``note_text``: ``You have used 500 of 1,000 model steps for this task.``; names no
operator control); ``consumption.Consumption`` judges when. An exhaustion carries its reason
(``exhaustion_reason``) to the operator and the outcome.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field, fields, replace
from typing import Any

from ..base.money import NANO
from ..base.validate import MAX_COUNT, shown_value
from ..errors import ConfigError

__all__ = ["Budget", "Exhaustion", "COUNTERS", "SPENT", "CONSUMED", "NOTE_SIGNAL", "NOTE_LEVELS",
           "NOUNS", "CHECKIN", "note_text", "exhaustion_reason"]

#: Every counter, in SPEC §7.1's order.
COUNTERS = ("steps", "tool_calls", "tokens", "usd", "deadline_s", "tool_timeout_s",
            "stop_rejections", "retries", "reviews")
#: Counters whose cap is reached when the use reaches it (the work is already done).
SPENT = frozenset({"steps", "tokens", "usd", "deadline_s"})
#: Counters a task consumes units of (``tool_timeout_s`` is a per-call limit, not consumption).
CONSUMED = tuple(c for c in COUNTERS if c != "tool_timeout_s")
#: How an exhaustion names a check-in window (``checkin:usd``: the window of ``usd``).
CHECKIN = "checkin:"
#: The signal name budget notes carry in the feedback block.
NOTE_SIGNAL = "task-budget"
#: The note levels: a counter passing 50% and then 80% of its cap.
NOTE_LEVELS = (0.5, 0.8)
#: What one unit of a counter is called in the texts (``usd`` and ``deadline_s`` read as
#: amounts of money and time instead).
NOUNS = {
    "steps": "model steps",
    "tool_calls": "tool calls",
    "tokens": "tokens",
    "stop_rejections": "refused attempts to finish",
    "retries": "model request retries",
    "reviews": "progress reviews",
}


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

    ``usd`` is in dollars; ``deadline_s`` and ``tool_timeout_s`` in seconds. ``checkin``:
    check-in windows, counter -> what the task may consume between two check-ins of its
    operator (``Task.check_in``); reaching one pauses the task (``exhausted(checkin:<counter>)``)
    until the next check-in."""

    steps: int | None = None
    tool_calls: int | None = None
    tokens: int | None = None
    usd: float | None = None
    deadline_s: float | None = None
    tool_timeout_s: float | None = None
    stop_rejections: int | None = None
    retries: int | None = None
    reviews: int | None = None
    checkin: Mapping[str, float] | None = field(default=None, hash=False)

    def __post_init__(self) -> None:
        for name in COUNTERS:
            integer = name not in ("usd", "deadline_s", "tool_timeout_s")
            object.__setattr__(self, name, _cap(getattr(self, name), name, integer=integer))
        if self.checkin is not None:
            if not isinstance(self.checkin, Mapping):
                raise ConfigError("budget checkin must be a table/object of counters")
            unknown = sorted(set(self.checkin) - set(CONSUMED))
            if unknown:
                raise ConfigError(f"unknown checkin counter(s) {', '.join(map(repr, unknown))} "
                                  f"(known: {', '.join(CONSUMED)})")
            windows = {c: _cap(v, f"checkin {c}", integer=c not in ("usd", "deadline_s"))
                       for c, v in self.checkin.items()}
            object.__setattr__(self, "checkin", {c: v for c, v in windows.items() if v} or None)

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
        unknown = sorted(set(data) - {*COUNTERS, "checkin"})
        if unknown:
            raise ConfigError(f"unknown {where} counter(s) {', '.join(map(repr, unknown))} "
                              f"(known: {', '.join(COUNTERS)})")
        return cls(**dict(data))

    def over(self, base: Budget) -> Budget:
        """These caps where set, ``base``'s elsewhere."""
        if all(getattr(self, name) is not None for name in COUNTERS):
            return self  # complete already (a resolved config's): shared, not copied
        return Budget(**{f.name: getattr(base, f.name) if getattr(self, f.name) is None
                         else getattr(self, f.name) for f in fields(self)})

    def with_cap(self, counter: str, cap: float) -> Budget:
        """These caps with ``counter``'s set to ``cap`` (a raise)."""
        changes: dict[str, Any] = {counter: cap}
        return replace(self, **changes)

    def caps(self) -> dict[str, float | int | None]:
        """Every counter's cap, None for off (0 and unset alike)."""
        return {name: getattr(self, name) or None for name in COUNTERS}

    def internal_checkin(self) -> dict[str, Any] | None:
        """The check-in windows as a task counts them (``usd`` in nano-dollars), or None."""
        if self.checkin is None:
            return None
        return {c: round(v * NANO) if c == "usd" else v for c, v in self.checkin.items()}

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
        out = {name: getattr(self, name) for name in COUNTERS if getattr(self, name) is not None}
        if self.checkin is not None:
            out["checkin"] = dict(self.checkin)
        return out


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
           f"{NOUNS.get(counter, counter)} for this task."


def exhaustion_reason(counter: str, task_id: str, by_task: str | None, used: float,
                      cap: float) -> str:
    """Why task ``task_id`` is exhausted: its own cap of ``counter`` (``by_task`` None) or the
    allowance of its ancestor ``by_task`` (``used`` and ``cap`` in dollars for ``usd``); a
    ``checkin:<counter>`` window: paused until its operator checks in."""
    if counter.startswith(CHECKIN):
        base = counter[len(CHECKIN):]
        whose = "this task's" if by_task is None else f"its parent task {by_task}'s"
        noun = {"usd": "spending", "deadline_s": "time"}.get(base, NOUNS.get(base, base))
        return (f"task {task_id} reached {whose} check-in window of {noun}: "
                f"{_fmt(base, used)} of {_fmt(base, cap)} since the last check-in; paused "
                "until the operator checks in")
    whose = "this task's" if by_task is None else f"the allowance of its parent task {by_task}"
    noun = {"usd": "spending", "deadline_s": "time"}.get(counter, NOUNS.get(counter, counter))
    return (f"task {task_id} exhausted {whose} {noun}: "
            f"{_fmt(counter, used)} of {_fmt(counter, cap)}")
