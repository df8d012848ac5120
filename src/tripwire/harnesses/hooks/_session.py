"""One hook invocation over one session, harness-neutral (SPEC §11.4).

Every hook invocation is a new process, so the session lives in the store:

- **Halts, trips, resets and spend** are the durable store's rows (``durability/``), written by
  ``Guardrails`` as in any other host and folded back by ``Guardrails(store=..., history=...)``.
- **The detectors' run state** is rebuilt by replaying a bounded window: the session's last
  ``WINDOW`` observed calls, results, compactions, turn-ending answers and turn ends, kept in
  a ``hook_sessions`` table of
  the same SQLite file (one msgpack row per session). Replay feeds the watchdog directly
  (alerts discarded: they were acted on when they happened), then the live event goes through
  ``Guardrails``. Every detector decides from a bounded history (windows of 12, runs whose alert
  state is settled once their count passes the threshold, 64 payload digests per turn), so
  replaying the last 256 events decides the live event as the whole history would for every
  threshold up to 256; a long session costs each invocation the same. An operator reset
  (a new ``reset`` row) starts the window over, as it clears the watchdog's run state.
- **The turn in progress** is the session's own: whether a turn is open, its cut (later calls
  of the turn are denied with the same reason), the halt's decision (what the model was told)
  and the feedback queued for the model. ``Guardrails(durable_turns=True)`` keeps it in the
  store (``turn`` rows, written at ``flush``) and restores it, so the hook just asks the
  session: ``on_call`` gives its decision, ``take_feedback()`` the queue
  (``feedback_at_once``: queued as alerts fire, delivered with the next answer the harness
  shows the model), ``blocked`` the cut or halt a later event gets.
- **Compactions** (a harness's PreCompact/PostCompact, or its session start after one) are
  counted once each (``_State.compaction``: which report of the last one came) for
  ``compaction-storm``; a Stop's answer (a first attempt to finish, not one a stop hook refused)
  is the agent's text that ends the turn, so a storm re-arms as it does in any host.
- **A sub-agent** (``parent``: the session it is a sub-agent of) runs its own session under a
  child of the parent session's task: its calls, steps and spend are charged to both, so the
  parent's caps bound its sub-agents.
- **The stop-hook cap** is the session's task's ``stop_rejections`` counter (SPEC §7.1): a
  Stop that says a stop hook refused the previous attempt (``stop_hook_active``) charges one
  rejection through ``Guardrails.on_stop_attempt``; the count is the task's budget rows in the
  store, so it holds across invocations, and the rejection past the cap exhausts the task.

Stored arguments and payloads are compact: a top-level argument value longer than 256
characters (a file's content) is replaced by its BLAKE3 digest, and a result payload is kept as
its answer's digest only (``payload_digest``). Live events are observed in the same form, so
equal calls stay equal.

Invocations of one store are serialized by an exclusive lock on ``<store>.lock`` (a harness
runs the hooks of parallel tool calls concurrently). The hook table is not sealed: editing it
can at most hide a pattern in progress, never a recorded halt (that is the sealed store's).

Every wait is bounded by ``wait`` seconds (``WAIT``, 2 s, by default; ``--wait``): the lock
file, SQLite's busy timeout, the rows' flush, the window's write. An invocation whose rows or
window the store did not take in time says why in ``problem`` (the command then denies the
call under ``enforce``: a call that cannot be recorded must not run unseen). A store that
cannot be read at all (``StoreUnreadable``) has no window: the session restores halted from
it (``store_unreadable``), so its calls are denied.
"""

from __future__ import annotations

import json
import logging
import os
import re
import sqlite3
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import blake3
import msgpack

from ...base.decision import HALT_SESSION, Decision
from ...base.log import LOGGER
from ...engine import select as _engine
from ...policy.budget import BUDGET
from ...policy.feedback import render_feedback
from ...session.dispatch import Outcome, observe
from ...session.guardrails import Guardrails, GuardrailsConfig
from ...signals import WatchdogConfig
from ...signals.settings import EngineSettings
from ._model import HookEvent, Verdict

__all__ = ["WINDOW", "WAIT", "HookEvent", "Verdict", "HookSession"]

#: Observed events kept per session for replay (see the module docstring).
WINDOW = 256
#: Seconds an invocation waits for any lock before it gives up (see the module docstring):
#: well under a harness's hook timeout (tripwire installs 10 s; Claude Code's default is 60 s),
#: and far above what 8 hooks running at once wait for each other (tens of milliseconds each).
WAIT = 2.0
#: Tool-call ids remembered per session, so that an event delivered twice (two hook entries, a
#: harness that imports another's hooks) is observed once.
SEEN = 512
#: One-time notices remembered per session (their digests).
SAID = 64
#: Top-level argument values longer than this are stored (and observed) as their digest.
LONG_VALUE = 256
#: Bytes of a session's stored window read at most: a full window is some hundred KB (256
#: compact events, 512 ids); a larger row is an edit of the unsealed table (a fresh window).
MAX_STATE = 4 << 20

_SCHEMA = "CREATE TABLE IF NOT EXISTS hook_sessions(session TEXT PRIMARY KEY, state BLOB)"

#: close=False: the store and state connections of each store path, opened once per process
_OPEN: dict[str, tuple[Any, sqlite3.Connection | None]] = {}


@dataclass
class _State:
    """What the hook keeps of a session beside the store's rows: the window the detectors'
    run state is rebuilt from, and the harness's own bookkeeping (not policy: the turn in
    progress is the session's, in the store)."""

    events: list[list[Any]] = field(default_factory=list)
    turn: str | None = None      # the harness's current prompt/turn id (a new one: a boundary)
    resets: int = 0              # reset rows of the store already applied to the window
    transcript: int = 0          # bytes of the transcript already read for usage
    transcript_memo: dict[str, Any] = field(default_factory=dict)  # Codex: model, last totals
    seen: list[str] = field(default_factory=list)  # the last SEEN calls' and results' ids
    said: list[str] = field(default_factory=list)  # one-time notices said to this session
    interrupted: list[int] = field(default_factory=list)  # harness processes interrupted
    stops: int = 0               # Cursor: the last loop_count seen (refusals charged)
    calls: int = 0               # the session's task's tool calls (see ``_carry_calls``)
    compaction: str = ""         # the last compaction's report so far: pre, post or "" (none)

    @classmethod
    def load(cls, body: bytes | None) -> _State:
        """The stored window; a fresh one for anything that does not read as one (the table
        is not sealed: an edited row may hide a pattern in progress, never stop the hook)."""
        if body is None:
            return cls()
        try:
            data = msgpack.unpackb(body, raw=False)
        except Exception:  # untrusted bytes
            return cls()
        if not isinstance(data, dict):
            return cls()
        fresh = cls()
        known = {k: v for k, v in data.items() if k in cls.__dataclass_fields__ and
                 (v is None or isinstance(v, type(getattr(fresh, k))) or
                  getattr(fresh, k) is None)}
        return cls(**known)

    def dump(self) -> bytes:
        packed: bytes = msgpack.packb(self.__dict__, use_bin_type=True)
        return packed


def _digest(data: bytes) -> str:
    return blake3.blake3(data).hexdigest(16)


def compact_args(args: Any) -> str:
    """Tool arguments as the JSON text that is observed and stored: long top-level values
    replaced by their digest (the same call always gets the same text)."""
    if isinstance(args, dict):
        out = {}
        for key, value in args.items():
            text = value if isinstance(value, str) else None
            if text is None and not isinstance(value, (int, float, bool, type(None))):
                text = json.dumps(value, ensure_ascii=False, separators=(",", ":"),
                                  sort_keys=True)
            if text is not None and len(text) > LONG_VALUE:
                value = "blake3:" + _digest(text.encode("utf-8", "surrogatepass"))
            out[key] = value
        args = out
    elif isinstance(args, str) and len(args) > LONG_VALUE:
        args = "blake3:" + _digest(args.encode("utf-8", "surrogatepass"))
    return json.dumps(args, ensure_ascii=False, separators=(",", ":"))


def payload_digest(payload: Any, settings: EngineSettings, tool: str | None,
                   engine: Any) -> str | None:
    """A payload as the hook observes and stores it: its answer (SPEC §12.1: volatile spans
    replaced, the tool's ignored JSON keys; by the session's ``engine`` module) in base32,
    which the answer scanner leaves as it is (a hex digest would be one long hex id to it), or
    None for no payload or the empty answer."""
    if payload is None:
        return None
    if isinstance(payload, bytes):
        data = payload
    else:
        text = payload if isinstance(payload, str) else json.dumps(
            payload, ensure_ascii=False, separators=(",", ":"), sort_keys=True)
        data = text.encode("utf-8", "surrogatepass")
    keys = dict(settings.ignore_json_keys_by_tool).get(tool or "", settings.ignore_json_keys)
    answer = engine.answer_digest(data, settings.answer_volatile, keys)
    if answer is None:
        return None
    import base64  # a result's: a call's event never needs it

    return "answer:" + base64.b32encode(answer).decode("ascii").rstrip("=").lower()


def _no_op(payload: Any) -> bool:
    """SPEC §1: ``no_op`` is the tool's own claim, a reserved top-level key of its response."""
    return isinstance(payload, dict) and payload.get("no_op") is True


class HookSession:
    """Load a session, apply one event, save it. Use as a context manager (it holds the
    store's hook lock). ``close=False`` keeps the store's connections open for the next event
    of this process (a resident server) or for the process exit to drop (the command)."""

    def __init__(self, store_path: str, session: str, config: GuardrailsConfig,
                 implementation: str | None = None, *, close: bool = True,
                 wait: float = WAIT, parent: str | None = None):
        from ...durability.anchor import hold_lock
        from ...durability.rows import ResetRow
        from ...durability.sqlite import SQLiteStore, sqlite_error
        from ...errors import StoreError, StoreUnreadable

        self._close = close
        self.session = session
        self.store_path = store_path
        self.wait = wait
        self._deadline = time.monotonic() + wait
        #: why this invocation's rows or window were not all recorded (None: they were)
        self.problem: str | None = None
        self._lock = hold_lock(store_path + ".lock", wait, "take the hooks' lock")
        try:
            opened: tuple[Any, sqlite3.Connection | None] | None = \
                None if close else _OPEN.get(store_path)
            if opened is None:
                # the window's table first, in the same file: a path that is no database is
                # said here, before the store would start retrying it in memory
                db: sqlite3.Connection | None = None
                try:
                    if os.path.isdir(store_path):
                        raise StoreUnreadable(f"{store_path}: is a directory, not a database "
                                              "file")
                    db = sqlite3.connect(store_path, timeout=wait, isolation_level=None)
                    # the hook state is a cache of the window, not evidence: a write lost to a
                    # power cut loses at most one event of a pattern (halts are the store's)
                    db.execute("PRAGMA synchronous = NORMAL")
                    db.execute(_SCHEMA)
                except (sqlite3.Error, StoreUnreadable) as exc:
                    if db is not None:
                        db.close()
                    error = exc if isinstance(exc, StoreError) else \
                        sqlite_error(store_path, exc, "open the hooks' window", wait)
                    if not isinstance(error, StoreUnreadable):
                        raise error from None  # transient (locked, a full disk): the caller's
                    db = None  # unreadable: no window; the store's restore halts the session
                opened = (SQLiteStore(store_path, timeout=wait), db)
                if not close and db is not None:
                    _OPEN[store_path] = opened
            self.store: Any
            self._db: sqlite3.Connection | None
            self.store, self._db = opened
            self.state = _State.load(_read_window(self._db, store_path, session, wait))
            LOGGER.addFilter(self._once)  # before the guardrails announce their configuration
            try:
                history: Any = self.store.history(session)
            except StoreError:
                history = None  # the guardrails' restore reads it again and says what it means
            # a full session: its turn in progress kept in the store (every event is a new
            # process), its feedback told with the next answer the harness shows the model
            task = None if parent is None else _child_task(self.store, config, parent, session)
            self.guardrails = Guardrails(config, session_id=session, store=self.store,
                                         history=history, implementation=implementation,
                                         durable_turns=True, feedback_at_once=True, task=task)
            # how its watchdog compares results (the payload is observed as its answer)
            self._settings = (config.watchdog or WatchdogConfig()).engine_settings()
            self._engine = _engine.load(_engine.resolve(implementation))
        except BaseException:
            LOGGER.removeFilter(self._once)
            self._lock.close()
            raise
        self._carry_calls()
        resets = sum(1 for r in history.rows if r.kind == ResetRow.KIND) if history else 0
        if resets > self.state.resets:  # an operator reset since: the runs start over
            self.state.resets = resets
            self.state.events.clear()
        self._replay()

    def _carry_calls(self) -> None:
        """The task's tool calls of earlier invocations. A task without a tool-call cap writes
        its count only with its next budget row (a step, a stop attempt: what it is worth a
        write for), and every invocation is a process of its own, so the count each one ends
        with is kept in the window and carried into the next (never lowering the store's): the
        store's rows then seal it with the next budget row. A capped count is the store's
        alone (a row per call)."""
        task = self.guardrails.task
        self._sealed_calls = task.tool_calls
        if task.task_id == self.session and not task.caps["tool_calls"] and \
                self.state.calls > task.tool_calls:
            from ...durability.rows import BudgetRow

            task.restore_from([BudgetRow(task.task_id, {"tool_calls": self.state.calls})])

    def _once(self, record: logging.LogRecord) -> bool:
        """A logging filter: a one-time notice (``extra=ONCE``) is said once per session, not
        once per hook process (every event is one), kept in the session's state."""
        if not getattr(record, "once", False):
            return True
        key = _digest(record.getMessage().encode("utf-8", "surrogatepass"))
        said = self.state.said
        if key in said:
            return False
        said.append(key)
        del said[:-SAID]
        return True

    def __enter__(self) -> HookSession:
        return self

    def _left(self) -> float:
        """Seconds left of this invocation's wait (at least a little, to try once)."""
        return max(0.05, self._deadline - time.monotonic())

    def __exit__(self, *exc: object) -> None:
        from ...durability.sqlite import sqlite_error

        try:
            # every decided row in the store before the process ends (a row the store was slow
            # to take would otherwise wait for a background retry that exiting cuts short)
            if not self.guardrails.flush(self._left()):
                self.problem = self.guardrails.store_problem or "the store did not take the rows"
            if exc[0] is None and self.problem is None and self._db is not None:
                self.state.calls = self.guardrails.task.tool_calls
                try:
                    self._db.execute(f"PRAGMA busy_timeout = {int(self._left() * 1000)}")
                    self._db.execute("INSERT OR REPLACE INTO hook_sessions VALUES (?, ?)",
                                     (self.session, self.state.dump()))
                except sqlite3.Error as error:
                    self.problem = str(sqlite_error(self.store_path, error,
                                                    "record the hooks' window", self.wait))
        finally:
            if self._close or self.problem is not None:
                if self._db is not None:
                    self._db.close()
                self.store.close()
                _OPEN.pop(self.store_path, None)
            LOGGER.removeFilter(self._once)
            self._lock.close()  # releases the lock

    # -- replay ------------------------------------------------------------------------------

    def _replay(self) -> None:
        watchdog = self.guardrails.watchdog
        if watchdog is None:
            return
        for event in self.state.events:
            kind = event[0]
            if kind == "c":
                watchdog.observe_call(event[1], event[2])
            elif kind == "r":
                watchdog.observe_result(event[1], error=event[2], no_op=event[3],
                                        payload=event[4])
            elif kind == "k":
                watchdog.observe_compaction()
            elif kind == "x":
                watchdog.observe_text(event[1])
            elif kind == "e":
                watchdog.end_turn()
            else:
                watchdog.turn_boundary()

    def _record(self, event: list[Any]) -> None:
        events = self.state.events
        events.append(event)
        if len(events) > WINDOW:
            del events[: len(events) - WINDOW]

    def _seen(self, kind: str, call_id: str | None) -> bool:
        """Whether this call's (``c``) or result's (``r``) event was observed already (the
        id remembered when it was not): observations are idempotent per tool-call id."""
        if call_id is None:
            return False
        key = f"{kind}:{call_id}"
        seen = self.state.seen
        if key in seen:
            return True
        seen.append(key)
        if len(seen) > SEEN:
            del seen[: len(seen) - SEEN]
        return False

    def interrupt_once(self, pid: int | None) -> int | None:
        """``pid`` when this session has not interrupted that harness process yet (it is
        remembered), else None: a halted session interrupts each process once."""
        if pid is None or pid in self.state.interrupted:
            return None
        self.state.interrupted = [*self.state.interrupted[-15:], pid]
        return pid

    # -- events ------------------------------------------------------------------------------

    def apply(self, event: HookEvent, usage: Sequence[dict[str, Any]] = ()) -> Verdict:
        """The event's verdict. ``usage``: the transcript's usage since the last event
        (``on_usage``'s priced arguments, ``session.dispatch.usage_arguments``), observed
        first (a cut or halt it makes is the session's, for this event too)."""
        g = self.guardrails
        if event.turn is not None and event.turn != self.state.turn:
            # a new prompt/turn id: a boundary even when its UserPromptSubmit hook is not installed
            if self.state.turn is not None and event.kind not in ("prompt", "session_start"):
                self._new_turn()
            self.state.turn = event.turn
        if event.kind == "call" and g.blocked is None and not g.in_turn:
            g.continue_turn()  # a tool call: the model is in a turn, reported or not
        for arguments in usage:
            observe(g, "usage", **arguments)
        handler = getattr(self, "_on_" + event.kind, None)
        verdict = handler(event) if handler is not None else Verdict()
        task = g.task
        if event.kind in ("stop", "prompt", "session_start", "end") and \
                task.tool_calls > self._sealed_calls and task.task_id == self.session:
            task.seal()  # a turn's end: its tool calls in the store (``_carry_calls``)
        return verdict

    def _on_call(self, event: HookEvent) -> Verdict:
        g = self.guardrails
        if g.halted:
            return Verdict(deny=self._halt_text(), halt=self._for_user(g.refusal().reason))
        if g.blocked is not None:  # the turn was cut: its later calls get the cut's reason
            return Verdict(deny=told(g.blocked))
        if self._seen("c", event.call_id):
            return Verdict()  # this call was observed already (and was not denied)
        args = compact_args(event.args)
        decision = observe(g, "call", event.name, args, event.call_id)
        self._record(["c", event.name, args])
        verdict = self._verdict(decision)
        if verdict.cut is not None:
            verdict.deny = verdict.cut
        return verdict

    def _on_result(self, event: HookEvent) -> Verdict:
        g = self.guardrails
        if g.halted:
            return Verdict(halt=self._for_user(g.refusal().reason), told=self._halt_text())
        if g.blocked is not None:
            return Verdict()  # a result of the cut turn: nothing more to say
        if self._seen("r", event.call_id):
            return Verdict()  # this result was observed already
        error = event.error
        no_op = error is None and _no_op(event.payload)
        digest = None if error is not None else payload_digest(
            event.payload, self._settings, event.name, self._engine)
        decision = observe(g, "result", event.name, digest, error, no_op, event.call_id)
        self._record(["r", event.name, error, no_op, digest])
        verdict = self._verdict(decision)
        if verdict.halt is None:
            verdict.context = self._feedback(now=True)  # with a result: in the turn
        return verdict

    def _on_prompt(self, event: HookEvent) -> Verdict:
        self._new_turn()
        task = self.guardrails.task
        ex = task.exhausted
        if task.checkin is not None and (task.outcome is None or (
                ex is not None and ex.counter.startswith("checkin:"))):
            task.check_in(who="hook")  # the user's prompt is the operator's check-in
        started = observe(self.guardrails, "turn_start")
        if isinstance(started, Decision):  # refused: halted, or the task exhausted
            if started.guardrail == BUDGET:  # an exhausted task: a raise resumes it
                ex = task.exhausted_by()
                counter = ex.counter if ex is not None else "steps"
                return Verdict(block=f"tripwire: {started.reason}. The session's task is "
                               "paused at its cap: the operator raises it to resume "
                               f"(tripwire reset STORE --task {ex.by_task if ex else task.task_id}"
                               f" --raise {counter}=+N), and the next prompt continues.")
            return Verdict(block=self._for_user(started.reason))
        return Verdict(context=self._feedback())

    def _on_session_start(self, event: HookEvent) -> Verdict:
        if event.source == "compact":  # the session goes on, compacted: no turn boundary
            return self._on_compaction(event)
        self._new_turn()
        return Verdict(context=None if self.guardrails.halted else self._feedback())

    def _on_compaction(self, event: HookEvent) -> Verdict:
        """One compaction, counted at the first of its reports: PreCompact, PostCompact, the
        session start that follows it (``phase`` None)."""
        g = self.guardrails
        seen = self.state.compaction
        self.state.compaction = event.phase or ""
        if g.halted:
            return Verdict(halt=self._for_user(g.refusal().reason))
        if (event.phase == "post" and seen == "pre") or (event.phase is None and seen):
            return Verdict()  # the compaction an earlier report of it counted
        decision = observe(g, "compaction", mechanical=False, automatic=not event.manual)
        self._record(["k"])
        verdict = self._verdict(decision)
        return verdict if verdict.halt is not None else Verdict()

    def _on_batch(self, event: HookEvent) -> Verdict:
        """A parallel batch's results at once: what no PreToolUse or PostToolUse reported is
        observed here (each call, then each result, by their ids); the batch's verdict is the
        session's cut or halt, else its feedback."""
        g = self.guardrails
        if g.halted:
            return Verdict(halt=self._for_user(g.refusal().reason), told=self._halt_text())
        if g.blocked is not None:
            return Verdict()
        for item in event.batch:
            if g.blocked is not None:
                break
            if not self._seen("c", item.call_id):
                args = compact_args(item.args)
                observe(g, "call", item.name, args, item.call_id)
                self._record(["c", item.name, args])
            if g.blocked is None and not self._seen("r", item.call_id):
                no_op = _no_op(item.payload)
                digest = payload_digest(item.payload, self._settings, item.name, self._engine)
                observe(g, "result", item.name, digest, None, no_op, item.call_id)
                self._record(["r", item.name, None, no_op, digest])
        verdict = Verdict() if g.blocked is None else self._verdict(g.blocked)
        if verdict.halt is None:
            verdict.context = self._feedback(now=True)
        return verdict

    def _on_end(self, event: HookEvent) -> Verdict:
        """The session ends: its turn in progress is closed, so its rows are written now."""
        self._new_turn()
        return Verdict()

    def _on_stop(self, event: HookEvent) -> Verdict:
        g = self.guardrails
        if g.halted:
            return Verdict(halt=self._for_user(g.refusal().reason))
        if event.answer and not event.stop_hook_active and event.stop_count is None:
            # a first attempt to finish: the agent's words end its turn (a storm re-arms)
            observe(g, "text", event.answer)
            self._record(["x", event.answer[:LONG_VALUE]])
        refusals = _refusals(self.state, event)
        if not refusals:
            return Verdict()  # a first attempt: whether a stop hook refuses it shows next time
        # this attempt comes after a stop hook refused the previous one (whether or not tools
        # ran between them), a rejection charged to the session's task (durable: its budget
        # rows); the one past the stop_rejections cap exhausts it, and under enforce the agent
        # stops here, the cap overriding the stop hooks
        decision = None
        for _ in range(refusals):
            decision = observe(g, "stop_attempt", False, event.answer)
            assert isinstance(decision, Decision)
            if not decision.proceed:
                break
        assert isinstance(decision, Decision)
        if decision.proceed or decision.guardrail != BUDGET:
            return Verdict()
        return Verdict(halt=(
            f"tripwire: budget guardrail: {decision.reason}, so the agent stops here: this "
            "cap overrides the stop hooks. Its last answer was not accepted by the stop hook "
            "and is unverified. The session refuses new turns."))

    # -- the harness's view of the session's decisions -----------------------------------------

    def _new_turn(self) -> None:
        """A turn boundary: the session ends its turn (one that had events, or was cut: the
        session knows whether a cut must still count toward escalation), and the detectors
        see the boundary."""
        g = self.guardrails
        if g.in_turn or (g.blocked is not None and not g.halted):
            observe(g, "turn_end")
        elif g.watchdog is not None:  # a turn of no call (none opened it in this process)
            g.watchdog.end_turn()
        self._record(["e"])  # the detectors' end of a turn: one in agent text re-arms a storm

    def _verdict(self, decision: Outcome) -> Verdict:
        """A cut or halt as the harness shows it: the reason for the model (``cut``), and a
        halt's for the user."""
        assert isinstance(decision, Decision)  # what a call's or result's observation gives
        if decision.proceed:
            return Verdict()
        verdict = Verdict(cut=told(decision))
        if decision.halt_session:
            verdict.halt = self._for_user(decision.reason)
            verdict.told = verdict.cut
        return verdict

    def _feedback(self, now: bool = False) -> str | None:
        """The session's queued feedback, delivered now (None: nothing to say); ``now``: in
        the turn it is about (a result's), not at a turn's start (a prompt's)."""
        return self.guardrails.take_feedback(now=now) or None

    def _for_user(self, reason: str) -> str:
        """A halt's reason as the user reads it, with the command that resumes the session."""
        return (f"tripwire: {reason} To resume: tripwire reset {self.store_path} "
                f"--session {self.session}")

    def _halt_text(self) -> str:
        """What the model is told of the session's halt: what it was told when it halted (the
        session's halting decision), or, for a halt this hook did not see (another process,
        a store that cannot be trusted), that the session is halted."""
        blocked = self.guardrails.blocked
        if blocked is not None and blocked.action == HALT_SESSION:
            return told(blocked)
        return HALTED


def _read_window(db: sqlite3.Connection | None, store_path: str, session: str,
                 wait: float) -> bytes | None:
    """The session's window as stored; None when there is none, or when the file cannot be
    read (then the store's own restore says what that means: unreadable halts)."""
    from ...durability.sqlite import sqlite_error
    from ...errors import StoreUnreadable

    if db is None:
        return None
    try:  # bounded: the table is the agent's to write in the same-user setup
        row = db.execute("SELECT CASE WHEN length(state) <= ? THEN state END FROM "
                         "hook_sessions WHERE session = ?", (MAX_STATE, session)).fetchone()
    except sqlite3.Error as exc:
        error = sqlite_error(store_path, exc, "read the hooks' window", wait)
        if isinstance(error, StoreUnreadable):
            return None
        raise error from None
    return row[0] if row and isinstance(row[0], bytes) else None


def _refusals(state: _State, event: HookEvent) -> int:
    """The stop hooks' refusals a stop attempt reports: one with ``stop_hook_active``;
    Cursor's ``loop_count`` counts them for the conversation, so its increase since the last
    stop (a lower count: the count started over; ``state.stops`` keeps the last)."""
    if event.stop_count is None:
        return 1 if event.stop_hook_active else 0
    seen, state.stops = state.stops, event.stop_count
    return event.stop_count - seen if event.stop_count >= seen else event.stop_count


def _child_task(store: Any, config: GuardrailsConfig, parent: str, session: str) -> Any:
    """A sub-agent's task: a child of its parent session's implicit task (whose rows are the
    parent session's own, in the store), so every charge reaches the parent's caps too."""
    from ...budgets.task import Task
    from ...durability.log import SessionLog

    log = SessionLog(store, parent, lambda text: f"[task {parent}] {text}")
    root = Task(budget=config.resolve().budget, task_id=parent, _log=log,
                _history=store.history(parent))
    return root.child(task_id=session)


#: The model's reason for a call of a halted session whose halting decision the hook never saw.
HALTED = ("[watchdog] This session was halted for a runaway pattern and refuses further tool "
          "calls. Stop working and end your turn with a short summary of where you are.")


#: Where a halt's reason turns to the operator (what follows is not for the model).
_OPERATOR = re.compile(r"[,:]? *(?:the session refuses new turns|so the session (?:is|stays) "
                       r"halted until|(?:the session )?until an operator)", re.IGNORECASE)


def told(decision: Decision) -> str:
    """A cut's or halt's reason for the model: the critical alerts' ``[watchdog]`` block (all
    of its alerts when none is critical); a decision without alerts (a ceiling, a store that
    cannot be read) says what happened without the operator's instructions (how to reset is
    not the model's business: it would only try)."""
    alerts = [a for a in decision.alerts if a.critical] or list(decision.alerts)
    if alerts:
        return render_feedback(alerts, now=True)  # the call in flight is denied for them
    if not decision.halt_session:
        return decision.reason
    what = _OPERATOR.split(decision.reason, 1)[0].rstrip(". :")
    return f"[watchdog] {what}. {HALTED.removeprefix('[watchdog] ')}"
