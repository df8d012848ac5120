"""``open_store``: the store at a location, whichever backend it names. It sits above both
backends (``sqlite.py``, ``postgres.py``), which know nothing of each other; PostgreSQL's module
(and psycopg) is imported only for a ``postgresql://`` location."""

from __future__ import annotations

import os
from typing import TYPE_CHECKING, Any

from .sqlite import SQLiteStore

if TYPE_CHECKING:
    from .postgres import PostgresStore

__all__ = ["open_store"]

#: The location prefixes of a PostgreSQL store (``postgres.is_postgres_url``'s, without
#: importing the module for a file).
_POSTGRES = ("postgresql://", "postgres://")


def open_store(location: str | os.PathLike[str], **options: Any) -> SQLiteStore | PostgresStore:
    """The store at ``location``: a ``postgresql://`` (or ``postgres://``) URL opens a
    ``PostgresStore`` (``tripwire[postgres]``), anything else is a SQLite file. ``options`` go to
    the store's constructor (key, timeout, read_only, anchor)."""
    where = os.fspath(location)
    if where.startswith(_POSTGRES):
        from .postgres import PostgresStore

        return PostgresStore(where, **options)
    return SQLiteStore(where, **options)
