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
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from typing import Any

from . import _engine
from ._common import MAX_CALL_IDS, payload_bytes, text_has_words
from .config import read_config_file
from .context import Compaction, ContextConfig, ContextGuard, SummaryResult, Utilization
from .cost import NANO, CostCeiling, CostTrip, usage_cost_nano, usd
from .decision import CONTINUE, CUT_TURN, HALT_SESSION, PROCEED, REFUSE_TURN, Decision, Turn
from .errors import ConfigError, GuardrailHalted, InvalidReset, ResetRefused
from .feedback import SILENCE_SIGNAL, FeedbackQueue
from .modes import Mode, detect_unattended, parse_mode, resolve_mode
from .money import parse_dollars
from .persistence import DECISION_WAIT, RETRIER, Outbox
from .reporting import LOGGER, Counters, OperatorChannel, OperatorEvent
from .restore import RESTORED_SIGNAL, Folded, fold_history
from .signals import CRITICAL, SESSION, Alert, WatchdogConfig
from .validate import check_hook, check_id, check_no_op, check_text
from .watchdog import Watchdog

__all__ = ["Guardrails", "GuardrailsConfig", "ResolvedConfig", "Status", "ResetOutcome"]

#: SPEC §4: an unattended run has nobody watching the spend.
UNATTENDED_SESSION_CEILING_USD = 10.0
#: SPEC §3/§4: this many turns in a row cut by the same thing halt the session.
ESCALATE_AFTER = 3
#: SPEC §3: the feedback queue's bound.
FEEDBACK_QUEUE = 4

GUARDRAILS = ("watchdog", "cost_ceiling", "all")

_WATCHDOG_FILE_KEYS = {"mode", "escalate_after", "feedback_queue"}
_COST_FILE_KEYS = {"max_turn_usd", "max_session_usd", "escalate_after"}
_SESSION_FILE_KEYS = {"unattended"}

_ONE_SHOT = (
    "Nothing starts that turn on its own, though: under a driver the run goes on, and a "
    "one-shot run ends here."
)


# --------------------------------------------------------------------------------------------
# Configuration


@dataclass(frozen=True)
class ResolvedConfig:
    """Every setting with its final value, and where the mode and session ceiling came from."""

    mode: Mode
    mode_source: str
    unattended: bool
    watchdog: WatchdogConfig
    max_turn_cost_usd: float
    max_session_cost_usd: float
    session_ceiling_source: str
    watchdog_escalate_after: int
    cost_escalate_after: int
    feedback_queue: int
    context: ContextConfig

    def describe(self) -> str:
        """The startup line: the mode, its source and what it does."""
        effect = {
            Mode.OFF: "observes nothing",
            Mode.WARN: "reports alerts to the operator only",
            Mode.FEEDBACK: "reports alerts and tells the model on its next turn",
            Mode.ENFORCE: "reports, tells the model, cuts a turn on a critical alert and halts "
                          "the session on a session-scoped one",
        }[self.mode]
        turn = f"${self.max_turn_cost_usd:.4f}" if self.max_turn_cost_usd else "off"
        session = f"${self.max_session_cost_usd:.4f}" if self.max_session_cost_usd else "off"
        return (f"watchdog: {self.mode} mode [{self.mode_source}] ({effect}); cost ceiling: "
                f"per turn {turn}, per session {session} [{self.session_ceiling_source}]")


@dataclass(frozen=True)
class GuardrailsConfig:
    """Explicit settings; ``None`` means "not set here". Precedence (SPEC §3, §4): a field set
    here > the config ``file`` (a parsed config file's sections) > the default for an
    unattended or interactive run. An explicit 0 disables a cost bound even when unattended."""

    watchdog: WatchdogConfig | None = None
    mode: str | Mode | None = None
    unattended: bool | None = None
    max_turn_cost_usd: float | None = None
    max_session_cost_usd: float | None = None
    watchdog_escalate_after: int | None = None
    cost_escalate_after: int | None = None
    feedback_queue: int | None = None
    context: ContextConfig | None = None
    file: Mapping[str, Any] = field(default_factory=dict)

    @classmethod
    def from_file(cls, path: str, **explicit: Any) -> GuardrailsConfig:
        """Read a TOML/JSON config file; keyword arguments override it."""
        return cls(file=read_config_file(path), **explicit)

    def resolve(self) -> ResolvedConfig:
        f = self.file
        wd_file = _section(f, "watchdog", _WATCHDOG_FILE_KEYS)
        cost_file = _section(f, "cost", _COST_FILE_KEYS)
        session_file = _section(f, "session", _SESSION_FILE_KEYS)
        unattended = _first(self.unattended, session_file.get("unattended"))
        if unattended is None:
            unattended = detect_unattended()
        elif not isinstance(unattended, bool):
            raise ConfigError(f"unattended must be true or false, not {unattended!r}")
        if self.mode is not None and not isinstance(self.mode, (str, Mode)):
            raise ConfigError(f"mode must be a string, not {self.mode!r}")
        mode, mode_source = resolve_mode(self.mode, wd_file.get("mode"), unattended)
        watchdog = self.watchdog
        if watchdog is None:
            watchdog = WatchdogConfig.from_mapping({"signals": f.get("signals", {})})
        elif not isinstance(watchdog, WatchdogConfig):
            raise ConfigError("GuardrailsConfig(watchdog=...) must be a WatchdogConfig, e.g. "
                              "WatchdogConfig(signals={'repeated-tool-call': {'threshold': 3}}), "
                              f"not {type(watchdog).__name__}")
        if self.context is not None and not isinstance(self.context, ContextConfig):
            raise ConfigError("GuardrailsConfig(context=...) must be a ContextConfig, "
                              f"not {type(self.context).__name__}")
        session, session_source = self.max_session_cost_usd, "explicit"
        if session is None and "max_session_usd" in cost_file:
            session, session_source = cost_file["max_session_usd"], "config file"
        if session is None:
            if unattended:
                session, session_source = UNATTENDED_SESSION_CEILING_USD, "unattended default"
            else:
                session, session_source = 0.0, "interactive default"
        turn = _first(self.max_turn_cost_usd, cost_file.get("max_turn_usd"), 0.0)
        return ResolvedConfig(
            mode=mode,
            mode_source=mode_source,
            unattended=unattended,
            watchdog=watchdog,
            max_turn_cost_usd=_dollars(turn, "max_turn_cost_usd" if self.max_turn_cost_usd
                                       is not None else "[cost] max_turn_usd"),
            max_session_cost_usd=_dollars(session, "max_session_cost_usd"
                                          if session_source != "config file"
                                          else "[cost] max_session_usd"),
            session_ceiling_source=session_source,
            watchdog_escalate_after=_count(_first(self.watchdog_escalate_after,
                                                  wd_file.get("escalate_after"), ESCALATE_AFTER),
                                           "watchdog escalate_after"),
            cost_escalate_after=_count(_first(self.cost_escalate_after,
                                              cost_file.get("escalate_after"), ESCALATE_AFTER),
                                       "cost escalate_after"),
            feedback_queue=_count(_first(self.feedback_queue, wd_file.get("feedback_queue"),
                                         FEEDBACK_QUEUE), "feedback_queue"),
            context=self.context if self.context is not None else ContextConfig.from_mapping(f),
        )


def _first(*values: Any) -> Any:
    for v in values:
        if v is not None:
            return v
    return None


def _section(f: Mapping[str, Any], name: str, keys: set[str]) -> Mapping[str, Any]:
    section = f.get(name, {})
    if not isinstance(section, Mapping):
        raise ConfigError(f"config section [{name}] must be a table")
    unknown = sorted(set(section) - keys)
    if unknown:
        raise ConfigError(f"unknown setting(s) in [{name}]: {', '.join(unknown)} "
                          f"(known: {', '.join(sorted(keys))})")
    return section


def _dollars(value: Any, name: str) -> float:
    return parse_dollars(value, name)  # 0 disables the bound; negative is an error


def _count(value: Any, name: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ConfigError(f"{name} must be a positive integer, not {value!r}")
    return value


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


class Guardrails:
    # The slots every observation reads come first: they share the object's first cache lines
    # (a fleet's sessions are cold in cache, and each line a call touches costs a memory access)
    __slots__ = (  # noqa: RUF023 - ordered for the cache, not the alphabet
        "_lock",
        "_blocked",
        "_watchdog",
        "_context",
        "_ids",
        "mode",
        "_used_at",
        "__weakref__",
        "_channel",
        "_cost",
        "_cut_in_a_row",
        "_cut_signal",
        "_cost_estimated",
        "_feedback",
        "_halt_alert",
        "_in_turn",
        "_outbox",
        "_pending",
        "_store",
        "_summarize",
        "_turn_cut_signal",
        "_unpriced",
        "_unpriced_changed",
        "_watchdog_halt",
        "session_id",
        "settings",
    )

    def __init__(self, config: GuardrailsConfig | None = None, *, session_id: str = "default",
                 on_event: Callable[[OperatorEvent], object] | None = None,
                 counters: Counters | None = None, implementation: str | None = None,
                 summarize: Callable[[Any, str | None], SummaryResult] | None = None,
                 store: Any = None, history: Any = None):
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
        self._watchdog = (Watchdog(resolved.watchdog, implementation=implementation)
                          if resolved.mode > Mode.OFF else None)
        self._cost = CostCeiling(resolved.max_turn_cost_usd, resolved.max_session_cost_usd,
                                 resolved.cost_escalate_after)
        self._feedback = FeedbackQueue(resolved.feedback_queue)
        self._channel = OperatorChannel(session_id, on_event, counters)
        self._lock = threading.RLock()
        self._blocked: Decision | None = None   # the halt, or this turn's cut: later events get it
        self._watchdog_halt: str | None = None  # the watchdog's halt reason
        self._halt_alert: Alert | None = None
        self._cut_signal: str | None = None     # the signal that cut the last turns...
        self._cut_in_a_row = 0                  # ...and how many turns in a row
        self._turn_cut_signal: str | None = None
        self._in_turn = False
        self._pending: list[tuple[Alert, bool]] = []  # warn/feedback: (alert, still for the model)
        self._ids: dict[str, str] = {}          # call id -> tool name, for results by id
        self._used_at = 0.0                     # Fleet: last fetched, when there is no watchdog
        engine = _engine.load(_engine.resolve(implementation))
        self._context = (ContextGuard(resolved.context, engine.TokenEstimator, engine.utf8_length)
                         if resolved.context.enabled else None)
        self._summarize = summarize
        self._store = store
        self._outbox = Outbox() if store is not None else None  # rows on their way to the store
        self._cost_estimated = False  # some spend was estimated from token prices (SPEC §11.3)
        self._unpriced: set[str] = set()  # models whose usage had no price, so no cost
        self._unpriced_changed = False
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
            if self._outbox is not None and len(self._outbox):
                self._drain(DECISION_WAIT)  # a decision point, refused or not: retry the store
            if self._in_turn:
                self._close_turn()  # the last turn never said it ended
            trip = self._cost.check()  # settle: spend recorded since the last check
            if trip is not None:
                self._cost_decision(trip, in_turn=False)
            if self._watchdog is not None:
                self._watchdog.count_event()
            self._ids.clear()  # a new turn (even a refused one): the old call ids are stale
            if self.halted and self._store is not None and not len(self._outbox):
                # an operator may have reset it from another process (only once every row of
                # ours is in the store: a halt the store never saw must not read as reset)
                self._sync_resets()
            if self.halted:
                self._channel.counters.count_refused()
                reason = self._halt_reason()
                self._channel.emit("refused_turn", f"turn refused before any model call: {reason}",
                                   guardrail=self._halted_by()[0])
                raise GuardrailHalted(reason, self._halted_by())
            if self._watchdog is not None:
                self._watchdog.turn_boundary()
            self._cost.start_turn()
            self._in_turn = True
            self._blocked = None
            compact = self._context.start_turn() if self._context is not None else False
            feedback = self._feedback.drain() if len(self._feedback) else ""
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
            if self._store is not None:
                self._persist_turn_end()
            return decision

    def _close_turn(self) -> None:
        for alert, for_model in self._pending:  # warn and feedback report post-turn
            self._channel.alert(alert)
            if for_model and self.mode >= Mode.FEEDBACK:
                self._feedback.push(alert)
        self._pending.clear()
        if self._turn_cut_signal is None:  # a turn that ends without a cut clears the count
            self._cut_signal, self._cut_in_a_row = None, 0
        self._turn_cut_signal = None
        self._cost.end_turn()
        self._in_turn = False
        if self._blocked is not None and not self.halted:
            self._blocked = None

    # -- observations (the hot path) -----------------------------------------------------------

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
            watchdog = self._watchdog
            if watchdog is None:
                return CONTINUE
            if id is not None:
                ids = self._ids
                if len(ids) >= MAX_CALL_IDS:  # remember_call_id(), inlined: the hot path
                    ids.clear()
                ids[id] = name
            alerts = watchdog.observe_call(name, args)
            if alerts:
                return self._on_alerts(alerts)
            return CONTINUE
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
                return self._context_check(decision)
            return decision
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
            watchdog = self._watchdog
            if watchdog is None:
                return CONTINUE
            watchdog.observe_text(text)
            if self.mode >= Mode.FEEDBACK and text_has_words(text):
                self._withdraw_silence_notes()
            return CONTINUE

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
            trip = self._cost.add(nano)  # spend counts even while halted or cut
            decision = CONTINUE
            if trip is not None:
                decision = self._cost_decision(trip, in_turn=self._in_turn)
            elif self._blocked is not None:
                decision = self._blocked
            if self._store is not None and self._cost.spent != self._outbox.queued_spend:
                self._persist_spend()  # a spent budget stays spent, even after a crash mid-turn
            context = self._context
            if context is not None:
                for record in context.observe_usage(model, input_tokens):
                    self._context_record(record)
                return self._context_check(decision)
            return decision

    # -- watchdog policy (SPEC §3) -------------------------------------------------------------

    def _on_alerts(self, alerts: tuple[Alert, ...]) -> Decision:
        if self.mode < Mode.ENFORCE:
            self._pending.extend((a, True) for a in alerts)  # reported after the turn
            return Decision(PROCEED, alerts=alerts)
        for alert in alerts:  # enforce: in-turn
            self._channel.alert(alert)
            self._feedback.push(alert)
        critical = [a for a in alerts if a.critical]
        if not critical:
            return Decision(PROCEED, alerts=alerts)
        for alert in critical:
            if alert.scope != "turn":
                return self._halt_watchdog(alert, alerts, alert.reason)
        return self._cut_watchdog(critical[0], alerts)

    def _cut_watchdog(self, alert: Alert, alerts: tuple[Alert, ...]) -> Decision:
        n = self._cut_in_a_row + 1 if self._cut_signal == alert.signal else 1
        self._cut_signal, self._cut_in_a_row, self._turn_cut_signal = alert.signal, n, alert.signal
        limit = self.settings.watchdog_escalate_after
        if n >= limit:
            return self._halt_watchdog(alert, alerts, (
                f"{alert.signal} cut {n} turns in a row (latest: {alert.reason}); a model that "
                "restarts the loop on every fresh turn is not stopped by cutting turns"))
        reason = f"watchdog cut the turn ({alert.signal}): {alert.reason}"
        decision = Decision(CUT_TURN, "watchdog", reason, alerts)
        self._blocked = decision
        self._channel.counters.count_trip("watchdog")
        self._persist("trip", {"guardrail": "watchdog", "kind": "turn", "halts": False,
                               "signal": alert.signal, "reason": reason, "in_a_row": n,
                               "mode": str(self.mode), **self._spend_fields()})
        self._channel.emit(
            "cut",
            f"watchdog guardrail cut the turn in flight \u2014 the cancellation that follows is "
            f"this cut, not a provider failure: {reason} The turn was stopped with its work "
            f"unfinished; the session is NOT halted, and a further turn would start fresh. "
            f"{_ONE_SHOT} {n} in a row now \u2014 at {limit} the session halts and needs an "
            "operator reset.",
            level=logging.WARNING, guardrail="watchdog", alert=alert, decision=decision,
            event=alert.event)
        return decision

    def _halt_watchdog(self, alert: Alert, alerts: tuple[Alert, ...], why: str) -> Decision:
        reason = (f"watchdog halted the session ({alert.signal}): {why} The session refuses new "
                  "turns until an operator resets it (Guardrails.reset, or `tripwire reset`).")
        self._watchdog_halt = reason
        self._halt_alert = alert
        decision = Decision(HALT_SESSION, "watchdog", reason, alerts)
        self._blocked = decision
        self._turn_cut_signal = alert.signal
        self._channel.counters.count_trip("watchdog")
        self._persist("trip", {
            "guardrail": "watchdog", "kind": "session" if alert.scope != "turn" else "escalation",
            "halts": True, "signal": alert.signal, "reason": reason,
            "guidance": alert.model_text, "in_a_row": self._cut_in_a_row, "mode": str(self.mode),
            **self._spend_fields()})
        self._channel.emit(
            "halt",
            "watchdog guardrail cut the turn in flight \u2014 the cancellation that follows is "
            f"this cut, not a provider failure: {reason}",
            level=logging.WARNING, guardrail="watchdog", alert=alert, decision=decision,
            event=alert.event)
        return decision

    def _batch_state(self) -> tuple:
        """What batch ingest needs of this session (its lock held): ``(engine, blocked,
        context, ids, words_matter, cost)``. The engine is None when the batch must hand every
        row to this object: off mode, or a result streaming in chunk by chunk (its final
        result skips the bytes already counted, which only on_result knows)."""
        c, cost = self._context, self._cost
        context = None if c is None else (
            c.measured, c.estimator.bytes, c.compact_at, c.cut_tokens, c.pending,
            c.cut_this_turn, c.model)
        engine = None if c is not None and c.streamed else self._watchdog
        return (engine, self._blocked is not None, context, self._ids, self._words_matter(),
                (cost.spent, cost.baseline, cost.max_turn, cost.ceiling,
                 cost.halted or cost.turn_tripped))

    def _words_matter(self) -> bool:
        """Whether agent words now would withdraw queued notes (batch ingest asks)."""
        return self.mode >= Mode.FEEDBACK and bool(len(self._feedback) or self._pending)

    def _withdraw_silence_notes(self) -> None:
        """The agent spoke: queued tools-without-text notes describe a silence that ended."""
        withdrawn = self._feedback.withdraw_silence()
        for i, (alert, for_model) in enumerate(self._pending):
            if for_model and alert.signal == SILENCE_SIGNAL:
                self._pending[i] = (alert, False)
                withdrawn.append(alert)
        for alert in withdrawn:
            self._channel.emit("feedback_withdrawn",
                               f"watchdog note withdrawn: {alert.signal} at event {alert.event} "
                               "(the model has spoken since)",
                               guardrail="watchdog", alert=alert, event=alert.event)

    # -- cost ceiling (SPEC §4) ----------------------------------------------------------------

    def _cost_decision(self, trip: CostTrip, *, in_turn: bool) -> Decision:
        action = HALT_SESSION if trip.halts else CUT_TURN
        if self._cost_estimated:
            trip = replace(trip, reason=trip.reason + " (estimated: the spend includes costs "
                           "computed from token prices)")
        decision = Decision(action, "cost_ceiling", trip.reason)
        if in_turn or trip.halts:
            self._blocked = decision
        self._channel.counters.count_trip("cost_ceiling")
        self._persist("trip", {"guardrail": "cost_ceiling", "kind": trip.kind,
                               "halts": trip.halts, "reason": trip.reason,
                               "in_a_row": trip.in_a_row, **self._spend_fields()})
        head = ("cost_ceiling guardrail cut the turn in flight \u2014 the cancellation that "
                "follows is this cut, not a provider failure: " if in_turn
                else "cost_ceiling guardrail tripped: ")
        if trip.halts:
            tail = "The session is halted: every later turn is refused until an operator reset."
        else:
            limit = self._cost.escalate_after
            tail = ("The turn was stopped with its work unfinished; the session is NOT halted, "
                    f"and a further turn would start from a fresh per-turn budget. {_ONE_SHOT} "
                    f"{trip.in_a_row} in a row now \u2014 at {limit} the session halts and needs "
                    "an operator reset.")
        self._channel.emit("halt" if trip.halts else "cut", f"{head}{trip.reason}. {tail}",
                           level=logging.WARNING, guardrail="cost_ceiling", decision=decision)
        return decision

    # -- context window (SPEC §6) -------------------------------------------------------------

    def _context_check(self, decision: Decision) -> Decision:
        """After an observation that moved the estimate: pending compaction, or the 95% cut."""
        context = self._context
        verdict = context.check()
        if verdict is None:
            return decision
        u = context.utilization()
        if verdict == "compact":
            self._context_record({
                "event": "compaction-pending", "utilization": round(u.fraction, 6),
                "estimated": u.estimated, "tokens": u.tokens, "window": u.window,
                "threshold": u.threshold, "model": u.model,
                "message": f"compaction pending: the context is {u.fraction:.1%} full "
                           f"({u.tokens:,} of {u.window:,} tokens"
                           f"{', partly estimated' if u.estimated else ''}), past the "
                           f"{u.threshold:.0%} threshold for {u.tier or 'an unknown'} tier",
            })
            return decision
        record = context.turn_cut_record()
        reason = (f"the context window is {u.fraction:.1%} full ({u.tokens:,} of {u.window:,} "
                  f"tokens, {u.unmeasured_bytes:,} bytes of it estimated), past the "
                  f"{self.settings.context.cut_at:.0%} hard ceiling; compaction is pending, so a "
                  "next turn would start by reducing context")
        if not decision.proceed or not self.settings.context.cut_turns:
            # already cut or halted by another guardrail, or report-only (replay's analysis)
            self._context_record({**record, "enforced": False, "message": reason})
            return decision
        cut = Decision(CUT_TURN, "context", reason, decision.alerts)
        self._blocked = cut
        self._channel.counters.count_trip("context")
        self._channel.emit(
            "cut", "context guard cut the turn in flight \u2014 the cancellation that follows is "
            f"this cut, not a provider failure: {reason}.", level=logging.WARNING,
            guardrail="context", decision=cut, record=record)
        return cut

    def _context_record(self, record: dict[str, Any]) -> None:
        message = record.pop("message", None) or record["event"]
        level = logging.WARNING if record["event"].startswith("context-reduction") else logging.INFO
        if record["event"] != "compaction-pending":  # pending is a state, not an event to keep
            self._persist("context", record)
        self._channel.emit("context", message, level=level, guardrail="context", record=record)

    def compact(self, messages: Any, focus: str | None = None) -> Compaction:
        """Reduce the context now: the host's ``summarize`` (with tripwire's retry, backoff and
        fallback rules), or mechanical truncation. Call it when ``start_turn().compact`` is true
        (or whenever the operator asks). ``Compaction.apply(messages)`` is the new history."""
        with self._lock:
            if self._context is None:
                return Compaction("skipped", reason="the context guard is disabled")
            result = self._context.compact(messages, focus, self._summarize)
            for record in result.records:
                self._context_record({**record, "message": _describe(record)})
            return result

    def utilization(self) -> Utilization | None:
        """How full the context is (None when the context guard is disabled)."""
        with self._lock:
            return self._context.utilization() if self._context is not None else None

    # -- halts, resets and status --------------------------------------------------------------

    @property
    def halted(self) -> bool:
        return self._watchdog_halt is not None or self._cost.halted

    def _halted_by(self) -> tuple[str, ...]:
        by = []
        if self._watchdog_halt is not None:
            by.append("watchdog")
        if self._cost.halted:
            by.append("cost_ceiling")
        return tuple(by)

    def _halt_reason(self) -> str:
        return " ".join(r for r in (self._watchdog_halt, self._cost.reason) if r)

    def refusal(self) -> Decision:
        """The decision for a turn refused at its start (``refuse_turn``), while halted."""
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
            scope = guardrail.strip().lower() if isinstance(guardrail, str) else guardrail
            if scope not in GUARDRAILS:
                raise InvalidReset(f"guardrail must be one of {', '.join(GUARDRAILS)}, "
                                   f"not {guardrail!r}")
            if additional_budget_usd and scope == "watchdog":
                raise InvalidReset(
                    "additional budget applies to the cost ceiling, not the watchdog"
                )
            budget = 0
            if scope in ("cost_ceiling", "all"):
                try:
                    budget = self._cost.check_reset(additional_budget_usd)
                except ResetRefused as refused:
                    self._channel.emit("reset_refused", refused.reason, level=logging.WARNING,
                                       guardrail="cost_ceiling")
                    raise
            cleared: list[str] = []
            if scope in ("watchdog", "all"):
                if self._watchdog_halt is not None:
                    cleared.append("watchdog")
                self._watchdog_halt = None
                self._halt_alert = None
                self._cut_signal, self._cut_in_a_row = None, 0
                if self._watchdog is not None:
                    self._watchdog.reset()  # a resumed run must build back up to a threshold
            if scope in ("cost_ceiling", "all"):
                cleared += self._cost.reset(budget)
            if not self.halted:
                self._blocked = None
            still = self._halted_by()
            parts = []
            if cleared:
                parts.append("cleared " + ", ".join(cleared))
            if budget:
                parts.append(
                    f"session ceiling raised by {usd(budget)} to {usd(self._cost.ceiling)}"
                )
            if not parts:
                parts.append("nothing in scope to reset" + (
                    f"; the session is still halted by {', '.join(still)}" if still
                    else "; no guardrail was tripped"))
            elif still:
                parts.append(f"still halted by {', '.join(still)}")
            message = "reset: " + "; ".join(parts)
            self._persist("reset", {"guardrail": scope, "budget_usd": budget / NANO,
                                    "cleared": cleared, **self._spend_fields()})
            self._channel.emit("reset", message, guardrail=None if scope == "all" else scope)
            return ResetOutcome(tuple(cleared), still, self._cost.ceiling / NANO, message)

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
                watchdog_reason=self._watchdog_halt,
                cost_reason=cost.reason,
                spent_usd=cost.spent / NANO,
                turn_spent_usd=cost.turn_spent() / NANO,
                max_turn_cost_usd=cost.max_turn / NANO,
                max_session_cost_usd=cost.ceiling / NANO,
                granted_budget_usd=cost.granted / NANO,
                would_retrip=cost.would_retrip,
                budget_needed_usd=needed,
                queued_feedback=len(self._feedback),
                counters=self._channel.counters.snapshot(),
                context=self._context.utilization() if self._context is not None else None,
                compaction_pending=self._context.pending if self._context is not None else False,
            )

    # -- durability (SPEC §5) ------------------------------------------------------------------

    def _spend_fields(self) -> dict[str, Any]:
        cost = self._cost
        fields = {"spent_usd": cost.spent / NANO, "max_session_usd": cost.max_session / NANO,
                  "max_turn_usd": cost.max_turn / NANO, "granted_usd": cost.granted / NANO}
        if self._cost_estimated:
            fields["estimated"] = True
        if self._unpriced:
            fields["unpriced_models"] = sorted(self._unpriced)
        return fields

    def _persist(self, kind: str, data: dict[str, Any]) -> None:
        """Append one row before the decision is returned (the store fsyncs), waiting for the
        store at most DECISION_WAIT: a row the store does not take by then stays in the outbox,
        in order, and is written in the background (persistence.py) — a held lock must neither
        lose a halt nor hold the harness's decision."""
        if self._store is None:
            return
        outbox = self._outbox
        outbox.put(kind, data)
        if kind != "context":  # trips, resets and spend rows all carry the spend and counts
            outbox.queued_spend = self._cost.spent
            outbox.queued_counts = self._counts()
        self._drain(DECISION_WAIT)

    def _drain(self, wait: float | None) -> bool:
        """Write the outbox, waiting at most ``wait`` (None: the store's timeout) for the store
        and as long for a write the background retrier has under way."""
        take_over = getattr(self._store, "timeout", 5.0) if wait is None else wait
        if self._outbox.drain(self._store, self.session_id, wait, self._store_failed,
                              take_over=take_over):
            return True
        RETRIER.schedule(self._outbox, self._store, self.session_id)
        return False

    def _store_failed(self, kind: str, exc: Exception) -> None:
        LOGGER.error(self._channel.line(
            f"could not persist a {kind} row ({exc}); kept in memory and retried in the "
            "background and at the next guardrail decision"))

    def flush(self) -> bool:
        """Write rows the store did not take yet (waiting the store's full timeout, and for a
        write the background retrier has under way); True when none is left."""
        if self._store is None:
            return True
        return self._drain(None)

    @property
    def unpersisted_rows(self) -> int:
        """Rows decided but not yet in the store (0 without a store)."""
        return len(self._outbox) if self._outbox is not None else 0

    def _counts(self) -> tuple[str | None, int, int]:
        return self._cut_signal, self._cut_in_a_row, self._cost.in_a_row

    def _persist_spend(self) -> None:
        self._persist("spend", {**self._spend_fields(),
                                "watchdog_cut_signal": self._cut_signal,
                                "watchdog_in_a_row": self._cut_in_a_row,
                                "cost_in_a_row": self._cost.in_a_row})

    def _persist_turn_end(self) -> None:
        """At a turn boundary, what a restart needs and no other row wrote: the escalation
        counts (a clean turn clears them), any spend not written yet, and newly unpriced
        models."""
        outbox = self._outbox
        if (self._cost.spent != outbox.queued_spend or self._counts() != outbox.queued_counts
                or self._unpriced_changed):
            self._unpriced_changed = False
            self._persist_spend()
        elif len(outbox):
            self._drain(DECISION_WAIT)

    def restore(self, store: Any) -> None:
        """Fold a store's history of this session forward (done at construction when a store
        is given). Fails open: an unreadable store means the session runs unrestored, with a
        logged warning naming it."""
        with self._lock:
            self._store = store
            if self._outbox is None:
                self._outbox = Outbox()
            self._restore()

    def _read_history(self, history: Any = None) -> Folded | None:
        from .store import StoreError

        try:
            if history is None:
                history = self._store.history(self.session_id)
        except StoreError as exc:
            LOGGER.warning(self._channel.line(
                f"guardrail history unreadable ({exc}); the session runs without it"))
            return None
        folded = fold_history(history)
        for warning in folded.warnings:
            LOGGER.warning(self._channel.line(warning))
        return folded

    def _restore(self, history: Any = None) -> None:
        folded = self._read_history(history)
        if folded is None or (not folded.rows and folded.tampered is None):
            return
        cost = self._cost
        cost.spent = max(cost.spent, round(folded.spent_usd * NANO))
        if cost.max_session:  # budget only for a per-session bound still configured
            cost.granted = round(folded.granted_usd * NANO)
        if folded.cost_session_halt is not None and cost.max_session:
            cost.session_reason = folded.cost_session_halt["reason"]
        if folded.cost_escalation_halt is not None and cost.max_turn:
            cost.escalation_reason = folded.cost_escalation_halt["reason"]
        if cost.max_turn:
            cost.in_a_row = folded.cost_in_a_row
        if self._watchdog is not None:
            self._cut_signal = folded.watchdog_cut_signal
            self._cut_in_a_row = folded.watchdog_in_a_row
            halt = folded.watchdog_halt
            if halt is not None and self.mode >= Mode.FEEDBACK:
                # the resumed model must learn why it was stopped, even after a restart
                self._feedback.push(Alert(
                    RESTORED_SIGNAL, CRITICAL, SESSION, halt["reason"],
                    "Before a restart this session was halted for a runaway pattern "
                    f"({halt.get('signal')}): {halt.get('guidance') or halt['reason']} "
                    "Do not resume that pattern.", -1, None, 0))
            if halt is not None and self.mode == Mode.ENFORCE:
                self._watchdog_halt = halt["reason"]
        if folded.tampered is not None and (self.mode == Mode.ENFORCE or cost.active):
            self._watchdog_halt = f"watchdog halted the session: {folded.tampered}."
            LOGGER.warning(self._channel.line(self._watchdog_halt))
        if self.halted:
            self._blocked = self.refusal()
        self._outbox.queued_spend = cost.spent  # what the store holds now
        self._outbox.queued_counts = self._counts()

    def _sync_resets(self) -> None:
        """Clear halts that an operator reset in the store (e.g. `tripwire reset` run by
        another process) and take the budget it granted."""
        folded = self._read_history()
        if folded is None:
            return
        if self._watchdog_halt is not None and folded.watchdog_halt is None \
                and folded.tampered is None:
            self._watchdog_halt = None
            self._cut_signal, self._cut_in_a_row = None, 0
            if self._watchdog is not None:
                self._watchdog.reset()
        cost = self._cost
        if cost.max_session:
            cost.granted = max(cost.granted, round(folded.granted_usd * NANO))
        if cost.session_reason is not None and folded.cost_session_halt is None:
            cost.session_reason = None
        if cost.escalation_reason is not None and folded.cost_escalation_halt is None:
            cost.escalation_reason = None
            cost.in_a_row = 0
        if not self.halted:
            self._blocked = None

    @property
    def counters(self) -> Counters:
        return self._channel.counters

    @property
    def watchdog(self) -> Watchdog | None:
        """The session's watchdog (None in ``off`` mode)."""
        return self._watchdog


def _describe(record: dict[str, Any]) -> str:
    """The operator line of a compaction record."""
    event = record["event"]
    if event == "compaction-boundary":
        return f"compaction boundary written ({record['kind']})"
    if event == "context-reduction-failed":
        return f"context reduction failed ({record['operation']}): {record['reason']}"
    if event == "context-reduction-degraded":
        return f"compaction degraded to mechanical truncation: {record.get('reason', '')}"
    return event


def parse_guardrail(value: str) -> str:
    scope = value.strip().lower()
    if scope not in GUARDRAILS:
        raise ConfigError(f"guardrail must be one of {', '.join(GUARDRAILS)}, not {value!r}")
    return scope


__all__ += ["parse_guardrail", "parse_mode"]
