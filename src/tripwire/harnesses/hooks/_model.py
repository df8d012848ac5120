"""The harness-neutral shapes of one hook event and of the answer to it (no heavy imports: the
command reads and checks them before it knows whether a resident server answers)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

__all__ = ["HookEvent", "Verdict"]


@dataclass
class HookEvent:
    """One hook payload, harness-neutral. ``kind``: call, result, batch (a parallel batch's
    results at once: ``batch``, each a call's event with its result), prompt, session_start
    (``source``: the harness's startup/resume/clear/compact), compaction (``phase``: pre or
    post; ``manual``: the user's ``/compact``), stop, end (the session ends), other.
    ``turn`` is the harness's id of the current prompt/turn when it sends one; ``parent``: a
    sub-agent's parent session, whose task its own is a child of."""

    kind: str
    session: str
    turn: str | None = None
    name: str = ""
    args: Any = None
    call_id: str | None = None
    error: str | None = None
    payload: Any = None
    stop_hook_active: bool = False
    answer: str | None = None    # a stop attempt's answer (the agent's last message)
    stop_count: int | None = None  # Cursor: the stop hooks' follow-ups so far (loop_count)
    transcript_path: str | None = None
    source: str | None = None
    phase: str | None = None
    manual: bool = False
    parent: str | None = None
    batch: list[HookEvent] = field(default_factory=list)


@dataclass
class Verdict:
    """What the hook tells the harness, harness-neutral.

    ``deny``: refuse this tool call, the reason for the model. ``block``: refuse the prompt,
    the reason for the user. ``context``: feedback for the model (``additionalContext``).
    ``halt``: stop the agent (``continue: false``), the reason for the user. ``cut``: the
    turn was cut by this observation, the reason for the model."""

    deny: str | None = None
    block: str | None = None
    context: str | None = None
    halt: str | None = None
    cut: str | None = None
    told: str | None = None
