"""AutoGen AgentChat integration (``pip install 'tripwire[autogen]'``): a guarded workbench
that refuses a call before it runs, and a ``TerminationCondition`` that ends the team.

    guardrails = Guardrails(GuardrailsConfig(mode="enforce"), feedback_at_once=True)
    guard = TripwireGuard(guardrails, model="gpt-4o", provider="openai")
    agent = AssistantAgent("coder", model_client=client, workbench=guard.workbench([read_file]))
    team = RoundRobinGroupChat([agent], termination_condition=guard.termination
                               | TextMentionTermination("DONE"))
    result = await team.run(task="fix the bug")   # result.stop_reason says why it stopped
    guard.stopped                                 # the Decision that ended the run, or None

One ``team.run`` is one turn: the termination condition opens it on the task's messages (the
team checks its condition on them before any agent speaks) and closes it when the team resets
the condition at the run's end, whichever condition ended it.

- A call the guardrails cut never runs: the guarded workbench answers it with an error
  ``ToolResult`` saying ``[tripwire] This tool call was not run: ...`` (the model sees it as
  the call's result), and every later call of that run gets the same answer. When the agent
  yields, the termination condition returns its ``StopMessage`` and the team stops, AutoGen's
  own way: ``TaskResult.stop_reason`` is ``[tripwire] The run was stopped: ...``.
- A run of a halted session is refused on the task's messages, before any model call.
- Each model response's words (``ThoughtEvent`` and the agent's ``TextMessage``) and its
  ``models_usage`` are observed by the termination condition when the agent yields. AutoGen's
  usage carries tokens only: ``model`` / ``provider`` name what prices them from the catalogue.
- Feedback reaches the model inside the next tool result (a text item after the result).

Where AutoGen cannot be stopped at once: an ``AssistantAgent`` with ``max_tool_iterations`` > 1
calls its model again inside its own turn before the team checks its condition (every call it
asks for is refused; the team stops when the agent yields); ``team.run()`` without a task is
not checked before the first speaker (its first call is refused); handoffs are not tool calls
of a workbench and are not guarded.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from autogen_agentchat.base import TerminatedException, TerminationCondition
from autogen_agentchat.messages import (
    BaseAgentEvent,
    BaseChatMessage,
    StopMessage,
    TextMessage,
    ThoughtEvent,
)
from autogen_core import CancellationToken
from autogen_core.tools import (
    BaseTool,
    StaticWorkbench,
    TextResultContent,
    ToolResult,
    ToolSchema,
    Workbench,
)

from ...session.guardrails import Guardrails
from .run import GuardedRun, Guarding, refused_call, stopped_run

__all__ = ["TripwireGuard", "GuardedWorkbench", "TripwireTermination"]


class TripwireGuard(Guarding):
    """One session's ``Guardrails`` for one AutoGen team: ``workbench(...)`` for its agents'
    tools, ``termination`` for the team."""

    def __init__(self, guardrails: Guardrails, *, model: str | None = None,
                 provider: str | None = None):
        self.run = GuardedRun(guardrails)
        self.model, self.provider = model, provider
        self.termination = TripwireTermination(self)


    def workbench(self, tools: Workbench | Sequence[BaseTool[Any, Any]]) -> GuardedWorkbench:
        """An agent's tools (or any workbench, an MCP one too), guarded."""
        inner = tools if isinstance(tools, Workbench) else StaticWorkbench(list(tools))
        return GuardedWorkbench(inner, self.run)


class GuardedWorkbench(Workbench):
    """A workbench whose calls go through the guardrails first: a cut call is answered by its
    refusal and never reaches the tool."""

    def __init__(self, inner: Workbench, run: GuardedRun):
        self.inner = inner
        self.run = run

    async def call_tool(self, name: str, arguments: Mapping[str, Any] | None = None,
                        cancellation_token: CancellationToken | None = None,
                        call_id: str | None = None) -> ToolResult:
        decision = self.run.call(name, dict(arguments or {}), call_id)
        if decision.cut_turn:
            return ToolResult(name=name, is_error=True,
                              result=[TextResultContent(content=refused_call(decision))])
        try:
            result = await self.inner.call_tool(name, arguments, cancellation_token, call_id)
        except Exception as error:
            self.run.result(name, call_id, error=str(error) or type(error).__name__)
            raise
        if result.is_error:
            self.run.result(name, call_id, error=result.to_text())
        else:
            self.run.result(name, call_id, payload=result.to_text())
        feedback = self.run.feedback()
        if feedback:
            result = result.model_copy(
                update={"result": [*result.result, TextResultContent(content=feedback)]})
        return result

    # -- the rest is the inner workbench's ------------------------------------------------------

    async def list_tools(self) -> list[ToolSchema]:
        return list(await self.inner.list_tools())

    async def start(self) -> None:
        await self.inner.start()

    async def stop(self) -> None:
        await self.inner.stop()

    async def reset(self) -> None:
        await self.inner.reset()

    async def save_state(self) -> Mapping[str, Any]:
        return await self.inner.save_state()

    async def load_state(self, state: Mapping[str, Any]) -> None:
        await self.inner.load_state(state)


class TripwireTermination(TerminationCondition):
    """Ends the team when the guardrails stopped the run (or refuse it); observes the model's
    words and usage. Combine it with the team's own conditions (``|``)."""

    def __init__(self, guard: TripwireGuard):
        self.guard = guard
        self.stop_message: StopMessage | None = None  # the last stop it returned
        self._terminated = False
        self._thought = ""  # a ThoughtEvent's words, observed with the response it precedes

    @property
    def terminated(self) -> bool:
        return self._terminated

    async def __call__(self, messages: Sequence[BaseAgentEvent | BaseChatMessage],
                       ) -> StopMessage | None:
        if self._terminated:
            raise TerminatedException("tripwire already stopped this run")
        run = self.guard.run
        if run.start() is None and run.stopped is None:
            for message in messages:
                self._observe(message)
                if run.stopped is not None:
                    break
        if run.stopped is None:
            return None
        self._terminated = True
        decision = run.stopped
        self.stop_message = StopMessage(
            content=stopped_run(decision), source="tripwire",
            metadata={"guardrail": decision.guardrail or "", "action": decision.action})
        return self.stop_message

    def _observe(self, message: BaseAgentEvent | BaseChatMessage) -> None:
        if isinstance(message, ThoughtEvent):
            self._thought = "\n".join(filter(None, [self._thought, message.content]))
            return
        usage = message.models_usage
        if usage is None:  # not a model's response (the task, tool results, other agents')
            return
        words = message.content if isinstance(message, TextMessage) else ""
        text, self._thought = "\n".join(filter(None, [self._thought, words])), ""
        self.guard.run.response(text, model=self.guard.model, provider=self.guard.provider,
                                input_tokens=usage.prompt_tokens,
                                output_tokens=usage.completion_tokens)

    async def reset(self) -> None:
        """The team's run ended (or the team was reset): the run's turn closes."""
        self._terminated = False
        self._thought = ""
        self.guard.run.end()
