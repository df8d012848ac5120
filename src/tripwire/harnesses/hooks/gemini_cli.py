"""Gemini CLI hooks: ``tripwire hook gemini-cli`` (``settings.json`` ``hooks``).

Gemini CLI's contract (read from its source, ``packages/core/src/hooks``): every event's stdin
carries ``session_id``, ``transcript_path``, ``cwd``, ``hook_event_name`` and ``timestamp``;
no tool-call id and no turn id. A hook's stdout JSON is honoured on any exit code, and text
that is not JSON becomes a decision by exit code (2 and above: deny), so the hook always
prints one JSON object (``{}``: no decision) and exits 0.

- BeforeTool: observes the call; a denial is ``decision: deny`` with the model-facing reason
  (the model reads ``Tool execution blocked: <reason>``); a halt adds ``continue: false``,
  which stops the agent loop (``stopReason`` is what the stopped call's result says, so it is
  the model-facing text too; ``systemMessage`` is the user's: ``gemini -p`` prints it as
  ``Agent execution stopped: …`` on stderr).
- AfterTool: observes the result (``tool_response.llmContent``, ``error``); feedback and a cut
  as ``additionalContext``; a halt as ``continue: false``.
- BeforeAgent: a turn boundary (Gemini has no turn id); a halted session's prompt is refused
  (``decision: deny``, the reason for the user; the prompt is dropped).
- AfterAgent: Gemini's stop hook (``stop_hook_active`` when a hook refused the previous
  attempt): the stop-hook cap, as Claude Code's Stop; at the cap, ``continue: false``.
- SessionStart: a turn boundary; feedback as ``additionalContext``.

A call's id is made from the event (tool, arguments, timestamp): two hook entries get the same
event, so an event delivered twice is observed once.
"""

from __future__ import annotations

import hashlib
import json
from typing import Any

from ._contract import handler_seconds
from ._contract import text_or_none as _str
from ._model import HookEvent, Verdict

__all__ = ["HARNESS", "parse", "render", "install_block", "EMPTY"]

HARNESS = "gemini-cli"
FLAT = False
#: the output of "no decision": Gemini reads stderr as a message when stdout is empty
EMPTY = "{}"

_KINDS = {"BeforeTool": "call", "AfterTool": "result", "BeforeAgent": "prompt",
          "AfterAgent": "stop", "SessionStart": "session_start"}
_TOOL_EVENTS = ("BeforeTool", "AfterTool")
_OTHER_EVENTS = ("BeforeAgent", "AfterAgent", "SessionStart")


def parse(payload: dict[str, Any]) -> tuple[str, HookEvent]:
    name = payload.get("hook_event_name")
    if not isinstance(name, str):
        raise ValueError("the hook payload has no hook_event_name")
    session = payload.get("session_id")
    if not isinstance(session, str) or not session:
        raise ValueError("the hook payload has no session_id")
    event = HookEvent(kind=_KINDS.get(name, "other"), session=session,
                      transcript_path=_str(payload.get("transcript_path")))
    if event.kind in ("call", "result"):
        event.name = _str(payload.get("tool_name")) or "tool"
        event.args = payload.get("tool_input")
        stamp = payload.get("timestamp")
        if isinstance(stamp, str) and stamp:
            text = json.dumps([event.name, event.args, stamp], sort_keys=True, default=str)
            event.call_id = "gemini:" + hashlib.sha256(text.encode()).hexdigest()[:24]
    if event.kind == "result":
        response = payload.get("tool_response")
        if isinstance(response, dict):
            error = response.get("error")
            if isinstance(error, dict):
                error = error.get("message") or json.dumps(error, sort_keys=True)
            if error:
                event.error = str(error)
            else:
                content = response.get("llmContent")
                event.payload = content if content is not None else \
                    response.get("returnDisplay")
        else:
            event.payload = response
    elif event.kind == "stop":
        event.stop_hook_active = payload.get("stop_hook_active") is True
        event.answer = _str(payload.get("prompt_response"))
    return name, event


def render(event: HookEvent, name: str, verdict: Verdict) -> dict[str, Any] | None:
    out: dict[str, Any] = {}
    context = verdict.context
    if event.kind == "call" and verdict.deny is not None:
        out.update(decision="deny", reason=verdict.deny)
    elif event.kind == "result" and verdict.cut is not None:
        context = verdict.cut if context is None else f"{verdict.cut}\n\n{context}"
    elif event.kind == "prompt" and verdict.block is not None:
        out.update(decision="deny", reason=verdict.block)
    if context is not None and event.kind in ("result", "prompt", "session_start"):
        out["hookSpecificOutput"] = {"hookEventName": name, "additionalContext": context}
    if verdict.halt is not None and event.kind in ("call", "result", "stop"):
        out.update({"continue": False, "systemMessage": verdict.halt,
                    "stopReason": verdict.told or verdict.deny or verdict.halt})
    return out or None


def install_block(command: str = "tripwire hook gemini-cli") -> dict[str, Any]:
    """The ``settings.json`` hooks block (``~/.gemini/settings.json`` or the project's
    ``.gemini/settings.json``): timeouts in milliseconds, each handler named ``tripwire``."""
    handler = [{"type": "command", "name": "tripwire", "command": command, "timeout": 10000}]
    hooks: dict[str, Any] = {e: [{"matcher": "*", "hooks": handler}] for e in _TOOL_EVENTS}
    hooks.update({e: [{"hooks": handler}] for e in _OTHER_EVENTS})
    return {"hooks": hooks}


def probe(session: str, cwd: str, n: int) -> dict[str, Any]:
    """``tripwire doctor``'s ``n``th identical tool call of a new session, as Gemini CLI sends
    it."""
    import time

    stamp = time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime())
    return {"session_id": session, "transcript_path": "", "cwd": cwd,
            "hook_event_name": "BeforeTool", "tool_name": "run_shell_command",
            "tool_input": {"command": "true"}, "timestamp": f"{stamp}.{n:03d}Z"}


def denied(answer: Any, code: int) -> bool:
    return isinstance(answer, dict) and answer.get("decision") == "deny"


def timeout_seconds(handler: dict[str, Any]) -> float:
    return handler_seconds(handler, "timeout", 60.0, 1000)  # milliseconds
