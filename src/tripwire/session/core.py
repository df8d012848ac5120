"""The reference engine's Guardrails hot path: ``GuardrailsCore``, the base of
``PythonGuardrails`` as ``_native.GuardrailsCore`` (``_guardrails.pxi``) is the base of
``NativeGuardrails``.

Each core holds the fields every observation reads (the lock, the blocked decision, the task's
call counter, the watchdog, the call ids, the context guard) and runs the common path of
``on_call``, ``on_result`` and ``on_text``: the lock, the blocked check, the task's accounting,
the engine's observation, the context estimate. Everything else (the policy on alerts, a cut
made the blocked decision, the context check, the turn lifecycle) is ``Guardrails``', which
each core calls back into.

Twins: ``_native.GuardrailsCore`` (``_guardrails.pxi``) runs the same steps in the same order.
Change them together (the suite runs each on its engine).
"""

from __future__ import annotations

import threading
from types import TracebackType
from typing import TYPE_CHECKING, Any, Protocol

from ..base.decision import CONTINUE, Decision, with_cancel
from ..base.inputs import MAX_CALL_IDS, payload_bytes, text_has_words
from ..base.modes import Mode
from ..base.validate import check_id, check_no_op, check_text

if TYPE_CHECKING:
    from ..base.alert import Alert
    from ..budgets.task import Task
    from ..context.guard import ContextGuard
    from ..engine.watchdog import Watchdog
    from ..policy.budget import BudgetPolicy

__all__ = ["GuardrailsCore", "SessionLock"]

class SessionLock(Protocol):
    """A session's lock: re-entrant, as ``threading.RLock`` (which the reference engine's
    Guardrails uses; the native one holds its lock in the session's own object)."""

    def acquire(self, blocking: bool = ..., timeout: float = ...) -> bool: ...
    def release(self) -> None: ...
    def __enter__(self) -> bool: ...
    def __exit__(self, t: type[BaseException] | None, v: BaseException | None,
                 tb: TracebackType | None, /) -> bool | None: ...



class GuardrailsCore:
    """The fields every observation of a ``PythonGuardrails`` reads, and its hot entry points
    (the reference twin of ``_native.GuardrailsCore``)."""

    # first: the object's first cache lines (the native core holds the same fields in place)
    __slots__ = ("_lock", "_blocked", "_task", "_budget",  # noqa: RUF023 (in this order)
                 "_watchdog", "_ids", "last_used", "_context", "__weakref__")

    _lock: SessionLock
    _blocked: Decision | None  # the halt, or this turn's cut: later events get it
    _task: Task
    _budget: BudgetPolicy
    _watchdog: Watchdog | None
    _ids: dict[str, str] | None  # call id -> tool name, for results named by id (None: none)
    last_used: float
    _context: ContextGuard | None

    if TYPE_CHECKING:
        # The hand-offs: policy, which the concrete class (``Guardrails``, after the core in
        # its bases) defines, and which the core calls; declared here for type checkers only
        # (a definition here would come first in the MRO and hide the concrete one).
        mode: Mode

        def _on_alerts(self, alerts: tuple[Alert, ...]) -> Decision: ...
        def _context_check(self, decision: Decision) -> Decision: ...
        def _cut_at_call(self, cut: Decision, name: str, args: Any, id: str | None,
                         ) -> Decision: ...
        def _withdraw_answered(self) -> None: ...

    def __new__(cls, *args: Any, **kwargs: Any) -> GuardrailsCore:
        instance = object.__new__(cls)
        instance._lock = threading.RLock()
        return instance

    def on_call(self, name: str, args: Any = None, id: str | None = None) -> Decision:
        """A tool call the model asked for."""
        # acquire/release rather than `with`: this is the hot path, and the context-manager
        # protocol costs more than the lock itself
        lock = self._lock
        lock.acquire()
        try:
            if id is not None and type(id) is not str:
                id = check_id(id)  # raises, in every mode: an id is a str
            if self._blocked is not None:
                return self._blocked
            pending = None
            # task accounting: begin (benchmarks/test_bench_budget.py times on_call without it)
            # the task's tool-call counter (SPEC §7.1): integer work while below the task's
            # mark; past it (a note, the cap, a child, a clock) the budget policy decides
            calls = self._task.calls
            n = calls.tool_calls + 1
            if n < calls.call_mark:
                calls.tool_calls = n
                if id is not None:  # without a result yet
                    self._budget.open_calls()[id] = name
            else:
                pending = self._budget.on_call(name, id)
                if pending is not None and not pending.proceed:
                    return self._cut_at_call(pending, name, args, id)  # the watchdog sees it
            # task accounting: end
            watchdog = self._watchdog
            if watchdog is None:
                return CONTINUE if pending is None else pending
            if id is not None:
                ids = self._ids
                if ids is None:  # made at the first call id (many hosts give none)
                    ids = self._ids = {}
                elif len(ids) >= MAX_CALL_IDS:  # remember_call_id(), inlined: the hot path
                    ids.clear()
                ids[id] = name
            alerts = watchdog.observe_call(name, args)
            if alerts:
                decision = self._on_alerts(alerts)
                return decision if pending is None else with_cancel(decision, pending)
            # per-call policies other than the watchdog's and the task's go here (and in the
            # twin), each turning CONTINUE into its own decision
            return CONTINUE if pending is None else pending
        finally:
            lock.release()

    def on_result(self, name: str | None = None, *, id: str | None = None,
                  error: Any = None, no_op: bool = False, payload: Any = None,
                  unknown_tool: bool = False) -> Decision:
        """A tool's answer, by ``name`` or by the ``id`` of its call."""
        lock = self._lock
        lock.acquire()
        try:
            if id is not None and type(id) is not str:
                id = check_id(id)  # raises: an id is a str
            if no_op is not False and no_op is not True:
                check_no_op(no_op)  # raises, in every mode: "false" must not count as a no-op
            if self._blocked is not None:
                return self._blocked
            budget = self._budget
            pending = None
            if budget.started:  # calls timed out by now are cancelled first
                pending = budget.poll_time()
                if pending is not None and not pending.proceed:
                    self._blocked = pending
                    return pending
                if not budget.on_result(id):
                    return CONTINUE if pending is None else pending  # a cancelled call's
            elif not budget.on_result(id):
                return CONTINUE  # the late result of a call cancelled for its timeout
            watchdog = self._watchdog
            decision = CONTINUE
            if watchdog is not None:
                if name is None:
                    ids = self._ids
                    name = ids.get(id, "") if id is not None and ids is not None else ""
                alerts = watchdog.observe_result(name, error=error, no_op=no_op, payload=payload,
                                                 unknown_tool=unknown_tool)
                if alerts:
                    decision = self._on_alerts(alerts)
            context = self._context
            if context is not None:
                if context.streamed:
                    context.streamed = False  # its bytes were counted chunk by chunk
                elif payload is not None:
                    context.observe_bytes(payload if isinstance(
                        payload, (str, bytes, bytearray, memoryview)) else payload_bytes(payload))
                decision = self._context_check(decision)
            return decision if pending is None else with_cancel(decision, pending)
        finally:
            lock.release()

    def on_text(self, text: str) -> Decision:
        """The agent's own words (not tool output, injected messages or private reasoning)."""
        if type(text) is not str:
            text = check_text(text)  # raises: agent text is a str, in every mode
        with self._lock:
            if self._blocked is not None:
                return self._blocked
            budget = self._budget
            budget.last_text = text
            pending = budget.poll_time() if budget.started else None
            if pending is not None and not pending.proceed:
                self._blocked = pending
                return pending
            watchdog = self._watchdog
            if watchdog is None:
                return CONTINUE if pending is None else pending
            alerts = watchdog.observe_text(text)  # () but from a custom signal
            if self.mode >= Mode.FEEDBACK and text_has_words(text):
                self._withdraw_answered()
            if alerts:
                return self._on_alerts(alerts)
            return CONTINUE if pending is None else pending


