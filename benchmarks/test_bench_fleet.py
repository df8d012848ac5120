"""Fleet scale: 100,000 sessions in one process, their memory, on_call through the fleet.

Batch ingest is in test_bench_batch.py: this module's 100,000 sessions stay alive until its
last test, and every garbage collection in another benchmark would walk them."""

from __future__ import annotations

import gc
import json
import os
import random
import time
import tracemalloc

import pytest
import workload

from tripwire import GuardrailsConfig
from tripwire.fleet.fleet import Fleet

SESSIONS = 100_000


def rss_bytes() -> int:
    """The process's resident set (/proc/self/statm: pages; Linux), allocator overhead in."""
    with open("/proc/self/statm") as statm:
        return int(statm.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


def build(fleet: Fleet, ids: list[str], traffic: list[list[tuple[str, str]]]) -> None:
    """Each session's one turn: six reads and their results, a usage report."""
    for sid, turn in zip(ids, traffic, strict=True):
        g = fleet.session(sid)
        g.start_turn()
        for args, payload in turn:
            g.on_call("read_file", args)
            g.on_result("read_file", payload=payload)
        g.on_usage(model="claude-sonnet-4-5", input_tokens=5000, cost_usd=0.01)
        g.end_turn()


def new_fleet() -> Fleet:
    return Fleet(GuardrailsConfig(mode="enforce", unattended=True), implementation="native")


@pytest.fixture(scope="module")
def big_fleet():
    """100,000 sessions, each with a turn of realistic traffic, and their memory cost: the
    resident set's growth (the honest figure: the allocators' overhead and the arenas' slack in)
    over the build, untraced, then the Python heap's (tracemalloc) over a second build of the
    same sessions, discarded, and the native state (Watchdog.state_bytes)."""
    ids = [f"s-{i}" for i in range(SESSIONS)]
    # the harness's own data (its message history holds these strings anyway): made untraced
    traffic = [[(json.dumps({"path": f"src/pkg{i % 40}/m{j}.py"}), f"contents {i} {j}")
                for j in range(6)] for i in range(SESSIONS)]
    gc.collect()
    rss = rss_bytes()
    fleet = new_fleet()
    build(fleet, ids, traffic)
    gc.collect()
    rss_per_session = (rss_bytes() - rss) / SESSIONS
    traced = new_fleet()
    tracemalloc.start()
    before = tracemalloc.get_traced_memory()[0]
    build(traced, ids, traffic)
    gc.collect()
    python_bytes = (tracemalloc.get_traced_memory()[0] - before) / SESSIONS
    tracemalloc.stop()
    del traced
    gc.collect()
    native_bytes = sum(fleet.session(ids[i]).watchdog.state_bytes for i in range(1000)) / 1000
    return fleet, ids, python_bytes, native_bytes, rss_per_session


def fleet_rows(ids: list[str], bursty: bool, seed: int = 5) -> list[tuple[str, str, str]]:
    """4,000 calls of the engine mix spread over the fleet. Not bursty: each call goes to
    another session (every call finds its session cold in cache). Bursty: a model response
    asks for 1-4 tool calls at once (parallel tool use), so a session's calls come in runs."""
    calls = workload.call_mix()
    rng = random.Random(seed)
    rows, i = [], 0
    while i < len(calls):
        sid = ids[rng.randrange(len(ids))] if bursty else ids[(i * 7919 + seed) % len(ids)]
        for name, args in calls[i:i + (rng.choice((1, 1, 2, 3, 4)) if bursty else 1)]:
            rows.append((sid, name, args))
        i = len(rows)
    return rows


def per_call_percentiles(fleet: Fleet, ids: list[str], bursty: bool) -> dict[str, int]:
    """Each call timed alone (perf_counter_ns around it, its ~60 ns included), five passes over
    other sessions each (the benchmark's rounds repeat theirs, which then stay partly cached)."""
    on_call, clock = fleet.on_call, time.perf_counter_ns
    times = []
    for seed in range(101, 106):
        for sid, name, args in fleet_rows(ids, bursty, seed):
            start = clock()
            on_call(sid, name, args)
            times.append(clock() - start)
    times.sort()
    return {f"p{q}_ns": times[len(times) * q // 100] for q in (50, 90, 99)}


@pytest.mark.benchmark(group="fleet")
@pytest.mark.parametrize("traffic", ["every-call-another-session", "bursts-of-parallel-calls"])
def test_fleet_memory_and_on_call(benchmark, big_fleet, traffic: str) -> None:
    """fleet.on_call across 100,000 sessions: the round's mean per call, and each call's own
    time (its median is the figure the target names)."""
    fleet, ids, python_bytes, native_bytes, rss_bytes_ = big_fleet
    benchmark.extra_info["sessions"] = len(fleet)
    benchmark.extra_info["python_bytes_per_session"] = round(python_bytes)
    benchmark.extra_info["native_bytes_per_session"] = round(native_bytes)
    benchmark.extra_info["bytes_per_session"] = round(python_bytes + native_bytes)
    benchmark.extra_info["rss_bytes_per_session"] = round(rss_bytes_)
    rows = fleet_rows(ids, traffic.startswith("bursts"))
    on_call = fleet.on_call
    benchmark.extra_info["operations_per_round"] = len(rows)

    def round_() -> None:
        for sid, name, args in rows:
            on_call(sid, name, args)

    benchmark(round_)
    percentiles = per_call_percentiles(fleet, ids, traffic.startswith("bursts"))
    benchmark.extra_info.update(percentiles)
    print(f"\n{len(fleet):,} sessions: {python_bytes:.0f} B Python + {native_bytes:.0f} B native "
          f"= {python_bytes + native_bytes:.0f} B per session (resident set: {rss_bytes_:.0f} B); "
          f"{traffic}: per call "
          + ", ".join(f"{k[:-3]} {v:,} ns" for k, v in percentiles.items()))
