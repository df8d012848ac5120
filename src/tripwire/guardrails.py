"""``Guardrails``: the one object a harness wires into its loop (one per session).

It composes the watchdog (``Watchdog``: signals and alerts), its mode and halt policy (SPEC §3),
the cost ceiling (§4, ``CostCeiling``) and the operator channel (``reporting``). Each
observation returns a ``Decision``; ``start_turn()`` returns the ``Turn`` (the feedback block to
prepend) or raises ``GuardrailHalted`` before any model call when the session is halted.

    guardrails = Guardrails(GuardrailsConfig(mode="enforce", max_turn_cost_usd=0.50))
    turn = guardrails.start_turn()                 # GuardrailHalted if halted
    prompt = turn.prepend(user_prompt)
    for call in model_calls:
        decision = guardrails.on_call(call.name, call.args, id=call.id)
        if decision.cut_turn:
            cancel_turn(decision.reason)
    guardrails.end_turn()

Thread-safe: one re-entrant lock per session serializes its observations (a fleet has one lock
per session, not one global lock).
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from dataclasses import dataclass, replace
from types import TracebackType
from typing import TYPE_CHECKING, Any, Protocol

from . import _engine, lines
from ._common import (
    MAX_CALL_IDS,
    BatchChange,
    BatchState,
    ContextState,
    CostState,
    payload_bytes,
    text_has_words,
)
from .budget import Task
from .budget_policy import BUDGET, TIMEOUT_ERROR, BudgetPolicy
from .config import GuardrailsConfig, ResolvedConfig
from .context import (
    Compaction,
    ContextGuard,
    ContextStats,
    SummaryResult,
    UsageByModel,
    Utilization,
    usage_stats,
)
from .cost import NANO, CostCeiling, CostTrip, usage_cost_nano
from .decision import CONTINUE, REFUSE_TURN, Decision, Turn
from .errors import ConfigError, GuardrailHalted, ResetRefused
from .guardrail import Guardrail
from .modes import Mode
from .persistence import DECISION_WAIT, SessionLog
from .policies import ContextPolicy, CostPolicy
from .reporting import LOGGER, Counters, OperatorChannel, OperatorEvent
from .signals import Alert
from .validate import check_hook, check_id, check_no_op, check_text
from .watchdog import Watchdog, retracted_count
from .watchdog_policy import WatchdogPolicy

__all__ = ["Guardrails", "NativeGuardrails", "PythonGuardrails", "GuardrailsConfig",
           "ResolvedConfig", "Status", "ResetOutcome", "SessionLock", "guardrails_class"]


def _with_cancel(decision: Decision, cancel: Decision) -> Decision:
    """An observation's decision, carrying the calls a timeout cancels (a cut cancels all)."""
    if not decision.proceed:
        return decision
    return Decision(cancel.action, cancel.guardrail, cancel.reason,
                    decision.alerts + cancel.alerts, cancel.call_ids)



# --------------------------------------------------------------------------------------------
# Read views


@dataclass(frozen=True)
class Status:
    session_id: str
    mode: str
    halted: bool
    halted_by: tuple[str, ...]
    watchdog_reason: str | None
    cost_reason: str | None
    spent_usd: float
    turn_spent_usd: float
    max_turn_cost_usd: float
    max_session_cost_usd: float  # the ceiling with granted budget (0: no per-session bound)
    granted_budget_usd: float
    would_retrip: bool
    budget_needed_usd: float  # add more than this for a reset to be accepted (0: none needed)
    queued_feedback: int
    counters: dict[str, Any]
    context: Utilization | None
    compaction_pending: bool


@dataclass(frozen=True)
class ResetOutcome:
    cleared: tuple[str, ...]
    still_halted_by: tuple[str, ...]
    max_session_cost_usd: float
    message: str


# --------------------------------------------------------------------------------------------
# The guardrails


class SessionLock(Protocol):
    """A session's lock: re-entrant, as ``threading.RLock`` (which the reference engine's
    Guardrails uses; the native one holds its lock in the session's own object)."""

    def acquire(self, blocking: bool = ..., timeout: float = ...) -> bool: ...
    def release(self) -> None: ...
    def __enter__(self) -> bool: ...
    def __exit__(self, t: type[BaseException] | None, v: BaseException | None,
                 tb: TracebackType | None, /) -> bool | None: ...


# What the native core (_native.GuardrailsCore) holds in place, the fields every observation
# reads; the reference Guardrails holds them in slots of its own (first: the object's first
# cache lines).
_CORE_SLOTS = ("_lock", "_blocked", "_task", "_budget", "_watchdog", "_ids", "_used_at",
               "_context", "__weakref__")
_SLOTS = ("mode", "_policy", "_channel", "_cost", "_cost_estimated", "_in_turn", "_log",
          "_summarize", "_cost_policy", "_context_policy", "_unpriced", "_unpriced_changed",
          "session_id", "settings", "_usage")


class Guardrails:
    """One session's guardrails. ``Guardrails(...)`` returns a ``NativeGuardrails`` (the C++
    core, with its observations' common path in Cython) or a ``PythonGuardrails`` (the
    reference engine), as ``Watchdog(...)`` does; both are ``Guardrails``."""

    if not TYPE_CHECKING:
        __slots__ = ()  # the fields are the concrete classes' (the native core's come first)
    _lock: SessionLock
    _blocked: Decision | None
    _watchdog: Watchdog | None
    _ids: dict[str, str]
    _used_at: float
    _context: ContextGuard | None
    _task: Task
    _budget: BudgetPolicy
    _usage: UsageByModel
    mode: Mode
    _policy: WatchdogPolicy
    _channel: OperatorChannel
    _cost: CostCeiling
    _cost_estimated: bool
    _in_turn: bool
    _log: SessionLog | None
    _summarize: Callable[[Any, str | None], SummaryResult] | None
    _cost_policy: CostPolicy
    _context_policy: ContextPolicy | None
    _unpriced: set[str]
    _unpriced_changed: bool
    session_id: str
    settings: ResolvedConfig

    def __new__(cls, config: GuardrailsConfig | ResolvedConfig | None = None, *,
                implementation: str | None = None, **_: Any) -> Guardrails:
        target = guardrails_class(implementation) if cls is Guardrails else cls
        if _Core is not None and issubclass(target, _Core):
            instance: Guardrails = _Core.__new__(target)  # the core's fields, its lock
        else:
            instance = object.__new__(target)
            instance._lock = threading.RLock()
        return instance

    def __init__(self, config: GuardrailsConfig | ResolvedConfig | None = None, *,
                 session_id: str = "default",
                 on_event: Callable[[OperatorEvent], object] | None = None,
                 counters: Counters | None = None, implementation: str | None = None,
                 summarize: Callable[[Any, str | None], SummaryResult] | None = None,
                 store: Any = None, history: Any = None, task: Task | None = None,
                 clock: Callable[[], float | None] | None = None):
        if config is not None and not isinstance(config, (GuardrailsConfig, ResolvedConfig)):
            hint = (f" (for a mode alone: GuardrailsConfig(mode={config!r}))"
                    if isinstance(config, (str, Mode)) else "")
            raise ConfigError("Guardrails(config) takes a GuardrailsConfig or None, not "
                              f"{type(config).__name__}{hint}")
        check_hook(on_event, "on_event")
        check_hook(summarize, "summarize")
        if not isinstance(session_id, str):
            raise ConfigError(f"session_id must be a string, not {type(session_id).__name__}")
        resolved = (config if isinstance(config, ResolvedConfig)
                    else (config or GuardrailsConfig()).resolve())
        self.session_id = session_id
        self.settings = resolved
        self.mode = resolved.mode
        resolved.announce()  # the startup line, once per process per configuration
        if resolved.mode > Mode.OFF and resolved.custom_signals:
            from .custom_signals import custom_watchdog

            self._watchdog: Watchdog | None = custom_watchdog(
                resolved.watchdog, resolved.custom_signals, implementation=implementation)
        else:
            self._watchdog = (Watchdog(resolved.watchdog, implementation=implementation)
                              if resolved.mode > Mode.OFF else None)
        self._cost = CostCeiling(resolved.max_turn_cost_usd, resolved.max_session_cost_usd,
                                 resolved.cost_escalate_after)
        self._channel = OperatorChannel(session_id, on_event, counters)
        self._policy = WatchdogPolicy(resolved.mode, resolved.watchdog_escalate_after,
                                      resolved.feedback_queue, self._channel, self._persist_trip)
        self._blocked = None  # the halt, or this turn's cut: later events get it
        self._in_turn = False
        self._ids = {}        # call id -> tool name, for results by id
        self._used_at = 0.0   # Fleet: when the session was last fetched (monotonic)
        engine = _engine.load(_engine.resolve(implementation))
        self._context = (ContextGuard(resolved.context, engine.TokenEstimator, engine.utf8_length)
                         if resolved.context.enabled else None)
        self._summarize = summarize
        self._cost_policy = CostPolicy(self._cost, self._channel, self._persist_trip)
        self._context_policy = (None if self._context is None else ContextPolicy(
            self._context, resolved.context.cut_at, self._channel, self._persist))
        self._cost_estimated = False  # some spend was estimated from token prices (SPEC §11.3)
        self._unpriced = set()  # models whose usage had no price, so no cost
        self._unpriced_changed = False
        self._usage = UsageByModel()  # per-model turns, tokens and cost (context_stats)
        # the durable log: rows on their way to the store, the history read back
        self._log = SessionLog(store, session_id, self._channel.line) if store is not None \
            else None
        # the task this session runs under (SPEC §7.1): the host's, or its own implicit one,
        # whose rows go into the session's own chain
        if task is not None and not isinstance(task, Task):
            raise ConfigError(f"task must be a tripwire Task, not {type(task).__name__}")
        if task is None:
            task = Task(budget=resolved.budget, task_id=session_id, clock=clock,
                        _lock=self._lock)
            task._log = self._log
            if task.caps["deadline_s"]:
                task._written = None  # its start time is written at the first decision point
        self._budget = BudgetPolicy(task, self, resolved.mode, self._channel)
        self._task = task  # the hot path's: the budget policy's task
        if store is not None:  # history: this session's, read already (Fleet.restore_all)
            self._restore(history)

    def __repr__(self) -> str:
        return f"<Guardrails session={self.session_id!r} mode={self.mode} halted={self.halted}>"

    # -- turns ---------------------------------------------------------------------------------

    def start_turn(self) -> Turn:
        """Open a turn: the feedback block to prepend, or ``GuardrailHalted`` if halted.

        A refused turn is not a turn boundary: nothing in it ran, so nothing resets.
        """
        with self._lock:
            log = self._log
            if log is not None and len(log):
                log.drain(DECISION_WAIT)  # a decision point, refused or not: retry the store
            if self._in_turn:
                self._close_turn()  # the last turn never said it ended
            trip = self._cost.check()  # settle: spend recorded since the last check
            if trip is not None:
                self._cost_decision(trip, in_turn=False)
            if self._watchdog is not None:
                self._watchdog.count_event()
            self._ids.clear()  # a new turn (even a refused one): the old call ids are stale
            if log is not None and not len(log):
                # an operator may have reset it from another process (only once every row of
                # ours is in the store: a halt the store never saw must not read as reset)
                if log.shared:
                    self._sync_shared()  # other daemons' halts and spend, too
                elif self.halted:
                    self._sync_resets()
            if self.halted:
                self._channel.counters.count_refused()
                reason = self._halt_reason()
                self._channel.emit("refused_turn", lines.refused_turn(reason),
                                   guardrail=self._halted_by()[0])
                raise GuardrailHalted(reason, self._halted_by())
            refused = self._budget.refusal()
            if refused is not None:  # the task is exhausted (enforce): no more turns
                self._channel.counters.count_refused()
                self._channel.emit("refused_turn", lines.refused_turn(refused),
                                   guardrail=BUDGET)
                self._blocked = Decision(REFUSE_TURN, BUDGET, refused)
                raise GuardrailHalted(refused, (BUDGET,))
            if self._watchdog is not None:
                self._watchdog.turn_boundary()
            self._cost.start_turn()
            self._usage.turn += 1
            self._in_turn = True
            self._blocked = None
            compact = self._context.start_turn() if self._context is not None else False
            queue = self._policy.feedback
            if self._budget.task.notes:
                for note in self._budget.notes():  # 50% / 80% of a counter (SPEC §7.1)
                    queue.push(note)
            feedback = queue.drain() if len(queue) else ""
            return Turn(feedback, compact) if feedback or compact else Turn()

    def end_turn(self) -> Decision:
        """Close the turn: boundary checks, then the post-turn reports of warn/feedback modes."""
        with self._lock:
            decision = CONTINUE
            if self._watchdog is not None:
                self._watchdog.end_turn()
            trip = self._cost.check()
            if trip is not None:
                decision = self._cost_decision(trip, in_turn=False)
            self._close_turn()
            self._budget.end_turn()
            if self._log is not None:
                self._persist_turn_end()
            return decision

    def _close_turn(self) -> None:
        self._policy.close_turn()
        self._cost.end_turn()
        self._in_turn = False
        if self._blocked is not None and not self.halted:
            self._blocked = None

    # -- observations (the hot path) -----------------------------------------------------------
    # on_call, on_result and on_text: the reference engine's Guardrails runs these; the native
    # one runs their twins in _native.GuardrailsCore (_guardrails.pxi), the same steps in the
    # same order. Change both together (the suite runs each on its engine).

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
            calls = self._task._calls
            n = calls.tool_calls + 1
            if n < calls.call_mark:
                calls.tool_calls = n
                if id is not None:
                    self._budget.open[id] = name  # without a result yet
            else:
                pending = self._budget.on_call(name, id)
                if pending is not None and not pending.proceed:
                    self._blocked = pending
                    return pending
            # task accounting: end
            watchdog = self._watchdog
            if watchdog is None:
                return CONTINUE if pending is None else pending
            if id is not None:
                ids = self._ids
                if len(ids) >= MAX_CALL_IDS:  # remember_call_id(), inlined: the hot path
                    ids.clear()
                ids[id] = name
            alerts = watchdog.observe_call(name, args)
            if alerts:
                decision = self._on_alerts(alerts)
                return decision if pending is None else _with_cancel(decision, pending)
            # per-call policies other than the watchdog's and the task's go here (and in the
            # twin), each turning CONTINUE into its own decision
            return CONTINUE if pending is None else pending
        finally:
            lock.release()

    def on_result(self, name: str | None = None, *, id: str | None = None,
                  error: Any = None, no_op: bool = False, payload: Any = None) -> Decision:
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
                    name = self._ids.get(id, "") if id is not None else ""
                alerts = watchdog.observe_result(name, error=error, no_op=no_op, payload=payload)
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
            return decision if pending is None else _with_cancel(decision, pending)
        finally:
            lock.release()

    def on_result_chunk(self, chunk: Any, *, id: str | None = None) -> Decision:
        """Part of a tool result as it streams in: counted toward the context estimate now (the
        same total whatever the chunking); the final ``on_result`` then skips the payload's
        bytes for the estimate (its digest still needs the whole payload, if you have it)."""
        with self._lock:
            if self._blocked is not None:
                return self._blocked
            context = self._context
            if context is None:
                return CONTINUE
            context.observe_bytes(chunk)
            context.streamed = True
            return self._context_check(CONTINUE)

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
                self._policy.withdraw_answered()
            if alerts:
                return self._on_alerts(alerts)
            return CONTINUE if pending is None else pending

    def on_usage(self, *, model: str | None = None, input_tokens: int | None = None,
                 output_tokens: int | None = None, cost_usd: float | None = None,
                 estimated: bool = False, unpriced: bool = False) -> Decision:
        """One model call's provider-reported usage; checked against the cost ceiling at once.

        ``estimated``: ``cost_usd`` was computed from token prices (``tripwire.prices``), not
        reported, so trips and store rows say so. ``unpriced``: the model has no price, so the
        usage has no cost and cost ceilings cannot trip on it (``status`` says so)."""
        nano = usage_cost_nano(input_tokens, output_tokens, cost_usd, model)  # checked first
        with self._lock:
            if estimated:
                self._cost_estimated = True
            if unpriced and (model or "") not in self._unpriced:
                self._unpriced.add(model or "")
                self._unpriced_changed = True
            if self._watchdog is not None:
                self._watchdog.count_event()
            self._usage.add(model, input_tokens, output_tokens, nano)
            trip = self._cost.add(nano)  # spend counts even while halted or cut
            decision = CONTINUE
            if trip is not None:
                decision = self._cost_decision(trip, in_turn=self._in_turn)
            elif self._blocked is not None:
                decision = self._blocked
            log = self._log
            if log is not None and not log.holds(self._cost.spent):
                self._persist_spend()  # a spent budget stays spent, even after a crash mid-turn
            spent = self._budget.on_usage(input_tokens, output_tokens, nano)  # the task's too
            if spent is not None and decision is CONTINUE:
                decision = spent
                if not spent.proceed and self._in_turn:
                    self._blocked = spent
            policy = self._context_policy
            if policy is not None:
                for record in policy.guard.observe_usage(model, input_tokens):
                    policy.record(record)
                return self._context_check(decision)
            return decision

    # -- policy hand-offs (batch ingest calls these too) -------------------------------------

    def _on_alerts(self, alerts: tuple[Alert, ...]) -> Decision:
        decision = self._policy.on_alerts(alerts)
        if not decision.proceed:
            self._blocked = decision
            self._budget.record(decision)
        return decision

    def _timed_out(self, name: str) -> Decision:
        """A call cancelled for its timeout counts as a failed result for the watchdog."""
        watchdog = self._watchdog
        if watchdog is None:
            return CONTINUE
        alerts = watchdog.observe_result(name, error=TIMEOUT_ERROR)
        return self._on_alerts(alerts) if alerts else CONTINUE

    # -- the task (SPEC §7) ------------------------------------------------------------------

    @property
    def task(self) -> Task:
        """The task this session runs under (its own implicit one when none was given)."""
        return self._budget.task

    def run_task(self, task: Task) -> None:
        """Run the session's next work under ``task`` (a ``task_start``): its observations
        charge it from now on. The previous task is no longer charged."""
        if not isinstance(task, Task):
            raise ConfigError(f"task must be a tripwire Task, not {type(task).__name__}")
        with self._lock:
            old = self._budget
            with old.task._lock:
                if old in old.task.sessions:
                    old.task.sessions.remove(old)
                old.task._remark()
            self._budget = BudgetPolicy(task, self, self.mode, self._channel)
            self._task = task
            if self._blocked is not None and self._blocked.guardrail == BUDGET:
                self._blocked = None  # the old task's exhaustion does not bind the new one

    def on_stop_attempt(self, accepted: bool, answer: Any = None) -> Decision:
        """The agent tried to finish; a stop hook accepted or refused it (SPEC §7.1). Past
        the task's ``stop_rejections`` cap a refusal exhausts the task (its last answer
        attached, unverified): under ``enforce``, a cut. ``answer`` defaults to the agent's
        last words."""
        with self._lock:
            decision = self._budget.stop_attempt(accepted, answer)
            return self._budget_decision(decision)

    def on_retry(self, reason: str = "") -> Decision:
        """A transport/provider retry of a failed model request (not a tool failure)."""
        with self._lock:
            return self._budget_decision(self._budget.retry(reason))

    def poll(self) -> Decision:
        """Judge the clock now (a host waiting on a tool calls it): ``cancel_tool`` for calls
        past the task's tool timeout, a cut when the deadline passed (``enforce``)."""
        with self._lock:
            if self._blocked is not None:
                return self._blocked
            return self._budget_decision(self._budget.poll_time())

    def _budget_decision(self, decision: Decision | None) -> Decision:
        if decision is None:
            return self._blocked if self._blocked is not None else CONTINUE
        if not decision.proceed:
            self._blocked = decision
        return decision

    # -- batch ingest (Fleet.observe_many, which holds the lock) ----------------------------

    def touch(self, now: float) -> None:
        """Note when the session was last fetched (Fleet's idle eviction): in the object the
        next call reads anyway (a float elsewhere would be one more cold access)."""
        self._used_at = now

    @property
    def last_used(self) -> float:
        return self._used_at

    @property
    def lock(self) -> SessionLock:
        """The session's lock (a batch holds every session's lock while it runs)."""
        return self._lock

    def batch_state(self) -> BatchState:
        """What batch ingest needs of this session. The engine is None when the batch must
        hand every row to this object: off mode, or a result streaming in chunk by chunk (its
        final result skips the bytes already counted, which only on_result knows)."""
        c = self._context
        context = None if c is None else ContextState(
            c.measured, c.estimator.bytes, c.compact_at, c.cut_tokens, c.pending,
            c.cut_this_turn, c.model)
        engine = None if (c is not None and c.streamed) or self.settings.custom_signals \
            else self._watchdog  # custom signals observe in Python: every row comes here
        if self._budget.calls_armed:
            engine = None  # its task bounds calls or time: each row is charged in Python
        cost = self._cost
        # a task bounding steps, tokens or dollars is charged each usage row in Python
        return BatchState(engine, self._blocked is not None, context, self._ids,
                          self._words_matter(),
                          None if self._budget.usage_armed else
                          CostState(cost.spent, cost.baseline, cost.max_turn, cost.ceiling,
                                    cost.halted or cost.turn_tripped))

    def take_batch_change(self, change: BatchChange) -> None:
        """What the batch core changed in this session, before policy looks at it: spend it
        charged (it checked that no bound trips), a context a usage measured, estimate bytes."""
        if change.spent is not None:
            added = change.spent - self._cost.spent
            trip = self._cost.add(added)
            assert trip is None, "the batch core charges only spend that trips no bound"
            self._task.charge_batch(0, 0, added, 0)  # its task's dollars (no cap on them)
        context = self._context
        if context is not None:
            if change.measured is not None:
                context.observe_usage(None, change.measured)
            if change.added:
                context.estimator.add_bytes(change.added)

    def on_batch_stop(self, kind: str, alerts: tuple[Alert, ...]) -> Decision:
        """The policy for a row the batch core observed and stopped at (``StopReason.POLICY``):
        its alerts, agent words that answer queued notes, a context limit a result crossed."""
        decision = self._on_alerts(alerts) if alerts else CONTINUE
        if kind == "text":
            self._policy.withdraw_answered()
        elif self._context is not None and kind == "result":
            decision = self._context_check(decision)
        return decision

    @property
    def blocked_decision(self) -> Decision | None:
        """The halt, or this turn's cut, that every later event of the turn gets."""
        return self._blocked

    @property
    def call_ids(self) -> dict[Any, str]:
        """Call id -> tool name, for results named by id (a batch replaces the map whole)."""
        return self._ids

    @call_ids.setter
    def call_ids(self, ids: dict[Any, str]) -> None:
        self._ids = ids

    def persist_spend(self) -> None:
        """Write the spend if the store does not have it yet (a batch charged usage rows)."""
        log = self._log
        if log is not None and not log.holds(self._cost.spent):
            self._persist_spend()

    def _words_matter(self) -> bool:
        return self._policy.words_matter()

    # -- cost and context (policies.py decides) ------------------------------------------

    def _cost_decision(self, trip: CostTrip, *, in_turn: bool) -> Decision:
        if self._cost_estimated:
            trip = replace(trip, reason=lines.estimated_cost(trip.reason))
        decision = self._cost_policy.decide(trip, in_turn=in_turn)
        if in_turn or trip.halts:
            self._blocked = decision
            self._budget.record(decision)
        return decision

    def _context_check(self, decision: Decision) -> Decision:
        """After an observation that moved the estimate: pending compaction, or the 95% cut."""
        policy = self._context_policy
        assert policy is not None  # called only with a context guard
        checked = policy.check(decision)
        if checked is not decision:
            self._blocked = checked
            self._budget.record(checked)
        return checked

    def compact(self, messages: Any, focus: str | None = None, *,
                manual: bool = False) -> Compaction:
        """Reduce the context now: the host's ``summarize`` (with tripwire's retry, backoff and
        fallback rules), or mechanical truncation. Automatic (the default): call it when
        ``start_turn().compact`` is true; a failure is a durable ``context-reduction-failed``
        row and backs off. ``manual=True`` (the operator's ``/compact [focus]``): a failure is
        reported in the result alone (``kind == "failed"``, ``reason``), with no row and no
        backoff. ``Compaction.apply(messages)`` is the new history."""
        with self._lock:
            if self._context_policy is None:
                return Compaction("skipped", reason="the context guard is disabled",
                                  manual=manual)
            return self._context_policy.compact(messages, focus, self._summarize, manual=manual)

    def checkpoint(self, messages: Any, note: str | None = None, *,
                   manual: bool = False) -> Compaction:
        """A task-boundary checkpoint: slice the finished task out of the history through the
        same summarizer policy (``summarize(messages, note)``; retry, backoff, mechanical
        fallback), with ``operation: checkpoint`` in its records. Automatic (the model declared
        the boundary) or ``manual=True`` (the operator's ``/done [note]``), as ``compact``."""
        with self._lock:
            if self._context_policy is None:
                return Compaction("skipped", reason="the context guard is disabled",
                                  operation="checkpoint", manual=manual)
            return self._context_policy.checkpoint(messages, note, self._summarize,
                                                   manual=manual)

    def context_stats(self) -> ContextStats:
        """The ``/context`` view: compactions (count, last time, last focus), checkpoints
        (count, last note), characters summarized, the context's size against its window
        (unknown when the model's window is), and the per-model usage, by descending cost."""
        with self._lock:
            if self._context is None:
                return usage_stats(self._usage)
            return self._context.stats(self._usage)

    def utilization(self) -> Utilization | None:
        """How full the context is (None when the context guard is disabled)."""
        with self._lock:
            return self._context.utilization() if self._context is not None else None

    # -- halts, resets and status --------------------------------------------------------------

    @property
    def halted(self) -> bool:
        return self._policy.halt_reason is not None or self._cost.halted

    def _halted_by(self) -> tuple[str, ...]:
        by = []
        if self._policy.halted:
            by.append("watchdog")
        if self._cost.halted:
            by.append("cost_ceiling")
        return tuple(by)

    def _halt_reason(self) -> str:
        return " ".join(r for r in (self._policy.halt_reason, self._cost.reason) if r)

    def refusal(self) -> Decision:
        """The decision for a turn refused at its start (``refuse_turn``), while halted (or
        while the task is exhausted, under ``enforce``: guardrail ``budget``)."""
        if not self.halted:
            refused = self._budget.refusal()
            if refused is not None:
                return Decision(REFUSE_TURN, BUDGET, refused)
        return Decision(REFUSE_TURN, self._halted_by()[0] if self.halted else None,
                        self._halt_reason())

    def reset(self, guardrail: str = "all", additional_budget_usd: float = 0.0) -> ResetOutcome:
        """An operator reset (SPEC §3, §4). Clears halts and the watchdog's run state but keeps
        the queued feedback, so the resumed model learns why it was stopped.

        Raises ``ResetRefused`` (nothing changed) while the spend is at least the per-session
        ceiling plus ``additional_budget_usd``, and ``InvalidReset`` for budget the reset
        cannot apply.
        """
        with self._lock:
            scope = Guardrail.parse_reset(guardrail)
            try:
                budget = self._cost.check_reset(additional_budget_usd, scope)
            except ResetRefused as refused:
                self._channel.emit("reset_refused", refused.reason, level=logging.WARNING,
                                   guardrail="cost_ceiling")
                raise
            cleared: list[str] = []
            if scope.covers(Guardrail.WATCHDOG):
                cleared += self._policy.reset()
                if self._watchdog is not None:
                    self._watchdog.reset()  # a resumed run must build back up to a threshold
            if scope.covers(Guardrail.COST_CEILING):
                cleared += self._cost.reset(budget)
            if not self.halted:
                self._blocked = None
            still = self._halted_by()
            message = lines.reset_done(cleared, budget, self._cost.ceiling, still)
            self._persist("reset", {"guardrail": scope.value, "budget_usd": budget / NANO,
                                    "cleared": cleared, **self._spend_fields()})
            self._channel.emit("reset", message,
                               guardrail=None if scope is Guardrail.ALL else scope.value)
            return ResetOutcome(tuple(cleared), still, self._cost.ceiling / NANO, message)

    _with_cancel = staticmethod(_with_cancel)  # for the native core's slow path

    def retract_calls(self, calls: int) -> None:
        """The last ``calls`` tool calls were refused by the host's permission gate and the
        turn ended: they come off the watchdog's run state (``Watchdog.retract_calls``), so
        the next turn's first identical call is not the next one in a row. A halt, a cut and
        every alert already raised stay as they are (docs/guardrails.md)."""
        with self._lock:
            count = retracted_count(calls)  # checked in every mode
            if self._watchdog is not None:
                self._watchdog.retract_calls(count)

    def status(self) -> Status:
        with self._lock:
            cost = self._cost
            needed = 0.0
            if cost.session_reason is not None and cost.would_retrip:
                needed = (cost.spent - cost.ceiling) / NANO
            return Status(
                session_id=self.session_id,
                mode=str(self.mode),
                halted=self.halted,
                halted_by=self._halted_by(),
                watchdog_reason=self._policy.halt_reason,
                cost_reason=cost.reason,
                spent_usd=cost.spent / NANO,
                turn_spent_usd=cost.turn_spent() / NANO,
                max_turn_cost_usd=cost.max_turn / NANO,
                max_session_cost_usd=cost.ceiling / NANO,
                granted_budget_usd=cost.granted / NANO,
                would_retrip=cost.would_retrip,
                budget_needed_usd=needed,
                queued_feedback=len(self._policy.feedback),
                counters=self._channel.counters.snapshot(),
                context=self._context.utilization() if self._context is not None else None,
                compaction_pending=self._context.pending if self._context is not None else False,
            )

    # -- durability (SPEC §5) ------------------------------------------------------------------

    def _persist(self, kind: str, data: dict[str, Any]) -> None:
        """Append one row before the decision is returned (the store fsyncs), waiting for the
        store at most DECISION_WAIT: a row the store does not take by then stays in the outbox,
        in order, and is written in the background (persistence.py) — a held lock must neither
        lose a halt nor hold the harness's decision."""
        log = self._log
        if log is None:
            return
        # trips, resets and spend rows all carry the spend and counts; context rows do not
        log.put(kind, data, None if kind == "context" else (self._cost.spent, self._counts()))

    def flush(self) -> bool:
        """Write rows the store did not take yet (waiting the store's full timeout); True when
        none is left."""
        return self._log is None or self._log.flush()

    @property
    def unpersisted_rows(self) -> int:
        """Rows decided but not yet in the store (0 without a store)."""
        return len(self._log) if self._log is not None else 0

    def _counts(self) -> tuple[str | None, int, int]:
        return self._policy.cut_signal, self._policy.cut_in_a_row, self._cost.in_a_row

    def _spend_fields(self) -> dict[str, Any]:
        """What every trip, reset and spend row carries: the ceiling's snapshot, and whether
        the spend is partly estimated or some model was unpriced (SPEC §11.3)."""
        fields: dict[str, Any] = self._cost.snapshot()
        if self._cost_estimated:
            fields["estimated"] = True
        if self._unpriced:
            fields["unpriced_models"] = sorted(self._unpriced)
        return fields

    def _persist_trip(self, kind: str, data: dict[str, Any]) -> None:
        """A policy's row, with the spend every trip row carries."""
        self._persist(kind, {**data, **self._spend_fields()})

    def _persist_spend(self) -> None:
        data = {**self._spend_fields(), **self._policy.snapshot(),
                "cost_in_a_row": self._cost.in_a_row}
        if self._usage.models:
            data["models"] = self._usage.snapshot()  # the /context view of a stored session
        self._persist("spend", data)

    def _persist_turn_end(self) -> None:
        """At a turn boundary, what a restart needs and no other row wrote: the escalation
        counts (a clean turn clears them), and any spend not written yet."""
        log = self._log
        if log is None:
            return
        if not log.holds(self._cost.spent, self._counts()) or self._unpriced_changed:
            self._unpriced_changed = False
            self._persist_spend()
        elif len(log):
            log.drain(DECISION_WAIT)

    def restore(self, store: Any) -> None:
        """Fold a store's history of this session forward (done at construction when a store
        is given). Fails open: an unreadable store means the session runs unrestored, with a
        logged warning naming it."""
        with self._lock:
            if self._log is None:
                self._log = SessionLog(store, self.session_id, self._channel.line)
                task = self._task
                if task._log is None and task.task_id == self.session_id and not task.sessions[1:]:
                    task._log = self._log  # the implicit task writes into the session's chain
            else:
                self._log.store = store
            self._restore()

    def _restore(self, history: Any = None) -> None:
        log = self._log
        assert log is not None  # restoring needs a store
        folded = log.read(history)
        if folded is None or (not folded.rows and folded.tampered is None):
            return
        task = self._budget.task
        if task._log is log and folded.task_rows:  # the implicit task shares the chain
            task.apply_rows([d for d in folded.task_rows if d.get("task") == task.task_id])
            task._remark()
            task._written = task._state()
        cost = self._cost
        cost.apply(folded)
        if self._watchdog is not None:
            self._policy.apply(folded)
        if folded.tampered is not None and (self.mode == Mode.ENFORCE or cost.active):
            reason = lines.tampered_halt(folded.tampered)
            self._policy.hold(reason)
            LOGGER.warning(self._channel.line(reason))
        if self.halted:
            self._blocked = self.refusal()
        log.mark_stored(cost.spent, self._counts())

    def _sync_resets(self) -> None:
        """Clear halts that an operator reset in the store (e.g. `tripwire reset` run by
        another process) and take the budget it granted."""
        folded = self._log.read() if self._log is not None else None
        if folded is None:
            return
        self._sync_resets_from(folded)
        if not self.halted:
            self._blocked = None

    def _sync_shared(self) -> None:
        """The store is shared with other processes that run this session too (a session that
        moved between daemons): take what they wrote since — a halt, spend, a reset, granted
        budget — as a restore would, before this turn may start."""
        log = self._log
        assert log is not None
        folded = log.read()
        if folded is None:
            return
        if self.halted:
            self._sync_resets_from(folded)
        cost = self._cost
        cost.apply(folded)  # the spend stays spent (the larger total); budget; cost halts
        policy = self._policy
        if self._watchdog is not None and policy.halt_reason is None and (
                folded.watchdog_halt is not None):
            policy.apply(folded)  # halted elsewhere: held here too (in enforce)
        if folded.tampered is not None and policy.halt_reason is None and (
                self.mode == Mode.ENFORCE or cost.active):
            policy.hold(lines.tampered_halt(folded.tampered))
        self._blocked = self.refusal() if self.halted else None
        log.mark_stored(cost.spent, self._counts())

    def _sync_resets_from(self, folded: Any) -> None:
        if self._policy.sync(folded) and self._watchdog is not None:
            self._watchdog.reset()
        self._cost.sync(folded)

    @property
    def counters(self) -> Counters:
        return self._channel.counters

    @property
    def watchdog(self) -> Watchdog | None:
        """The session's watchdog (None in ``off`` mode)."""
        return self._watchdog


class PythonGuardrails(Guardrails):
    """A ``Guardrails`` on the pure-Python reference engine (its observations are the methods
    above)."""

    __slots__ = (*_CORE_SLOTS, *_SLOTS)


try:
    from ._native import GuardrailsCore, register_guardrails
except ImportError:  # not built: guardrails_class("native") raises the clear error when asked
    GuardrailsCore = None  # type: ignore[assignment,misc]

_Core = GuardrailsCore

if GuardrailsCore is not None:

    class NativeGuardrails(GuardrailsCore, Guardrails):
        """A ``Guardrails`` on the C++ core: ``on_call``, ``on_result`` and ``on_text`` are
        the core's (Cython), the rest is ``Guardrails``'."""

        __slots__ = _SLOTS

    register_guardrails(NativeGuardrails)


def guardrails_class(implementation: str | None = None) -> type[Guardrails]:
    """The concrete ``Guardrails`` class of an implementation ("native" or "python")."""
    return _engine.concrete(implementation, PythonGuardrails, lambda: NativeGuardrails)
