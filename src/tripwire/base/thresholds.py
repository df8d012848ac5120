"""The threshold predicates of the cost ceiling (SPEC §4) and the context guard (SPEC §6).

The Python twins of ``native/thresholds.h``, which batch ingest checks without the GIL: the cost
ceiling, the context guard and the reference batch use these, and ``tests/test_thresholds.py``
drives both engines' copies with the same numbers.
"""

from __future__ import annotations

__all__ = ["turn_bound_reached", "session_bound_reached", "cost_trips", "context_crosses"]


def turn_bound_reached(turn_spent: int, max_turn: int) -> bool:
    """The per-turn bound (0: none) is reached: ``>=`` trips."""
    return bool(max_turn) and turn_spent >= max_turn


def session_bound_reached(spent: int, ceiling: int) -> bool:
    """The per-session ceiling (0: none) is reached."""
    return bool(ceiling) and spent >= ceiling


def cost_trips(spent: int, baseline: int | None, max_turn: int, ceiling: int) -> bool:
    """Spend of ``spent`` nano-dollars trips a bound (the per-turn one only once a turn has
    started, ``baseline`` not None)."""
    return (baseline is not None and turn_bound_reached(spent - baseline, max_turn)) \
        or session_bound_reached(spent, ceiling)


def context_crosses(tokens: int, compact_at: int, pending: bool, cut_tokens: int,
                    cut: bool) -> bool:
    """``tokens`` reaches a limit not reported yet: compaction (unless pending) or the cut
    (unless this turn was cut already)."""
    return (tokens >= compact_at and not pending) or (tokens >= cut_tokens and not cut)
