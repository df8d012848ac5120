"""The room below a task's next marks (SPEC §7.1): what batch ingest may charge in its core.

The call counter's idea (``calls.py``) applied to usage: a charge that leaves every capped
counter below its next mark (a 50%/80% note or the cap) notes and exhausts nothing, so the
batch core counts those rows without Python and stops at the row that could.
"""

from __future__ import annotations

from typing import Any

from .calls import NEVER
from .task import Task

__all__ = ["MAX_TREE", "usage_room"]


#: Tasks of a tree ``usage_room`` looks through for another session (a larger tree's usage
#: rows are charged one by one).
MAX_TREE = 64


def usage_room(task: Task, session: Any) -> tuple[int, int, int] | None:
    """The steps, tokens and nano-dollars ``task`` may be charged before a charge could reach a
    mark: the next note level (50%, 80%) or the cap of that counter, of the task or an ancestor
    (each is charged the same units). A charge that leaves the use below every mark notes and
    exhausts nothing: batch ingest charges those in its core (the call counter's idea applied
    to usage). None when a session other than ``session`` (a ``BudgetPolicy``) runs a task of
    the tree (its charges would move the marks unseen), the tree has more than ``MAX_TREE``
    tasks, or a task of the chain has check-in windows (each charge is judged against them)."""
    with task.lock:
        if task.parent is not None or task.children or task.sessions[1:] or \
                (task.sessions and task.sessions[0] is not session):
            seen, todo = 0, [task.chain[-1]]
            while todo:  # the whole tree: a sibling's session charges the ancestors too
                t = todo.pop()
                seen += 1
                if seen > MAX_TREE or any(p is not session for p in t.sessions):
                    return None
                todo.extend(t.children)
        never = NEVER - 1
        steps = tokens = usd = never
        for t in task.chain:
            if t.checkin is not None:
                return None
            noted = t.noted
            for c, mark in t.budget.marks().items():  # the next mark: a note or the cap
                room = mark[min(noted[c], 2)] - getattr(t, c)
                if c == "steps":
                    steps = min(steps, room)
                elif c == "tokens":
                    tokens = min(tokens, room)
                else:
                    usd = min(usd, room)
        return max(0, steps), max(0, tokens), max(0, usd)
