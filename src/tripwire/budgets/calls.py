"""The tool-call counter's fast path (SPEC §7.1): ``CallCounter`` and the mark that gates it.

A task run by one session at a time charges tool calls on a lock-free fast path (the session's
own lock serializes it): while the count stays below the task's *mark* (the count at which
something may happen: the next 50%/80% note, the cap), a call is one integer increment in the
session's core (``session/core.py``, ``_guardrails.pxi``). A task shared by several sessions, a
child or a parent, an ended task, or a task with a clock-based counter has the mark 0: every
call takes the locked path (``BudgetPolicy.on_call``, then ``Task.charge``). ``Task.remark``
recomputes the mark whenever one of these changes.
"""

from __future__ import annotations

import math

from .caps import NOTE_LEVELS

__all__ = ["CallCounter", "NEVER", "call_mark"]

#: The fast path's "nothing to check until this count" for a counter without a cap (and the
#: bound of a charge: counters are 64-bit integers in the native core).
NEVER = 1 << 62


class CallCounter:
    """A task's tool-call count and the fast path's mark, in an object of their own. A task
    starts with this one; a native session that runs it alone swaps in the native twin
    (``_native.CallCounter``, the same two numbers; ``Task.use_call_counter``), which keeps
    them in that session's own core while it runs the task, so a call below the mark reads no
    other object; the session hands them back when it leaves the task. ``Task.tool_calls`` and
    ``Task.call_mark`` read and write through whichever it holds."""

    __slots__ = ("call_mark", "tool_calls")

    def __init__(self, tool_calls: int = 0, call_mark: int = 0):
        self.tool_calls = tool_calls
        self.call_mark = call_mark


def call_mark(cap: float | None, level: int) -> int:
    """The mark of a task whose calls may take the fast path: its tool-call cap's next note
    (``level`` notes passed already) or the cap itself, whichever comes first; ``NEVER``
    without a cap."""
    if cap is None:
        return NEVER
    marks = [math.ceil(cap * f) for f in NOTE_LEVELS[level:]] + [int(cap) + 1]
    return max(1, min(marks))

