"""Getting one session's durable rows into the store: in order, promptly, never lost silently.

A guardrail decision appends its row before it returns (SPEC §5), but a decision must not wait
out another writer's lock: it waits at most ``DECISION_WAIT`` seconds. A row the store did not
take by then (locked, full disk, the file gone) stays in the session's ``Outbox``, in order, and
a background retrier writes it as soon as the store takes it (with the store's full timeout);
the next decision point tries too, and so does a last attempt at interpreter exit. While a row
waits, the decision still holds in memory. ``SessionLog`` is one session's log: its outbox, its
history read and folded back. The operator lines about the store are said here, by the log."""

from __future__ import annotations

import atexit
import threading
from collections import deque
from collections.abc import Callable
from typing import Any

from ..base.log import LOGGER
from ..errors import StoreError, StoreUnreadable
from .fold import Folded, fold_history, fold_unreadable
from .rows import EscalationCounts, StoredRow

__all__ = ["Outbox", "SessionLog", "DECISION_WAIT", "RETRIER"]


#: How long a guardrail decision waits for the store before its row goes to the background.
DECISION_WAIT = 0.05


#: Background retry backoff: first wait, cap (seconds).
RETRY_FIRST, RETRY_CAP = 0.05, 2.0


class Outbox:
    """A session's rows on their way to the store. ``put`` queues a row; ``drain`` writes the
    queue in order and says whether it is empty. Two threads never write one session's rows at
    once (the second leaves its row to the first, which drains until the queue is empty), and
    the queue has its own lock, so a background write never holds the session's lock."""

    __slots__ = ("_draining", "_lock", "_rows", "queued_counts", "queued_spend")

    def __init__(self) -> None:
        self._rows: deque[tuple[str, dict[str, Any]]] = deque()
        self._lock = threading.Lock()
        self._draining = threading.Lock()
        self.queued_spend = 0         # the spend (nano-dollars) of the newest row that carries it
        self.queued_counts = EscalationCounts()  # the escalation counts as of that row

    def __len__(self) -> int:
        return len(self._rows)

    def put(self, kind: str, data: dict[str, Any]) -> None:
        with self._lock:
            self._rows.append((kind, data))

    def drain(self, store: Any, session_id: str, wait: float | None,
              on_error: Callable[[str, StoreError], None], *, take_over: float = 0.0) -> bool:
        """Write queued rows in order; True when none is left. ``wait`` bounds each append's
        wait for the store (None: the store's own timeout); ``take_over``, how long to wait for
        another thread that is writing them (0: leave them to it)."""
        while True:
            if not self._draining.acquire(timeout=take_over) if take_over else \
                    not self._draining.acquire(blocking=False):
                return False  # another thread is writing this session's rows, ours included
            try:
                while True:
                    with self._lock:
                        if not self._rows:
                            break
                        kind, data = self._rows[0]
                    try:
                        store.append(session_id, kind, data, wait=wait)
                    except StoreError as exc:
                        on_error(kind, exc)
                        return False
                    except (ValueError, TypeError, OverflowError) as exc:
                        # The row itself cannot be stored (the store checks it before any
                        # write): retrying it would hold up every row behind it for good.
                        LOGGER.error("[session %s] %s", session_id, row_dropped(kind, exc))
                    with self._lock:
                        self._rows.popleft()
            finally:
                self._draining.release()
            if not self._rows:  # a row put while we were releasing is ours to write too
                return True


class _Retrier:
    """One daemon thread for the whole process: writes the outboxes a decision left behind. It
    holds each outbox (and its store) itself, so rows are written even after the host dropped
    the session's guardrails."""

    def __init__(self) -> None:
        self._waiting: dict[int, tuple[Outbox, Any, str]] = {}
        self._cv = threading.Condition()
        self._thread: threading.Thread | None = None

    def schedule(self, outbox: Outbox, store: Any, session_id: str) -> None:
        with self._cv:
            self._waiting[id(outbox)] = (outbox, store, session_id)
            if self._thread is None or not self._thread.is_alive():
                self._thread = threading.Thread(target=self._run, name="tripwire-store-retry",
                                                daemon=True)
                self._thread.start()
            self._cv.notify()

    def _run(self) -> None:
        delay = RETRY_FIRST
        while True:
            with self._cv:
                while not self._waiting:
                    self._cv.wait()
                    delay = RETRY_FIRST
                waiting = list(self._waiting.values())
            if self._flush(waiting):
                with self._cv:
                    self._cv.wait(delay)  # a new schedule() wakes it sooner
                delay = min(delay * 2, RETRY_CAP)

    def _flush(self, waiting: list[tuple[Outbox, Any, str]], at_exit: bool = False) -> int:
        """Drain each outbox (quietly: its first failure was logged); how many are left."""
        left = 0
        for outbox, store, session_id in waiting:
            if getattr(store, "closed", False):
                if len(outbox):
                    LOGGER.error("[session %s] %d row(s) were never persisted: the "
                                 "store was closed first", session_id, len(outbox))
                done = True
            else:
                # at exit, wait for a write the retrier thread has under way
                take_over = getattr(store, "timeout", 5.0) if at_exit else 0.0
                done = outbox.drain(store, session_id, None, _quiet, take_over=take_over)
            with self._cv:
                if done and self._waiting.get(id(outbox), (None,))[0] is outbox:
                    del self._waiting[id(outbox)]
                elif not done:
                    left += 1
        return left

    def flush_at_exit(self) -> None:
        """A last, full-timeout attempt for every outbox still waiting (a halted session that
        never reached another decision point must not lose its halt at exit)."""
        with self._cv:
            waiting = list(self._waiting.values())
        self._flush(waiting, at_exit=True)


def _quiet(kind: str, exc: StoreError) -> None:
    pass


RETRIER = _Retrier()
atexit.register(RETRIER.flush_at_exit)


class SessionLog:
    """One session's durable log, as its ``Guardrails`` writes and reads it: rows appended in
    order before the decision returns (waiting at most ``DECISION_WAIT``; the rest goes to the
    retrier), and the session's history read and folded back at restore. The guardrails and
    the tasks hand it finished rows (``rows.py``'s records)."""

    __slots__ = ("line", "outbox", "problem", "session_id", "shared", "store")

    def __init__(self, store: Any, session_id: str, line: Callable[[str], str]):
        self.store = store
        self.session_id = session_id
        self.line = line  # the session's log-line prefix
        self.outbox = Outbox()
        self.problem: str | None = None  # why the last drain left rows behind (None: none)
        # other processes write this session's rows too (a fleet of daemons on one database):
        # the guardrails read the history back at each turn start
        self.shared = getattr(store, "shared", False) is True

    def __len__(self) -> int:
        return len(self.outbox)

    def put(self, row: StoredRow, state: tuple[int, EscalationCounts] | None = None) -> None:
        """Append a row now (or leave it to the retrier). ``state``: the spend and escalation
        counts the row carries, so a later decision knows whether the store has them."""
        outbox = self.outbox
        outbox.put(row.KIND, row.to_data())
        if state is not None:
            outbox.queued_spend, outbox.queued_counts = state
        self.drain(DECISION_WAIT)

    def holds(self, spend: int, counts: EscalationCounts | None = None) -> bool:
        """Whether the rows written or queued already carry this spend (and counts)."""
        outbox = self.outbox
        return spend == outbox.queued_spend and (counts is None or counts == outbox.queued_counts)

    def mark_stored(self, spend: int, counts: EscalationCounts) -> None:
        """What the store holds after a restore."""
        self.outbox.queued_spend, self.outbox.queued_counts = spend, counts

    def drain(self, wait: float | None) -> bool:
        """Write the queued rows (each append waiting at most ``wait``; None: the store's own
        timeout); True when none is left, else the retrier takes over."""
        # and as long for a write the background retrier has under way
        take_over = getattr(self.store, "timeout", 5.0) if wait is None else wait
        if self.outbox.drain(self.store, self.session_id, wait, self._failed,
                             take_over=take_over):
            self.problem = None
            return True
        if self.problem is None:  # another thread holds the rows: they are not written yet
            self.problem = (f"another thread was still writing this session's rows after "
                            f"{take_over:g} s")
        RETRIER.schedule(self.outbox, self.store, self.session_id)
        return False

    def flush(self, wait: float | None = None) -> bool:
        """Every row, waiting the store's full timeout (and for a retrier write under way);
        ``wait``: at most this long for each instead."""
        return self.drain(wait)

    def _failed(self, kind: str, exc: StoreError) -> None:
        if self.problem is None:  # said once per spell of failures
            LOGGER.error(self.line(store_failed(kind, exc)))
        self.problem = str(exc)

    def read(self, history: Any = None) -> Folded | None:
        """The session's history folded (``history``: read already, as ``Fleet.restore_all``
        does), or None when the store cannot be read (the session runs without it, warned)."""
        try:
            if history is None:
                history = self.store.history(self.session_id)
        except StoreUnreadable as exc:
            # not transient, and not absent: the session halts, with what the anchor proves
            anchored = getattr(self.store, "anchored", None)
            folded = fold_unreadable(str(exc), anchored(self.session_id) if anchored else None)
            LOGGER.warning(self.line(store_unreadable(exc)))
            return folded
        except StoreError as exc:  # transient (locked, busy, a lost connection): fail open
            LOGGER.warning(self.line(history_unreadable(exc)))
            return None
        folded = fold_history(history)
        for warning in folded.warnings:
            LOGGER.warning(self.line(warning))
        return folded


def store_failed(kind: str, exc: Exception) -> str:
    return (f"could not persist a {kind} row ({exc}); kept in memory and retried in the "
            "background and at the next guardrail decision")


def row_dropped(kind: str, exc: Exception) -> str:
    return (f"a {kind} row cannot be stored ({exc}) and was dropped, so the rows behind it "
            "are not held up; the decision it recorded stands in memory")


def store_unreadable(exc: Exception) -> str:
    return (f"the guardrail store cannot be read ({exc}): not a transient fault, so the "
            "session restores halted (store_unreadable) with what the anchor proves")


def history_unreadable(exc: Exception) -> str:
    return f"guardrail history unreadable ({exc}); the session runs without it"
