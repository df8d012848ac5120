"""OpenAI's Chat Completions API on the wire: ``POST /v1/chat/completions`` bodies and its
``data:`` chunk stream. Messages read as the chat transcript reader reads them
(``adapters/openai_chat.message_events``): an assistant message's ``tool_calls`` are calls, a
``role: "tool"`` message the result of its ``tool_call_id``, content the agent's words. The
request's last non-system message decides: trailing ``tool`` messages answer the calls of the
assistant message before them; a ``user`` message is the user's own words (a turn starts).
"""

from __future__ import annotations

import os
import time
from typing import Any

from ...base.validate import reader_count
from ..adapters._base import Turns
from ..adapters.openai_chat import message_events
from ..events import Call, Event, Text, Usage
from . import Decide, Observe, Request, dumps, opening_key
from .sse import Frame, frame

__all__ = ["read_request", "inject", "read_response", "cut_response", "answer", "error",
           "Stream", "usage_of"]

_SYSTEM = ("system", "developer")


def read_request(body: dict[str, Any]) -> Request:
    messages = body.get("messages")
    if not isinstance(messages, list):
        raise ValueError("a Chat Completions request needs a 'messages' list")
    tools = tuple(t["function"]["name"] for t in body.get("tools") or () if isinstance(t, dict)
                  and isinstance(t.get("function"), dict) and
                  isinstance(t["function"].get("name"), str))
    turns = [m for m in messages if isinstance(m, dict) and m.get("role") not in _SYSTEM]
    first = next((m for m in turns if m.get("role") == "user"), None)
    request = Request(model=body.get("model") if isinstance(body.get("model"), str) else None,
                      stream=body.get("stream") is True, tools=tools,
                      opening=opening_key(first.get("content") if first else None))
    if not turns:
        return request
    if turns[-1].get("role") == "user":
        request.prompt = True
        return request
    at = len(turns)
    while at > 0 and turns[at - 1].get("role") in ("tool", "function"):
        at -= 1
    if at == len(turns):
        return request
    if at > 0 and turns[at - 1].get("role") == "assistant":
        for call in turns[at - 1].get("tool_calls") or ():
            if isinstance(call, dict) and isinstance(call.get("id"), str) and \
                    isinstance(call.get("function"), dict):
                request.names[call["id"]] = str(call["function"].get("name"))
    turns_state = Turns()
    for message in turns[at:]:
        request.results.extend(message_events(message, turns_state, request.names))  # type: ignore[arg-type]
    return request


def inject(body: dict[str, Any], text: str) -> None:
    """``text`` at the end of the last message (a tool's answer or the user's words), where
    the model reads it next."""
    message = [m for m in body["messages"] if isinstance(m, dict) and
               m.get("role") not in _SYSTEM][-1]
    content = message.get("content")
    if isinstance(content, list):
        content.append({"type": "text", "text": text})
    else:
        message["content"] = f"{content}\n\n{text}" if content else text


def usage_of(usage: Any, model: str | None) -> Usage | None:
    """A chat ``usage`` object (cached tokens are part of ``prompt_tokens``); a ``cost`` the
    provider reports (OpenRouter, LiteLLM) is taken as the cost."""
    if not isinstance(usage, dict):
        return None
    details = usage.get("prompt_tokens_details")
    cached = details.get("cached_tokens") if isinstance(details, dict) else None
    cost = usage.get("cost")
    return Usage(model=model, input_tokens=reader_count(usage.get("prompt_tokens"), "usage"),
                 output_tokens=reader_count(usage.get("completion_tokens"), "usage"),
                 cost_usd=float(cost) if isinstance(cost, int | float) and
                 not isinstance(cost, bool) and cost >= 0 else None,
                 cache_read_tokens=reader_count(cached, "usage"), provider="openai")


def _model(body: dict[str, Any]) -> str | None:
    return body.get("model") if isinstance(body.get("model"), str) else None


def read_response(body: dict[str, Any], names: dict[str, str]) -> list[Event]:
    events: list[Event] = []
    for choice in (body.get("choices") or ())[:1]:
        message = choice.get("message") if isinstance(choice, dict) else None
        if isinstance(message, dict):
            events.extend(message_events({**message, "role": "assistant"}, Turns(), names))
    usage = usage_of(body.get("usage"), _model(body))
    if usage is not None:
        events.append(usage)
    return events


def cut_response(body: dict[str, Any], text: str) -> dict[str, Any]:
    choices = []
    for i, choice in enumerate(body.get("choices") or ()):
        if i == 0 and isinstance(choice, dict):
            message = dict(choice.get("message") or {})
            message.pop("tool_calls", None)
            message.pop("function_call", None)
            said = message.get("content")
            message["content"] = f"{said}\n\n{text}" if isinstance(said, str) and said else text
            choice = {**choice, "message": message, "finish_reason": "stop"}
        choices.append(choice)
    return {**body, "choices": choices}


def _ident() -> str:
    return f"chatcmpl-tripwire-{os.urandom(8).hex()}"


def answer(request: Request, text: str) -> tuple[str, bytes]:
    base = {"id": _ident(), "created": int(time.time()), "model": request.model or "tripwire"}
    if not request.stream:
        return "application/json", dumps({
            **base, "object": "chat.completion",
            "choices": [{"index": 0, "finish_reason": "stop",
                         "message": {"role": "assistant", "content": text}}],
            "usage": {"prompt_tokens": 0, "completion_tokens": 0, "total_tokens": 0}})
    return "text/event-stream", _text_chunk(base, text) + b"data: [DONE]\n\n"


def _text_chunk(base: dict[str, Any], text: str) -> bytes:
    return frame({**base, "object": "chat.completion.chunk", "choices": [
        {"index": 0, "delta": {"role": "assistant", "content": text}, "finish_reason": "stop"}]})


def error(kind: str, message: str) -> bytes:
    return dumps({"error": {"message": message, "type": kind, "code": kind, "param": None}})


class Stream:
    """One streamed completion: content deltas pass at once; chunks carrying ``tool_calls``
    deltas are held until the choice finishes (a call is complete only then), then every call
    is decided in order: all released as they came, or, at the first denied one, all replaced
    by one content chunk with the guidance and ``finish_reason: "stop"``. The usage chunk
    (``stream_options.include_usage``) is observed at its arrival or at ``finish()``."""

    def __init__(self, decide: Decide, observe: Observe, names: dict[str, str]):
        self.decide, self.observe, self.names = decide, observe, names
        self.held: list[bytes] = []
        self.calls: dict[int, dict[str, Any]] = {}
        self.text: list[str] = []
        self.base: dict[str, Any] = {}
        self.usage: Usage | None = None
        self.charged = False
        self.finished = False

    def feed(self, f: Frame) -> bytes:
        data = f.json()
        if not isinstance(data, dict):
            if f.data == b"[DONE]":
                self.finish()
            return f.raw
        if not self.base:
            self.base = {k: data[k] for k in ("id", "created", "model") if k in data}
        usage = usage_of(data.get("usage"), _model(data))
        if usage is not None:
            self.usage = usage
        choices = data.get("choices") or ()
        choice = choices[0] if choices and isinstance(choices[0], dict) else None
        if choice is None:
            return f.raw if not self.held else self._hold(f.raw)
        delta = choice.get("delta") or {}
        if isinstance(delta.get("content"), str):
            self.text.append(delta["content"])
        tool_calls = delta.get("tool_calls")
        if isinstance(tool_calls, list) and tool_calls:
            for part in tool_calls:
                if not isinstance(part, dict):
                    continue
                call = self.calls.setdefault(part.get("index", 0), {"args": []})
                if isinstance(part.get("id"), str):
                    call["id"] = part["id"]
                function = part.get("function") or {}
                if isinstance(function.get("name"), str):
                    call["name"] = function["name"]
                if isinstance(function.get("arguments"), str):
                    call["args"].append(function["arguments"])
            if not choice.get("finish_reason"):
                return self._hold(f.raw)
            self.held.append(f.raw)
        elif self.held and not choice.get("finish_reason"):
            return self._hold(f.raw)
        if not choice.get("finish_reason"):
            return f.raw
        return self._finish_choice(f.raw if not tool_calls else b"", data)

    def _hold(self, raw: bytes) -> bytes:
        self.held.append(raw)
        return b""

    def _finish_choice(self, raw: bytes, data: dict[str, Any]) -> bytes:
        if self.finished:
            return raw
        self.finished = True
        text = "".join(self.text)
        if text:
            self.observe(Text(text))
        for index in sorted(self.calls):
            call = self.calls[index]
            ident = call.get("id")
            name = call.get("name") or ""
            if ident is not None:
                self.names[ident] = name
            guidance = self.decide(Call(name, "".join(call["args"]), ident))
            if guidance is not None:
                self.held = []
                return _text_chunk({**self.base, **{k: data[k] for k in ("id", "model")
                                                    if k in data}}, guidance)
        out = b"".join(self.held) + raw
        self.held = []
        return out

    def finish(self) -> None:
        if self.charged or self.usage is None:
            return
        self.charged = True
        self.observe(self.usage)
