"""Task accounting on the hot path (SPEC §7.1; issue 9: at most 0.05 µs per ``on_call``).

``Guardrails.on_call`` charges each call to the session's task with integer work while the
count is below the task's mark. What that costs is measured against the same method with the
marked block (``# task accounting: begin`` .. ``end``) cut out of its source, built fresh from
the current source each run, so the two never drift apart: one run, two sides, a ratio.
``gate.py`` bounds it.

The source cut works on the Python twin (``PythonGuardrails``), so that is what this pair times.
The native ``Guardrails`` runs the same block in its Cython core (``_guardrails.pxi``), where it
is bounded by the gate's "Guardrails.on_call over Watchdog.observe_call" check: the whole policy
layer, the task's accounting included, over the bare engine call.

    python -m pytest benchmarks/test_bench_budget.py --benchmark-only
"""

from __future__ import annotations

import inspect
import textwrap
from typing import Any

import pytest
import workload

from tripwire import Guardrails, GuardrailsConfig, guardrails
from tripwire.budget import Budget, Task

CALLS = workload.call_mix()
BEGIN, END = "# task accounting: begin", "# task accounting: end"


def unaccounted_class() -> type[Guardrails]:
    """``Guardrails`` whose ``on_call`` has no task accounting (the block cut out)."""
    lines = textwrap.dedent(inspect.getsource(Guardrails.on_call)).splitlines(keepends=True)
    begin = next(i for i, line in enumerate(lines) if BEGIN in line)
    end = next(i for i, line in enumerate(lines) if END in line)
    namespace: dict[str, Any] = dict(vars(guardrails))
    exec("".join(lines[:begin] + lines[end + 1:]), namespace)  # our own source, cut

    class Unaccounted(guardrails.PythonGuardrails):
        __slots__ = ()
        on_call = namespace["on_call"]

    return Unaccounted


def pair(impl: str = "python") -> tuple[Guardrails, Guardrails]:
    """(without accounting, with it): warn mode, a task bounding steps and tool calls far
    above the workload (the fast path: no mark is reached)."""
    config = GuardrailsConfig(mode="warn", unattended=False)

    def task() -> Task:
        return Task(budget=Budget(steps=1_000_000, tool_calls=1_000_000_000))

    return (unaccounted_class()(config, implementation=impl, task=task()),
            Guardrails(config, implementation=impl, task=task()))


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
