"""OpenAI's Responses API on the wire: ``POST /v1/responses`` bodies and its typed event
stream. Items read as the Responses transcript reader reads them
(``adapters/openai_responses.item_events``): ``function_call`` / ``custom_tool_call`` /
``local_shell_call`` items are calls, their ``*_output`` items the results by ``call_id``
(a shell output's non-zero exit code a failure), assistant ``message`` items the agent's words,
``reasoning`` never. The request's ``input`` decides: a string, or a last ``message`` item of
the user, is the user's own words (a turn starts); trailing output items answer the calls.
"""

from __future__ import annotations

import os
import time
from typing import Any

from ..adapters._base import Turns
from ..adapters.openai_responses import CALLS, OUTPUTS, item_events, usage_of
from ..events import Call, Event, Result, Text, Usage
from . import Decide, Observe, Request, dumps, opening_key
from .sse import Frame, frame

__all__ = ["read_request", "inject", "read_response", "cut_response", "answer", "error",
           "Stream"]

_SKIPPED = frozenset({"reasoning"})


def read_request(body: dict[str, Any]) -> Request:
    items = body.get("input")
    tools = tuple(str(t.get("name") or t.get("type")) for t in body.get("tools") or ()
                  if isinstance(t, dict))
    model = body.get("model") if isinstance(body.get("model"), str) else None
    stream = body.get("stream") is True
    if isinstance(items, str):
        return Request(model, stream, tools, opening_key(items), prompt=True)
    if not isinstance(items, list):
        raise ValueError("a Responses request needs an 'input' string or item list")
    items = [i for i in items if isinstance(i, dict) and i.get("type", "message") not in _SKIPPED]
    first = next((i for i in items if i.get("type", "message") == "message" and
                  i.get("role") == "user"), None)
    request = Request(model, stream, tools, opening_key(first.get("content") if first else None))
    if not items:
        return request
    last = items[-1]
    if last.get("type", "message") == "message":
        request.prompt = last.get("role") == "user"
        return request
    at = len(items)
    while at > 0 and items[at - 1].get("type") in OUTPUTS:
        at -= 1
    turns = Turns()
    for item in items[:at]:
        if item.get("type") in CALLS and isinstance(item.get("call_id"), str):
            request.names[item["call_id"]] = str(item.get("name") or "local_shell")
    for item in items[at:]:
        request.results.extend(e for e in item_events(item, turns, request.names)
                               if isinstance(e, Result))
    return request


def inject(body: dict[str, Any], text: str) -> None:
    """``text`` where the model reads it next: after a string input, appended to the last
    output's text, else as a user message item at the end."""
    items = body["input"]
    if isinstance(items, str):
        body["input"] = f"{items}\n\n{text}"
        return
    last = items[-1] if items else None
    if isinstance(last, dict) and last.get("type") in OUTPUTS and isinstance(last.get("output"),
                                                                            str):
        last["output"] = f"{last['output']}\n\n{text}"
        return
    items.append({"type": "message", "role": "user",
                  "content": [{"type": "input_text", "text": text}]})


def _model(body: dict[str, Any]) -> str | None:
    return body.get("model") if isinstance(body.get("model"), str) else None


def read_response(body: dict[str, Any], names: dict[str, str]) -> list[Event]:
    turns = Turns()
    events: list[Event] = [e for item in body.get("output") or () if isinstance(item, dict)
                           for e in item_events(item, turns, names)]
    usage = usage_of(body.get("usage"), _model(body))
    if usage is not None:
        events.append(usage)
    return events


def _message_item(text: str) -> dict[str, Any]:
    return {"type": "message", "id": f"msg_tripwire_{os.urandom(8).hex()}", "status": "completed",
            "role": "assistant",
            "content": [{"type": "output_text", "text": text, "annotations": []}]}


def cut_response(body: dict[str, Any], text: str) -> dict[str, Any]:
    output = [i for i in body.get("output") or () if not (isinstance(i, dict) and
                                                          i.get("type") in CALLS)]
    return {**body, "output": [*output, _message_item(text)]}


def answer(request: Request, text: str) -> tuple[str, bytes]:
    item = _message_item(text)
    response = {"id": f"resp_tripwire_{os.urandom(8).hex()}", "object": "response",
                "created_at": int(time.time()), "status": "completed",
                "model": request.model or "tripwire", "output": [item],
                "usage": {"input_tokens": 0, "output_tokens": 0, "total_tokens": 0,
                          "input_tokens_details": {"cached_tokens": 0},
                          "output_tokens_details": {"reasoning_tokens": 0}}}
    if not request.stream:
        return "application/json", dumps(response)
    started = {**response, "status": "in_progress", "output": []}
    return "text/event-stream", b"".join([
        frame({"type": "response.created", "response": started}, "response.created"),
        *_message_events(0, item),
        frame({"type": "response.completed", "response": response}, "response.completed")])


def _message_events(index: int, item: dict[str, Any]) -> list[bytes]:
    text = item["content"][0]["text"]
    part = {"type": "output_text", "text": "", "annotations": []}
    common = {"item_id": item["id"], "output_index": index, "content_index": 0}
    return [
        frame({"type": "response.output_item.added", "output_index": index,
               "item": {**item, "status": "in_progress", "content": []}},
              "response.output_item.added"),
        frame({"type": "response.content_part.added", **common, "part": part},
              "response.content_part.added"),
        frame({"type": "response.output_text.delta", **common, "delta": text},
              "response.output_text.delta"),
        frame({"type": "response.output_text.done", **common, "text": text},
              "response.output_text.done"),
        frame({"type": "response.content_part.done", **common,
               "part": {**part, "text": text}}, "response.content_part.done"),
        frame({"type": "response.output_item.done", "output_index": index, "item": item},
              "response.output_item.done")]


def error(kind: str, message: str) -> bytes:
    return dumps({"error": {"message": message, "type": kind, "code": kind, "param": None}})


class Stream:
    """One streamed response: text deltas pass at once; a call item is held from its
    ``output_item.added`` to its ``output_item.done`` (with its argument deltas), then decided:
    released as it came, or replaced by a message item carrying the guidance at its output
    index, after which later call items are dropped and ``response.completed``'s output says
    the same. Usage is observed from ``response.completed`` (or at ``finish()``: none seen)."""

    def __init__(self, decide: Decide, observe: Observe, names: dict[str, str]):
        self.decide, self.observe, self.names = decide, observe, names
        self.held: dict[Any, list[bytes]] = {}
        self.replaced: dict[Any, dict[str, Any]] = {}  # call item id/call_id -> its message
        self.cut = False
        self.usage: Usage | None = None
        self.charged = False
        self.turns = Turns()

    def feed(self, f: Frame) -> bytes:
        data = f.json()
        if not isinstance(data, dict):
            return f.raw
        kind = data.get("type")
        index = data.get("output_index")
        if kind == "response.output_item.added":
            item = data.get("item") or {}
            if item.get("type") in CALLS:
                if self.cut:
                    self.held[index] = []  # dropped whole
                    return b""
                self.held[index] = [f.raw]
                return b""
            return b"" if self.cut else f.raw
        if kind == "response.output_item.done":
            item = data.get("item") or {}
            held = self.held.pop(index, None)
            if item.get("type") in CALLS:
                if self.cut:
                    return b""
                return self._decide(held or [], f.raw, index, item)
            if self.cut:
                return b""
            for event in item_events(item, self.turns, self.names):
                if isinstance(event, Text):
                    self.observe(event)
            return f.raw
        if kind in ("response.completed", "response.incomplete", "response.failed"):
            response = data.get("response") or {}
            usage = usage_of(response.get("usage"), _model(response))
            if usage is not None:
                self.usage = usage
            self.finish()
            if self.replaced and isinstance(response.get("output"), list):
                output = []
                for item in response["output"]:
                    if isinstance(item, dict) and item.get("type") in CALLS:
                        key = item.get("call_id") or item.get("id")
                        if key in self.replaced:
                            output.append(self.replaced[key])
                        continue
                    output.append(item)
                data["response"] = {**response, "output": output}
                return frame(data, f.event or kind)
            return f.raw
        if index is not None and index in self.held:
            self.held[index].append(f.raw)
            return b""
        if self.cut and index is not None:
            return b""
        return f.raw

    def _decide(self, held: list[bytes], raw: bytes, index: Any, item: dict[str, Any]) -> bytes:
        call = next((e for e in item_events(item, self.turns, self.names)
                     if isinstance(e, Call)), None)
        if call is None:
            return b"".join(held) + raw
        guidance = self.decide(call)
        if guidance is None:
            return b"".join(held) + raw
        self.cut = True
        message = _message_item(guidance)
        self.replaced[item.get("call_id") or item.get("id")] = message
        return b"".join(_message_events(index if isinstance(index, int) else 0, message))

    def finish(self) -> None:
        if self.charged or self.usage is None:
            return
        self.charged = True
        self.observe(self.usage)
