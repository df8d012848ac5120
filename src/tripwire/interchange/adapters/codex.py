"""Codex CLI rollouts (``~/.codex/sessions/YYYY/MM/DD/rollout-<time>-<id>.jsonl``), streamed
line by line. Every line is ``{"timestamp", "type", "payload"}``.

- The session is named by ``session_meta.payload.id`` (the thread id).
- ``event_msg`` ``user_message`` starts a turn; ``task_complete``/``turn_complete`` and
  ``turn_aborted`` end it.
- ``response_item`` payloads are Responses items (calls, outputs with the exit code inferred
  from the text, assistant messages as the agent's words); user ``message`` items are not turns
  (they also carry injected context; ``user_message`` is the typed prompt).
- ``event_msg`` ``token_count`` with ``info.last_token_usage`` is one usage event, priced by the
  model of the latest ``turn_context``; a repeat with the same cumulative totals is skipped; a
  count with only the totals (``total_token_usage``) gives the difference from the previous
  totals. ``UsageState`` / ``usage_events`` are the rule, also used by the live hook.
- A ``compacted`` line is a compaction (``event_msg`` ``context_compacted`` is the notice of
  the same one: one compaction either way, the second of an adjacent pair is skipped); the
  rollout does not say whether the user (``/compact``) or Codex started it: ``automatic``
  false.
- ``agent_message`` (a mirror of the assistant message item), ``reasoning``, ``turn_context``
  and other event types are skipped.
"""

from __future__ import annotations

from collections.abc import Iterator
from functools import partial
from pathlib import Path
from typing import Any

from ...errors import InvalidEvent
from ..events import Compaction, Event, Usage
from ._base import Item, Turns, items_at, json_lines
from .openai_responses import ITEM_TYPES, item_events, usage_of

__all__ = ["NAME", "sniff", "read", "UsageState", "usage_events", "LINE_TYPES"]

NAME = "codex"
LINE_TYPES = frozenset({"session_meta", "response_item", "event_msg", "turn_context",
                        "compacted"})
_TURN_ENDS = frozenset({"task_complete", "turn_complete", "turn_aborted"})


def sniff(value: Any) -> bool:
    return (isinstance(value, dict) and value.get("type") in LINE_TYPES
            and isinstance(value.get("payload"), dict))


class UsageState:
    """What reading usage needs from earlier lines: the model of the latest ``turn_context``
    and the last ``token_count``'s cumulative totals."""

    __slots__ = ("model", "totals")

    def __init__(self, model: str | None = None, totals: Any = None):
        self.model = model
        self.totals = totals


class _State(UsageState):
    __slots__ = ("compacted", "name", "names", "turns")

    def __init__(self, name: str):
        super().__init__()
        self.name = name
        self.turns = Turns()
        self.names: dict[str, str] = {}
        #: the kind of compaction marker just read ("compacted", "context_compacted"), until
        #: a line of anything else: its twin right after it is the same compaction
        self.compacted: str | None = None


def usage_events(kind: str, payload: dict[str, Any], state: UsageState) -> Iterator[Usage]:
    """The usage of one rollout line (``turn_context`` sets the model, ``token_count`` is a
    model call's usage once)."""
    if kind == "turn_context":
        if isinstance(payload.get("model"), str):
            state.model = payload["model"]
        return
    if kind != "event_msg" or payload.get("type") != "token_count":
        return
    info = payload.get("info")
    if not isinstance(info, dict):
        return  # a rate-limit-only update
    totals = info.get("total_token_usage")
    if totals is not None and totals == state.totals:
        return  # the same count again
    previous, state.totals = state.totals, totals
    last = info.get("last_token_usage")
    if not isinstance(last, dict) and isinstance(totals, dict):
        last = _difference(totals, previous if isinstance(previous, dict) else {})
    usage = usage_of(_responses_shape(last), state.model)
    if usage is not None:
        yield usage


def _difference(totals: dict[str, Any], previous: dict[str, Any]) -> dict[str, Any]:
    """This request's counts from two cumulative totals (a count that is missing or went
    backwards is left out)."""
    out = {}
    for key in ("input_tokens", "cached_input_tokens", "output_tokens"):
        now, before = totals.get(key), previous.get(key, 0)
        if _is_count(now) and _is_count(before) and now >= before:
            out[key] = now - before
    return out


def _is_count(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def read(path: Path, name: str) -> Iterator[Item]:
    state = _State(name)
    for number, value in json_lines(path):
        if isinstance(value, InvalidEvent):
            yield Item(state.name, number, error=value)
            continue
        if isinstance(value, dict) and "payload" not in value and value.get("type") in ITEM_TYPES:
            value = {"type": "response_item", "payload": value}  # the earliest, flat lines
        if not sniff(value):
            yield Item(state.name, number, error=InvalidEvent(
                "not a Codex rollout line (expected {timestamp, type, payload} with type "
                "session_meta, response_item, event_msg, turn_context or compacted)",
                source=str(path), line=number))
            continue
        yield from items_at(state.name, number, path,
                            partial(_events, value["type"], value["payload"], state))
    for event in state.turns.end():
        yield Item(state.name, 0, event)


def _events(kind: str, payload: dict[str, Any], state: _State) -> Iterator[Event]:
    marker = kind if kind == "compacted" else (
        "context_compacted" if kind == "event_msg" and payload.get("type") == "context_compacted"
        else None)
    if marker is not None:
        if state.compacted is None or state.compacted == marker:
            yield Compaction(mechanical=False, automatic=False)
            state.compacted = marker
        else:
            state.compacted = None  # the twin of the marker before it
        return
    if kind != "turn_context" and not (kind == "event_msg"
                                       and payload.get("type") == "token_count"):
        state.compacted = None
    if kind == "session_meta":
        if isinstance(payload.get("id"), str) and payload["id"] and not state.turns.open:
            state.name = payload["id"]
    elif kind == "turn_context":
        yield from usage_events(kind, payload, state)
    elif kind == "response_item":
        yield from item_events(payload, state.turns, state.names, user_turns=False)
    elif kind == "event_msg":
        event = payload.get("type")
        if event == "user_message":
            yield from state.turns.start()
        elif event in _TURN_ENDS:
            yield from state.turns.end()
        elif event == "token_count":
            yield from usage_events(kind, payload, state)


def _responses_shape(last: Any) -> Any:
    """Codex's ``TokenUsage`` in the Responses ``usage`` shape (``cached_input_tokens`` is a
    part of ``input_tokens``, as there)."""
    if not isinstance(last, dict):
        return None
    return {"input_tokens": last.get("input_tokens"), "output_tokens": last.get("output_tokens"),
            "input_tokens_details": {"cached_tokens": last.get("cached_input_tokens")}}
