"""The durable store on PostgreSQL: the same rows, chain, MACs, manifest, anchor and verdicts as
``SQLiteStore`` (those rules are ``chain.py``'s and ``anchor.py``'s, the connection's life
``backend.ChainedStore``'s; this module holds only SQL and the connection), for daemons on
several machines sharing one database. Needs ``tripwire[postgres]`` (psycopg 3).

Location. A libpq URL, ``postgresql://user@host:5432/db`` (or ``postgres://``), optionally with
``schema=NAME`` among its query parameters: the tables live in that schema (default
``tripwire``), created on first use. ``PostgresStore(url, schema=...)`` says the same.

Concurrency. Every append is one ``READ COMMITTED`` transaction that first takes a transaction
advisory lock for the store (``pg_advisory_xact_lock``, keyed by the schema), then reads the
head, writes row + head + manifest and commits with ``synchronous_commit = on``: appends from
any number of processes and machines are serialized per store (the manifest is store-wide, so
two appends could not both update it anyway), and ``append`` returns only once the commit is
durable. ``wait`` / ``timeout`` bound the wait for that lock (``lock_timeout``); past it the
append raises StoreError ("locked") and the guardrails' outbox retries. Reads run in one
``REPEATABLE READ READ ONLY`` transaction: a snapshot, as SQLite's WAL gives.

Each committed append also sends a ``NOTIFY`` on the channel ``tripwire.<schema>`` with the
session id as payload, so another process can learn of a halt or a reset without polling
(``Fleet`` does not need it: it reads the store at each turn start).

Columns are typed (``bytea``, ``bigint``, ``double precision``), so a raw writer cannot store
what SQLite's untyped columns would take (a text ``seq``); every other tampering reads exactly as
it does on SQLite. ``meta.value`` is ``bytea``: the schema version is its decimal digits.
"""

from __future__ import annotations

import os
import re
import urllib.parse
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from typing import Any

import blake3

from ..errors import StoreError
from .backend import ChainedStore
from .chain import SCHEMA_VERSION, Tables

try:
    import psycopg
    from psycopg import sql
except ImportError:  # pragma: no cover - the extra is missing
    psycopg = None  # type: ignore[assignment]

__all__ = ["PostgresStore", "is_postgres_url", "DEFAULT_SCHEMA"]

DEFAULT_SCHEMA = "tripwire"
_SCHEMA_NAME = re.compile(r"[a-z_][a-z0-9_]{0,62}")
_LOCK_CLASS = 0x7472  # "tr": the first key of the store's advisory lock

_SCHEMA = (
    "CREATE TABLE IF NOT EXISTS meta(key text PRIMARY KEY, value bytea)",
    "CREATE TABLE IF NOT EXISTS rows(session text, seq bigint, kind text, body bytea,"
    " time double precision, mac bytea, PRIMARY KEY(session, seq))",
    "CREATE TABLE IF NOT EXISTS heads(session text PRIMARY KEY, count bigint, last_mac bytea,"
    " last_halt_seq bigint, mac bytea)",
    "CREATE TABLE IF NOT EXISTS manifest(id integer PRIMARY KEY CHECK(id = 1), rows bigint,"
    " halted bytea, halted_hash bytea, mac bytea)",
)
_TABLES = ("meta", "rows", "heads", "manifest")
_ROW_COLUMNS = "session, seq, kind, body, time, mac"


def is_postgres_url(location: str) -> bool:
    """Whether a store location names a PostgreSQL database rather than a file."""
    return location.startswith(("postgresql://", "postgres://"))


def _split(url: str, schema: str | None) -> tuple[str, str, str]:
    """(the URL libpq gets, the schema, the URL as messages show it: no password)."""
    parts = urllib.parse.urlsplit(url)
    query = urllib.parse.parse_qsl(parts.query, keep_blank_values=True)
    named = [v for k, v in query if k == "schema"]
    rest = [(k, v) for k, v in query if k != "schema"]
    chosen = schema if schema is not None else (named[-1] if named else DEFAULT_SCHEMA)
    if not isinstance(chosen, str) or not _SCHEMA_NAME.fullmatch(chosen):
        raise StoreError(f"the store's schema must be a lower-case SQL name (letters, digits, _; "
                         f"at most 63), not {chosen!r}")
    libpq = urllib.parse.urlunsplit(parts._replace(query=urllib.parse.urlencode(rest)))
    netloc = parts.netloc
    if "@" in netloc:
        user, host = netloc.rsplit("@", 1)
        netloc = f"{user.split(':', 1)[0]}@{host}"
    shown_query = urllib.parse.urlencode(
        [(k, v) for k, v in rest if k != "password"] + [("schema", chosen)], safe="/")
    shown = urllib.parse.urlunsplit(parts._replace(netloc=netloc, query=shown_query))
    return libpq, chosen, shown


class PostgresStore(ChainedStore):
    """The server store: one PostgreSQL schema shared by every process that opens it, on any
    machine. Safe to share between threads (one connection, used under a lock; a forked child
    opens its own). Like ``SQLiteStore``: construction never raises for a database it cannot
    reach (every use raises StoreError until it can; ``check()`` raises at once);
    ``read_only=True`` writes nothing and refuses a schema without tripwire's tables;
    ``anchor`` / ``$TRIPWIRE_STORE_ANCHOR`` names an anchor file (each host keeps its own: a
    database behind what this host last saw reads as rolled back). ``shared`` (default True:
    a server database is there to be shared): each session's guardrails read its history back
    at every turn start, so a halt, spend or reset written by another daemon applies here at
    the session's next turn."""

    def __init__(
        self,
        url: str,
        *,
        key: bytes | str | None = None,
        timeout: float = 5.0,
        read_only: bool = False,
        anchor: str | os.PathLike[str] | None = None,
        schema: str | None = None,
        shared: bool = True,
        check: bool = False,
    ) -> None:
        if psycopg is None:
            raise StoreError("a PostgreSQL store needs psycopg 3: pip install 'tripwire[postgres]'")
        if not isinstance(url, str) or not is_postgres_url(url):
            raise StoreError(f"not a PostgreSQL URL (postgresql://...): {url!r}")
        self._url, self.schema, self.path = _split(url, schema)
        self._init_store(key, anchor, timeout=timeout, read_only=read_only, shared=shared)
        ident = blake3.blake3(self.schema.encode()).digest()
        self._lock_key = int.from_bytes(ident[:4], "big", signed=True)
        self.channel = f"tripwire.{self.schema}"
        self._conn: Any = None
        self._conn = self._open() if check else self._open_or_defer()

    def check(self) -> PostgresStore:
        """Connect now (if not connected yet); StoreError when the store cannot be used."""
        with self._use("open the store"):
            pass
        return self

    # connection management

    def _open(self) -> Any:
        try:
            conn = psycopg.connect(self._url, autocommit=True,
                                   connect_timeout=max(1, round(self.timeout)))
        except psycopg.Error as exc:
            raise self._error(exc, "open the store") from exc
        try:
            if self.read_only:
                self._check_tripwire(conn)
                conn.execute("SET SESSION CHARACTERISTICS AS TRANSACTION READ ONLY")
            else:
                self._prepare(conn)
            conn.execute(sql.SQL("SET search_path TO {}").format(sql.Identifier(self.schema)))
            check = conn.execute(
                "SELECT value FROM meta WHERE key = 'key_check'").fetchone()
            self._opened(check, _PostgresTables(conn).epoch())
        except psycopg.Error as exc:
            conn.close()
            raise self._error(exc, "open the store") from exc
        except StoreError:
            conn.close()
            raise
        return conn

    def _tables_present(self, conn: Any) -> int:
        return int(conn.execute(
            "SELECT count(*) FROM information_schema.tables WHERE table_schema = %s"
            " AND table_name = ANY(%s)", (self.schema, list(_TABLES))).fetchone()[0])

    def _check_tripwire(self, conn: Any) -> None:
        if self._tables_present(conn) < len(_TABLES):
            raise StoreError(f"{self.path}: not a tripwire store (no tripwire tables in "
                             f"schema {self.schema})")
        self._check_version(self._schema_version(conn))

    def _prepare(self, conn: Any) -> None:
        """Create the schema and missing tables (under the store's lock: two processes opening
        a new store at once must not both create it), and check the schema version."""
        if self._tables_present(conn) == len(_TABLES):
            self._check_version(self._schema_version(conn))
            return
        schema = sql.Identifier(self.schema)
        conn.execute("BEGIN")
        try:
            conn.execute("SELECT pg_advisory_xact_lock(%s, %s)", (_LOCK_CLASS, self._lock_key))
            conn.execute(sql.SQL("CREATE SCHEMA IF NOT EXISTS {}").format(schema))
            conn.execute(sql.SQL("SET LOCAL search_path TO {}").format(schema))
            for statement in _SCHEMA:
                conn.execute(statement)
            version = self._schema_version(conn)
            if version is None:
                # A new store: seal an empty manifest (``_empty_manifest``).
                version = SCHEMA_VERSION
                conn.execute("INSERT INTO meta VALUES ('schema_version', %s), ('key_check', %s),"
                             " ('epoch', %s) ON CONFLICT (key) DO NOTHING",
                             (str(SCHEMA_VERSION).encode(), self._key_check, self._new_epoch()))
                conn.execute("INSERT INTO manifest VALUES (1, 0, %s, %s, %s)"
                             " ON CONFLICT (id) DO NOTHING",
                             self._empty_manifest())
            conn.execute("COMMIT")
        except BaseException:
            with suppress(psycopg.Error):
                conn.execute("ROLLBACK")
            raise
        self._check_version(version)

    def _schema_version(self, conn: Any) -> Any:
        schema = sql.Identifier(self.schema)
        row = conn.execute(sql.SQL("SELECT value FROM {}.meta WHERE key = 'schema_version'")
                           .format(schema)).fetchone()
        if row is None:
            return None
        value = row[0]
        if isinstance(value, bytes) and value.isdigit():
            return int(value)
        return value

    # without psycopg no PostgresStore is ever made (its constructor refuses)
    _backend_error = psycopg.Error if psycopg is not None else Exception

    def _error(self, exc: Exception, doing: str, wait: float | None = None) -> StoreError:
        if isinstance(exc, psycopg.errors.LockNotAvailable):
            waited = self.timeout if wait is None else wait
            return StoreError(f"{self.path}: database is locked: could not {doing} within "
                              f"{waited:g} s")
        first = str(exc).strip().splitlines()
        problem = first[0] if first else type(exc).__name__
        return StoreError(f"{self.path}: cannot {doing}: {problem}")

    def _lost(self, conn: Any) -> bool:
        return bool(conn.closed)

    def quarantine(self, suffix: str) -> list[str]:
        """Rename the store's schema aside (``<schema>_<suffix>``, cut to PostgreSQL's 63
        characters) and its anchor file, and close the store: ``tripwire reset`` on an
        unreadable store keeps it as evidence and starts a new chain. Returns the new names."""
        aside = f"{self.schema}_{re.sub(r'[^a-z0-9_]', '_', suffix.lower())}"[:63]
        try:
            with psycopg.connect(self._url, autocommit=True,
                                 connect_timeout=max(1, round(self.timeout))) as conn:
                conn.execute(sql.SQL("ALTER SCHEMA {} RENAME TO {}").format(
                    sql.Identifier(self.schema), sql.Identifier(aside)))
        except psycopg.Error as exc:
            raise self._error(exc, "move the store aside") from exc
        self.close()
        moved = [f"schema {aside}"]
        if self.anchor is not None and os.path.lexists(self.anchor):
            os.replace(self.anchor, f"{self.anchor}.{suffix}")
            moved.append(f"{self.anchor}.{suffix}")
        return moved

    def _rollback(self, conn: Any) -> None:
        if conn.closed or conn.broken:
            self._conn = None  # reconnect on the next use
            with suppress(Exception):
                conn.close()
            return
        if conn.info.transaction_status != psycopg.pq.TransactionStatus.IDLE:
            with suppress(psycopg.Error):  # the original error is the one worth reporting
                conn.execute("ROLLBACK")

    # transactions (the rules over them are chain.py's)

    @contextmanager
    def _writing(self, wait: float | None) -> Iterator[Tables]:
        with self._use("append to the store", wait) as conn:
            self._refuse_foreign_key()
            waited = self.timeout if wait is None else wait
            conn.execute("BEGIN ISOLATION LEVEL READ COMMITTED")
            # lock_timeout 0 would mean "wait forever": the shortest wait is 1 ms
            conn.execute(f"SET LOCAL lock_timeout = {max(1, int(waited * 1000))}")
            conn.execute("SET LOCAL synchronous_commit = on")
            conn.execute("SELECT pg_advisory_xact_lock(%s, %s)", (_LOCK_CLASS, self._lock_key))
            tables = _PostgresTables(conn)
            yield tables
            if tables.appended is not None:
                conn.execute("SELECT pg_notify(%s, %s)", (self.channel, tables.appended))
            conn.execute("COMMIT")

    @contextmanager
    def _reading(self) -> Iterator[Tables]:
        with self._use("read the store") as conn:
            conn.execute("BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY")
            yield _PostgresTables(conn)
            conn.execute("COMMIT")


class _PostgresTables:
    """``Tables`` over one psycopg connection (``search_path`` is the store's schema)."""

    __slots__ = ("appended", "conn")

    def __init__(self, conn: Any) -> None:
        self.conn = conn
        self.appended: str | None = None  # the session a row was written for (NOTIFY)

    def _one(self, query: str, args: tuple[Any, ...] = ()) -> tuple[Any, ...] | None:
        row: tuple[Any, ...] | None = self.conn.execute(query, args).fetchone()
        return row

    def head(self, session: str) -> tuple[Any, ...] | None:
        return self._one("SELECT count, last_mac, last_halt_seq, mac FROM heads"
                         " WHERE session = %s", (session,))

    def top(self, session: str) -> tuple[Any, ...] | None:
        return self._one("SELECT seq, mac FROM rows WHERE session = %s"
                         " ORDER BY seq DESC LIMIT 1", (session,))

    def insert_row(self, session: str, seq: int, kind: str, body: bytes, when: float,
                   mac: bytes) -> None:
        self.conn.execute(f"INSERT INTO rows ({_ROW_COLUMNS}) VALUES (%s, %s, %s, %s, %s, %s)",
                          (session, seq, kind, body, when, mac))
        self.appended = session

    def put_head(self, session: str, count: int, last_mac: bytes, halt: int | None,
                 mac: bytes) -> None:
        self.conn.execute(
            "INSERT INTO heads VALUES (%s, %s, %s, %s, %s) ON CONFLICT (session) DO UPDATE SET"
            " count = EXCLUDED.count, last_mac = EXCLUDED.last_mac,"
            " last_halt_seq = EXCLUDED.last_halt_seq, mac = EXCLUDED.mac",
            (session, count, last_mac, halt, mac))

    def manifest(self) -> tuple[Any, ...] | None:
        return self._one("SELECT rows, halted_hash, mac FROM manifest WHERE id = 1")

    def halted_blob(self) -> Any:
        row = self._one("SELECT halted FROM manifest WHERE id = 1")
        return row[0] if row is not None else None

    def set_halted(self, halted: bytes, halted_hash: bytes) -> None:
        self.conn.execute("UPDATE manifest SET halted = %s, halted_hash = %s WHERE id = 1",
                          (halted, halted_hash))

    def set_manifest(self, rows: int, mac: bytes) -> None:
        self.conn.execute("UPDATE manifest SET rows = %s, mac = %s WHERE id = 1", (rows, mac))

    def rows(self, wanted: list[str] | None) -> list[tuple[Any, ...]]:
        # ordered byte-wise, as SQLite orders text, whatever the database's collation
        if wanted is None:
            found: list[tuple[Any, ...]] = self.conn.execute(
                f'SELECT {_ROW_COLUMNS} FROM rows ORDER BY session COLLATE "C", seq').fetchall()
        else:
            found = self.conn.execute(
                f"SELECT {_ROW_COLUMNS} FROM rows WHERE session = ANY(%s)"
                ' ORDER BY session COLLATE "C", seq', (wanted,)).fetchall()
        return found

    def heads(self, wanted: list[str] | None) -> list[tuple[Any, ...]]:
        if wanted is None:
            found: list[tuple[Any, ...]] = self.conn.execute(
                "SELECT session, count, last_mac, last_halt_seq, mac FROM heads").fetchall()
        else:
            found = self.conn.execute(
                "SELECT session, count, last_mac, last_halt_seq, mac FROM heads"
                " WHERE session = ANY(%s)", (wanted,)).fetchall()
        return found

    def count(self) -> int:
        row = self._one("SELECT count(*) FROM rows")
        return int(row[0]) if row is not None else 0

    def key_check(self) -> Any:
        row = self._one("SELECT value FROM meta WHERE key = 'key_check'")
        return None if row is None else row[0]

    def epoch(self) -> Any:
        row = self._one("SELECT value FROM meta WHERE key = 'epoch'")
        return None if row is None else bytes(row[0])

    def session_ids(self) -> list[str]:
        return [r[0] for r in self.conn.execute(
            "SELECT session FROM rows WHERE session IS NOT NULL"
            " UNION SELECT session FROM heads WHERE session IS NOT NULL")]
