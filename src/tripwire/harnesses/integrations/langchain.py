"""LangChain integration (``pip install 'tripwire[langchain]'``): a callback handler.

    guardrails = Guardrails(GuardrailsConfig(mode="enforce"))
    handler = TripwireCallbackHandler(guardrails)
    config = {"callbacks": [handler]}          # inherited by child runs and sub-agents
    model.invoke(messages, config=config)      # GuardrailTripped on a cut or halt
    tool.invoke(tool_call, config=config)

``raise_error = True`` makes LangChain's callback manager re-raise what the handler raises
(otherwise it only logs it). A turn opens at the first model call after the previous turn
closed (``GuardrailHalted`` when the session is halted, before the model is called) and closes
when the outermost chain ends, or when the host calls ``end_turn()`` (a hand-written loop has no
outer chain). Tool calls are observed in ``on_tool_start`` with their ``inputs`` dict (not
``input_str``, which is a Python repr), results in ``on_tool_end`` / ``on_tool_error``, usage
and text in ``on_llm_end``.

A cut or halt raises ``GuardrailTripped`` from ``on_tool_start``, before the tool runs. A
``ToolNode`` that turns tool exceptions into error messages may swallow that, so the next model
call of a cut turn raises it again from ``on_chat_model_start`` until the turn is closed
(``end_turn()``, or the outermost chain's end or error).
"""

from __future__ import annotations

from typing import Any
from uuid import UUID

from langchain_core.callbacks import BaseCallbackHandler
from langchain_core.outputs import LLMResult

from ...base.decision import Decision
from ...session.guardrails import Guardrails
from . import check
from .run import content_text as _text

__all__ = ["TripwireCallbackHandler"]


class TripwireCallbackHandler(BaseCallbackHandler):
    """A ``BaseCallbackHandler`` feeding one session's ``Guardrails``."""

    raise_error = True

    def __init__(self, guardrails: Guardrails):
        self.guardrails = guardrails
        self._in_turn = False
        self._blocked: Decision | None = None  # a cut or halt not yet acted on
        self._tools: dict[UUID, tuple[str, str | None]] = {}  # run id -> (tool name, call id)

    # -- turns -----------------------------------------------------------------------------

    def end_turn(self) -> None:
        """Close the turn (done when the outermost chain ends or fails; a hand-written loop
        calls it after each turn, and after catching ``GuardrailTripped``)."""
        self._blocked = None
        self._tools.clear()
        if self._in_turn:
            self._in_turn = False
            self.guardrails.end_turn()

    def _model_call(self) -> None:
        if self._blocked is not None:  # a cut the framework swallowed: stop at the model
            check(self._blocked)
        if not self._in_turn:
            self.guardrails.start_turn()  # GuardrailHalted: refused before any model call
            self._in_turn = True

    def _check(self, decision: Decision) -> None:
        if decision.cut_turn:
            self._blocked = decision
            check(decision)

    # -- callbacks -------------------------------------------------------------------------

    def on_chat_model_start(self, serialized: dict[str, Any], messages: list[list[Any]], *,
                            run_id: UUID, **kwargs: Any) -> None:
        self._model_call()

    def on_llm_start(self, serialized: dict[str, Any], prompts: list[str], *, run_id: UUID,
                     **kwargs: Any) -> None:
        self._model_call()

    def on_llm_end(self, response: LLMResult, *, run_id: UUID, **kwargs: Any) -> None:
        g = self.guardrails
        for generations in response.generations:
            for generation in generations:
                message = getattr(generation, "message", None)
                text = generation.text if message is None else _text(message.content)
                if text:
                    self._check(g.on_text(text))
                usage = getattr(message, "usage_metadata", None)
                if usage:
                    model = (getattr(message, "response_metadata", None) or {}).get("model_name")
                    self._check(g.on_usage(model=model, input_tokens=usage.get("input_tokens"),
                                           output_tokens=usage.get("output_tokens")))

    def on_tool_start(self, serialized: dict[str, Any], input_str: str, *, run_id: UUID,
                      inputs: dict[str, Any] | None = None, **kwargs: Any) -> None:
        name = kwargs.get("name") or (serialized or {}).get("name") or "tool"
        call_id = kwargs.get("tool_call_id")
        self._tools[run_id] = (name, call_id)
        self._check(self.guardrails.on_call(name, inputs if inputs is not None else input_str,
                                            id=call_id))

    def on_tool_end(self, output: Any, *, run_id: UUID, **kwargs: Any) -> None:
        name, call_id = self._tools.pop(run_id, (kwargs.get("name"), None))
        content = getattr(output, "content", output)
        error = (_text(content) or "error") if getattr(output, "status", None) == "error" else None
        self._check(self.guardrails.on_result(name, id=call_id, error=error,
                                              payload=None if error else _text(content)))

    def on_tool_error(self, error: BaseException, *, run_id: UUID, **kwargs: Any) -> None:
        name, call_id = self._tools.pop(run_id, (kwargs.get("name"), None))
        if self._blocked is None:  # a tool's own failure, not the cut raised before it ran
            self._check(self.guardrails.on_result(name, id=call_id, error=str(error) or "error"))

    def on_chain_end(self, outputs: Any, *, run_id: UUID, parent_run_id: UUID | None = None,
                     **kwargs: Any) -> None:
        if parent_run_id is None:
            self.end_turn()

    def on_chain_error(self, error: BaseException, *, run_id: UUID,
                       parent_run_id: UUID | None = None, **kwargs: Any) -> None:
        if parent_run_id is None:
            self.end_turn()

