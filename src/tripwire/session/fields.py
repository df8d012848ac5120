"""The fields every part of a session reads (``SessionFields``): ``Guardrails`` is one class
made of parts by concern (``task_methods``, ``context_methods``, ``operator``, its own turns
and observations), each a mixin over these declarations; the concrete classes' slots and
their engine core hold them (``guardrails._SLOTS``, ``core.GuardrailsCore``, the native
core)."""

from __future__ import annotations

from typing import TYPE_CHECKING, cast

if TYPE_CHECKING:
    from ..base.decision import Decision
    from ..base.modes import Mode
    from ..budgets.task import Task
    from ..context.guard import ContextGuard
    from ..engine.watchdog import Watchdog
    from ..policy.budget import BudgetPolicy
    from ..policy.ceiling import CostCeiling
    from ..policy.context import ContextPolicy
    from ..policy.cost import CostPolicy
    from ..policy.reporting import OperatorChannel
    from ..policy.watchdog import WatchdogPolicy
    from .config import ResolvedConfig
    from .core import SessionLock
    from .durability import Durability

__all__ = ["SessionFields"]


class SessionFields:
    """Declarations only: a session's state, as its parts read it, and the hand-offs of
    ``Guardrails`` they call."""

    if not TYPE_CHECKING:
        __slots__ = ()
    _lock: SessionLock
    _blocked: Decision | None
    _watchdog: Watchdog | None
    _ids: dict[str, str] | None
    last_used: float  # Fleet: when the session was last fetched (monotonic; touch() sets it)
    _context: ContextGuard | None
    _task: Task
    _budget: BudgetPolicy
    mode: Mode
    _policy: WatchdogPolicy
    _in_turn: bool
    _cost_policy: CostPolicy
    _context_policy: ContextPolicy
    session_id: str
    settings: ResolvedConfig

    # held by the policies, read through them (not a second reference a session)
    @property
    def _channel(self) -> OperatorChannel:
        """The operator channel (its durable side's)."""
        return self._durable.channel

    @property
    def _durable(self) -> Durability:
        """The durable side (the one its policies were given)."""
        return cast("Durability", self._policy._durable)

    @property
    def _cost(self) -> CostCeiling:
        """The cost ceiling (the cost policy's)."""
        return self._cost_policy.ceiling

    def _compacted(self) -> Decision:
        """A compaction happened (``compaction-storm`` counts it): ``Guardrails``'."""
        raise NotImplementedError
