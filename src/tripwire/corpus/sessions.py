"""The sessions of a path: the one place every ``tripwire corpus`` command reads them from."""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from pathlib import Path

from ..events import Event, read_events
from ..replay import event_files

__all__ = ["corpus_files", "iter_sessions"]


def corpus_files(paths: Iterable[str]) -> list[tuple[str, Path]]:
    """Every file under the given paths, each with the argument it was found under (its
    corpus), in a stable order: the arguments' order, then sorted paths."""
    return [(raw, path) for raw in paths for path in event_files([raw])]


def session_name(path: Path, root: str) -> str:
    """A session is named by its path relative to the argument given (SPEC §11.1): two
    ``s.jsonl`` in two folders are two sessions; a file given directly is its own name."""
    base = Path(root)
    if base.is_dir():
        return path.relative_to(base).as_posix()
    return path.name


def iter_sessions(path: Path, root: str) -> Iterator[tuple[str, Iterator[Event]]]:
    """The sessions of one file: ``(name, events)`` for each. An invalid line raises
    ``InvalidEvent`` naming the file and line."""
    yield session_name(path, root), _events(path)


def _events(path: Path) -> Iterator[Event]:
    for line in read_events(path):
        if line.error is not None:
            raise line.error
        assert line.event is not None
        yield line.event

