"""The progress supervisor: a host-supplied judge of whether a task is advancing."""

from __future__ import annotations

from typing import TYPE_CHECKING

from ..base.lazy import exports

if TYPE_CHECKING:  # what the names are, for type checkers and readers
    from .schema import validate_decision as validate_decision
    from .supervision import (
        CHECK_OUTCOMES as CHECK_OUTCOMES,
    )
    from .supervision import (
        CHECK_SCHEMA as CHECK_SCHEMA,
    )
    from .supervision import (
        DECISION_SCHEMA as DECISION_SCHEMA,
    )
    from .supervision import (
        DECISIONS as DECISIONS,
    )
    from .supervision import (
        TRIGGERS as TRIGGERS,
    )
    from .supervision import (
        Check as Check,
    )
    from .supervision import (
        Completion as Completion,
    )
    from .supervision import (
        KeyRecord as KeyRecord,
    )
    from .supervision import (
        MalformedDecision as MalformedDecision,
    )
    from .supervision import (
        ModelSupervisor as ModelSupervisor,
    )
    from .supervision import (
        PriorGuidance as PriorGuidance,
    )
    from .supervision import (
        Review as Review,
    )
    from .supervision import (
        ReviewedCall as ReviewedCall,
    )
    from .supervision import (
        ReviewUsage as ReviewUsage,
    )
    from .supervision import (
        Supervision as Supervision,
    )
    from .supervision import (
        SupervisorConfig as SupervisorConfig,
    )
    from .supervision import (
        SupervisorDecision as SupervisorDecision,
    )
    from .supervision import (
        TaskEnded as TaskEnded,
    )
    from .supervision import (
        decision_schema_json as decision_schema_json,
    )
    from .supervision import (
        error_signature as error_signature,
    )
    from .supervision import (
        parse_decision as parse_decision,
    )

__getattr__, __dir__, __all__ = exports(__name__, {
    "Check": ".supervision",
    "SupervisorDecision": ".supervision",
    "ReviewUsage": ".supervision",
    "Review": ".supervision",
    "ReviewedCall": ".supervision",
    "KeyRecord": ".supervision",
    "PriorGuidance": ".supervision",
    "SupervisorConfig": ".supervision",
    "Supervision": ".supervision",
    "ModelSupervisor": ".supervision",
    "Completion": ".supervision",
    "DECISION_SCHEMA": ".supervision",
    "CHECK_SCHEMA": ".supervision",
    "DECISIONS": ".supervision",
    "CHECK_OUTCOMES": ".supervision",
    "decision_schema_json": ".supervision",
    "parse_decision": ".supervision",
    "error_signature": ".supervision",
    "TRIGGERS": ".supervision",
    "TaskEnded": ".supervision",
    "MalformedDecision": ".supervision",
    "validate_decision": ".schema",
})
