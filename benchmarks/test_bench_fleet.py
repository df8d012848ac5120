"""Fleet scale: 100,000 sessions in one process, on_call through the fleet, batch ingest."""

from __future__ import annotations

import gc
import json
import tracemalloc

import pytest
import workload

from tripwire import GuardrailsConfig
from tripwire.fleet import Fleet

SESSIONS = 100_000


@pytest.fixture(scope="module")
def big_fleet():
    """100,000 sessions, each with a turn of realistic traffic, and their memory cost."""
    fleet = Fleet(GuardrailsConfig(mode="enforce", unattended=True), implementation="native")
    ids = [f"s-{i}" for i in range(SESSIONS)]
    # the harness's own data (its message history holds these strings anyway): made untraced
    traffic = [[(json.dumps({"path": f"src/pkg{i % 40}/m{j}.py"}), f"contents {i} {j}")
                for j in range(6)] for i in range(SESSIONS)]
    gc.collect()
    tracemalloc.start()
    before = tracemalloc.get_traced_memory()[0]
    for sid, turn in zip(ids, traffic, strict=True):
        g = fleet.session(sid)
        g.start_turn()
        for args, payload in turn:
            g.on_call("read_file", args)
            g.on_result("read_file", payload=payload)
        g.on_usage(model="claude-sonnet-4-5", input_tokens=5000, cost_usd=0.01)
        g.end_turn()
    gc.collect()
    python_bytes = (tracemalloc.get_traced_memory()[0] - before) / SESSIONS
    tracemalloc.stop()
    native_bytes = sum(fleet.session(ids[i]).watchdog.state_bytes for i in range(1000)) / 1000
    return fleet, ids, python_bytes, native_bytes


@pytest.mark.benchmark(group="fleet")
def test_fleet_memory_and_on_call(benchmark, big_fleet) -> None:
    fleet, ids, python_bytes, native_bytes = big_fleet
    benchmark.extra_info["sessions"] = len(fleet)
    benchmark.extra_info["python_bytes_per_session"] = round(python_bytes)
    benchmark.extra_info["native_bytes_per_session"] = round(native_bytes)
    benchmark.extra_info["bytes_per_session"] = round(python_bytes + native_bytes)
    calls = workload.call_mix()
    rows = [(ids[(i * 7919) % len(ids)], name, args) for i, (name, args) in enumerate(calls)]
    on_call = fleet.on_call
    benchmark.extra_info["operations_per_round"] = len(rows)

    def round_() -> None:
        for sid, name, args in rows:
            on_call(sid, name, args)

    benchmark(round_)
    print(f"\n{len(fleet):,} sessions: {python_bytes:.0f} B Python + {native_bytes:.0f} B native "
          f"= {python_bytes + native_bytes:.0f} B per session")


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


BATCH_CASES = {  # (engine, traffic, how): 1,000 sessions' steps
    "native-tools-batch": ("native", False, "batch", 200_000),
    "native-tools-one-at-a-time": ("native", False, "single", 200_000),
    "python-tools-batch": ("python", False, "batch", 20_000),
    "native-turns-batch": ("native", True, "batch", 200_000),
    "native-turns-one-at-a-time": ("native", True, "single", 200_000),
}


@pytest.mark.benchmark(group="batch")
@pytest.mark.parametrize("case", list(BATCH_CASES))
def test_batch_ingest(benchmark, case: str) -> None:
    """Events per second through ``Fleet.observe_many`` (or one at a time, the baseline):
    tool traffic (calls, results, agent text) and whole turns (with usage per model call and
    turn boundaries, which the batch hands to Python)."""
    impl, usage, how, n = BATCH_CASES[case]
    events = workload.fleet_traffic(1000, n, usage=usage)
    run = (lambda fleet: fleet.observe_many(events)) if how == "batch" else \
        (lambda fleet: one_at_a_time(fleet, events))
    benchmark.extra_info["operations_per_round"] = len(events)
    benchmark.pedantic(run, setup=lambda: ((fresh_fleet(impl, events),), {}), rounds=7,
                       iterations=1)
    seconds = benchmark.stats.stats.median
    benchmark.extra_info["million_events_per_second"] = round(len(events) / seconds / 1e6, 3)
    print(f"\n{case}: {len(events) / seconds / 1e6:.2f} million events/s")
