"""Many sessions' guardrails in one process."""

from __future__ import annotations

from typing import TYPE_CHECKING

from ..base.lazy import exports

if TYPE_CHECKING:  # what the names are, for type checkers and readers
    from .fleet import BATCH_KINDS as BATCH_KINDS
    from .fleet import Fleet as Fleet
    from .fleet import HaltedSession as HaltedSession

__getattr__, __dir__, __all__ = exports(__name__, {
    "Fleet": ".fleet",
    "HaltedSession": ".fleet",
    "BATCH_KINDS": ".fleet",
})
