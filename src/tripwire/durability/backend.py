"""``ChainedStore``: what every store backend is made of besides its SQL.

The settings every backend takes (key, timeout, read-only, anchor, shared), the connection's
life (held per operation under a lock, reopened after a fork or a lost connection, closed
once), and the ``EventStore`` methods in terms of ``chain.py``'s rules and ``anchor.py``'s file:
``append`` (the anchor's lock, then the backend's write transaction, then the anchor), the
histories and ``verify`` (one read transaction, then the verdicts). A backend (``sqlite.py``,
``postgres.py``) supplies ``_writing`` / ``_reading`` (a transaction over ``chain.Tables``),
``_open``, ``_error``, ``_rollback`` and its driver's error type, and nothing else.
"""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Iterable, Iterator, Mapping
from contextlib import AbstractContextManager, contextmanager, suppress
from itertools import groupby
from operator import itemgetter
from typing import Any, TypeVar

import msgpack

from ..base.log import LOGGER
from ..errors import StoreError, StoreKeyMismatch, StoreUnreadable
from .anchor import ANCHOR_ENV, AnchorEntry, AnchorFile
from .chain import (
    KEY_ENV,
    NO_HALTS,
    SCHEMA_VERSION,
    ChainReport,
    HaltedList,
    Row,
    SessionHistory,
    Tables,
    append_row,
    check_row,
    check_session,
    deleted_session,
    encode_data,
    key_and_source,
    key_check_of,
    list_hash,
    manifest_mac,
    manifest_ok,
    notice_default_key,
    store_report,
    verify_session,
)

__all__ = ["ChainedStore"]

_Store = TypeVar("_Store", bound="ChainedStore")


class ChainedStore:
    """The base of every store backend (see the module's docstring); not a store by itself."""

    path: str  # where the store is, as messages name it (a file, a URL without its password)
    read_only: bool
    timeout: float
    #: where the key came from: ``"argument"``, ``"environment"`` or ``"default"``
    key_source: str
    #: the anchor file's path (None: no anchor)
    anchor: str | None
    #: other processes run the same sessions on this store (the guardrails then read a
    #: session's history back at each turn start: halts, spend and resets written elsewhere)
    shared: bool = False

    _conn: Any  # the backend's connection; None: not open yet, lost, or left behind by fork()
    _backend_error: type[Exception]  # what the backend's driver raises

    def _init_store(self, key: bytes | str | None, anchor: str | os.PathLike[str] | None, *,
                    timeout: float, read_only: bool, shared: bool) -> None:
        """The settings every backend takes, checked once (a backend then opens its connection
        with ``_open_or_defer``)."""
        if not timeout >= 0:
            raise ValueError(f"timeout must be >= 0 seconds, got {timeout!r}")
        self.timeout = float(timeout)
        self.read_only = read_only
        self.shared = shared
        self._key, self.key_source = key_and_source(key)
        if anchor is None:
            anchor = os.environ.get(ANCHOR_ENV, "").strip() or None
        self.anchor = os.fspath(anchor) if anchor is not None else None
        self._anchor = AnchorFile(self.anchor, self._key) if self.anchor is not None else None
        self._key_check = key_check_of(self._key)
        self._key_ok = True  # the store's key check agrees with this key (read at open)
        self._epoch = b""  # the store's epoch (meta, read at open; b"": a store made before it)
        self._halted = HaltedList()
        self._closed = False
        self._lock = threading.Lock()
        self._pid = os.getpid()

    # -- the connection's life (a backend supplies _open, _error, _rollback, its error type) --

    @contextmanager
    def _use(self, doing: str, wait: float | None = None) -> Iterator[Any]:
        """The connection, held by this thread for one operation; a driver error becomes a
        ``StoreError`` saying what could not be done, after the transaction is rolled back."""
        if self._closed:
            raise StoreError(f"{self.path}: the store is closed")
        if os.getpid() != self._pid:
            # A connection must not cross fork(): the child abandons it (closing would touch the
            # parent's locks or socket) and opens its own.
            self._pid, self._lock, self._conn = os.getpid(), threading.Lock(), None
        # another thread's append holds the connection: wait for it no longer than this call may
        if not self._lock.acquire(timeout=self.timeout if wait is None else wait):
            raise StoreError(f"{self.path}: the store is busy in another thread: could not "
                             f"{doing} within {self.timeout if wait is None else wait:g} s")
        try:
            if self._conn is None or self._lost(self._conn):
                self._conn = self._open()  # never opened, or the connection was lost: again
            conn = self._conn
            try:
                yield conn
            except self._backend_error as exc:
                self._rollback(conn)
                raise self._error(exc, doing, wait) from exc
            except BaseException:
                self._rollback(conn)
                raise
        finally:
            self._lock.release()

    def _open_or_defer(self) -> Any:
        """The backend's connection, or None when the store cannot be used yet: construction
        never raises for that, the guardrails keep deciding in memory and retry the store at
        each decision (logged once here)."""
        try:
            return self._open()
        except StoreError as exc:
            if not self.read_only:  # a read-only store decides nothing: its reader reports
                LOGGER.error("store unavailable (%s); guardrails keep deciding in memory "
                             "and retry the store at each decision", exc)
            return None

    def _opened(self, recorded_check: tuple[Any, ...] | None, epoch: Any) -> None:
        """A backend's ``_open`` calls this last, its connection ready: the store's key check
        row (``meta``'s, None: none recorded) and epoch as read."""
        self._key_ok = recorded_check is None or recorded_check[0] == self._key_check
        self._epoch = epoch if isinstance(epoch, bytes) else b""

    def _empty_manifest(self) -> tuple[bytes, bytes, bytes]:
        """A new store's manifest: (halted list, its hash, the MAC of zero rows). An existing
        store (meta present) never gets a fresh one, so deleting the manifest stays visible.
        A store made with the public default key says so here, once per process: a store's
        key is chosen when it is made (a read, or a write into a store made earlier, is no
        news; ``--install`` and a server's start say it too)."""
        if self.key_source == "default":
            notice_default_key()
        return NO_HALTS, list_hash(NO_HALTS), manifest_mac(self._key, 0, list_hash(NO_HALTS))

    def _new_epoch(self) -> bytes:
        """A new store's epoch: the anchor names the store it belongs to by it, so a store
        put in another's place (a new file, one moved aside by ``tripwire reset``) is told
        apart from the one anchored."""
        return os.urandom(16)

    def _check_version(self, version: Any) -> None:
        """A schema version this tripwire does not know makes the store unreadable (not
        transient: nothing it holds can be read as what it says)."""
        if type(version) is not int or version < 1:
            raise StoreUnreadable(
                f"{self.path}: schema version {version!r} is not a tripwire schema")
        if version > SCHEMA_VERSION:
            raise StoreUnreadable(
                f"{self.path}: schema version {version!r} is newer than this tripwire supports "
                f"({SCHEMA_VERSION}); upgrade tripwire to read it"
            )

    def _refuse_foreign_key(self) -> None:
        """Called by ``_writing`` once the store is open: a row sealed with another key breaks
        the chain for good, so refuse it instead."""
        if not self._key_ok:
            raise StoreKeyMismatch(f"{self.path}: this key is not the one the store was "
                                   f"created with (set {KEY_ENV} to the store's key)")

    def _lost(self, conn: Any) -> bool:
        """Whether the connection was lost (a server's went away; a file's cannot be)."""
        return False

    def _open(self) -> Any:
        raise NotImplementedError

    def _error(self, exc: Exception, doing: str, wait: float | None = None) -> StoreError:
        raise NotImplementedError

    def _rollback(self, conn: Any) -> None:
        raise NotImplementedError

    def _writing(self, wait: float | None) -> AbstractContextManager[Tables]:
        raise NotImplementedError

    def _reading(self) -> AbstractContextManager[Tables]:
        raise NotImplementedError

    def integrity_problem(self) -> str | None:
        """The backend's own integrity check of the whole store (``verify`` runs it): its
        complaint, or None. A server database checks its pages itself: None."""
        return None

    def quarantine(self, suffix: str) -> list[str]:
        """Move the store (and its anchor) aside, renamed with ``suffix``; the backend's."""
        raise NotImplementedError

    @property
    def key_matches(self) -> bool:
        """Whether this key is the one the store was created with (as far as the store, once
        opened, says: a store that records no key check matches every key)."""
        return self._key_ok

    @property
    def closed(self) -> bool:
        return self._closed

    def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        with self._lock:
            if self._conn is not None and os.getpid() == self._pid:
                with suppress(Exception):  # closing: nothing left to report it to
                    self._conn.close()
            self._conn = None

    def __enter__(self: _Store) -> _Store:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.path!r}, key_source={self.key_source!r})"

    # -- EventStore ----------------------------------------------------------------------------

    def append(self, session: str, kind: str, data: Mapping[str, Any], *,
               wait: float | None = None) -> Row:
        """Append one row; returns once it is durable. ``data["halts"] is True`` marks a
        halt. ``wait`` bounds this call's wait for other writers (default: the store's
        ``timeout``)."""
        check_session(session)
        check_row(kind, data)
        if self.read_only:
            raise StoreError(f"{self.path}: opened read-only")
        data, body = encode_data(data)
        halts = data.get("halts") is True
        now = time.time()
        anchor = self._anchor
        if anchor is None:
            with self._writing(wait) as tables:
                seq, _ = append_row(tables, self._key, self._halted, session, kind, body, halts,
                                    now)
            return Row(session, seq, kind, msgpack.unpackb(body, raw=False), now)
        # With an anchor, appends take its lock first and hold it until the anchor is
        # rewritten after the commit: the anchor's entries then follow the commits in order
        # (the lock order anchor -> store is the same everywhere, so two appenders never wait
        # for each other in a cycle).
        lock = anchor.lock(self.timeout if wait is None else wait, self.path)
        try:
            with self._writing(wait) as tables:
                seq, manifest = append_row(tables, self._key, self._halted, session, kind, body,
                                           halts, now)
            if manifest is not None:
                anchor.write(self._epoch, *manifest, session, kind, data, self.path)
        finally:
            if lock is not None:
                lock.close()
        return Row(session, seq, kind, msgpack.unpackb(body, raw=False), now)

    def history(self, session: str) -> SessionHistory:
        """One session's trusted rows and its integrity report."""
        check_session(session)
        return self._scan([session], store_level=False)[0][session]

    def histories(self, sessions: Iterable[str] | None = None) -> dict[str, SessionHistory]:
        """Histories of ``sessions`` (every session in the store when None), read in one ordered
        query inside one read transaction and verified in one pass."""
        wanted = None
        if sessions is not None:
            wanted = list(dict.fromkeys(sessions))
            for session in wanted:
                check_session(session)
        return self._scan(wanted, store_level=False)[0]

    def sessions(self) -> list[str]:
        with self._reading() as t:
            found = t.session_ids()
        return sorted(found)

    def verify(self, session: str | None = None) -> list[ChainReport]:
        """Reports for one session, or for every session plus a ``"*"`` report when the manifest
        disagrees with the rows present (only then)."""
        if session is not None:
            return [self.history(session).report]
        problem = self.integrity_problem()
        if problem is not None:
            raise StoreUnreadable(f"{self.path}: unreadable: the database fails its integrity "
                                  f"check ({problem})")
        found, store = self._scan(None, store_level=True)
        reports = [h.report for h in found.values()]
        if store is not None:
            reports.append(store)
        return reports

    # -- the anchor (read without the store: for a store that cannot be read) ------------------

    def anchored(self, session: str) -> AnchorEntry | None:
        """What the anchor proves of ``session`` (None: no anchor, an anchor that cannot be
        trusted, or nothing recorded for it)."""
        return self._anchor.entry(session) if self._anchor is not None else None

    def anchored_sessions(self) -> list[str]:
        """The sessions the anchor has an entry for (sorted; [] without a trusted anchor)."""
        return self._anchor.sessions() if self._anchor is not None else []

    @property
    def anchor_problem(self) -> str | None:
        """What is wrong with the anchor file itself (forged, unreadable), or None."""
        return self._anchor.problem if self._anchor is not None else None

    # -- reading -------------------------------------------------------------------------------

    def _scan(
        self, wanted: list[str] | None, *, store_level: bool
    ) -> tuple[dict[str, SessionHistory], ChainReport | None]:
        key = self._key
        # One read transaction (a snapshot), so a concurrent append can never show up as a
        # head ahead of its rows (a false "missing" verdict).
        with self._reading() as t:
            raw = t.rows(wanted)
            heads = t.heads(wanted)
            present = len(raw) if wanted is None else t.count()
            manifest = t.manifest()
            valid = manifest is not None and manifest_ok(key, manifest)
            listed = self._halted.read(t, manifest[1]) if valid else None  # type: ignore[index]
            check = t.key_check()
            epoch = t.epoch()
        hint = ""
        if check is not None and check != self._key_check:
            hint = " (this key is not the one the store was created with)"
        anchor_problem = None
        if valid and self._anchor is not None:
            assert manifest is not None
            anchor_problem = self._anchor.verdict(manifest,
                                                  epoch if isinstance(epoch, bytes) else b"")
        store = store_report(key, present, manifest, listed is not None, hint, anchor_problem)
        store_problem = store.problem if store is not None else None
        head_of = {h[0]: h[1:] for h in heads if isinstance(h[0], str)}
        found: dict[str, SessionHistory] = {}
        for session, group in groupby(raw, key=itemgetter(0)):
            if isinstance(session, str):  # rows a raw writer gave a non-text session fit nowhere
                found[session] = verify_session(key, session, group, head_of.get(session), hint,
                                                store_problem)
        for session, head in head_of.items():
            if session not in found:  # a head whose rows are all gone
                found[session] = verify_session(key, session, (), head, hint, store_problem)
        for session in listed or ():  # halted once, now without rows or head: deleted whole
            if session not in found and (wanted is None or session in wanted):
                found[session] = deleted_session(session, hint, store_problem)
        if wanted is None:
            result = {s: found[s] for s in sorted(found)}
        else:
            result = {s: found.get(s) or verify_session(key, s, (), None, hint, store_problem)
                      for s in wanted}
        return result, store if store_level else None
