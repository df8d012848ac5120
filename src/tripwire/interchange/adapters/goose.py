"""Goose sessions: the SQLite database (``~/.local/share/goose/sessions/sessions.db``) and the
older one-file-per-session JSON Lines (``<session>.jsonl`` in the same folder, which goose
imports into the database when it first creates it). Sources: ``aaif-goose/goose``
``crates/goose/src/session/session_manager.rs`` (commit 017176d0: ``create_schema`` and
``apply_migration`` 1-17, ``get_conversation``, ``save_compacted_conversation``, the usage
ledger), ``block/goose`` ``crates/goose/src/session/legacy.rs`` (commit 0fc5e540) and
``crates/goose/src/conversation/message.rs`` (the message JSON).

Schema versions: every one from the first to 17 (the current). Only columns that exist are
read (``PRAGMA table_info``): ``messages.metadata_json`` (added by migration 3),
``sessions.session_type`` (5), ``sessions.model_config_json`` (6), ``messages.message_id`` (7),
``sessions.accumulated_cost`` (13), ``sessions.parent_session_id`` and the ``usage_ledger``
table (15). A database of a newer version is read the same way, by the columns it has.
The database is opened read-only (``mode=ro``); nothing is written to it.

- Every session is a session of its own, by ``sessions.id`` (``YYYYMMDD_N``), sub-agents
  (``session_type: sub_agent``) too; its messages in goose's own order
  (``created_timestamp, id``).
- A user message with text starts a turn. ``content_json`` holds the message's content:
  ``text`` (the agent's words in an assistant message), ``toolRequest`` (a call:
  ``toolCall.value.name`` / ``.arguments``; a request goose could not parse,
  ``toolCall.status: "error"``, is a call of the tool ``invalid_tool_call``),
  ``frontendToolRequest`` (a call too), ``toolResponse`` (its result, by ``id``:
  ``toolResult.status: "error"`` or the MCP ``isError`` is a failure; "Tool ... not found" also
  sets ``unknown_tool``); ``thinking`` / ``redactedThinking`` are private; confirmations,
  notifications and ``actionRequired`` carry no event.
- Compaction: goose keeps the compacted messages, hiding them from the agent
  (``metadata_json`` ``agentVisible: false``), and adds the summary the user does not see
  (``userVisible: false``): the first such message after hidden ones is a compaction. Messages
  the user does not see start no turn.
- Usage: the ``usage_ledger`` rows (one per model call, with its cost; a compaction's own call
  too), placed by their ``created_timestamp`` among the messages; a database older than the
  ledger (version < 15) has only the session's running totals: one usage at its end
  (``accumulated_*_tokens`` and, from version 13, ``accumulated_cost``).
- The legacy file: its first line is the session's metadata (``working_dir``,
  ``description``, token totals) or already a message; every other line one message. The
  session is the file; its totals are one usage at its end.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from functools import partial
from pathlib import Path
from typing import Any

import orjson

from ...errors import InvalidEvent
from ..events import Call, Compaction, Event, Result, Text, Usage
from ._base import Item, Turns, block_text, items_at, json_lines, sqlite_tables
from ._base import token_count as _count

NAME = "goose"
DATABASE = "sessions.db"
#: the content types of goose's ``MessageContent`` (camelCase ``type``)
CONTENT_TYPES = frozenset({"text", "image", "toolRequest", "toolResponse", "thinking",
                           "redactedThinking", "reasoning", "toolConfirmationRequest",
                           "actionRequired", "frontendToolRequest", "systemNotification"})
_UNKNOWN_TOOL = re.compile(r"(?i)\btool\b[^\n]{0,80}\bnot found\b|unknown tool")
INVALID_CALL = "invalid_tool_call"


def _message(value: Any) -> bool:
    """A goose ``Message``: ``role``, ``created`` and typed ``content``."""
    return (type(value) is dict and value.get("role") in ("user", "assistant")
            and isinstance(value.get("created"), int) and isinstance(value.get("content"), list)
            and all(isinstance(c, dict) and c.get("type") in CONTENT_TYPES
                    for c in value["content"]))


def _metadata(value: Any) -> bool:
    """A legacy file's first line: the session's metadata."""
    return (type(value) is dict and "working_dir" in value
            and ("description" in value or "message_count" in value) and "role" not in value)


def is_line(value: Any) -> bool:
    return _message(value) or _metadata(value)


def sniff(value: Any) -> bool:
    return is_line(value)


def sniff_database(path: Path) -> bool:
    """A goose database: ``sessions`` and ``messages`` tables, the latter with
    ``content_json``."""
    tables = sqlite_tables(path)
    return tables is not None and "sessions" in tables and \
        {"session_id", "role", "content_json", "created_timestamp"} <= tables.get("messages",
                                                                                 set())


def sniff_folder(directory: Path, names: frozenset[str]) -> bool:
    """goose's ``sessions`` folder: the database and the legacy files it imported; the
    database is the transcript (reading the files too would read every session twice)."""
    return DATABASE in names and (directory / DATABASE).is_file() and \
        sniff_database(directory / DATABASE)


def _connect(path: Path) -> Any:
    import sqlite3  # here: a run that reads no database does not import it

    connection = sqlite3.connect(f"{path.resolve().as_uri()}?mode=ro", uri=True)
    connection.row_factory = sqlite3.Row
    return connection




class _Conversation:
    """One session's reading state."""

    def __init__(self) -> None:
        self.turns = Turns()
        self.names: dict[str, str] = {}  # call id -> tool
        self.hidden = False  # the last messages were hidden from the agent (compacted)

    def events(self, message: dict[str, Any]) -> Iterator[Event]:
        metadata = message.get("metadata")
        metadata = metadata if isinstance(metadata, dict) else {}
        agent_visible = metadata.get("agentVisible", True) is not False
        user_visible = metadata.get("userVisible", True) is not False
        if not agent_visible:
            self.hidden = True
        elif not user_visible and self.hidden:
            self.hidden = False
            yield Compaction(mechanical=False, automatic=False)
        role, content = message.get("role"), message.get("content")
        if role not in ("user", "assistant") or not isinstance(content, list):
            raise InvalidEvent("a goose message needs a 'role' (user or assistant) and a "
                               "'content' list")
        texts = [c["text"] for c in content if isinstance(c, dict) and c.get("type") == "text"
                 and isinstance(c.get("text"), str) and c["text"].strip()]
        if role == "user" and texts and user_visible and not any(
                isinstance(c, dict) and c.get("type") == "toolResponse" for c in content):
            yield from self.turns.start()
        if role == "assistant" and texts and user_visible:
            yield Text("\n".join(texts))
        for part in content:
            if not isinstance(part, dict):
                continue
            kind = part.get("type")
            if kind in ("toolRequest", "frontendToolRequest"):
                yield self.call(part)
            elif kind == "toolResponse":
                yield self.result(part)

    def call(self, part: dict[str, Any]) -> Call:
        ident = part.get("id") if isinstance(part.get("id"), str) else None
        request = part.get("toolCall")
        request = request if isinstance(request, dict) else {}
        value = request.get("value") if request.get("status", "success") == "success" else None
        if isinstance(value, dict) and isinstance(value.get("name"), str):
            name, args = value["name"], value.get("arguments")
        else:
            name, args = INVALID_CALL, {"error": request.get("error")}
        if ident is not None:
            self.names[ident] = name
        return Call(name, args, ident)

    def result(self, part: dict[str, Any]) -> Result:
        ident = part.get("id") if isinstance(part.get("id"), str) else None
        answer = part.get("toolResult")
        answer = answer if isinstance(answer, dict) else {}
        error: Any = None
        text: str
        if answer.get("status") == "error":
            said = answer.get("error")
            text = said if isinstance(said, str) else ""
            error = text or True
        else:
            value = answer.get("value")
            content = value.get("content") if isinstance(value, dict) else value
            text = block_text(content)
            if isinstance(value, dict) and value.get("isError") is True:
                error = text or True
        return Result(name=self.names.get(ident) if ident else None, id=ident, error=error,
                      payload=text, unknown_tool=error is not None
                      and _UNKNOWN_TOOL.search(text) is not None)


def _usage_of(row: Any, model: Any = None) -> Usage:
    cost = row["cost"] if "cost" in row.keys() else None
    read = _count(row["cache_read_tokens"]) if "cache_read_tokens" in row.keys() else None
    write = _count(row["cache_write_tokens"]) if "cache_write_tokens" in row.keys() else None
    name = row["model"] if "model" in row.keys() else model
    return Usage(model=name if isinstance(name, str) and name else None,
                 input_tokens=_count(row["input_tokens"]),
                 output_tokens=_count(row["output_tokens"]), cache_read_tokens=read,
                 cache_write_tokens=write,
                 cost_usd=float(cost) if isinstance(cost, (int, float)) and cost >= 0 else None)


def _database(path: Path) -> Iterator[Item]:
    tables = sqlite_tables(path)
    if tables is None or not sniff_database(path):
        raise InvalidEvent("not a goose sessions database (expected 'sessions' and "
                           "'messages' tables)", source=str(path))
    session_columns, message_columns = tables["sessions"], tables["messages"]
    ledger = "usage_ledger" in tables
    connection = _connect(path)
    try:
        order = "created_at, id" if "created_at" in session_columns else "id"
        model_column = ", model_config_json" if "model_config_json" in session_columns else ""
        totals = [c for c in ("accumulated_input_tokens", "accumulated_output_tokens",
                              "accumulated_cache_read_tokens", "accumulated_cache_write_tokens",
                              "accumulated_cost") if c in session_columns]
        sessions = connection.execute(
            f"SELECT id{model_column}{''.join(', ' + c for c in totals)} FROM sessions "
            f"ORDER BY {order}").fetchall()
        metadata = ", metadata_json" if "metadata_json" in message_columns else ""
        for session in sessions:
            yield from _session(connection, path, session, metadata, ledger)
    finally:
        connection.close()


def _session(connection: Any, path: Path, session: Any, metadata: str,
             ledger: bool) -> Iterator[Item]:
    name = str(session["id"])
    conversation = _Conversation()
    charges: list[Any] = []
    if ledger:
        charges = connection.execute(
            "SELECT * FROM usage_ledger WHERE session_id = ? ORDER BY created_timestamp, id",
            (session["id"],)).fetchall()
    given = 0
    last = 0
    rows = connection.execute(
        f"SELECT id, role, content_json, created_timestamp{metadata} FROM messages "
        "WHERE session_id = ? ORDER BY created_timestamp, id", (session["id"],))
    for row in rows:
        last = row["id"]
        while given < len(charges) and charges[given]["created_timestamp"] < \
                row["created_timestamp"]:
            yield Item(name, last, _usage_of(charges[given]))
            given += 1
        try:
            message: Any = {"role": row["role"], "content": orjson.loads(row["content_json"])}
            if metadata and row["metadata_json"]:
                message["metadata"] = orjson.loads(row["metadata_json"])
        except orjson.JSONDecodeError as exc:
            yield Item(name, last, error=InvalidEvent(
                f"message {row['id']}: content_json is not JSON ({exc})", source=str(path)))
            continue
        yield from items_at(name, last, path, partial(conversation.events, message))
    for charge in charges[given:]:
        yield Item(name, last, _usage_of(charge))
    if not ledger:
        usage = _totals(session)
        if usage is not None:
            yield Item(name, last, usage)
    for event in conversation.turns.end():
        yield Item(name, last, event)


def _model(session: Any) -> str | None:
    try:
        config = orjson.loads(session["model_config_json"] or "null")
    except (IndexError, KeyError, orjson.JSONDecodeError):
        return None
    model = config.get("model_name") if isinstance(config, dict) else None
    return model if isinstance(model, str) else None


def _totals(row: Any) -> Usage | None:
    """A session's running totals (a database without the ledger, a legacy file) as one
    usage, when it made model calls."""
    keys = row.keys()

    def get(key: str) -> Any:
        return row[key] if key in keys else None

    inputs, outputs = _count(get("accumulated_input_tokens")), \
        _count(get("accumulated_output_tokens"))
    cost = get("accumulated_cost")
    if not inputs and not outputs and not cost:
        return None
    model = _model(row) if "model_config_json" in keys else None
    return Usage(model=model, input_tokens=inputs, output_tokens=outputs,
                 cache_read_tokens=_count(get("accumulated_cache_read_tokens")),
                 cache_write_tokens=_count(get("accumulated_cache_write_tokens")),
                 cost_usd=float(cost) if isinstance(cost, (int, float)) and cost >= 0 else None)


class _Fields(dict[str, Any]):
    """A legacy metadata line, with the row-like ``keys()`` ``_totals`` reads."""


def _legacy(path: Path, name: str) -> Iterator[Item]:
    conversation = _Conversation()
    totals: dict[str, Any] | None = None
    last = 0
    for number, value in json_lines(path):
        last = number
        if isinstance(value, InvalidEvent):
            yield Item(name, number, error=value)
        elif number == 1 and _metadata(value):
            totals = value
            yield Item(name, number)
        elif _message(value):
            yield from items_at(name, number, path, partial(conversation.events, value))
        else:
            yield Item(name, number, error=InvalidEvent(
                "not a goose session line (expected a message with 'role', 'created' and "
                "'content', or the session's metadata first)", source=str(path), line=number))
    if totals is not None:
        usage = _totals(_Fields(totals))
        if usage is not None:
            yield Item(name, last, usage)
    for event in conversation.turns.end():
        yield Item(name, last, event)


def read(path: Path, name: str) -> Iterator[Item]:
    """A goose database (or the ``sessions`` folder holding it), or a legacy session file."""
    if path.is_dir():
        return _database(path / DATABASE)
    with path.open("rb") as handle:
        head = handle.read(16)
    if head == b"SQLite format 3\x00":
        return _database(path)
    return _legacy(path, name)
