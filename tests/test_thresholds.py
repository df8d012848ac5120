"""The threshold predicates exist once per engine (native/thresholds.h, tripwire/thresholds.py)
and agree; the cost ceiling trips exactly when the predicate says a charge does."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from tripwire.base import thresholds
from tripwire.engine import reference as _reference
from tripwire.policy.ceiling import CostCeiling

native = pytest.importorskip("tripwire._native", reason="the native core is not built")

NANO = st.integers(0, 1 << 62)
SMALL = st.integers(0, 50)  # around the bounds, where >= matters


@given(spent=SMALL, baseline=st.none() | SMALL, max_turn=SMALL, ceiling=SMALL)
def test_cost_trips_agrees_across_engines(spent, baseline, max_turn, ceiling) -> None:
    want = thresholds.cost_trips(spent, baseline, max_turn, ceiling)
    assert native.cost_trips(spent, baseline, max_turn, ceiling) is want
    assert _reference.cost_trips(spent, baseline, max_turn, ceiling) is want


@given(spent=NANO, baseline=st.none() | NANO, max_turn=NANO, ceiling=NANO)
def test_cost_trips_agrees_on_any_count(spent, baseline, max_turn, ceiling) -> None:
    assert native.cost_trips(spent, baseline, max_turn, ceiling) is \
        thresholds.cost_trips(spent, baseline, max_turn, ceiling)


@given(tokens=SMALL, compact_at=SMALL, pending=st.booleans(), cut_tokens=SMALL,
       cut=st.booleans())
def test_context_crosses_agrees_across_engines(tokens, compact_at, pending, cut_tokens,
                                               cut) -> None:
    want = thresholds.context_crosses(tokens, compact_at, pending, cut_tokens, cut)
    assert native.context_crosses(tokens, compact_at, pending, cut_tokens, cut) is want
    assert want == ((tokens >= compact_at and not pending) or (tokens >= cut_tokens and not cut))


@given(before=SMALL, charge=SMALL, max_turn=SMALL, max_session=SMALL, in_turn=st.booleans())
def test_the_cost_ceiling_trips_when_the_predicate_says(before, charge, max_turn, max_session,
                                                        in_turn) -> None:
    cost = CostCeiling(max_turn / 1e9, max_session / 1e9, escalate_after=10)
    cost.own = before  # spent before this charge
    if in_turn:
        cost.start_turn()
    baseline, ceiling = cost.baseline, cost.ceiling
    trips = thresholds.cost_trips(before + charge, baseline, max_turn, ceiling)
    assert (cost.add(charge) is not None) is trips
