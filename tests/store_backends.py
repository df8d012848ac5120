"""The two store backends as the store tests see them: open a store, and tamper with it as an
agent with write access to the database would (plain SQL, no key).

``TRIPWIRE_TEST_POSTGRES`` is a libpq URL of a PostgreSQL server the tests may create schemas
and databases in (``.ci/with-postgres`` starts a throwaway one and sets it). Without it the
PostgreSQL tests skip, saying so — except under CI (``CI`` set), where they fail: CI must run
them.
"""

from __future__ import annotations

import os
import sqlite3
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

POSTGRES_ENV = "TRIPWIRE_TEST_POSTGRES"
BACKENDS = ["sqlite", "postgres"]


def postgres_url() -> str:
    """The test server's URL; skips (fails under CI) when there is none."""
    url = os.environ.get(POSTGRES_ENV, "").strip()
    if not url:
        message = (f"{POSTGRES_ENV} is not set: the PostgreSQL store tests need a server "
                   "(run them under .ci/with-postgres, which starts a throwaway one)")
        if os.environ.get("CI"):
            pytest.fail(message)
        pytest.skip(message)
    try:
        import psycopg  # noqa: F401
    except ImportError:
        pytest.fail("psycopg is not installed: pip install '.[test]' (the postgres extra)")
    return url


def _with(url: str, **query: str) -> str:
    sep = "&" if "?" in url else "?"
    return url + sep + "&".join(f"{k}={v}" for k, v in query.items())


class Backend:
    """One store location of one backend kind, and raw SQL access to it."""

    def __init__(self, kind: str, tmp: Path, name: str = "tripwire") -> None:
        self.kind = kind
        self._tmp = tmp
        if kind == "sqlite":
            self.location = str(tmp / f"{name}.db")
            self.schema = ""
        else:
            self.base = postgres_url()
            self.schema = f"t_{uuid.uuid4().hex[:16]}"
            self.location = _with(self.base, schema=self.schema)

    def open(self, **options: Any) -> Any:
        from tripwire.durability.postgres import PostgresStore
        from tripwire.durability.sqlite import SQLiteStore

        if self.kind == "sqlite":
            return SQLiteStore(self.location, **options)
        return PostgresStore(self.location, **options)

    def other(self, name: str) -> Backend:
        """Another store of the same kind (another file, another schema)."""
        other = Backend(self.kind, self._tmp, name)
        _made.append(other)
        return other

    def _sql(self, statement: str) -> str:
        return statement if self.kind == "sqlite" else statement.replace("?", "%s")

    def raw(self, *statements: tuple[str, tuple[Any, ...]] | str) -> None:
        """Run SQL on the bare database; ``?`` placeholders on both backends."""
        if self.kind == "sqlite":
            db = sqlite3.connect(self.location, isolation_level=None)
            try:
                for s in statements:
                    sql, args = (s, ()) if isinstance(s, str) else s
                    db.execute(sql, args)
            finally:
                db.close()
            return
        import psycopg

        with psycopg.connect(self.base, autocommit=True) as conn:
            conn.execute(f"SET search_path TO {self.schema}")
            for s in statements:
                sql, args = (s, ()) if isinstance(s, str) else s
                conn.execute(self._sql(sql), args)

    def query(self, sql: str, args: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
        if self.kind == "sqlite":
            db = sqlite3.connect(self.location)
            try:
                return db.execute(sql, args).fetchall()
            finally:
                db.close()
        import psycopg

        with psycopg.connect(self.base, autocommit=True) as conn:
            conn.execute(f"SET search_path TO {self.schema}")
            return [tuple(r) for r in conn.execute(self._sql(sql), args).fetchall()]

    def number(self, n: int) -> Any:
        """A number as the meta table holds it (PostgreSQL: bytea of its digits)."""
        return n if self.kind == "sqlite" else str(n).encode()

    def drop(self) -> None:
        if self.kind == "postgres":
            import psycopg

            with psycopg.connect(self.base, autocommit=True) as conn:
                conn.execute(f"DROP SCHEMA IF EXISTS {self.schema} CASCADE")


_made: list[Backend] = []


def backend_fixture(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Backend]:
    made = Backend(request.param, tmp_path)
    _made.append(made)
    try:
        yield made
    finally:
        while _made:
            _made.pop().drop()
