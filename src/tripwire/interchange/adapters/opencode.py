"""OpenCode sessions: the SQLite database (``~/.local/share/opencode/opencode.db``; other
channels ``opencode-<channel>.db``) and the JSON storage tree before it
(``~/.local/share/opencode/storage/``: ``session/<project>/<session>.json``,
``message/<session>/<message>.json``, ``part/<message>/<part>.json``). Sources:
``anomalyco/opencode`` ``packages/opencode/src/storage/json-migration.ts`` (commit 062aa8c0:
the tree's layout and the tables it fills — ``session``, ``message`` and ``part``, whose
``data`` column keeps the JSON of the file less its ids) and the Message / Part types of the
official SDK (``opencode-ai`` ``types/``). As OpenCode's migration does, ids are taken from the
paths, not the JSON (earlier versions moved sessions without updating it).

- Every session is a session of its own, by its id (``ses_...``); a child session (the task
  tool's sub-agent, ``parentID`` / ``parent_id``) too. Messages in order of their ids (sortable,
  time-based), parts likewise.
- A user message starts a turn. An assistant message's parts: ``text`` is the agent's words
  (``synthetic`` text and a summary's are not), ``reasoning`` is private, a ``tool`` part is
  a call (``tool``,
  ``state.input``, ``callID``) with its result in the same part once ``state.status`` is
  ``completed`` (``output``) or ``error`` (a failure; "tool ... not found" / "unavailable tool"
  also sets ``unknown_tool``); each ``step-finish`` is one model call's usage (``tokens``:
  ``input`` is the uncached rest, ``cache.read`` / ``cache.write`` the cached parts;
  ``reasoning`` counts as output; a ``cost`` of 0 is no cost: OpenCode stores 0 when it has no
  price, so the usage is priced from tokens), else the message's own ``tokens``/``cost``. A
  ``compaction`` part (and a summary message, ``summary: true``, of versions before it) is a
  compaction (``auto``: automatic).
- The data folder (holding ``opencode.db`` and/or ``storage``) is one transcript: its
  database when it has one (OpenCode imported the tree into it), else the tree. The database
  is opened read-only.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import orjson

from ...errors import InvalidEvent
from ..events import Call, Compaction, Event, Result, Text, Usage
from ._base import Item, Turns, sqlite_tables
from ._base import token_count_or_zero as _count

NAME = "opencode"
STORAGE = "storage"
#: a directory holding one of these may be OpenCode's (``sniff_folder`` decides)
FOLDER_SIGNS = frozenset({"session", STORAGE, "opencode.db"})
_UNKNOWN_TOOL = re.compile(r"(?i)(?:tool|model tried to call)[^\n]{0,60}"
                           r"(?:not found|unavailable|does not exist|invalid tool)")
_DB = re.compile(r"^opencode(?:-[\w.-]+)?\.db$")


def _session_json(value: Any) -> bool:
    return type(value) is dict and isinstance(value.get("time"), dict) and (
        "title" in value or "version" in value)


def sniff(value: Any) -> bool:  # OpenCode is read as a folder or a database, never a file
    return False


def _tree(directory: Path) -> bool:
    """A storage tree: ``session/<project>/<session>.json`` files of OpenCode's shape, beside
    ``message`` (and ``part``) folders."""
    if not (directory / "message").is_dir():
        return False
    try:
        for project in sorted((directory / "session").iterdir()):
            for file in sorted(project.glob("*.json")) if project.is_dir() else ():
                return _session_json(orjson.loads(file.read_bytes()))
    except (OSError, orjson.JSONDecodeError):
        return False
    return False


def sniff_database(path: Path) -> bool:
    tables = sqlite_tables(path)
    return tables is not None and "id" in tables.get("session", set()) \
        and {"id", "session_id", "data"} <= tables.get("message", set()) \
        and {"id", "message_id", "data"} <= tables.get("part", set())


def _database_of(directory: Path, names: frozenset[str]) -> Path | None:
    for name in sorted(names):
        if _DB.match(name) and (directory / name).is_file() and sniff_database(directory / name):
            return directory / name
    return None


def sniff_folder(directory: Path, names: frozenset[str]) -> bool:
    """OpenCode's data folder (its database, or its storage tree), or a storage tree."""
    if {"session", "message"} <= names and _tree(directory):
        return True
    if _database_of(directory, names) is not None:
        return True
    return STORAGE in names and _tree(directory / STORAGE)




def _usage(tokens: Any, cost: Any, model: Any, provider: Any) -> Usage | None:
    if not isinstance(tokens, dict):
        return None
    found = tokens.get("cache")
    cache: dict[str, Any] = found if isinstance(found, dict) else {}
    read, write = _count(cache.get("read")), _count(cache.get("write"))
    spent = float(cost) if isinstance(cost, (int, float)) and not isinstance(cost, bool) \
        and cost > 0 else None  # OpenCode stores 0 when it has no price
    return Usage(model=model if isinstance(model, str) else None,
                 input_tokens=_count(tokens.get("input")) + read + write,
                 output_tokens=_count(tokens.get("output")) + _count(tokens.get("reasoning")),
                 cache_read_tokens=read, cache_write_tokens=write, cost_usd=spent,
                 provider=provider if isinstance(provider, str) else None)


class _Session:
    def __init__(self) -> None:
        self.turns = Turns()
        self.compacted = False  # a compaction part was just read

    def message(self, message: dict[str, Any], parts: list[dict[str, Any]]) -> Iterator[Event]:
        role = message.get("role")
        if role == "user":
            if any(p.get("type") == "compaction" for p in parts):
                for part in parts:
                    if part.get("type") == "compaction":
                        yield Compaction(mechanical=False, automatic=part.get("auto") is True)
                self.compacted = True
                return
            if any(p.get("type") == "text" and not p.get("synthetic") for p in parts) \
                    or not parts:
                yield from self.turns.start()
            return
        if role != "assistant":
            raise InvalidEvent("a message needs a 'role' (user or assistant)")
        summary = message.get("summary") is True  # a compaction's summary: not an answer
        if summary and not self.compacted:
            yield Compaction(mechanical=False, automatic=False)
        self.compacted = False
        steps = 0
        model, provider = message.get("modelID"), message.get("providerID")
        for part in parts:
            kind = part.get("type")
            if kind == "text" and not part.get("synthetic") and not summary:
                text = part.get("text")
                if isinstance(text, str) and text.strip():
                    yield Text(text)
            elif kind == "tool":
                yield from self.tool(part)
            elif kind == "step-finish":
                steps += 1
                usage = _usage(part.get("tokens"), part.get("cost"), model, provider)
                if usage is not None:
                    yield usage
        if not steps:
            usage = _usage(message.get("tokens"), message.get("cost"), model, provider)
            if usage is not None and (usage.input_tokens or usage.output_tokens
                                      or usage.cost_usd):
                yield usage

    def tool(self, part: dict[str, Any]) -> Iterator[Event]:
        name = part.get("tool")
        if not isinstance(name, str):
            raise InvalidEvent("a tool part needs a string 'tool'")
        ident = part.get("callID") if isinstance(part.get("callID"), str) else None
        found = part.get("state")
        state: dict[str, Any] = found if isinstance(found, dict) else {}
        yield Call(name, state.get("input"), ident)
        status = state.get("status")
        if status == "completed":
            output = state.get("output")
            yield Result(name=name, id=ident, payload=output if isinstance(output, str)
                         else orjson.dumps(output).decode() if output is not None else "")
        elif status == "error":
            error = state.get("error")
            text = error if isinstance(error, str) else ""
            yield Result(name=name, id=ident, error=text or True, payload=text,
                         unknown_tool=_UNKNOWN_TOOL.search(text) is not None)


def _events_of(name: str, where: Path, position: int, session: _Session,
               message: Any, parts: list[Any]) -> Iterator[Item]:
    if not isinstance(message, dict):
        yield Item(name, position, error=InvalidEvent("a message must be a JSON object",
                                                      source=str(where)))
        return
    try:
        events = list(session.message(message, [p for p in parts if isinstance(p, dict)]))
    except InvalidEvent as exc:
        yield Item(name, position, error=InvalidEvent(exc.message, source=str(where)))
        return
    if not events:
        yield Item(name, position)
    for event in events:
        yield Item(name, position, event)


def _json(path: Path) -> Any:
    try:
        return orjson.loads(path.read_bytes())
    except orjson.JSONDecodeError as exc:
        raise InvalidEvent(f"not JSON ({exc})", source=str(path)) from None


def _read_tree(storage: Path) -> Iterator[Item]:
    """A storage tree: every session's messages and their parts, from the files."""
    sessions = []
    for project in sorted((storage / "session").iterdir()):
        for file in sorted(project.glob("*.json")) if project.is_dir() else ():
            try:
                data = _json(file)
            except InvalidEvent as exc:
                yield Item(file.stem, 0, error=exc)
                continue
            created = data.get("time", {}).get("created") if isinstance(data, dict) else None
            # the creation time orders the sessions (a number; anything else sorts first)
            when = created if isinstance(created, (int, float)) and not isinstance(
                created, bool) else 0
            sessions.append((when, file.stem))
    for _, sid in sorted(sessions):
        session = _Session()
        folder = storage / "message" / sid
        position = 0
        for file in sorted(folder.glob("*.json")) if folder.is_dir() else ():
            position += 1
            try:
                message = _json(file)
                parts = [_json(p) for p in sorted((storage / "part" / file.stem).glob("*.json"))]
            except InvalidEvent as exc:
                yield Item(sid, position, error=exc)
                continue
            yield from _events_of(sid, file, position, session, message, parts)
        for event in session.turns.end():
            yield Item(sid, position, event)


def _read_database(path: Path) -> Iterator[Item]:
    import sqlite3

    if not sniff_database(path):
        raise InvalidEvent("not an OpenCode database (expected 'session', 'message' and 'part' "
                           "tables with 'data')", source=str(path))
    connection = sqlite3.connect(f"{path.resolve().as_uri()}?mode=ro", uri=True)
    try:
        order = "time_created, id" if "time_created" in (sqlite_tables(path) or {}).get(
            "session", set()) else "id"
        for (sid,) in connection.execute(f"SELECT id FROM session ORDER BY {order}").fetchall():
            session = _Session()
            parts: dict[str, list[Any]] = {}
            for message_id, data in connection.execute(
                    "SELECT message_id, data FROM part WHERE message_id IN "
                    "(SELECT id FROM message WHERE session_id = ?) ORDER BY message_id, id",
                    (sid,)):
                try:
                    parts.setdefault(message_id, []).append(orjson.loads(data))
                except orjson.JSONDecodeError:
                    parts.setdefault(message_id, []).append(None)
            position = 0
            for message_id, data in connection.execute(
                    "SELECT id, data FROM message WHERE session_id = ? ORDER BY id", (sid,)):
                position += 1
                try:
                    message = orjson.loads(data)
                except orjson.JSONDecodeError as exc:
                    yield Item(sid, position, error=InvalidEvent(
                        f"message {message_id}: data is not JSON ({exc})", source=str(path)))
                    continue
                yield from _events_of(sid, path, position, session, message,
                                      parts.get(message_id, []))
            for event in session.turns.end():
                yield Item(sid, position, event)
    finally:
        connection.close()


def read(path: Path, name: str) -> Iterator[Item]:
    """OpenCode's data folder, its storage tree, or its database file."""
    if path.is_dir():
        database = _database_of(path, frozenset(p.name for p in path.iterdir()))
        if database is not None:
            return _read_database(database)
        storage = path if (path / "message").is_dir() else path / STORAGE
        if not _tree(storage):
            raise InvalidEvent("not an OpenCode data folder (expected opencode.db, or a "
                               "storage tree of session/, message/ and part/)",
                               source=str(path))
        return _read_tree(storage)
    return _read_database(path)
