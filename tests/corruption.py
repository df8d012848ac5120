"""Real corruptions of a SQLite store file on disk, as an agent that can write the file would
make them (issue 23, attack 1). The WAL is checkpointed into the main file first, so the file
on disk holds every row the corruption can reach (a page left only in the WAL is not yet the
file's)."""

from __future__ import annotations

import os
import shutil
import sqlite3
from pathlib import Path

#: Each corruption of the issue: a schema version this tripwire does not know, the file's
#: header overwritten, the file truncated to half, 4 KB of random bytes in one page (the rows
#: table's first), a directory where the file should be.
CORRUPTIONS = ("schema-version", "header", "truncated", "random-page", "directory")


def checkpoint(path: Path) -> None:
    db = sqlite3.connect(path, isolation_level=None)
    try:
        db.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    finally:
        db.close()


def corrupt(path: Path, how: str) -> None:
    checkpoint(path)
    if how == "schema-version":
        db = sqlite3.connect(path, isolation_level=None)
        try:
            db.execute("UPDATE meta SET value = '999' WHERE key = 'schema_version'")
        finally:
            db.close()
        return
    for side in (f"{path}-wal", f"{path}-shm"):
        if os.path.exists(side):
            os.unlink(side)
    if how == "header":
        with open(path, "r+b") as f:
            f.write(os.urandom(100))
    elif how == "truncated":
        os.truncate(path, os.path.getsize(path) // 2)
    elif how == "random-page":
        db = sqlite3.connect(path)
        try:
            (page_size,) = db.execute("PRAGMA page_size").fetchone()
            (root,) = db.execute(
                "SELECT rootpage FROM sqlite_master WHERE name = 'rows'").fetchone()
        finally:
            db.close()
        with open(path, "r+b") as f:
            f.seek((root - 1) * page_size)
            f.write(os.urandom(4096))
    elif how == "directory":
        os.unlink(path)
        os.mkdir(path)
    else:
        raise ValueError(how)


def remove(path: Path) -> None:
    """Undo ``directory`` for cleanup."""
    if path.is_dir():
        shutil.rmtree(path)
