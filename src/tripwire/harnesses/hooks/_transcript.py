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

The transcript is the agent's to write, so it is read as a hostile file (``base.files``): a
regular file of the hook's user (of the event's client, for a resident server of another
user), never through a link, at most ``CHUNK`` bytes per invocation, a sparse file's holes
skipped. A line longer than ``CHUNK`` (no transcript line of a response is; a hostile one) is
skipped whole across invocations (``memo["skip"]``). A transcript that cannot be read is
``NotRead``: the caller watches the session from its hook payloads alone.
"""

from __future__ import annotations

import os
from typing import Any

from ...base.files import NotRead, read_bounded
from ...errors import InvalidEvent

__all__ = ["transcript_usage", "NotRead", "CHUNK"]

#: Bytes of a transcript one invocation reads at most: many responses' lines (an image's
#: base64 line is a few MB), never the whole of a file made huge.
CHUNK = 8 << 20


def transcript_usage(harness: str, path: str | None, offset: int,
                     memo: dict[str, Any] | None = None, owner: int | None = None,
                     ) -> tuple[list[dict[str, Any]], int]:
    """The usage events (``Guardrails.on_usage`` keyword arguments) final in the transcript
    since byte ``offset``, and the offset to read from next time. ``memo``: what the reading
    keeps between invocations (updated in place). ``owner``: the uid the transcript must
    belong to (default: this process's). Raises ``NotRead`` for a transcript that exists but
    is no regular file of ``owner`` (not written yet: no usage)."""
    if harness not in ("claude-code", "codex", "gemini-cli") or not path:
        return [], offset
    memo = memo if memo is not None else {}
    owner = os.getuid() if owner is None and hasattr(os, "getuid") else owner
    if not os.path.lexists(path):
        return [], offset  # not written yet
    if harness == "gemini-cli":
        data, _, size = read_bounded(path, GEMINI_MAX + 1, 0, owner=owner)
        if size == offset:
            return [], offset
        return _gemini(path, data, memo), size
    data, start, size = read_bounded(path, CHUNK, offset, owner=owner)
    if size < offset:  # rewritten from scratch: read it again
        memo.pop("skip", None)
        data, start, size = read_bounded(path, CHUNK, 0, owner=owner)
    if not data:
        return [], start
    if start != offset:
        memo.pop("skip", None)  # a hole ends any line: what follows it starts one
    if memo.get("skip"):  # inside a line too long to be a response's: drop up to its end
        cut = data.find(b"\n")
        if cut < 0:
            return [], start + len(data)
        memo.pop("skip")
        data, start = data[cut + 1:], start + cut + 1
    if b"\n" not in data and len(data) >= CHUNK:
        memo["skip"] = True  # a line longer than a chunk: skipped, not read again and again
        return [], start + len(data)
    if harness == "codex":
        return _codex(data, start, memo)
    return _claude_code(data, start)


def _codex(data: bytes, offset: int, memo: dict[str, Any]) -> tuple[list[dict[str, Any]], int]:
    import orjson

    from ...interchange.adapters.codex import UsageState, usage_events

    state = UsageState(memo.get("model"), memo.get("totals"))
    usages: list[dict[str, Any]] = []
    end = data.rfind(b"\n") + 1  # complete lines only: a line being written is read next time
    for line in data[:end].splitlines():
        try:
            value = orjson.loads(line.lstrip(b"\0"))  # the end of a hole's block, if any
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


def _gemini(path: str, data: bytes, memo: dict[str, Any]) -> list[dict[str, Any]]:
    """The usage of the Gemini CLI recording's responses not charged yet: the recording (its
    bytes, read bounded) is read whole by its transcript reader (one usage per response), and
    the responses already charged (a count kept in ``memo``) are skipped. A recording past
    ``GEMINI_MAX`` is not read (its spend is then not seen)."""
    if len(data) > GEMINI_MAX:
        return []
    from ...interchange.events import Usage

    usages = []
    try:
        for item in _gemini_items(path, data):
            if isinstance(item.event, Usage) and not item.session.count(":subagent-"):
                usages.append(item.event)
    except (InvalidEvent, OSError, ValueError):
        return []  # not written whole yet, or not a recording: read again next time
    charged = memo.get("responses", 0)
    if not isinstance(charged, int) or charged > len(usages):
        charged = len(usages)  # another recording, or one rewound: charge from here on
    memo["responses"] = len(usages)
    return [_keywords(u) for u in usages[charged:]]


def _gemini_items(path: str, data: bytes) -> Any:
    """The recording's items, from the bytes read (never the path again: the agent may have
    put a FIFO there since): its one JSON document as decoded, its JSON Lines log from a
    private copy."""
    import tempfile
    from pathlib import Path

    import orjson

    from ...interchange.adapters.gemini_cli import read

    try:
        document = orjson.loads(data.removeprefix(b"\xef\xbb\xbf"))
    except orjson.JSONDecodeError:
        document = None
    if isinstance(document, dict):
        yield from read(Path(path), "gemini-cli", document)
        return
    with tempfile.NamedTemporaryFile(prefix="tripwire-gemini-", suffix=".jsonl") as copy:
        copy.write(data)
        copy.flush()
        yield from read(Path(copy.name), "gemini-cli")


def _claude_code(data: bytes, offset: int) -> tuple[list[dict[str, Any]], int]:
    import orjson

    usages: list[dict[str, Any]] = []
    open_id: str | None = None  # the response whose lines may not all be written yet
    open_at = offset            # where its first line starts
    open_lines: list[dict[str, Any]] = []  # its messages, their usage read once it is closed
    position = offset
    end = data.rfind(b"\n") + 1  # complete lines only
    for line in data[:end].splitlines(keepends=True):
        start, position = position, position + len(line)
        try:
            value = orjson.loads(line.lstrip(b"\0"))  # the end of a hole's block, if any
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
            open_lines.append(message)
            continue
        usage = _final_usage(open_lines)
        if usage is not None:
            usages.append(_keywords(usage))
        open_id, open_lines = None, []
        if kind == "assistant" and isinstance(ident, str):
            open_id, open_at, open_lines = ident, start, [message]
    if open_id is None:
        return usages, offset + end
    return usages, open_at


def _final_usage(lines: list[dict[str, Any]]) -> Any:
    """A closed response's usage: the last of its lines' that reads (None: none does). Read
    only once the response is closed, so an event while it is still being written (its tool
    calls') parses no usage, and imports nothing to do so."""
    usage = None
    for message in lines:
        usage = _usage_of(message) or usage
    return usage


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
