"""The sessions of the given paths, read through the transcript readers (``tripwire.adapters``,
``--format auto``): interchange files and every harness format replay reads. The one place
every ``tripwire corpus`` command reads sessions from."""

from __future__ import annotations

from collections.abc import Collection, Iterable, Iterator, Sequence
from itertools import groupby
from pathlib import Path

from ..errors import InvalidEvent, TruncatedLine
from ..interchange.adapters import Transcript, no_transcripts, read, transcripts
from ..interchange.events import Event

__all__ = ["corpus_files", "session_events", "empty_directory"]


def corpus_files(paths: Iterable[str], *, detect: bool = True) -> list[tuple[str, Transcript]]:
    """Every transcript under the given paths, each with the argument it was found under (its
    corpus), in a stable order: the arguments' order, then sorted paths. Sessions are named as
    replay names them (the transcript's own id, else its path relative to the argument).
    ``detect=False``: a directory's files are listed undetected (``adapters.transcripts``), for
    the process that reads each to detect it and skip it if it is of no known format."""
    return [(raw, transcript) for raw in paths
            for transcript in transcripts([raw], detect=detect)]


def empty_directory(work: Sequence[tuple[str, Transcript]],
                    skipped: Collection[int]) -> InvalidEvent | None:
    """The error of the first directory argument of an undetected listing (``work``) whose
    files were all skipped (``skipped``: their indices) — what the detecting listing raises
    for it — or None. Each argument's files are consecutive in ``work``; a directory's are
    the undetected ones (a directory given twice in a row: twice the same files)."""
    for (corpus, undetected), rows in groupby(
            enumerate(work), key=lambda row: (row[1][0], row[1][1].format is None)):
        if undetected and all(i in skipped for i, _ in rows):
            return no_transcripts(Path(corpus))
    return None


def session_events(transcript: Transcript) -> Iterator[tuple[str, Event]]:
    """``(session name, event)`` in file order; one transcript may hold several sessions (a
    tau-bench results file, Claude Code sidechains). An invalid line raises ``InvalidEvent``
    naming the file and line; a truncated last line (a copy taken mid-write) is left out, as
    replay leaves it out."""
    for item in read(transcript):
        if item.error is not None:
            if isinstance(item.error, TruncatedLine):
                continue
            raise item.error
        if item.event is not None:
            yield item.session, item.event
