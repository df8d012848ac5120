"""The fields of a ``Task`` that nearly every task leaves at their defaults (SPEC §7.1): its
objective and acceptance criteria, its children, notes, history, raises, check-ins, the
counters only stop hooks, retries, supervisors and timeouts charge, and how it ended.

A fleet runs one implicit task per session: a slot for each of these on every task was some
150 bytes a session for fields nearly none of them sets. They live in one ``TaskRare`` instead,
made at a task's first write of one of them (a write of the default makes nothing); until then
each reads as its default. ``Task`` reads and writes them as attributes (``RareFields``); its
hot paths (charging, the call counter, caps and exhaustion checks) read plain slots of its own.
"""

from __future__ import annotations

from collections import deque
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from ..durability.rows import RaiseRow
    from .outcomes import Outcome

__all__ = ["RareFields", "TaskRare", "NO_WINDOWS"]

#: The windows of a task that has had no check-in (shared; replaced, never changed in place).
NO_WINDOWS: dict[str, float] = {}

#: Each field and its default (what a task that never set it reads).
_DEFAULTS: dict[str, Any] = {
    "objective": "",
    "acceptance": None,
    "children": (),          # its child tasks (``Task.child``), in order
    "checkin": None,         # the check-in windows as the task counts them (``task_resume``)
    "windows": NO_WINDOWS,   # where each window counts from
    "raises": (),            # its raises (``RaiseRow``s), in order
    "check_ins": 0,          # its check-ins
    "continued": (),         # the exhausted outcomes a raise continued
    "stop_rejections": 0,
    "retries": 0,
    "reviews": 0,
    "tool_timeouts": 0,
    # model-facing notes not delivered yet: (signal, text)
    "notes": (),
    # cuts and halts of its sessions, the latest HISTORY of them (``history_dropped`` earlier
    # ones); a tuple until the first (an empty deque of HISTORY slots is 880 bytes)
    "history": (),
    "history_dropped": 0,
    "revision": 0,           # the context revision (the supervisor's staleness)
    "last_answer": None,
    "tampered": None,        # why its durable history cannot be trusted
    "_ended_at": None,
}


class _Fields:
    """The fields' types (for the type checker; their defaults are ``_DEFAULTS``)."""

    __slots__ = ()
    objective: str
    acceptance: Any
    children: tuple[Any, ...]   # (Task, ...): the task module imports this one
    checkin: dict[str, Any] | None
    windows: dict[str, float]
    raises: tuple[RaiseRow, ...]
    check_ins: int
    continued: tuple[Outcome, ...]
    stop_rejections: int
    retries: int
    reviews: int
    tool_timeouts: int
    notes: tuple[tuple[str, str], ...]
    history: deque[dict[str, Any]] | tuple[()]
    history_dropped: int
    revision: int
    last_answer: Any
    tampered: str | None
    _ended_at: float | None


class TaskRare(_Fields):
    """A task's rarely-set fields, made at the first write of one (``RareFields``)."""

    if not TYPE_CHECKING:
        __slots__ = tuple(_DEFAULTS)

    def __init__(self) -> None:
        for name, value in _DEFAULTS.items():
            setattr(self, name, value)


def _field(name: str, default: Any) -> property:
    slot = TaskRare.__dict__[name]  # the member descriptor: read and written without lookup
    get_slot, set_slot = slot.__get__, slot.__set__

    def get(task: Any) -> Any:
        rare = task._rare
        return default if rare is None else get_slot(rare)

    def set_(task: Any, value: Any) -> None:
        rare = task._rare
        if rare is None:
            if value is default or (type(value) in (int, str) and value == default):
                return  # the default: nothing to keep
            rare = task._rare = TaskRare()
        set_slot(rare, value)

    return property(get, set_, doc=f"``{name}`` (kept in the task's ``TaskRare``)")


class RareFields(_Fields):
    """The rarely-set fields as attributes: a part of ``Task`` (its ``_rare`` slot holds them,
    None until the first write)."""

    if not TYPE_CHECKING:
        __slots__ = ()  # the fields are Task's
    _rare: TaskRare | None


for _name, _default in _DEFAULTS.items():  # one property each, reading the TaskRare or default
    setattr(RareFields, _name, _field(_name, _default))
del _name, _default
