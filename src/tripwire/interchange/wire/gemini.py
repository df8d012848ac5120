"""Google's Gemini API on the wire: ``POST /v1beta/models/{model}:generateContent`` and
``:streamGenerateContent?alt=sse`` (each ``data:`` frame a whole ``GenerateContentResponse``).
``functionCall`` parts are calls (``args`` an object; ``id`` where the model gives one), a user
turn of ``functionResponse`` parts their results (a ``response`` with an ``error`` key a
failure), other user parts the user's own words; ``thought`` parts are never agent text.
Usage is ``usageMetadata`` (``cachedContentTokenCount`` is part of ``promptTokenCount``;
thinking tokens bill as output). The model is the path's, not the body's.
"""

from __future__ import annotations

import os
from typing import Any

from ...base.validate import reader_count
from ..events import Call, Event, Result, Text, Usage
from . import Decide, Observe, Request, dumps, opening_key
from .sse import Frame, frame

__all__ = ["read_request", "inject", "read_response", "cut_response", "answer", "error",
           "Stream"]


def read_request(body: dict[str, Any], model: str | None = None,
                 stream: bool = False) -> Request:
    contents = body.get("contents")
    if not isinstance(contents, list):
        raise ValueError("a generateContent request needs a 'contents' list")
    tools = tuple(d["name"] for t in body.get("tools") or () if isinstance(t, dict)
                  for d in t.get("functionDeclarations") or t.get("function_declarations") or ()
                  if isinstance(d, dict) and isinstance(d.get("name"), str))
    turns: list[dict[str, Any]] = [c for c in contents if isinstance(c, dict)]
    first = next((c for c in turns if c.get("role", "user") == "user"), None)
    request = Request(model, stream, tools, opening_key(first.get("parts") if first else None))
    if not turns or turns[-1].get("role", "user") != "user":
        return request
    parts = [p for p in turns[-1].get("parts") or () if isinstance(p, dict)]
    found = [p.get("functionResponse") or p.get("function_response") for p in parts]
    answers: list[dict[str, Any]] = [a for a in found if isinstance(a, dict)]
    if not answers:
        request.prompt = True
        return request
    for a in answers:
        response = a.get("response")
        payload = dumps(response).decode() if response is not None else ""
        failed = isinstance(response, dict) and "error" in response
        request.results.append(Result(
            name=a.get("name") if isinstance(a.get("name"), str) else None,
            id=a.get("id") if isinstance(a.get("id"), str) else None,
            error=(payload or True) if failed else None, payload=payload))
    return request


def inject(body: dict[str, Any], text: str) -> None:
    turn = [c for c in body["contents"] if isinstance(c, dict)][-1]
    turn.setdefault("parts", []).append({"text": text})


def usage_of(metadata: Any, model: str | None) -> Usage | None:
    if not isinstance(metadata, dict):
        return None
    output = (reader_count(metadata.get("candidatesTokenCount"), "usage") or 0) + (
        reader_count(metadata.get("thoughtsTokenCount"), "usage") or 0)
    return Usage(model=metadata.get("modelVersion") or model,
                 input_tokens=reader_count(metadata.get("promptTokenCount"), "usage"),
                 output_tokens=output,
                 cache_read_tokens=reader_count(metadata.get("cachedContentTokenCount"),
                                                "usage"), provider="google")


def _parts(body: dict[str, Any]) -> list[Any]:
    candidates = body.get("candidates") or ()
    first: dict[str, Any] = candidates[0] if candidates and isinstance(candidates[0], dict) \
        else {}
    content: dict[str, Any] = first["content"] if isinstance(first.get("content"), dict) else {}
    parts = content.get("parts")
    return parts if isinstance(parts, list) else []


def part_events(parts: list[Any]) -> list[Event]:
    events: list[Event] = []
    for part in parts:
        if not isinstance(part, dict) or part.get("thought") is True:
            continue
        call = part.get("functionCall") or part.get("function_call")
        if isinstance(call, dict) and isinstance(call.get("name"), str):
            events.append(Call(call["name"], call.get("args") or {},
                               call.get("id") if isinstance(call.get("id"), str) else None))
        elif isinstance(part.get("text"), str) and part["text"]:
            events.append(Text(part["text"]))
    return events


def read_response(body: dict[str, Any], names: dict[str, str],
                  model: str | None = None) -> list[Event]:
    events = part_events(_parts(body))
    usage = usage_of(body.get("usageMetadata"), body.get("modelVersion") or model)
    if usage is not None:
        events.append(usage)
    return events


def _is_call(part: Any) -> bool:
    return isinstance(part, dict) and ("functionCall" in part or "function_call" in part)


def cut_response(body: dict[str, Any], text: str) -> dict[str, Any]:
    candidates = list(body.get("candidates") or ())
    if candidates and isinstance(candidates[0], dict):
        first = dict(candidates[0])
        content = dict(first.get("content") or {"role": "model"})
        content["parts"] = [p for p in content.get("parts") or () if not _is_call(p)] + [
            {"text": text}]
        first.update(content=content, finishReason="STOP")
        candidates[0] = first
    else:
        candidates = [{"content": {"role": "model", "parts": [{"text": text}]},
                       "finishReason": "STOP", "index": 0}]
    return {**body, "candidates": candidates}


def answer(request: Request, text: str) -> tuple[str, bytes]:
    body = {"candidates": [{"content": {"role": "model", "parts": [{"text": text}]},
                            "finishReason": "STOP", "index": 0}],
            "usageMetadata": {"promptTokenCount": 0, "candidatesTokenCount": 0,
                              "totalTokenCount": 0},
            "modelVersion": request.model or "tripwire",
            "responseId": f"tripwire-{os.urandom(8).hex()}"}
    if request.stream:
        return "text/event-stream", frame(body)
    return "application/json", dumps(body)


def error(kind: str, message: str, status: int = 403) -> bytes:
    return dumps({"error": {"code": status, "message": message, "status": kind}})


class Stream:
    """``alt=sse`` frames, each a whole response chunk: a chunk's text passes at once; a call
    part arrives whole in its chunk and is decided there; a denied one is replaced by the
    guidance as text (``finishReason: STOP``), later chunks' calls dropped. The last
    ``usageMetadata`` (cumulative) is observed at the end."""

    def __init__(self, decide: Decide, observe: Observe, names: dict[str, str],
                 model: str | None = None):
        self.decide, self.observe, self.names, self.model = decide, observe, names, model
        self.usage: Usage | None = None
        self.cut = False
        self.charged = False

    def feed(self, f: Frame) -> bytes:
        data = f.json()
        if not isinstance(data, dict):
            return f.raw
        usage = usage_of(data.get("usageMetadata"), data.get("modelVersion") or self.model)
        if usage is not None:
            self.usage = usage
        parts = _parts(data)
        kept, changed = [], False
        for part in parts:
            events = part_events([part])
            event = events[0] if events else None
            if self.cut and (_is_call(part) or isinstance(event, Text)):
                changed = True
                continue
            if isinstance(event, Call):
                guidance = self.decide(event)
                if guidance is not None:
                    self.cut, changed = True, True
                    kept.append({"text": guidance})
                    continue
            elif isinstance(event, Text):
                self.observe(event)
            kept.append(part)
        if not changed:
            return f.raw
        out = cut_response(data, "") if self.cut else dict(data)
        out["candidates"][0]["content"]["parts"] = kept
        return frame(out)

    def finish(self) -> None:
        if self.charged or self.usage is None:
            return
        self.charged = True
        self.observe(self.usage)
