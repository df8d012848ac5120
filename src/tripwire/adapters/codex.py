"""Codex CLI rollouts (``~/.codex/sessions/YYYY/MM/DD/rollout-<time>-<id>.jsonl``), streamed
line by line. Every line is ``{"timestamp", "type", "payload"}``.

- The session is named by ``session_meta.payload.id`` (the thread id).
- ``event_msg`` ``user_message`` starts a turn; ``task_complete``/``turn_complete`` and
  ``turn_aborted`` end it.
- ``response_item`` payloads are Responses items (calls, outputs with the exit code inferred
  from the text, assistant messages as the agent's words); user ``message`` items are not turns
  (they also carry injected context; ``user_message`` is the typed prompt).
- ``event_msg`` ``token_count`` with ``info.last_token_usage`` is one usage event, priced by the
  model of the latest ``turn_context``; a repeat with the same cumulative totals is skipped.
- ``agent_message`` (a mirror of the assistant message item), ``reasoning``, ``turn_context``,
  ``compacted`` and other event types are skipped.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

from ..errors import InvalidEvent
from ..events import Event
from ._base import Item, Turns, items_at, json_lines
from .openai_responses import ITEM_TYPES, item_events, usage_of

NAME = "codex"
SUFFIXES = (".jsonl",)
LINE_TYPES = frozenset({"session_meta", "response_item", "event_msg", "turn_context",
                        "compacted"})
_TURN_ENDS = frozenset({"task_complete", "turn_complete", "turn_aborted"})


def sniff(value: Any) -> bool:
    return (isinstance(value, dict) and value.get("type") in LINE_TYPES
            and isinstance(value.get("payload"), dict))


class _State:
    __slots__ = ("model", "name", "names", "totals", "turns")

    def __init__(self, name: str):
        self.name = name
        self.turns = Turns()
        self.names: dict[str, str] = {}
        self.model: str | None = None
        self.totals: Any = None  # the last token_count's cumulative totals


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
                            lambda v=value: _events(v["type"], v["payload"], state))
    for event in state.turns.end():
        yield Item(state.name, 0, event)


def _events(kind: str, payload: dict[str, Any], state: _State) -> Iterator[Event]:
    if kind == "session_meta":
        if isinstance(payload.get("id"), str) and payload["id"] and not state.turns.open:
            state.name = payload["id"]
    elif kind == "turn_context":
        if isinstance(payload.get("model"), str):
            state.model = payload["model"]
    elif kind == "response_item":
        yield from item_events(payload, state.turns, state.names, user_turns=False)
    elif kind == "event_msg":
        event = payload.get("type")
        if event == "user_message":
            yield from state.turns.start()
        elif event in _TURN_ENDS:
            yield from state.turns.end()
        elif event == "token_count":
            info = payload.get("info")
            if not isinstance(info, dict):
                return  # a rate-limit-only update
            totals = info.get("total_token_usage")
            if totals is not None and totals == state.totals:
                return  # the same count again
            state.totals = totals
            usage = usage_of(_responses_shape(info.get("last_token_usage")), state.model)
            if usage is not None:
                yield usage


def _responses_shape(last: Any) -> Any:
    """Codex's ``TokenUsage`` in the Responses ``usage`` shape (``cached_input_tokens`` is a
    part of ``input_tokens``, as there)."""
    if not isinstance(last, dict):
        return None
    return {"input_tokens": last.get("input_tokens"), "output_tokens": last.get("output_tokens"),
            "input_tokens_details": {"cached_tokens": last.get("cached_input_tokens")}}
