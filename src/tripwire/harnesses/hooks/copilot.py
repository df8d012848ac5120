"""GitHub Copilot CLI hooks: ``tripwire hook copilot`` (``.github/hooks/*.json``).

Copilot CLI's contract (docs.github.com, "GitHub Copilot CLI hooks reference"): a hooks file is
``{"version": 1, "hooks": {"<event>": [{"type": "command", "bash": ..., "timeoutSec": ...}]}}``
with camelCase event names, each handler listed directly under its event. A camelCase event's
stdin is camelCase JSON: ``sessionId``, ``timestamp`` (milliseconds), ``cwd``, and per event
``toolName`` / ``toolArgs`` / ``toolResult`` / ``error`` / ``prompt`` / ``source`` /
``trigger`` / ``reason``; it names neither the event nor the tool call, so the event is read
from the fields it carries (``event_name``) and a call's id is made from the event (tool,
arguments, timestamp: an event delivered twice is observed once). Hook failures (a non-zero
exit, a timeout) are logged and skipped: they never block.

- preToolUse: observes the call; a denial is ``{"permissionDecision": "deny",
  "permissionDecisionReason": <the model-facing guidance>}`` (the reason is shown to the agent).
  A halted session's every call is denied this way: no output of Copilot's hooks ends the
  agent's run.
- postToolUse (``toolResult``: ``resultType``, ``textResultForLlm``): observes the result;
  Copilot reads no output of it from a command hook.
- postToolUseFailure (``error``): observes the failure; feedback and a cut reach the model as
  recovery guidance: exit 2 with the text on stderr.
- userPromptSubmitted / sessionStart (``source``: startup, resume, new): turn boundaries (their
  output is ignored: a halted session's prompt cannot be refused, its calls are).
- agentStop: the turn's end. preCompact (``trigger``): one compaction, for compaction-storm.
  sessionEnd: the turn in progress is closed and the session's rows are written.

No Copilot payload carries usage, so a Copilot session has no spend.
"""

from __future__ import annotations

import hashlib
import json
from typing import Any

from ._contract import handler_seconds
from ._contract import json_or_text as _json
from ._contract import text_or_none as _str
from ._model import HookEvent, Verdict

__all__ = ["HARNESS", "parse", "render", "reply", "install_block", "event_name", "probe",
           "denied", "timeout_seconds"]

HARNESS = "copilot"
FLAT = True
#: "no decision": empty output (Copilot's default behaviour)
EMPTY = ""

_KINDS = {"preToolUse": "call", "postToolUse": "result", "postToolUseFailure": "result",
          "userPromptSubmitted": "prompt", "sessionStart": "session_start",
          "agentStop": "stop", "preCompact": "compaction", "sessionEnd": "end"}
_EVENTS = ("sessionStart", "userPromptSubmitted", "preToolUse", "postToolUse",
           "postToolUseFailure", "agentStop", "preCompact", "sessionEnd")


def event_name(payload: dict[str, Any]) -> str:
    """The camelCase event a payload is (it does not say): by the fields only it carries."""
    if "toolName" in payload:
        if "toolResult" in payload:
            return "postToolUse"
        return "postToolUseFailure" if isinstance(payload.get("error"), str) else "preToolUse"
    for key, name in (("prompt", "userPromptSubmitted"), ("trigger", "preCompact"),
                      ("agentName", "subagentStop"), ("stopReason", "agentStop"),
                      ("errorContext", "errorOccurred"), ("reason", "sessionEnd"),
                      ("source", "sessionStart")):
        if key in payload:
            return name
    raise ValueError("not a GitHub Copilot CLI hook payload (no field says which event)")


def parse(payload: dict[str, Any]) -> tuple[str, HookEvent]:
    name = event_name(payload)
    session = payload.get("sessionId")
    if not isinstance(session, str) or not session:
        raise ValueError("the hook payload has no sessionId")
    event = HookEvent(kind=_KINDS.get(name, "other"), session=session,
                      transcript_path=_str(payload.get("transcriptPath")))
    if event.kind in ("call", "result"):
        event.name = _str(payload.get("toolName")) or "tool"
        event.args = _json(payload.get("toolArgs"))
        text = json.dumps([name, event.name, event.args, payload.get("timestamp")],
                          sort_keys=True, default=str)
        event.call_id = "copilot:" + hashlib.sha256(text.encode()).hexdigest()[:24]
    if name == "postToolUse":
        result = payload.get("toolResult")
        result = result if isinstance(result, dict) else {}
        text_for_model = result.get("textResultForLlm")
        if result.get("resultType", "success") == "success":
            event.payload = text_for_model
        else:  # the older hooks reported failures here too
            event.error = _str(text_for_model) or str(result.get("resultType"))
    elif name == "postToolUseFailure":
        event.error = _str(payload.get("error")) or "error"
    elif event.kind == "session_start":
        event.source = _str(payload.get("source"))
    elif event.kind == "compaction":
        event.phase, event.manual = "pre", payload.get("trigger") == "manual"
    return name, event


def render(event: HookEvent, name: str, verdict: Verdict) -> dict[str, Any] | None:
    if event.kind == "call" and verdict.deny is not None:
        return {"permissionDecision": "deny", "permissionDecisionReason": verdict.deny}
    if name == "postToolUseFailure":
        said = [t for t in (verdict.cut or verdict.told, verdict.context) if t]
        if said:
            return {"recoveryGuidance": "\n\n".join(said)}
    return None


def reply(out: dict[str, Any] | None) -> tuple[str, str, int]:
    """A denial is stdout JSON; a failure's recovery guidance is exit 2 with it on stderr
    (what Copilot returns to the agent for a postToolUseFailure command hook)."""
    if out is None:
        return "", "", 0
    if "recoveryGuidance" in out:
        return "", f"{out['recoveryGuidance']}\n", 2
    return json.dumps(out, ensure_ascii=False) + "\n", "", 0


def install_block(command: str = "tripwire hook copilot") -> dict[str, Any]:
    """The hooks file (``.github/hooks/tripwire.json``): each event's handler listed directly,
    its timeout in seconds."""
    handler = {"type": "command", "bash": command, "timeoutSec": 10}
    return {"version": 1, "hooks": {event: [dict(handler)] for event in _EVENTS}}


def probe(session: str, cwd: str, n: int) -> dict[str, Any]:
    """``tripwire doctor``'s ``n``th identical tool call of a new session, as Copilot sends it."""
    return {"sessionId": session, "timestamp": 1765000000000 + n, "cwd": cwd,
            "toolName": "bash", "toolArgs": json.dumps({"command": "true"})}


def denied(answer: Any, code: int) -> bool:
    return isinstance(answer, dict) and answer.get("permissionDecision") == "deny"


def timeout_seconds(handler: dict[str, Any]) -> float:
    return handler_seconds(handler, "timeoutSec", 30.0)
