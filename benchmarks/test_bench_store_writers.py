"""Appends per second with N concurrent writer processes, on SQLite and on PostgreSQL (SPEC §5):
every append is one durable transaction (SQLite: BEGIN IMMEDIATE + fsync; PostgreSQL: the
store's advisory lock + synchronous_commit), so writers queue on one lock per store and the
figure is bounded by commit latency; more writers share it (PostgreSQL groups their commits).

    .ci/with-postgres python -m pytest benchmarks/test_bench_store_writers.py -q -s

Each round: N spawned processes, lined up on a barrier, each append ROWS rows to 4 sessions;
the round's time runs from the barrier to the last process's end. PostgreSQL is skipped (with a
message) without TRIPWIRE_TEST_POSTGRES.
"""

from __future__ import annotations

import multiprocessing
import os
import sys
import time
import uuid
from pathlib import Path
from typing import Any

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))
from store_backends import postgres_url

from tripwire.durability.open import open_store

ROWS = 100  # per writer per round


def _writer(location: str, worker: int, barrier: Any, done: Any) -> None:
    store = open_store(location, timeout=60)
    store.check()
    barrier.wait()
    for i in range(ROWS):
        store.append(f"s-{(worker + i) % 4}", "spend", {"worker": worker, "i": i, "usd": 0.01})
    done.put(time.perf_counter())
    store.close()


def _round(location: str, writers: int) -> float:
    """Seconds from the barrier to the last writer's last commit."""
    spawn = multiprocessing.get_context("spawn")
    barrier = spawn.Barrier(writers + 1, timeout=120)
    done = spawn.Queue()
    procs = [spawn.Process(target=_writer, args=(location, w, barrier, done))
             for w in range(writers)]
    for p in procs:
        p.start()
    barrier.wait()
    start = time.perf_counter()
    ends = [done.get(timeout=300) for _ in procs]
    for p in procs:
        p.join(timeout=60)
    assert [p.exitcode for p in procs] == [0] * writers
    return max(ends) - start


@pytest.mark.benchmark(group="store_writers")
@pytest.mark.parametrize("writers", [1, 8])
@pytest.mark.parametrize("backend", ["sqlite", "postgres"])
def test_appends_per_second(benchmark, tmp_path: Path, backend: str, writers: int) -> None:
    if backend == "sqlite":
        location = str(tmp_path / "w.db")
    else:
        location = f"{postgres_url()}&schema=bench_{uuid.uuid4().hex[:12]}"
    open_store(location).check().close()  # tables exist before the clock starts
    seconds = benchmark.pedantic(_round, args=(location, writers), rounds=3, iterations=1)
    rate = writers * ROWS / benchmark.stats.stats.median
    benchmark.extra_info.update(writers=writers, rows_per_round=writers * ROWS,
                                appends_per_s=round(rate))
    with open_store(location) as store:
        reports = store.verify()
        assert all(r.intact for r in reports), reports
        assert sum(r.rows for r in reports) == 3 * writers * ROWS
    print(f"\n{backend}: {writers} writer(s): {rate:,.0f} appends/s "
          f"(last round {seconds:.2f} s for {writers * ROWS} appends; cpus {os.cpu_count()})")
