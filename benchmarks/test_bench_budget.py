"""Task accounting on the hot path (SPEC §7.1; issue 9: at most 0.05 µs per ``on_call``).

``Guardrails.on_call`` charges each call to the session's task with integer work while the
count is below the task's mark. What that costs is measured against the same method with the
marked block (``# task accounting: begin`` .. ``end``) cut out of its source, built fresh from
the current source each run, so the two never drift apart: one run, two sides, a ratio.
``gate.py`` bounds it.

The source cut works on the Python twin (``PythonGuardrails``, whose ``on_call`` is its core's in
``_reference_guardrails``), so that is what this pair times.
The native ``Guardrails`` runs the same block in its Cython core (``_guardrails.pxi``) on the
task's native ``CallCounter`` (C integers, no Python attribute access); the second pair times
that ``on_call``, under a task that caps tool calls far above the workload, against the bare
engine call (``Watchdog.observe_call``): the whole policy layer, the accounting included. The
layer without the accounting cost 1.04-1.07x the engine call; the gate holds this pair at
1.3x, which is that plus 0.05 us on a ~200 ns engine call.

    python -m pytest benchmarks/test_bench_budget.py --benchmark-only
"""

from __future__ import annotations

import inspect
import textwrap
from typing import Any

import pytest
import workload

from tripwire import Guardrails, GuardrailsConfig, Watchdog
from tripwire.session import guardrails
from tripwire.budgets.task import Budget, Task
from tripwire.session import core as _reference_guardrails

CALLS = workload.call_mix()
BEGIN, END = "# task accounting: begin", "# task accounting: end"


def unaccounted_class() -> type[Guardrails]:
    """``Guardrails`` whose ``on_call`` has no task accounting (the block cut out)."""
    source = inspect.getsource(_reference_guardrails.GuardrailsCore.on_call)
    lines = textwrap.dedent(source).splitlines(keepends=True)
    begin = next(i for i, line in enumerate(lines) if BEGIN in line)
    end = next(i for i, line in enumerate(lines) if END in line)
    namespace: dict[str, Any] = dict(vars(_reference_guardrails))
    exec("".join(lines[:begin] + lines[end + 1:]), namespace)  # our own source, cut

    class Unaccounted(guardrails.PythonGuardrails):
        __slots__ = ()
        on_call = namespace["on_call"]

    return Unaccounted


def bounded_task() -> Task:
    """A task bounding steps and tool calls far above the workload (the fast path: no mark
    is reached)."""
    return Task(budget=Budget(steps=1_000_000, tool_calls=1_000_000_000))


def pair(impl: str = "python") -> tuple[Guardrails, Guardrails]:
    """(without accounting, with it): warn mode, under ``bounded_task()``."""
    config = GuardrailsConfig(mode="warn", unattended=False)
    return (unaccounted_class()(config, implementation=impl, task=bounded_task()),
            Guardrails(config, implementation=impl, task=bounded_task()))


def native_pair() -> tuple[Watchdog, Guardrails]:
    """(the bare engine, a native warn-mode Guardrails under ``bounded_task()``): the same
    detection work, with and without the policy layer and the task's accounting."""
    return (Watchdog(implementation="native"),
            Guardrails(GuardrailsConfig(mode="warn", unattended=False),
                       implementation="native", task=bounded_task()))


@pytest.mark.benchmark(group="budget_on_call")
@pytest.mark.parametrize("side", ["unaccounted", "accounted"])
def test_on_call_task_accounting(benchmark: Any, side: str) -> None:
    bare, accounted = pair()
    g = bare if side == "unaccounted" else accounted
    benchmark.extra_info["operations_per_round"] = len(CALLS)
    benchmark(workload.run_turn, g, CALLS)
    if side == "accounted":
        assert g.task.tool_calls >= len(CALLS)  # the accounting ran
    else:
        assert g.task.tool_calls == 0  # and here it did not


def test_the_cut_method_is_the_same_method_minus_accounting() -> None:
    bare, accounted = pair()
    for g in (bare, accounted):
        g.start_turn()
        decisions = [g.on_call(name, args) for name, args in CALLS[:300]]
        g.end_turn()
        assert any(d.alerts for d in decisions)
    assert bare.counters.snapshot() == accounted.counters.snapshot()


@pytest.mark.benchmark(group="budget_native_on_call")
@pytest.mark.parametrize("side", ["engine", "guardrails"])
def test_native_on_call_with_task_accounting_over_the_engine(benchmark: Any, side: str) -> None:
    engine, g = native_pair()
    benchmark.extra_info["operations_per_round"] = len(CALLS)
    if side == "engine":
        benchmark(workload.run_calls, engine.observe_call, CALLS)
    else:
        benchmark(workload.run_turn, g, CALLS)
        assert g.task.tool_calls >= len(CALLS)  # charged on the fast path:
        assert g.task.call_mark == 500_000_000  # the 50% note's: not reached


def test_the_native_pair_does_the_same_detection_work() -> None:
    engine, g = native_pair()
    g.start_turn()
    decisions = [g.on_call(name, args) for name, args in CALLS[:300]]
    alerts = [engine.observe_call(name, args) for name, args in CALLS[:300]]
    assert [[a.signal for a in d.alerts] for d in decisions] == [
        [a.signal for a in found] for found in alerts] and any(alerts)
    assert type(g.task._calls).__module__ == "tripwire._native"  # the C-level counter
