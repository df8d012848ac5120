"""Claude Code hooks: ``tripwire hook claude-code`` (stdin JSON in, stdout JSON out).

- PreToolUse: observes the call; under enforce denies it (``permissionDecision: deny``, the
  model-facing guidance as the reason) when it trips a critical signal, when the turn was cut,
  or when the session is halted (then with ``continue: false`` too).
- PostToolUse / PostToolUseFailure: observes the result; feedback as ``additionalContext``; a
  cut as ``decision: block`` (PostToolUse); a halt as ``continue: false``.
- UserPromptSubmit: a turn boundary; a halted session's prompt is blocked (the reason goes to
  the user); queued feedback as ``additionalContext``.
- PostToolBatch: a parallel batch's results at once, before the next model request: the
  results (and calls) no PostToolUse (PreToolUse) reported are observed here; feedback as
  ``additionalContext``, a cut as ``decision: block`` (the loop stops before the next request),
  a halt as ``continue: false``.
- SessionStart: a turn boundary (``source`` startup, resume or clear); queued feedback as
  ``additionalContext``. ``source: compact`` is no boundary: the compaction it follows (below).
- PreCompact / PostCompact (and SessionStart ``compact``): one compaction, counted once
  whichever of them report it, for ``compaction-storm`` (a halt: ``continue: false``).
- SubagentStart: the sub-agent's session starts (its feedback as ``additionalContext``).
- SessionEnd: the turn in progress is closed and the session's rows are written.
- Stop / SubagentStop: the stop-hook cap, the session's task's ``stop_rejections`` counter
  (8 by default): a Stop with ``stop_hook_active`` records one refusal of the previous attempt
  to finish; the refusal that passes the cap (the 9th) exhausts the task, and under enforce
  answers ``continue: false`` (later prompts are refused).

A sub-agent's events are their own session: ``<session_id>/<agent_id>``, whose task is a child
of the parent session's (its calls, steps and spend are charged to both: the parent's caps bound
its sub-agents).
"""

from __future__ import annotations

from typing import Any

from ._contract import handler_seconds, hooks_block
from ._contract import render as _render
from ._contract import text_or_none as _str
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
    "PostToolBatch": "batch",
    "PreCompact": "compaction",
    "PostCompact": "compaction",
    "SubagentStart": "session_start",
    "SessionEnd": "end",
}
_TOOL_EVENTS = ("PreToolUse", "PostToolUse", "PostToolUseFailure")
_OTHER_EVENTS = ("UserPromptSubmit", "SessionStart", "Stop", "SubagentStop", "PostToolBatch",
                 "PreCompact", "PostCompact", "SubagentStart", "SessionEnd")


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
    if event.session != payload.get("session_id"):  # a sub-agent's: its parent's task
        event.parent = payload["session_id"]
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
    elif event.kind == "session_start":
        event.source = "subagent" if name == "SubagentStart" else _str(payload.get("source"))
    elif event.kind == "compaction":
        event.phase = "pre" if name == "PreCompact" else "post"
        event.manual = payload.get("trigger") == "manual"
    elif event.kind == "batch":
        calls = payload.get("tool_calls")
        for call in calls if isinstance(calls, list) else ():
            if isinstance(call, dict):
                event.batch.append(HookEvent(
                    kind="result", session=event.session, turn=event.turn,
                    name=_str(call.get("tool_name")) or "tool", args=call.get("tool_input"),
                    call_id=_str(call.get("tool_use_id")), payload=call.get("tool_response")))
    return name, event


def install_block(command: str = "tripwire hook claude-code") -> dict[str, Any]:
    """The ``settings.json`` hooks block that runs tripwire on every event it reads."""
    return hooks_block(command, _TOOL_EVENTS, _OTHER_EVENTS)


def probe(session: str, cwd: str, n: int) -> dict[str, Any]:
    """``tripwire doctor``'s ``n``th identical tool call of a new session, as Claude Code sends
    it."""
    return {"session_id": session, "transcript_path": None, "cwd": cwd,
            "hook_event_name": "PreToolUse", "permission_mode": "default", "tool_name": "Bash",
            "tool_input": {"command": "true"}, "tool_use_id": f"doctor_{n}"}


def denied(answer: Any, code: int) -> bool:
    specific = answer.get("hookSpecificOutput") if isinstance(answer, dict) else None
    return isinstance(specific, dict) and specific.get("permissionDecision") == "deny"


def timeout_seconds(handler: dict[str, Any]) -> float:
    return handler_seconds(handler, "timeout", 600.0)



def render(event: HookEvent, name: str, verdict: Verdict) -> dict[str, Any] | None:
    """The stdout object for ``verdict`` (None: no decision, empty stdout)."""
    return _render(event, name, verdict, halt_on_pre_tool_use=True, system_message=True)
