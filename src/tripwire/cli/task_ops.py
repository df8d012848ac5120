"""``tripwire reset STORE --task ID --raise COUNTER=+N`` / ``--check-in`` (SPEC §13): an
operator's raise of a stored task's cap, or check-in, written into the store with the
library's own rule (``budgets.task_resume``). A raise that would leave the counter exhausted is
refused (exit 4, the smallest sufficient raise on stderr), as ``--add-budget`` is."""

from __future__ import annotations

import argparse
from collections.abc import Callable
from typing import Any, TextIO

from ..base.money import NANO
from ..errors import RaiseRefused, TaskEnded

__all__ = ["reset_task", "print_tasks", "RAISED_BY"]

#: The command line's JSON line writer (``main._print``).
Emit = Callable[[dict[str, Any], TextIO], None]
#: Who writes the rows of this command (the ``who`` of ``raise`` and ``checkin`` rows).
RAISED_BY = "tripwire reset"


def reset_task(args: argparse.Namespace, store: Any, out: TextIO, err: TextIO,
               emit: Emit) -> int:
    """The raises (``args.raise_``) and check-in (``args.check_in``) of task ``args.task``;
    one JSON line per change. Exit 4 (nothing more written) at the first refused raise."""
    from ..budgets.task_stored import open_stored_task

    task = open_stored_task(store, args.task)
    try:
        for counter, amount, relative in args.raise_ or ():
            before = task.cap(counter)
            by = amount if relative else max(0.0, amount - (before or 0.0))
            was = task.outcome
            cap = task.raise_cap(counter, by, who=RAISED_BY)
            emit({"kind": "raise", "task": task.task_id, "counter": counter, "by": by,
                    "cap": cap, "used": task.used(counter),
                    "resumed": str(was) if was is not None and task.outcome is None else None,
                    "outcome": None if task.outcome is None else str(task.outcome)}, out)
        if args.check_in:
            was = task.outcome
            opened = task.check_in(who=RAISED_BY)
            emit({"kind": "check_in", "task": task.task_id, "opened": opened,
                    "resumed": str(was) if was is not None and task.outcome is None else None,
                    "outcome": None if task.outcome is None else str(task.outcome)}, out)
    except RaiseRefused as refused:
        err.write(f"tripwire: {refused}\n")
        return 4
    except TaskEnded as ended:
        err.write(f"tripwire: task {task.task_id} has ended ({ended.outcome}): nothing to "
                  "raise\n")
        return 4
    finally:
        task.flush()
    return 0


def print_tasks(chain: str, session: str | None, rows: list[Any], report: Any,
                out: TextIO, emit: Emit) -> bool:
    """``tripwire status``: one line per task whose rows a chain holds: its consumption, caps
    and outcome, its raises and check-ins (``raises``, ``check_ins``) and the exhausted
    outcomes they continued (``continued``). Whether one of them is exhausted now (a raise
    that continued it clears that)."""
    from ..budgets.task_rows import TASK_PREFIX, shown_used
    from ..durability.rows import BudgetRow, CheckInRow, OutcomeRow, RaiseRow

    tasks: dict[str, dict[str, Any]] = {}
    for row in rows:
        tid = row.task if row.task is not None else chain.removeprefix(TASK_PREFIX)
        line = tasks.setdefault(tid, {"kind": "task", "task": tid, "session": session,
                                      "objective": None, "parent": None, "budget": None,
                                      "used": {}, "exhausted": None, "outcome": None})
        if isinstance(row, OutcomeRow):
            if row.outcome is None:
                continue
            line["outcome"] = row.outcome
            for key, value in (("counter", row.counter), ("by_task", row.by_task),
                               ("guardrail", row.guardrail), ("reason", row.reason)):
                if value is not None:
                    line[key] = value
            if row.report is not None:
                line["used"] = {c: v.get("used") for c, v in
                                row.report.get("counters", {}).items() if isinstance(v, dict)}
        elif isinstance(row, BudgetRow):
            if row.exhausted is not None:
                line["exhausted"] = row.exhausted
            if row.used is not None:
                line["used"] = shown_used(row.used)  # usd in dollars, as spent_usd beside it
        elif isinstance(row, RaiseRow | CheckInRow):
            if isinstance(row, RaiseRow):
                line.setdefault("raises", []).append({
                    "counter": row.counter, "by": _shown(row.counter, row.by),
                    "cap": _shown(row.counter, row.cap), "via": row.via, "by_who": row.who})
            else:
                line["check_ins"] = line.get("check_ins", 0) + 1
            exhausted = line["exhausted"]
            if row.resumed is not None and isinstance(exhausted, dict) and \
                    exhausted.get("counter") == row.resumed:
                line.setdefault("continued", []).append(
                    {"outcome": line["outcome"], "counter": row.resumed})
                line["exhausted"] = line["outcome"] = None
                for key in ("counter", "by_task", "reason"):
                    line.pop(key, None)
        else:
            for key, value in (("objective", row.objective), ("parent", row.parent),
                               ("budget", row.budget)):
                if value is not None:
                    line[key] = value
    for line in tasks.values():
        emit({**line, "chain": "intact" if report.intact else "broken",
              "problem": report.problem}, out)
    return any(line["outcome"] == "exhausted" for line in tasks.values())


def _shown(counter: str | None, value: float | None) -> float | None:
    """A raise row's amount as people read it (``usd`` in dollars)."""
    return None if value is None else (value / NANO if counter == "usd" else value)
