"""Claude Code's headless output, the CI / GitHub Action case: ``claude -p --output-format
stream-json`` (one SDK message per line), ``--output-format json`` (one ``result`` object), and
the array of stream messages claude-code-action writes as its execution file. Field reference:
``anthropics/claude-agent-sdk-python`` ``types.py`` / ``_internal/message_parser.py``; samples
in ``../shared/format-samples/claude-code-headless``.

Every line has ``type`` and ``session_id`` (snake case: the transcript's lines have
``sessionId``), which names the session; lines with a ``parent_tool_use_id`` belong to the
sub-agent that tool call started, the session ``<session_id>:task-<parent_tool_use_id>``.

- ``system`` ``init`` starts the run's turn (``claude -p`` runs one prompt); a ``user`` line
  that is a prompt (``--replay-user-messages``) starts one too. ``system`` ``compact_boundary``
  is a compaction (``compact_metadata.trigger: "auto"``: automatic). Other ``system`` lines
  (``status``, hooks, tasks), ``stream_event``, ``rate_limit_event`` and control lines are
  skipped.
- ``assistant`` lines hold Anthropic Messages: ``tool_use`` blocks are calls, ``text`` the
  agent's words (``thinking`` is private); usage once per ``message.id``, from its last line.
  A synthetic API-error message (``model: "<synthetic>"``) is no model response: skipped.
- ``user`` lines' ``tool_result`` blocks are results (``is_error``: a failure; "No such tool
  available" sets ``unknown_tool``).
- ``result`` ends the turn with the task's outcome (a ``task_end``): ``subtype`` and
  ``is_error`` are both read (``success`` with ``is_error: true`` is a failed run):
  ``error_max_turns`` is ``exhausted(steps)``, ``error_max_budget_usd`` ``exhausted(usd)``
  (the harness's own caps), another error ``interrupted`` (the subtype, or the
  ``terminal_reason``), a success ``answered`` with the ``result`` text. A lone ``result``
  object (``--output-format json``) also gives its ``modelUsage``, one usage per model with
  its ``costUSD`` (there is nothing else to take it from); in a stream the assistant lines
  already gave it.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

import orjson

from ...errors import InvalidEvent
from ..events import Compaction, Event, TaskEnd, Text, Usage
from ._base import (
    Item,
    Turns,
    anthropic_result,
    anthropic_usage,
    assistant_events,
    block_text,
    claude_unknown_tool,
    items_at,
    json_lines,
    read_document,
)

NAME = "claude-code-headless"
LINE_TYPES = frozenset({"system", "assistant", "user", "result", "stream_event",
                        "rate_limit_event", "control_request", "control_response",
                        "control_cancel_request", "tool_progress", "auth_status",
                        "keep_alive"})
#: result subtypes that are the harness's own caps, and the counter each one is
_CAPS = {"error_max_turns": "steps", "error_max_budget_usd": "usd"}
SYNTHETIC = "<synthetic>"


def is_line(value: Any) -> bool:
    """A headless message as the CLI writes it: a known ``type`` and a string ``session_id``
    (not a transcript line, which has ``sessionId``)."""
    return (_is_message(value) and isinstance(value.get("session_id"), str))


def _is_message(value: Any) -> bool:
    """A message of an execution file (an array): its first one says the session; the file
    claude-code-action documents leaves ``session_id`` out of the others."""
    return (type(value) is dict and value.get("type") in LINE_TYPES
            and "sessionId" not in value)


def sniff(value: Any) -> bool:
    """A stream line or a ``result`` object, or an array of stream messages whose first one
    names its session."""
    if type(value) is list:
        return bool(value) and is_line(value[0]) and all(_is_message(v) for v in value)
    return is_line(value)


class _Session:
    __slots__ = ("fresh", "name", "names", "turns", "usage", "usage_id", "usage_line")

    def __init__(self, name: str) -> None:
        self.name = name
        self.turns = Turns()
        self.fresh = False  # its turn was started by init and nothing happened in it yet
        self.names: dict[str, str] = {}
        self.usage_id: str | None = None
        self.usage: Usage | None = None
        self.usage_line = 0

    def flush(self) -> Iterator[Item]:
        if self.usage is not None:
            yield Item(self.name, self.usage_line, self.usage)
        self.usage_id = self.usage = None


class _Reader:
    def __init__(self, name: str, whole: bool, array: bool) -> None:
        self.name = name
        self.whole = whole  # a lone result object: its usage is the run's
        self.array = array  # an execution file's messages (only the first names its session)
        self.sessions: dict[str, _Session] = {}
        self.current = name
        self.main: str | None = None  # the first session id read

    def session(self, value: dict[str, Any]) -> _Session:
        sid = value.get("session_id")
        if not isinstance(sid, str) or not sid:  # an execution file's later message
            sid = self.main if self.main is not None else self.name
        elif self.main is None:
            self.main = sid
        parent = value.get("parent_tool_use_id")
        if isinstance(parent, str) and parent:
            sid = f"{sid}:task-{parent}"
        session = self.sessions.get(sid)
        if session is None:
            session = self.sessions[sid] = _Session(sid)
        self.current = sid
        return session

    def items(self, number: int, value: Any, path: Path) -> Iterator[Item]:
        if not (_is_message(value) if self.array else is_line(value)):
            yield Item(self.current, number, error=InvalidEvent(
                "not a Claude Code headless message (expected an object with a 'type' such as "
                "system, assistant, user or result, and a session_id)", source=str(path),
                line=number))
            return
        session = self.session(value)
        yield from items_at(session.name, number, path,
                            lambda: self.events(value, session, number))

    def events(self, value: dict[str, Any], session: _Session,
               number: int) -> Iterator[Event | Item]:
        kind = value["type"]
        if kind == "system":
            subtype = value.get("subtype")
            if subtype == "init":
                if not session.turns.open:
                    yield from session.turns.start()
                    session.fresh = True
            elif subtype == "compact_boundary":
                yield from session.flush()
                metadata = value.get("compact_metadata")
                trigger = metadata.get("trigger") if isinstance(metadata, dict) else None
                yield Compaction(mechanical=False, automatic=trigger == "auto")
            return
        if kind == "assistant":
            yield from self.assistant(value, session, number)
        elif kind == "user":
            yield from self.user(value, session)
        elif kind == "result":
            yield from session.flush()
            yield from self.result(value, session)

    def assistant(self, value: dict[str, Any], session: _Session,
                  number: int) -> Iterator[Event | Item]:
        message = value.get("message")
        if not isinstance(message, dict):
            raise InvalidEvent("an assistant message needs a 'message' object")
        if message.get("model") == SYNTHETIC or value.get("is_api_error_message") is True:
            return  # the CLI's own error text, no model response
        if not session.turns.open:  # a sub-agent's first line
            yield from session.turns.start()
        session.fresh = False
        ident = message.get("id")
        if ident != session.usage_id:
            yield from session.flush()
            session.usage_id = ident if isinstance(ident, str) else None
        usage = anthropic_usage(message)
        if usage is not None:
            session.usage, session.usage_line = usage, number  # the last line of the id wins
            if session.usage_id is None:
                yield from session.flush()
        content = message.get("content")
        yield from assistant_events(content, session.names)

    def user(self, value: dict[str, Any], session: _Session) -> Iterator[Event | Item]:
        message = value.get("message")
        if not isinstance(message, dict):
            raise InvalidEvent("a user message needs a 'message' object")
        content = message.get("content")
        blocks = content if isinstance(content, list) else ()
        if any(isinstance(b, dict) and b.get("type") == "tool_result" for b in blocks):
            for block in blocks:
                if isinstance(block, dict) and block.get("type") == "tool_result":
                    yield claude_unknown_tool(anthropic_result(block, session.names))
            return
        if value.get("isSynthetic") is True or not block_text(content).strip():
            return
        yield from session.flush()
        if session.fresh:  # the prompt of the turn init started
            session.fresh = False
            return
        yield from session.turns.start()

    def result(self, value: dict[str, Any], session: _Session) -> Iterator[Event | Item]:
        if not session.turns.open:
            yield from session.turns.start()
        if self.whole:
            yield from _model_usage(value.get("modelUsage"))
        subtype = value.get("subtype")
        answer = value.get("result") if isinstance(value.get("result"), str) else None
        turns = value.get("num_turns")
        if subtype in _CAPS:
            note = f"Claude Code stopped the run: {subtype}" + (
                f" after {turns} turns" if isinstance(turns, int) else "")
            yield TaskEnd(answer=answer, unfinished=note, exhausted=_CAPS[subtype])
        elif value.get("is_error") is True or (isinstance(subtype, str)
                                               and subtype.startswith("error")):
            reason = subtype if isinstance(subtype, str) and subtype != "success" else None
            terminal = value.get("terminal_reason")
            if reason is None:
                reason = terminal if isinstance(terminal, str) and terminal else "is_error"
            errors = value.get("errors")
            said = "; ".join(e for e in errors if isinstance(e, str)) \
                if isinstance(errors, list) else ""
            yield TaskEnd(answer=answer, unfinished=said or answer or None,
                          interrupted=f"Claude Code ended the run with an error: {reason}")
        else:
            if answer and self.whole:  # no assistant line said it
                yield Text(answer)
            yield TaskEnd(answer=answer)
        yield from session.turns.end()

    def end(self) -> Iterator[Item]:
        for session in self.sessions.values():
            yield from session.flush()
            for event in session.turns.end():
                yield Item(session.name, 0, event)


def _model_usage(per_model: Any) -> Iterator[Usage]:
    """A result's ``modelUsage``: one usage per model, with its reported cost."""
    for model, counts in per_model.items() if isinstance(per_model, dict) else ():
        if not isinstance(counts, dict):
            continue

        def count(key: str, counts: dict[str, Any] = counts) -> int:
            value = counts.get(key)
            return value if isinstance(value, int) and not isinstance(value, bool) \
                and value >= 0 else 0

        read, write = count("cacheReadInputTokens"), count("cacheCreationInputTokens")
        cost = counts.get("costUSD")
        yield Usage(model=model, input_tokens=count("inputTokens") + read + write,
                    output_tokens=count("outputTokens"), cache_read_tokens=read,
                    cache_write_tokens=write, provider="anthropic",
                    cost_usd=float(cost) if isinstance(cost, (int, float))
                    and not isinstance(cost, bool) and cost >= 0 else None)


def _lines(path: Path, document: Any) -> tuple[Iterable[tuple[int, Any]], bool, bool]:
    """The messages to read, each with its position; whether it is one lone object (a result:
    ``--output-format json``), and whether it is an array of them (an execution file)."""
    if document is None:
        with path.open("rb") as handle:
            first = b""
            for raw in handle:
                if raw.strip():
                    first = raw
                    break
        try:
            orjson.loads(first)
        except orjson.JSONDecodeError:  # one pretty-printed document
            document = read_document(path)
        else:
            return json_lines(path), False, False
    if isinstance(document, list):
        return enumerate(document, start=1), False, True
    return [(1, document)], True, False


def read(path: Path, name: str, document: Any = None) -> Iterator[Item]:
    lines, whole, array = _lines(path, document)
    if array and not sniff(document):
        raise InvalidEvent("not an array of Claude Code headless messages (expected system, "
                           "assistant, user and result objects, the first with a session_id)",
                           source=str(path))
    reader = _Reader(name, whole, array)
    for number, value in lines:
        if isinstance(value, InvalidEvent):
            yield Item(reader.current, number, error=value)
            continue
        yield from reader.items(number, value, path)
    yield from reader.end()
