"""Cursor hooks: ``tripwire hook cursor`` (``~/.cursor/hooks.json`` or ``.cursor/hooks.json``).

Cursor's contract (cursor.com/docs/hooks): stdin carries ``conversation_id`` (the session),
``generation_id`` (changes with every user message: the turn) and ``hook_event_name``; the
output is snake_case JSON, exit 0 (exit 2 blocks; other codes fail open).

- preToolUse (``tool_use_id``) / beforeShellExecution / beforeMCPExecution: observes the call;
  a denial is ``permission: deny``, ``agent_message`` the model-facing guidance and
  ``user_message`` what the user reads (a halt's reason and how to resume).
- postToolUse (``tool_output``, a JSON string) / afterShellExecution / afterMCPExecution:
  observes the result; feedback and a cut as ``additional_context`` (postToolUse).
- postToolUseFailure (``error_message``): observes the failure.
- beforeSubmitPrompt: a turn boundary; a halted session's prompt (a follow-up the stop hooks
  submit included) is refused, ``continue: false`` and the reason in ``user_message``.
- stop: ``loop_count`` (the follow-ups already submitted in this conversation, each one a stop
  that a stop hook refused) drives the stop-hook cap: each new one charges the session's task
  ``stop_rejections`` counter, whether or not tools ran between them. Cursor has no output that
  ends the loop from ``stop``: past the cap the task is exhausted, so the next follow-up prompt
  is refused with ``user_message`` saying the cap overrode the stop hooks.
- sessionStart: a turn boundary; feedback as ``additional_context``.

No Cursor payload carries usage, so a Cursor session has no spend.
"""

from __future__ import annotations

from typing import Any

from ._contract import handler_seconds
from ._contract import json_or_text as _json
from ._contract import text_or_none as _str
from ._model import HookEvent, Verdict

__all__ = ["HARNESS", "parse", "render", "install_block", "is_cursor"]

HARNESS = "cursor"
FLAT = True
EMPTY = "{}"

_KINDS = {"preToolUse": "call", "beforeShellExecution": "call", "beforeMCPExecution": "call",
          "postToolUse": "result", "postToolUseFailure": "result",
          "afterShellExecution": "result", "afterMCPExecution": "result",
          "beforeSubmitPrompt": "prompt", "stop": "stop", "sessionStart": "session_start"}
_EVENTS = ("sessionStart", "preToolUse", "postToolUse", "postToolUseFailure",
           "beforeSubmitPrompt", "stop")


def is_cursor(payload: dict[str, Any]) -> bool:
    """Whether a payload is Cursor's (Cursor runs Claude Code's hooks with its own payloads)."""
    name = payload.get("hook_event_name")
    return "cursor_version" in payload or (
        isinstance(name, str) and name[:1].islower() and name in _KINDS) or (
        "conversation_id" in payload and "session_id" not in payload)


def parse(payload: dict[str, Any]) -> tuple[str, HookEvent]:
    name = payload.get("hook_event_name")
    if not isinstance(name, str):
        raise ValueError("the hook payload has no hook_event_name")
    session = payload.get("conversation_id") or payload.get("session_id")
    if not isinstance(session, str) or not session:
        raise ValueError("the hook payload has no conversation_id")
    event = HookEvent(kind=_KINDS.get(name, "other"), session=session,
                      turn=_str(payload.get("generation_id")),
                      transcript_path=_str(payload.get("transcript_path")))
    if name in ("beforeShellExecution", "afterShellExecution"):
        event.name, event.args = "Shell", {"command": payload.get("command")}
        if name == "afterShellExecution":
            event.payload = payload.get("output")
    elif name in ("beforeMCPExecution", "afterMCPExecution"):
        event.name = f"MCP:{_str(payload.get('tool_name')) or 'tool'}"
        event.args = _json(payload.get("tool_input"))
        if name == "afterMCPExecution":
            event.payload = _json(payload.get("result_json"))
    elif event.kind in ("call", "result"):
        event.name = _str(payload.get("tool_name")) or "tool"
        event.args = _json(payload.get("tool_input"))
        event.call_id = _str(payload.get("tool_use_id"))
        if name == "postToolUse":
            event.payload = _json(payload.get("tool_output"))
        elif name == "postToolUseFailure":
            event.error = _str(payload.get("error_message")) or _str(
                payload.get("failure_type")) or "error"
    elif event.kind == "stop":
        count = payload.get("loop_count")
        if isinstance(count, int) and not isinstance(count, bool) and count >= 0:
            event.stop_count = count
        event.stop_hook_active = bool(event.stop_count)
    return name, event


def render(event: HookEvent, name: str, verdict: Verdict) -> dict[str, Any] | None:
    out: dict[str, Any] = {}
    context = verdict.context
    if event.kind == "call" and verdict.deny is not None:
        out.update(permission="deny", agent_message=verdict.deny,
                   user_message=verdict.halt or "tripwire denied this tool call; the agent "
                                                "was told why")
    elif event.kind == "result":
        if verdict.cut is not None:
            context = verdict.cut if context is None else f"{verdict.cut}\n\n{context}"
        elif verdict.halt is not None and verdict.told is not None:
            context = verdict.told
    elif event.kind == "prompt" and verdict.block is not None:
        out.update({"continue": False, "user_message": verdict.block})
    if context is not None and name in ("postToolUse", "sessionStart"):
        out["additional_context"] = context
    return out or None


def install_block(command: str = "tripwire hook cursor") -> dict[str, Any]:
    """The ``hooks.json`` block: handlers listed per event (timeouts in seconds); ``stop``
    with ``loop_limit: null``, so that tripwire's stop-hook cap decides, not Cursor's 5."""
    hooks: dict[str, Any] = {}
    for event in _EVENTS:
        handler: dict[str, Any] = {"command": command, "timeout": 10}
        if event == "stop":
            handler["loop_limit"] = None
        hooks[event] = [handler]
    return {"version": 1, "hooks": hooks}


def probe(session: str, cwd: str, n: int) -> dict[str, Any]:
    """``tripwire doctor``'s ``n``th identical tool call of a new session, as Cursor sends it."""
    return {"conversation_id": session, "generation_id": "doctor",
            "hook_event_name": "preToolUse", "cursor_version": "tripwire-doctor",
            "workspace_roots": [cwd], "cwd": cwd, "tool_name": "Shell",
            "tool_input": {"command": "true"}, "tool_use_id": f"doctor_{n}"}


def denied(answer: Any, code: int) -> bool:
    return isinstance(answer, dict) and answer.get("permission") == "deny"


def timeout_seconds(handler: dict[str, Any]) -> float:
    return handler_seconds(handler, "timeout", 600.0)
