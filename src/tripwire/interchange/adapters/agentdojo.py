"""AgentDojo run logs (``runs/<pipeline>/<suite>/<user task>/<attack>/<injection task>.json``,
written whole by its ``TraceLogger``): ``{"suite_name", "pipeline_name", "user_task_id",
"injection_task_id", "attack_type", "injections", "messages", "error", "utility",
"security", "duration", ...}``, or a bare list of AgentDojo chat messages. Read whole.

AgentDojo's messages look like OpenAI chat messages but are its own (``agentdojo/types.py``,
``agentdojo/functions_runtime.py``):

- a tool call is a ``FunctionCall``: ``{"function": "<name>", "args": {...}, "id"?}`` (the
  name is ``function`` itself, a string, and the arguments an object);
- a ``tool`` message carries the call it answers (``tool_call``), its ``tool_call_id`` and
  ``error`` (null, or the error text: a failure); "Invalid tool X provided." is AgentDojo's
  answer to a call of a tool it does not have (``unknown_tool``);
- ``content`` is a string, null, or blocks ``{"type": "text" | "thinking" |
  "redacted_thinking", "content": ...}`` (the text is under ``content``, not ``text``); thinking
  is private, never the agent's words.

A user message starts a turn; system messages are skipped. The log records no usage. The
session is the file (the log has no id of its own). Read as OpenAI chat, every assistant
message of such a log is invalid, and the tool answers would be observed without their calls.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

from ...errors import InvalidEvent
from ..events import Call, Event, Result, Text
from ._base import Item, Turns, messages_of, positioned, read_document

NAME = "agentdojo"
#: the run's fields TraceLogger writes beside ``messages``
_RUN_KEYS = ("suite_name", "user_task_id", "pipeline_name", "injection_task_id")
#: AgentDojo's answer to a call of a tool the runtime does not have (``ToolsExecutor``)
_UNKNOWN_TOOL = "Invalid tool "
_EMPTY_NAME = "Empty function name provided."


def sniff(value: Any) -> bool:
    """A run log (``messages`` and the run's fields), or a message list whose tool calls or
    tool messages are AgentDojo's (``function`` a string; ``tool_call`` on tool messages)."""
    messages = messages_of(value)
    if messages is None:
        return False
    if isinstance(value, dict) and any(key in value for key in _RUN_KEYS):
        return True
    for message in messages:
        if not isinstance(message, dict):
            continue
        if message.get("role") == "tool" and isinstance(message.get("tool_call"), dict):
            return True
        calls = message.get("tool_calls")
        if isinstance(calls, list) and any(
                isinstance(c, dict) and isinstance(c.get("function"), str) for c in calls):
            return True
    return False


def _text(content: Any) -> str:
    """The text of a message's content: the string, or its ``text`` blocks' ``content``."""
    if isinstance(content, str):
        return content
    parts = []
    for block in content if isinstance(content, list) else ():
        if isinstance(block, dict) and block.get("type") == "text":
            text = block.get("content")
            if isinstance(text, str):
                parts.append(text)
    return "\n".join(parts)


class _State:
    __slots__ = ("calls", "pending", "turns")

    def __init__(self) -> None:
        self.turns = Turns()
        self.calls = 0
        self.pending: list[str] = []  # ids of calls awaiting their tool message, in order


def _events(message: dict[str, Any], state: _State) -> Iterator[Event]:
    role = message.get("role")
    if role == "user":
        yield from state.turns.start()
    elif role == "assistant":
        text = _text(message.get("content"))
        if text:
            yield Text(text)
        calls = message.get("tool_calls")
        if calls is not None and not isinstance(calls, list):
            raise InvalidEvent("an assistant message's 'tool_calls' must be a list or null")
        for call in calls or ():
            if not isinstance(call, dict) or not isinstance(call.get("function"), str):
                raise InvalidEvent("a tool call needs a string 'function' (the tool's name)")
            state.calls += 1
            given = call.get("id")
            ident = given if isinstance(given, str) and given else f"call-{state.calls}"
            state.pending.append(ident)
            yield Call(call["function"], call.get("args"), ident)
    elif role == "tool":
        answered = message.get("tool_call")
        answered = answered if isinstance(answered, dict) else {}
        name = answered.get("function") if isinstance(answered.get("function"), str) else None
        given = message.get("tool_call_id") or answered.get("id")
        # no id: the first call still unanswered
        answers = given if isinstance(given, str) and given else (
            state.pending[0] if state.pending else None)
        if answers in state.pending:
            state.pending.remove(answers)
        error = message.get("error")
        if error is not None and not isinstance(error, str):
            raise InvalidEvent("a tool message's 'error' must be a string or null")
        unknown = error is not None and error.startswith((_UNKNOWN_TOOL, _EMPTY_NAME))
        yield Result(name=name, id=answers, error=error or None,
                     payload=_text(message.get("content")), unknown_tool=unknown)
    # system messages: nothing


def read(path: Path, name: str, document: Any = None) -> Iterator[Item]:
    document = read_document(path, document)
    messages = messages_of(document)
    if messages is None or not sniff(document):
        raise InvalidEvent("not an AgentDojo run log (expected an object with 'messages' and "
                           "'suite_name', or a list of AgentDojo chat messages)",
                           source=str(path))
    state = _State()
    yield from positioned(name, path, messages, lambda m: _events(m, state))
    for event in state.turns.end():
        yield Item(name, len(messages), event)
