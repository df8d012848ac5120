"""tripwire's own interchange format (JSON Lines, one event per line, SPEC §0), as a reader."""

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
    for _, number, event, error in decoded_lines(path):
        yield Item(name, number, event, error)
