"""CrewAI integration (``pip install 'tripwire[crewai]'``): CrewAI's tool and model-call hooks
for one crew.

    guardrails = Guardrails(GuardrailsConfig(mode="enforce"), feedback_at_once=True)
    hooks = TripwireHooks(guardrails)
    crew = hooks.attach(Crew(agents=[...], tasks=[...]))
    try:
        crew.kickoff()
    except HookAborted as stopped:   # CrewAI's own abort; hooks.stopped is the Decision
        ...
    hooks.detach()                   # the hooks are CrewAI's global ones, filtered to this crew

One ``crew.kickoff`` is one turn: a before-kickoff callback opens it, an after-kickoff
callback closes it (a kickoff that was aborted is closed when the next one starts).

- A call the guardrails cut never runs: the before-tool-call hook blocks it (CrewAI's
  ``return False``), and the after-tool-call hook replaces CrewAI's "blocked" text with the
  refusal, ``[tripwire] This tool call was not run: ...``, which the model is given as the
  call's result.
- The run then ends before its next model call: the before-model-call hook raises CrewAI's
  ``HookAborted`` (its reason ``[tripwire] The run was stopped: ...``), which ends the kickoff.
  A kickoff of a halted session is aborted the same way, before its first model call.
- Each model response's usage is the change of the LLM's own ``get_token_usage_summary()``
  over the call (CrewAI's usage objects), priced from the catalogue by the LLM's ``model``; a
  text answer's words are observed in the after-model-call hook (CrewAI runs it on text
  answers only: a response asking for tools is observed, without words, when its calls come).
- Feedback reaches the model appended to the next tool result (the after-tool-call hook's
  replacement text).

Register the hooks before the crew's agents build their executors (``attach`` before
``kickoff``): CrewAI snapshots model-call hooks when an executor is made. Calls of tools that
bypass CrewAI's tool hooks (a tool called from inside another tool) are not seen.
"""

from __future__ import annotations

import threading
from typing import Any

from crewai import Crew
from crewai.hooks import (
    HookAborted,
    LLMCallHookContext,
    ToolCallHookContext,
    register_after_llm_call_hook,
    register_after_tool_call_hook,
    register_before_llm_call_hook,
    register_before_tool_call_hook,
    unregister_after_llm_call_hook,
    unregister_after_tool_call_hook,
    unregister_before_llm_call_hook,
    unregister_before_tool_call_hook,
)

from ...base.decision import Decision
from ...session.guardrails import Guardrails
from .run import GuardedRun, Guarding, content_text, refused_call, stopped_run

__all__ = ["TripwireHooks"]


class TripwireHooks(Guarding):
    """One session's ``Guardrails`` for one crew (``attach``)."""

    def __init__(self, guardrails: Guardrails):
        self.run = GuardedRun(guardrails)
        self.crew: Crew | None = None
        self._refused: dict[int, Decision] = {}  # the refused calls' contexts' inputs
        self._calling: dict[int, tuple[Any, Any]] = {}  # a model call: its LLM, usage before
        self._lock = threading.Lock()


    def attach(self, crew: Crew) -> Crew:
        """Guard one crew: its kickoffs open and close turns; returns the crew."""
        self.crew = crew
        crew.before_kickoff_callbacks.append(self._kickoff)
        crew.after_kickoff_callbacks.append(self._finished)
        register_before_tool_call_hook(self._before_tool)
        register_after_tool_call_hook(self._after_tool)
        register_before_llm_call_hook(self._before_model)
        register_after_llm_call_hook(self._after_model)
        return crew

    def detach(self) -> None:
        """Remove the hooks (CrewAI's are process-wide) and the crew's kickoff callbacks."""
        unregister_before_tool_call_hook(self._before_tool)
        unregister_after_tool_call_hook(self._after_tool)
        unregister_before_llm_call_hook(self._before_model)
        unregister_after_llm_call_hook(self._after_model)
        if self.crew is not None:
            for callbacks, callback in ((self.crew.before_kickoff_callbacks, self._kickoff),
                                        (self.crew.after_kickoff_callbacks, self._finished)):
                if callback in callbacks:
                    callbacks.remove(callback)
        self.crew = None

    # -- kickoffs ------------------------------------------------------------------------------

    def _kickoff(self, inputs: Any) -> Any:
        with self._lock:
            self._calling.clear()
        self.run.end()  # a kickoff that was aborted, its turn still open
        self.run.start()  # refused: the first model call aborts the kickoff
        return inputs

    def _finished(self, output: Any) -> Any:
        self._settle()
        self.run.end()
        return output

    def _ours(self, context: Any) -> bool:
        return self.crew is not None and context.crew is self.crew

    # -- tool calls ----------------------------------------------------------------------------

    def _before_tool(self, context: ToolCallHookContext) -> bool | None:
        if not self._ours(context):
            return None
        self._settle()  # the response that asked for this call
        decision = self.run.call(context.tool_name, dict(context.tool_input))
        if decision.cut_turn:
            with self._lock:
                self._refused[id(context.tool_input)] = decision
            return False  # blocked: CrewAI does not run the tool
        return None

    def _after_tool(self, context: ToolCallHookContext) -> str | None:
        if not self._ours(context):
            return None
        with self._lock:
            refused = self._refused.pop(id(context.tool_input), None)
        if refused is not None:
            return refused_call(refused)
        self.run.result(context.tool_name, payload=content_text(context.tool_result))
        feedback = self.run.feedback()
        if feedback:
            return "\n\n".join([content_text(context.tool_result), feedback])
        return None

    # -- model calls ---------------------------------------------------------------------------
    # CrewAI runs its after-model-call hooks on a text answer only, not on a response asking
    # for tools: such a response is settled when the run goes on (its calls, the next model
    # call, the kickoff's end), from the LLM's usage before it was made.

    def _before_model(self, context: LLMCallHookContext) -> None:
        if not self._ours(context):
            return
        self._settle()
        if not self.run.in_run and self.run.stopped is None:
            self.run.start()
        if self.run.stopped is not None:
            raise HookAborted(stopped_run(self.run.stopped), source="tripwire")
        with self._lock:
            self._calling[id(context.llm)] = (context.llm, _usage(context.llm))

    def _after_model(self, context: LLMCallHookContext) -> None:
        if not self._ours(context):
            return
        with self._lock:
            pending = self._calling.pop(id(context.llm), None)
        if pending is not None:
            text = context.response if isinstance(context.response, str) else ""
            self._respond(*pending, text)

    def _settle(self) -> None:
        """Observe the model responses whose after-model-call hook did not run."""
        with self._lock:
            pending, self._calling = list(self._calling.values()), {}
        for llm, before in pending:
            self._respond(llm, before, "")

    def _respond(self, llm: Any, before: Any, text: str) -> None:
        after = _usage(llm)
        delta = after.delta_since(before) if after is not None and before is not None else after
        self.run.response(text, model=getattr(llm, "model", None),
                          input_tokens=getattr(delta, "prompt_tokens", None),
                          output_tokens=getattr(delta, "completion_tokens", None),
                          cache_read_tokens=getattr(delta, "cached_prompt_tokens", None) or None)


def _usage(llm: Any) -> Any:
    summary = getattr(llm, "get_token_usage_summary", None)
    return summary() if callable(summary) else None
