"""The stdout JSON both harnesses read (Claude Code's hook contract; Codex's is the same
design with stricter parsing). Exit code is always 0: every decision is JSON."""

from __future__ import annotations

import json
from typing import Any

from ._model import HookEvent, Verdict

__all__ = ["render", "hooks_block", "handler_seconds", "text_or_none", "json_or_text"]


def render(event: HookEvent, hook_event_name: str, verdict: Verdict, *,
           halt_on_pre_tool_use: bool, system_message: bool = False,
           told_on_result: bool = False) -> dict[str, Any] | None:
    """The output object for ``verdict``, or None for "no decision" (empty stdout).

    ``halt_on_pre_tool_use``: whether ``continue: false`` may accompany a PreToolUse denial
    (Claude Code: yes; Codex rejects the whole output, so a halt is a denial there).
    ``system_message``: a halt's reason for the user goes in ``systemMessage`` too (Claude
    Code shows it to the user, and ``claude -p --output-format stream-json`` prints it).
    ``told_on_result``: a halted result carries the model's text as ``reason`` (Codex gives
    the model ``reason``, else ``stopReason``: never the operator's text)."""
    out: dict[str, Any] = {}
    specific: dict[str, Any] = {}
    if event.kind == "call" and verdict.deny is not None:
        specific = {"permissionDecision": "deny", "permissionDecisionReason": verdict.deny}
    elif event.kind in ("result", "batch"):
        context = verdict.context
        if verdict.cut is not None:
            # PostToolBatch's block stops the loop before the next model request
            if hook_event_name in ("PostToolUse", "PostToolBatch"):
                out.update(decision="block", reason=verdict.cut)
            else:  # PostToolUseFailure has no decision: the cut goes in the context
                context = verdict.cut if context is None else f"{verdict.cut}\n\n{context}"
        if context is not None:
            specific = {"additionalContext": context}
    elif event.kind == "prompt":
        if verdict.block is not None:
            out.update(decision="block", reason=verdict.block)
        elif verdict.context is not None:
            specific = {"additionalContext": verdict.context}
    elif event.kind == "session_start" and verdict.context is not None:
        specific = {"additionalContext": verdict.context}
    if verdict.halt is not None and (event.kind != "call" or halt_on_pre_tool_use):
        out.update({"continue": False, "stopReason": verdict.halt})
        if system_message:
            out["systemMessage"] = verdict.halt
        if told_on_result and event.kind in ("result", "batch") and "reason" not in out and \
                verdict.told is not None:
            out["reason"] = verdict.told
    if specific:
        out["hookSpecificOutput"] = {"hookEventName": hook_event_name, **specific}
    return out or None


def hooks_block(command: str, tool_events: tuple[str, ...],
                other_events: tuple[str, ...]) -> dict[str, Any]:
    """A ``{"hooks": ...}`` settings block running ``command`` on every event listed (tool
    events with the match-all matcher)."""
    handler = [{"type": "command", "command": command, "timeout": 10}]
    hooks: dict[str, Any] = {e: [{"matcher": "*", "hooks": handler}] for e in tool_events}
    hooks.update({e: [{"hooks": handler}] for e in other_events})
    return {"hooks": hooks}


def handler_seconds(handler: dict[str, Any], key: str, default: float,
                    per_second: float = 1.0) -> float:
    """A hook handler's timeout in seconds: its ``key`` (in units ``per_second`` to the
    second: 1000 for milliseconds), or the harness's ``default`` when it is absent or no
    positive number."""
    value = handler.get(key)
    if not isinstance(value, (int, float)) or isinstance(value, bool) or value <= 0:
        return default
    return float(value) / per_second


def text_or_none(value: Any) -> str | None:
    """A payload's string field, or None when it is absent, empty or no string."""
    return value if isinstance(value, str) and value else None


def json_or_text(value: Any) -> Any:
    """A field some harnesses send as a JSON string: its value, the string itself when it is
    no JSON, and anything else as it came."""
    if isinstance(value, str):
        try:
            return json.loads(value)
        except ValueError:
            return value
    return value
