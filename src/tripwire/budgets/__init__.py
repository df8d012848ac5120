"""Task budgets: caps, counters and children, the clocks, terminal outcomes, task classes."""

from __future__ import annotations

from typing import TYPE_CHECKING

from ..base.lazy import exports

if TYPE_CHECKING:  # what the names are, for type checkers and readers
    from .caps import (
        COUNTERS as COUNTERS,
    )
    from .caps import (
        Budget as Budget,
    )
    from .caps import (
        Exhaustion as Exhaustion,
    )
    from .classes import (
        TASK_CLASSES as TASK_CLASSES,
    )
    from .classes import (
        TaskClass as TaskClass,
    )
    from .classes import (
        TaskSettings as TaskSettings,
    )
    from .classes import (
        check_small_tier_parent as check_small_tier_parent,
    )
    from .classes import (
        resolve_task as resolve_task,
    )
    from .clock import (
        ReplayClock as ReplayClock,
    )
    from .clock import (
        WallClock as WallClock,
    )
    from .outcomes import (
        ANSWERED as ANSWERED,
    )
    from .outcomes import (
        BLOCKED as BLOCKED,
    )
    from .outcomes import (
        EXHAUSTED as EXHAUSTED,
    )
    from .outcomes import (
        HALTED as HALTED,
    )
    from .outcomes import (
        INTERRUPTED as INTERRUPTED,
    )
    from .outcomes import (
        OUTCOME_KINDS as OUTCOME_KINDS,
    )
    from .outcomes import (
        CounterReport as CounterReport,
    )
    from .outcomes import (
        Outcome as Outcome,
    )
    from .outcomes import (
        Report as Report,
    )
    from .outcomes import (
        UncertainCall as UncertainCall,
    )
    from .task import (
        Task as Task,
    )
    from .task_rows import (
        TASK_PREFIX as TASK_PREFIX,
    )
    from .task_rows import (
        task_log_id as task_log_id,
    )

__getattr__, __dir__, __all__ = exports(__name__, {
    "Budget": ".caps",
    "Task": ".task",
    "Exhaustion": ".caps",
    "COUNTERS": ".caps",
    "TASK_PREFIX": ".task_rows",
    "WallClock": ".clock",
    "ReplayClock": ".clock",
    "task_log_id": ".task_rows",
    "Outcome": ".outcomes",
    "Report": ".outcomes",
    "CounterReport": ".outcomes",
    "UncertainCall": ".outcomes",
    "OUTCOME_KINDS": ".outcomes",
    "ANSWERED": ".outcomes",
    "EXHAUSTED": ".outcomes",
    "INTERRUPTED": ".outcomes",
    "HALTED": ".outcomes",
    "BLOCKED": ".outcomes",
    "TaskClass": ".classes",
    "TASK_CLASSES": ".classes",
    "TaskSettings": ".classes",
    "resolve_task": ".classes",
    "check_small_tier_parent": ".classes",
})
