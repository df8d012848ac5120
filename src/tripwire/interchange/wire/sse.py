"""Server-sent events (the streaming responses of every model API): an incremental reader of
frames that keeps each frame's own bytes, so a frame passed through is forwarded unchanged."""

from __future__ import annotations

from typing import NamedTuple

import orjson

__all__ = ["Frame", "Frames", "frame"]

#: a stream that never ends a frame is cut off here (bytes held for one frame)
MAX_FRAME = 8 << 20


class Frame(NamedTuple):
    """One event: its raw bytes (blank line included), its ``event:`` name ("" when it has
    none) and its ``data:`` (lines joined by newlines; b"" when it has none)."""

    raw: bytes
    event: str
    data: bytes

    def json(self) -> object:
        """The data as JSON (None for none, for ``[DONE]`` and for what does not parse)."""
        if not self.data or self.data == b"[DONE]":
            return None
        try:
            return orjson.loads(self.data)
        except orjson.JSONDecodeError:
            return None


def _parse(raw: bytes) -> Frame:
    event, data = "", []
    for line in raw.splitlines():
        if line.startswith(b"data:"):
            data.append(line[5:].removeprefix(b" "))
        elif line.startswith(b"event:"):
            event = line[6:].strip().decode("utf-8", "replace")
    return Frame(raw, event, b"\n".join(data))


class Frames:
    """Bytes in, whole frames out (a frame ends at a blank line: ``\\n\\n`` or ``\\r\\n\\r\\n``)."""

    __slots__ = ("_buffer",)

    def __init__(self) -> None:
        self._buffer = b""

    def feed(self, chunk: bytes) -> list[Frame]:
        buffer = self._buffer + chunk if self._buffer else chunk
        if b"\r" in buffer:
            buffer = buffer.replace(b"\r\n", b"\n")
        out = []
        start = 0
        while True:
            end = buffer.find(b"\n\n", start)
            if end < 0:
                break
            out.append(_parse(buffer[start:end + 2]))
            start = end + 2
        self._buffer = buffer[start:]
        if len(self._buffer) > MAX_FRAME:
            raise ValueError(f"a stream frame over {MAX_FRAME} bytes")
        return out

    def rest(self) -> Frame | None:
        """What is left at the end of the stream (a last frame without its blank line)."""
        if not self._buffer.strip():
            return None
        raw, self._buffer = self._buffer, b""
        return _parse(raw + b"\n\n")


def frame(data: object, event: str | None = None) -> bytes:
    """One frame's bytes: ``event: NAME`` (when given) and ``data: JSON``."""
    head = f"event: {event}\n".encode() if event else b""
    return head + b"data: " + orjson.dumps(data) + b"\n\n"
