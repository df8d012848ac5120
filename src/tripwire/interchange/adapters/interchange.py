"""tripwire's own interchange format (JSON Lines, one event per line, SPEC §0), as a reader.

A line's ``session`` field names its session (``tripwire convert`` writes one on every line, so
a converted transcript of several sessions replays as those sessions); a line without one
belongs to the file's session (``name``). A line that cannot be read belongs to the session of
the line before it.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

from ..events import EVENT_TYPES, decoded_lines
from ._base import Item

NAME = "interchange"


def sniff(value: Any) -> bool:
    return isinstance(value, dict) and value.get("type", value.get("kind")) in EVENT_TYPES


def read(path: Path, name: str) -> Iterator[Item]:
    current = name
    for _, number, event, error, session in decoded_lines(path):
        if session is not None:
            current = session
        elif event is not None:
            current = name
        yield Item(current, number, event, error)
