"""The event model and its interchange format, other harnesses' transcripts as events, prices
for usage without a reported cost."""

from __future__ import annotations

from typing import TYPE_CHECKING

from ..base.lazy import exports

if TYPE_CHECKING:  # what the names are, for type checkers and readers
    from .events import (
        EVENT_TYPES as EVENT_TYPES,
    )
    from .events import (
        BudgetRaise as BudgetRaise,
    )
    from .events import (
        Call as Call,
    )
    from .events import (
        CheckIn as CheckIn,
    )
    from .events import (
        Compaction as Compaction,
    )
    from .events import (
        Event as Event,
    )
    from .events import (
        Reset as Reset,
    )
    from .events import (
        Result as Result,
    )
    from .events import (
        Retry as Retry,
    )
    from .events import (
        StopAttempt as StopAttempt,
    )
    from .events import (
        TaskEnd as TaskEnd,
    )
    from .events import (
        TaskStart as TaskStart,
    )
    from .events import (
        Text as Text,
    )
    from .events import (
        TurnEnd as TurnEnd,
    )
    from .events import (
        TurnStart as TurnStart,
    )
    from .events import (
        Usage as Usage,
    )
    from .events import (
        decoded_lines as decoded_lines,
    )
    from .events import (
        event_record as event_record,
    )
    from .events import (
        parse_event as parse_event,
    )
    from .events import (
        read_events as read_events,
    )
    from .prices import PriceCatalogue as PriceCatalogue
    from .prices import Priced as Priced
    from .prices import estimate as estimate

__getattr__, __dir__, __all__ = exports(__name__, {
    "Call": ".events",
    "Result": ".events",
    "Text": ".events",
    "Usage": ".events",
    "TurnStart": ".events",
    "TurnEnd": ".events",
    "Reset": ".events",
    "TaskStart": ".events",
    "TaskEnd": ".events",
    "StopAttempt": ".events",
    "Retry": ".events",
    "Compaction": ".events",
    "BudgetRaise": ".events",
    "CheckIn": ".events",
    "Event": ".events",
    "parse_event": ".events",
    "event_record": ".events",
    "read_events": ".events",
    "decoded_lines": ".events",
    "EVENT_TYPES": ".events",
    "Priced": ".prices",
    "estimate": ".prices",
    "PriceCatalogue": ".prices",
})
