"""Usage from the harness's transcript (``transcript_path``), read incrementally.

Hooks carry no token usage; the transcript does. The reader is the adapters' (one reader per
format, usage once per provider response); this module only remembers how far it has read.
"""

from __future__ import annotations

from typing import Any

__all__ = ["transcript_usage"]


def transcript_usage(harness: str, path: str | None, offset: int) -> tuple[list[dict[str, Any]], int]:
    """The usage events (``Guardrails.on_usage`` keyword arguments) written to the transcript
    since byte ``offset``, and the new offset. No transcript reader is wired in yet, so no
    usage is read: cost ceilings see no spend from hooks."""
    return [], offset
