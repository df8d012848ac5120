"""Anthropic Messages lists: ``[{"role", "content"}, ...]`` or a request/conversation object
``{"messages": [...], "system"?, "model"?}``, read whole (one JSON document).

Content blocks: ``text`` (the agent's words, assistant side), ``tool_use`` (a call; ``input``
is already an object), ``tool_result`` (a result; ``is_error`` optional, default false; its
content is a string or blocks). A user message that is not tool results starts a turn. A
message that carries ``usage`` (a saved response) gives one usage event. The block helpers here
are shared with the Claude Code reader, whose lines hold Messages objects.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

from ...errors import InvalidEvent
from ..events import Event
from ._base import Item, Turns, assistant_events, messages_of, positioned, read_document
from ._base import anthropic_call as tool_call
from ._base import anthropic_result as tool_result
from ._base import anthropic_usage as usage_of

__all__ = ["NAME", "sniff", "read", "message_events", "tool_call", "tool_result", "usage_of"]

NAME = "anthropic"
_BLOCKS = frozenset({"tool_use", "tool_result", "thinking", "redacted_thinking",
                     "server_tool_use"})


def sniff(value: Any) -> bool:
    """Messages whose content blocks are Anthropic's (``tool_use``/``tool_result``/
    ``thinking``); plain-text lists are read as OpenAI chat, which they equal."""
    messages = messages_of(value)
    if messages is None:
        return False
    return any(isinstance(b, dict) and b.get("type") in _BLOCKS
               for m in messages if isinstance(m, dict) and isinstance(m.get("content"), list)
               for b in m["content"])


def message_events(message: dict[str, Any], turns: Turns,
                   names: dict[str, str]) -> Iterator[Event]:
    """One Messages-API message as events."""
    role = message.get("role")
    content = message.get("content")
    blocks = content if isinstance(content, list) else None
    if role == "user":
        if blocks is not None and any(isinstance(b, dict) and b.get("type") == "tool_result"
                                      for b in blocks):
            for block in blocks:
                if isinstance(block, dict) and block.get("type") == "tool_result":
                    yield tool_result(block, names)
            return
        yield from turns.start()
        return
    if role != "assistant":
        return
    yield from assistant_events(content, names)
    usage = usage_of(message)
    if usage is not None:
        yield usage


def read(path: Path, name: str, document: Any = None) -> Iterator[Item]:
    messages = messages_of(read_document(path, document))
    if messages is None:
        raise InvalidEvent("not an Anthropic Messages list (expected a JSON array of "
                           "{role, content} messages, or an object with 'messages')",
                           source=str(path))
    turns, names = Turns(), dict[str, str]()  # call id -> tool name
    yield from positioned(name, path, messages, lambda m: message_events(m, turns, names))
    for event in turns.end():
        yield Item(name, len(messages), event)
