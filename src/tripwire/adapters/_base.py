"""What every transcript reader shares: the ``Item`` it yields, the streaming JSON Lines decoder,
and the turn bookkeeping of SPEC §11.1 (a user prompt starts a turn, the end of the agent's
answer ends it)."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import orjson

from ..errors import InvalidEvent, TruncatedLine
from ..events import UTF8_BOM, Event, TurnEnd, TurnStart

__all__ = ["Item", "SKIP", "json_lines", "read_document", "block_text", "Turns", "UTF8_BOM"]


@dataclass(frozen=True, slots=True)
class Item:
    """One thing a reader found at ``line`` (1-based line of a JSON Lines file, or the 1-based
    position of the message/step in a single-document transcript).

    Exactly one of: ``event`` (an interchange event of ``session``), ``error`` (a line that
    cannot be read: ``InvalidEvent``, or ``TruncatedLine`` for a cut-off last line), or neither
    (a line the reader recognizes that carries no event: metadata, snapshots, summaries).
    """

    session: str
    line: int
    event: Event | None = None
    error: InvalidEvent | None = None


#: a recognized line without an event (module constant: no allocation per skipped line)
SKIP = None


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


def read_document(path: Path) -> Any:
    """A single-JSON-document transcript, read whole (its harness writes it whole, once, at the
    end of a run; its size is one run's). Raises ``InvalidEvent`` naming the file."""
    try:
        return orjson.loads(path.read_bytes().removeprefix(UTF8_BOM))
    except orjson.JSONDecodeError as exc:
        raise InvalidEvent(f"not JSON ({_reason(exc)})", source=str(path)) from None


def _reason(exc: orjson.JSONDecodeError) -> str:
    text = str(exc)
    if "utf-8" in text.lower() or "surrogate" in text.lower():
        return f"not UTF-8: {text}"
    return text


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
