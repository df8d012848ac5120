"""Typed errors. Every error tripwire raises on bad input or refused actions is one of these."""

from __future__ import annotations

from typing import Any

__all__ = [
    "TripwireError",
    "ConfigError",
    "InvalidEvent",
    "TruncatedLine",
    "UnknownFormat",
    "GuardrailHalted",
    "GuardrailTripped",
    "ResetRefused",
    "InvalidReset",
    "RaiseRefused",
    "BatchInterrupted",
    "NativeUnavailable",
    "SmallTierParentRefused",
    "StoreError",
    "StoreUnreadable",
    "StoreKeyMismatch",
    "MalformedDecision",
    "TaskEnded",
]


class TripwireError(Exception):
    """Base class of every error tripwire raises on purpose."""


class ConfigError(TripwireError, ValueError):
    """A configuration value is unknown, of the wrong type or out of range."""


class NativeUnavailable(TripwireError, ImportError):
    """``TRIPWIRE_IMPLEMENTATION=native`` (or ``implementation="native"``) asked for the C++
    core, and it is not built or does not load (a pure-Python install)."""


class InvalidEvent(TripwireError, ValueError):
    """An observed event is malformed (wrong type, unknown kind, bad field).

    ``source`` and ``line`` name where the event came from when it was read from a file.
    """

    def __init__(self, message: str, *, source: str | None = None, line: int | None = None):
        self.source = source
        self.line = line
        where = ""
        if source is not None:
            where = f"{source}:{line}: " if line is not None else f"{source}: "
        super().__init__(where + message)
        self.message = message


class TruncatedLine(InvalidEvent):
    """The last line of a JSON Lines file is cut short (a transcript still being written, or a
    copy taken mid-write). It is reported and the lines before it are kept (SPEC §11.1)."""

    def __init__(self, message: str = "truncated last line (no newline, not complete JSON): "
                 "ignored, the lines before it are kept", *, source: str | None = None,
                 line: int | None = None):
        super().__init__(message, source=source, line=line)


class UnknownFormat(InvalidEvent):
    """A file is not a transcript of any format tripwire reads, or not of the one named."""


class GuardrailHalted(TripwireError):
    """The session is halted: the turn is refused before any model call (SPEC §3, §4).

    ``guardrails`` names what holds the session (``watchdog``, ``cost_ceiling``), ``reason``
    says why; only an operator reset clears it.
    """

    def __init__(self, reason: str, guardrails: tuple[str, ...]):
        super().__init__(reason)
        self.reason = reason
        self.guardrails = guardrails


class GuardrailTripped(TripwireError):
    """A framework integration stopped the run in flight: the guardrails cut the turn or halted
    the session. ``decision`` is the ``Decision`` (``action``, ``guardrail``, ``reason``,
    ``alerts``); ``halted`` says whether later turns are refused too."""

    def __init__(self, decision: Any):
        super().__init__(decision.reason)
        self.decision = decision
        self.reason = decision.reason
        self.guardrail = decision.guardrail
        self.halted = decision.halt_session


class ResetRefused(TripwireError):
    """A reset that would re-trip at once (SPEC §4; HTTP 409 semantics): the session spent at
    least its ceiling plus the added budget. ``needed_usd`` is how much more budget must be
    added — strictly more than that amount — for the reset to be accepted."""

    def __init__(self, reason: str, *, spent_usd: float, ceiling_usd: float, needed_usd: float):
        super().__init__(reason)
        self.reason = reason
        self.spent_usd = spent_usd
        self.ceiling_usd = ceiling_usd
        self.needed_usd = needed_usd


class RaiseRefused(TripwireError):
    """A raise of a task's cap that would leave the counter exhausted (SPEC §13; HTTP 409
    semantics): nothing changed. ``task_id`` is the task whose cap must be raised (the task
    raised, or the ancestor whose allowance exhausted it: ``exhausted_task`` is then the task
    asked for), ``counter`` the counter, ``raise_needed`` the smallest sufficient raise (the
    counter's units: dollars for ``usd``, seconds for ``deadline_s``), ``used`` and ``cap``
    that task's consumption and cap before the raise."""

    def __init__(self, task_id: str, counter: str, raise_needed: float, used: float,
                 cap: float, *, exhausted_task: str | None = None):
        whose = f"task {task_id} would stay exhausted" if exhausted_task in (None, task_id) \
            else (f"task {exhausted_task} is exhausted by the allowance of task {task_id}, "
                  "which would stay exhausted")
        amount = f"{raise_needed:.9f}".rstrip("0").rstrip(".") if counter == "usd" \
            else f"{raise_needed:g}"
        super().__init__(f"{whose}: {counter} used {used:g} of {cap:g}; raise task "
                         f"{task_id}'s {counter} by at least {amount} ({counter}=+{amount})")
        self.task_id = task_id
        self.exhausted_task = exhausted_task or task_id
        self.counter = counter
        self.raise_needed = raise_needed
        self.used = used
        self.cap = cap


class InvalidReset(TripwireError, ValueError):
    """A reset request that makes no sense (HTTP 400 semantics): budget for the watchdog, a
    negative or non-finite budget, an unknown guardrail, or budget for a per-session bound that
    is not configured."""


class StoreError(TripwireError):
    """The store cannot be used: unreadable, corrupt or locked database, or a bad key. The message
    names the database file when there is one.

    A plain ``StoreError`` is *transient* (a locked or busy database, a full disk, a dropped
    connection, a timeout): the guardrails keep deciding in memory and retry. Its subclass
    ``StoreUnreadable`` is not."""


class StoreUnreadable(StoreError):
    """The store exists but fails its own integrity: not a database (its header overwritten),
    malformed (truncated, a page overwritten), a schema version this tripwire does not know, a
    directory where the file should be. Not transient: what it held (a halt, spend) cannot be
    known, so a session restored from it is halted (``store_unreadable``) until an operator's
    ``tripwire reset`` moves it aside (docs/durability.md)."""


class StoreKeyMismatch(StoreError):
    """The store key in use is not the one the store was created with: the store cannot be
    checked (every row would read as forged) nor appended to. A configuration error, not
    tampering."""


class SmallTierParentRefused(ConfigError):
    """The small-tier-parent guard in ``refuse`` mode: the parent model is small-tier."""


class BatchInterrupted(TripwireError):
    """Event ``index`` of a ``Fleet.observe_many`` batch raised ``error`` (a malformed usage,
    a refused reset ...). The events before it were observed, and ``outcomes`` holds theirs,
    as ``observe_many`` would have returned them; it and the events after it were not."""

    def __init__(self, index: int, session_id: str, error: TripwireError,
                 outcomes: list[tuple[int, str, Any]]):
        super().__init__(f"event {index} (session {session_id!r}): {error}")
        self.index = index
        self.session_id = session_id
        self.error = error
        self.outcomes = outcomes


class MalformedDecision(TripwireError, ValueError):
    """A progress supervisor's decision that does not match its schema (SPEC §7.4): not JSON,
    an unknown decision, a missing or unexpected field. ``field`` names the first wrong one
    (``"decision"``, ``"check.tool"``; ``""`` for the whole value). A malformed decision is a
    failed review, never permission to continue."""

    def __init__(self, message: str, field: str = ""):
        super().__init__(message)
        self.message = message
        self.field = field


class TaskEnded(TripwireError):
    """The task a session runs has ended (the progress supervisor stopped it, or it was
    finished, blocked or exhausted): no turn is started. ``outcome`` is the task's
    ``Outcome``."""

    def __init__(self, outcome: Any):
        super().__init__(f"the task has ended: {outcome}")
        self.outcome = outcome
