"""``codex exec --json`` event streams (Codex's stdout in CI: one ``ThreadEvent`` per line),
streamed line by line. Sources: ``openai/codex`` ``codex-rs/exec/src/exec_events.rs`` and
``event_processor_with_jsonl_output.rs``, and real streams of codex-cli 0.147.0
(``../shared/format-samples/codex-exec-json``).

- The session is the thread: ``thread.started.thread_id`` (``codex exec resume`` continues a
  thread under the same id, in a stream of its own).
- ``turn.started`` starts a turn; ``turn.completed`` / ``turn.failed`` end it.
- Items (``item.started`` / ``item.updated`` / ``item.completed``, joined by ``item.id``): a
  ``command_execution`` is the call ``exec_command`` with the command Codex ran, its shell
  wrapper (``/bin/bash -lc '...'``) taken off, at ``item.started``, and its result at
  ``item.completed``: ``aggregated_output``, a failure when ``exit_code`` is non-zero or the
  status ``failed`` / ``declined``. ``file_change`` is ``apply_patch`` (``status: failed``: a
  failure), ``mcp_tool_call`` is ``mcp__<server>__<tool>`` (``error``: a failure),
  ``web_search`` is ``web_search``, ``collab_tool_call`` is its ``tool`` (``spawn_agent``,
  ``wait`` ...: the sub-agents' own threads are streams of their own). An item seen only
  completed is its call and result at once. ``agent_message`` is the agent's words;
  ``reasoning``, ``todo_list``, ``plan`` and ``error`` items (non-fatal notices) are skipped.
- Usage: ``turn.completed.usage`` is the thread's running total (codex-cli 0.147.0: a resumed
  thread's first turn reports the earlier turns too), so each one is charged the difference
  from the thread's previous total in the stream: one usage per turn (a turn's model calls
  are not reported one by one), no model (the stream names none). ``cached_input_tokens`` are
  part of ``input_tokens``, as OpenAI counts them.
- The ``error`` line (a fatal stream error before ``turn.failed``) is skipped.
"""

from __future__ import annotations

import re
import shlex
from collections.abc import Iterator
from functools import partial
from pathlib import Path
from typing import Any

import orjson

from ...errors import InvalidEvent
from ..events import Call, Event, Result, Text, Usage
from ._base import Item, Turns, block_text, command_args, items_at, json_lines

NAME = "codex-exec"
LINE_TYPES = frozenset({"thread.started", "turn.started", "turn.completed", "turn.failed",
                        "item.started", "item.updated", "item.completed", "item.plan.delta",
                        "request_user_input"})
SHELL = "exec_command"
#: items that are no tool call
_SKIPPED_ITEMS = frozenset({"reasoning", "todo_list", "plan", "error"})
_WRAPPER = re.compile(r"^(?:/\S*/)?(?:ba|z)?sh -l?c (.+)$", re.DOTALL)


def sniff(value: Any) -> bool:
    """A ``ThreadEvent`` line: a known ``type`` (a fatal ``error`` line is
    ``{"type": "error", "message"}`` and nothing else)."""
    if type(value) is not dict:
        return False
    kind = value.get("type")
    if kind == "error":
        return isinstance(value.get("message"), str) and value.keys() <= {"type", "message"}
    return kind in LINE_TYPES


class _State:
    __slots__ = ("items", "name", "totals", "turns")

    def __init__(self, name: str) -> None:
        self.name = name
        self.turns = Turns()
        self.items: dict[str, str] = {}  # started item id -> tool name, until completed
        self.totals: dict[str, dict[str, int]] = {}  # thread -> its last reported usage


def unwrapped(command: str) -> str:
    """The command inside Codex's shell wrapper (``/bin/bash -lc 'ls -la'`` -> ``ls -la``)."""
    match = _WRAPPER.match(command)
    if match is None:
        return command
    try:
        words = shlex.split(match.group(1))
    except ValueError:
        return command
    return words[0] if len(words) == 1 else command


def _call(item: dict[str, Any]) -> Call | None:
    kind, ident = item.get("type"), item["id"]
    if kind == "command_execution":
        command = item.get("command")
        if not isinstance(command, str):
            raise InvalidEvent("a command_execution item needs a string 'command'")
        return Call(SHELL, command_args(unwrapped(command)), ident)
    if kind == "file_change":
        return Call("apply_patch", {"changes": item.get("changes")}, ident)
    if kind == "mcp_tool_call":
        server, tool = item.get("server"), item.get("tool")
        if not isinstance(server, str) or not isinstance(tool, str):
            raise InvalidEvent("an mcp_tool_call item needs a string 'server' and 'tool'")
        return Call(f"mcp__{server}__{tool}", item.get("arguments"), ident)
    if kind == "web_search":
        return Call("web_search", {"query": item.get("query")}, ident)
    if kind == "collab_tool_call":
        tool = item.get("tool")
        if not isinstance(tool, str):
            raise InvalidEvent("a collab_tool_call item needs a string 'tool'")
        return Call(tool, {"prompt": item.get("prompt"),
                           "receiver_thread_ids": item.get("receiver_thread_ids")}, ident)
    return None  # an item type of a newer version: no call


def _result(item: dict[str, Any], name: str) -> Result:
    kind, ident, status = item.get("type"), item["id"], item.get("status")
    error: Any = None
    if kind == "command_execution":
        output = item.get("aggregated_output")
        payload = output if isinstance(output, str) else ""
        code = item.get("exit_code")
        if (isinstance(code, int) and not isinstance(code, bool) and code != 0) or \
                status in ("failed", "declined"):
            error = payload or (f"exit code {code}" if code is not None else status)
    elif kind == "mcp_tool_call":
        result = item.get("result")
        content = result.get("content") if isinstance(result, dict) else None
        payload = block_text(content)
        failed = item.get("error")
        if isinstance(failed, dict) or status == "failed":
            message = failed.get("message") if isinstance(failed, dict) else None
            error = message if isinstance(message, str) and message else True
    else:
        payload = orjson.dumps({k: v for k, v in item.items() if k not in ("id", "type")}
                               ).decode()
        if status in ("failed", "declined"):
            error = True
    return Result(name=name, id=ident, error=error, payload=payload)


def _usage(value: dict[str, Any], state: _State) -> Iterator[Usage]:
    usage = value.get("usage")
    if not isinstance(usage, dict):
        return
    counts = {k: v for k, v in usage.items()
              if isinstance(v, int) and not isinstance(v, bool) and v >= 0}
    previous = state.totals.get(state.name, {})
    state.totals[state.name] = counts

    def charged(key: str) -> int | None:
        now, before = counts.get(key), previous.get(key, 0)
        return None if now is None else max(0, now - before)

    yield Usage(input_tokens=charged("input_tokens"), output_tokens=charged("output_tokens"),
                cache_read_tokens=charged("cached_input_tokens"),
                cache_write_tokens=charged("cache_write_input_tokens") or None,
                provider="openai")


def _events(value: dict[str, Any], state: _State) -> Iterator[Event]:
    kind = value["type"]
    if kind == "thread.started":
        thread = value.get("thread_id")
        if not isinstance(thread, str) or not thread:
            raise InvalidEvent("a thread.started line needs a string 'thread_id'")
        if thread != state.name:
            yield from state.turns.end()
            state.name = thread
    elif kind == "turn.started":
        state.items.clear()  # item ids restart with each process
        yield from state.turns.start()
    elif kind == "turn.completed":
        yield from _usage(value, state)
        yield from state.turns.end()
    elif kind == "turn.failed":
        yield from state.turns.end()
    elif kind in ("item.started", "item.completed"):
        item = value.get("item")
        if not isinstance(item, dict) or not isinstance(item.get("id"), str):
            raise InvalidEvent(f"an {kind} line needs an 'item' object with a string 'id'")
        itype = item.get("type")
        if itype == "agent_message":
            if kind == "item.completed" and isinstance(item.get("text"), str) and item["text"]:
                yield Text(item["text"])
            return
        if itype in _SKIPPED_ITEMS:
            return
        name = state.items.get(item["id"])
        if name is None:  # not seen started: its call now
            call = _call(item)
            if call is None:
                return
            name = call.name
            yield call
            state.items[item["id"]] = name
        if kind == "item.completed":
            del state.items[item["id"]]
            yield _result(item, name)
    # item.updated, error, plan deltas, user-input requests: nothing


def read(path: Path, name: str) -> Iterator[Item]:
    state = _State(name)
    for number, value in json_lines(path):
        if isinstance(value, InvalidEvent):
            yield Item(state.name, number, error=value)
            continue
        if not sniff(value):
            yield Item(state.name, number, error=InvalidEvent(
                "not a codex exec --json line (expected an object with type thread.started, "
                "turn.started, item.completed, turn.completed ...)", source=str(path),
                line=number))
            continue
        yield from items_at(state.name, number, path, partial(_events, value, state))
    for event in state.turns.end():
        yield Item(state.name, 0, event)
