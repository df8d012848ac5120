"""SWE-agent trajectories (``<instance>.traj``): one JSON object with ``history`` (the
messages the model saw) and usually ``trajectory`` and ``info``, read whole (SWE-agent writes
the file whole).

The ``history`` is read: the system prompt and demonstration messages (``is_demo``) are
skipped; the first user message starts the one turn; an assistant message's ``thought`` is the
agent's words and its ``action`` the call. With function calling (``tool_calls``) the calls
are the named tools; otherwise every action runs in SWE-agent's shell, so it is the call
``bash`` with ``{"command": action}``. The next user/tool message is the observation, the
result (``EXECUTION TIMED OUT`` makes it a failure; SWE-agent records no exit status).
Usage: ``info.model_stats`` holds the run's totals, given as one usage event at the end with
the run's cost only (its token totals add up every call's prompt, so they are no measure of one
call's context).
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

from ...errors import InvalidEvent
from ..events import Call, Event, Result, Text, TurnEnd, TurnStart
from ._base import Item, block_text, command_args, read_document, run_total

NAME = "swe-agent"
TOOL = "bash"
TIMED_OUT = "EXECUTION TIMED OUT"


def sniff(value: Any) -> bool:
    return (isinstance(value, dict) and isinstance(value.get("history"), list)
            and ("trajectory" in value or "info" in value or "replay_config" in value
                 or _has_actions(value["history"])))


def _has_actions(history: list[Any]) -> bool:
    """SWE-agent's history messages: a ``role``, some with an ``action`` (OpenHands' events
    have an ``action`` and no ``role``)."""
    return any(isinstance(m, dict) and "action" in m and "role" in m for m in history[:8])


def read(path: Path, name: str, document: Any = None) -> Iterator[Item]:
    document = read_document(path, document)
    if not sniff(document):
        raise InvalidEvent("not a SWE-agent trajectory (expected an object with 'history' "
                           "and 'trajectory')", source=str(path))
    history = document["history"]
    pending: list[tuple[str, str]] = []  # (call id, tool name) awaiting the observation
    started = False
    calls = 0
    for number, message in enumerate(history, start=1):
        if not isinstance(message, dict) or not isinstance(message.get("role"), str):
            yield Item(name, number, error=InvalidEvent(
                "a history message must be an object with a 'role'", source=str(path),
                line=number))
            continue
        events: list[Event] = []
        role = message["role"]
        if message.get("is_demo") or role == "system":
            pass
        elif role == "assistant":
            thought = message.get("thought", message.get("content"))
            if isinstance(thought, str) and thought.strip():
                events.append(Text(thought.strip()))
            tool_calls = message.get("tool_calls")
            if isinstance(tool_calls, list) and tool_calls:
                for call in tool_calls:
                    function = call.get("function") if isinstance(call, dict) else None
                    if isinstance(function, dict) and isinstance(function.get("name"), str):
                        calls += 1
                        ident = call.get("id") if isinstance(call.get("id"), str) \
                            else f"call-{calls}"
                        pending.append((ident, function["name"]))
                        events.append(Call(function["name"], function.get("arguments"), ident))
            elif isinstance(message.get("action"), str) and message["action"].strip():
                calls += 1
                ident = f"call-{calls}"
                pending.append((ident, TOOL))
                events.append(Call(TOOL, command_args(message["action"].strip()), ident))
        elif pending:
            text = block_text(message.get("content"))
            error = text if text.strip().startswith(TIMED_OUT) else None
            ids = message.get("tool_call_ids")
            answered = [p for p in pending if isinstance(ids, list) and p[0] in ids] or pending
            for ident, tool in answered:
                events.append(Result(name=tool, id=ident, error=error, payload=text))
            pending = [p for p in pending if p not in answered]
        elif not started:
            started = True
            events.append(TurnStart())
        if not events:
            yield Item(name, number)
        for event in events:
            yield Item(name, number, event)
    end = len(history)
    usage = run_total(document)
    if usage is not None:
        yield Item(name, end, usage)
    if started:
        yield Item(name, end, TurnEnd())

