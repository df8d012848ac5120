"""Claude Code hooks: ``tripwire hook claude-code`` (stdin JSON in, stdout JSON out).

- PreToolUse: observes the call; under enforce denies it (``permissionDecision: deny``, the
  model-facing guidance as the reason) when it trips a critical signal, when the turn was cut,
  or when the session is halted (then with ``continue: false`` too).
- PostToolUse / PostToolUseFailure: observes the result; feedback as ``additionalContext``; a
  cut as ``decision: block`` (PostToolUse); a halt as ``continue: false``.
- UserPromptSubmit: a turn boundary; a halted session's prompt is blocked (the reason goes to
  the user); queued feedback as ``additionalContext``.
- SessionStart: a turn boundary; queued feedback as ``additionalContext``.
- Stop / SubagentStop: the stop-hook cap, the session's task's ``stop_rejections`` counter
  (8 by default): a Stop with ``stop_hook_active`` records one refusal of the previous attempt
  to finish; the refusal that passes the cap (the 9th) exhausts the task, and under enforce
  answers ``continue: false`` (later prompts are refused).

A sub-agent's events are their own session: ``<session_id>/<agent_id>``.
"""

from __future__ import annotations

from typing import Any

from ._contract import hooks_block
from ._contract import render as _render
from ._model import HookEvent, Verdict

__all__ = ["HARNESS", "parse", "render", "install_block", "HALT_ON_PRE_TOOL_USE"]

HARNESS = "claude-code"
HALT_ON_PRE_TOOL_USE = True
#: handlers grouped under matchers (Cursor lists them flat)
FLAT = False

_KINDS = {
    "PreToolUse": "call",
    "PostToolUse": "result",
    "PostToolUseFailure": "result",
    "UserPromptSubmit": "prompt",
    "SessionStart": "session_start",
    "Stop": "stop",
    "SubagentStop": "stop",
}
_TOOL_EVENTS = ("PreToolUse", "PostToolUse", "PostToolUseFailure")
_OTHER_EVENTS = ("UserPromptSubmit", "SessionStart", "Stop", "SubagentStop")


def session_key(payload: dict[str, Any]) -> str:
    session = payload.get("session_id")
    if not isinstance(session, str) or not session or session == "*":
        raise ValueError("the hook payload has no session_id")
    agent = payload.get("agent_id")
    return f"{session}/{agent}" if isinstance(agent, str) and agent else session


#: Cursor runs Claude Code's hooks with its own payloads, and maps these answers back
_FROM_CURSOR = {"preToolUse": "PreToolUse", "postToolUse": "PostToolUse",
                "postToolUseFailure": "PostToolUseFailure",
                "beforeSubmitPrompt": "UserPromptSubmit", "stop": "Stop",
                "sessionStart": "SessionStart"}


def parse(payload: dict[str, Any]) -> tuple[str, HookEvent]:
    """``(hook_event_name, event)`` of one stdin payload (a Cursor payload is read as Cursor's
    hook reads it, under its Claude Code event name: the same session, the same call ids)."""
    from . import cursor

    if cursor.is_cursor(payload):
        named, parsed = cursor.parse(payload)
        return _FROM_CURSOR.get(named, named), parsed
    name = payload.get("hook_event_name")
    if not isinstance(name, str):
        raise ValueError("the hook payload has no hook_event_name")
    event = HookEvent(kind=_KINDS.get(name, "other"), session=session_key(payload),
                      turn=_str(payload.get("prompt_id")),
                      transcript_path=_str(payload.get("transcript_path")))
    if event.kind in ("call", "result"):
        event.name = _str(payload.get("tool_name")) or "tool"
        event.args = payload.get("tool_input")
        event.call_id = _str(payload.get("tool_use_id"))
    if name == "PostToolUse":
        event.payload = payload.get("tool_response")
    elif name == "PostToolUseFailure":
        event.error = _str(payload.get("error")) or (
            "interrupted" if payload.get("is_interrupt") else "error")
    elif event.kind == "stop":
        event.stop_hook_active = payload.get("stop_hook_active") is True
        event.answer = _str(payload.get("last_assistant_message"))
    return name, event


def install_block(command: str = "tripwire hook claude-code") -> dict[str, Any]:
    """The ``settings.json`` hooks block that runs tripwire on every event it reads."""
    return hooks_block(command, _TOOL_EVENTS, _OTHER_EVENTS)


def _str(value: Any) -> str | None:
    return value if isinstance(value, str) and value else None


def render(event: HookEvent, name: str, verdict: Verdict) -> dict[str, Any] | None:
    """The stdout object for ``verdict`` (None: no decision, empty stdout)."""
    return _render(event, name, verdict, halt_on_pre_tool_use=True, system_message=True)
