"""The token estimate of unmeasured bytes (SPEC §10.14): 3 bytes per token, the reference of
``native/tokens.*`` (the native engine's ``TokenEstimator`` and ``utf8_length``).
"""

from __future__ import annotations

from typing import Any

from ..errors import InvalidEvent

__all__ = ["BYTES_PER_TOKEN", "TokenEstimator", "utf8_length", "estimate_tokens"]

#: Tool results are JSON, YAML and logs, which tokenize worse than prose; under-counting is the
#: dangerous direction, so 3 bytes per token rather than the 4-byte prose rule (seed).
BYTES_PER_TOKEN = 3


class TokenEstimator:
    """Counts unmeasured bytes; ``tokens`` is ceil(bytes / 3) over the total, so any chunking of
    the same bytes gives the same count (SPEC §10.14)."""

    __slots__ = ("bytes",)

    def __init__(self) -> None:
        self.bytes = 0

    def feed(self, chunk: Any) -> int:
        """Add one chunk (str, bytes or any buffer); returns the running token estimate."""
        self.bytes += utf8_length(chunk)
        return self.tokens

    def add_bytes(self, count: int) -> int:
        """Add a byte count measured elsewhere (batch ingest hands its totals over this way)."""
        self.bytes += count
        return self.tokens

    @property
    def tokens(self) -> int:
        return -(-self.bytes // BYTES_PER_TOKEN)

    def reset(self) -> None:
        self.bytes = 0


def utf8_length(chunk: Any) -> int:
    """Bytes a chunk occupies as UTF-8 (buffers: their byte length)."""
    if isinstance(chunk, str):
        return len(chunk.encode("utf-8", "surrogatepass"))
    if chunk is None:
        return 0
    try:
        return memoryview(chunk).nbytes
    except TypeError:
        raise InvalidEvent(
            f"expected str or a bytes-like buffer, not {type(chunk).__name__}"
        ) from None


def estimate_tokens(byte_count: int) -> int:
    return -(-byte_count // BYTES_PER_TOKEN)
