"""What a review shows the supervisor, and the log of calls it is built from.

``Review`` is one review's evidence: the objective and acceptance criteria, the recent calls
with their results (``ReviewedCall``, cut to the payload limit), the long-term record per
canonical call key (``KeyRecord``, so that a cycle outside the recent window still shows),
the earlier redirects and what became of them (``PriorGuidance``), the budget's picture and
the triggers. ``CallLog`` keeps the calls a run makes between reviews (the recent window, the
results paired to their calls, the per-key record); ``Supervision`` feeds it and reads it.
"""

from __future__ import annotations

import json
from collections import OrderedDict, deque
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from ..base.inputs import args_bytes, error_failed, json_text, name_str, payload_bytes
from ..signals.repeated_failure import signature_key
from .decision import Check

__all__ = [
    "error_signature", "ReviewedCall", "KeyRecord", "PriorGuidance", "Review", "ObservedCall",
    "CallLog",
]


# --------------------------------------------------------------------------------------------
# Error signatures

# SPEC §7.3: the repeated-failure signal owns the error-signature rule (volatile parts removed,
# in C++ and its Python twin); a review names the same signature as the alert for one error.


def error_signature(error: Any) -> str | None:
    """A failed result's error signature as 16 hex digits (the repeated-failure signal's
    ``signature_key``), or None for a success."""
    if not error_failed(error):
        return None
    return f"{signature_key(error):016x}"


# --------------------------------------------------------------------------------------------
# The review


@dataclass(frozen=True)
class ReviewedCall:
    """One recent call with its result. ``status``: ``ok``, ``error``, ``no_op`` or
    ``pending`` (no result yet). ``args`` and ``result`` are cut to the review's payload limit
    (``truncated`` says so; ``result_bytes`` is the full size)."""

    event: int
    tool: str
    key: str
    args: str
    status: str
    result: str | None
    result_bytes: int
    truncated: bool

    def to_dict(self) -> dict[str, Any]:
        return {"event": self.event, "tool": self.tool, "key": self.key, "args": self.args,
                "status": self.status, "result": self.result,
                "result_bytes": self.result_bytes, "truncated": self.truncated}


@dataclass(frozen=True)
class KeyRecord:
    """The long-term record of one canonical call key: how often it was called, the first and
    last event, the signature of its last error (None when its last result succeeded or it
    has none yet)."""

    key: str
    tool: str
    count: int
    first_event: int
    last_event: int
    last_error_signature: str | None

    def to_dict(self) -> dict[str, Any]:
        return {"key": self.key, "tool": self.tool, "count": self.count,
                "first_event": self.first_event, "last_event": self.last_event,
                "last_error_signature": self.last_error_signature}


@dataclass(frozen=True)
class PriorGuidance:
    """An earlier redirect and what became of it: ``followed`` (a call of the tool the check
    names was made since) and ``held`` (the check's condition was observed)."""

    review: int
    guidance: str
    check: Check
    followed: bool
    held: bool

    def to_dict(self) -> dict[str, Any]:
        return {"review": self.review, "guidance": self.guidance, "check": self.check.to_dict(),
                "followed": self.followed, "held": self.held}


@dataclass(frozen=True)
class Review:
    """What the supervisor sees. ``run`` is the session reviewed and ``revision`` the context
    revision the review describes (the decision is applied to that run only, and only while it
    is still at that revision). ``remaining`` maps each configured counter to its units left;
    ``used`` and ``caps`` give the rest of the picture. ``changes``: what the host says the
    worker changed since the last review (files, artifacts: its ``changes(task)``; None when
    the host gives none)."""

    number: int
    run: str
    task: str | None
    revision: int
    triggers: tuple[str, ...]
    objective: str
    acceptance: tuple[str, ...]
    recent: tuple[ReviewedCall, ...]
    record: tuple[KeyRecord, ...]
    guidance: tuple[PriorGuidance, ...]
    failed_redirects: int
    remaining: Mapping[str, float]
    used: Mapping[str, float]
    caps: Mapping[str, float | None]
    alerts: tuple[str, ...]
    stop_attempts: int
    changes: Any = None

    def to_dict(self) -> dict[str, Any]:
        return {
            "review": self.number, "run": self.run, "task": self.task,
            "revision": self.revision, "triggers": list(self.triggers),
            "objective": self.objective, "acceptance": list(self.acceptance),
            "recent_calls": [c.to_dict() for c in self.recent],
            "long_term_record": [r.to_dict() for r in self.record],
            "prior_guidance": [g.to_dict() for g in self.guidance],
            "failed_redirects": self.failed_redirects,
            "remaining": dict(self.remaining), "used": dict(self.used),
            "caps": dict(self.caps), "alerts": list(self.alerts),
            "stop_attempts": self.stop_attempts, "changes": self.changes,
        }

    def to_json(self) -> str:
        return json.dumps(self.to_dict(), ensure_ascii=False)


# --------------------------------------------------------------------------------------------
# The calls a review is built from

#: Results by name are paired with the oldest call of that name still waiting (at most this
#: many waiting per name, and this many by id: a host that never sends results stays bounded).
PENDING_RESULTS = 256


class ObservedCall:
    """One call the run made, as the log keeps it: its event number, tool, canonical key
    (``key``), arguments as JSON text cut to the payload limit (``args_text``) and call id;
    once its result arrives, ``status`` (``ok``, ``error``, ``no_op``; ``pending`` until then),
    ``result`` (cut to the payload limit), ``result_bytes`` (the full size) and ``truncated``
    (the arguments or the result were cut)."""

    __slots__ = ("args_text", "event", "id", "key", "result", "result_bytes", "status", "tool",
                 "truncated")

    def __init__(self, tool: str, key: int, args_text: str, id: str | None, truncated: bool):
        self.event = -1  # numbered when the log records it
        self.tool = tool
        self.key = key
        self.args_text = args_text
        self.id = id
        self.status = "pending"
        self.result: str | None = None
        self.result_bytes = 0
        self.truncated = truncated


class _KeyStats:
    __slots__ = ("count", "first", "last", "last_error", "tool")

    def __init__(self, tool: str, event: int):
        self.tool = tool
        self.count = 0
        self.first = event
        self.last = event
        self.last_error: str | None = None


class CallLog:
    """The calls of one run as its reviews show them. Every observation is one event (the
    number a review names a call by); the log keeps the last ``recent`` calls with their
    results, pairs each result with its call (by id, else the oldest call of that name still
    waiting), and the long-term record of the ``record_keys`` most recently used canonical
    keys. Not thread-safe on its own (``Supervision`` locks)."""

    __slots__ = ("_by_id", "_by_name", "_canonical_key", "_events", "_keys", "_recent",
                 "payload_limit", "record_keys")

    def __init__(self, canonical_key: Callable[[str, Any], int], *, recent: int,
                 payload_limit: int, record_keys: int):
        self._canonical_key = canonical_key  # the session's engine's keys
        self.payload_limit = payload_limit
        self.record_keys = record_keys
        self._events = 0
        self._recent: deque[ObservedCall] = deque(maxlen=recent)
        self._by_id: OrderedDict[str, ObservedCall] = OrderedDict()
        self._by_name: dict[str, deque[ObservedCall]] = {}
        self._keys: OrderedDict[int, _KeyStats] = OrderedDict()

    def count_event(self) -> int:
        """One observation: its event number."""
        event = self._events
        self._events += 1
        return event

    def new_call(self, name: str, args: Any, id: str | None) -> ObservedCall:
        """A call keyed and its arguments cut, not recorded yet (``add`` records it). Needs no
        lock: the caller keys it before taking one."""
        name = name_str(name)
        raw = args_bytes(args)  # serialized once: the key reads the same bytes
        key = self._canonical_key(name, raw)
        limit = self.payload_limit
        cut = len(raw) > limit
        args_text = (raw[:limit] if cut else raw).decode("utf-8", "ignore" if cut else "replace")
        return ObservedCall(name, key, args_text, id, cut)

    def add(self, call: ObservedCall) -> None:
        """The call made: numbered, in the recent window, waiting for its result, counted in
        its key's record."""
        call.event = self.count_event()
        self._recent.append(call)
        if call.id is not None:
            self._by_id[call.id] = call
            if len(self._by_id) > PENDING_RESULTS:
                self._by_id.popitem(last=False)
        else:
            waiting = self._by_name.setdefault(call.tool, deque(maxlen=PENDING_RESULTS))
            waiting.append(call)
        stats = self._keys.get(call.key)
        if stats is None:
            stats = self._keys[call.key] = _KeyStats(call.tool, call.event)
            if len(self._keys) > self.record_keys:
                self._keys.popitem(last=False)
        else:
            self._keys.move_to_end(call.key)
        stats.count += 1
        stats.last = call.event

    def result(self, name: str | None, *, id: str | None, error: Any, no_op: Any,
               payload: Any) -> tuple[ObservedCall, str] | None:
        """A result (one event), paired with its call: the call and the result's full text
        (its payload, or its error's), or None when no call waits for it."""
        failed = error_failed(error)
        self.count_event()
        call = self._by_id.pop(id, None) if id is not None else None
        if call is None and name is not None:
            waiting = self._by_name.get(name)
            if waiting:
                call = waiting.popleft()
        if call is None:
            return None
        if failed:
            call.status = "error"
            text = error if isinstance(error, str) else (
                "" if error is True else json_text(error))
        else:
            call.status = "no_op" if no_op is True else "ok"
            text = _text_of(payload)
        call.result_bytes = len(text.encode("utf-8", "surrogatepass"))
        call.result, cut = _cut(text, self.payload_limit)
        call.truncated = call.truncated or cut
        stats = self._keys.get(call.key)
        if stats is not None:
            stats.last_error = error_signature(error) if failed else None
        return call, text

    def recent(self) -> tuple[ReviewedCall, ...]:
        """The recent window, oldest first, as the review shows it."""
        return tuple(ReviewedCall(c.event, c.tool, f"{c.key:016x}", c.args_text, c.status,
                                  c.result, c.result_bytes, c.truncated) for c in self._recent)

    def record(self, limit: int) -> tuple[KeyRecord, ...]:
        """The long-term record of the ``limit`` most called keys (the latest first among
        equals)."""
        ranked = sorted(self._keys.items(), key=lambda kv: (-kv[1].count, -kv[1].last))
        return tuple(KeyRecord(f"{k:016x}", s.tool, s.count, s.first, s.last, s.last_error)
                     for k, s in ranked[:limit])


def _cut(text: str, limit: int) -> tuple[str, bool]:
    """The text cut to ``limit`` UTF-8 bytes at a character boundary."""
    data = text.encode("utf-8", "surrogatepass")
    if len(data) <= limit:
        return text, False
    return data[:limit].decode("utf-8", "ignore"), True


def _text_of(value: Any) -> str:
    """A success's payload as text: a string as given, anything else as its bytes, decoded."""
    if isinstance(value, str):
        return value
    data = payload_bytes(value)
    return "" if data is None else data.decode("utf-8", "replace")
