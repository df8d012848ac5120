"""The context guard's configuration (``ContextConfig``, a config file's ``[context]``), apart
from the guard itself: every session's configuration holds one, and a session with the guard
off (a hook's: the harness compacts its own context) never imports the guard."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from ..errors import ConfigError
from .prompts import TAIL_CHARS
from .tiers import DEFAULT_CATALOGUE, TIERS, ModelCatalogue, compaction_threshold

__all__ = ["ContextConfig", "CHECKPOINT_MODES", "FILE_KEYS", "CUT_AT"]

#: SPEC §6 / §10.14: past this share of the window the turn is cut.
CUT_AT = 0.95
#: Failure backoff is 2**failures turns, capped (seed: "the backoff then grows to 32 turns").
MAX_BACKOFF_TURNS = 32
#: Two consecutive failures escalate to mechanical truncation (one is often a transient).
FALLBACK_AFTER = 2
#: Who may declare a task boundary (seed, "Choosing who declares a boundary"): ``model`` — the
#: model's automatic checkpoints and the operator's manual ones; ``operator`` — manual only;
#: ``off`` — none (compaction is a separate switch).
CHECKPOINT_MODES = ("model", "operator", "off")

#: The keys of a config file's ``[context]`` section.
FILE_KEYS = frozenset({"enabled", "auto_compact", "checkpoint", "threshold",
                       "threshold_by_tier", "cut_at", "tier", "tail_chars", "fallback_after",
                       "max_backoff_turns"})


@dataclass(frozen=True)
class ContextConfig:
    """Knobs of the context guard; defaults are SPEC §6's.

    ``threshold`` is the fallback for models of no known tier (and what a task class sets);
    ``threshold_by_tier`` overrides win for their tier. ``tier`` forces the tier used for
    thresholds (``""``: none). ``catalogue`` holds tiers and windows (``[models]`` in a file).
    ``cut_turns=False`` reports the 95% crossing (a ``turn-cut`` record with
    ``enforced: false``) without cutting, also under ``enforce``; below ``enforce`` the
    crossing is only reported whatever it says (nothing is cut in ``warn`` or ``feedback``).

    ``enabled=False`` turns the whole guard off (utilization, compaction, the cut);
    ``auto_compact=False`` only the automatic compaction trigger: manual compaction and the 95%
    cut keep working. ``checkpoint`` is one of ``CHECKPOINT_MODES``.
    """

    enabled: bool = True
    cut_turns: bool = True
    auto_compact: bool = True
    checkpoint: str = "model"
    threshold: float | None = None
    threshold_by_tier: Mapping[str, float] = field(default_factory=dict)
    cut_at: float = CUT_AT
    tier: str | None = None
    catalogue: ModelCatalogue = DEFAULT_CATALOGUE
    tail_chars: int = TAIL_CHARS
    fallback_after: int = FALLBACK_AFTER
    max_backoff_turns: int = MAX_BACKOFF_TURNS

    def __post_init__(self) -> None:
        compaction_threshold(None, self.threshold_by_tier, self.threshold)  # validates both
        for name in ("enabled", "cut_turns", "auto_compact"):
            if not isinstance(getattr(self, name), bool):
                raise ConfigError(f"context {name} must be true or false, "
                                  f"not {getattr(self, name)!r}")
        if self.checkpoint not in CHECKPOINT_MODES:
            raise ConfigError(f"context checkpoint must be one of {', '.join(CHECKPOINT_MODES)}, "
                              f"not {self.checkpoint!r}")
        if isinstance(self.cut_at, bool) or not isinstance(self.cut_at, (int, float)) \
                or not 0 < self.cut_at <= 1:
            raise ConfigError(f"context cut_at must be in (0, 1], not {self.cut_at!r}")
        if self.tier not in (None, "", *TIERS):
            raise ConfigError(f"context tier must be one of {', '.join(TIERS)} or '', "
                              f"not {self.tier!r}")
        for name in ("tail_chars", "fallback_after", "max_backoff_turns"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise ConfigError(f"context {name} must be a positive integer, not {value!r}")

    @classmethod
    def from_mapping(cls, file: Mapping[str, Any]) -> ContextConfig:
        """From a config file's ``[context]`` and ``[models]`` sections."""
        section = file.get("context", {})
        if not isinstance(section, Mapping):
            raise ConfigError("config section [context] must be a table")
        known = FILE_KEYS
        unknown = sorted(set(section) - known)
        if unknown:
            raise ConfigError(f"unknown setting(s) in [context]: {', '.join(unknown)} "
                              f"(known: {', '.join(sorted(known))})")
        return cls(catalogue=ModelCatalogue.from_config(file), **section)
