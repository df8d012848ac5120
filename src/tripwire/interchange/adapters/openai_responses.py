"""OpenAI Responses API items: a JSON array of items (or an object with ``input`` and/or
``output`` item lists, as a request or a saved response), read whole. The item mapping is shared
with the Codex rollout reader, whose ``response_item`` lines are these items.

``function_call`` (``arguments``: JSON text), ``custom_tool_call`` (``input``: raw text) and
``local_shell_call`` are calls, paired with their ``*_output`` by ``call_id``; ``message``
items with role ``user`` start a turn and with role ``assistant`` are the agent's words;
``reasoning`` and unknown item types are skipped. The Responses API writes no error flag on an
output; shell outputs say their exit code (``{"metadata": {"exit_code": N}}``, ``Exit code: N``,
``Process exited with code N``), and a non-zero one makes a failure.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import orjson

from ...base.validate import reader_count
from ...errors import InvalidEvent
from ..events import Call, Event, Result, Text, Usage
from ._base import Item, Turns, block_text, positioned, read_document

NAME = "openai-responses"
CALLS = frozenset({"function_call", "custom_tool_call", "local_shell_call"})
OUTPUTS = frozenset({"function_call_output", "custom_tool_call_output",
                     "local_shell_call_output"})
ITEM_TYPES = CALLS | OUTPUTS | {"message", "reasoning", "web_search_call", "compaction",
                                "tool_search_call", "tool_search_output",
                                "image_generation_call"}
LOCAL_SHELL = "local_shell"
_EXIT = re.compile(r"(?:^|\n)(?:Exit code:|Process exited with code) (-?\d+)")


def items_of(value: Any) -> list[Any] | None:
    """The item list of a document: itself, or a request's ``input`` then its ``output``."""
    if isinstance(value, dict):
        parts = (value.get("input"), value.get("output"))
        value = [item for part in parts if isinstance(part, list) for item in part] or None
    if isinstance(value, list) and value and all(
            isinstance(i, dict) and i.get("type") in ITEM_TYPES for i in value[:8]):
        return value
    return None


def sniff(value: Any) -> bool:
    return items_of(value) is not None


#: the framing Codex's ``exec_command`` puts around a command's output: a fresh chunk id and
#: wall time on every run (not the command's answer: the same command, the same output)
_EXEC_FRAME = re.compile(r"\A(?:Chunk ID: \S*\n)?(?:Wall time: [^\n]*\n)?"
                         r"(Process exited with code -?\d+\n)?(?:Original token count: \d+\n)?"
                         r"(?=Output:\n)")


def exec_output(output: str) -> str:
    """A Codex ``exec_command`` output without its per-run framing (chunk id, wall time,
    token count); its exit code and output kept. Any other output as it is."""
    if not output.startswith(("Chunk ID: ", "Wall time: ")):
        return output
    match = _EXEC_FRAME.match(output)
    return output if match is None else (match.group(1) or "") + output[match.end():]


def exit_failure(output: str) -> bool:
    """Whether a shell tool's output text reports a non-zero exit code."""
    if output.startswith("{"):
        try:
            decoded = orjson.loads(output)
        except orjson.JSONDecodeError:
            decoded = None
        metadata = decoded.get("metadata") if isinstance(decoded, dict) else None
        if isinstance(metadata, dict) and isinstance(metadata.get("exit_code"), int):
            return bool(metadata["exit_code"] != 0)
    match = _EXIT.search(output[:4096])
    return match is not None and int(match.group(1)) != 0


def item_events(item: dict[str, Any], turns: Turns, names: dict[str, str],
                user_turns: bool = True) -> Iterator[Event]:
    """One Responses item as events. ``user_turns=False``: user messages start no turn (the
    Codex rollout takes turns from its own ``user_message`` events instead)."""
    kind = item.get("type")
    if kind == "message":
        role = item.get("role")
        if role == "assistant":
            text = block_text(item.get("content"))
            if text:
                yield Text(text)
        elif role == "user" and user_turns:
            yield from turns.start()
    elif kind in CALLS:
        ident = item.get("call_id") if isinstance(item.get("call_id"), str) else None
        if kind == "local_shell_call":
            name: Any = LOCAL_SHELL
            action = item.get("action")
            args: Any = {"command": action.get("command")} if isinstance(action, dict) else None
        else:
            name = item.get("name")
            args = item.get("arguments" if kind == "function_call" else "input")
        if not isinstance(name, str):
            raise InvalidEvent(f"a {kind} item needs a string 'name'")
        if ident is not None:
            names[ident] = name
        yield Call(name, args, ident)
    elif kind in OUTPUTS:
        ident = item.get("call_id") if isinstance(item.get("call_id"), str) else None
        output = item.get("output")
        text = exec_output(output if isinstance(output, str) else block_text(output))
        yield Result(name=names.get(ident) if ident else None, id=ident,
                     error=text if exit_failure(text) else None, payload=text)


def usage_of(usage: Any, model: str | None) -> Usage | None:
    """A Responses ``usage`` object (cached tokens are part of ``input_tokens``)."""
    if not isinstance(usage, dict):
        return None
    details = usage.get("input_tokens_details")
    cached = details.get("cached_tokens") if isinstance(details, dict) else None
    return Usage(model=model, input_tokens=_count(usage.get("input_tokens")),
                 output_tokens=_count(usage.get("output_tokens")),
                 cache_read_tokens=_count(cached), provider="openai")


def _count(value: Any) -> int | None:
    return reader_count(value, "usage token count")


def read(path: Path, name: str, document: Any = None) -> Iterator[Item]:
    document = read_document(path, document)
    items = items_of(document)
    if items is None:
        raise InvalidEvent("not a list of OpenAI Responses items (expected a JSON array of "
                           "{type: message|function_call|function_call_output|...} items)",
                           source=str(path))
    turns, names = Turns(), dict[str, str]()  # call id -> tool name
    yield from positioned(name, path, items, lambda i: item_events(i, turns, names))
    if isinstance(document, dict):
        model = document.get("model") if isinstance(document.get("model"), str) else None
        usage = usage_of(document.get("usage"), model)
        if usage is not None:
            yield Item(name, len(items), usage)
    for event in turns.end():
        yield Item(name, len(items), event)
