"""What a summary boundary writes into the history: the summarizer prompts the project ships
(the seed's five-section teammate handover and six-section completion record), the check of
which sections a summary lacks, and mechanical truncation — the deterministic digest of a
dropped window that stands in for a summary when the summarizer keeps failing.

The summarizer's prompt is the host's; tripwire ships the seed's: ``handover_prompt(focus)``
(the five-section teammate handover) and ``checkpoint_prompt(note)`` (the six-section completion
record). Every summary boundary reports which of its sections the summary lacks
(``missing_sections``). The context guard (``guard.py``) decides when these run.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

from ..signals import quote_args

__all__ = [
    "HANDOVER_SECTIONS",
    "CHECKPOINT_SECTIONS",
    "handover_prompt",
    "checkpoint_prompt",
    "missing_sections",
    "TRUNCATION_NOTICE",
    "TAIL_CHARS",
    "mechanical_truncation",
    "message_text",
    "tool_calls",
]

#: The verbatim tail a mechanical truncation keeps, in characters.
TAIL_CHARS = 8000
#: Tool calls listed in a mechanical digest (most recent first); older ones are counted.
LEDGER_LIMIT = 100


# --------------------------------------------------------------------------------------------
# The summary prompts (seed, "What the summary contains" / "What the checkpoint contains")

#: The five sections of the teammate handover, each with what it holds.
HANDOVER_SECTIONS: tuple[tuple[str, str], ...] = (
    ("Current state", "The exact user request. What's been completed. What's actively in "
                      "progress. What's specifically remaining."),
    ("Files & changes", "Files modified, read, or analyzed. Critical code locations with line "
                        "numbers when known."),
    ("Technical context", "Architectural decisions made and why. Patterns adopted. Commands "
                          "that worked or failed."),
    ("Strategy & approach", "The strategy chosen. Alternatives considered and rejected. "
                            "Gotchas. Blockers."),
    ("Exact next steps", "A concrete numbered list of the next developer-style actions."),
)

#: The six sections of a task-boundary checkpoint's completion record.
CHECKPOINT_SECTIONS: tuple[tuple[str, str], ...] = (
    ("Task", "What was the task? What's the headline outcome?"),
    ("Files & changes", "Files modified, read, or analyzed. Files considered and NOT changed "
                        "(with why)."),
    ("Technical context", "Architectural decisions, patterns, commands that worked or failed."),
    ("Strategy & approach", "Strategy chosen, alternatives rejected, gotchas, lessons."),
    ("Verification & next steps", "What's been verified, what's known-good but unverified, "
                                  "follow-up work queued."),
    ("Where we are", 'Status framed as "what the operator and I both know right now."'),
)


def _sections_text(sections: tuple[tuple[str, str], ...]) -> str:
    return "\n\n".join(f"# {name}\n{what}" for name, what in sections)


def handover_prompt(focus: str | None = None) -> str:
    """The summarizer prompt for compaction: a five-section teammate handover. ``focus`` (the
    operator's ``/compact <focus>``) biases it toward one thread without dropping a section."""
    text = ("Summarize the conversation above as a teammate handover: the developer who "
            "continues this work sees only your summary, not the conversation. Write exactly "
            "these five sections, each under its own markdown heading, in this order:\n\n"
            + _sections_text(HANDOVER_SECTIONS))
    if focus and focus.strip():
        text += (f"\n\nFocus: bias the summary toward {focus.strip()} — keep that thread's "
                 "detail, and still write every section.")
    return text


def checkpoint_prompt(note: str | None = None) -> str:
    """The summarizer prompt for a task-boundary checkpoint: a six-section completion record.
    ``note`` is the boundary's note (``/done <note>`` or the model's own)."""
    text = ("A task is complete. Write its completion record: the next task starts from your "
            "record alone, not from the conversation above. Write exactly these six sections, "
            "each under its own markdown heading, in this order:\n\n"
            + _sections_text(CHECKPOINT_SECTIONS))
    if note and note.strip():
        text += f"\n\nThe task boundary's note: {note.strip()}"
    return text


def _heading(line: str) -> str:
    return line.strip().lstrip("#").strip().strip("*_").strip().rstrip(":").strip().casefold()


def missing_sections(summary: str,
                     sections: tuple[tuple[str, str], ...] = HANDOVER_SECTIONS) -> tuple[str, ...]:
    """The sections whose heading (a line reading the section's name, as a markdown heading,
    bold or plain, any case, an optional colon) the summary lacks, in prompt order."""
    present = {_heading(line) for line in summary.splitlines() if line.strip()}
    return tuple(name for name, _ in sections if name.casefold() not in present)


# --------------------------------------------------------------------------------------------
# Mechanical truncation

TRUNCATION_NOTICE = (
    "[context truncated] This is a mechanical truncation, not a summary: the earlier part of "
    "this conversation was dropped to fit the context window, and its detail is lost. Below is "
    "a ledger of the tool calls that ran in the dropped part, most recent first, with their "
    "arguments but not their results. If you need what a dropped result said, re-run the tool "
    "rather than guess."
)


def message_text(message: Any) -> str:
    """A message rendered as text, for the tail budget: ``role: content``."""
    if isinstance(message, str):
        return message
    if isinstance(message, Mapping):
        role = message.get("role") or message.get("type") or "message"
        content = message.get("content", message.get("text", ""))
        if isinstance(content, list):
            parts = []
            for block in content:
                if isinstance(block, Mapping):
                    parts.append(str(block.get("text") or block.get("content") or
                                     json.dumps(block, ensure_ascii=False, default=repr)))
                else:
                    parts.append(str(block))
            content = "\n".join(parts)
        elif not isinstance(content, str):
            content = json.dumps(content, ensure_ascii=False, default=repr)
        return f"{role}: {content}"
    return repr(message)


def tool_calls(message: Any) -> list[tuple[str, Any]]:
    """The (name, args) tool calls a message carries, in the shapes harnesses log: OpenAI chat
    ``tool_calls``, Anthropic ``tool_use`` blocks, Responses ``function_call`` items, and this
    project's interchange ``call`` events."""
    if not isinstance(message, Mapping):
        return []
    calls: list[tuple[str, Any]] = []
    for call in message.get("tool_calls") or ():
        if isinstance(call, Mapping):
            fn = call.get("function", call)
            calls.append((str(fn.get("name", "")), fn.get("arguments", fn.get("args"))))
    content = message.get("content")
    if isinstance(content, list):
        for block in content:
            if isinstance(block, Mapping) and block.get("type") == "tool_use":
                calls.append((str(block.get("name", "")), block.get("input")))
    kind = message.get("type")
    if kind == "function_call":
        calls.append((str(message.get("name", "")), message.get("arguments")))
    elif kind == "call" and "name" in message:
        calls.append((str(message["name"]), message.get("args")))
    return calls


def mechanical_truncation(messages: Sequence[Any], tail_chars: int = TAIL_CHARS,
                          note: str | None = None) -> tuple[str, int, int] | None:
    """(digest text, messages kept verbatim, tool calls in the dropped part), or None when
    nothing can be dropped. Deterministic: the same history gives the same text. ``note``: a
    checkpoint's, stated after the opening notice."""
    keep, used = 0, 0
    for message in reversed(messages):
        size = len(message_text(message))
        if used + size > tail_chars:
            break
        keep += 1
        used += size
    if keep >= len(messages):
        if len(messages) < 2:
            return None
        keep = len(messages) - 1  # drop at least the oldest message
    start = len(messages) - keep
    from .histories import kept_prefix  # a truncation's, not the constants' a config reads
    kept = kept_prefix(messages, start)  # the system prompt and the task stay in place
    dropped = [m for i, m in enumerate(messages[:start]) if i not in kept]
    if not dropped:
        return None
    ledger = [call for message in dropped for call in tool_calls(message)]
    lines = [TRUNCATION_NOTICE]
    if note is not None:
        lines.append(f"It was cut at a task boundary (a checkpoint): {note or 'no note given'}.")
    lines.append(f"Dropped: {len(dropped)} messages, {len(ledger)} tool calls.")
    if ledger:
        lines.append("Tool calls, most recent first:")
        for n, (name, args) in enumerate(reversed(ledger[-LEDGER_LIMIT:]), start=1):
            lines.append(f"{n}. {name or 'unnamed tool'} {quote_args(args)}")
        if len(ledger) > LEDGER_LIMIT:
            lines.append(f"({len(ledger) - LEDGER_LIMIT} earlier calls not listed)")
    if kept:
        what = ("the system prompt and the first user message"
                if len(kept) > 1 else "the first user message")
        lines.append(f"Kept in place before this note: {what}.")
    lines.append(f"The most recent {keep} messages follow verbatim."
                 if keep else "No earlier message follows.")
    return "\n".join(lines), keep, len(ledger)
