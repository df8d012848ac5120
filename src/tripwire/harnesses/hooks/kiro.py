"""Kiro CLI hooks: ``tripwire hook kiro`` (the ``hooks`` of an agent configuration file,
``.kiro/agents/<agent>.json`` or ``~/.kiro/agents/<agent>.json``).

Kiro's contract (kiro.dev/docs/cli/hooks): each event's handlers are listed directly under it
(``{"command": ..., "matcher": ..., "timeout_ms": ...}``; ``stop`` takes no matcher). Stdin is
JSON: ``hook_event_name`` (``agentSpawn``, ``userPromptSubmit``, ``preToolUse``,
``postToolUse``, ``stop``), ``cwd``, and for tool events ``tool_name``, ``tool_input`` and
(``postToolUse``) ``tool_response``. The answer is the exit status:

- 0: success; stdout is added to the agent's context for ``agentSpawn`` and
  ``userPromptSubmit`` (captured, and not shown to the user, for the others).
- 2 (``preToolUse`` only): the call is blocked, and stderr is returned to the model.
- any other: the hook failed; stderr is shown to the user as a warning, and the agent goes on.

So a denial is exit 2 with the model-facing guidance on stderr (a halted session's every call
is denied so: no answer of Kiro's hooks ends the agent's run); feedback is stdout at the next
prompt (and after a result); a halted session's prompt cannot be refused, so the user is told
with exit 1 and a warning that says how to resume. The documented payload names no session:
``session_id`` is read when the payload has one, else the session is Kiro's in its working
directory (``kiro:<cwd>``), and no tool-call id, so every event is observed as it comes. No Kiro
payload carries usage, so a Kiro session has no spend.
"""

from __future__ import annotations

from typing import Any

from ._contract import handler_seconds
from ._contract import text_or_none as _str
from ._model import HookEvent, Verdict

__all__ = ["HARNESS", "parse", "render", "reply", "install_block", "probe", "denied",
           "timeout_seconds"]

HARNESS = "kiro"
FLAT = True
EMPTY = ""
#: the exit status of a denial (doctor reads it as the answer it is)
DENY_EXIT = 2
#: a settings file ``--install --write`` must find: an agent configuration without ``tools``
#: gives its agent none, so tripwire adds its hooks to an agent's file, never makes one
MUST_EXIST = ("a Kiro agent configuration that exists (a new file would define an agent with "
              "no tools: create the agent first, e.g. with `kiro-cli agent create`)")

_KINDS = {"agentSpawn": "session_start", "userPromptSubmit": "prompt", "preToolUse": "call",
          "postToolUse": "result", "stop": "stop"}
_TOOL_EVENTS = ("preToolUse", "postToolUse")
_OTHER_EVENTS = ("agentSpawn", "userPromptSubmit", "stop")


def parse(payload: dict[str, Any]) -> tuple[str, HookEvent]:
    name = payload.get("hook_event_name")
    if not isinstance(name, str) or not name:
        raise ValueError("the hook payload has no hook_event_name")
    name = name[:1].lower() + name[1:]  # Kiro's IDE names them PascalCase
    session = _str(payload.get("session_id"))
    if session is None:
        cwd = _str(payload.get("cwd"))
        if cwd is None:
            raise ValueError("the hook payload has neither session_id nor cwd")
        session = f"kiro:{cwd}"
    event = HookEvent(kind=_KINDS.get(name, "other"), session=session)
    if event.kind in ("call", "result"):
        event.name = _str(payload.get("tool_name")) or "tool"
        event.args = payload.get("tool_input")
        if event.kind == "result":
            event.payload = payload.get("tool_response")
    return name, event


def render(event: HookEvent, name: str, verdict: Verdict) -> dict[str, Any] | None:
    if event.kind == "call" and verdict.deny is not None:
        return {"deny": verdict.deny}
    if event.kind == "prompt" and verdict.block is not None:
        return {"warn": verdict.block}
    said = [t for t in (verdict.cut or (verdict.told if verdict.halt else None),
                        verdict.context) if t]
    if said and event.kind in ("result", "prompt", "session_start"):
        return {"context": "\n\n".join(said)}
    return None


def reply(out: dict[str, Any] | None) -> tuple[str, str, int]:
    """``(stdout, stderr, exit status)``: a denial is exit 2 with its reason on stderr (the
    model's); a warning for the user exit 1 on stderr; context for the model stdout, exit 0."""
    if out is None:
        return "", "", 0
    if "deny" in out:
        return "", f"{out['deny']}\n", DENY_EXIT
    if "warn" in out:
        return "", f"{out['warn']}\n", 1
    return f"{out['context']}\n", "", 0


def install_block(command: str = "tripwire hook kiro") -> dict[str, Any]:
    """The agent configuration's ``hooks`` (timeouts in milliseconds; tool events for every
    tool, ``*``)."""
    hooks: dict[str, Any] = {
        e: [{"command": command, "matcher": "*", "timeout_ms": 10000}] for e in _TOOL_EVENTS}
    hooks.update({e: [{"command": command, "timeout_ms": 10000}] for e in _OTHER_EVENTS})
    return {"hooks": hooks}


def probe(session: str, cwd: str, n: int) -> dict[str, Any]:
    """``tripwire doctor``'s ``n``th identical tool call of a new session, as Kiro sends it."""
    return {"hook_event_name": "preToolUse", "cwd": cwd, "session_id": session,
            "tool_name": "execute_bash", "tool_input": {"command": "true"}}


def denied(answer: Any, code: int) -> bool:
    return code == DENY_EXIT


def timeout_seconds(handler: dict[str, Any]) -> float:
    return handler_seconds(handler, "timeout_ms", 30.0, 1000)  # milliseconds
