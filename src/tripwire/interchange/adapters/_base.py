"""What every transcript reader shares: the ``Item`` it yields, the streaming JSON Lines decoder,
and the turn bookkeeping of SPEC §11.1 (a user prompt starts a turn, the end of the agent's
answer ends it)."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from dataclasses import replace
from functools import partial
from pathlib import Path
from typing import Any, NamedTuple

import orjson

from ...base.validate import reader_count
from ...errors import InvalidEvent, TruncatedLine
from ..events import UTF8_BOM, Call, Event, Result, Text, TurnEnd, TurnStart, Usage

__all__ = ["Item", "json_lines", "read_document", "command_args", "block_text", "Turns",
           "messages_of", "items_at", "positioned", "run_total", "anthropic_call",
           "anthropic_result", "anthropic_usage", "claude_unknown_tool"]


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


# -- Anthropic Messages content (Claude Code, its headless output, Cline, Roo ...) -----------

def anthropic_usage(message: dict[str, Any]) -> Usage | None:
    """A Messages ``usage`` object as one interchange usage (input counts the cached parts too:
    Anthropic's ``input_tokens`` is the uncached remainder only)."""
    usage = message.get("usage")
    if not isinstance(usage, dict):
        return None
    read = _count(usage.get("cache_read_input_tokens"))
    write = _count(usage.get("cache_creation_input_tokens"))
    uncached = _count(usage.get("input_tokens"))
    model = message.get("model")
    return Usage(model=model if isinstance(model, str) else None,
                 input_tokens=uncached + read + write,
                 output_tokens=_count(usage.get("output_tokens")),
                 cache_read_tokens=read, cache_write_tokens=write, provider="anthropic")


def token_count(value: Any, field: str = "usage token count") -> int | None:
    """A token count as a transcript records it: None when absent or unreadable (not an
    integer, negative), ``InvalidEvent`` above the maximum (``validate.reader_count``, the one
    rule every reader applies)."""
    return reader_count(value, field)


def token_count_or_zero(value: Any) -> int:
    """``token_count``, with 0 for a count that is not recorded."""
    return reader_count(value, "usage token count") or 0


_count = token_count_or_zero


def anthropic_call(block: dict[str, Any], names: dict[str, str]) -> Call:
    """A ``tool_use`` block as a call; remembers its name for the result."""
    name = block.get("name")
    if not isinstance(name, str):
        raise InvalidEvent("a tool_use block needs a string 'name'")
    ident = block.get("id") if isinstance(block.get("id"), str) else None
    if ident is not None:
        names[ident] = name
    return Call(name, block.get("input"), ident)


def assistant_events(content: Any, names: dict[str, str]) -> Iterator[Event]:
    """An Anthropic assistant message's content as events: a string is the agent's words;
    blocks give ``tool_use`` calls and ``text`` words in order (thinking is never agent text)."""
    if isinstance(content, str):
        if content:
            yield Text(content)
        return
    for block in content if isinstance(content, list) else ():
        if not isinstance(block, dict):
            continue
        kind = block.get("type")
        if kind == "tool_use":
            yield anthropic_call(block, names)
        elif kind == "text" and isinstance(block.get("text"), str) and block["text"]:
            yield Text(block["text"])


def anthropic_result(block: dict[str, Any], names: dict[str, str]) -> Result:
    """A ``tool_result`` block as a result, named after its call when the call was seen."""
    ident = block.get("tool_use_id")
    ident = ident if isinstance(ident, str) else None
    text = block_text(block.get("content"))
    error = (text or True) if block.get("is_error") is True else None
    return Result(name=names.get(ident) if ident else None, id=ident, error=error, payload=text)


#: Claude Code's error text for a call of a tool it does not have
NO_SUCH_TOOL = "No such tool available"


def claude_unknown_tool(result: Result) -> Result:
    """The result, flagged ``unknown_tool`` when it is Claude Code's answer to a call of a tool
    it does not have (``<tool_use_error>Error: No such tool available: X</tool_use_error>``)."""
    if result.error and isinstance(result.payload, str) and \
            result.payload.removeprefix("<tool_use_error>").lstrip().removeprefix(
                "Error: ").startswith(NO_SUCH_TOOL):
        return replace(result, unknown_tool=True)
    return result


def one_value_per_line(path: Path) -> bool:
    """Whether the first non-blank line of a file is a whole JSON value (JSON Lines), rather
    than the start of one pretty-printed document."""
    with path.open("rb") as handle:
        for raw in handle:
            if raw.strip():
                try:
                    orjson.loads(raw)
                except orjson.JSONDecodeError:
                    return False
                return True
    return True


def sqlite_tables(path: Path) -> dict[str, set[str]] | None:
    """The tables of a SQLite database (opened read-only) and their columns, or None when the
    file is none."""
    import sqlite3  # here: a run that reads no database does not import it

    try:
        connection = sqlite3.connect(f"{path.resolve().as_uri()}?mode=ro", uri=True)
    except sqlite3.Error:
        return None
    try:
        names = [r[0] for r in connection.execute(
            "SELECT name FROM sqlite_master WHERE type = 'table'")]
        return {name: {r[1] for r in connection.execute(f'PRAGMA table_info("{name}")')}
                for name in names}
    except sqlite3.Error:
        return None
    finally:
        connection.close()
