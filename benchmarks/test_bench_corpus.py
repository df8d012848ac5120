"""The statistics pass of ``tripwire corpus stats`` on interchange files: sessions/s and MB/s
per core, serial, and how ``-j 2`` scales on this machine.

The input is ../shared/corpus converted to interchange files, one per session (``tripwire
convert``, split by session), so the figures are of the interchange reader and the engine, not
of the harness formats' readers. The serial pass is timed in CPU seconds of the process
(``time.process_time``): a per-core figure that other work on a shared machine inflates less
than wall time.

The scaling test runs on several copies of it (``TRIPWIRE_BENCH_COPIES``, default 4: 92 MB,
1,964 files), so that starting the worker processes is not most of what is measured, in
``TRIPWIRE_BENCH_ROUNDS`` rounds (default 5), each timing serial, ``-j 2`` and the machine's
two-process ceiling (pure CPU work in one process twice, then in two at once) back to back, so
the ceiling is of the same minute. It prints wall times, the speed-up, the ceiling, the speed-up
as a fraction of the ceiling, CPU seconds per MB of each (parent and workers), and the load.
The instruction test counts instructions (valgrind) of serial and ``-j 2``: the one figure
that no other load on the machine changes. Everything, on an idle machine:

    python -m pytest benchmarks/test_bench_corpus.py -s -p no:randomly
"""

from __future__ import annotations

import io
import json
import os
import resource
import shutil
import statistics
import sys
import time
from collections import defaultdict
from pathlib import Path
from typing import Any

import pytest

from tripwire.cli.main import main
from tripwire.corpus import measure_paths

SHARED_CORPUS = Path(__file__).resolve().parents[1].parent / "shared" / "corpus"


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


def _cpu() -> tuple[float, float]:
    """CPU seconds (user + system) of this process and of its reaped children (the -j
    workers, once their pool has shut down)."""
    me, children = resource.getrusage(resource.RUSAGE_SELF), \
        resource.getrusage(resource.RUSAGE_CHILDREN)
    return me.ru_utime + me.ru_stime, children.ru_utime + children.ru_stime


def _burn(n: int) -> int:
    total = 0
    for i in range(n):
        total += i
    return total


class Ceiling:
    """What two processes of pure CPU work gain over one on this machine now: 2.0 on two idle
    cores, less while other jobs run (the most ``-j 2`` could show). The two processes are
    forked and wait for a go outside the timing; no thread is left running in this process (a
    threaded parent would make ``-j 2`` fall back to the default start method). The CPU time
    of each run is kept too: two at once cost more CPU per unit of work than one alone when
    the cores share caches or a host core."""

    def __init__(self, n: int = 5_000_000) -> None:
        self.n = n

    def measure(self) -> tuple[float, float, float]:
        """(one process's wall time for two units, two processes' wall time for them, CPU
        seconds per unit in two processes over in one)."""
        import multiprocessing

        cpu, start = time.process_time(), time.perf_counter()
        _burn(self.n), _burn(self.n)
        one, one_cpu = time.perf_counter() - start, time.process_time() - cpu
        context = multiprocessing.get_context(
            "fork" if "fork" in multiprocessing.get_all_start_methods() else None)
        go = context.Event()
        pipes = [context.Pipe(duplex=False) for _ in range(2)]
        workers = [context.Process(target=_timed_burn, args=(self.n, go, send))
                   for _, send in pipes]
        for w in workers:
            w.start()
        start = time.perf_counter()
        go.set()
        two_cpu = sum(receive.recv() for receive, _ in pipes)
        two = time.perf_counter() - start
        for w in workers:
            w.join()
        return one, two, two_cpu / one_cpu


def _timed_burn(n: int, go: Any, send: Any) -> None:
    go.wait()
    cpu = time.process_time()
    _burn(n)
    send.send(time.process_time() - cpu)


def machine_ceiling() -> float:
    """The two-process ceiling once (wall time of one over two)."""
    one, two, _ = Ceiling().measure()
    return one / two


@pytest.fixture(scope="module")
def copies(interchange: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """``TRIPWIRE_BENCH_COPIES`` copies of the converted corpus, in as many folders."""
    out = tmp_path_factory.mktemp("copies")
    for k in range(int(os.environ.get("TRIPWIRE_BENCH_COPIES", "4"))):
        shutil.copytree(interchange, out / f"copy{k}")
    return out


def test_two_process_scaling_ratio(copies: Path, record_property) -> None:
    """serial time / -j 2 time, medians of rounds that alternate the two with the machine's
    two-process ceiling (2.0 would be linear on two idle cores), and the CPU seconds each spent
    per MB: -j 2's parent (listing the files, merging the columns) and its workers apart."""
    mb = _size(copies) / 1e6
    paths = [str(copies)]
    rounds = int(os.environ.get("TRIPWIRE_BENCH_ROUNDS", "5"))
    sessions = len(measure_paths(paths))  # warm: imports, page cache
    measure_paths(paths, jobs=2)
    load = os.getloadavg()
    ceiling = Ceiling()
    rows: dict[str, list[float]] = defaultdict(list)
    for k in range(rounds):
        for what in ("serial", "j2", "ceiling") if k % 2 == 0 else ("ceiling", "j2", "serial"):
            if what == "ceiling":
                one, two, cpu_ratio = ceiling.measure()
                rows["ceiling"].append(one / two)
                rows["ceiling_cpu"].append(cpu_ratio)
                continue
            (me, kids), start = _cpu(), time.perf_counter()
            measure_paths(paths, jobs=2 if what == "j2" else 1)
            wall = time.perf_counter() - start
            me2, kids2 = _cpu()
            rows[f"{what}_wall"].append(wall)
            rows[f"{what}_parent"].append(me2 - me)
            rows[f"{what}_workers"].append(kids2 - kids)
    after = os.getloadavg()
    m = {key: statistics.median(values) for key, values in rows.items()}
    serial_cpu = m["serial_parent"] + m["serial_workers"]
    j2_cpu = statistics.median(p + w for p, w in zip(rows["j2_parent"], rows["j2_workers"],
                                                       strict=True))
    speedup = m["serial_wall"] / m["j2_wall"]
    figures = {
        "megabytes": round(mb, 1), "sessions": sessions, "rounds": rounds,
        "serial_wall_s": m["serial_wall"], "j2_wall_s": m["j2_wall"],
        "speedup_j2": speedup, "machine_ceiling_j2": m["ceiling"],
        "speedup_over_ceiling": speedup / m["ceiling"],
        "serial_cpu_s_per_mb": serial_cpu / mb, "j2_cpu_s_per_mb": j2_cpu / mb,
        "j2_parent_cpu_s": m["j2_parent"], "j2_workers_cpu_s": m["j2_workers"],
        "j2_over_serial_cpu": j2_cpu / serial_cpu,
        "ceiling_two_over_one_cpu": m["ceiling_cpu"],
        "load_before": load[0], "load_after": after[0]}
    for key, value in figures.items():
        record_property(key, value)
    assert rows["j2_workers"][0] > 0, "-j 2's workers were not this process's children"
    print(f"\ncorpus stats, -j 2 against serial: {mb:.1f} MB, {sessions} sessions, median of "
          f"{rounds} rounds, {os.cpu_count()} cores; load {load[0]:.1f} before, {after[0]:.1f} "
          "after (1-minute average)\n"
          f"  serial  wall {m['serial_wall']:.3f} s   CPU {serial_cpu:.3f} s = "
          f"{1e3 * serial_cpu / mb:.2f} ms/MB ({mb / serial_cpu:.0f} MB per CPU second)\n"
          f"  -j 2    wall {m['j2_wall']:.3f} s   CPU {j2_cpu:.3f} s = "
          f"{1e3 * j2_cpu / mb:.2f} ms/MB (parent {m['j2_parent']:.3f} s, workers "
          f"{m['j2_workers']:.3f} s)\n"
          f"  speed-up {speedup:.2f}x; the machine's two-process ceiling in the same rounds "
          f"{m['ceiling']:.2f}x (pure CPU work); speed-up / ceiling {speedup / m['ceiling']:.2f}\n"
          f"  CPU per MB, -j 2 over serial: {j2_cpu / serial_cpu:.2f}x; the pure CPU work's CPU "
          f"time, two processes over one: {m['ceiling_cpu']:.2f}x")


# --------------------------------------------------------------------------------------------
# Instructions: the load-independent figure

_DRIVER = """
import sys
import numpy  # as the CLI has it before any file is measured
from tripwire.corpus.measure import Run, measure_paths
path, mode = sys.argv[1], sys.argv[2]
if mode == "pre":  # what -j 2's parent does before the pool forks: list, size, schedule
    Run([path], jobs=2).chunks(2)
else:
    measure_paths([path], jobs=int(mode))
"""


def _instructions(tmp: Path, path: Path, mode: str) -> list[int]:
    """Instructions each process of one run executed (valgrind cachegrind), parent first. A
    forked worker's count starts from its parent's at the fork."""
    import subprocess

    out = tmp / f"{path.name}-{mode}"
    out.mkdir()
    driver = tmp / "driver.py"
    driver.write_text(_DRIVER, encoding="utf-8")
    subprocess.run(["valgrind", "--tool=cachegrind", "--cache-sim=no",
                    f"--cachegrind-out-file={out}/cg.%p", sys.executable, str(driver),
                    str(path), mode], check=True, capture_output=True, timeout=1200)
    counts = {}
    for file in out.glob("cg.*"):
        for line in file.read_text(encoding="utf-8").splitlines():
            if line.startswith("summary:"):
                counts[int(file.suffix[1:])] = int(line.split()[1])
    return [counts[pid] for pid in sorted(counts)]  # the parent has the lowest pid


def test_two_process_instructions(interchange: Path, tmp_path: Path, record_property) -> None:
    """Instructions per MB, serial and -j 2 (parent and workers), on one copy of the corpus:
    what -j 2 adds in work, whatever else the machine runs. Each figure is a run over the
    corpus less the same run over two tiny files (imports, pool start); a worker's own count
    is less its parent's at the fork (the tiny run's idle worker, plus what the parent does
    before forking: listing, sizing and scheduling the files)."""
    if shutil.which("valgrind") is None:
        pytest.skip("valgrind is not installed (apt-get install valgrind): no instruction counts")
    tiny = tmp_path / "tiny"
    tiny.mkdir()
    for small in sorted(interchange.glob("*.jsonl"), key=lambda p: p.stat().st_size)[:2]:
        shutil.copy(small, tiny / small.name)
    mb = _size(interchange) / 1e6
    (serial_tiny,), (serial_big,) = (_instructions(tmp_path, tiny, "1"),
                                     _instructions(tmp_path, interchange, "1"))
    (pre_tiny,), (pre_big,) = (_instructions(tmp_path, tiny, "pre"),
                               _instructions(tmp_path, interchange, "pre"))
    parent_tiny, *workers_tiny = _instructions(tmp_path, tiny, "2")
    parent_big, *workers_big = _instructions(tmp_path, interchange, "2")
    assert len(workers_tiny) == len(workers_big) == 2
    serial = serial_big - serial_tiny
    fork = min(workers_tiny) + (pre_big - pre_tiny)  # the tiny run's idle worker
    workers = [w - fork for w in workers_big]
    parent = parent_big - parent_tiny
    total = parent + sum(workers)
    for key, value in {"serial_instructions_per_mb": serial / mb,
                       "j2_instructions_per_mb": total / mb,
                       "j2_over_serial_instructions": total / serial,
                       "j2_parent_share": parent / total}.items():
        record_property(key, value)
    print(f"\ncorpus stats instructions (valgrind), {mb:.1f} MB: serial "
          f"{serial / mb / 1e6:.1f} M/MB; -j 2 {total / mb / 1e6:.1f} M/MB = "
          f"{total / serial:.3f}x serial (parent {parent / mb / 1e6:.1f} M/MB, "
          f"{100 * parent / total:.1f}% of the total; workers "
          f"{', '.join(f'{w / mb / 1e6:.1f}' for w in workers)} M/MB)")
