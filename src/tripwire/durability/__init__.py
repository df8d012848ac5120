"""Durability: the hash-chained store (SQLite, PostgreSQL), its verdicts, and folding a
session's rows back into its state."""

from __future__ import annotations

from typing import TYPE_CHECKING

from ..base.lazy import exports

if TYPE_CHECKING:  # what the names are, for type checkers and readers
    from .fold import Folded as Folded
    from .fold import fold_history as fold_history
    from .postgres import (
        DEFAULT_SCHEMA as DEFAULT_SCHEMA,
    )
    from .postgres import (
        PostgresStore as PostgresStore,
    )
    from .postgres import (
        is_postgres_url as is_postgres_url,
    )
    from .store import (
        ANCHOR_ENV as ANCHOR_ENV,
    )
    from .store import (
        DEFAULT_KEY_NOTICE as DEFAULT_KEY_NOTICE,
    )
    from .store import (
        KEY_ENV as KEY_ENV,
    )
    from .store import (
        KINDS as KINDS,
    )
    from .store import (
        SCHEMA_VERSION as SCHEMA_VERSION,
    )
    from .store import (
        AnchorEntry as AnchorEntry,
    )
    from .store import (
        ChainReport as ChainReport,
    )
    from .store import (
        EventStore as EventStore,
    )
    from .store import (
        Row as Row,
    )
    from .store import (
        SessionHistory as SessionHistory,
    )
    from .store import (
        SQLiteStore as SQLiteStore,
    )
    from .store import (
        StoreError as StoreError,
    )
    from .store import (
        StoreKeyMismatch as StoreKeyMismatch,
    )
    from .store import (
        StoreUnreadable as StoreUnreadable,
    )
    from .store import (
        format_reports as format_reports,
    )
    from .store import (
        hold_lock as hold_lock,
    )
    from .store import (
        open_store as open_store,
    )
    from .store import (
        resolve_key as resolve_key,
    )
    from .store import (
        sqlite_error as sqlite_error,
    )

__getattr__, __dir__, __all__ = exports(__name__, {
    "StoreError": ".store",
    "StoreUnreadable": ".store",
    "StoreKeyMismatch": ".store",
    "AnchorEntry": ".store",
    "hold_lock": ".store",
    "Row": ".store",
    "ChainReport": ".store",
    "SessionHistory": ".store",
    "EventStore": ".store",
    "SQLiteStore": ".store",
    "open_store": ".store",
    "sqlite_error": ".store",
    "resolve_key": ".store",
    "format_reports": ".store",
    "DEFAULT_KEY_NOTICE": ".store",
    "KINDS": ".store",
    "KEY_ENV": ".store",
    "ANCHOR_ENV": ".store",
    "SCHEMA_VERSION": ".store",
    "PostgresStore": ".postgres",
    "is_postgres_url": ".postgres",
    "DEFAULT_SCHEMA": ".postgres",
    "Folded": ".fold",
    "fold_history": ".fold",
})
