"""The answer scanner (SPEC §12.1) on realistic ASCII text: its throughput in bytes per second.

One scanner runs on every result's payload (``native/answer.cpp``; the Python twin for
comparison on a smaller slice). Each kind of tool output is 1 MiB of distinct outputs from
``workload.tool_outputs`` (a pytest run, a log tail, a JSON API response, a source file read
with line numbers, grep hits), plus prose and source code with no volatile span at all. The
figure: ``extra_info["bytes_per_second"]``, the buffer's size over the median round.

    python -m pytest benchmarks/test_bench_answer.py --benchmark-columns=median
"""

from __future__ import annotations

import random
from pathlib import Path

import pytest
import workload

from tripwire.identity import answer as _answer

native = pytest.importorskip("tripwire._native", reason="the native core is not built")

MIB = 1 << 20


def _kind(k: int) -> bytes:
    outputs = workload.tool_outputs(4096, 5 * (MIB // 4096) + 5)
    return "\n".join(p for i, (_, p) in enumerate(outputs) if i % 5 == k)[:MIB].encode()


def _prose() -> bytes:
    rng = random.Random(5)
    words = ("the agent ran the test suite again and the same assertion failed because the "
             "parser does not handle iso dates with a trailing zone designator").split()
    return " ".join(rng.choice(words) for _ in range(MIB // 5))[:MIB].encode()


def _code() -> bytes:
    source = (Path(__file__).parents[1] / "src" / "tripwire" / "engine" / "reference.py").read_bytes()
    return (source * (MIB // len(source) + 1))[:MIB]


TEXTS = {
    "pytest": _kind(0), "logs": _kind(1), "json": _kind(2), "source": _kind(3),
    "grep": _kind(4), "prose": _prose(), "code": _code(),
}
TEXTS["mixed"] = b"".join(TEXTS[k][: MIB // 5] for k in ("pytest", "logs", "json", "source",
                                                          "grep"))


@pytest.mark.benchmark(group="answer_scan")
@pytest.mark.parametrize("kind", list(TEXTS))
def test_answer_scan_native(benchmark, kind: str) -> None:
    data = TEXTS[kind]
    benchmark(native.scan_answer, data)
    benchmark.extra_info["bytes"] = len(data)
    benchmark.extra_info["bytes_per_second"] = len(data) / benchmark.stats.stats.median


@pytest.mark.benchmark(group="answer_digest")
@pytest.mark.parametrize("kind", ["mixed", "prose"])
def test_answer_digest_native(benchmark, kind: str) -> None:
    """The scan and the XXH3-128 of its result: what observe_result pays per payload."""
    data = TEXTS[kind]
    benchmark(native.answer_digest, data)
    benchmark.extra_info["bytes_per_second"] = len(data) / benchmark.stats.stats.median


@pytest.mark.benchmark(group="answer_scan_python")
def test_answer_scan_python_twin(benchmark) -> None:
    data = TEXTS["mixed"][: 64 * 1024]
    benchmark(_answer.scan, data)
    benchmark.extra_info["bytes_per_second"] = len(data) / benchmark.stats.stats.median
