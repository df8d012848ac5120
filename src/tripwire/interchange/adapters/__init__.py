"""Transcript readers: other harnesses' recordings as streams of interchange events (SPEC §11.1).

One module per format (``_REGISTRY`` lists them, with the file suffixes a directory walk
considers); each has ``NAME``, ``sniff(value)`` (is this decoded first line / document of
mine?) and ``read(path, name) -> Iterator[Item]``, a generator that holds one line (JSON Lines
formats) or one document (single-document formats, whose ``read`` also takes the
``document`` detection decoded) at a time.

    for item in read_transcript(Path("session.jsonl")):        # --format auto
        if item.event is not None: ...

``name`` is the session name to use when the transcript carries no id of its own: its path
relative to the argument it was found under (``session_name``), never the bare file stem.
"""

from __future__ import annotations

import importlib
import os
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from types import ModuleType
from typing import TYPE_CHECKING, Any, TypeGuard

from ...errors import InvalidEvent, UnknownFormat

if TYPE_CHECKING:
    from ._base import Item

__all__ = ["Item", "FORMATS", "FORMAT_NAMES", "detect", "read_transcript", "Transcript",
           "transcripts", "session_name", "detect_or_fail", "read", "format_module",
           "HAND_OFF_BYTES", "detected", "no_transcripts"]

#: The formats, in detection order (the first whose ``sniff`` accepts the content wins): name,
#: module, the file names a directory walk considers, and whether the reader reads one whole
#: JSON document (then detection hands the document it decoded to the reader: decoded once).
#: A module is imported when detection first tries it or a run names its format, so a run
#: imports the readers it uses (``tests/test_import_laziness.py``).
_REGISTRY: tuple[tuple[str, str, tuple[str, ...], bool], ...] = (
    # before interchange: a headless ``result`` object is also a ``result`` event's shape
    ("claude-code-headless", "claude_code_headless", (".jsonl", ".json", ".ndjson"), True),
    ("interchange", "interchange", (".jsonl",), False),
    ("claude-code", "claude_code", (".jsonl",), False),
    ("codex", "codex", (".jsonl",), False),
    ("codex-exec", "codex_exec", (".jsonl",), False),
    ("otel", "otel", (".jsonl", ".json"), False),
    ("mini-swe-agent", "mini_swe_agent", (".traj.json", ".json"), True),
    ("swe-agent", "swe_agent", (".traj",), True),
    ("tau-bench", "tau_bench", (".json",), True),
    ("atif", "atif", (".json",), True),
    ("gemini-cli", "gemini_cli", (".json", ".jsonl"), True),
    ("openhands", "openhands", (".json", ".jsonl"), True),
    ("cline-roo", "cline_roo", (".json",), True),
    ("goose", "goose", (".jsonl", ".db"), False),
    ("opencode", "opencode", (".db",), False),
    ("agentdojo", "agentdojo", (".json",), True),
    ("anthropic", "anthropic", (".json",), True),
    ("openai-responses", "openai_responses", (".json",), True),
    ("openai-chat", "openai_chat", (".json",), True),
)
#: Formats whose transcript is a directory (a task folder, a conversation's event files, a
#: storage tree): name, module, and the entry names one of which a directory must hold for
#: the module's ``sniff_folder(directory, names)`` to be asked (it decides from content). A
#: directory walk asks them at every directory it enters; one that is a transcript is not
#: walked into.
_FOLDERS: tuple[tuple[str, str, frozenset[str]], ...] = (
    ("openhands", "openhands", frozenset({"events"})),
    ("cline-roo", "cline_roo", frozenset({"api_conversation_history.json"})),
    ("goose", "goose", frozenset({"sessions.db"})),
    ("opencode", "opencode", frozenset({"session", "storage", "opencode.db"})),
)
#: Formats stored in a SQLite database: name and module, whose ``sniff_database(path)`` looks
#: at a file that starts with SQLite's header (tables, not the file name, decide).
_DATABASES: tuple[tuple[str, str], ...] = (("goose", "goose"), ("opencode", "opencode"))
_ORDER = tuple(name for name, _, _, _ in _REGISTRY)
_MODULE_OF = {name: module for name, module, _, _ in _REGISTRY}
_WHOLE_DOCUMENT = frozenset(name for name, _, _, whole in _REGISTRY if whole)
FORMAT_NAMES = tuple(sorted(_ORDER))
_SUFFIXES = frozenset(s for _, _, suffixes, _ in _REGISTRY for s in suffixes)
#: the first bytes of every SQLite 3 database file
SQLITE_HEADER = b"SQLite format 3\x00"
#: how many leading lines detection may look at for one that decodes
_SNIFF_LINES = 8
#: the most bytes of decoded documents one listing keeps for its readers (beyond it, a
#: document is decoded again when read: a directory of trajectories is not held in memory)
HAND_OFF_BYTES = 64 << 20


def format_module(fmt: str) -> ModuleType:
    """The reader module of format ``fmt`` (imported on first use)."""
    module = _LOADED.get(fmt)
    if module is None:
        name = _MODULE_OF.get(fmt)
        if name is None:
            raise UnknownFormat(f"unknown format {fmt!r} ({expected()}, or auto)")
        module = _LOADED[fmt] = importlib.import_module(f"{__name__}.{name}")
    return module


_LOADED: dict[str, ModuleType] = {}


def __getattr__(name: str) -> Any:
    # imported on first use: the command line builds its parser from the names above alone
    if name == "Item":
        from ._base import Item

        return Item
    if name == "FORMATS":  # every reader module by format name (importing them all)
        return {fmt: format_module(fmt) for fmt in _ORDER}
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def _first_values(path: Path) -> Iterator[tuple[Any, bool]]:
    """The decoded first lines (up to a few that decode), then, if none did, the whole
    document (a pretty-printed single-JSON-document transcript); each with whether it is the
    whole file's content."""
    import orjson

    from ..events import UTF8_BOM

    decoded = False
    data: bytes | None = None
    with path.open("rb") as handle:
        if _size(handle) <= _READ_WHOLE:  # one read, lines cut in memory (3x a readline)
            data = handle.read()
        lines = _lines(data) if data is not None else iter(handle.readline, b"")
        for n, raw in zip(range(_SNIFF_LINES), lines, strict=False):
            if n == 0:
                raw = raw.removeprefix(UTF8_BOM)
            try:
                value = orjson.loads(raw)
            except orjson.JSONDecodeError:
                continue
            decoded = True
            yield value, n == 0 and (_one_line(data) if data is not None
                                     else not handle.peek(1))
    if not decoded:
        try:
            whole = data if data is not None else path.read_bytes()
            yield orjson.loads(whole.removeprefix(UTF8_BOM)), True
        except orjson.JSONDecodeError:
            return


#: files up to this size are read whole by detection (larger ones line by line)
_READ_WHOLE = 16 << 20


def _size(handle: Any) -> int:
    import os

    return os.fstat(handle.fileno()).st_size


def _one_line(data: bytes) -> bool:
    newline = data.find(b"\n")
    return newline < 0 or newline == len(data) - 1


def _lines(data: bytes) -> Iterator[bytes]:
    """The lines of ``data`` as ``readline`` gives them (each with its ``\n``)."""
    start, end = 0, len(data)
    while start < end:
        stop = data.find(b"\n", start)
        stop = end if stop < 0 else stop + 1
        yield data if start == 0 and stop == end else data[start:stop]
        start = stop


def _sniff(path: Path) -> tuple[str | None, Any]:
    """``detect``, and the decoded document when the format reads one whole document that
    detection decoded whole (else None)."""
    if path.is_dir():
        return _folder_format(path), None
    if _DATABASES and _starts_with(path, SQLITE_HEADER):
        return _database_format(path), None
    decoded = False
    for value, whole in _first_values(path):
        decoded = True
        for fmt in _ORDER:
            if format_module(fmt).sniff(value):
                return fmt, (value if whole and fmt in _WHOLE_DOCUMENT else None)
    return (None if decoded else "interchange"), None


def _starts_with(path: Path, head: bytes) -> bool:
    try:
        with path.open("rb") as handle:
            return handle.read(len(head)) == head
    except OSError:
        return False


def _database_format(path: Path) -> str | None:
    """The format of a SQLite database file, or None when no reader knows its tables."""
    for fmt, _ in _DATABASES:
        if format_module(fmt).sniff_database(path):
            return fmt
    return None


def _folder_format(directory: Path, names: frozenset[str] | None = None) -> str | None:
    """The format of a directory that is one transcript, or None. ``names``: its entries'
    names, when the caller listed them already."""
    if names is None:
        try:
            names = frozenset(os.listdir(directory))
        except OSError:
            return None
    for fmt, _, signs in _FOLDERS:
        if not names.isdisjoint(signs) and format_module(fmt).sniff_folder(directory, names):
            return fmt
    return None


def detect(path: Path) -> str | None:
    """The format of ``path`` judged by its content, or None when its leading lines (or the
    whole document) are JSON of no known format. A file none of whose leading lines is JSON at
    all is read as interchange, whose strict reader names the first bad line and why."""
    return _sniff(path)[0]


def expected() -> str:
    return ("expected one of: " + ", ".join(FORMAT_NAMES))


def detect_or_fail(path: Path) -> str:
    found = detect(path)
    if found is None:
        raise UnknownFormat(f"not a transcript of a known format ({expected()})",
                            source=str(path))
    return found


def read_transcript(path: Path, fmt: str = "auto", name: str | None = None,
                    document: Any = None, alone: bool = False) -> Iterator[Item]:
    """The items of one transcript file, read as ``fmt`` (``auto``: detected from content).
    ``document``: the file's content already decoded (by detection), for a reader of one
    whole document; None: the reader decodes the file. ``alone``: the file was given as it is
    (not found in a directory), so a reader whose transcripts refer to other files (ATIF's
    sub-agent and continuation files) reads those too."""
    name = name if name is not None else path.as_posix()
    if fmt == "auto":
        found, document = _sniff(path)
        if found is None:
            raise UnknownFormat(f"not a transcript of a known format ({expected()})",
                                source=str(path))
        fmt = found
    module = format_module(fmt)
    extra = {"follow": alone} if getattr(module, "FOLLOWS_REFERENCES", False) else {}
    items: Iterator[Item] = (module.read(path, name, document, **extra)
                             if document is not None and fmt in _WHOLE_DOCUMENT
                             else module.read(path, name, **extra))
    return items


class _Decoded:
    """A document detection decoded, handed to the transcript's reader once (``take``), so
    the reader does not decode the file again and the listing does not keep it after."""

    __slots__ = ("value",)

    def __init__(self, value: Any) -> None:
        self.value = value

    def take(self) -> Any:
        value, self.value = self.value, None
        return value

    def __reduce__(self) -> tuple[type[_Decoded], tuple[None]]:
        # a transcript sent to another process (corpus workers) carries its path, not the
        # document: the worker decodes the file itself
        return (_Decoded, (None,))


@dataclass(frozen=True, slots=True)
class Transcript:
    """A file to read: where it is, its format and its fallback session name; ``decoded``: its
    content, when detection decoded the whole document (read once). Format None: a file found
    in a directory and not yet detected (``transcripts(..., detect=False)``; see ``detected``)."""

    path: Path
    format: str | None
    name: str
    decoded: _Decoded | None = field(default=None, compare=False, repr=False)
    #: given as it is (a file argument), not found in a directory (see ``read_transcript``)
    alone: bool = field(default=False, compare=False)


def session_name(path: Path, argument: Path) -> str:
    """The fallback session name of ``path``, found under the command-line ``argument``: its
    path relative to a directory argument, or the argument itself (never the bare stem, so
    two ``s.jsonl`` in two folders are two sessions)."""
    if path == argument:
        return argument.as_posix()
    return path.relative_to(argument).as_posix()


def transcripts(arguments: Iterable[str], fmt: str = "auto", *,
                detect: bool = True) -> list[Transcript]:
    """Expand command-line paths: a file is itself; a directory is every transcript below it
    (sorted): files with a transcript suffix whose content is of a known format (of ``fmt``,
    when one is named). Raises FileNotFoundError / InvalidEvent a user can act on.

    ``detect=False`` (``fmt`` auto only): a directory's files are listed without reading them
    (format None), for whoever reads them to detect (``detected``, which drops those of no
    known format) — the corpus workers, so that the listing is not serial work. A directory
    with no file of a transcript suffix still raises here; one whose files all turn out of no
    known format is the reader's to report (``no_transcripts``)."""
    if fmt != "auto" and fmt not in _MODULE_OF:
        raise UnknownFormat(f"unknown format {fmt!r} ({expected()}, or auto)")
    if not detect and fmt != "auto":
        raise ValueError("a listing that leaves detection to the reader lists every format")
    found: list[Transcript] = []
    held = 0  # bytes of the documents handed on so far (at most HAND_OFF_BYTES)

    def listed(path: Path, kind: str, document: Any, name: str,
               alone: bool = False) -> Transcript:
        nonlocal held
        if document is not None and held < HAND_OFF_BYTES:
            size = path.stat().st_size
            if held + size <= HAND_OFF_BYTES:
                held += size
                return Transcript(path, kind, name, _Decoded(document), alone)
        return Transcript(path, kind, name, alone=alone)

    for raw in arguments:
        argument = Path(raw)
        kind = _folder_format(argument) if argument.is_dir() and fmt in ("auto", *(
            f for f, _, _ in _FOLDERS)) else None
        if kind is not None and _kept(kind, fmt):  # the directory is one transcript
            found.append(Transcript(argument, kind, session_name(argument, argument),
                                    alone=True))
            continue
        if argument.is_dir():
            inside = []
            for path, name, folder in _walk(argument):
                if folder is not None:
                    if _kept(folder, fmt):
                        inside.append(Transcript(path, folder, name))
                    continue
                if not detect:
                    inside.append(Transcript(path, None, name))
                    continue
                kind, document = _sniff(path)
                if _kept(kind, fmt):
                    inside.append(listed(path, kind, document, name))
            if not inside:
                raise no_transcripts(argument, fmt)
            found.extend(inside)
        elif argument.exists():
            name = session_name(argument, argument)
            if fmt != "auto":
                found.append(Transcript(argument, fmt, name, alone=True))
                continue
            kind, document = _sniff(argument)
            if kind is None:
                raise UnknownFormat(f"not a transcript of a known format ({expected()})",
                                    source=str(argument))
            found.append(listed(argument, kind, document, name, alone=True))
        else:
            raise FileNotFoundError(f"{argument}: no such file or directory")
    return found


def _kept(kind: str | None, fmt: str) -> TypeGuard[str]:
    """Whether a directory's file detected as ``kind`` is one of its transcripts."""
    return kind is not None and (fmt == "auto" or kind == fmt)


def no_transcripts(directory: Path, fmt: str = "auto") -> InvalidEvent:
    """The error of a directory argument none of whose files is a transcript (of ``fmt``)."""
    what = "transcripts" if fmt == "auto" else f"{fmt} transcripts"
    return InvalidEvent(f"no {what} in directory {directory} ({expected()})")


def detected(transcript: Transcript) -> Transcript | None:
    """``transcript`` with its format: as listed, or, listed undetected (format None),
    detected now — its decoded document handed to its reader — or None when its content is of
    no known format (a file the detecting listing leaves out of its directory)."""
    if transcript.format is not None:
        return transcript
    kind, document = _sniff(transcript.path)
    if not _kept(kind, "auto"):
        return None
    return Transcript(transcript.path, kind, transcript.name,
                      None if document is None else _Decoded(document), transcript.alone)


def _walk(directory: Path) -> list[tuple[Path, str, str | None]]:
    """The files below ``directory`` with a transcript suffix, sorted, each with its session
    name (``session_name``): the files of ``sorted(p for p in directory.rglob("*") if
    p.is_file())`` — a link to a file is a file, a link to a directory is not followed, an
    unreadable directory is left out — from the directory entries alone, without a stat or a
    ``Path`` per file until the end (a fifth of the time: a parallel run's parent lists
    serially). A directory below that is one transcript (``_FOLDERS``) is listed in its place,
    with its format, and not walked into; files come with None."""
    found: list[tuple[tuple[str, ...], str | None]] = []

    def below(folder: str, parts: tuple[str, ...]) -> None:
        try:
            with os.scandir(folder) as scan:
                entries = list(scan)
        except PermissionError:
            return
        if parts and _FOLDERS:
            kind = _folder_format(Path(folder), frozenset(e.name for e in entries))
            if kind is not None:
                found.append((parts, kind))
                return
        for entry in entries:
            if entry.is_dir() and not entry.is_symlink():
                below(entry.path, (*parts, entry.name))
            elif entry.is_file() and _has_suffix(entry.name):
                found.append(((*parts, entry.name), None))

    below(os.fspath(directory), ())
    found.sort(key=lambda row: tuple(map(os.path.normcase, row[0])))  # as paths sort
    return [(directory.joinpath(*parts), "/".join(parts), kind) for parts, kind in found]


def _has_suffix(name: str) -> bool:
    return any(name.endswith(suffix) for suffix in _SUFFIXES)


def read(transcript: Transcript) -> Iterator[Item]:
    """The items of ``transcript``; at the end, ``InvalidEvent`` if it had lines but none
    yielded an event (a file of the wrong format, or of nothing but metadata: SPEC §11.1 makes
    that an error even when invalid lines are skipped). A blank file is an empty session, and
    so is a recording of a whole-document format with no event (a Gemini CLI session holding
    one warning): its reader checked the document's own shape, so it is no other format's file.

    Half a call is no event: once a line could not be read, a result whose call was not read
    (its id is no call's seen so far) is invalid too, so that skipping invalid lines never
    leaves answers without their questions for the signals to misread."""
    from ...errors import TruncatedLine
    from ..events import Call, Result

    lines = events = 0
    calls: set[Any] = set()  # the ids of the calls read so far
    broken = False  # a line could not be read
    document = transcript.decoded.take() if transcript.decoded is not None else None
    fmt = transcript.format or "auto"  # listed undetected: detected here, as a file argument
    for item in read_transcript(transcript.path, fmt, transcript.name, document,
                                transcript.alone):
        lines += 1
        event = item.event
        if event is None:
            if item.error is not None and type(item.error) is not TruncatedLine:
                broken = True
        elif type(event) is Call:
            if event.id is not None:
                calls.add(event.id)
        elif broken and type(event) is Result and event.id is not None \
                and event.id not in calls:
            item = item._replace(event=None, error=InvalidEvent(
                f"the result of call {event.id!r}, which was not read (a line before it "
                "could not be read)", source=str(transcript.path), line=item.line))
        events += item.event is not None
        yield item
    if lines and not events and fmt not in _WHOLE_DOCUMENT:
        raise InvalidEvent(f"no line yielded an event (read as {fmt}; "
                           f"{expected()})", source=str(transcript.path))
