"""The binding layer, measured: the same C++ entry points bound with Cython (shipped) and with
pybind11 (benchmarks/pybind, built here, never shipped), in one run.

    python -m pytest benchmarks/test_bench_binding.py --benchmark-group-by=group

Both do the same work per call (see benchmarks/pybind/tw_pybind.cpp), so the difference is the
binding's own overhead: argument conversion, the call protocol and the return value.
"""

from __future__ import annotations

import importlib
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import workload

from tripwire import Watchdog, WatchdogConfig
from tripwire import _native as cython

pybind11 = pytest.importorskip("pybind11", reason="pip install pybind11 to build the twin")

ROOT = Path(__file__).resolve().parents[1]
BUILD = ROOT / "build" / "pybind"
CALLS = workload.call_mix()


@pytest.fixture(scope="module")
def twin():
    """benchmarks/pybind built once per checkout (cmake + the same -O3 as the shipped core)."""
    if shutil.which("cmake") is None:
        pytest.skip("cmake is needed to build the pybind11 twin")
    subprocess.run(["cmake", "-S", str(ROOT / "benchmarks" / "pybind"), "-B", str(BUILD),
                    f"-DPython_EXECUTABLE={sys.executable}",
                    f"-Dpybind11_DIR={pybind11.get_cmake_dir()}"],
                   check=True, capture_output=True)
    subprocess.run(["cmake", "--build", str(BUILD)], check=True, capture_output=True)
    sys.path.insert(0, str(BUILD))
    try:
        return importlib.import_module("tw_pybind")
    finally:
        sys.path.remove(str(BUILD))


def _keys(canonical_key):
    for name, args in CALLS:
        canonical_key(name, args)


def _calls(observe_call):
    for name, args in CALLS:
        observe_call(name, args)


def test_the_twin_computes_what_the_core_does(twin) -> None:
    assert [twin.canonical_key(n, a) for n, a in CALLS[:200]] == \
        [cython.canonical_key(n, a) for n, a in CALLS[:200]]


@pytest.mark.benchmark(group="binding_canonical_key")
@pytest.mark.parametrize("binding", ["cython", "pybind11"])
def test_canonical_key(benchmark, twin, binding: str) -> None:
    benchmark.extra_info["operations_per_round"] = len(CALLS)
    benchmark(_keys, cython.canonical_key if binding == "cython" else twin.canonical_key)


@pytest.mark.benchmark(group="binding_observe_call")
@pytest.mark.parametrize("binding", ["cython", "pybind11"])
def test_observe_call(benchmark, twin, binding: str) -> None:
    settings = WatchdogConfig().engine_settings()
    # no alert texts are built in either: silence the signals so both take the common path
    settings = settings._replace(enabled=0)
    engine = Watchdog(WatchdogConfig(only=frozenset()), implementation="native") \
        if binding == "cython" else twin.Engine(settings)
    benchmark.extra_info["operations_per_round"] = len(CALLS)
    benchmark(_calls, engine.observe_call)
