"""The statistics pass of ``tripwire corpus stats`` on interchange files: sessions/s and MB/s
per core, serial, and the speed-up of ``-j 2`` (ratio of medians, alternating rounds of one run).

The input is ../shared/corpus converted to interchange files, one per session (``tripwire
convert``, split by session), so the figures are of the interchange reader and the engine, not
of the harness formats' readers. The serial pass is timed in CPU seconds of the process
(``time.process_time``): a per-core figure that other work on a shared machine does not
inflate. The scaling ratio runs on four copies of it (91 MB, 1,964 files), so that starting
the worker processes is not most of what is measured, and prints the load it ran under.

    python -m pytest benchmarks/test_bench_corpus.py --benchmark-only -s
"""

from __future__ import annotations

import io
import json
import os
import resource
import shutil
import statistics
import time
from collections import defaultdict
from pathlib import Path

import pytest

from tripwire.cli import main
from tripwire.corpus import measure_paths

SHARED_CORPUS = Path(__file__).resolve().parents[1].parent / "shared" / "corpus"


@pytest.fixture(scope="module")
def interchange4(interchange: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Four copies of the converted corpus, in four folders."""
    out = tmp_path_factory.mktemp("interchange4")
    for k in range(4):
        shutil.copytree(interchange, out / f"copy{k}")
    return out


@pytest.fixture(scope="module")
def interchange(tmp_path_factory: pytest.TempPathFactory) -> Path:
    if not SHARED_CORPUS.exists():
        pytest.skip(f"{SHARED_CORPUS} is missing: the corpus benchmark needs ../shared")
    out = tmp_path_factory.mktemp("interchange")
    sessions: dict[str, list[str]] = defaultdict(list)
    for corpus in sorted(p for p in SHARED_CORPUS.iterdir() if p.is_dir()):
        text = io.StringIO()
        assert main(["convert", str(corpus)], out=text, err=io.StringIO()) == 0
        for line in text.getvalue().splitlines():
            sessions[f"{corpus.name}/{json.loads(line)['session']}"].append(line)
    for i, lines in enumerate(sessions.values()):
        (out / f"{i:04d}.jsonl").write_text("\n".join(lines) + "\n", encoding="utf-8")
    return out


def _size(directory: Path) -> int:
    return sum(p.stat().st_size for p in directory.rglob("*.jsonl"))


def _record(benchmark, directory: Path, sessions: int, cores: int) -> None:
    seconds = benchmark.stats.stats.median
    mb = _size(directory) / 1e6
    benchmark.extra_info.update({
        "sessions": sessions, "megabytes": round(mb, 2),
        "sessions_per_s": round(sessions / seconds, 1),
        "mb_per_s_per_core": round(mb / seconds / cores, 2)})
    print(f"\n{benchmark.name}: {sessions / seconds:.0f} sessions/s, "
          f"{mb / seconds / cores:.2f} MB/s per core ({mb:.1f} MB, {cores} core(s))")


@pytest.mark.benchmark(group="corpus", timer=time.process_time)
def test_stats_pass_serial(benchmark, interchange: Path) -> None:
    results = benchmark.pedantic(measure_paths, args=([str(interchange)],), rounds=5,
                                 warmup_rounds=1)
    _record(benchmark, interchange, len(results), 1)


@pytest.mark.benchmark(group="corpus")
def test_stats_pass_two_processes(benchmark, interchange: Path) -> None:
    results = benchmark.pedantic(measure_paths, args=([str(interchange)],),
                                 kwargs={"jobs": 2}, rounds=3, warmup_rounds=1)
    _record(benchmark, interchange, len(results), 2)


def _cpu() -> float:
    """CPU seconds of this process and of its reaped children (the -j workers)."""
    me, children = resource.getrusage(resource.RUSAGE_SELF), \
        resource.getrusage(resource.RUSAGE_CHILDREN)
    return me.ru_utime + me.ru_stime + children.ru_utime + children.ru_stime


def _burn(n: int) -> int:
    total = 0
    for i in range(n):
        total += i
    return total


def machine_ceiling(n: int = 10_000_000) -> float:
    """What two processes of pure CPU work gain over one on this machine now (2.0 on two
    idle cores; other jobs lower it): the most ``-j 2`` could show."""
    from concurrent.futures import ProcessPoolExecutor

    start = time.perf_counter()
    _burn(n), _burn(n)
    one = time.perf_counter() - start
    with ProcessPoolExecutor(max_workers=2) as pool:
        start = time.perf_counter()
        list(pool.map(_burn, [n, n]))
        two = time.perf_counter() - start
    return one / two


def test_two_process_scaling_ratio(interchange4: Path, record_property) -> None:
    """serial time / -j 2 time, medians of alternating rounds (2.0 would be linear), and the
    CPU seconds each spent: MB per CPU second is the per-core rate whatever else the machine
    is running."""
    interchange = interchange4
    mb = _size(interchange) / 1e6
    serial, parallel, serial_cpu, parallel_cpu = [], [], [], []
    load = os.getloadavg()[0]
    for _ in range(3):
        cpu, start = _cpu(), time.perf_counter()
        measure_paths([str(interchange)])
        serial.append(time.perf_counter() - start)
        serial_cpu.append(_cpu() - cpu)
        cpu, start = _cpu(), time.perf_counter()
        measure_paths([str(interchange)], jobs=2)
        parallel.append(time.perf_counter() - start)
        parallel_cpu.append(_cpu() - cpu)
    ratio = statistics.median(serial) / statistics.median(parallel)
    ceiling = machine_ceiling()
    record_property("scaling_ratio_j2", ratio)
    record_property("machine_ceiling_j2", ceiling)
    print(f"\n-j 2 scaling: {ratio:.2f}x (serial {statistics.median(serial):.2f} s, "
          f"-j 2 {statistics.median(parallel):.2f} s); per CPU second: serial "
          f"{mb / statistics.median(serial_cpu):.1f} MB/s, -j 2 "
          f"{mb / statistics.median(parallel_cpu):.1f} MB/s ({mb:.0f} MB; load {load:.1f} "
          f"before, {os.getloadavg()[0]:.1f} after, on {os.cpu_count()} cores; two processes "
          f"of pure CPU work gain {ceiling:.2f}x on this machine now)")
