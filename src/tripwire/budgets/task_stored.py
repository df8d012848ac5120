"""A stored task opened without its live process (SPEC §13): what ``tripwire reset --task``
and ``serve`` act on to raise a cap or check in, with the library's own rules
(``Task.raise_cap``, ``Task.check_in``), so a refusal there is the refusal here.

A task with a store keeps its rows under ``task:<task_id>``, starting with its start row (its
objective and caps): it opens as the task it was. A session's implicit task keeps its rows in
the session's own chain and has no start row (its caps are the session's configuration): it
opens with the caps its rows prove (each exhaustion's and raise's cap), which is what a raise
of an exhausted counter needs. The process running the task applies the row it wrote when it
next reads its history (a restart; a hook's next call; a fleet's shared store at a turn
start).
"""

from __future__ import annotations

from typing import Any

from ..base.money import NANO
from ..durability.fold import fold_history
from ..durability.log import SessionLog
from ..durability.rows import BudgetRow, RaiseRow, TaskRow
from ..errors import InvalidEvent
from .caps import COUNTERS, Budget
from .task import Task
from .task_rows import task_log_id

__all__ = ["open_stored_task"]


def open_stored_task(store: Any, task_id: str) -> Task:
    """The task ``task_id`` of ``store`` as its rows leave it; ``InvalidEvent`` when the store
    holds no such task."""
    history = store.history(task_log_id(task_id))
    if history.exists:
        rows = [r for r in fold_history(history).task_rows if r.task == task_id]
        start = next((r for r in rows if isinstance(r, TaskRow)), None)
        if start is not None:
            budget = Budget.from_mapping({k: v for k, v in (start.budget or {}).items()
                                          if k in (*COUNTERS, "checkin")})
            objective = start.objective if isinstance(start.objective, str) else ""
            return Task(objective, budget, task_id=task_id, store=store, _history=history)
    history = store.history(task_id)  # a session's implicit task
    rows = [r for r in fold_history(history).task_rows if r.task == task_id] \
        if history.exists else []
    if not rows:
        raise InvalidEvent(f"{getattr(store, 'path', store)}: no task {task_id!r}")
    caps: dict[str, float] = {}
    for row in rows:
        if isinstance(row, BudgetRow) and row.exhausted is not None:
            counter, cap = row.exhausted.get("counter"), row.exhausted.get("cap")
            if counter in COUNTERS and isinstance(cap, (int, float)):
                caps[counter] = max(caps.get(counter, 0), cap)
        elif isinstance(row, RaiseRow) and row.counter in COUNTERS and row.cap is not None:
            cap = row.cap / NANO if row.counter == "usd" else row.cap
            caps[row.counter] = max(caps.get(row.counter, 0), cap)
    budget = Budget.from_mapping({c: (int(v) if c not in ("usd", "deadline_s") else float(v))
                                  for c, v in caps.items()})
    log = SessionLog(store, task_id, lambda text: f"[task {task_id}] {text}")
    return Task(budget=budget, task_id=task_id, _log=log, _history=history)
