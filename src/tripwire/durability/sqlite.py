"""``SQLiteStore``: the embedded store, one SQLite file (SPEC §5). Only its SQL and its
connection live here; the rows, chain, MACs, manifest, anchor and verdicts are ``chain.py``'s
and ``anchor.py``'s, the connection's life ``backend.ChainedStore``'s.

Storage. One file in WAL mode with ``synchronous=FULL``: ``append`` returns only after its
commit is fsync'd, so a crash right after a halt never loses it. ``append`` runs in ``BEGIN
IMMEDIATE`` (read the head, write row + head + manifest, commit), so several processes may share
a file; each commit is then checkpointed into the main file (``PASSIVE``), so deleting the
``-wal`` file cannot roll it back. Column types are whatever a raw writer put there (SQLite is
dynamically typed): the queries skip what cannot be tripwire's.

``sqlite_error`` is the one classification of a SQLite failure (the store's, the hooks'):
locked or busy, corrupt (``StoreUnreadable``), anything else.
"""

from __future__ import annotations

import json
import os
import sqlite3
import time
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from typing import Any

from ..errors import StoreError, StoreUnreadable
from .backend import ChainedStore
from .chain import SCHEMA_VERSION, Tables

__all__ = ["SQLiteStore", "sqlite_error"]

_SCHEMA = (
    "CREATE TABLE IF NOT EXISTS meta(key TEXT PRIMARY KEY, value) WITHOUT ROWID",
    # WITHOUT ROWID clusters rows by (session, seq): histories() is one sequential scan.
    "CREATE TABLE IF NOT EXISTS rows(session TEXT, seq INTEGER, kind TEXT, body BLOB, time REAL,"
    " mac BLOB, PRIMARY KEY(session, seq)) WITHOUT ROWID",
    "CREATE TABLE IF NOT EXISTS heads(session TEXT PRIMARY KEY, count INTEGER, last_mac BLOB,"
    " last_halt_seq INTEGER, mac BLOB) WITHOUT ROWID",
    # halted: msgpack of the sorted ids of every session that ever recorded a halt
    "CREATE TABLE IF NOT EXISTS manifest(id INTEGER PRIMARY KEY CHECK(id = 1), rows INTEGER,"
    " halted BLOB, halted_hash BLOB, mac BLOB)",
)
_TABLES = frozenset({"meta", "rows", "heads", "manifest"})
_ROW_COLUMNS = "session, seq, kind, body, time, mac"


class SQLiteStore(ChainedStore):
    """The embedded store: one SQLite file, safe to share between processes and threads (a
    forked child opens its own connection on first use). ``timeout`` bounds every wait for
    another writer; past it the call raises StoreError ("locked"). ``append(..., wait=s)``
    bounds one call's wait (a guardrail decision must not wait out another writer's lock).

    Construction never raises for a database it cannot open (corrupt, locked, read-only, a
    directory): the store logs why, every use raises StoreError until it opens, and the
    guardrails keep deciding in memory meanwhile (fail open, loudly). ``check()`` opens it now
    and raises, for callers that want to know at once (the CLI).

    ``read_only=True`` opens an existing tripwire store without writing anything to it (no
    tables created, no WAL switch): a file that is not a tripwire store is refused.

    ``anchor`` (else ``$TRIPWIRE_STORE_ANCHOR``): a file outside the agent's reach, rewritten
    after each append with the manifest's row count and MAC (sealed with the key). A store
    behind its anchor (an older copy, a rolled-back WAL, wiped tables) reads as tampered.
    Worth it with a secret key, which the anchor's seal needs to mean anything.

    ``key_source`` says where the key came from: ``"argument"``, ``"environment"`` or
    ``"default"`` (a writer logs DEFAULT_KEY_NOTICE once for the last).

    ``shared=True``: several processes run the same sessions on this file; each session's
    guardrails read its history back at every turn start (see ``ChainedStore.shared``).

    ``check=True``: open the file now and raise ``StoreError`` if it cannot be (nothing is
    logged: for a caller that reports it itself, the command line)."""

    def __init__(
        self,
        path: str | os.PathLike[str],
        *,
        key: bytes | str | None = None,
        timeout: float = 5.0,
        read_only: bool = False,
        anchor: str | os.PathLike[str] | None = None,
        shared: bool = False,
        check: bool = False,
    ) -> None:
        self.path = os.fspath(path)
        self._init_store(key, anchor, timeout=timeout, read_only=read_only, shared=shared)
        self._conn: sqlite3.Connection | None = None
        self._identity: tuple[int, int] | None = None  # (st_dev, st_ino) of the file opened
        self._conn = self._open() if check else self._open_or_defer()

    def check(self) -> SQLiteStore:
        """Open the store now (if it is not open yet); StoreError when it cannot be."""
        with self._use("open the store"):
            pass
        return self

    # connection management

    def _open(self) -> sqlite3.Connection:
        if os.path.isdir(self.path):
            raise StoreUnreadable(f"{self.path}: is a directory, not a database file")
        if self.read_only and not os.path.exists(self.path):
            raise StoreError(f"{self.path}: no such store")
        try:
            if self.read_only:
                import urllib.parse  # a read-only open's URI alone (not a hook event's)

                uri = "file:" + urllib.parse.quote(os.path.abspath(self.path)) + "?mode=ro"
                db = sqlite3.connect(uri, uri=True, timeout=self.timeout, isolation_level=None,
                                     check_same_thread=False)
            else:
                db = sqlite3.connect(self.path, timeout=self.timeout, isolation_level=None,
                                     check_same_thread=False)
        except sqlite3.Error as exc:
            raise self._error(exc, "open the store") from exc
        try:
            db.execute(f"PRAGMA busy_timeout = {int(self.timeout * 1000)}")
            if self.read_only:
                self._check_tripwire(db)
            else:
                self._enter_wal(db)
                db.execute("PRAGMA synchronous = FULL")  # fsync each commit: a halt survives
                self._prepare(db)
            check = db.execute("SELECT value FROM meta WHERE key = 'key_check'").fetchone()
            self._identity = _file_identity(self.path)
            self._opened(check, _SQLiteTables(db).epoch())
        except sqlite3.Error as exc:
            db.close()
            raise self._error(exc, "open the store") from exc
        except StoreError:
            db.close()
            raise
        return db

    def _check_tripwire(self, db: sqlite3.Connection) -> None:
        """A read-only open: the file must already be a tripwire store of a known schema."""
        tables = {r[0] for r in db.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
        if not tables >= _TABLES:
            raise StoreError(f"{self.path}: not a tripwire store (no tripwire tables in it)")
        self._check_version(self._schema_version(db))

    def _enter_wal(self, db: sqlite3.Connection) -> None:
        """Switch a new file to WAL. Two processes opening a new file at once collide here, and
        SQLite answers "locked" at once instead of calling the busy handler: retry until the
        timeout like every other lock."""
        deadline = time.monotonic() + self.timeout
        while True:
            try:
                db.execute("PRAGMA journal_mode = WAL")
                return
            except sqlite3.OperationalError as exc:
                if not _is_locked(exc) or time.monotonic() >= deadline:
                    raise
            time.sleep(0.005)

    def _prepare(self, db: sqlite3.Connection) -> None:
        """Create missing tables and check the schema version, writing only when needed."""
        tables = {r[0] for r in db.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
        version = self._schema_version(db) if "meta" in tables else None
        if not tables >= _TABLES or version is None:
            db.execute("BEGIN IMMEDIATE")
            try:
                for statement in _SCHEMA:
                    db.execute(statement)
                version = self._schema_version(db)  # another process may have won the race
                if version is None:
                    # A new store: seal an empty manifest (``_empty_manifest``).
                    version = SCHEMA_VERSION
                    db.executemany(
                        "INSERT OR REPLACE INTO meta VALUES (?, ?)",
                        [("schema_version", SCHEMA_VERSION), ("key_check", self._key_check),
                         ("epoch", self._new_epoch())],
                    )
                    db.execute(
                        "INSERT OR IGNORE INTO manifest VALUES (1, 0, ?, ?, ?)",
                        self._empty_manifest(),
                    )
                db.execute("COMMIT")
            except BaseException:
                db.execute("ROLLBACK")
                raise
        self._check_version(version)

    @staticmethod
    def _schema_version(db: sqlite3.Connection) -> Any:
        row = db.execute("SELECT value FROM meta WHERE key = 'schema_version'").fetchone()
        return None if row is None else row[0]

    _backend_error = sqlite3.Error

    def _error(self, exc: Exception, doing: str, wait: float | None = None) -> StoreError:
        return sqlite_error(self.path, exc, doing, self.timeout if wait is None else wait)

    def integrity_problem(self) -> str | None:
        """``PRAGMA quick_check`` over the whole file (O(its size): ``verify`` runs it, a
        restore does not): its first complaint, or None when the file is sound."""
        with self._use("check the store's integrity") as db:
            found = [r[0] for r in db.execute("PRAGMA quick_check(4)")]
        return None if found == ["ok"] else "; ".join(str(f) for f in found)

    def quarantine(self, suffix: str) -> list[str]:
        """Move the store's file (with its -wal and -shm) and its anchor aside, each renamed
        ``<name>.<suffix>``, and close the store: ``tripwire reset`` on an unreadable store
        keeps it as evidence and starts a new chain. Returns the new paths."""
        if os.path.isdir(self.path) and os.listdir(self.path):
            # an empty directory is what stands in for a store; one with files in it may be
            # an operator's mistyped path: never moved without their eyes on it
            raise StoreError(f"{self.path}: a directory with files in it, not a store: "
                             "tripwire reset does not move it; move it aside yourself")
        self.close()
        moved = []
        for path in (self.path, f"{self.path}-wal", f"{self.path}-shm", self.anchor):
            if path is not None and os.path.lexists(path):
                os.replace(path, f"{path}.{suffix}")
                moved.append(f"{path}.{suffix}")
        return moved

    def _same_file(self) -> None:
        """Appending into a file deleted (or replaced) under us would "succeed" into nothing a
        restart can read: refuse, so the rows stay in the guardrails' outbox, loudly."""
        if self._identity is not None and _file_identity(self.path) != self._identity:
            raise StoreError(f"{self.path}: the database file was deleted or replaced while in "
                             "use; rows are kept in memory (reopen the store to go on)")

    def _rollback(self, db: sqlite3.Connection) -> None:
        if db.in_transaction:
            with suppress(sqlite3.Error):  # the original error is the one worth reporting
                db.execute("ROLLBACK")

    # transactions (the rules over them are chain.py's)

    @contextmanager
    def _writing(self, wait: float | None) -> Iterator[Tables]:
        """``BEGIN IMMEDIATE`` (read the head, write row + head + manifest, commit): committed,
        fsync'd, checkpointed into the main file when this returns."""
        with self._use("append to the store", wait) as db:
            self._refuse_foreign_key()
            self._same_file()
            if wait is not None:
                db.execute(f"PRAGMA busy_timeout = {int(wait * 1000)}")
            try:
                db.execute("BEGIN IMMEDIATE")
                yield _SQLiteTables(db)
                db.execute("COMMIT")
            finally:
                if wait is not None:
                    db.execute(f"PRAGMA busy_timeout = {int(self.timeout * 1000)}")
            # Move the commit from the WAL into the main file, so deleting the -wal file cannot
            # roll it back (PASSIVE: never waits; a reader holding an old snapshot may leave
            # frames behind, which the anchor still catches).
            db.execute("PRAGMA wal_checkpoint(PASSIVE)")

    @contextmanager
    def _reading(self) -> Iterator[Tables]:
        with self._use("read the store") as db:
            db.execute("BEGIN")  # WAL gives the read transaction a snapshot
            yield _SQLiteTables(db)
            db.execute("COMMIT")


class _SQLiteTables:
    """``Tables`` over one SQLite connection. Column types are whatever a raw writer put there
    (SQLite is dynamically typed): the queries skip what cannot be ours."""

    __slots__ = ("db",)

    def __init__(self, db: sqlite3.Connection) -> None:
        self.db = db

    def head(self, session: str) -> tuple[Any, ...] | None:
        found: tuple[Any, ...] | None = self.db.execute(
            "SELECT count, last_mac, last_halt_seq, mac FROM heads WHERE session = ?",
            (session,)).fetchone()
        return found

    def top(self, session: str) -> tuple[Any, ...] | None:
        found: tuple[Any, ...] | None = self.db.execute(
            "SELECT seq, mac FROM rows WHERE session = ? AND typeof(seq) = 'integer'"
            " ORDER BY seq DESC LIMIT 1", (session,)).fetchone()
        return found

    def insert_row(self, session: str, seq: int, kind: str, body: bytes, when: float,
                   mac: bytes) -> None:
        self.db.execute(f"INSERT INTO rows ({_ROW_COLUMNS}) VALUES (?, ?, ?, ?, ?, ?)",
                        (session, seq, kind, body, when, mac))

    def put_head(self, session: str, count: int, last_mac: bytes, halt: int | None,
                 mac: bytes) -> None:
        self.db.execute("INSERT OR REPLACE INTO heads VALUES (?, ?, ?, ?, ?)",
                        (session, count, last_mac, halt, mac))

    def manifest(self) -> tuple[Any, ...] | None:
        found: tuple[Any, ...] | None = self.db.execute(
            "SELECT rows, halted_hash, mac FROM manifest WHERE id = 1").fetchone()
        return found

    def halted_blob(self) -> Any:
        row = self.db.execute("SELECT halted FROM manifest WHERE id = 1").fetchone()
        return row[0] if row is not None else None

    def set_halted(self, halted: bytes, halted_hash: bytes) -> None:
        self.db.execute("UPDATE manifest SET halted = ?, halted_hash = ? WHERE id = 1",
                        (halted, halted_hash))

    def set_manifest(self, rows: int, mac: bytes) -> None:
        self.db.execute("UPDATE manifest SET rows = ?, mac = ? WHERE id = 1", (rows, mac))

    def rows(self, wanted: list[str] | None) -> list[tuple[Any, ...]]:
        if wanted is None:
            return self.db.execute(f"SELECT {_ROW_COLUMNS} FROM rows ORDER BY session, seq"
                                   ).fetchall()
        return self.db.execute(
            f"SELECT {_ROW_COLUMNS} FROM rows WHERE session IN"
            " (SELECT value FROM json_each(?)) ORDER BY session, seq",
            (json.dumps(wanted),)).fetchall()

    def heads(self, wanted: list[str] | None) -> list[tuple[Any, ...]]:
        if wanted is None:
            return self.db.execute(
                "SELECT session, count, last_mac, last_halt_seq, mac FROM heads").fetchall()
        return self.db.execute(
            "SELECT session, count, last_mac, last_halt_seq, mac FROM heads WHERE session"
            " IN (SELECT value FROM json_each(?))", (json.dumps(wanted),)).fetchall()

    def count(self) -> int:
        return int(self.db.execute("SELECT count(*) FROM rows").fetchone()[0])

    def key_check(self) -> Any:
        row = self.db.execute("SELECT value FROM meta WHERE key = 'key_check'").fetchone()
        return None if row is None else row[0]

    def epoch(self) -> Any:
        row = self.db.execute("SELECT value FROM meta WHERE key = 'epoch'").fetchone()
        return None if row is None else row[0]

    def session_ids(self) -> list[str]:
        return [r[0] for r in self.db.execute(
            "SELECT session FROM rows WHERE typeof(session) = 'text'"
            " UNION SELECT session FROM heads WHERE typeof(session) = 'text'")]


def _file_identity(path: str) -> tuple[int, int] | None:
    try:
        st = os.stat(path)
    except OSError:
        return None
    return st.st_dev, st.st_ino


#: SQLite's result codes of a file that fails its own integrity: SQLITE_CORRUPT (a page
#: overwritten, a truncated file) and SQLITE_NOTADB (the header is not SQLite's)
_UNREADABLE_CODES = (11, 26)


def sqlite_error(path: str, exc: Exception, doing: str, waited: float) -> StoreError:
    """A SQLite failure as tripwire's error, the one classification for every connection to a
    store file (the store's, the hooks'): locked or busy (transient: past ``waited`` seconds),
    corrupt (``StoreUnreadable``: not transient), anything else (transient: a full disk, I/O)."""
    if _is_locked(exc):
        return StoreError(f"{path}: database is locked: could not {doing} within {waited:g} s")
    code = (getattr(exc, "sqlite_errorcode", None) or 0) & 0xFF
    text = str(exc)
    if code == 26 or "not a database" in text:
        return StoreUnreadable(f"{path}: unreadable: the file is not a SQLite database (its "
                               "header was overwritten, or it was never one)")
    if code in _UNREADABLE_CODES or "database disk image is malformed" in text:
        return StoreUnreadable(f"{path}: unreadable: the database is corrupt ({text})")
    return StoreError(f"{path}: cannot {doing}: {text}")


def _is_locked(exc: Exception) -> bool:
    code = (getattr(exc, "sqlite_errorcode", None) or 0) & 0xFF
    return code in (5, 6) or "locked" in str(exc)  # SQLITE_BUSY, SQLITE_LOCKED

