"""OpenAI chat-completions message lists: ``[{"role", "content", "tool_calls"?}, ...]`` or an
object with ``messages``, read whole (one JSON document).

``tool_calls[].function`` gives calls (``arguments`` is JSON text, kept as given); a
``role: "tool"`` message is the result of ``tool_call_id`` (the legacy ``function_call`` /
``role: "function"`` pair is read too). Chat messages carry no error flag, so a result is a
failure only where a harness says so (``failed``: tau-bench's ``Error:`` prefix). A user message
starts a turn; ``system``/``developer`` messages are skipped.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from ...errors import InvalidEvent
from ..events import Call, Event, Result, Text
from ._base import Item, Turns, block_text, messages_of, positioned, read_document

NAME = "openai-chat"
_ROLES = frozenset({"system", "developer", "user", "assistant", "tool", "function"})


def sniff(value: Any) -> bool:
    messages = messages_of(value)
    return messages is not None and all(m["role"] in _ROLES for m in messages[:8])


def message_events(message: dict[str, Any], turns: Turns, names: dict[str, str],
                   failed: Callable[[str], bool] | None = None,
                   stop: Callable[[str], bool] | None = None) -> Iterator[Event]:
    """One chat message as events. ``failed(text)``: is a tool's answer an error?
    ``stop(text)``: does this user message end the conversation rather than start a turn?"""
    role = message.get("role")
    if role == "user":
        if stop is not None and stop(block_text(message.get("content"))):
            yield from turns.end()
        else:
            yield from turns.start()
    elif role == "assistant":
        text = block_text(message.get("content"))
        if text:
            yield Text(text)
        calls = message.get("tool_calls")
        for call in calls if isinstance(calls, list) else ():
            function = call.get("function") if isinstance(call, dict) else None
            if not isinstance(function, dict) or not isinstance(function.get("name"), str):
                raise InvalidEvent("a tool call needs a function with a string 'name'")
            ident = call.get("id") if isinstance(call.get("id"), str) else None
            if ident is not None:
                names[ident] = function["name"]
            yield Call(function["name"], function.get("arguments"), ident)
        legacy = message.get("function_call")
        if isinstance(legacy, dict) and isinstance(legacy.get("name"), str):
            yield Call(legacy["name"], legacy.get("arguments"))
    elif role in ("tool", "function"):
        text = block_text(message.get("content"))
        ident = message.get("tool_call_id")
        ident = ident if isinstance(ident, str) else None
        name = message.get("name") if isinstance(message.get("name"), str) else None
        error = text or True if failed is not None and failed(text) else None
        yield Result(name=names.get(ident, name) if ident else name, id=ident, error=error,
                     payload=text)


def conversation(messages: list[Any], name: str, path: Path,
                 failed: Callable[[str], bool] | None = None,
                 stop: Callable[[str], bool] | None = None) -> Iterator[Item]:
    """The items of one message list (positions are 1-based message numbers)."""
    turns, names = Turns(), dict[str, str]()  # call id -> tool name
    yield from positioned(name, path, messages,
                          lambda m: message_events(m, turns, names, failed, stop))
    for event in turns.end():
        yield Item(name, len(messages), event)


def read(path: Path, name: str, document: Any = None) -> Iterator[Item]:
    messages = messages_of(read_document(path, document))
    if messages is None:
        raise InvalidEvent("not an OpenAI chat message list (expected a JSON array of "
                           "{role, content} messages, or an object with 'messages')",
                           source=str(path))
    return conversation(messages, name, path)
