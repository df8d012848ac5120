"""The model APIs' wire formats as readers: what a request body, a response body and a
response's server-sent-event stream of each API say, as interchange events, and the few
rewrites a gateway makes in them (feedback added to a request, a denied tool call replaced by
text). One module per API family, sharing the message shapes with the transcript readers of the
same API (``adapters/anthropic.py``, ``openai_chat.py``, ``openai_responses.py``):

    anthropic          POST /v1/messages (streaming and not)
    openai_chat        POST /v1/chat/completions (streaming and not)
    openai_responses   POST /v1/responses (streaming and not)
    gemini             POST /v1beta/models/{model}:generateContent | :streamGenerateContent

Each module has the same names: ``read_request(body) -> Request``, ``inject(body, text)``,
``read_response(body, names) -> list[Event]``, ``cut_response(body, text) -> body``,
``answer(request, text) -> (content type, bytes)`` (a whole response the gateway gives
itself), ``error(status, message) -> bytes`` and ``Stream`` (a stream's frames through a
``decide`` callback: text passes at once, a tool call is held until it is complete and then
released or replaced). Nothing here knows a session: the gateway decides, these only read
and write the formats.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable

import orjson

from ..events import Call, Event, Result

__all__ = ["Request", "Decide", "Observe", "opening_key", "dumps"]

#: A complete tool call -> None (let it through) or the text that replaces it and ends the turn.
Decide = Callable[[Call], "str | None"]
#: An event the stream read that is no call to decide (text, usage).
Observe = Callable[[Event], object]


@dataclass(slots=True)
class Request:
    """What one request body says. ``prompt``: its last message is the user's own words (a
    turn starts); ``results``: the tool results it ends with (the answers to the last
    response's calls); ``opening``: the conversation's first user message, as bytes (stable
    over a conversation's requests: its fingerprint); ``names``: call id -> tool name of the
    calls the results answer."""

    model: str | None
    stream: bool
    tools: tuple[str, ...]
    opening: bytes
    prompt: bool = False
    results: list[Result] = field(default_factory=list)
    names: dict[str, str] = field(default_factory=dict)
    compaction: bool = False


def opening_key(content: Any) -> bytes:
    """A first message's words, as the bytes a conversation's fingerprint is made of: its text
    only (harnesses move cache markers and such between a conversation's requests)."""
    from ..adapters._base import block_text

    if content is None:
        return b""
    if isinstance(content, list):  # Gemini's parts are {"text"} too
        content = [b for b in content if not (isinstance(b, dict) and b.get("thought"))]
    return block_text(content).encode("utf-8", "surrogatepass")


def dumps(value: Any) -> bytes:
    return orjson.dumps(value)
