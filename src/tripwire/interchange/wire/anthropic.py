"""Anthropic's Messages API on the wire: ``POST /v1/messages`` request and response bodies and
its event stream. The message shapes are the transcript reader's (``adapters/_base.py``:
``tool_use`` blocks are calls, ``tool_result`` blocks results with ``is_error``, ``text``
blocks the agent's words, ``usage`` with the cache counts), so a request reads exactly as the
same messages in a saved transcript.

A request's messages may carry ``role: "system"`` messages between the others (Claude Code
puts its environment there): the last *user or assistant* message decides what the request is.
A user message of ``tool_result`` blocks answers the calls of the assistant message before it;
any other user message is the user's own words, and starts a turn.
"""

from __future__ import annotations

import os
from typing import Any

from ..adapters._base import (
    anthropic_result,
    anthropic_usage,
    assistant_events,
    claude_unknown_tool,
)
from ..events import Call, Event, Text, Usage
from . import Decide, Observe, Request, dumps, opening_key
from .sse import Frame, frame

__all__ = ["read_request", "inject", "read_response", "cut_response", "answer", "error",
           "Stream"]

_CALL_BLOCKS = frozenset({"tool_use"})


def _turn_messages(messages: list[Any]) -> list[dict[str, Any]]:
    return [m for m in messages if isinstance(m, dict) and m.get("role") in ("user", "assistant")]


def read_request(body: dict[str, Any]) -> Request:
    messages = body.get("messages")
    if not isinstance(messages, list):
        raise ValueError("a Messages request needs a 'messages' list")
    tools = tuple(t["name"] for t in body.get("tools") or () if isinstance(t, dict) and
                  isinstance(t.get("name"), str))
    turns = _turn_messages(messages)
    first = next((m for m in turns if m.get("role") == "user"), None)
    request = Request(model=body.get("model") if isinstance(body.get("model"), str) else None,
                      stream=body.get("stream") is True, tools=tools,
                      opening=opening_key(first.get("content") if first else None))
    if not turns or turns[-1].get("role") != "user":
        return request
    content = turns[-1].get("content")
    blocks = content if isinstance(content, list) else []
    answers = [b for b in blocks if isinstance(b, dict) and b.get("type") == "tool_result"]
    if not answers:
        request.prompt = True
        return request
    if len(turns) > 1 and isinstance(turns[-2].get("content"), list):
        for block in turns[-2]["content"]:
            if isinstance(block, dict) and block.get("type") == "tool_use" and \
                    isinstance(block.get("id"), str) and isinstance(block.get("name"), str):
                request.names[block["id"]] = block["name"]
    request.results = [claude_unknown_tool(anthropic_result(b, request.names)) for b in answers]
    return request


def inject(body: dict[str, Any], text: str) -> None:
    """``text`` at the end of the last user message (after its tool results, where the model
    reads it with them)."""
    turns = _turn_messages(body["messages"])
    message = turns[-1]
    content = message.get("content")
    block = {"type": "text", "text": text}
    if isinstance(content, list):
        content.append(block)
    else:
        message["content"] = [{"type": "text", "text": content or ""}, block]


def read_response(body: dict[str, Any], names: dict[str, str]) -> list[Event]:
    """A response's text and calls in order, then its usage."""
    events: list[Event] = list(assistant_events(body.get("content"), names))
    usage = anthropic_usage(body)
    if usage is not None:
        events.append(usage)
    return events


def cut_response(body: dict[str, Any], text: str) -> dict[str, Any]:
    """The response with its tool calls replaced by ``text``: the turn ends there."""
    content = [b for b in body.get("content") or () if not (
        isinstance(b, dict) and b.get("type") in _CALL_BLOCKS)]
    content.append({"type": "text", "text": text})
    return {**body, "content": content, "stop_reason": "end_turn", "stop_sequence": None}


def _message(model: str | None, content: list[Any]) -> dict[str, Any]:
    return {"id": f"msg_tripwire_{os.urandom(8).hex()}", "type": "message", "role": "assistant",
            "model": model or "tripwire", "content": content, "stop_reason": "end_turn",
            "stop_sequence": None, "usage": {"input_tokens": 0, "output_tokens": 0}}


def answer(request: Request, text: str) -> tuple[str, bytes]:
    """A whole response of the gateway's own (no model was called): ``text``, the turn ended."""
    message = _message(request.model, [{"type": "text", "text": text}])
    if not request.stream:
        return "application/json", dumps(message)
    start = {**message, "content": [], "stop_reason": None}
    return "text/event-stream", b"".join([
        frame({"type": "message_start", "message": start}, "message_start"),
        *_text_block(0, text),
        frame({"type": "message_delta", "delta": {"stop_reason": "end_turn",
                                                  "stop_sequence": None},
               "usage": {"output_tokens": 0}}, "message_delta"),
        frame({"type": "message_stop"}, "message_stop")])


def _text_block(index: int, text: str) -> list[bytes]:
    return [frame({"type": "content_block_start", "index": index,
                   "content_block": {"type": "text", "text": ""}}, "content_block_start"),
            frame({"type": "content_block_delta", "index": index,
                   "delta": {"type": "text_delta", "text": text}}, "content_block_delta"),
            frame({"type": "content_block_stop", "index": index}, "content_block_stop")]


def error(kind: str, message: str) -> bytes:
    """An error body as the API writes one (``kind``: ``permission_error``, ``api_error``...)."""
    return dumps({"type": "error", "error": {"type": kind, "message": message}})


class Stream:
    """One streamed response: ``feed(frame)`` returns the bytes to send now. Text blocks pass
    at once (observed as agent text when complete); a ``tool_use`` block is held from its start
    to its stop, then decided: released as it came, or replaced by a text block at its index,
    after which later tool blocks are dropped and the message's ``stop_reason`` becomes
    ``end_turn`` (unless a call released before it stays). ``finish()`` observes the usage
    seen, if the stream did not end: a client that left mid-stream is charged for it."""

    def __init__(self, decide: Decide, observe: Observe, names: dict[str, str]):
        self.decide, self.observe, self.names = decide, observe, names
        self.usage: dict[str, Any] = {}
        self.model: str | None = None
        self.held: list[bytes] | None = None
        self.held_block: dict[str, Any] = {}
        self.held_json: list[str] = []
        self.texts: dict[Any, list[str]] = {}
        self.cut = False
        self.released = 0
        self.charged = False

    def feed(self, f: Frame) -> bytes:
        data = f.json()
        if not isinstance(data, dict):
            return f.raw if self.held is None else self._hold(f.raw)
        kind = data.get("type")
        index = data.get("index")
        if kind == "content_block_start":
            block = data.get("content_block") or {}
            if self.cut:
                self.texts.pop(index, None)
                return b""
            if block.get("type") in _CALL_BLOCKS:
                self.held, self.held_block, self.held_json = [f.raw], block, []
                return b""
            if block.get("type") == "text":
                self.texts[index] = [block.get("text") or ""]
            return f.raw
        if kind == "content_block_delta":
            if self.held is not None:
                delta = data.get("delta") or {}
                if isinstance(delta.get("partial_json"), str):
                    self.held_json.append(delta["partial_json"])
                return self._hold(f.raw)
            if self.cut:
                return b""
            delta = data.get("delta") or {}
            if index in self.texts and isinstance(delta.get("text"), str):
                self.texts[index].append(delta["text"])
            return f.raw
        if kind == "content_block_stop":
            if self.held is not None:
                return self._decide(f.raw, index)
            if self.cut:
                return b""
            text = "".join(self.texts.pop(index, ()))
            if text:
                self.observe(Text(text))
            return f.raw
        if kind == "message_start":
            message = data.get("message") or {}
            self.model = message.get("model") if isinstance(message.get("model"), str) else None
            if isinstance(message.get("usage"), dict):
                self.usage.update(message["usage"])
            return f.raw
        if kind == "message_delta":
            if isinstance(data.get("usage"), dict):
                self.usage.update({k: v for k, v in data["usage"].items() if v is not None})
            if self.cut and not self.released:
                data["delta"] = {**(data.get("delta") or {}), "stop_reason": "end_turn",
                                 "stop_sequence": None}
                return frame(data, f.event or "message_delta")
            return f.raw
        if kind == "message_stop":
            self.finish()
        return f.raw if self.held is None else self._hold(f.raw)

    def _hold(self, raw: bytes) -> bytes:
        assert self.held is not None
        self.held.append(raw)
        return b""

    def _decide(self, raw: bytes, index: Any) -> bytes:
        held, block = self.held or [], self.held_block
        self.held = None
        text = "".join(self.held_json)
        try:
            args: Any = dumps_args(text) if text.strip() else block.get("input") or {}
        except ValueError:
            args = text  # a model's broken JSON is a call's args all the same (raw bytes)
        ident = block.get("id") if isinstance(block.get("id"), str) else None
        name = str(block.get("name") or "")
        if ident is not None:
            self.names[ident] = name
        guidance = self.decide(Call(name, args, ident))
        if guidance is None:
            self.released += 1
            return b"".join(held) + raw
        self.cut = True
        return b"".join(_text_block(index, guidance))

    def finish(self) -> None:
        if self.charged or not self.usage:
            return
        self.charged = True
        usage: Usage | None = anthropic_usage({"usage": self.usage, "model": self.model})
        if usage is not None:
            self.observe(usage)


def dumps_args(text: str) -> Any:
    """A streamed ``input_json_delta`` sequence's JSON, decoded."""
    import orjson

    try:
        return orjson.loads(text)
    except orjson.JSONDecodeError as exc:
        raise ValueError(str(exc)) from None
