"""A task's rows in the store (SPEC §7.1): the reserved session id they are chained under, and
how people read a stored one.

Durability: with a ``store``, the task's start (objective, caps, start time), its consumption
(written at every step, stop attempt, retry, review, note and exhaustion, and at turn ends; tool
calls are written with the next such row), its children and its outcome are rows of the store's
hash chain, under the reserved session id ``task:<task_id>`` (a session's implicit task writes
into the session's own chain).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ..base.money import NANO

__all__ = ["TASK_PREFIX", "task_log_id", "shown_used"]

#: Store session ids of tasks start with this (``task:fix-the-test``): reserved.
TASK_PREFIX = "task:"


def task_log_id(task_id: str) -> str:
    """The store session id under which a task's rows are chained."""
    return TASK_PREFIX + task_id


def shown_used(used: Mapping[str, Any]) -> dict[str, Any]:
    """A stored ``used`` map (a budget row's: ``usd`` in nano-dollars, as a task counts it) as
    people read it: ``usd`` in dollars, like every other dollar amount tripwire prints."""
    out = dict(used)
    nano = out.get("usd")
    if isinstance(nano, int) and not isinstance(nano, bool):
        out["usd"] = round(nano / NANO, 9)
    return out
