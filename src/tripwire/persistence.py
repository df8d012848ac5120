"""Getting one session's durable rows into the store: in order, promptly, never lost silently.

A guardrail decision appends its row before it returns (SPEC §5), but a decision must not wait
out another writer's lock: it waits at most ``DECISION_WAIT`` seconds. A row the store did not
take by then (locked, full disk, the file gone) stays in the session's ``Outbox``, in order, and
a background retrier writes it as soon as the store takes it (with the store's full timeout);
the next decision point tries too, and so does a last attempt at interpreter exit. While a row
waits, the decision still holds in memory.
"""

from __future__ import annotations

import atexit
import logging
import threading
from collections import deque
from collections.abc import Callable
from typing import Any

from .store import StoreError

__all__ = ["Outbox", "DECISION_WAIT", "RETRIER"]

LOGGER = logging.getLogger("tripwire")

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
        self.queued_counts: Any = (None, 0, 0)  # the escalation counts as of that row

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
                    LOGGER.error("tripwire: [session %s] %d row(s) were never persisted: the "
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
