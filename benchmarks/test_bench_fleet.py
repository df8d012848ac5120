"""Fleet scale: 100,000 sessions in one process, their memory, on_call through the fleet.

Batch ingest is in test_bench_batch.py: this module's 100,000 sessions stay alive until its
last test, and every garbage collection in another benchmark would walk them."""

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
