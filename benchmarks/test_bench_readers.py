"""Transcript readers (SPEC §11.1): MB/s of transcript per core through ``replay --quiet`` on
the shared corpus, and the JSON library's share of that time.

Target: >= 100 MB/s per core. Three runs over the same files, in one process:

- ``replay``: what ``tripwire replay --quiet CORPUS`` does (read, guardrails, warn mode; the
  files are detected once, before the rounds);
- ``read``: the readers alone (decoding into events, no guardrails);
- ``json``: orjson decoding alone, line by line or document by document as the readers do;

and the whole command, ``tripwire replay --quiet CORPUS`` run as a subprocess (interpreter
start, imports, detection, replay, exit), timed by its CPU seconds (user + system, from
``resource.getrusage(RUSAGE_CHILDREN)``): its ``extra_info`` holds the best and median CPU
seconds and MB/s of the rounds (the benchmark's own columns are wall time). Measure it with the
package installed non-editable (an editable install adds an import hook to every import).

The JSON share is json / replay; MB/s is the corpus's bytes over the median time. The timer
is the process's CPU time (``time.process_time``): the figure is per core, and other work on
a shared machine does not count against it.

    python -m pytest benchmarks/test_bench_readers.py --benchmark-columns=median
"""

from __future__ import annotations

import resource
import statistics
import subprocess
import sys
import time
from pathlib import Path

import orjson
import pytest

from tripwire.cli.replay import ReplayOptions, ReplayStats, replay_transcript
from tripwire.interchange.adapters import read, transcripts

CORPUS = Path(__file__).resolve().parents[1].parent / "shared" / "corpus"
JSON_LINES = frozenset({"claude-code", "codex", "interchange"})

if not CORPUS.exists():
    pytest.skip(f"{CORPUS} is missing: the reader benchmark needs ../shared/corpus",
                allow_module_level=True)

FILES = transcripts([str(CORPUS)])
BYTES = sum(t.path.stat().st_size for t in FILES)


def replay_all() -> int:
    stats = ReplayStats()
    options = ReplayOptions()
    for transcript in FILES:
        for _ in replay_transcript(transcript, options, stats):
            pass
    return stats.events


def read_all() -> int:
    return sum(1 for t in FILES for item in read(t) if item.event is not None)


def decode_all() -> int:
    n = 0
    for t in FILES:
        if t.format in JSON_LINES:
            with t.path.open("rb") as handle:
                for line in handle:
                    orjson.loads(line)
                    n += 1
        else:
            orjson.loads(t.path.read_bytes())
            n += 1
    return n


def _run(benchmark, fn) -> None:
    result = benchmark.pedantic(fn, rounds=5, iterations=1, warmup_rounds=1)
    assert result > 0
    median = benchmark.stats.stats.median
    benchmark.extra_info["corpus_bytes"] = BYTES
    benchmark.extra_info["mb_per_s"] = round(BYTES / median / 1e6, 1)


@pytest.mark.benchmark(group="readers", timer=time.process_time)
def test_replay_quiet_throughput(benchmark) -> None:
    benchmark.extra_info["target_mb_per_s"] = 100
    _run(benchmark, replay_all)


@pytest.mark.benchmark(group="readers", timer=time.process_time)
def test_readers_alone_throughput(benchmark) -> None:
    _run(benchmark, read_all)


@pytest.mark.benchmark(group="readers", timer=time.process_time)
def test_json_decoding_alone_throughput(benchmark) -> None:
    _run(benchmark, decode_all)


def _command() -> list[str]:
    """The installed ``tripwire`` script beside this interpreter, else ``python -m tripwire``."""
    script = Path(sys.executable).with_name("tripwire")
    if script.exists():
        return [str(script)]
    return [sys.executable, "-m", "tripwire"]


def _children_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


@pytest.mark.benchmark(group="readers-command")
def test_replay_quiet_whole_command_throughput(benchmark) -> None:
    command = [*_command(), "replay", "--quiet", str(CORPUS)]
    cpu: list[float] = []

    def run() -> int:
        before = _children_cpu()
        proc = subprocess.run(command, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                              check=True)
        cpu.append(_children_cpu() - before)
        return len(proc.stdout)

    assert benchmark.pedantic(run, rounds=5, iterations=1, warmup_rounds=1) > 0
    rounds = cpu[1:]  # the warm-up round is left out
    best, median = min(rounds), statistics.median(rounds)
    benchmark.extra_info.update({
        "corpus_bytes": BYTES, "target_mb_per_s": 100,
        "cpu_s_best": round(best, 3), "cpu_s_median": round(median, 3),
        "mb_per_s_best": round(BYTES / best / 1e6, 1),
        "mb_per_s_median": round(BYTES / median / 1e6, 1),
    })
