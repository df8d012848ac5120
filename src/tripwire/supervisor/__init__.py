"""The progress supervisor: a host-supplied judge of whether a task is advancing."""

from __future__ import annotations

from typing import TYPE_CHECKING

from ..base.lazy import exports

if TYPE_CHECKING:  # what the names are, for type checkers and readers
    from ..errors import (
        MalformedDecision as MalformedDecision,
    )
    from ..errors import (
        TaskEnded as TaskEnded,
    )
    from .decision import (
        Check as Check,
    )
    from .decision import (
        ReviewUsage as ReviewUsage,
    )
    from .decision import (
        SupervisorDecision as SupervisorDecision,
    )
    from .decision import (
        parse_decision as parse_decision,
    )
    from .model import (
        Completion as Completion,
    )
    from .model import (
        ModelSupervisor as ModelSupervisor,
    )
    from .review import (
        KeyRecord as KeyRecord,
    )
    from .review import (
        PriorGuidance as PriorGuidance,
    )
    from .review import (
        Review as Review,
    )
    from .review import (
        ReviewedCall as ReviewedCall,
    )
    from .review import (
        error_signature as error_signature,
    )
    from .schema import (
        CHECK_OUTCOMES as CHECK_OUTCOMES,
    )
    from .schema import (
        CHECK_SCHEMA as CHECK_SCHEMA,
    )
    from .schema import (
        DECISION_SCHEMA as DECISION_SCHEMA,
    )
    from .schema import (
        DECISIONS as DECISIONS,
    )
    from .schema import (
        decision_schema_json as decision_schema_json,
    )
    from .schema import validate_decision as validate_decision
    from .supervision import (
        Supervision as Supervision,
    )
    from .supervision import (
        SupervisorConfig as SupervisorConfig,
    )
    from .triggers import (
        TRIGGERS as TRIGGERS,
    )

__getattr__, __dir__, __all__ = exports(__name__, {
    "Check": ".decision",
    "SupervisorDecision": ".decision",
    "ReviewUsage": ".decision",
    "Review": ".review",
    "ReviewedCall": ".review",
    "KeyRecord": ".review",
    "PriorGuidance": ".review",
    "SupervisorConfig": ".supervision",
    "Supervision": ".supervision",
    "ModelSupervisor": ".model",
    "Completion": ".model",
    "DECISION_SCHEMA": ".schema",
    "CHECK_SCHEMA": ".schema",
    "DECISIONS": ".schema",
    "CHECK_OUTCOMES": ".schema",
    "decision_schema_json": ".schema",
    "parse_decision": ".decision",
    "error_signature": ".review",
    "TRIGGERS": ".triggers",
    "TaskEnded": "..errors",
    "MalformedDecision": "..errors",
    "validate_decision": ".schema",
})
