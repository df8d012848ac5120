"""Batch ingest: many sessions' events through Fleet.observe_many, against the same events one
at a time through the fleet (the baseline), and the pure-Python engine's batch."""

from __future__ import annotations

import pytest
import workload

from tripwire import GuardrailsConfig
from tripwire.fleet.fleet import Fleet


def fresh_fleet(impl: str, events: list[tuple]) -> Fleet:
    """A fleet with the batch's sessions created (creating them is not ingest)."""
    fleet = Fleet(GuardrailsConfig(mode="enforce", unattended=True), implementation=impl)
    for sid in {e[0] for e in events}:
        fleet.session(sid)
    return fleet


def one_at_a_time(fleet: Fleet, events: list[tuple]) -> None:
    """The baseline: the same events through the fleet's one-event methods."""
    session = fleet.session
    for sid, kind, *f in events:
        g = session(sid)
        if kind == "call":
            g.on_call(f[0], f[1])
        elif kind == "result":
            g.on_result(f[0], payload=f[1])
        elif kind == "text":
            g.on_text(f[0])
        elif kind == "usage":
            g.on_usage(model=f[0], input_tokens=f[1], output_tokens=f[2], cost_usd=f[3])
        elif kind == "turn_start":
            g.start_turn()
        else:
            g.end_turn()


BATCH_CASES = {  # (engine, with usage and turns, how, events, sessions)
    "native-tools-batch": ("native", False, "batch", 200_000, 1000),
    "native-tools-one-at-a-time": ("native", False, "single", 200_000, 1000),
    "native-tools-batch-200-sessions": ("native", False, "batch", 200_000, 200),
    "python-tools-batch": ("python", False, "batch", 20_000, 1000),
    "native-turns-batch": ("native", True, "batch", 200_000, 1000),
    "native-turns-one-at-a-time": ("native", True, "single", 200_000, 1000),
}


@pytest.mark.benchmark(group="batch")
@pytest.mark.parametrize("case", list(BATCH_CASES))
def test_batch_ingest(benchmark, case: str) -> None:
    """Events per second through ``Fleet.observe_many`` (or one at a time, the baseline):
    tool traffic (calls, results, agent text) and whole turns (usage per model call, which the
    batch observes too, and a turn boundary every 12 steps, which it hands to Python)."""
    impl, usage, how, n, sessions = BATCH_CASES[case]
    events = workload.fleet_traffic(sessions, n, usage=usage)
    run = (lambda fleet: fleet.observe_many(events)) if how == "batch" else \
        (lambda fleet: one_at_a_time(fleet, events))
    benchmark.extra_info["operations_per_round"] = len(events)
    benchmark.pedantic(run, setup=lambda: ((fresh_fleet(impl, events),), {}), rounds=7,
                       iterations=1)
    seconds = benchmark.stats.stats.median
    benchmark.extra_info["million_events_per_second"] = round(len(events) / seconds / 1e6, 3)
    print(f"\n{case}: {len(events) / seconds / 1e6:.2f} million events/s")
