"""What every transcript reader shares: the ``Item`` it yields, the streaming JSON Lines decoder,
and the turn bookkeeping of SPEC §11.1 (a user prompt starts a turn, the end of the agent's
answer ends it)."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from functools import partial
from pathlib import Path
from typing import Any, NamedTuple

import orjson

from ..errors import InvalidEvent, TruncatedLine
from ..events import UTF8_BOM, Event, TurnEnd, TurnStart, Usage

__all__ = ["Item", "json_lines", "read_document", "command_args", "block_text", "Turns",
           "messages_of", "items_at", "positioned", "run_total"]


class Item(NamedTuple):
    """One thing a reader found at ``line`` (1-based line of a JSON Lines file, or the 1-based
    position of the message/step in a single-document transcript).

    Exactly one of: ``event`` (an interchange event of ``session``), ``error`` (a line that
    cannot be read: ``InvalidEvent``, or ``TruncatedLine`` for a cut-off last line), or neither
    (a line the reader recognizes that carries no event: metadata, snapshots, summaries).
    A named tuple: one is made per event, and a tuple is made three times faster than a frozen
    dataclass.
    """

    session: str
    line: int
    event: Event | None = None
    error: InvalidEvent | None = None




def json_lines(path: Path) -> Iterator[tuple[int, Any]]:
    """``(line number, decoded value)`` per non-blank line, streaming (one line in memory).

    An undecodable line yields an ``InvalidEvent`` as its value (a ``TruncatedLine`` when it is
    the last line and has no newline), so readers pass it on with the line's number.
    """
    loads = orjson.loads
    decode_error = orjson.JSONDecodeError
    with path.open("rb") as handle:
        for number, raw in enumerate(handle, start=1):
            if number == 1:
                raw = raw.removeprefix(UTF8_BOM)
            try:
                value = loads(raw)
            except decode_error as exc:
                if not raw.strip():
                    continue
                if not raw.endswith(b"\n"):
                    yield number, TruncatedLine(source=str(path), line=number)
                else:
                    yield number, InvalidEvent(f"not JSON ({_reason(exc)})", source=str(path),
                                               line=number)
                continue
            yield number, value


def read_document(path: Path, document: Any = None) -> Any:
    """A single-JSON-document transcript, read whole (its harness writes it whole, once, at the
    end of a run; its size is one run's). Raises ``InvalidEvent`` naming the file.
    ``document``: the content format detection already decoded (returned as it is)."""
    if document is not None:
        return document
    try:
        return orjson.loads(path.read_bytes().removeprefix(UTF8_BOM))
    except orjson.JSONDecodeError as exc:
        raise InvalidEvent(f"not JSON ({_reason(exc)})", source=str(path)) from None


def _reason(exc: orjson.JSONDecodeError) -> str:
    text = str(exc)
    if "utf-8" in text.lower() or "surrogate" in text.lower():
        return f"not UTF-8: {text}"
    return text


def command_args(command: str) -> str:
    """``{"command": command}`` as JSON text: a harness's one shell tool, given the args as
    text so they are canonicalized without a second encoding."""
    return orjson.dumps({"command": command}).decode()


def block_text(content: Any) -> str:
    """The text of a message ``content``: a string, or the ``text`` of its blocks joined."""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        parts = []
        for block in content:
            if isinstance(block, dict):
                text = block.get("text")
                if isinstance(text, str):
                    parts.append(text)
            elif isinstance(block, str):
                parts.append(block)
        return "\n".join(parts)
    if content is None:
        return ""
    return str(content)


class Turns:
    """Turn boundaries: a user prompt ends the open turn (if any) and starts one; the end of the
    transcript ends the last one."""

    __slots__ = ("open",)

    def __init__(self) -> None:
        self.open = False

    def start(self) -> Iterator[Event]:
        if self.open:
            yield TurnEnd()
        self.open = True
        yield TurnStart()

    def end(self) -> Iterator[Event]:
        if self.open:
            self.open = False
            yield TurnEnd()


def messages_of(value: Any) -> list[Any] | None:
    """The message list of a single-document transcript: the document itself when it is a
    list of ``{"role": ...}`` objects, or its ``messages`` field; else None."""
    if isinstance(value, dict):
        value = value.get("messages")
    if isinstance(value, list) and value and all(
            isinstance(m, dict) and isinstance(m.get("role"), str) for m in value[:8]):
        return value
    return None


def items_at(session: str, number: int, path: Path,
             make: Callable[[], Iterable[Event | Item]]) -> Iterator[Item]:
    """The items of one line or message: its events (``Item``s pass through as they are), one
    skip when it has none, or the ``InvalidEvent`` it raised, located at ``path:number``."""
    try:
        events = list(make())
    except InvalidEvent as exc:
        yield Item(session, number, error=InvalidEvent(exc.message, source=str(path),
                                                       line=number))
        return
    if not events:
        yield Item(session, number)
    for event in events:
        yield event if isinstance(event, Item) else Item(session, number, event)


def positioned(session: str, path: Path, units: list[Any],
               events_of: Callable[[dict[str, Any]], Iterable[Event]]) -> Iterator[Item]:
    """The items of a document's messages or items, each at its 1-based position."""
    for number, unit in enumerate(units, start=1):
        if not isinstance(unit, dict):
            yield Item(session, number, error=InvalidEvent(
                "a message must be an object", source=str(path), line=number))
            continue
        yield from items_at(session, number, path, partial(events_of, unit))


def run_total(document: dict[str, Any], model: str | None = None) -> Usage | None:
    """A trajectory's ``info.model_stats.instance_cost`` (mini-swe-agent, SWE-agent: the run's
    total, the only cost they record) as one cost-only usage, when the run made API calls."""
    info = document.get("info")
    stats = info.get("model_stats") if isinstance(info, dict) else None
    if not isinstance(stats, dict) or not stats.get("api_calls"):
        return None
    cost = stats.get("instance_cost")
    if not isinstance(cost, (int, float)) or isinstance(cost, bool) or cost < 0:
        return None
    return Usage(model=model, cost_usd=float(cost))
