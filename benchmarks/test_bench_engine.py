"""Engine hot paths, both implementations and the naive baseline, in one run.

Each benchmark round replays a whole workload; `gate.py` divides by its length for per-call
figures and prints the ratios. Group names pair what is compared.
"""

from __future__ import annotations

import pytest
import workload
from naive import NaiveWatchdog

from tripwire import Watchdog

CALLS = workload.call_mix()
RESULTS_100 = workload.results(100)
RESULTS_4K = workload.tool_outputs(4096, 400)  # compared by their answers (SPEC §12.1)
POLLS = workload.polls()
MIB = workload.payload(1 << 20)
MIB_BYTES = MIB.encode()


def _per_round(benchmark, n: int) -> None:
    benchmark.extra_info["operations_per_round"] = n


@pytest.mark.benchmark(group="observe_call")
@pytest.mark.parametrize("impl", ["native", "python", "naive"])
def test_observe_call(benchmark, impl: str) -> None:
    wd = NaiveWatchdog() if impl == "naive" else Watchdog(implementation=impl)
    calls = CALLS if impl != "python" else CALLS[:500]
    _per_round(benchmark, len(calls))
    benchmark.extra_info["mean_args_bytes"] = workload.mean_args_bytes(calls)
    benchmark(workload.run_calls, wd.observe_call, calls)


@pytest.mark.benchmark(group="observe_result_100B")
@pytest.mark.parametrize("impl", ["native", "python", "naive"])
def test_observe_result_100b(benchmark, impl: str) -> None:
    wd = NaiveWatchdog() if impl == "naive" else Watchdog(implementation=impl)
    observe = (
        wd.observe_result if impl == "naive" else (lambda n, p: wd.observe_result(n, payload=p))
    )
    _per_round(benchmark, len(RESULTS_100))
    benchmark(workload.run_calls, observe, RESULTS_100)


@pytest.mark.benchmark(group="observe_result_4KiB")
@pytest.mark.parametrize("impl", ["native", "python", "naive"])
def test_observe_result_4k(benchmark, impl: str) -> None:
    wd = NaiveWatchdog() if impl == "naive" else Watchdog(implementation=impl)
    observe = (
        wd.observe_result if impl == "naive" else (lambda n, p: wd.observe_result(n, payload=p))
    )
    _per_round(benchmark, len(RESULTS_4K))
    benchmark(workload.run_calls, observe, RESULTS_4K)


@pytest.mark.benchmark(group="poll_call_and_result")
@pytest.mark.parametrize("impl", ["native", "python"])
def test_poll(benchmark, impl: str) -> None:
    """A call and its result per poll: the repeat run weighing each result (SPEC §10.24)."""
    wd = Watchdog(implementation=impl)
    polls = POLLS if impl != "python" else POLLS[:250]
    _per_round(benchmark, len(polls))
    benchmark(workload.run_polls, wd, polls)


@pytest.mark.benchmark(group="tokens_1MiB")
@pytest.mark.parametrize("impl", ["native", "python"])
@pytest.mark.parametrize("kind", ["str", "bytes", "str64KiB"])
def test_token_estimate_1mib(benchmark, impl: str, kind: str) -> None:
    from tripwire.engine import select as _engine

    module = _engine.load(impl)

    def estimate() -> int:
        est = module.TokenEstimator()
        if kind == "str":
            est.feed(MIB)
        elif kind == "bytes":
            est.feed(MIB_BYTES)
        else:  # the streaming case: 16 chunks of 64 KiB
            for i in range(0, len(MIB), 1 << 16):
                est.feed(MIB[i : i + (1 << 16)])
        return est.tokens

    benchmark.extra_info["bytes_per_round"] = 1 << 20
    assert benchmark(estimate) == -(-(1 << 20) // 3)


@pytest.mark.benchmark(group="guardrails_on_call")
@pytest.mark.parametrize("impl", ["native", "python"])
def test_guardrails_on_call(benchmark, impl: str) -> None:
    from tripwire import Guardrails, GuardrailsConfig

    g = Guardrails(GuardrailsConfig(mode="warn", unattended=False), implementation=impl)
    calls = CALLS if impl != "python" else CALLS[:500]
    _per_round(benchmark, len(calls))
    benchmark(workload.run_turn, g, calls)
