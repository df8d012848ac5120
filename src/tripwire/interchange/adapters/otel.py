"""OpenTelemetry GenAI spans exported as OTLP/JSON: a file of ``{"resourceSpans": [...]}``
export requests, one per line (the collector's file exporter), or one such document.

Each line (batch) is read on its own, its spans ordered by time. By the GenAI semantic
conventions:

- ``execute_tool`` spans: a call at the span's start (``gen_ai.tool.name``,
  ``gen_ai.tool.call.arguments``, ``gen_ai.tool.call.id``), its result at the end
  (``gen_ai.tool.call.result``; an error status or ``error.type`` makes a failure);
- inference spans (``chat``, ``text_completion``, ``generate_content``): usage at the end
  (``gen_ai.usage.*``, the response or request model, ``gen_ai.provider.name``), and the text
  parts of ``gen_ai.output.messages`` when recorded;
- ``invoke_agent`` spans: a turn from start to end.

The session is ``gen_ai.conversation.id``, else the trace, ``<file>#trace-<traceId>``.
Other spans are skipped.
"""

from __future__ import annotations

from collections.abc import Iterator
from functools import partial
from pathlib import Path
from typing import Any

import orjson

from ...base.validate import reader_count
from ...errors import InvalidEvent
from ..events import Call, Event, Result, Text, TurnEnd, TurnStart, Usage
from ._base import Item, block_text, items_at, json_lines, one_value_per_line, read_document

NAME = "otel"
INFERENCE = frozenset({"chat", "text_completion", "generate_content"})
STATUS_ERROR = 2


def sniff(value: Any) -> bool:
    return isinstance(value, dict) and isinstance(value.get("resourceSpans"), list)


def _value(v: Any) -> Any:
    """An OTLP/JSON ``AnyValue`` as a Python value (``intValue`` is a string there)."""
    if not isinstance(v, dict):
        return None
    if "stringValue" in v:
        return v["stringValue"]
    if "intValue" in v:
        try:
            return int(v["intValue"])
        except (TypeError, ValueError):
            return None
    if "doubleValue" in v:
        return v["doubleValue"]
    if "boolValue" in v:
        return v["boolValue"]
    if "arrayValue" in v:
        return [_value(x) for x in (v["arrayValue"] or {}).get("values", [])]
    if "kvlistValue" in v:
        return _attributes((v["kvlistValue"] or {}).get("values", []))
    return None


def _attributes(items: Any) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for item in items if isinstance(items, list) else ():
        if isinstance(item, dict) and isinstance(item.get("key"), str):
            out[item["key"]] = _value(item.get("value"))
    return out


def _time(span: dict[str, Any], key: str) -> int:
    try:
        return int(span.get(key) or 0)
    except (TypeError, ValueError):
        return 0


def _count(value: Any) -> int | None:
    return reader_count(value, "gen_ai.usage token count")


def _span_events(span: dict[str, Any], attrs: dict[str, Any]) -> list[tuple[int, int, Event]]:
    """(time, order, event) of one span: order keeps a start before an end at the same time."""
    operation = attrs.get("gen_ai.operation.name")
    start, end = _time(span, "startTimeUnixNano"), _time(span, "endTimeUnixNano")
    if operation == "execute_tool":
        name = attrs.get("gen_ai.tool.name")
        if not isinstance(name, str):
            raise InvalidEvent("an execute_tool span needs a gen_ai.tool.name")
        ident = attrs.get("gen_ai.tool.call.id") or span.get("spanId")
        ident = ident if isinstance(ident, str) else None
        found = span.get("status")
        status: dict[str, Any] = found if isinstance(found, dict) else {}
        error = None
        if status.get("code") in (STATUS_ERROR, "STATUS_CODE_ERROR") or attrs.get("error.type"):
            error = status.get("message") or attrs.get("error.type") or True
        payload = attrs.get("gen_ai.tool.call.result")
        if payload is not None and not isinstance(payload, str):
            payload = orjson.dumps(payload).decode()
        return [(start, 1, Call(name, attrs.get("gen_ai.tool.call.arguments"), ident)),
                (end, 0, Result(name=name, id=ident, error=error, payload=payload))]
    if operation in INFERENCE:
        events: list[tuple[int, int, Event]] = []
        for text in _output_texts(attrs.get("gen_ai.output.messages")):
            events.append((end, 0, Text(text)))
        model = attrs.get("gen_ai.response.model") or attrs.get("gen_ai.request.model")
        provider = attrs.get("gen_ai.provider.name") or attrs.get("gen_ai.system")
        events.append((end, 0, Usage(
            model=model if isinstance(model, str) else None,
            input_tokens=_count(attrs.get("gen_ai.usage.input_tokens")),
            output_tokens=_count(attrs.get("gen_ai.usage.output_tokens")),
            cache_read_tokens=_count(attrs.get("gen_ai.usage.cache_read.input_tokens")),
            cache_write_tokens=_count(attrs.get("gen_ai.usage.cache_creation.input_tokens")),
            provider=provider if isinstance(provider, str) else None)))
        return events
    if operation == "invoke_agent":
        return [(start, 1, TurnStart()), (end, 2, TurnEnd())]
    return []


def _output_texts(messages: Any) -> Iterator[str]:
    if isinstance(messages, str):
        try:
            messages = orjson.loads(messages)
        except orjson.JSONDecodeError:
            return
    for message in messages if isinstance(messages, list) else ():
        if not isinstance(message, dict) or message.get("role") not in (None, "assistant"):
            continue
        for part in message.get("parts") or ():
            if isinstance(part, dict) and part.get("type") == "text":
                text = part.get("content", part.get("text"))
                if isinstance(text, str) and text:
                    yield text
        if "content" in message and "parts" not in message:
            text = block_text(message["content"])
            if text:
                yield text


def _items(value: dict[str, Any], name: str, number: int) -> Iterator[Item]:
    """One export line's events, each in the session of its span."""
    return (Item(session, number, event) for _, _, session, event in _batch(value, name))


def _batch(value: dict[str, Any], name: str) -> list[tuple[int, int, str, Event]]:
    out: list[tuple[int, int, str, Event]] = []
    for resource in value["resourceSpans"]:
        if not isinstance(resource, dict):
            raise InvalidEvent("resourceSpans must hold objects")
        for scope in resource.get("scopeSpans") or ():
            for span in (scope.get("spans") or ()) if isinstance(scope, dict) else ():
                if not isinstance(span, dict):
                    raise InvalidEvent("a span must be an object")
                attrs = _attributes(span.get("attributes"))
                session = attrs.get("gen_ai.conversation.id")
                if not isinstance(session, str) or not session:
                    session = f"{name}#trace-{span.get('traceId', '')}"
                for time, order, event in _span_events(span, attrs):
                    out.append((time, order, session, event))
    out.sort(key=lambda e: (e[0], e[1]))
    return out




def read(path: Path, name: str) -> Iterator[Item]:
    """The items of an export file; a line that cannot be read belongs to the session of the
    last span before it (a cut last line is not a session of its own)."""
    lines = json_lines(path) if one_value_per_line(path) else iter([(1, read_document(path))])
    current = name
    for number, value in lines:
        if isinstance(value, InvalidEvent):
            yield Item(current, number, error=value)
            continue
        if not sniff(value):
            yield Item(current, number, error=InvalidEvent(
                "not an OTLP/JSON trace export (expected an object with 'resourceSpans')",
                source=str(path), line=number))
            continue
        for item in items_at(current, number, path, partial(_items, value, name, number)):
            if item.event is not None:
                current = item.session
            yield item
