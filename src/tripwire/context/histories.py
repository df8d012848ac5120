"""Provider message histories: which format a history is in, and how a compacted one is
rebuilt so the provider still accepts it.

A compaction replaces the oldest part of a history with one boundary message (a summary, or
the mechanical truncation's digest). What is left must be a valid request for its format:

- ``openai-chat`` (``role`` system/developer/user/assistant/tool, ``tool_calls``): every
  ``tool`` message answers a call of the assistant message just before it (only tool messages
  between); every call is answered.
- ``anthropic`` (``role`` user/assistant, ``content`` text or blocks): the first message is the
  user's; roles alternate; a ``tool_result`` answers a ``tool_use`` of the assistant message
  just before, and every ``tool_use`` is answered by the next user message, results first.
- ``openai-responses`` (input items: messages, ``function_call``, ``function_call_output``):
  every output follows its call (same ``call_id``); every call has an output.

Every format keeps its leading system (and developer) messages and the first user message
(the task) in place, ahead of the boundary. A result whose call was dropped is dropped; a call
whose result is missing gets a synthesized result saying so (an error result for Anthropic),
because dropping the call would rewrite what the model said. Anything else (plain strings,
interchange events) is rebuilt as leading system messages, first user message, boundary, tail.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

__all__ = ["FORMATS", "detect_format", "kept_prefix", "rebuild", "MISSING_RESULT"]

FORMATS = ("openai-chat", "anthropic", "openai-responses")

#: The synthesized result of a call whose result is not in the rebuilt history.
MISSING_RESULT = ("[no result: this call's result was not kept when the context was "
                  "truncated; re-run the tool if you need it]")

_SYSTEM_ROLES = ("system", "developer")
_RESPONSES_TYPES = ("message", "function_call", "function_call_output")


def _role(message: Any) -> Any:
    return message.get("role") if isinstance(message, Mapping) else None


def _blocks(message: Any) -> list[Any]:
    content = message.get("content") if isinstance(message, Mapping) else None
    return content if isinstance(content, list) else []


def _block_type(block: Any) -> Any:
    return block.get("type") if isinstance(block, Mapping) else None


def _is_tool_results(message: Any) -> bool:
    """An Anthropic user message that only carries tool results (not a user's words)."""
    blocks = _blocks(message)
    return bool(blocks) and all(_block_type(b) == "tool_result" for b in blocks)


def detect_format(messages: Sequence[Any]) -> str | None:
    """``openai-chat``, ``anthropic``, ``openai-responses``, or None (not a provider history).
    A history of plain user/assistant text fits both chat formats: it is read as
    ``anthropic``, whose rules (alternation) are the stricter, so the result suits both."""
    if not messages or not all(isinstance(m, Mapping) for m in messages):
        return None
    if any(m.get("type") in _RESPONSES_TYPES for m in messages):
        return "openai-responses"
    if any(m.get("role") in ("tool", *_SYSTEM_ROLES) or m.get("tool_calls") for m in messages):
        return "openai-chat"
    if all(m.get("role") in ("user", "assistant") for m in messages):
        return "anthropic"
    return None


def kept_prefix(messages: Sequence[Any], start: int) -> list[int]:
    """Indices before ``start`` that a compaction keeps in place: the leading system and
    developer messages and the first user message (the task), if they are not in the tail."""
    kept = []
    i = 0
    while i < start and _role(messages[i]) in _SYSTEM_ROLES:
        kept.append(i)
        i += 1
    for j, message in enumerate(messages):
        if _role(message) == "user" and not _is_tool_results(message):
            if j < start and j not in kept:
                kept.append(j)
            break
    return kept


def rebuild(messages: Sequence[Any], keep: int, boundary: str, role: str = "user",
            fmt: str | None = None) -> list[Any]:
    """The history after a compaction: kept prefix, the boundary message, the last ``keep``
    messages, repaired to the rules of its format (``fmt``, detected when None)."""
    fmt = fmt if fmt is not None else detect_format(messages)
    if fmt is not None and fmt not in FORMATS:
        raise ValueError(f"history format must be one of {', '.join(FORMATS)}, not {fmt!r}")
    start = len(messages) - keep if keep else len(messages)
    head = [messages[i] for i in kept_prefix(messages, start)]
    tail = list(messages[start:])
    if fmt == "anthropic":
        return _anthropic([*head, {"role": "user", "content": boundary}, *tail])
    items = [*head, {"role": role, "content": boundary}, *tail]
    if fmt == "openai-chat":
        return _chat(items)
    if fmt == "openai-responses":
        return _responses(items)
    return items


def _chat(items: list[Any]) -> list[Any]:
    out: list[Any] = []
    pending: dict[Any, bool] = {}  # the last assistant message's call ids: answered yet?

    def answer_the_rest() -> None:
        for ident, answered in pending.items():
            if not answered:
                out.append({"role": "tool", "tool_call_id": ident, "content": MISSING_RESULT})
        pending.clear()

    for message in items:
        if _role(message) == "tool":
            ident = message.get("tool_call_id")
            if pending.get(ident) is False:
                pending[ident] = True
                out.append(message)
            continue  # a result whose call is not just before it: dropped
        answer_the_rest()
        out.append(message)
        if _role(message) == "assistant":
            for call in message.get("tool_calls") or ():
                if isinstance(call, Mapping):
                    pending.setdefault(call.get("id"), False)
    answer_the_rest()
    return out


def _responses(items: list[Any]) -> list[Any]:
    calls = [m.get("call_id") for m in items
             if isinstance(m, Mapping) and m.get("type") == "function_call"]
    seen: set[Any] = set()
    answered: set[Any] = set()
    out: list[Any] = []
    for message in items:
        kind = message.get("type") if isinstance(message, Mapping) else None
        if kind == "function_call_output":
            ident = message.get("call_id")
            if ident in seen and ident not in answered:
                answered.add(ident)
                out.append(message)
            continue  # its call was dropped (or it answers twice)
        out.append(message)
        if kind == "function_call":
            seen.add(message.get("call_id"))
    missing = [c for c in calls if c not in answered]
    if not missing:
        return out
    repaired = []
    for message in out:  # a synthesized output right after its call
        repaired.append(message)
        if isinstance(message, Mapping) and message.get("type") == "function_call" \
                and message.get("call_id") in missing:
            repaired.append({"type": "function_call_output", "call_id": message["call_id"],
                             "output": MISSING_RESULT})
    return repaired


def _as_blocks(content: Any) -> list[Any]:
    if isinstance(content, list):
        return list(content)
    return [{"type": "text", "text": content if isinstance(content, str) else str(content)}]


def _merge(a: Mapping[str, Any], b: Mapping[str, Any]) -> dict[str, Any]:
    """Two messages of one role as one (Anthropic roles alternate)."""
    ca, cb = a.get("content"), b.get("content")
    if isinstance(ca, str) and isinstance(cb, str):
        return {**a, "content": f"{ca}\n\n{cb}"}
    return {**a, "content": _as_blocks(ca) + _as_blocks(cb)}


def _alternating(items: list[Any]) -> list[Any]:
    """Consecutive messages of one role merged into one."""
    merged: list[Any] = []
    for message in items:
        if merged and _role(merged[-1]) == _role(message):
            merged[-1] = _merge(merged[-1], message)
        else:
            merged.append(message)
    return merged


def _anthropic(items: list[Any]) -> list[Any]:
    merged = _alternating(items)
    out: list[Any] = []
    for i, message in enumerate(merged):
        if _role(message) != "user":
            out.append(message)
            continue
        asked = _tool_uses(merged[i - 1]) if i > 0 else []
        content = message.get("content")
        if not isinstance(content, list) and not asked:
            out.append(message)  # the user's words, answering no tool call
            continue
        results: dict[Any, Any] = {}
        others = []
        for block in _as_blocks(content):
            if _block_type(block) == "tool_result":
                ident = block.get("tool_use_id")
                if ident in asked and ident not in results:
                    results[ident] = block
                continue  # a result answering no tool_use just before it: dropped
            others.append(block)
        blocks = [results.get(ident) or _missing_block(ident) for ident in asked] + others
        if blocks:  # results first, as the API requires
            out.append({**message, "content": blocks})
    # an assistant tool_use answered by no user message after it (the end, or another turn)
    final: list[Any] = []
    for i, message in enumerate(out):
        final.append(message)
        asked = _tool_uses(message)
        if asked and (i + 1 == len(out) or _role(out[i + 1]) != "user"):
            final.append({"role": "user", "content": [_missing_block(x) for x in asked]})
    # dropping an emptied user message can leave two assistants in a row: merge them
    return _alternating(final)


def _tool_uses(message: Any) -> list[Any]:
    if _role(message) != "assistant":
        return []
    return [b.get("id") for b in _blocks(message) if _block_type(b) == "tool_use"]


def _missing_block(ident: Any) -> dict[str, Any]:
    return {"type": "tool_result", "tool_use_id": ident, "content": MISSING_RESULT,
            "is_error": True}
