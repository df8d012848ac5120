"""Gemini CLI chat recordings (``~/.gemini/tmp/<project>/chats/``): the single JSON document of
v0.38 and before (``session-<time>-<id8>.json``, rewritten whole), and the append-only JSON
Lines log since v0.39 (``session-<time>-<id8>.jsonl``; a sub-agent's is
``chats/<parent id>/<id>.jsonl``). Sources: gemini-cli ``packages/core/src/services/
chatRecordingTypes.ts`` and ``chatRecordingService.ts`` (``loadConversationRecord``), and the
samples in ``../shared/format-samples/gemini-cli``.

The log's lines: the metadata first (``sessionId``, ``projectHash``, ``startTime``,
``kind``...; a whole legacy record on one line is taken too), then message records (an object
with a string ``id``: the same id written again later replaces it, the last one wins),
``{"$set": {...}}`` metadata patches (with ``messages``: a checkpoint replacing the message
list) and ``{"$rewindTo": id}`` (the model's context loses that message and the ones after).

- The session is ``sessionId``; a sub-agent's recording (``kind: "subagent"``, which shares its
  parent's id in the legacy layout) is ``<sessionId>:subagent-<its first message id>``.
- A ``user`` message starts a turn. A ``gemini`` message is one model response: its ``content``
  is the agent's words (``thoughts`` are private), its ``toolCalls`` the calls and, in the same
  record, their results (``result[].functionResponse.response``: ``output``, or ``error``;
  ``status: "error"`` or ``"cancelled"`` is a failure; ``Tool "X" not found`` also sets
  ``unknown_tool``; a call still ``executing`` has no result yet), its ``tokens`` one usage
  (``input`` counts the cached part and tool-use prompt too; ``output`` counts the thoughts).
  ``info`` / ``error`` / ``warning`` are the UI's notices: skipped, except "Chat history
  compressed ..." (a compaction).
- Streaming the log: a message is given when a line of another message follows (its tool
  results and tokens are written by rewriting it); results written into an earlier message
  later are given then. What happened stays: a ``$rewindTo`` is skipped (the model's context
  lost those messages, the run did not), and a ``$set.messages`` checkpoint after messages were
  read gives nothing of its own but a compaction when it drops messages read and brings new
  ones (a summary); one before any message (a resumed recording) is the session's history.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import orjson

from ...errors import InvalidEvent
from ..events import Call, Compaction, Event, Result, Text, Usage
from ._base import Item, Turns, block_text, json_lines, one_value_per_line, read_document
from ._base import token_count_or_zero as _count

NAME = "gemini-cli"
MESSAGE_TYPES = frozenset({"user", "gemini", "info", "error", "warning"})
_UNKNOWN_TOOL = re.compile(r'^Tool "[^"]*" not found')
_COMPRESSED = "Chat history compressed"
#: statuses of a call that has its answer
_DONE = frozenset({"success", "error", "cancelled"})


def _metadata(value: Any) -> bool:
    return (type(value) is dict and isinstance(value.get("sessionId"), str)
            and "projectHash" in value and isinstance(value.get("messages", []), list))


def is_line(value: Any) -> bool:
    """A line of the log: the metadata, a message record, ``$set`` or ``$rewindTo``."""
    if type(value) is not dict:
        return False
    if "$set" in value:
        return isinstance(value["$set"], dict)
    if "$rewindTo" in value:
        return isinstance(value["$rewindTo"], str)
    return _metadata(value) or (isinstance(value.get("id"), str)
                                and value.get("type") in MESSAGE_TYPES)


def sniff(value: Any) -> bool:
    """A legacy recording (metadata and ``messages``), or a line of the log."""
    return (_metadata(value) and isinstance(value.get("messages"), list)) or is_line(value)


def _response(call: dict[str, Any]) -> tuple[str, Any]:
    """A call's answer: (its text, its error or None)."""
    output: list[str] = []
    error: Any = None
    result = call.get("result")
    for part in result if isinstance(result, list) else ():
        response = part.get("functionResponse") if isinstance(part, dict) else None
        body = response.get("response") if isinstance(response, dict) else None
        if isinstance(body, dict):
            if "error" in body:
                error = body["error"]
                output.append(body["error"] if isinstance(body["error"], str)
                              else orjson.dumps(body["error"]).decode())
            elif "output" in body:
                out = body["output"]
                output.append(out if isinstance(out, str) else orjson.dumps(out).decode())
        elif isinstance(part, dict) and isinstance(part.get("text"), str):
            output.append(part["text"])
    return "\n".join(output), error


class _Session:
    """One recording's state: its name (fixed at its first event), turns, and what was
    given of each message."""

    def __init__(self, fallback: str) -> None:
        self.fallback = fallback
        self.sid: str | None = None
        self.subagent = False
        self.name: str | None = None
        self.turns = Turns()
        self.given: dict[str, set[str]] = {}  # message id -> ids of the calls answered
        self.held: tuple[int, dict[str, Any]] | None = None  # the latest message, not given

    def named(self, message: dict[str, Any]) -> str:
        if self.name is None:
            sid = self.sid or self.fallback
            self.name = f"{sid}:subagent-{message.get('id')}" if self.subagent else sid
        return self.name

    def metadata(self, value: dict[str, Any]) -> None:
        if self.name is None and isinstance(value.get("sessionId"), str) and value["sessionId"]:
            self.sid = value["sessionId"]
        if self.name is None and "kind" in value:
            self.subagent = value.get("kind") == "subagent"

    def message(self, message: dict[str, Any]) -> Iterator[Event]:
        """A message's events, or those of its update (the results it did not have)."""
        ident = message.get("id")
        kind = message.get("type")
        if not isinstance(ident, str) or kind not in MESSAGE_TYPES:
            raise InvalidEvent("a message needs a string 'id' and a 'type' (user, gemini, "
                               "info, error or warning)")
        answered = self.given.get(ident)
        first = answered is None
        if first:
            answered = self.given[ident] = set()
        if kind == "user":
            if first:
                yield from self.turns.start()
            return
        if kind != "gemini":
            text = block_text(message.get("content"))
            if first and kind == "info" and text.startswith(_COMPRESSED):
                yield Compaction(mechanical=False, automatic=False)
            return
        assert answered is not None
        calls = message.get("toolCalls")
        calls = calls if isinstance(calls, list) else []
        if first:
            text = block_text(message.get("content"))
            if text:
                yield Text(text)
            for call in calls:
                if not isinstance(call, dict) or not isinstance(call.get("name"), str):
                    raise InvalidEvent("a tool call needs a string 'name'")
                yield Call(call["name"], call.get("args"), _id(call))
            tokens = message.get("tokens")
            if isinstance(tokens, dict):
                model = message.get("model")
                cached = _count(tokens.get("cached"))
                yield Usage(model=model if isinstance(model, str) else None,
                            input_tokens=_count(tokens.get("input")) + _count(tokens.get("tool")),
                            output_tokens=_count(tokens.get("output"))
                            + _count(tokens.get("thoughts")),
                            cache_read_tokens=cached, provider="google")
        for call in calls:
            if not isinstance(call, dict) or call.get("status") not in _DONE:
                continue
            ident = _id(call)
            if ident in answered:
                continue
            answered.add(ident or "")
            text, error = _response(call)
            status = call["status"]
            failed = status != "success" or error is not None
            unknown = isinstance(error, str) and _UNKNOWN_TOOL.match(error) is not None
            yield Result(name=call.get("name") if isinstance(call.get("name"), str) else None,
                         id=ident, error=(text or status) if failed else None, payload=text,
                         unknown_tool=unknown)


def _id(call: dict[str, Any]) -> str | None:
    ident = call.get("id")
    return ident if isinstance(ident, str) and ident else None


def _items(session: _Session, number: int, message: dict[str, Any],
           path: Path) -> Iterator[Item]:
    name = session.named(message)
    try:
        events = list(session.message(message))
    except InvalidEvent as exc:
        yield Item(name, number, error=InvalidEvent(exc.message, source=str(path), line=number))
        return
    if not events:
        yield Item(name, number)
    for event in events:
        yield Item(name, number, event)


def _document(path: Path, document: Any, name: str) -> Iterator[Item]:
    session = _Session(name)
    session.metadata(document)
    messages = document["messages"]
    for number, message in enumerate(messages, start=1):
        if not isinstance(message, dict):
            yield Item(session.name or name, number, error=InvalidEvent(
                "a message must be an object", source=str(path), line=number))
            continue
        yield from _items(session, number, message, path)
    for event in session.turns.end():
        yield Item(session.name or name, len(messages), event)


def _log(path: Path, name: str) -> Iterator[Item]:
    session = _Session(name)

    def current() -> str:
        return session.name or session.sid or name

    def release() -> Iterator[Item]:
        if session.held is not None:
            number, message = session.held
            session.held = None
            yield from _items(session, number, message, path)

    for number, value in json_lines(path):
        if isinstance(value, InvalidEvent):
            yield Item(current(), number, error=value)
            continue
        if not is_line(value):
            yield Item(current(), number, error=InvalidEvent(
                "not a Gemini CLI recording line (expected its metadata, a message with an "
                "'id' and a 'type', $set or $rewindTo)", source=str(path), line=number))
            continue
        if "$rewindTo" in value:
            yield Item(current(), number)
            continue
        if "$set" in value or _metadata(value):
            patch = value.get("$set", value)
            session.metadata(patch)
            messages = patch.get("messages")
            if not isinstance(messages, list):
                yield Item(current(), number)
                continue
            yield from release()
            if not session.given:  # the history a recording starts with
                for message in messages:
                    if isinstance(message, dict):
                        yield from _items(session, number, message, path)
                continue
            ids = {m.get("id") for m in messages if isinstance(m, dict)}
            dropped = any(i not in ids for i in session.given)
            added = any(i not in session.given for i in ids)
            if dropped and added:
                yield Item(current(), number, Compaction(mechanical=False, automatic=False))
            else:
                yield Item(current(), number)
            for i in ids - set(session.given):  # the summary's records: no events of theirs
                if isinstance(i, str):
                    session.given[i] = set()
            continue
        ident = value["id"]
        if session.held is not None and session.held[1].get("id") == ident:
            session.held = (session.held[0], value)  # rewritten: the last one wins
            yield Item(current(), number)
            continue
        yield from release()
        if ident in session.given:  # an earlier message rewritten: its new results only
            yield from _items(session, number, value, path)
            continue
        session.held = (number, value)
    yield from release()
    for event in session.turns.end():
        yield Item(current(), 0, event)




def read(path: Path, name: str, document: Any = None) -> Iterator[Item]:
    if document is None and one_value_per_line(path):
        return _log(path, name)
    document = read_document(path, document)
    if not (_metadata(document) and isinstance(document.get("messages"), list)):
        raise InvalidEvent("not a Gemini CLI chat recording (expected an object with "
                           "sessionId, projectHash and messages, or its JSON Lines log)",
                           source=str(path))
    return _document(path, document, name)
