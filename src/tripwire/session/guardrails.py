"""``Guardrails``: the one object a harness wires into its loop (one per session).

A dispatcher: it holds the session's lock and its blocked decision (a cut turn or a halted
session: later events get it), runs the turn lifecycle and hands each observation to the
policies, one job each — ``WatchdogPolicy`` (the watchdog's alerts, SPEC §3), ``CostPolicy``
(§4), ``ContextPolicy`` (§6), ``BudgetPolicy`` (the task, §7) — whose ``Decision`` it returns.
The common path of ``on_call``, ``on_result`` and ``on_text`` is the engine's core's, the
concrete class's first base (``core.GuardrailsCore``, ``_native``'s twin), which calls back
into the hand-offs here for policy. The rest of the class is in parts by concern, each a mixin
over ``fields.SessionFields``: ``task_methods`` (the task: stop attempts, retries, clock
checks, a new task), ``context_methods`` (compaction, checkpoints, the ``/context`` view) and
``operator`` (halts, resets, status, flush and restore; ``policy.halts.Halts`` and
``durability.Durability`` do the work). The constructor's checks are ``config``'s; what batch
ingest reads of a session is ``SessionBatch``'s (below). ``start_turn()`` returns the ``Turn``
(the feedback block to prepend) or raises ``GuardrailHalted`` before any model call when
halted.

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

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from ..base.decision import CONTINUE, Decision, Turn, stronger
from ..base.inputs import remember_call_id
from ..base.modes import Mode
from ..base.money import NANO, usage_cost_nano
from ..budgets.task import Task
from ..durability.log import DECISION_WAIT, SessionLog
from ..engine import select as _engine
from ..engine.batch import BatchChange, BatchState, CostState, TaskState
from ..engine.watchdog import Watchdog
from ..errors import GuardrailHalted
from ..policy.budget import BUDGET, TIMEOUT_ERROR, BudgetPolicy, checked_task
from ..policy.ceiling import CostCeiling, CostTrip
from ..policy.context import ContextPolicy
from ..policy.cost import CostPolicy
from ..policy.halts import ResetOutcome, Status
from ..policy.reporting import Counters, OperatorChannel, OperatorEvent
from ..policy.watchdog import WatchdogPolicy
from ..signals import Alert
from . import core as _reference_guardrails
from .config import GuardrailsConfig, ResolvedConfig, resolve_session
from .context_methods import ContextMethods
from .core import SessionLock
from .durability import Durability
from .operator import OperatorMethods
from .task_methods import TaskMethods

if TYPE_CHECKING:
    from ..context.config import ContextConfig
    from ..context.guard import ContextGuard, SummaryResult

__all__ = ["Guardrails", "NativeGuardrails", "PythonGuardrails", "GuardrailsConfig",
           "ResolvedConfig", "Status", "ResetOutcome", "SessionLock", "guardrails_class"]


# The fields of the concrete classes beside their core's (which holds those every observation
# reads: _reference_guardrails.GuardrailsCore and _native.GuardrailsCore)
# (the operator channel, the durable side and the cost ceiling are its policies' own: read
# through them, not held twice)
_SLOTS = ("mode", "_policy", "_in_turn", "_cost_policy", "_context_policy", "session_id",
          "settings")


def session_watchdog(resolved: ResolvedConfig, implementation: str | None) -> Watchdog | None:
    """A session's watchdog: the built-in signals of its configuration, and its custom ones
    (None in ``off`` mode)."""
    if resolved.mode <= Mode.OFF:
        return None
    if resolved.custom_signals:
        from ..engine.custom import custom_watchdog

        return custom_watchdog(resolved.watchdog, resolved.custom_signals,
                               implementation=implementation)
    from ..engine.watchdog import Watchdog

    return Watchdog(resolved.watchdog, implementation=implementation)


def _context_guard(config: ContextConfig, engine: Any) -> ContextGuard:
    """A session's context guard, on the engine's token estimator; imported here, so a session
    with the guard off (a hook's: the harness compacts its own context) never loads it."""
    from ..context.guard import ContextGuard

    return ContextGuard(config, engine.TokenEstimator, engine.utf8_length)


def session_task(task: Task | None, resolved: ResolvedConfig, session_id: str,
                 clock: Callable[[], float | None] | None, lock: SessionLock,
                 log: SessionLog | None) -> Task:
    """The task a session runs under (SPEC §7.1): the host's, or its own implicit one, whose
    rows go into the session's own chain."""
    if task is not None:
        return checked_task(task)
    task = Task(budget=resolved.budget, task_id=session_id, clock=clock, _lock=lock)
    task.share_log(log)
    if task.caps["deadline_s"]:
        task.defer_start()  # its start time is written at the first decision point
    return task


class Guardrails(TaskMethods, ContextMethods, OperatorMethods):
    """One session's guardrails. ``Guardrails(...)`` returns a ``NativeGuardrails`` (the C++
    core, with its observations' common path in Cython) or a ``PythonGuardrails`` (the
    reference engine), as ``Watchdog(...)`` does; both are ``Guardrails``."""

    if not TYPE_CHECKING:
        __slots__ = ()  # the fields are the concrete classes' (the native core's come first)

    def __new__(cls, config: GuardrailsConfig | ResolvedConfig | None = None, *,
                implementation: str | None = None, **_: Any) -> Guardrails:
        # Guardrails(...) only (a concrete class's core comes first in its MRO): the engine's
        # class, whose core makes the object (its fields first, its lock)
        if cls is not Guardrails:
            raise TypeError(f"{cls.__name__}: subclass PythonGuardrails or NativeGuardrails")
        target = guardrails_class(implementation)
        instance: Guardrails = target.__new__(target)
        return instance

    def __init__(self, config: GuardrailsConfig | ResolvedConfig | None = None, *,
                 session_id: str = "default",
                 on_event: Callable[[OperatorEvent], object] | None = None,
                 counters: Counters | None = None, implementation: str | None = None,
                 summarize: Callable[[Any, str | None], SummaryResult] | None = None,
                 store: Any = None, history: Any = None, task: Task | None = None,
                 clock: Callable[[], float | None] | None = None,
                 durable_turns: bool = False, feedback_at_once: bool = False):
        """``durable_turns``: the turn in progress (whether one is open, its cut or the halt's
        decision, the feedback queued for the model) is written to the store by ``flush()``
        when it changed, and restored with the session, so a host whose every event is a new
        process (a hook) continues the turn where the last one left it (needs a store).
        ``feedback_at_once``: the host tells the model queued feedback as soon as it can
        (``take_feedback()``) and shows it a cut's reason with the cut: alerts join the queue
        as they fire (``feedback`` mode too), a cut's or halt's critical alerts do not (its
        reason says them), and ``start_turn()``'s block carries the task's notes alone."""
        resolved = resolve_session(config, session_id,
                                   {"on_event": on_event, "summarize": summarize})
        self.session_id = session_id
        self.settings = resolved
        self.mode = resolved.mode
        resolved.announce()  # the startup line, once per process per configuration
        self._watchdog = session_watchdog(resolved, implementation)
        channel = OperatorChannel(session_id, on_event, counters)
        # the durable log (rows on their way to the store, the history read back), and the
        # policies that write it
        durable = Durability(store, session_id, channel, durable_turns)
        self._policy = WatchdogPolicy(resolved.mode, resolved.watchdog_escalate_after,
                                      resolved.feedback_queue, channel, durable,
                                      self._watchdog, at_once=feedback_at_once)
        self._cost_policy = CostPolicy(
            CostCeiling(resolved.max_turn_cost_usd, resolved.max_session_cost_usd,
                        resolved.cost_escalate_after), durable)
        durable.bind(self._policy, self._cost_policy)
        self._blocked = None  # the halt, or this turn's cut: later events get it
        self._in_turn = False
        self._ids = None      # call id -> tool name, for results by id (made at the first)
        self.last_used = 0.0
        engine = _engine.load(_engine.resolve(implementation))
        self._context = (_context_guard(resolved.context, engine)
                         if resolved.context.enabled else None)
        self._context_policy = ContextPolicy(self._context, durable, summarize,
                                             enforce=resolved.mode == Mode.ENFORCE)
        task = session_task(task, resolved, session_id, clock, self._lock, durable.log)
        self._budget = BudgetPolicy(task, self, resolved.mode, channel)
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
            log = self._durable.log
            if log is not None and len(log):
                log.drain(DECISION_WAIT)  # a decision point, refused or not: retry the store
            if self._in_turn:
                self._close_turn()  # the last turn never said it ended
            self._settle_cost()
            if self._watchdog is not None:
                self._watchdog.count_event()
            if self._ids:  # a new turn (even a refused one): the old call ids are stale
                self._ids.clear()
            if log is not None and not len(log):
                # an operator may have reset it from another process (only once every row of
                # ours is in the store: a halt the store never saw must not read as reset)
                if log.shared:  # other daemons' halts and spend, too
                    if self._durable.sync_shared(self.halted):
                        self._blocked = self.refusal() if self.halted else None
                    self._settle_cost()  # on the summed spend
                elif self.halted:
                    self._durable.sync_resets()
                    if not self.halted:
                        self._blocked = None
            if self._task.exhausted is not None:  # raised or checked in by another process?
                self._task.sync_stored()
            halts = self._halts
            refused = halts.refuse_turn(self._budget)  # halted, or the task exhausted
            if refused is not None:
                if refused.guardrail == BUDGET:  # enforce: the task's later turns are refused
                    self._blocked = refused
                raise GuardrailHalted(refused.reason, halts.by() or (BUDGET,))
            if self._watchdog is not None:
                self._watchdog.turn_boundary()
            self._cost_policy.start_turn()
            self._in_turn = True
            self._blocked = None
            compact = self._context.start_turn() if self._context is not None else False
            # the task's notes: 50% / 80% of a counter (SPEC §7.1), Task.tell
            feedback = self._policy.drain_feedback(self._budget.notes())
            return Turn(feedback, compact)

    def end_turn(self) -> Decision:
        """Close the turn: boundary checks, then the post-turn reports of warn/feedback modes."""
        with self._lock:
            if self._watchdog is not None:
                self._watchdog.end_turn()
            decision = self._settle_cost()
            self._close_turn()
            self._budget.end_turn()
            self._durable.turn_end()
            return decision

    def _close_turn(self) -> None:
        self._policy.close_turn()
        self._cost.end_turn()
        self._in_turn = False
        if self._blocked is not None and not self.halted:
            self._blocked = None

    def continue_turn(self) -> None:
        """A turn is under way that was not started here: a host that learns of a turn from
        its tool calls (a hook whose harness reported no prompt: installed mid-session, or
        after the harness compacted its context) marks it, so that ``end_turn`` closes it.
        Nothing resets and no feedback is delivered (``start_turn`` does both)."""
        with self._lock:
            self._in_turn = True

    @property
    def in_turn(self) -> bool:
        """Whether a turn is open: started (or continued) and not ended yet."""
        return self._in_turn

    @property
    def spent_usd(self) -> float:
        """The session's spend in dollars, as ``status().spent_usd``, without the rest of a
        status (what a fleet-wide sort or a metrics scrape reads per session)."""
        return float(self._cost.spent) / NANO

    @property
    def blocked(self) -> Decision | None:
        """The decision every later event of the turn gets: the turn's cut, or the halt (the
        refusal of a session restored halted), or None."""
        return self._blocked

    def take_feedback(self, *, now: bool = False) -> str:
        """The ``[watchdog]`` block queued for the model, taken now, for a host that can tell
        the model between turns' starts (a hook's ``additionalContext``; see
        ``feedback_at_once``): delivered once; "" when nothing is queued or below ``feedback``
        mode. ``now``: it is told in the turn in progress (with a tool's result), so its header
        says the observation is about the current turn, not the previous one."""
        with self._lock:
            return self._policy.take_feedback(now)

    # -- observations ----------------------------------------------------------------------------
    # on_call, on_result and on_text are the engine's core's: _reference_guardrails.GuardrailsCore
    # (PythonGuardrails) and _native.GuardrailsCore (NativeGuardrails, _guardrails.pxi), twins
    # that run the same steps in the same order (change them together) and call back into the
    # hand-offs below. Declared here for type checkers and readers.

    if TYPE_CHECKING:
        def on_call(self, name: str, args: Any = None, id: str | None = None) -> Decision:
            """A tool call the model asked for."""

        def on_result(self, name: str | None = None, *, id: str | None = None,
                      error: Any = None, no_op: bool = False, payload: Any = None,
                      unknown_tool: bool = False) -> Decision:
            """A tool's answer, by ``name`` or by the ``id`` of its call. ``unknown_tool``: the
            host says the called tool does not exist (``unknown-tool``)."""

        def on_text(self, text: str) -> Decision:
            """The agent's own words (not tool output, injected messages or private
            reasoning)."""

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

    def on_usage(self, *, model: str | None = None, input_tokens: int | None = None,
                 output_tokens: int | None = None, cost_usd: float | None = None,
                 estimated: bool = False, unpriced: bool = False) -> Decision:
        """One model call's provider-reported usage; checked against the cost ceiling at once.

        ``estimated``: ``cost_usd`` was computed from token prices (``interchange/prices.py``), not
        reported, so trips and store rows say so. ``unpriced``: the model has no price, so the
        usage has no cost and cost ceilings cannot trip on it (``status`` says so)."""
        nano = usage_cost_nano(input_tokens, output_tokens, cost_usd, model)  # checked first
        with self._lock:
            alerts = self._response(bool(output_tokens))  # a usage event is one model response
            # spend counts even while halted or cut
            trip = self._cost_policy.charge(model, input_tokens, output_tokens, nano, estimated,
                                            unpriced)
            decision = CONTINUE
            if trip is not None:
                decision = self._cost_decision(trip, in_turn=self._in_turn)
            elif self._blocked is not None:
                decision = self._blocked
            self._durable.persist_spend()  # a spent budget stays spent, even after a crash
            spent = self._budget.on_usage(input_tokens, output_tokens, nano)  # the task's too
            if spent is not None and decision is CONTINUE:
                decision = spent
                if not spent.proceed and self._in_turn:
                    self._blocked = spent
            if alerts:  # empty-responses: reported, unless a bound's decision is the answer
                watched = self._on_alerts(alerts)
                decision = watched if decision is CONTINUE else decision
            if self._context is not None:
                self._context_policy.observe_usage(model, input_tokens)
                return self._context_check(decision)
            return decision

    def on_response(self) -> Decision:
        """One model response, for a host that reports no usage (``on_usage`` already is one:
        call one or the other per response). ``empty-responses`` counts the responses with
        neither a call nor agent words after them."""
        with self._lock:
            alerts = self._response()
            if alerts:
                return self._on_alerts(alerts)
            return self._blocked if self._blocked is not None else CONTINUE

    def on_compaction(self, *, mechanical: bool = False, automatic: bool = True) -> Decision:
        """The harness compacted or condensed the history itself (a recorded ``compaction``
        event; ``compact()`` counts its own). ``compaction-storm`` counts them."""
        with self._lock:
            return self._compacted()

    def _response(self, produced: bool = False) -> tuple[Alert, ...]:
        """A model response for the watchdog: observed unless the turn is cut or the session
        halted (as a call is), counted either way."""
        watchdog = self._watchdog
        if watchdog is None:
            return ()
        if self._blocked is not None:
            watchdog.count_event()
            return ()
        alerts: tuple[Alert, ...] = watchdog.observe_response(produced)
        return alerts

    def _compacted(self) -> Decision:
        """One compaction, whoever made it (a storm is the context failing to shrink enough,
        blocked or not)."""
        alerts = self._watchdog.observe_compaction() if self._watchdog is not None else ()
        if alerts:
            return self._on_alerts(alerts)
        return self._blocked if self._blocked is not None else CONTINUE

    # -- policy hand-offs (the engines' cores, the budget policy and batch ingest call back) ---

    def _block(self, decision: Decision) -> Decision:
        """A cut or halt: every later event of the turn gets it; the task's report records it."""
        self._blocked = decision
        self._budget.record(decision)
        return decision

    def _on_alerts(self, alerts: tuple[Alert, ...]) -> Decision:
        decision = self._policy.on_alerts(alerts)
        return decision if decision.proceed else self._block(decision)

    def _withdraw_answered(self) -> None:
        """The agent spoke: its queued notes that words answer are withdrawn (the cores'
        hand-off, both engines)."""
        self._policy.withdraw_answered()

    def _cut_at_call(self, cut: Decision, name: str, args: Any, id: str | None) -> Decision:
        """A call the task's budget cut (the cores' hand-off, both engines): the watchdog
        still sees it, so an alert it raises at this same event is reported, never lost, and
        acted on (a halt is recorded); the stronger decision stands (a halt over the cut,
        ``decision.stronger``), carrying every alert."""
        watchdog = self._watchdog
        alerts: tuple[Alert, ...] = ()
        if watchdog is not None:
            if id is not None:
                if self._ids is None:
                    self._ids = {}
                remember_call_id(self._ids, id, name)
            alerts = watchdog.observe_call(name, args)
        if not alerts:
            self._blocked = cut
            return cut
        verdict = self._policy.on_alerts(alerts)
        final = stronger(cut, verdict)
        if final.action == verdict.action and final.guardrail == verdict.guardrail:
            return self._block(final)  # the watchdog's halt: recorded as every halt is
        self._blocked = final
        return final

    def timed_out(self, name: str) -> Decision:
        """A call cancelled for its timeout counts as a failed result for the watchdog."""
        watchdog = self._watchdog
        if watchdog is None:
            return CONTINUE
        alerts = watchdog.observe_result(name, error=TIMEOUT_ERROR)
        return self._on_alerts(alerts) if alerts else CONTINUE

    # -- the fleet's ----------------------------------------------------------------------------

    def touch(self, now: float) -> None:
        """Note when the session was last fetched (Fleet's idle eviction): ``last_used``, in
        the object the next call reads anyway (a float elsewhere would be one more cold
        access)."""
        self.last_used = now

    @property
    def lock(self) -> SessionLock:
        """The session's lock (a batch holds every session's lock while it runs)."""
        return self._lock

    def batch_view(self) -> SessionBatch:
        """This session as batch ingest drives it (``Fleet.observe_many``, holding the lock)."""
        return SessionBatch(self)

    def on_batch_stop(self, kind: str, alerts: tuple[Alert, ...]) -> Decision:
        """The policy for a row the batch core observed and stopped at (``StopReason.POLICY``):
        its alerts, agent words that answer queued notes, a context limit a result crossed."""
        decision = self._on_alerts(alerts) if alerts else CONTINUE
        if kind == "text":
            self._policy.withdraw_answered()
        elif self._context is not None and kind == "result":
            decision = self._context_check(decision)
        return decision

    # -- cost and context (policies.py decides) ------------------------------------------

    def _settle_cost(self) -> Decision:
        """Outside a turn: a bound the spend recorded since the last check crossed."""
        trip = self._cost.check()
        return CONTINUE if trip is None else self._cost_decision(trip, in_turn=False)

    def _cost_decision(self, trip: CostTrip, *, in_turn: bool) -> Decision:
        decision = self._cost_policy.decide(trip, in_turn=in_turn)
        return self._block(decision) if in_turn or trip.halts else decision

    def _context_check(self, decision: Decision) -> Decision:
        """After an observation that moved the estimate: pending compaction, or the 95% cut."""
        checked = self._context_policy.check(decision)  # called only with a context guard
        return checked if checked is decision else self._block(checked)

    @property
    def counters(self) -> Counters:
        return self._channel.counters

    def _persist_spend(self) -> None:
        """Write the spend if the store does not have it yet."""
        self._durable.persist_spend()

    @property
    def watchdog(self) -> Watchdog | None:
        """The session's watchdog (None in ``off`` mode)."""
        return self._watchdog


class PythonGuardrails(_reference_guardrails.GuardrailsCore, Guardrails):
    """A ``Guardrails`` on the pure-Python reference engine: ``on_call``, ``on_result`` and
    ``on_text`` are its core's (``_reference_guardrails``), the rest is ``Guardrails``'."""

    __slots__ = _SLOTS


try:
    from .._native import GuardrailsCore, register_guardrails
except ImportError:  # not built: guardrails_class("native") raises the clear error when asked
    GuardrailsCore = None  # type: ignore[assignment,misc]

if GuardrailsCore is not None:

    class NativeGuardrails(GuardrailsCore, Guardrails):
        """A ``Guardrails`` on the C++ core: ``on_call``, ``on_result`` and ``on_text`` are
        its core's (Cython, ``_guardrails.pxi``), the rest is ``Guardrails``'."""

        __slots__ = _SLOTS

    register_guardrails(NativeGuardrails)


def guardrails_class(implementation: str | None = None) -> type[Guardrails]:
    """The concrete ``Guardrails`` class of an implementation ("native" or "python")."""
    return _engine.concrete(implementation, lambda: PythonGuardrails, lambda: NativeGuardrails)


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
        in Python). A task bounding steps, tokens or dollars hands the core its room below
        the next mark (``task``). An exhausted task, or a bounded tree other sessions charge
        too (the core cannot count it), has its usage rows (no cost) and calls handed to
        Python, as the call counter's mark 0 sends each call down the locked path."""
        g = self._g
        guard, budget = g._context, g._budget
        engine = None if (guard is not None and guard.streamed) or g.settings.custom_signals \
            or budget.calls_armed else g._watchdog
        cost: CostState | None = g._cost_policy.batch_state()
        task = None
        python = budget.task.exhausted_by() is not None
        if not python and budget.usage_armed:
            room = budget.batch_room()
            if room is None:
                python = True
            else:
                task = TaskState(*room)
        return BatchState(engine, g._blocked is not None,
                          None if guard is None else g._context_policy.batch_state(),
                          g._ids if g._ids is not None else {},
                          g._policy.words_matter(), None if python else cost, task, python)

    def take_change(self, change: BatchChange) -> None:
        """What the batch core changed in this session, before policy looks at it: spend it
        charged (it checked that no bound trips), a context a usage measured, estimate bytes.
        (Its task's dollars come with its steps: ``Batch.task_charges``.)"""
        g = self._g
        if change.spent is not None:
            g._cost_policy.take_spent(change.spent)
        if g._context is not None:
            g._context_policy.take_change(change.measured, change.added)

    @property
    def blocked(self) -> Decision | None:
        """The halt, or this turn's cut, that every later event of the turn gets."""
        return self._g._blocked

    @property
    def call_ids(self) -> dict[Any, str]:
        """Call id -> tool name, for results named by id (the batch replaces the map whole,
        or an interrupted one replays its rows into it)."""
        g = self._g
        if g._ids is None:
            g._ids = {}
        return g._ids

    @call_ids.setter
    def call_ids(self, ids: dict[Any, str]) -> None:
        self._g._ids = ids

    def persist_spend(self) -> None:
        """Write the spend if the store does not have it yet (the batch charged usage rows)."""
        self._g._persist_spend()
