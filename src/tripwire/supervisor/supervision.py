"""The progress supervisor (SPEC §7.4): a host-supplied judge of whether a task is advancing.

A repetition detector asks whether actions look alike; a supervisor asks whether different
actions advance the task. tripwire never calls it on its own clock: ``Supervision`` notes
*triggers* while the run goes on (a critical alert under ``feedback``/``enforce``, a
``repeated-failure`` or ``tool-failure-streak`` alert, an attempted stop, every
``review_every_steps`` model steps), and at the next turn start — never in the middle of a tool
call — builds a ``Review`` and calls the supervisor with it. The supervisor is any callable,
sync or async, returning a ``SupervisorDecision`` (or its JSON):

| decision | what tripwire does |
|---|---|
| ``continue`` | nothing: the run goes on within its remaining allowance |
| ``redirect(guidance, check)`` | the guidance joins this turn's ``[watchdog]`` block; ``check`` is evaluated on the calls that follow and the next review says whether it held |
| ``stop_complete(evidence)`` | the task ends ``answered`` with the evidence (an exhausted task stays exhausted) |
| ``stop_blocked(reason)`` | the task ends ``blocked(reason)`` |

Hard limits stay outside both models: each review is one unit of the task's ``reviews``
counter (charged before the call: a supervisor cannot renew its own allowance) and the usage it
reports is charged to the task's steps, tokens and dollars. After ``max_failed_redirects`` (3)
redirects whose check did not hold, the next trigger ends the task
``blocked(redirects_exhausted)`` without another review. A supervisor that raises, outlives
``review_timeout_s`` or returns a malformed decision has failed: the review is counted, a
``supervisor_failed`` line is logged and the review is tried again at once; two failures in a
row end the task ``blocked(supervisor_unavailable)`` — failure is never permission to go on. A
decision about context revision r is not applied once the run is at a later revision (user
input, a compaction, arriving while the supervisor thought): the review runs again on the new
revision.

"Done" is checked, not trusted (SPEC §13): a host's ``acceptance(task) -> (passed, evidence)``
runs before a ``stop_complete`` is accepted; a failed check is a redirect carrying the check's
evidence instead, and the third failed check in a row ends the task
``blocked(acceptance_failed)``. A review carries the host's ``changes(task)`` (what
the worker changed since the last review); a review the host cannot assemble (``changes`` or
the acceptance check raises) ends the task ``blocked(evidence_unavailable)``, an explicit
outcome.

This module holds ``SupervisorConfig`` and ``Supervision``: the run's state and its boundary.
The parts it is built from are their own modules: the decisions (``decision.py``), what a
review shows and the log of calls it is built from (``review.py``), the triggers
(``triggers.py``), the redirects and their delivery (``guidance.py``), calling the host's
supervisor under its timeout (``calling.py``), and the reference model supervisor
(``model.py``).
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

from ..base.decision import Decision, Turn
from ..base.validate import check_hook
from ..budgets.caps import Exhaustion
from ..budgets.task import Task
from ..context.guard import Compaction
from ..engine import select as _engine
from ..errors import ConfigError, TaskEnded
from ..policy.reporting import OperatorChannel, OperatorEvent
from ..session.guardrails import Guardrails
from .calling import ReviewFailed, Supervisor, ask_supervisor, ask_supervisor_async
from .decision import ReviewUsage, SupervisorDecision
from .guidance import Guidance, with_guidance
from .review import CallLog, Review
from .triggers import ReviewTriggers

__all__ = ["SupervisorConfig", "Supervision", "REDIRECTS_EXHAUSTED", "SUPERVISOR_UNAVAILABLE",
           "ACCEPTANCE_FAILED", "EVIDENCE_UNAVAILABLE"]

# outcomes of the supervisor's failure modes, as the log and OperatorEvent name them
REDIRECTS_EXHAUSTED = "redirects_exhausted"
SUPERVISOR_UNAVAILABLE = "supervisor_unavailable"
ACCEPTANCE_FAILED = "acceptance_failed"
EVIDENCE_UNAVAILABLE = "evidence_unavailable"


# --------------------------------------------------------------------------------------------
# Configuration


@dataclass(frozen=True)
class SupervisorConfig:
    """When to review and how much to show. Every trigger is configurable; the defaults are
    SPEC §7.4's (periodic review off)."""

    review_every_steps: int | None = None
    on_critical: bool = True       # a critical alert under feedback/enforce
    on_failure: bool = True        # a repeated-failure or tool-failure-streak alert
    on_stop_attempt: bool = True   # the agent tried to finish
    review_timeout_s: float = 60.0
    max_failed_redirects: int = 3
    max_failures: int = 2          # supervisor failures in a row before blocked
    max_failed_acceptance: int = 3  # failed acceptance checks in a row before blocked
    recent_calls: int = 20
    payload_limit: int = 2048      # bytes of args and of each result in the review
    record_limit: int = 64         # canonical keys in the review's long-term record
    record_keys: int = 4096        # canonical keys remembered (least recent dropped)

    def __post_init__(self) -> None:
        s = self.review_every_steps
        if s is not None and (isinstance(s, bool) or not isinstance(s, int) or s < 1):
            raise ConfigError(f"review_every_steps must be a positive integer or None, not {s!r}")
        t = self.review_timeout_s
        if isinstance(t, bool) or not isinstance(t, (int, float)) or not 0 < t < float("inf"):
            raise ConfigError(f"review_timeout_s must be a positive number of seconds, not {t!r}")
        for name in ("max_failed_redirects", "max_failures", "max_failed_acceptance",
                     "recent_calls", "payload_limit",
                     "record_limit", "record_keys"):
            v = getattr(self, name)
            if isinstance(v, bool) or not isinstance(v, int) or v < 1:
                raise ConfigError(f"{name} must be a positive integer, not {v!r}")
        for name in ("on_critical", "on_failure", "on_stop_attempt"):
            if not isinstance(getattr(self, name), bool):
                raise ConfigError(f"{name} must be true or false")



class _End:
    """The task ended at this boundary (blocked, answered or exhausted)."""

    __slots__ = ("outcome",)

    def __init__(self, outcome: Any):
        self.outcome = outcome


def _acceptance(value: Any) -> tuple[str, ...]:
    if value is None:
        return ()
    if isinstance(value, str):
        return (value,)
    if isinstance(value, Iterable):
        items = tuple(value)
        if all(isinstance(v, str) for v in items):
            return items
    raise ConfigError("acceptance must be a string or a list of strings")


class Supervision:
    """One run's progress supervision: a session's ``Guardrails`` and the ``Task`` it serves,
    with the host's ``supervisor`` called at turn starts after a trigger.

    Observe through it (it forwards every call to the guardrails and returns their
    ``Decision``), and start turns through it::

        supervision = Supervision(my_supervisor, Guardrails(config, task=task))
        turn = supervision.start_turn()      # TaskEnded if the supervisor ended the task
        prompt = turn.prepend(user_prompt)   # a redirect's guidance is in turn.feedback
        decision = supervision.on_call(name, args, id=call_id)
        ...
        supervision.on_stop_attempt(accepted=False)   # a trigger: reviewed at the next turn
        supervision.new_revision()           # user input, a compaction: pending decisions stale

    ``await supervision.astart_turn()`` is the same for an event loop (an async supervisor is
    awaited there; a sync one runs in a worker thread). ``supervisor(review)`` returns a
    ``SupervisorDecision``, a mapping or JSON text matching ``DECISION_SCHEMA``, or an
    awaitable of one.

    ``acceptance``: the acceptance criteria (a string or strings; default the task's), or the
    host's acceptance check, ``acceptance(task) -> (passed, evidence)``, which a
    ``stop_complete`` must pass. ``changes``: ``changes(task)``, what the worker changed since
    the last review, carried by each review.
    """

    def __init__(self, supervisor: Supervisor, guardrails: Guardrails, *,
                 config: SupervisorConfig | None = None, acceptance: Any = None,
                 changes: Callable[[Task], Any] | None = None,
                 implementation: str | None = None,
                 on_event: Callable[[OperatorEvent], object] | None = None):
        if not callable(supervisor):
            raise ConfigError("supervisor must be a callable taking a Review, not "
                              f"{type(supervisor).__name__}")
        check_hook(on_event, "on_event")
        if not isinstance(guardrails, Guardrails):
            raise ConfigError("Supervision supervises a Guardrails (one session), not "
                              f"{type(guardrails).__name__}")
        task: Task = guardrails.task  # the task the session runs under: the one charged
        if config is not None and not isinstance(config, SupervisorConfig):
            raise ConfigError("config must be a SupervisorConfig")
        self.supervisor = supervisor
        self.guardrails = guardrails
        self.task = task
        self.config = cfg = config or SupervisorConfig()
        self.check_acceptance: Callable[[Task], Any] | None = None
        if callable(acceptance):  # the host's acceptance check; the criteria are the task's
            self.check_acceptance, acceptance = acceptance, None
        if changes is not None and not callable(changes):
            raise ConfigError("changes must be a callable taking the Task")
        self.changes = changes
        self.acceptance = _acceptance(acceptance if acceptance is not None else task.acceptance)
        watchdog = guardrails.watchdog
        if implementation is None and watchdog is not None:
            implementation = watchdog.implementation  # the session's engine's keys
        canonical_key: Callable[[str, Any], int] = _engine.load(
            _engine.resolve(implementation)).canonical_key
        self.session_id: str = guardrails.session_id
        self._channel = OperatorChannel(self.session_id, on_event)
        self._lock = threading.RLock()
        self._reviewing = threading.Lock()
        self._calls = CallLog(canonical_key, recent=cfg.recent_calls,
                              payload_limit=cfg.payload_limit, record_keys=cfg.record_keys)
        self._triggers = ReviewTriggers(every_steps=cfg.review_every_steps,
                                        on_critical=cfg.on_critical, on_failure=cfg.on_failure,
                                        on_stop_attempt=cfg.on_stop_attempt)
        self._guidance = Guidance()
        self._failures = 0           # failed reviews in a row
        self.failed_acceptance = 0   # failed acceptance checks in a row
        self.reviews = 0             # reviews asked for (each charged one `reviews` unit)
        #: (review number, what became of it): continue, redirect, stop_complete,
        #: stop_blocked, failed, stale — what an evaluation counts
        self.decisions: list[tuple[int, str]] = []

    def __repr__(self) -> str:
        return (f"<Supervision session={self.session_id!r} reviews={self.reviews} "
                f"failed_redirects={self.failed_redirects}>")

    # -- observations (forwarded to the guardrails) ----------------------------------------

    def on_call(self, name: str, args: Any = None, id: str | None = None) -> Decision:
        decision: Decision = self.guardrails.on_call(name, args, id=id)
        call = self._calls.new_call(name, args, id)  # keyed outside the lock
        with self._lock:
            self._calls.add(call)
            self._guidance.observe_call(call)
            self._triggers.note(decision, self.guardrails.mode)
        return decision

    def on_result(self, name: str | None = None, *, id: str | None = None, error: Any = None,
                  no_op: bool = False, payload: Any = None) -> Decision:
        decision: Decision = self.guardrails.on_result(name, id=id, error=error, no_op=no_op,
                                                      payload=payload)
        with self._lock:
            paired = self._calls.result(name, id=id, error=error, no_op=no_op, payload=payload)
            if paired is not None:
                call, text = paired
                self._guidance.observe_result(call, text)
            self._triggers.note(decision, self.guardrails.mode)
        return decision

    def on_result_chunk(self, chunk: Any, *, id: str | None = None) -> Decision:
        decision: Decision = self.guardrails.on_result_chunk(chunk, id=id)
        return decision

    def on_text(self, text: str) -> Decision:
        decision: Decision = self.guardrails.on_text(text)
        with self._lock:
            self._calls.count_event()
        return decision

    def on_usage(self, **usage: Any) -> Decision:
        """One model call's usage (the guardrails' ``on_usage`` fields): one step."""
        decision: Decision = self.guardrails.on_usage(**usage)
        with self._lock:
            self._calls.count_event()
            self._triggers.stepped(1)
        return decision

    def step(self, n: int = 1) -> Exhaustion | None:
        """``n`` model steps of a host that reports no usage (charged to the task): the
        exhaustion they caused, if any."""
        result = self.task.step(n)
        with self._lock:
            self._triggers.stepped(n)
        return result

    def on_stop_attempt(self, accepted: bool, answer: Any = None) -> Decision:
        """The agent tried to finish and a stop hook accepted or refused it (the guardrails'
        ``on_stop_attempt``): a trigger (the review runs at the next turn start)."""
        result = self.guardrails.on_stop_attempt(accepted, answer)
        with self._lock:
            self._calls.count_event()
            self._triggers.stop_attempt()
        return result

    def new_revision(self) -> int:
        """The run's context changed (new user input, a compaction): a decision about an
        earlier revision is stale. Returns the new revision."""
        with self._lock:
            revision: int = self.task.new_revision()
            return revision

    def end_turn(self) -> Decision:
        decision: Decision = self.guardrails.end_turn()
        return decision

    def compact(self, messages: Any, focus: str | None = None) -> Compaction:
        """The guardrails' ``compact``; a compaction that reduced the context is a new
        revision (a decision about the old context is stale)."""
        compaction = self.guardrails.compact(messages, focus)
        if compaction.ok:
            self.new_revision()
        return compaction

    # -- state -------------------------------------------------------------------------------

    @property
    def pending_triggers(self) -> tuple[str, ...]:
        """The triggers the next turn start reviews (empty: no review is due)."""
        with self._lock:
            return self._triggers.pending

    @property
    def failed_redirects(self) -> int:
        """Redirects in a row whose check did not hold (judged at each trigger)."""
        return self._guidance.failed_in_a_row

    @property
    def redirects_held(self) -> int:
        """Redirects whose check held (judged or not yet)."""
        with self._lock:
            return self._guidance.held()

    @property
    def revision(self) -> int:
        revision: int = self.task.revision
        return revision

    # -- the boundary ------------------------------------------------------------------------

    def start_turn(self) -> Turn:
        """Review if a trigger is pending, then open the guardrails' turn: the ``Turn`` (a
        redirect's guidance in its ``[watchdog]`` block). ``TaskEnded`` when the task has
        ended (now or before); ``GuardrailHalted`` as the guardrails raise it."""
        self._refuse_ended()
        if not self.guardrails.halted:
            with self._reviewing:
                self._boundary_sync()
        return self._open()

    async def astart_turn(self) -> Turn:
        """``start_turn`` for an event loop: an async supervisor is awaited, a sync one runs
        in a worker thread; the timeout holds either way."""
        self._refuse_ended()
        if not self.guardrails.halted:
            if not self._reviewing.acquire(blocking=False):
                raise ConfigError(f"session {self.session_id}: a review is already running "
                                  "(one turn start at a time)")
            try:
                await self._boundary_async()
            finally:
                self._reviewing.release()
        return self._open()

    def _refuse_ended(self) -> None:
        outcome = self.task.outcome
        if outcome is not None:
            raise TaskEnded(outcome)

    def _open(self) -> Turn:
        turn: Turn = self.guardrails.start_turn()
        with self._lock:
            lines = self._guidance.take_lines()
        return with_guidance(turn, lines) if lines else turn

    def _boundary_sync(self) -> None:
        while True:
            step = self._prepare()
            if step is None:
                return
            if isinstance(step, _End):
                raise TaskEnded(step.outcome)
            try:
                decision = ask_supervisor(self.supervisor, step, self.config.review_timeout_s,
                                          f"tripwire-supervisor-{self.session_id}")
            except ReviewFailed as failure:
                self._failed(step, str(failure))
                continue
            self._settle(step, decision)

    async def _boundary_async(self) -> None:
        while True:
            step = self._prepare()
            if step is None:
                return
            if isinstance(step, _End):
                raise TaskEnded(step.outcome)
            try:
                decision = await ask_supervisor_async(self.supervisor, step,
                                                      self.config.review_timeout_s)
            except ReviewFailed as failure:
                self._failed(step, str(failure))
                continue
            self._settle(step, decision)

    def _prepare(self) -> Review | _End | None:
        """At a boundary: nothing due, the task's end, or the next review (charged)."""
        task = self.task
        with self._lock:
            if task.outcome is not None:
                return _End(task.outcome)
            if not self._triggers.due:
                return None
            failed = self._guidance.judge()  # the last redirect is judged at the trigger after it
            if failed >= self.config.max_failed_redirects:
                self._emit("supervisor_blocked", f"supervisor: {failed} redirects in a row "
                           "without their check holding; the task ends "
                           f"blocked({REDIRECTS_EXHAUSTED})", logging.WARNING)
                return _End(task.block(REDIRECTS_EXHAUSTED))
            self.reviews += 1
            exhausted = task.charge("reviews")
            if exhausted is not None or task.outcome is not None:
                return _End(task.outcome if task.outcome is not None else exhausted)
            try:
                changes = self.changes(task) if self.changes is not None else None
            except Exception as exc:  # the host cannot assemble the review: an explicit end
                return _End(self._unavailable(f"its changes: {type(exc).__name__}: {exc}"))
            review = self._review(self.reviews, changes)
        self._emit("supervisor_review", f"supervisor review {review.number} "
                   f"({', '.join(review.triggers)}) of revision {review.revision}")
        return review

    def _unavailable(self, what: str) -> Any:
        """The host could not give the evidence a review or a check needs (lock held): the
        task ends ``blocked(evidence_unavailable)``."""
        self._emit("supervisor_blocked", f"supervisor: the host could not assemble {what}; "
                   f"the task ends blocked({EVIDENCE_UNAVAILABLE})", logging.WARNING)
        return self.task.block(EVIDENCE_UNAVAILABLE, evidence=what)

    def _review(self, number: int, changes: Any = None) -> Review:
        task = self.task
        used: dict[str, float] = {}
        caps: dict[str, float | None] = {}
        for counter in task.counters():
            used[counter.counter] = counter.used
            caps[counter.counter] = counter.cap
        remaining = {k: v for k, v in task.remaining().items() if v is not None}
        return Review(number, self.session_id, task.task_id, task.revision,
                      self._triggers.pending, task.objective, self.acceptance,
                      self._calls.recent(), self._calls.record(self.config.record_limit),
                      self._guidance.prior(), self.failed_redirects, remaining, used, caps,
                      self._triggers.alerts, self._triggers.stop_attempts, changes)

    def _failed(self, review: Review, what: str) -> None:
        with self._lock:
            self._failures += 1
            n = self._failures
            self.decisions.append((review.number, "failed"))
            unavailable = n >= self.config.max_failures
        self._emit("supervisor_failed", f"supervisor_failed: review {review.number} {what} "
                   f"({n} in a row)", logging.WARNING)
        if unavailable:
            self._emit("supervisor_blocked", f"supervisor: {n} failed reviews in a row; the "
                       f"task ends blocked({SUPERVISOR_UNAVAILABLE})", logging.WARNING)
            self.task.block(SUPERVISOR_UNAVAILABLE)

    def _settle(self, review: Review, decision: SupervisorDecision) -> None:
        task = self.task
        with self._lock:
            self._failures = 0  # it answered
            if decision.usage is not None:
                _charge_usage(task, decision.usage)
            if task.outcome is not None:  # its own usage exhausted the task
                self.decisions.append((review.number, "exhausted"))
                return
            if task.revision != review.revision:
                self.decisions.append((review.number, "stale"))
                stale = True
            else:
                stale = False
                self.decisions.append((review.number, decision.decision))
                self._apply(review, decision)
        if stale:
            self._emit("supervisor_stale", f"supervisor review {review.number} was about "
                       f"revision {review.revision}, the run is at revision {task.revision}: "
                       "not applied, reviewing the new revision")
            return
        self._emit("supervisor_decision", f"supervisor review {review.number}: "
                   f"{_describe(decision)}")

    def _apply(self, review: Review, decision: SupervisorDecision) -> None:
        """A fresh decision (lock held): the triggers are answered."""
        self._triggers.answered()
        kind = decision.decision
        if kind == "redirect":
            assert decision.guidance is not None and decision.check is not None
            self._guidance.give(review.number, decision.guidance, decision.check)
        elif kind == "stop_complete":
            self._complete(review, decision)
        elif kind == "stop_blocked":
            assert decision.reason is not None
            self.task.block(decision.reason)

    def _complete(self, review: Review, decision: SupervisorDecision) -> None:
        """A ``stop_complete`` (lock held): checked by the host's acceptance check first."""
        task = self.task
        check = self.check_acceptance
        if check is None:
            task.finish(task.last_answer, evidence=decision.evidence)
            return
        try:
            passed, evidence = check(task)
        except Exception as exc:
            self.decisions[-1] = (review.number, "evidence_unavailable")
            self._unavailable(f"its acceptance check: {type(exc).__name__}: {exc}")
            return
        if passed is True:
            self.failed_acceptance = 0
            task.finish(task.last_answer, evidence={"supervisor": decision.evidence,
                                                    "acceptance": evidence})
            return
        self.failed_acceptance += 1
        self.decisions[-1] = (review.number, ACCEPTANCE_FAILED)
        if self.failed_acceptance >= self.config.max_failed_acceptance:
            self._emit("supervisor_blocked", f"supervisor: {self.failed_acceptance} failed "
                       f"acceptance checks in a row; the task ends blocked({ACCEPTANCE_FAILED})",
                       logging.WARNING)
            task.block(ACCEPTANCE_FAILED, evidence=evidence)
            return
        self._guidance.tell(f"The task is not complete: its acceptance check failed "
                            f"({evidence}). Make it pass before finishing.")

    def _emit(self, kind: str, text: str, level: int = logging.INFO) -> None:
        self._channel.emit(kind, text, level=level, guardrail="supervisor")


def _charge_usage(task: Any, usage: ReviewUsage) -> None:
    """The supervisor's usage, as one model request of the task: a step, its tokens, its cost,
    charged along the chain at once."""
    task.charge_usage(usage.input_tokens, usage.output_tokens, usage.cost_usd)


def _describe(decision: SupervisorDecision) -> str:
    if decision.decision == "redirect":
        assert decision.check is not None
        return f"redirect: {decision.guidance} (check: {decision.check.describe()})"
    if decision.decision == "stop_complete":
        return f"stop_complete: {decision.evidence}"
    if decision.decision == "stop_blocked":
        return f"stop_blocked: {decision.reason}"
    return f"continue: {decision.rationale}"
