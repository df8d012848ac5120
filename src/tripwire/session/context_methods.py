"""A session's context operations (SPEC §6): compaction, checkpoints, the ``/context`` view and
utilization, decided by its ``ContextPolicy``. A part of ``Guardrails``
(``fields.SessionFields``)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from .fields import SessionFields

if TYPE_CHECKING:  # a session with the guard off (a hook's) never imports it
    from ..context.guard import Compaction, Utilization
    from ..context.stats import ContextStats

__all__ = ["ContextMethods"]


class ContextMethods(SessionFields):
    if not TYPE_CHECKING:
        __slots__ = ()

    def compact(self, messages: Any, focus: str | None = None, *,
                manual: bool = False) -> Compaction:
        """Reduce the context now: the host's ``summarize`` (with tripwire's retry, backoff and
        fallback rules), or mechanical truncation. Automatic (the default): call it when
        ``start_turn().compact`` is true; a failure is a durable ``context-reduction-failed``
        row and backs off. ``manual=True`` (the operator's ``/compact [focus]``): a failure is
        reported in the result alone (``kind == "failed"``, ``reason``), with no row and no
        backoff. ``Compaction.apply(messages)`` is the new history."""
        with self._lock:
            result = self._context_policy.compact(messages, focus, manual=manual)
            if result.kind != "skipped":
                self._compacted()  # compaction-storm: a compaction that ran (its decision is
                #                     every later event's, if it cuts or halts)
            return result

    def checkpoint(self, messages: Any, note: str | None = None, *,
                   manual: bool = False) -> Compaction:
        """A task-boundary checkpoint: slice the finished task out of the history through the
        same summarizer policy (``summarize(messages, note)``; retry, backoff, mechanical
        fallback), with ``operation: checkpoint`` in its records. Automatic (the model declared
        the boundary) or ``manual=True`` (the operator's ``/done [note]``), as ``compact``."""
        with self._lock:
            return self._context_policy.checkpoint(messages, note, manual=manual)

    def context_stats(self) -> ContextStats:
        """The ``/context`` view: compactions (count, last time, last focus), checkpoints
        (count, last note), characters summarized, the context's size against its window
        (unknown when the model's window is), and the per-model usage, by descending cost."""
        with self._lock:
            return self._context_policy.stats(self._cost_policy.usage)

    def utilization(self) -> Utilization | None:
        """How full the context is (None when the context guard is disabled)."""
        with self._lock:
            return self._context_policy.utilization()

