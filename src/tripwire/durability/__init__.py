"""Durability: the hash-chained store and folding a session's rows back into its state.

What a stored row says, kind by kind: ``rows.py``; the operator reset's one rule: ``reset.py``.
How rows are encoded, chained, sealed and judged: ``chain.py``; the anchor file that vouches
for a store from outside: ``anchor.py``; what every backend shares besides its SQL:
``backend.py``; the backends: ``sqlite.py``, ``postgres.py``; the one that opens either by
location: ``open.py``. One session's rows on their way to the store: ``log.py``; its history
folded back: ``fold.py``."""

from __future__ import annotations

from typing import TYPE_CHECKING

from ..base.lazy import exports

if TYPE_CHECKING:  # what the names are, for type checkers and readers
    from ..errors import (
        StoreError as StoreError,
    )
    from ..errors import (
        StoreKeyMismatch as StoreKeyMismatch,
    )
    from ..errors import (
        StoreUnreadable as StoreUnreadable,
    )
    from .anchor import (
        ANCHOR_ENV as ANCHOR_ENV,
    )
    from .anchor import (
        AnchorEntry as AnchorEntry,
    )
    from .anchor import (
        hold_lock as hold_lock,
    )
    from .chain import (
        DEFAULT_KEY_NOTICE as DEFAULT_KEY_NOTICE,
    )
    from .chain import (
        KEY_ENV as KEY_ENV,
    )
    from .chain import (
        SCHEMA_VERSION as SCHEMA_VERSION,
    )
    from .chain import (
        ChainReport as ChainReport,
    )
    from .chain import (
        EventStore as EventStore,
    )
    from .chain import (
        Row as Row,
    )
    from .chain import (
        SessionHistory as SessionHistory,
    )
    from .chain import (
        format_reports as format_reports,
    )
    from .chain import (
        resolve_key as resolve_key,
    )
    from .fold import (
        Folded as Folded,
    )
    from .fold import (
        fold_history as fold_history,
    )
    from .open import (
        open_store as open_store,
    )
    from .postgres import (
        DEFAULT_SCHEMA as DEFAULT_SCHEMA,
    )
    from .postgres import (
        PostgresStore as PostgresStore,
    )
    from .postgres import (
        is_postgres_url as is_postgres_url,
    )
    from .rows import KINDS as KINDS
    from .sqlite import (
        SQLiteStore as SQLiteStore,
    )
    from .sqlite import (
        sqlite_error as sqlite_error,
    )

__getattr__, __dir__, __all__ = exports(__name__, {
    "StoreError": "..errors",
    "StoreUnreadable": "..errors",
    "StoreKeyMismatch": "..errors",
    "AnchorEntry": ".anchor",
    "hold_lock": ".anchor",
    "ANCHOR_ENV": ".anchor",
    "Row": ".chain",
    "ChainReport": ".chain",
    "SessionHistory": ".chain",
    "EventStore": ".chain",
    "resolve_key": ".chain",
    "format_reports": ".chain",
    "DEFAULT_KEY_NOTICE": ".chain",
    "KINDS": ".rows",
    "KEY_ENV": ".chain",
    "SCHEMA_VERSION": ".chain",
    "SQLiteStore": ".sqlite",
    "sqlite_error": ".sqlite",
    "open_store": ".open",
    "PostgresStore": ".postgres",
    "is_postgres_url": ".postgres",
    "DEFAULT_SCHEMA": ".postgres",
    "Folded": ".fold",
    "fold_history": ".fold",
})
