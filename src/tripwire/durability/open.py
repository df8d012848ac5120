"""``open_store``: the store at a location, whichever backend it names. It sits above both
backends (``sqlite.py``, ``postgres.py``), which know nothing of each other; PostgreSQL's module
(and psycopg) is imported only for a ``postgresql://`` location."""

from __future__ import annotations

import os
from typing import TYPE_CHECKING, Any

from .sqlite import SQLiteStore

if TYPE_CHECKING:
    from .postgres import PostgresStore

__all__ = ["open_store", "open_existing"]

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


def open_existing(location: str, *, write: bool = False) -> SQLiteStore | PostgresStore:
    """A store that must exist and be a tripwire store sealed with the key in use (a wrong key
    is a ``StoreKeyMismatch``: a configuration error, not tampering): what the operator verbs
    and a probe of ``tripwire doctor`` open. Opened read-only (nothing is written into a
    foreign or empty file); ``write``: checked read-only first, then opened to append.
    ``FileNotFoundError`` when there is none; ``StoreUnreadable`` when it cannot be read."""
    from ..errors import StoreKeyMismatch
    from .chain import KEY_ENV

    if not location.startswith(_POSTGRES) and not os.path.lexists(location):
        raise FileNotFoundError(f"{location}: no such store")
    store = open_store(location, read_only=True, check=True)
    if not store.key_matches:
        store.close()
        raise StoreKeyMismatch(f"{store.path}: this key is not the one the store was created "
                               f"with (set {KEY_ENV} to the store's key)")
    if not write:
        return store
    store.close()
    return open_store(location, check=True)
