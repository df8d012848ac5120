"""``SessionBatch``: one session's side of the batch boundary (``Fleet.observe_many``).

``Guardrails.batch_view()`` hands it to the fleet once per batch, which holds the session's lock
for the whole batch. It assembles the ``BatchState`` the batch core drives the session with
(from each policy's part), hands back what the core changed (``BatchChange``), and gives the
fleet the session's blocked decision, its call ids and its spend made durable. It decides
nothing: the policy for a row the core stops at is ``Guardrails``' (``on_batch_stop``, or the
row's ``on_*`` method), one public method per row.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ..engine.common import BatchChange, BatchState

if TYPE_CHECKING:
    from ..base.decision import Decision
    from .guardrails import Guardrails

__all__ = ["SessionBatch"]


class SessionBatch:
    """A view of one session's fields for the length of a batch (the batch holds its lock);
    the session's own, as ``SessionLock`` is a view of a native session's lock."""

    __slots__ = ("_g",)

    def __init__(self, guardrails: Guardrails):
        self._g = guardrails

    def state(self) -> BatchState:
        """What the batch core needs of this session. The engine is None when the batch must
        hand every row to ``Guardrails``: off mode, a result streaming in chunk by chunk (its
        final result skips the bytes already counted, which only on_result knows), custom
        signals (they observe in Python), a task bounding calls or time (each row is charged
        in Python); the cost is None when a task bounding steps, tokens or dollars is charged
        each usage row in Python."""
        g = self._g
        guard, budget = g._context, g._budget
        engine = None if (guard is not None and guard.streamed) or g.settings.custom_signals \
            or budget.calls_armed else g._watchdog
        return BatchState(engine, g._blocked is not None,
                          None if guard is None else g._context_policy.batch_state(), g._ids,
                          g._policy.words_matter(),
                          None if budget.usage_armed else g._cost_policy.batch_state())

    def take_change(self, change: BatchChange) -> None:
        """What the batch core changed in this session, before policy looks at it: spend it
        charged (it checked that no bound trips), a context a usage measured, estimate bytes."""
        g = self._g
        if change.spent is not None:  # its task's dollars too
            g._budget.take_usd(g._cost_policy.take_spent(change.spent))
        if g._context is not None:
            g._context_policy.take_change(change.measured, change.added)

    @property
    def blocked(self) -> Decision | None:
        """The halt, or this turn's cut, that every later event of the turn gets."""
        return self._g._blocked

    @property
    def call_ids(self) -> dict[Any, str]:
        """Call id -> tool name, for results named by id (the batch replaces the map whole)."""
        return self._g._ids

    @call_ids.setter
    def call_ids(self, ids: dict[Any, str]) -> None:
        self._g._ids = ids

    def persist_spend(self) -> None:
        """Write the spend if the store does not have it yet (the batch charged usage rows)."""
        self._g._durable.persist_spend()
