"""smolagents integration (``pip install 'tripwire[smolagents]'``): a guard attached to an
agent.

    guardrails = Guardrails(GuardrailsConfig(mode="enforce"), feedback_at_once=True)
    guard = TripwireGuard(guardrails)
    agent = guard.attach(ToolCallingAgent(tools=[...], model=model))   # or a CodeAgent
    agent.run("fix the bug")        # AgentError on a cut or halt; guard.stopped says why

smolagents has no hook before a model call or a tool call: its step callbacks run after a
step, when the step's tools already ran. So ``attach`` does what the framework allows: it
guards the agent's tools (each tool's ``forward``: for a ``CodeAgent`` too, whose code calls
the same tool objects) and its model's ``generate``, and registers a step callback.

- A call the guardrails cut never runs: the guarded tool raises instead of running it (the
  model's step records a tool error saying ``[tripwire] This tool call was not run: ...``), and
  the guard calls ``agent.interrupt()``, smolagents' own stop: the run ends at the next step
  with its ``AgentError("Agent interrupted.")``.
- A run of a halted session is refused in the guarded ``generate``, before the model is
  called: smolagents ends the run with its ``AgentGenerationError`` (an ``AgentError``), whose
  cause is tripwire's ``GuardrailTripped``.
- A step's text and ``token_usage`` are observed in the step callback (after the step's tools:
  a cost ceiling crossed by a step's usage stops the run at the next step). Feedback reaches
  the model in the step's observations, which the next step shows it.

One ``agent.run`` is one turn: a new run (a new task step in the agent's memory) opens one,
and the final answer closes it. ``final_answer`` calls are the agent's words, not tool calls.
"""

from __future__ import annotations

import functools
from typing import Any

from smolagents.agents import MultiStepAgent
from smolagents.memory import ActionStep, FinalAnswerStep, TaskStep
from smolagents.tools import Tool

from ...base.decision import Decision
from ...errors import GuardrailTripped
from ...session.guardrails import Guardrails
from .run import GuardedRun, Guarding, content_text, refused_call

__all__ = ["TripwireGuard", "ToolRefused"]

_ANSWER = "final_answer"


class ToolRefused(GuardrailTripped):
    """What a guarded tool raises instead of running: smolagents reports it to the model as
    the call's error (its text is the refusal)."""

    def __init__(self, decision: Decision):
        super().__init__(decision)
        self.args = (refused_call(decision),)


class TripwireGuard(Guarding):
    """Feeds one session's ``Guardrails`` from one smolagents agent (``attach``)."""

    def __init__(self, guardrails: Guardrails):
        self.run = GuardedRun(guardrails)
        self._task: TaskStep | None = None  # the task step of the run in progress


    def attach(self, agent: MultiStepAgent) -> MultiStepAgent:
        """Guard the agent's tools and model, and watch its steps; returns the agent."""
        for name, tool in agent.tools.items():
            if name != _ANSWER:
                self._guard_tool(agent, tool)
        model = agent.model
        generate = model.generate

        @functools.wraps(generate)
        def guarded_generate(*args: Any, **kwargs: Any) -> Any:
            self._new_run(agent)
            if self.run.start() is not None:  # refused: before the model is called
                raise GuardrailTripped(self.run.stopped)
            return generate(*args, **kwargs)

        model.generate = guarded_generate
        agent.step_callbacks.register(ActionStep, self._on_step)
        agent.step_callbacks.register(FinalAnswerStep, self._on_answer)
        return agent

    # -- runs ----------------------------------------------------------------------------------

    def _new_run(self, agent: MultiStepAgent) -> None:
        """A run's first model call: a task step the guard has not seen starts a new run (the
        last one may have ended by an exception, before its final answer)."""
        task = next((s for s in reversed(agent.memory.steps) if isinstance(s, TaskStep)), None)
        if task is not self._task:
            self._task = task
            self.run.end()

    def _on_answer(self, step: FinalAnswerStep, agent: MultiStepAgent) -> None:
        self.run.end()

    def _on_step(self, step: ActionStep, agent: MultiStepAgent) -> None:
        usage = step.token_usage
        message = step.model_output_message
        model = getattr(agent.model, "model_id", None)
        text = content_text(step.model_output)
        answer = [c for c in step.tool_calls or () if c.name == _ANSWER]
        if answer:  # the final answer is the agent's words
            text = "\n".join(filter(None, [text, *(content_text(c.arguments) for c in answer)]))
        if message is not None or usage is not None:
            self.run.response(text, model=model,
                              input_tokens=usage.input_tokens if usage else None,
                              output_tokens=usage.output_tokens if usage else None)
        if self.run.stopped is not None:
            agent.interrupt()
            return
        feedback = self.run.feedback()
        if feedback:  # the next step shows the model this step's observations
            step.observations = "\n\n".join(filter(None, [step.observations, feedback]))

    # -- tools ---------------------------------------------------------------------------------

    def _guard_tool(self, agent: MultiStepAgent, tool: Tool) -> None:
        forward = tool.forward
        name = tool.name

        @functools.wraps(forward)
        def guarded_forward(*args: Any, **kwargs: Any) -> Any:
            decision = self.run.call(name, kwargs if kwargs or not args else list(args))
            if decision.cut_turn:
                agent.interrupt()
                raise ToolRefused(decision)
            try:
                result = forward(*args, **kwargs)
            except Exception as error:
                self.run.result(name, error=str(error) or type(error).__name__)
                raise
            self.run.result(name, payload=result if isinstance(result, str) else repr(result))
            return result

        tool.forward = guarded_forward
