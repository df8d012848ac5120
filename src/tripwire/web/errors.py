"""The typed HTTP refusal that the web modules (the operator routes, the live page's queries)
raise and the routes answer as JSON with its status."""

from __future__ import annotations

from typing import Any

__all__ = ["HttpError"]


class HttpError(Exception):
    """A refusal with its HTTP status and extra JSON fields."""

    def __init__(self, reason: str, status: int = 400, **extra: Any) -> None:
        super().__init__(reason)
        self.reason = reason
        self.status = status
        self.extra = extra
