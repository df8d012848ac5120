"""The sessions of the given paths, read through the transcript readers (``tripwire.adapters``,
``--format auto``): interchange files and every harness format replay reads. The one place
every ``tripwire corpus`` command reads sessions from."""

from __future__ import annotations

from collections.abc import Iterable, Iterator

from ..adapters import Transcript, read, transcripts
from ..errors import TruncatedLine
from ..events import Event

__all__ = ["corpus_files", "session_events"]


def corpus_files(paths: Iterable[str]) -> list[tuple[str, Transcript]]:
    """Every transcript under the given paths, each with the argument it was found under (its
    corpus), in a stable order: the arguments' order, then sorted paths. Sessions are named as
    replay names them (the transcript's own id, else its path relative to the argument)."""
    return [(raw, transcript) for raw in paths for transcript in transcripts([raw])]


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
