"""Which session a request belongs to, and whether it is the main agent's step.

The session, in this order (the first that applies):

1. **the harness's own id**: Claude Code's ``X-Claude-Code-Session-Id`` header (else the
   ``session_id`` in its ``metadata.user_id``: a JSON object in Claude Code 2, the
   ``..._session_<uuid>`` suffix before it); Codex's ``session-id`` header (else ``session_id``,
   else its ``client_metadata.session_id``). A Codex request whose ``thread-id`` is not its
   session's is a sub-agent's thread: the session ``<session>/<thread>``.
2. ``x-tripwire-session``: any client may name its session.
3. **the gateway token** the client presented: one session per agent token (its name).
4. **a fingerprint** of the conversation: ``conv-`` and 16 hex digits of BLAKE3 over the API
   family and the first user message, which every request of a conversation repeats.

Within a session's id the main agent is told from its side requests and sub-agents by what
the requests say (``Roles``):

- a request offering **no tools** (title generation, summaries, quota probes) is a side request
  when the id is the harness's own (harnesses send those beside the main loop): its usage is
  charged to ``<session>/side``; it starts no turn and is no step of the main agent's;
- the first request with tools fixes the main conversation's **opening** (its first user
  message); a later request whose opening differs is a **sub-agent** (Claude Code's Task/Agent
  tool starts a conversation of its own: the sub-agent's prompt is its first message): the
  session ``<session>/agent-<8 hex>``, its own turns and steps, refused while the main session
  is halted;
- unless its opening is a **compaction's**: Claude Code's summary of the conversation so far
  ("This session is being continued from a previous conversation"), which becomes the main
  conversation's new opening and is observed as a ``compaction`` event.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from typing import Any, NamedTuple

import blake3
import orjson

from ..interchange.wire import Request

__all__ = ["harness_session", "Roles", "Role", "fingerprint", "COMPACTED"]

#: the opening of a conversation Claude Code compacted (its summary's first words)
COMPACTED = (b"This session is being continued from a previous conversation",)
#: sessions whose main conversation is remembered (least recently used forgotten past it)
REMEMBERED = 100_000


def _claude_metadata(body: dict[str, Any]) -> str | None:
    metadata = body.get("metadata")
    user = metadata.get("user_id") if isinstance(metadata, dict) else None
    if not isinstance(user, str):
        return None
    if user.startswith("{"):
        try:
            decoded = orjson.loads(user)
        except orjson.JSONDecodeError:
            return None
        sid = decoded.get("session_id") if isinstance(decoded, dict) else None
        return sid if isinstance(sid, str) and sid else None
    head, sep, sid = user.rpartition("_session_")
    return sid if sep and sid else None


def harness_session(headers: Any, body: dict[str, Any]) -> str | None:
    """The harness's own session id of a request (the module docstring, 1), or None."""
    sid = headers.get("x-claude-code-session-id")
    if sid:
        return str(sid)
    sid = headers.get("session-id") or headers.get("session_id")
    if not sid:
        client = body.get("client_metadata")
        sid = client.get("session_id") if isinstance(client, dict) else None
        if not isinstance(sid, str) or not sid:
            sid = _claude_metadata(body)
            return sid
    thread = headers.get("thread-id") or headers.get("thread_id")
    if thread and thread != sid:
        return f"{sid}/{thread}"
    return str(sid)


def fingerprint(family: str, request: Request) -> str:
    """The conversation's fingerprint session (the module docstring, 4)."""
    return "conv-" + blake3.blake3(family.encode() + b"\0" + request.opening).hexdigest(8)


class Role(NamedTuple):
    """A request's session and part: ``main`` (the agent's own step), ``sub`` (a sub-agent's
    step, in a session of its own under ``parent``) or ``side`` (no step: usage only);
    ``compacted``: the main conversation was compacted since its last request."""

    session: str
    part: str
    parent: str | None = None
    compacted: bool = False


class Roles:
    """The main conversation of each session id (its opening's digest), remembered."""

    def __init__(self, remembered: int = REMEMBERED) -> None:
        self._main: OrderedDict[str, bytes] = OrderedDict()
        self._lock = threading.Lock()
        self._remembered = remembered

    def classify(self, sid: str, request: Request, harness: bool) -> Role:
        if not request.tools:
            if harness:
                return Role(f"{sid}/side", "side", sid)
            with self._lock:
                known = sid in self._main
            if known:
                return Role(f"{sid}/side", "side", sid)
            return Role(sid, "main")
        digest = blake3.blake3(request.opening).digest(16)
        with self._lock:
            main = self._main.get(sid)
            if main is None:
                self._main[sid] = digest
                while len(self._main) > self._remembered:
                    self._main.popitem(last=False)
                return Role(sid, "main")
            self._main.move_to_end(sid)
            if main == digest:
                return Role(sid, "main")
            if _compacted(request.opening):
                self._main[sid] = digest
                return Role(sid, "main", compacted=True)
        return Role(f"{sid}/agent-{digest[:4].hex()}", "sub", sid)


def _compacted(opening: bytes) -> bool:
    head = opening[:400]
    return any(marker in head for marker in COMPACTED)
