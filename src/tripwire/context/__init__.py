"""The context window: utilization, compaction and its summarizer policy, checkpoints (guard),
the summary prompts and mechanical truncation (prompts), the ``/context`` view (stats), the
model catalogue (tiers, windows), message histories."""

from __future__ import annotations

from typing import TYPE_CHECKING

from ..base.lazy import exports

if TYPE_CHECKING:  # what the names are, for type checkers and readers
    from .config import (
        CHECKPOINT_MODES as CHECKPOINT_MODES,
    )
    from .config import (
        ContextConfig as ContextConfig,
    )
    from .guard import (
        TERMINAL_FINISH_REASONS as TERMINAL_FINISH_REASONS,
    )
    from .guard import (
        Compaction as Compaction,
    )
    from .guard import (
        ContextGuard as ContextGuard,
    )
    from .guard import (
        SummaryResult as SummaryResult,
    )
    from .guard import (
        Utilization as Utilization,
    )
    from .histories import (
        detect_format as detect_format,
    )
    from .histories import (
        kept_prefix as kept_prefix,
    )
    from .histories import (
        rebuild as rebuild,
    )
    from .prompts import (
        CHECKPOINT_SECTIONS as CHECKPOINT_SECTIONS,
    )
    from .prompts import (
        HANDOVER_SECTIONS as HANDOVER_SECTIONS,
    )
    from .prompts import (
        checkpoint_prompt as checkpoint_prompt,
    )
    from .prompts import (
        handover_prompt as handover_prompt,
    )
    from .prompts import (
        mechanical_truncation as mechanical_truncation,
    )
    from .prompts import (
        missing_sections as missing_sections,
    )
    from .stats import (
        ContextStats as ContextStats,
    )
    from .stats import (
        ModelUsage as ModelUsage,
    )
    from .stats import (
        UsageByModel as UsageByModel,
    )
    from .stats import (
        context_stats_from_rows as context_stats_from_rows,
    )
    from .stats import (
        usage_stats as usage_stats,
    )
    from .tiers import (
        ASSUMED_CONTEXT_WINDOW as ASSUMED_CONTEXT_WINDOW,
    )
    from .tiers import (
        ModelCatalogue as ModelCatalogue,
    )
    from .tiers import (
        Tier as Tier,
    )
    from .tiers import (
        classify as classify,
    )
    from .tiers import (
        compaction_threshold as compaction_threshold,
    )
    from .tiers import (
        context_window as context_window,
    )
    from .tiers import (
        is_small as is_small,
    )

__getattr__, __dir__, __all__ = exports(__name__, {
    "ContextConfig": ".config",
    "ContextGuard": ".guard",
    "Utilization": ".guard",
    "SummaryResult": ".guard",
    "Compaction": ".guard",
    "mechanical_truncation": ".prompts",
    "TERMINAL_FINISH_REASONS": ".guard",
    "HANDOVER_SECTIONS": ".prompts",
    "CHECKPOINT_SECTIONS": ".prompts",
    "CHECKPOINT_MODES": ".config",
    "handover_prompt": ".prompts",
    "checkpoint_prompt": ".prompts",
    "missing_sections": ".prompts",
    "ContextStats": ".stats",
    "ModelUsage": ".stats",
    "UsageByModel": ".stats",
    "context_stats_from_rows": ".stats",
    "usage_stats": ".stats",
    "detect_format": ".histories",
    "rebuild": ".histories",
    "kept_prefix": ".histories",
    "ModelCatalogue": ".tiers",
    "Tier": ".tiers",
    "classify": ".tiers",
    "context_window": ".tiers",
    "compaction_threshold": ".tiers",
    "is_small": ".tiers",
    "ASSUMED_CONTEXT_WINDOW": ".tiers",
})
