"""The native core against a build of another revision, in one run: before/after a change.

Skipped unless ``TRIPWIRE_BASELINE_NATIVE`` names a ``_native`` extension built from another
revision, for example::

    git archive REV | tar -x -C /tmp/old
    pip wheel --no-build-isolation --no-deps -w /tmp/old/dist /tmp/old
    python -m zipfile -e /tmp/old/dist/*.whl /tmp/old/so
    TRIPWIRE_BASELINE_NATIVE=/tmp/old/so/tripwire/_native.cpython-311-x86_64-linux-gnu.so \\
        python -m pytest benchmarks/test_bench_baseline.py

Both engines replay the same workloads in the same process, round after round, so the ratio of
their times is what the change cost (machine drift hits both). Alert texts are not built (an
older engine may lack what the current texts read): this times the detectors' path only.
"""

from __future__ import annotations

import functools
import importlib.machinery
import importlib.util
import os
from typing import Any

import pytest
import workload

from tripwire import WatchdogConfig
from tripwire import _native as current

BASELINE = os.environ.get("TRIPWIRE_BASELINE_NATIVE")

pytestmark = pytest.mark.skipif(not BASELINE, reason="TRIPWIRE_BASELINE_NATIVE is not set")

CALLS = workload.call_mix()
POLLS = workload.polls()
RESULTS_4K = workload.results(4096)


@functools.cache
def _load_baseline() -> Any:
    # the current core is imported first (above), so the older one loads beside it
    name = "tripwire_baseline._native"
    loader = importlib.machinery.ExtensionFileLoader(name, BASELINE)
    spec = importlib.util.spec_from_file_location(name, BASELINE, loader=loader)
    module = importlib.util.module_from_spec(spec)
    loader.exec_module(module)
    return module


def _engine(which: str) -> Any:
    module = current if which == "current" else _load_baseline()

    class Quiet(module.Engine):  # type: ignore[misc,name-defined]
        def _fired(self, mask: int, name: str, detail: Any) -> tuple[()]:
            return ()

    return Quiet(WatchdogConfig().engine_settings())


@pytest.mark.benchmark(group="baseline_observe_call")
@pytest.mark.parametrize("which", ["current", "baseline"])
def test_observe_call(benchmark, which: str) -> None:
    engine = _engine(which)
    benchmark.extra_info["operations_per_round"] = len(CALLS)
    benchmark(workload.run_calls, engine.observe_call, CALLS)


@pytest.mark.benchmark(group="baseline_poll")
@pytest.mark.parametrize("which", ["current", "baseline"])
def test_poll(benchmark, which: str) -> None:
    engine = _engine(which)
    benchmark.extra_info["operations_per_round"] = len(POLLS)
    benchmark(workload.run_polls, engine, POLLS)


@pytest.mark.benchmark(group="baseline_observe_result_4KiB")
@pytest.mark.parametrize("which", ["current", "baseline"])
def test_observe_result_4k(benchmark, which: str) -> None:
    engine = _engine(which)
    benchmark.extra_info["operations_per_round"] = len(RESULTS_4K)
    benchmark(workload.run_calls, lambda n, p: engine.observe_result(n, payload=p), RESULTS_4K)
