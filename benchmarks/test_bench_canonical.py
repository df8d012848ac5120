"""The canonical key of real tool calls: every call of ../shared/corpus and the format samples
(11 767 calls, shell commands, edits, reads, MCP tools), both engines. The synthetic call mix
of ``test_bench_engine.py`` holds almost no ``=``, ``sleep`` or ``tmp``, so it measures the
volatile-argument scan's first test only; these calls run the scan where real arguments have
one (``sed``, ``python -c``, heredocs). Per call: the median round over ``operations_per_round``.

    python -m pytest benchmarks/test_bench_canonical.py --benchmark-columns=median
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from tripwire.engine import select as _engine

SHARED = Path(__file__).resolve().parents[2] / "shared"


def _calls() -> list[tuple[str, Any]]:
    from tripwire.interchange.adapters import read, transcripts
    from tripwire.interchange.events import Call

    roots = [SHARED / "corpus", SHARED / "format-samples"]
    if not all(r.exists() for r in roots):
        pytest.skip(f"{SHARED} is missing: these rows replay the shared recordings' calls")
    out = []
    for root in roots:
        for transcript in transcripts([str(root)]):
            out += [(item.event.name, item.event.args) for item in read(transcript)
                    if type(item.event) is Call]
    return out


@pytest.fixture(scope="module")
def calls() -> list[tuple[str, Any]]:
    return _calls()


def _keys(canonical_key: Any, calls: list[tuple[str, Any]]) -> None:
    for name, args in calls:
        canonical_key(name, args)


@pytest.mark.benchmark(group="canonical_key_recorded")
@pytest.mark.parametrize("impl", ["native", "python"])
def test_canonical_key_of_recorded_calls(benchmark, calls, impl: str) -> None:
    canonical_key = _engine.load(impl).canonical_key
    benchmark.extra_info["operations_per_round"] = len(calls)
    benchmark(_keys, canonical_key, calls)
