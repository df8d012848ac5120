"""Claude Code session transcripts (``~/.claude/projects/<project>/<session_id>.jsonl`` and the
sub-agents' ``<session_id>/subagents/agent-<id>.jsonl``), streamed line by line.

- Sessions: the main conversation is named by its ``sessionId``; sidechain (sub-agent) lines
  form their own session, ``<sessionId>:agent-<agentId>`` (SPEC §11.1).
- A user prompt (a user line whose content is not tool results, and not ``isMeta`` or a
  compaction summary) starts a turn; ``[Request interrupted by user]`` ends it.
- ``tool_use`` blocks are calls, ``tool_result`` blocks results (paired by id; ``is_error``
  makes a failure; the text content is the payload); ``text`` blocks are the agent's words,
  ``thinking`` blocks are private and skipped.
- Usage: one API response is split over several lines sharing ``message.id``, each repeating
  the usage (the first chunks' ``output_tokens`` are partial). It is taken once per id, from
  the last line of that id: held until a line of another response, a turn boundary or the end.
  A sidechain replaying a response of the main conversation reuses its ``message.id`` (with a
  new ``requestId``): that is one provider response (SPEC §11.1), counted once, in the main
  conversation (as ccusage keeps the non-sidechain copy); the sidechain's copy carries no usage.
- A ``system`` ``compact_boundary`` line is a compaction (``compactMetadata.trigger``
  ``auto``: automatic); a tool error "No such tool available" sets ``unknown_tool``.
- Everything else (``file-history-snapshot``, ``summary``, ``queue-operation``, ``progress``,
  other ``system`` lines, unknown types with the transcript envelope) is recognized and
  skipped.
"""

from __future__ import annotations

from collections.abc import Iterator
from functools import partial
from pathlib import Path
from typing import Any

from ...errors import InvalidEvent
from ..events import Compaction, Event, TurnEnd, Usage
from ._base import Item, Turns, assistant_events, block_text, items_at, json_lines
from ._base import claude_unknown_tool as unknown_tool
from .anthropic import tool_result, usage_of

__all__ = ["NAME", "sniff", "read", "usage_of"]

NAME = "claude-code"

#: line types Claude Code writes; any other ``type`` is still tolerated when the line has the
#: transcript envelope (``sessionId``/``uuid``): newer versions add types
ENTRY_TYPES = frozenset({"user", "assistant", "system", "summary", "file-history-snapshot",
                         "queue-operation", "progress", "attachment"})
_ENVELOPE = ("sessionId", "uuid", "parentUuid", "leafUuid", "messageId")
INTERRUPTED = "[Request interrupted by user"


def sniff(value: Any) -> bool:
    """Is this decoded line a Claude Code transcript line? An object with a string ``type``
    and the transcript envelope (a ``sessionId``, ``uuid`` ...): the reader reads exactly the
    lines detection accepts, whatever their type (newer versions add types)."""
    return (type(value) is dict and type(value.get("type")) is str
            and any(key in value for key in _ENVELOPE))


class _Session:
    """One conversation's state: its turn, the response whose usage is held, the calls' names."""

    __slots__ = ("flushed", "main_ids", "name", "names", "sidechain", "turns", "usage",
                 "usage_id", "usage_line")

    def __init__(self, name: str, sidechain: bool = False, main_ids: set[str] | None = None):
        self.name = name
        self.sidechain = sidechain
        #: the main conversation's response ids (shared by every session of the transcript)
        self.main_ids: set[str] = main_ids if main_ids is not None else set()
        self.turns = Turns()
        self.usage_id: str | None = None
        self.usage: Usage | None = None
        self.usage_line = 0
        self.flushed: set[str] = set()  # response ids whose usage was already given
        self.names: dict[str, str] = {}  # tool_use id -> tool name

    def flush(self) -> Iterator[Item]:
        if self.usage_id is not None:
            self.flushed.add(self.usage_id)
            if self.usage is not None:
                yield Item(self.name, self.usage_line, self.usage)
            self.usage_id = self.usage = None


def read(path: Path, name: str) -> Iterator[Item]:
    """The items of one transcript; ``name`` names the conversation when no line has an id.
    A line that cannot be read belongs to the conversation of the line before it (a cut last
    line is not a conversation of its own)."""
    sessions: dict[str, _Session] = {}
    main_ids: set[str] = set()
    current = name  # the session of the latest line read
    for number, value in json_lines(path):
        if isinstance(value, InvalidEvent):
            yield Item(current, number, error=value)
            continue
        if not sniff(value):
            yield Item(current, number, error=InvalidEvent(
                "not a Claude Code transcript line (expected an object with a 'type' such as "
                "user or assistant, and a sessionId)", source=str(path), line=number))
            continue
        kind = value["type"]
        if kind == "system" and value.get("subtype") == "compact_boundary":
            session = _session_of(value, name, sessions, main_ids)
            current = session.name
            yield from session.flush()  # the response before the boundary is complete
            yield Item(session.name, number, compaction_of(value))
            continue
        if kind not in ("user", "assistant"):
            yield Item(current, number)
            continue
        session = _session_of(value, name, sessions, main_ids)
        current = session.name
        yield from items_at(session.name, number, path,
                            partial(_events, kind, value, session, number))
    for session in sessions.values():
        yield from session.flush()
        for event in session.turns.end():
            yield Item(session.name, 0, event)


def compaction_of(value: dict[str, Any]) -> Compaction:
    """A ``compact_boundary`` line's compaction: automatic when its ``compactMetadata``
    says ``trigger: "auto"`` (``/compact`` is ``manual``); Claude Code summarizes, never
    truncates."""
    metadata = value.get("compactMetadata")
    trigger = metadata.get("trigger") if isinstance(metadata, dict) else None
    return Compaction(mechanical=False, automatic=trigger == "auto")


def _session_of(value: dict[str, Any], name: str, sessions: dict[str, _Session],
                main_ids: set[str]) -> _Session:
    sid = value.get("sessionId")
    sid = sid if isinstance(sid, str) and sid else name
    sidechain = value.get("isSidechain") is True
    if sidechain:
        agent = value.get("agentId")
        sid = f"{sid}:agent-{agent}" if isinstance(agent, str) and agent else f"{sid}:sidechain"
    session = sessions.get(sid)
    if session is None:
        session = sessions[sid] = _Session(sid, sidechain, main_ids)
    return session


def _events(kind: str, value: dict[str, Any], session: _Session,
            number: int) -> Iterator[Event | Item]:
    message = value.get("message")
    if not isinstance(message, dict):
        raise InvalidEvent(f"a {kind} line needs a 'message' object")
    content = message.get("content")
    if kind == "assistant":
        ident = message.get("id")
        if ident != session.usage_id:
            yield from session.flush()
            session.usage_id = ident if isinstance(ident, str) else None
        if session.usage_id is not None and not session.sidechain:
            session.main_ids.add(session.usage_id)
        if session.usage_id is not None and session.usage_id not in session.flushed and not (
                session.sidechain and session.usage_id in session.main_ids):
            session.usage = usage_of(message)  # the last line of the id wins
            session.usage_line = number
        yield from assistant_events(content, session.names)
        return
    # user
    if value.get("isMeta") is True or value.get("isCompactSummary") is True:
        return
    if isinstance(content, list) and any(isinstance(b, dict) and b.get("type") == "tool_result"
                                         for b in content):
        for block in content:
            if isinstance(block, dict) and block.get("type") == "tool_result":
                yield unknown_tool(tool_result(block, session.names))
        return
    text = block_text(content)
    if text.startswith(INTERRUPTED):
        yield from session.flush()
        if session.turns.open:
            session.turns.open = False
            yield TurnEnd()
        return
    yield from session.flush()
    yield from session.turns.start()
