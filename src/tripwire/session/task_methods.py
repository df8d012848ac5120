"""A session's task (SPEC §7): the task it runs under, a new task to run, the stop attempts,
retries and clock checks charged to it. A part of ``Guardrails`` (``fields.SessionFields``)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, cast

from ..base.decision import CONTINUE, Decision
from ..budgets.task import Task
from ..engine.watchdog import retracted_count
from ..policy.budget import BUDGET, BudgetPolicy, checked_task
from .fields import SessionFields

if TYPE_CHECKING:
    from ..policy.budget import BudgetSession

__all__ = ["TaskMethods"]


class TaskMethods(SessionFields):
    if not TYPE_CHECKING:
        __slots__ = ()

    @property
    def task(self) -> Task:
        """The task this session runs under (its own implicit one when none was given)."""
        return self._budget.task

    def run_task(self, task: Task) -> None:
        """Run the session's next work under ``task`` (a ``task_start``): its observations
        charge it from now on. The previous task is no longer charged."""
        task = checked_task(task)
        with self._lock:
            self._budget.detach()
            # the session this part is of (a Guardrails) is the policy's BudgetSession
            session = cast("BudgetSession", self)
            self._budget = BudgetPolicy(task, session, self.mode, self._channel)
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

    def on_retry(self, reason: str = "", calls: int | None = None) -> Decision:
        """A transport/provider retry of a failed model request (not a tool failure). The
        calls the failed attempt streamed never ran and come again with the retry: they come
        off the watchdog's run state as ``retract_calls`` takes them (``calls`` of them, the
        last observed; None: the calls since the last result, model response or turn start,
        the response in flight), so the attempt and its retry are not two laps of one loop."""
        with self._lock:
            count = None if calls is None else retracted_count(calls)  # checked in every mode
            watchdog = self._watchdog
            if watchdog is not None:
                watchdog.retract_calls(watchdog.attempt_calls if count is None else count)
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

