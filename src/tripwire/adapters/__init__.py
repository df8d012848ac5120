"""Transcript readers: other harnesses' recordings as streams of interchange events (SPEC §11.1).

One module per format; each has ``NAME``, ``SUFFIXES`` (the file names a directory walk
considers), ``sniff(value)`` (is this decoded first line / document of mine?) and
``read(path, name) -> Iterator[Item]``, a generator that holds one line (JSON Lines formats) or
one document (single-document formats) at a time.

    for item in read_transcript(Path("session.jsonl")):        # --format auto
        if item.event is not None: ...

``name`` is the session name to use when the transcript carries no id of its own: its path
relative to the argument it was found under (``session_name``), never the bare file stem.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType
from typing import Any

import orjson

from ..errors import InvalidEvent, UnknownFormat
from . import (
    anthropic,
    claude_code,
    codex,
    interchange,
    mini_swe_agent,
    openai_chat,
    openai_responses,
    otel,
    swe_agent,
    tau_bench,
)
from ._base import UTF8_BOM, Item

__all__ = ["Item", "FORMATS", "FORMAT_NAMES", "detect", "read_transcript", "Transcript",
           "transcripts", "session_name", "detect_or_fail", "read"]

#: detection order: the first whose ``sniff`` accepts the content wins
_MODULES: tuple[ModuleType, ...] = (interchange, claude_code, codex, otel, mini_swe_agent,
                                    swe_agent, tau_bench, anthropic, openai_responses,
                                    openai_chat)
FORMATS: dict[str, ModuleType] = {m.NAME: m for m in _MODULES}
FORMAT_NAMES = tuple(sorted(FORMATS))
_SUFFIXES = frozenset(s for m in _MODULES for s in m.SUFFIXES)
#: how many leading lines detection may look at for one that decodes
_SNIFF_LINES = 8


def _first_values(path: Path) -> Iterator[Any]:
    """The decoded first lines (up to a few that decode), then, if none did, the whole
    document (a pretty-printed single-JSON-document transcript)."""
    decoded = False
    with path.open("rb") as handle:
        for n in range(_SNIFF_LINES):
            raw = handle.readline()
            if not raw:
                break
            if n == 0:
                raw = raw.removeprefix(UTF8_BOM)
            try:
                value = orjson.loads(raw)
            except orjson.JSONDecodeError:
                continue
            decoded = True
            yield value
    if not decoded:
        try:
            yield orjson.loads(path.read_bytes().removeprefix(UTF8_BOM))
        except orjson.JSONDecodeError:
            return


def detect(path: Path) -> str | None:
    """The format of ``path`` judged by its content, or None when its leading lines (or the
    whole document) are JSON of no known format. A file none of whose leading lines is JSON at
    all is read as interchange, whose strict reader names the first bad line and why."""
    decoded = False
    for value in _first_values(path):
        decoded = True
        for module in _MODULES:
            if module.sniff(value):
                return str(module.NAME)
    return None if decoded else interchange.NAME


def expected() -> str:
    return ("expected one of: " + ", ".join(FORMAT_NAMES))


def detect_or_fail(path: Path) -> str:
    found = detect(path)
    if found is None:
        raise UnknownFormat(f"not a transcript of a known format ({expected()})",
                            source=str(path))
    return found


def read_transcript(path: Path, fmt: str = "auto", name: str | None = None) -> Iterator[Item]:
    """The items of one transcript file, read as ``fmt`` (``auto``: detected from content)."""
    name = name if name is not None else path.as_posix()
    if fmt == "auto":
        fmt = detect_or_fail(path)
    module = FORMATS.get(fmt)
    if module is None:
        raise UnknownFormat(f"unknown format {fmt!r} ({expected()}, or auto)")
    items: Iterator[Item] = module.read(path, name)
    return items


@dataclass(frozen=True, slots=True)
class Transcript:
    """A file to read: where it is, its format (None: detect) and its fallback session name."""

    path: Path
    format: str
    name: str


def session_name(path: Path, argument: Path) -> str:
    """The fallback session name of ``path``, found under the command-line ``argument``: its
    path relative to a directory argument, or the argument itself (never the bare stem, so
    two ``s.jsonl`` in two folders are two sessions)."""
    if path == argument:
        return argument.as_posix()
    return path.relative_to(argument).as_posix()


def transcripts(arguments: Iterable[str], fmt: str = "auto") -> list[Transcript]:
    """Expand command-line paths: a file is itself; a directory is every transcript below it
    (sorted): files with a transcript suffix whose content is of a known format (of ``fmt``,
    when one is named). Raises FileNotFoundError / InvalidEvent a user can act on."""
    if fmt != "auto" and fmt not in FORMATS:
        raise UnknownFormat(f"unknown format {fmt!r} ({expected()}, or auto)")
    found: list[Transcript] = []
    for raw in arguments:
        argument = Path(raw)
        if argument.is_dir():
            inside = []
            for path in sorted(p for p in argument.rglob("*") if p.is_file()
                               and _has_suffix(p)):
                kind = detect(path)
                if kind is not None and (fmt == "auto" or kind == fmt):
                    inside.append(Transcript(path, kind, session_name(path, argument)))
            if not inside:
                what = "transcripts" if fmt == "auto" else f"{fmt} transcripts"
                raise InvalidEvent(f"no {what} in directory {argument} ({expected()})")
            found.extend(inside)
        elif argument.exists():
            kind = detect_or_fail(argument) if fmt == "auto" else fmt
            found.append(Transcript(argument, kind, session_name(argument, argument)))
        else:
            raise FileNotFoundError(f"{argument}: no such file or directory")
    return found


def _has_suffix(path: Path) -> bool:
    name = path.name
    return any(name.endswith(suffix) for suffix in _SUFFIXES)


def read(transcript: Transcript) -> Iterator[Item]:
    """The items of ``transcript``; at the end, ``InvalidEvent`` if it had lines but none
    yielded an event (a file of the wrong format, or of nothing but metadata: SPEC §11.1 makes
    that an error even when invalid lines are skipped). A blank file is an empty session."""
    lines = events = 0
    for item in read_transcript(transcript.path, transcript.format, transcript.name):
        lines += 1
        events += item.event is not None
        yield item
    if lines and not events:
        raise InvalidEvent(f"no line yielded an event (read as {transcript.format}; "
                           f"{expected()})", source=str(transcript.path))
