"""Usage from the harness's transcript (``transcript_path``), read incrementally.

Hooks carry no token usage; the transcript does, written asynchronously (it may lag the turn
in progress). Each invocation reads only the bytes written since the last one (the offset is
kept in the hook state), so a long session costs each invocation only its new lines.

Claude Code repeats a response's usage on each of its content lines (same ``message.id``; the
first chunks' ``output_tokens`` are partial): the usage is taken once per id, from the last
line of that id. A response is final once a line of another response or a user line follows
it; the offset stays at the first line of a response not yet final, so the next invocation
reads it again, whole. The usage itself is read by the transcript adapter's ``usage_of``
and priced by the dispatcher's rule (``session.dispatch.usage_arguments``, the ``prices`` extra).
A Gemini CLI recording (a JSON document rewritten whole, or its JSON Lines log) is read whole
by its transcript reader, and the responses past those already charged are charged.
A Codex rollout's lines are final once written: each ``token_count`` is one request's usage
(the adapter's rule, ``adapters.codex.usage_events``), priced by the model of the latest
``turn_context``; the model and the last cumulative totals (for the repeat that must not count
twice) are kept between invocations in ``memo``.
"""

from __future__ import annotations

import os
from typing import Any

from ...errors import InvalidEvent

__all__ = ["transcript_usage"]


def transcript_usage(harness: str, path: str | None, offset: int,
                     memo: dict[str, Any] | None = None) -> tuple[list[dict[str, Any]], int]:
    """The usage events (``Guardrails.on_usage`` keyword arguments) final in the transcript
    since byte ``offset``, and the offset to read from next time. ``memo``: what a Codex
    rollout's reading keeps between invocations (updated in place)."""
    if harness not in ("claude-code", "codex", "gemini-cli") or not path:
        return [], offset
    try:
        size = os.path.getsize(path)
    except OSError:
        return [], offset  # not written yet
    if size < offset:  # rewritten from scratch: read it again
        offset = 0
    if size == offset:
        return [], offset
    if harness == "gemini-cli":
        return _gemini(path, size, memo if memo is not None else {}), size
    with open(path, "rb") as f:
        f.seek(offset)
        data = f.read(size - offset)
    if harness == "codex":
        return _codex(data, offset, memo if memo is not None else {})
    return _claude_code(data, offset)


def _codex(data: bytes, offset: int, memo: dict[str, Any]) -> tuple[list[dict[str, Any]], int]:
    import orjson

    from ...interchange.adapters.codex import UsageState, usage_events

    state = UsageState(memo.get("model"), memo.get("totals"))
    usages: list[dict[str, Any]] = []
    end = data.rfind(b"\n") + 1  # complete lines only: a line being written is read next time
    for line in data[:end].splitlines():
        try:
            value = orjson.loads(line)
        except orjson.JSONDecodeError:
            continue  # the transcript reader reports bad lines; usage just skips them
        if not isinstance(value, dict) or not isinstance(value.get("payload"), dict) or \
                not isinstance(value.get("type"), str):
            continue
        try:
            usages.extend(_keywords(u) for u in usage_events(value["type"], value["payload"],
                                                              state))
        except InvalidEvent:
            continue  # a count out of range: skipped, as the transcript reader reports it
    if state.model is not None:
        memo["model"] = state.model
    if state.totals is not None:
        memo["totals"] = state.totals
    return usages, offset + end


#: Bytes of a Gemini CLI recording the hook reads at most (it reads it whole: the legacy
#: recording is one JSON document, rewritten whole): a bounded cost per event.
GEMINI_MAX = 8 << 20


def _gemini(path: str, size: int, memo: dict[str, Any]) -> list[dict[str, Any]]:
    """The usage of the Gemini CLI recording's responses not charged yet: the recording is
    read whole by its transcript reader (one usage per response), and the responses already
    charged (a count kept in ``memo``) are skipped. A recording past ``GEMINI_MAX`` is not
    read (its spend is then not seen)."""
    from pathlib import Path

    from ...interchange.adapters.gemini_cli import read
    from ...interchange.events import Usage

    if size > GEMINI_MAX:
        return []
    usages = []
    try:
        for item in read(Path(path), "gemini-cli"):
            if isinstance(item.event, Usage) and not item.session.count(":subagent-"):
                usages.append(item.event)
    except (InvalidEvent, OSError, ValueError):
        return []  # not written whole yet, or not a recording: read again next time
    charged = memo.get("responses", 0)
    if not isinstance(charged, int) or charged > len(usages):
        charged = len(usages)  # another recording, or one rewound: charge from here on
    memo["responses"] = len(usages)
    return [_keywords(u) for u in usages[charged:]]


def _claude_code(data: bytes, offset: int) -> tuple[list[dict[str, Any]], int]:
    import orjson

    usages: list[dict[str, Any]] = []
    open_id: str | None = None  # the response whose lines may not all be written yet
    open_at = offset            # where its first line starts
    open_usage: Any = None
    position = offset
    end = data.rfind(b"\n") + 1  # complete lines only
    for line in data[:end].splitlines(keepends=True):
        start, position = position, position + len(line)
        try:
            value = orjson.loads(line)
        except orjson.JSONDecodeError:
            continue  # the transcript reader reports bad lines; usage just skips them
        if not isinstance(value, dict) or value.get("isSidechain") is True:
            continue  # a sub-agent's usage is its own session's
        kind = value.get("type")
        if kind not in ("assistant", "user"):
            continue
        found = value.get("message")
        message: dict[str, Any] = found if isinstance(found, dict) else {}
        ident = message.get("id")
        if kind == "assistant" and isinstance(ident, str) and ident == open_id:
            open_usage = _usage_of(message) or open_usage  # the last line of the id wins
            continue
        if open_usage is not None:
            usages.append(_keywords(open_usage))
        open_id = open_usage = None
        if kind == "assistant" and isinstance(ident, str):
            open_id, open_at, open_usage = ident, start, _usage_of(message)
    if open_id is None:
        return usages, offset + end
    return usages, open_at


def _usage_of(message: dict[str, Any]) -> Any:
    """The message's usage; None when a count is out of range (the transcript reader reports
    that line as invalid; a hook skips it rather than fail on every later event)."""
    from ...interchange.adapters.anthropic import usage_of

    try:
        return usage_of(message)
    except InvalidEvent:
        return None


def _keywords(usage: Any) -> dict[str, Any]:
    """``on_usage``'s arguments, priced by the dispatcher's rule as replay and serve price
    them (Claude Code records no cost): the cost marked estimated, or the model unpriced."""
    from ...session.dispatch import usage_arguments

    return usage_arguments(usage)
