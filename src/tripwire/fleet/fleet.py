"""``Fleet``: many sessions' guardrails in one process (a daemon hosting thousands of agents).

One ``Guardrails`` per session, created (and restored from the store) on first use; one lock
per session, never one global lock for observations (the fleet's own lock only guards its
session table). Idle sessions can be evicted from memory and are restored from the store on
their next use. ``observe_many`` takes many sessions' events at once and runs detection in the
native core without the GIL.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from ..base.decision import CONTINUE, Decision, Turn
from ..base.inputs import remember_call_id
from ..base.validate import check_session_id
from ..budgets.caps import Budget
from ..budgets.task import Task
from ..budgets.task_rows import TASK_PREFIX
from ..engine import select as _engine
from ..engine.batch import BATCH_KINDS, BatchState, StopReason
from ..errors import (
    BatchInterrupted,
    InvalidEvent,
    StoreError,
    StoreUnreadable,
    TripwireError,
)
from ..interchange.events import Call, Compaction, Reset, Result, Text, TurnEnd, TurnStart, Usage
from ..policy.reporting import Counters, OperatorEvent
from ..session.dispatch import observe
from ..session.guardrails import (
    Guardrails,
    GuardrailsConfig,
    ResetOutcome,
    ResolvedConfig,
    SessionBatch,
)
from .table import SessionTable, session_table_class  # its native twin has the same API

__all__ = ["Fleet", "HaltedSession", "BATCH_KINDS"]

LOGGER = logging.getLogger("tripwire")


@dataclass(frozen=True)
class HaltedSession:
    session_id: str
    halted_by: tuple[str, ...]
    reason: str
    in_memory: bool


class Fleet:
    """Sessions by id. ``fleet.session(id)`` gets or creates a session's ``Guardrails``."""

    def __init__(self, config: GuardrailsConfig | ResolvedConfig | None = None, *,
                 store: Any = None,
                 on_event: Callable[[OperatorEvent], object] | None = None,
                 implementation: str | None = None,
                 summarize: Callable[..., Any] | None = None,
                 feedback_at_once: bool = False):
        """``feedback_at_once``: every session's (``Guardrails``): a host that tells the model
        queued feedback as soon as it can (the gateway, between a response and the next
        request)."""
        self.feedback_at_once = feedback_at_once
        self.settings = (config if isinstance(config, ResolvedConfig)
                         else (config or GuardrailsConfig()).resolve())
        self.implementation = _engine.resolve(implementation)
        self.counters = Counters()  # one set for the whole fleet: what a daemon exports
        self.store = store
        self._on_event = on_event
        self._summarize = summarize
        self._engine = _engine.load(self.implementation)
        # sessions by id; the table's on_call is this fleet's (the native one runs the lookup,
        # the last-used time and the session's on_call in one C call)
        self._sessions: SessionTable = session_table_class(self.implementation)(self.session)
        self.on_call = self._sessions.on_call  # type: ignore[method-assign]
        self._tasks: dict[str, Task] = {}
        self._session_task: dict[str, Task] = {}  # sessions bound to a task (kept over evictions)
        self._lock = threading.Lock()

    # -- sessions ------------------------------------------------------------------------------

    def task(self, task_id: str, objective: str = "",
             budget: Budget | Mapping[str, Any] | None = None, *,
             acceptance: Any = None) -> Task:
        """The fleet's task ``task_id``, created on first use (restored from the store when it
        has one): its unset caps are the fleet's configured budget. Sessions run under it with
        ``session(id, task=...)``; ``task.child(...)`` makes its sub-tasks."""
        with self._lock:
            task = self._tasks.get(task_id)
            if task is None:
                if isinstance(budget, Mapping):
                    budget = Budget.from_mapping(budget)
                task = self._tasks[task_id] = Task(
                    objective, (budget or Budget()).over(self.settings.budget),
                    task_id=task_id, acceptance=acceptance, store=self.store)
            return task

    @property
    def tasks(self) -> dict[str, Task]:
        """The fleet's tasks by id (those made with ``task()``)."""
        return dict(self._tasks)

    def session(self, session_id: str, task: Task | None = None) -> Guardrails:
        """The session's guardrails, created (and restored from the store) on first use;
        ``task``: the task it runs under (when it is created; a session without one runs
        under its own implicit task)."""
        g = self._sessions.get(session_id)
        if g is not None and task is not None and g.task is not task:
            raise InvalidEvent(f"session {session_id!r} already runs under task "
                               f"{g.task.task_id!r}")
        if g is None:
            check_session_id(session_id)
            with self._lock:
                if task is not None:
                    self._session_task[session_id] = task
                g = self._sessions.get(session_id)
                if g is None:
                    g = self._new_session(session_id)
                    self._sessions.add(session_id, g)
        g.last_used = time.monotonic()  # touch(), without a method call: every call is here
        return g

    def in_memory(self, session_id: str) -> Guardrails | None:
        """The session's guardrails if it is in memory, else None: never restored from the
        store nor touched (a listing of the fleet reads this)."""
        return self._sessions.get(session_id)

    def existing(self, session_id: str) -> Guardrails | None:
        """The session's guardrails if the fleet knows it (in memory, or in the store: then
        restored), else None; an unknown session is not created."""
        check_session_id(session_id)
        if session_id in self._sessions or self.store is None:
            return self._sessions.get(session_id)
        try:
            history = self.store.history(session_id)
        except StoreUnreadable:
            history = None  # cannot be told absent: its restore halts it (store_unreadable)
        else:
            if not history.exists:
                return None
        with self._lock:
            g = self._sessions.get(session_id)
            if g is None:
                g = self._new_session(session_id, history)
                self._sessions.add(session_id, g)
        g.last_used = time.monotonic()
        return g

    def _new_session(self, session_id: str, history: Any = None) -> Guardrails:
        return Guardrails(self.settings, session_id=session_id, on_event=self._on_event,
                          counters=self.counters, implementation=self.implementation,
                          summarize=self._summarize, store=self.store, history=history,
                          task=self._session_task.get(session_id),
                          feedback_at_once=self.feedback_at_once)

    def restore_all(self) -> int:
        """Bring every session the store knows into memory (a daemon's start): one read of the
        whole store instead of one per session. Sessions already in memory are left as they
        are. Returns how many were restored; fails open as each session's restore does."""
        if self.store is None:
            return 0

        histories: dict[str, Any]
        try:
            histories = self.store.histories()
        except StoreUnreadable as exc:
            # not transient: every session the anchor knows restores halted (store_unreadable)
            # with what it proves, each through its own restore; others halt when first used
            LOGGER.warning("store unreadable (%s); the %d session(s) its anchor knows restore "
                           "halted", exc, len(getattr(self.store, "anchored_sessions",
                                                      list)()))
            histories = dict.fromkeys(getattr(self.store, "anchored_sessions", list)())
        except StoreError as exc:
            LOGGER.warning("store unreadable (%s); sessions restore one by one on use",
                           exc)
            return 0
        restored = 0
        for sid, history in histories.items():
            with self._lock:
                if sid in self._sessions or sid == "*" or sid.startswith(TASK_PREFIX):
                    continue  # a task's chain is not a session
                self._sessions.add(sid, self._new_session(sid, history))
                restored += 1
        return restored

    def __len__(self) -> int:
        return len(self._sessions)

    def __contains__(self, session_id: object) -> bool:
        return session_id in self._sessions

    def __iter__(self) -> Iterator[str]:
        return iter(self._sessions)

    def evict(self, session_id: str) -> bool:
        """Drop a session from memory; it is restored from the store on its next use. Never
        drops one whose rows are not all in the store (a halt in the outbox would be lost), nor
        a halted one without a store. Takes the session's lock, so it never races a call."""
        g = self._sessions.get(session_id)
        if g is None:
            return False
        return self._evict(session_id, g, None)

    def _evict(self, session_id: str, g: Guardrails, idle_before: float | None) -> bool:
        with g.lock:  # session lock, then the table's: no path takes them the other way round
            if idle_before is not None and g.last_used >= idle_before:
                return False  # used again since it was found idle
            if g.halted and self.store is None:
                return False
            if not g.flush():
                return False  # the store did not take every row: keep the session in memory
            with self._lock:
                return bool(self._sessions.remove(session_id, g))

    def evict_idle(self, idle_seconds: float) -> int:
        """Evict every session unused for ``idle_seconds``; returns how many went."""
        cutoff = time.monotonic() - idle_seconds
        idle = [(sid, g) for sid, g in self._sessions.items() if g.last_used < cutoff]
        return sum(self._evict(sid, g, cutoff) for sid, g in idle)

    def status(self) -> list[HaltedSession]:
        """Halted sessions with their reasons: those in memory, and (with a store) evicted ones
        whose history ends halted."""
        out = []
        for sid in list(self._sessions):
            g = self._sessions.get(sid)
            if g is not None and g.halted:
                s = g.status()
                reason = " ".join(r for r in (s.watchdog_reason, s.cost_reason) if r)
                out.append(HaltedSession(sid, s.halted_by, reason, True))
        if self.store is not None:
            from ..durability.fold import fold_history

            for sid, history in self.store.histories().items():
                if sid in self._sessions or sid.startswith(TASK_PREFIX):
                    continue
                folded = fold_history(history)
                if folded.halted_by:
                    out.append(HaltedSession(sid, folded.halted_by, folded.reason, False))
        return sorted(out, key=lambda h: h.session_id)

    def reset(self, session_id: str, guardrail: str = "all",
              additional_budget_usd: float = 0.0) -> ResetOutcome:
        """An operator reset of one session (restored first if it was evicted)."""
        return self.session(session_id).reset(guardrail, additional_budget_usd)

    # -- one event at a time -------------------------------------------------------------------

    def on_call(self, session_id: str, name: str, args: Any = None,
                id: str | None = None) -> Decision:
        """A tool call of session ``session_id``: its session table's ``on_call``, which
        ``__init__`` binds to each fleet directly (the steps are the table's, once)."""
        return self._sessions.on_call(session_id, name, args, id)

    def on_result(self, session_id: str, name: str | None = None, **fields: Any) -> Decision:
        return self.session(session_id).on_result(name, **fields)

    # -- batches -------------------------------------------------------------------------------

    def observe_many(self, events: Iterable[Any] | Mapping[str, Sequence[Any]],
                     ) -> list[tuple[int, str, Decision | Turn]]:
        """Observe many sessions' events in order; detection runs without the GIL.

        ``events``: tuples ``(session_id, kind, *fields)`` with the fields of ``BATCH_KINDS``
        (``("s1", "call", "read_file", '{"path": "a"}')``; trailing fields may be left out), or
        ``(session_id, Event)``, or a table of columns (numpy arrays or lists): ``{"session":
        [...], "kind": [...], "name": [...], "args": [...], "payload": [...], ...}``.

        Returns ``(index, session_id, outcome)`` for every event whose outcome is not the plain
        ``CONTINUE``, in event order: decisions that cut, halt or carry alerts, a ``Turn`` that
        carries feedback or compaction, a refusal for a ``turn_start`` on a halted session, and
        the blocked decision for each event of a session that is cut or halted.

        A ``compaction`` event (``Compaction``, or a ``(session_id, "compaction")`` row) is
        the session's ``on_compaction`` (``compaction-storm``), like any other row.
        """
        return self._observe_rows(_rows(events))

    def _observe_rows(self, rows: Iterable[Any]) -> list[tuple[int, str, Decision | Turn]]:
        batch = self._engine.Batch(rows, _as_tuple)  # checks every row first
        sessions = self._sessions_for(batch.session_ids)
        views = [g.batch_view() for g in sessions]  # what the batch reads and hands back
        # one fixed order (the objects' addresses, which do not move): two batches never wait
        # for each other in a cycle
        locked = sorted(sessions, key=id)
        for g in locked:
            g.lock.acquire()
        try:
            states = [v.state() for v in views]
            batch.bind(states)
            out: list[tuple[int, str, Decision | Turn]] = []
            while True:
                i, alerts, why = batch.run()
                if why is StopReason.END:
                    break
                self._report_blocked(batch, sessions, views, out)
                row = batch.row(i)
                slot = batch.slot(i)
                g = sessions[slot]
                self._take_changes(batch, views, slot)  # its spend and estimate as of this row
                self._charge_tasks(batch, sessions, slot)  # its task's counts as of this row
                if why is StopReason.PYTHON:
                    try:
                        self._single(row, i, g, out)
                    except TripwireError as e:
                        self._report_blocked(batch, sessions, views, out)
                        self._replay_ids(batch, views, states, i)
                        out.sort(key=_index)
                        raise BatchInterrupted(i, g.session_id, e, out) from e
                else:  # StopReason.POLICY
                    decision = g.on_batch_stop(row[1], alerts)
                    if decision is not CONTINUE:
                        out.append((i, g.session_id, decision))
                batch.update_slot(slot, views[slot].state())
            self._report_blocked(batch, sessions, views, out)
            self._take_changes(batch, views)
            for slot, call_ids in batch.call_ids():  # the sessions the batch drove
                views[slot].call_ids = call_ids
            out.sort(key=_index)
            return out
        finally:
            self._take_changes(batch, views)  # every session's (none left unless a row raised)
            self._charge_tasks(batch, sessions)  # every task, for the rows observed
            self._persist_spend(views)
            for g in reversed(locked):
                g.lock.release()

    def _sessions_for(self, ids: list[str]) -> list[Guardrails]:
        now = time.monotonic()
        get = self._sessions.get
        sessions = []
        for sid in ids:
            g = get(sid)
            if g is None:
                g = self.session(sid)
            g.last_used = now
            sessions.append(g)
        return sessions

    @staticmethod
    def _report_blocked(batch: Any, sessions: list[Guardrails], views: list[SessionBatch],
                        out: list[tuple[int, str, Decision | Turn]]) -> None:
        for j in batch.take_blocked():
            slot = batch.slot(j)
            out.append((j, sessions[slot].session_id, views[slot].blocked))

    def _persist_spend(self, views: list[SessionBatch]) -> None:
        """Usage rows the batch core charged: their spend is durable before the batch returns,
        as on_usage's is (one row per session that spent)."""
        if self.store is None:
            return
        for view in views:
            view.persist_spend()

    @staticmethod
    def _charge_tasks(batch: Any, sessions: list[Guardrails], slot: int = -1) -> None:
        """Charge the tasks of sessions the batch core observed (all, or the one of ``slot``)
        for those rows: totals since the last charge, once per task (the core charged a
        capped counter only below its next mark, so nothing is noted or exhausted by them),
        and one budget row for them when a capped counter moved: a step-capped task's
        consumption is durable at each hand-back and before the batch returns."""
        for k, steps, tokens, nano, calls in batch.task_charges(slot):
            sessions[k].task.charge_batch(steps, tokens, nano, calls)

    @staticmethod
    def _take_changes(batch: Any, views: list[SessionBatch], slot: int = -1) -> None:
        """Hand what the batch changed back to its sessions (all, or the one of ``slot``,
        before Python acts on it: sessions are independent, the others' wait): the spend of
        usage rows, a context a usage measured, estimate bytes of results."""
        for change in batch.changes(slot):
            views[change.slot].take_change(change)

    @staticmethod
    def _replay_ids(batch: Any, views: list[SessionBatch], states: list[BatchState],
                    stop: int) -> None:
        """An interrupted batch: the call id maps of the sessions it drove, as of row stop."""
        for i in range(stop):
            slot = batch.slot(i)
            if states[slot].engine is None:
                continue
            row, ids = batch.row(i), views[slot].call_ids
            if row[1] == "turn_start":
                ids.clear()
            elif row[1] == "call" and row[4] is not None:
                remember_call_id(ids, row[4], row[2])

    def _single(self, row: tuple[Any, ...], index: int, g: Guardrails,
                out: list[tuple[int, str, Decision | Turn]]) -> None:
        """A row the batch core handed to Python whole, through the session's method for it
        (``session.dispatch``: a usage row is not priced, see docs/fleet.md). A reset is not
        reported (its refusal raises: ``BatchInterrupted``)."""
        sid, kind, *fields = row
        outcome = observe(g, kind, *fields)
        if kind == "reset" or outcome is None:
            return
        if outcome is not CONTINUE and (not isinstance(outcome, Turn) or outcome):
            out.append((index, sid, outcome))  # type: ignore[arg-type]


def _index(outcome: tuple[int, str, Decision | Turn]) -> int:
    return outcome[0]




_COLUMNS = {"session", "kind"} | {f for fields in BATCH_KINDS.values() for f in fields}


def _rows(events: Iterable[Any] | Mapping[str, Sequence[Any]]) -> Iterable[Any]:
    """The batch's rows: tuples (session, kind, *fields), as given or built from columns.
    ``Batch`` checks them (and turns ``(session, Event)`` pairs into tuples with ``_as_tuple``)."""
    if not isinstance(events, Mapping):
        return events
    columns = {k: (v.tolist() if hasattr(v, "tolist") else list(v)) for k, v in events.items()}
    if "session" not in columns or "kind" not in columns:
        raise InvalidEvent("a column batch needs 'session' and 'kind' columns")
    unknown = sorted(set(columns) - _COLUMNS)
    if unknown:
        raise InvalidEvent(f"unknown batch columns {unknown} (known: {sorted(_COLUMNS)})")
    n = len(columns["session"])
    if any(len(c) != n for c in columns.values()):
        raise InvalidEvent("batch columns differ in length: "
                           + ", ".join(f"{k}={len(c)}" for k, c in columns.items()))
    rows = []
    for i in range(n):
        kind = columns["kind"][i]
        kind = kind.decode() if isinstance(kind, bytes) else kind
        fields = BATCH_KINDS.get(kind)
        if fields is None:
            raise InvalidEvent(
                f"event {i}: unknown kind {kind!r} (known: {', '.join(BATCH_KINDS)})")
        sid = columns["session"][i]
        rows.append((sid.decode() if isinstance(sid, bytes) else sid, kind,
                     *(columns[f][i] if f in columns else None for f in fields)))
    return rows


# each event class's batch tuple, looked up by the event's class (a corpus pass converts every
# event: one dict lookup instead of a chain of isinstance tests)
_TUPLE_OF: dict[type, Callable[[Any, Any], tuple[Any, ...]]] = {
    Call: lambda sid, ev: (sid, "call", ev.name, ev.args, ev.id),
    Result: lambda sid, ev: (sid, "result", ev.name, ev.payload, ev.error, ev.no_op, ev.id,
                             ev.unknown_tool),
    Text: lambda sid, ev: (sid, "text", ev.text),
    Usage: lambda sid, ev: (sid, "usage", ev.model, ev.input_tokens, ev.output_tokens,
                            ev.cost_usd),
    TurnStart: lambda sid, ev: (sid, "turn_start"),
    TurnEnd: lambda sid, ev: (sid, "turn_end"),
    Reset: lambda sid, ev: (sid, "reset", ev.guardrail, ev.additional_budget_usd),
    Compaction: lambda sid, ev: (sid, "compaction", ev.mechanical, ev.automatic),
}


def _as_tuple(event: Any, i: int) -> tuple[Any, ...]:
    """A ``(session_id, Event)`` pair as a batch tuple."""
    if not (isinstance(event, (tuple, list)) and len(event) == 2):
        raise InvalidEvent(f"expected (session_id, kind, *fields), not {event!r}")
    return batch_row(*event)


def batch_row(sid: Any, ev: Any) -> tuple[Any, ...]:
    """One session's ``Event`` as the batch tuple ``observe_many`` takes (a caller that
    builds a batch from events makes its rows with this, once, instead of pairs)."""
    make = _TUPLE_OF.get(type(ev))
    if make is None:  # a subclass of an event class, or no event at all
        make = next((_TUPLE_OF[c] for c in type(ev).__mro__ if c in _TUPLE_OF), None)
        if make is None:
            raise InvalidEvent(f"not an event: {ev!r}")
    return make(sid, ev)
