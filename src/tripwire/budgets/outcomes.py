"""Terminal outcomes of a task and their reports (SPEC §7.2).

A task ends in exactly one ``Outcome``:

- ``answered``: the host finished it with an answer and no counter was exhausted;
- ``exhausted``: a counter reached its cap (``counter`` names it, ``by_task`` the task whose cap it
  was: the task itself or an ancestor whose remaining allowance the charge used up);
- ``interrupted``: the host or an operator cancelled it (``reason``);
- ``halted``: a guardrail halted one of its sessions and the task ended while halted
  (``guardrail``);
- ``blocked``: the progress supervisor stopped it as blocked, or was unavailable, or the
  task's durable history could not be trusted (``reason``).

An exhausted task is never ``answered``: ``Task.finish(answer)`` on an exhausted task returns the
exhausted outcome with the answer attached and ``verified`` false. Every outcome carries a
``Report``: each counter's consumption and cap (the task's and its children's), the calls still
without a result when it ended (uncertain side effects: a stopped task does not undo them), the
host's note of unfinished work, and the guardrail history of its sessions.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

__all__ = ["Outcome", "Report", "CounterReport", "UncertainCall", "OUTCOME_KINDS",
           "ANSWERED", "EXHAUSTED", "INTERRUPTED", "HALTED", "BLOCKED"]

ANSWERED = "answered"
EXHAUSTED = "exhausted"
INTERRUPTED = "interrupted"
HALTED = "halted"
BLOCKED = "blocked"
#: Every outcome kind, in the order SPEC §7.2 lists them.
OUTCOME_KINDS = (ANSWERED, EXHAUSTED, INTERRUPTED, HALTED, BLOCKED)


@dataclass(frozen=True, slots=True)
class CounterReport:
    """One counter of one task: ``used`` units of ``cap`` (None: the counter is off).
    ``usd`` is in dollars, ``deadline_s`` in seconds elapsed since the task first started."""

    counter: str
    used: float
    cap: float | None

    @property
    def remaining(self) -> float | None:
        """Units left before the cap (never negative); None when the counter is off."""
        return None if self.cap is None else max(0, self.cap - self.used)

    def to_dict(self) -> dict[str, Any]:
        return {"used": self.used, "cap": self.cap, "remaining": self.remaining}


@dataclass(frozen=True, slots=True)
class UncertainCall:
    """A tool call that had no result when the task ended: its side effects are unknown."""

    session_id: str
    call_id: str | None
    name: str

    def to_dict(self) -> dict[str, Any]:
        return {"session": self.session_id, "id": self.call_id, "name": self.name}


@dataclass(frozen=True)
class Report:
    """What a task consumed and left behind when it ended."""

    task_id: str
    objective: str
    counters: tuple[CounterReport, ...]
    children: tuple[Report, ...] = ()
    uncertain: tuple[UncertainCall, ...] = ()
    tool_timeouts: int = 0
    unfinished: str | None = None  # the host's note of unfinished work
    guardrails: tuple[dict[str, Any], ...] = ()  # cuts and halts of its sessions, in order
    guardrails_dropped: int = 0  # earlier cuts and halts, beyond the latest ``guardrails``

    def counter(self, name: str) -> CounterReport:
        for c in self.counters:
            if c.counter == name:
                return c
        raise KeyError(name)

    def to_dict(self) -> dict[str, Any]:
        return {
            "task": self.task_id,
            "objective": self.objective,
            "counters": {c.counter: c.to_dict() for c in self.counters},
            "children": [c.to_dict() for c in self.children],
            "uncertain_calls": [u.to_dict() for u in self.uncertain],
            "tool_timeouts": self.tool_timeouts,
            "unfinished": self.unfinished,
            "guardrails": list(self.guardrails),
            **({"guardrails_dropped": self.guardrails_dropped} if self.guardrails_dropped
               else {}),
        }


@dataclass(frozen=True)
class Outcome:
    """How a task ended. ``kind`` is one of ``OUTCOME_KINDS``; ``answer`` is attached whenever
    the host gave one, with ``verified`` true only for ``answered`` (an answer attached to an
    exhausted task was never accepted)."""

    kind: str
    task_id: str
    report: Report
    counter: str | None = None      # exhausted: which counter
    by_task: str | None = None      # exhausted: whose cap (the task or an ancestor)
    guardrail: str | None = None    # halted: which guardrail
    reason: str = ""
    answer: Any = None
    verified: bool = False
    evidence: Any = None
    extra: dict[str, Any] = field(default_factory=dict)

    @property
    def answered(self) -> bool:
        return self.kind == ANSWERED

    @property
    def exhausted(self) -> bool:
        return self.kind == EXHAUSTED

    def __str__(self) -> str:
        detail = self.counter or self.guardrail or self.reason
        return f"{self.kind}({detail})" if detail and self.kind != ANSWERED else self.kind

    def to_dict(self) -> dict[str, Any]:
        """The outcome as a JSON object (replay's outcome line, the store's outcome row)."""
        out: dict[str, Any] = {"outcome": self.kind, "task": self.task_id}
        if self.counter is not None:
            out["counter"] = self.counter
            out["by_task"] = self.by_task
        if self.guardrail is not None:
            out["guardrail"] = self.guardrail
        if self.reason:
            out["reason"] = self.reason
        if self.answer is not None:
            out["answer"] = self.answer if isinstance(self.answer, (str, int, float, bool)) \
                else str(self.answer)
            out["verified"] = self.verified
        if self.evidence is not None:
            out["evidence"] = self.evidence if isinstance(self.evidence, (str, int, float, bool)) \
                else str(self.evidence)
        out.update(self.extra)
        out["report"] = self.report.to_dict()
        return out
