"""Codex CLI hooks: ``tripwire hook codex`` (the Claude Code design, parsed more strictly).

The same events as Claude Code's, with Codex's differences: every output key must be one Codex
knows (anything else makes it ignore the whole output), so a PreToolUse denial never carries
``continue``/``stopReason`` (Codex rejects them there): a halt denies each call and stops the
agent at the next PostToolUse or Stop. Codex sends no PostToolUseFailure (failures are not
visible to its hooks), and names the turn (``turn_id``) on every turn-scoped event.

Compaction (``codex-rs/hooks/src/events/compact.rs``): PreCompact and PostCompact carry
``trigger`` (``manual``/``auto``) and honour only the universal keys, so a
``compaction-storm`` halt there is ``continue: false`` with its ``stopReason``; one compaction
is counted once, whichever of PreCompact, PostCompact and SessionStart ``source: compact``
report it. SessionStart's ``source`` (``session_start.rs``: startup, resume, clear, compact):
the first three are a turn boundary, ``compact`` is the compaction's.
"""

from __future__ import annotations

import os
from typing import Any

from . import claude_code
from ._contract import hooks_block
from ._contract import render as _render
from ._model import HookEvent, Verdict

__all__ = ["HARNESS", "parse", "render", "install_block", "HALT_ON_PRE_TOOL_USE"]

HARNESS = "codex"
HALT_ON_PRE_TOOL_USE = False
#: No hook output ends a Codex turn: under enforce a halt interrupts ``codex exec`` (SIGINT)
INTERRUPTS = True
#: handlers grouped under matchers (Cursor lists them flat)
FLAT = False
#: Codex runs hooks through a login shell (``$SHELL -lc``)
LOGIN_SHELL = True
denied = claude_code.denied
timeout_seconds = claude_code.timeout_seconds

_TOOL_EVENTS = ("PreToolUse", "PostToolUse")
_OTHER_EVENTS = ("UserPromptSubmit", "SessionStart", "Stop", "PreCompact", "PostCompact")


def parse(payload: dict[str, Any]) -> tuple[str, HookEvent]:
    name, event = claude_code.parse(payload)
    turn = payload.get("turn_id")
    event.turn = str(turn) if isinstance(turn, (str, int)) and turn != "" else None
    return name, event


def probe(session: str, cwd: str, n: int) -> dict[str, Any]:
    """``tripwire doctor``'s ``n``th identical tool call of a new session, as Codex sends it."""
    return {**claude_code.probe(session, cwd, n), "turn_id": "doctor", "model": "doctor"}


def install_block(command: str = "tripwire hook codex") -> dict[str, Any]:
    """The ``hooks.json`` block (``~/.codex/hooks.json`` or ``<repo>/.codex/hooks.json``)."""
    return hooks_block(command, _TOOL_EVENTS, _OTHER_EVENTS)


def render(event: HookEvent, name: str, verdict: Verdict) -> dict[str, Any] | None:
    """The stdout object for ``verdict`` (None: no decision, empty stdout)."""
    return _render(event, name, verdict, halt_on_pre_tool_use=False, told_on_result=True)


def exec_ancestor(pid: int) -> int | None:
    """The nearest ancestor of ``pid`` that is ``codex exec`` (Linux ``/proc``), or None: the
    process a halt interrupts (never the interactive TUI or ``codex app-server``, whose
    answer to SIGINT is another)."""
    for _ in range(64):
        try:
            with open(f"/proc/{pid}/stat", "rb") as f:
                stat = f.read().decode("utf-8", "replace")
            pid = int(stat[stat.rindex(")") + 2:].split()[1])
        except (OSError, ValueError, IndexError):
            return None
        if pid <= 1:
            return None
        try:
            with open(f"/proc/{pid}/cmdline", "rb") as f:
                argv = f.read().decode("utf-8", "replace").split("\0")
        except OSError:
            return None
        if argv and os.path.basename(argv[0]).startswith("codex") and "exec" in argv[1:]:
            return pid
    return None
