"""Benchmark gate for CI: exits non-zero when tripwire's speed-up over the naive baseline falls
below a floor.

Machines differ, so the gate never compares absolute times: each check times tripwire and the
naive baseline in alternating rounds of the same run (so drift in the machine's speed hits both)
and compares the ratio of their medians with a floor. One check bounds an overhead from above
instead: Guardrails.on_call over the bare Watchdog.observe_call (the same engine work), on the
fastest round of each. The floors sit below the ratios measured
on the development machine (see docs/performance.md) with room for CI noise; a regression that
costs a third of the margin still passes, one that loses the native core's advantage does not.

    python benchmarks/gate.py            # all checks
    python benchmarks/gate.py --rounds 41 --json gate.json
"""

from __future__ import annotations

import argparse
import gc
import json
import statistics
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))

import workload
from naive import NaiveWatchdog

from tripwire import Watchdog


@dataclass
class Check:
    name: str
    fast: Callable[[], object]
    slow: Callable[[], object]
    ops: int  # operations per round (fast and slow run the same workload)
    floor: float  # minimum acceptable slow/fast ratio
    note: str = ""
    # builds what one round consumes (a fresh fleet), untimed; fast and slow then take it
    setup: Callable[[], object] | None = None
    # an overhead check instead: slow/fast must stay at most this (floor unused)
    at_most: float | None = None
    # rounds -> one figure; an overhead check takes the fastest round of each, which a busy
    # machine disturbs least (both sides are the same engine work plus or minus a layer)
    stat: Callable[[list[float]], float] = statistics.median


def _round(fn: Callable[..., object], setup: Callable[[], object] | None) -> float:
    args = () if setup is None else (setup(),)
    start = time.perf_counter()
    fn(*args)
    return time.perf_counter() - start


def measure(check: Check, rounds: int) -> dict:
    _round(check.fast, check.setup)
    _round(check.slow, check.setup)  # warm both up
    fast, slow = [], []
    gc.disable()
    try:
        for _ in range(rounds):
            fast.append(_round(check.fast, check.setup))
            slow.append(_round(check.slow, check.setup))
    finally:
        gc.enable()
    f, s = check.stat(fast), check.stat(slow)
    ok = s / f <= check.at_most if check.at_most is not None else s / f >= check.floor
    return {
        "check": check.name,
        "tripwire_ns_per_op": f / check.ops * 1e9,
        "naive_ns_per_op": s / check.ops * 1e9,
        "ratio": s / f,
        "floor": check.floor,
        "at_most": check.at_most,
        "ok": ok,
        "note": check.note,
    }


def checks() -> list[Check]:
    calls = workload.call_mix()
    # a 4 KiB tool output (a pytest run, a log tail, a JSON response, a file read, grep hits),
    # compared by its answer (SPEC §12.1) by both sides; 400 of them: the naive side's regular
    # expressions take ~0.35 ms each
    results_4k = workload.tool_outputs(4096, 400)
    native = Watchdog(implementation="native")
    naive = NaiveWatchdog()
    out = [
        Check(
            "Watchdog.observe_call, native vs naive",
            lambda: workload.run_calls(native.observe_call, calls),
            lambda: workload.run_calls(naive.observe_call, calls),
            len(calls),
            12.0,
            f"{workload.mean_args_bytes(calls):.0f}-byte args, 30% repeats",
        ),
        Check(
            "Watchdog.observe_result 4 KiB, native vs naive",
            lambda: workload.run_calls(
                lambda n, p: native.observe_result(n, payload=p), results_4k
            ),
            lambda: workload.run_calls(naive.observe_result, results_4k),
            len(results_4k),
            # 60-90x measured once both sides compute answers (the answer scanner: 1-2 GB/s
            # on tool output); 12x before, against a naive side that only hashed the bytes
            20.0,
            "4 KiB tool outputs, compared by their answers",
        ),
    ]
    out += _tool_rule_checks(calls)
    out += _policy_checks(calls)
    out.append(_batch_check())
    out.append(_usage_batch_check())
    out.append(_budget_check(calls))
    out.append(_native_budget_check(calls))
    return out


def _tool_rule_checks(calls: list[tuple[str, str]]) -> list[Check]:
    """Per-tool rules (issue 39) on the call path: a session whose rules judge no call looks
    nothing up (the default config's only rule is exempt_tools', a result's), and one with a
    glob rule judging calls pays a cached dict lookup per call. Each over the bare engine of
    the default config, on the fastest round (the same engine work plus or minus a lookup)."""
    from tripwire.signals import WatchdogConfig

    tools = sorted({name for name, _ in calls})
    bare = Watchdog(implementation="native")
    # a rule only for a tool the mix never calls: the lookup, never a rule found
    unmatched = Watchdog(WatchdogConfig(tools={"mcp__none__*": {"repeated-tool-call": "off"}}),
                         implementation="native")
    # every tool of the mix matched by a glob: the lookup and a rule on every call
    matched = Watchdog(WatchdogConfig(tools={"*": {"repeated-tool-name": 40}}),
                       implementation="native")
    return [Check(
        "Watchdog.observe_call, call rules (no tool matched) over none",
        lambda: workload.run_calls(bare.observe_call, calls),
        lambda: workload.run_calls(unmatched.observe_call, calls),
        len(calls), 0.0, f"{len(tools)} tools; the rule's lookup, cached per name",
        at_most=1.2, stat=min,
    ), Check(
        "Watchdog.observe_call, a glob rule for every tool over none",
        lambda: workload.run_calls(bare.observe_call, calls),
        lambda: workload.run_calls(matched.observe_call, calls),
        len(calls), 0.0, "every call judged by its tool's rule",
        at_most=1.2, stat=min,
    )]


def _budget_check(calls: list[tuple[str, str]]) -> Check:
    """Task accounting on the hot path (issue 9: <= 0.05 us per on_call): on_call against the
    same method with the accounting block cut out of its source (test_bench_budget.py)."""
    from test_bench_budget import pair

    bare, accounted = pair()
    return Check(
        "Guardrails.on_call task accounting over none",
        lambda: workload.run_turn(bare, calls),
        lambda: workload.run_turn(accounted, calls),
        len(calls), 0.0, "the tool-call counter's fast path; the ns columns give the cost",
        at_most=1.2, stat=min,
    )


def _native_budget_check(calls: list[tuple[str, str]]) -> Check:
    """Task accounting on the native hot path (issue 9: <= 0.05 us per on_call over the policy
    layer without it, 1.04-1.07x the engine call): a native on_call under a task that caps
    tool calls but stays below its mark, over the bare engine call. 1.3x is 1.07x plus 50 ns
    of a ~200 ns engine call (1.08-1.15x measured)."""
    from test_bench_budget import native_pair

    engine, g = native_pair()
    return Check(
        "Guardrails.on_call, capped task, over Watchdog.observe_call",
        lambda: workload.run_calls(engine.observe_call, calls),
        lambda: workload.run_turn(g, calls),
        len(calls), 0.0, "the policy layer with the task's native tool-call accounting",
        at_most=1.3, stat=min,
    )


def _batch_check() -> Check:
    """Batch ingest against the same events one at a time through the fleet."""
    from test_bench_batch import fresh_fleet, one_at_a_time

    events = workload.fleet_traffic(200, 40_000)
    return Check(
        "Fleet.observe_many vs one event at a time",
        lambda fleet: fleet.observe_many(events),
        lambda fleet: one_at_a_time(fleet, events),
        # 1.9-2.0x measured since a single event's common path runs in Cython (4.3x before);
        # 1.5-1.64x since looping-text reads every message's end (issue 39: the same work on
        # both sides, so a smaller ratio): floor 1.4x until that scan is made cheaper
        len(events), 1.4, "tool traffic of 200 sessions (calls, results, agent text)",
        setup=lambda: fresh_fleet("native", events),
    )


def _usage_batch_check() -> Check:
    """Batch ingest of usage-heavy turns under the unattended defaults (each session's task
    caps its steps, and the session its dollars) against the same events one at a time: the
    core charges the task below its next mark (issue 26: at least 1.5x; 0.7x before, when
    every usage row of a capped task was charged in Python)."""
    from test_bench_batch import fresh_fleet, one_at_a_time

    events = workload.fleet_traffic(200, 40_000, usage=True)
    return Check(
        "Fleet.observe_many, usage-heavy turns, vs one at a time",
        lambda fleet: fleet.observe_many(events),
        lambda fleet: one_at_a_time(fleet, events),
        len(events), 1.5, "turns of 200 sessions: a usage per step, a turn boundary every 12",
        setup=lambda: fresh_fleet("native", events),
    )


def _policy_checks(calls: list[tuple[str, str]]) -> list[Check]:
    """Checks of the layers above the engine."""
    from tripwire import Guardrails, GuardrailsConfig

    naive = NaiveWatchdog()
    guardrails = Guardrails(GuardrailsConfig(mode="warn", unattended=False),
                            implementation="native")
    engine = Watchdog(implementation="native")
    # warn mode: the policy layer does the same detection work as the bare watchdog
    layered = Guardrails(GuardrailsConfig(mode="warn", unattended=False),
                         implementation="native")
    return [Check(
        "Guardrails.on_call, native vs naive watchdog",
        lambda: workload.run_turn(guardrails, calls),
        lambda: workload.run_calls(naive.observe_call, calls),
        len(calls), 6.0, "the whole policy layer, one turn per round",
    ), Check(
        "Guardrails.on_call over Watchdog.observe_call",
        lambda: workload.run_calls(engine.observe_call, calls),
        lambda: workload.run_turn(layered, calls),
        # the structure issue's target is 1.4x; 1.04-1.08x measured idle now that the task's
        # call counter is a C field of the native core (1.39x while it was read as Python
        # attributes); the other core busy added up to 0.25x in CI runs
        len(calls), 0.0, "the policy layer's overhead on the engine call (1.04-1.08x measured)",
        at_most=1.4, stat=min,
    )]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=31)
    parser.add_argument("--json", metavar="FILE", help="also write the results as JSON")
    args = parser.parse_args(argv)
    rows = [measure(c, args.rounds) for c in checks()]
    width = max(len(r["check"]) for r in rows)
    print(f"{'check':<{width}}  {'fast':>11}  {'slow':>11}  {'ratio':>7}  {'floor':>6}")
    for r in rows:
        if r["at_most"] is not None:
            flag = "ok" if r["ok"] else "ABOVE CEILING"
            bound = f"<={r['at_most']:.1f}x"
        else:
            flag = "ok" if r["ok"] else "BELOW FLOOR"
            bound = f"{r['floor']:>5.1f}x"
        print(
            f"{r['check']:<{width}}  {r['tripwire_ns_per_op']:>8.0f} ns  "
            f"{r['naive_ns_per_op']:>8.0f} ns  {r['ratio']:>6.2f}x  {bound:>6}  {flag}"
        )
    if args.json:
        Path(args.json).write_text(json.dumps(rows, indent=2))
    failed = [r for r in rows if not r["ok"]]
    if failed:
        print(f"benchmark gate: {len(failed)} check(s) outside their bound", file=sys.stderr)
        return 1
    print("benchmark gate: all checks above their floors")
    return 0


if __name__ == "__main__":
    sys.exit(main())
