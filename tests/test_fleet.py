"""Fleet: many sessions in one process, eviction and restore, batch ingest (both engines)."""

from __future__ import annotations

import json
import random
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from conftest import in_threads

from tripwire import Decision, GuardrailHalted, Guardrails, GuardrailsConfig, Turn
from tripwire.budgets.caps import CONSUMED
from tripwire.durability.sqlite import SQLiteStore
from tripwire.fleet.fleet import Fleet
from tripwire.interchange.events import Call, Result, TurnStart
from tripwire.session.dispatch import observe

LOOP = ("read_file", '{"path": "src/a.py"}')


def fleet(implementation: str, **config) -> Fleet:
    config.setdefault("unattended", False)
    return Fleet(GuardrailsConfig(**config), implementation=implementation)


def test_sessions_are_created_once_and_independent(implementation: str) -> None:
    f = fleet(implementation, mode="enforce")
    a, b = f.session("a"), f.session("b")
    assert f.session("a") is a and a is not b and len(f) == 2 and "a" in f
    a.start_turn()
    for _ in range(5):
        a.on_call(*LOOP)
    assert a.halted and not b.halted
    b.start_turn()
    assert b.on_call(*LOOP).proceed


def test_status_lists_halted_sessions_and_reset_clears(implementation: str) -> None:
    f = fleet(implementation, mode="enforce")
    for sid in ("s2", "s1"):
        g = f.session(sid)
        g.start_turn()
        for _ in range(5):
            g.on_call(*LOOP)
    f.session("s3")
    status = f.status()
    assert [(h.session_id, h.halted_by, h.in_memory) for h in status] == [
        ("s1", ("watchdog",), True), ("s2", ("watchdog",), True)]
    assert "repeated-tool-call" in status[0].reason
    assert f.reset("s1").cleared == ("watchdog",)
    assert [h.session_id for h in f.status()] == ["s2"]
    assert f.counters.snapshot()["trips"] == {"watchdog": 2}  # one set of counters per fleet


def test_eviction_keeps_halts_without_a_store(implementation: str) -> None:
    f = fleet(implementation, mode="enforce")
    g = f.session("h")
    g.start_turn()
    for _ in range(5):
        g.on_call(*LOOP)
    f.session("idle")
    assert not f.evict("h")  # its halt would be lost
    assert f.evict("idle") and "idle" not in f
    assert f.evict_idle(0) == 0 and "h" in f


def test_evicted_sessions_are_restored_from_the_store(tmp_path: Path, implementation: str) -> None:
    f = Fleet(GuardrailsConfig(mode="enforce", unattended=False),
              store=SQLiteStore(tmp_path / "f.sqlite"), implementation=implementation)
    g = f.session("h")
    g.start_turn()
    for _ in range(5):
        g.on_call(*LOOP)
    f.session("idle").start_turn()
    assert f.evict_idle(0) == 2 and len(f) == 0
    status = f.status()
    assert [(h.session_id, h.in_memory) for h in status] == [("h", False)]
    restored = f.session("h")
    assert restored is not g and restored.halted
    with pytest.raises(GuardrailHalted):
        restored.start_turn()
    assert not f.session("idle").halted


def test_restore_all_brings_back_every_stored_session(tmp_path: Path,
                                                      implementation: str) -> None:
    config = GuardrailsConfig(mode="enforce", unattended=False, max_session_cost_usd=1.0)
    first = Fleet(config, store=SQLiteStore(tmp_path / "f.sqlite"),
                  implementation=implementation)
    for i in range(6):
        g = first.session(f"s{i}")
        g.start_turn()
        for _ in range(5 if i % 2 else 1):  # the odd sessions loop and are halted
            g.on_call(*LOOP)
        g.on_usage(cost_usd=0.25 * (i + 1))
        g.end_turn()
    second = Fleet(config, store=SQLiteStore(tmp_path / "f.sqlite"),
                   implementation=implementation)
    assert second.session("s0").status().spent_usd == 0.25  # in memory before restore_all
    assert second.restore_all() == 5 and len(second) == 6
    assert [h.session_id for h in second.status()] == ["s1", "s3", "s4", "s5"]
    assert all(h.in_memory for h in second.status())
    assert [second.session(f"s{i}").status().spent_usd for i in range(6)] == \
        [0.25, 0.5, 0.75, 1.0, 1.25, 1.5]
    assert second.session("s4").status().halted_by == ("cost_ceiling",)  # 1.25 >= 1.0
    assert second.session("s1").status().halted_by == ("watchdog",)
    assert Fleet(config, implementation=implementation).restore_all() == 0  # no store


def test_concurrent_sessions_from_threads(implementation: str) -> None:
    f = fleet(implementation, mode="warn")

    def work(t: int) -> None:
        for i in range(300):
            f.on_call(f"s{i % 10}", "read_file", {"path": f"{t}/{i}.py"})

    assert in_threads(work) == [] and len(f) == 10
    assert sum(f.session(f"s{i}").watchdog.events for i in range(10)) == 1200


# -- batch ingest ------------------------------------------------------------------------------

def volatile_payloads(rng: random.Random, volatile: bool) -> list[Any]:
    """Payloads whose answers (SPEC §12.1) are equal but for a volatile span, and empty ones."""
    if not volatile:
        return []
    return [f"1 failed in 0.{rng.randrange(10, 99)}s",
            f"/bin/bash: line {rng.randrange(9000, 9999)}: cd: x", "", " \n"]


def random_traffic(seed: int, n: int = 600, volatile: bool = False) -> list[tuple]:
    rng = random.Random(seed)
    events: list[tuple] = []
    for _ in range(n):
        sid = f"s{rng.randrange(6)}"
        roll = rng.random()
        if roll < 0.45:
            path = rng.choice(["a.py", "./a.py", "b.py", "c.py", "/w/a.py"])
            args = rng.choice([json.dumps({"path": path}), {"path": path}])
            events.append((sid, "call", rng.choice(["read_file", "grep"]), args,
                           rng.choice([None, "c1", "c2"])))
        elif roll < 0.85:
            # by name or by call id; str, bytes, JSON-able and non-ASCII payloads
            name = rng.choice(["read_file", None])
            payload = rng.choice([None, "A", "B", "x" * 3000, b"B", {"k": [1, 2]}, "é" * 999,
                                  *volatile_payloads(rng, volatile)])
            events.append((sid, "result", name, payload, rng.choice([None, None, "boom"]),
                           rng.random() < 0.1, rng.choice(["c1", "c2", "c3"]),
                           rng.random() < 0.1))  # unknown_tool (SPEC §12.4)
        elif roll < 0.9:  # repeated words are repeated-text's (SPEC §12.4)
            events.append((sid, "text", rng.choice(["", "ok", "Let me check.", "let me  check."])))
        elif roll < 0.94:
            events.append((sid, "usage", "claude-haiku-4-5", rng.randrange(60_000, 80_000), 10, 0.01))
        elif roll < 0.96:
            events.append((sid, "turn_start"))
        elif roll < 0.975:  # compaction-storm's (SPEC §12.4): a row of the batch like any other
            events.append((sid, "compaction") if rng.random() < 0.5 else (sid, "compaction",
                                                                         False, True))
        else:
            events.append((sid, "turn_end"))
    return events


def patterned_traffic(seed: int, n: int = 900) -> list[tuple]:
    """Sessions that cycle (period 2 or 3) or keep coming back to one call among others: the
    signals whose texts quote earlier calls (the text ring the batch writes back)."""
    rng = random.Random(seed)
    events: list[tuple] = []
    step = dict.fromkeys(range(10), 0)
    for _ in range(n):
        k = rng.randrange(10)
        sid, i = f"p{k}", step[k]
        step[k] += 1
        out = f"out {rng.randrange(3)}"
        if k < 4:  # a cycle, broken now and then
            period = 2 + k % 2
            j = i % period if rng.random() < 0.9 else rng.randrange(100)
            call = (["read_file", "grep", "bash"][j % 3], {"path": f"f{j}.py"})
        elif k >= 8:  # recycled calls: a 6- or 7-call lap, each call with its answer (its
            # timing aside), broken now and then
            period = 6 + k % 2
            j = i % period if rng.random() < 0.95 else 100 + rng.randrange(100)
            call = (["read_file", "grep", "bash"][j % 3], {"path": f"g{j}.py"})
            out = f"answer {j} in 0.{rng.randrange(10, 99)}s"
        else:  # one call dominating fresh ones
            call = ("read_file", {"path": "hot.py"}) if rng.random() < 0.6 else \
                (rng.choice(["grep", "bash"]), {"q": rng.randrange(10_000)})
        events.append((sid, "call", *call))
        events.append((sid, "result", call[0], out))
        if rng.random() < 0.05:
            events.append((sid, "text", "still working on it"))
    return events


def one_by_one(f: Fleet, events: list[tuple]) -> list[tuple]:
    """The rows one at a time, each through its session's method (``session.dispatch``)."""
    out = []
    for i, (sid, kind, *fields) in enumerate(events):
        d = observe(f.session(sid), kind, *fields)
        if d is not Decision() and not (isinstance(d, Turn) and not d) and d != Decision():
            out.append((i, sid, d))
    return out


def task_counts(g: Guardrails) -> dict[str, float]:
    """What a session's task consumed (every counter but the wall-clock deadline)."""
    return {c: g.task.used(c) for c in CONSUMED if c != "deadline_s"}


def summary(outcomes: list[tuple]) -> list[tuple]:
    rows = []
    for i, sid, d in outcomes:
        if isinstance(d, Turn):
            rows.append((i, sid, "turn", d.feedback, d.compact))
        else:
            rows.append((i, sid, d.action, d.guardrail, d.reason,
                         tuple((a.signal, a.event) for a in d.alerts)))
    return rows


@pytest.mark.parametrize("seed", range(6))
@pytest.mark.parametrize("mode", ["warn", "feedback", "enforce"])
def test_a_batch_decides_exactly_what_one_event_at_a_time_decides(
        implementation: str, seed: int, mode: str) -> None:
    events = random_traffic(seed, volatile=seed % 2 == 1)
    config = {"mode": mode, "max_turn_cost_usd": 0.05}
    batch_fleet, single_fleet = fleet(implementation, **config), fleet(implementation, **config)
    got = summary(batch_fleet.observe_many(events))
    want = summary(one_by_one(single_fleet, events))
    assert got == want and got  # something happened, and the same thing
    for sid in {e[0] for e in events}:
        a, b = batch_fleet.session(sid), single_fleet.session(sid)
        assert a.status() == b.status()
        assert task_counts(a) == task_counts(b), sid  # its task charged the same
        for attr in ("events", "repeat_run", "name_run", "silent_calls", "stale_results",
                     "failure_streak", "no_op_run"):
            assert getattr(a.watchdog, attr) == getattr(b.watchdog, attr), (sid, attr)


def near_the_window(events: list[tuple]) -> list[tuple]:
    """The same traffic with measured contexts near a 200,000-token window: estimate bytes of
    later results cross the compaction threshold and the 95% cut inside batches."""
    return [(e[0], "usage", e[2], 150_000 + e[3] % 40_000, *e[4:]) if e[1] == "usage" else e
            for e in events]


# seeds 6, 12 and 13: a turn starts with the context already past the cut, and its first result
# carries no bytes: one event at a time cuts there (on_result checks after every result), and
# the batch core must too (it used to check only results that added bytes)
@pytest.mark.parametrize("seed", [0, 1, 2, 3, 6, 12, 13])
@pytest.mark.parametrize("limit", ["session_ceiling", "context"])
def test_a_batch_decides_what_one_at_a_time_decides_at_every_limit(
        implementation: str, seed: int, limit: str) -> None:
    """The property above, where the batch core checks the thresholds itself: per-session
    ceilings (a usage that would trip stops the batch) and context limits (a result's bytes
    that cross one stop it)."""
    events = random_traffic(seed)
    config: dict = {"mode": "enforce"}
    if limit == "session_ceiling":
        config["max_session_cost_usd"] = 0.02
    else:
        events = near_the_window(events)
    batch_fleet, single_fleet = fleet(implementation, **config), fleet(implementation, **config)
    got = summary(batch_fleet.observe_many(events))
    want = summary(one_by_one(single_fleet, events))
    assert got == want
    guardrail = "cost_ceiling" if limit == "session_ceiling" else "context"
    assert any(row[3] == guardrail for row in got if row[2] != "turn"), "the limit was reached"
    for sid in {e[0] for e in events}:
        assert batch_fleet.session(sid).status() == single_fleet.session(sid).status()
        assert task_counts(batch_fleet.session(sid)) == task_counts(single_fleet.session(sid))


def usage_heavy_traffic(seed: int, n: int = 900) -> list[tuple]:
    """Turns of model steps with a few tool calls between them: usage rows with varied tokens
    and costs (none, zero, small, larger), the traffic a task bounding steps, tokens and
    dollars is charged by."""
    rng = random.Random(seed)
    events: list[tuple] = []
    for _ in range(n):
        sid = f"s{rng.randrange(5)}"
        roll = rng.random()
        if roll < 0.45:
            events.append((sid, "usage", rng.choice([None, "claude-haiku-4-5"]),
                           rng.choice([None, 0, rng.randrange(1_000, 9_000)]),
                           rng.choice([None, 0, rng.randrange(10, 900)]),
                           rng.choice([None, 0.0, 0.001, 0.0125, rng.random() / 50])))
        elif roll < 0.7:
            events.append((sid, "call", rng.choice(["read_file", "grep", "bash"]),
                           {"path": f"{rng.randrange(40)}.py"}))
        elif roll < 0.88:
            events.append((sid, "result", rng.choice(["read_file", "grep"]),
                           f"out {rng.randrange(1000)}"))
        elif roll < 0.92:
            events.append((sid, "text", rng.choice(["", "working on it", "done?"])))
        elif roll < 0.97:
            events.append((sid, "turn_start"))
        else:
            events.append((sid, "turn_end"))
    return events


#: Task caps low enough that the 50% and 80% notes and the cap fall inside batches (each
#: session sees about 80 usage rows of some 2,500 tokens and $0.008 on average).
CAPPED = {
    "steps": {"steps": 37},
    "tokens": {"tokens": 90_000},
    "usd": {"usd": 0.31},
    "all": {"steps": 61, "tokens": 150_000, "usd": 0.4},
}


def capped_fleets(implementation: str, caps: str, mode: str, tree: str) -> list[Fleet]:
    """Two fleets alike: sessions under the unattended defaults with ``caps`` (``tree``
    "own": each its implicit task; "child": s0 a child of a task nobody else runs, s1 and s2
    children of one parent, s3 and s4 sharing one task; the shared ones are charged in
    Python, the sole child in the core)."""
    from tripwire.budgets.task import Budget, Task

    out = []
    for _ in range(2):
        f = fleet(implementation, mode=mode, unattended=True, max_session_cost_usd=0,
                  budget=Budget(**CAPPED[caps]))
        if tree == "child":
            solo = Task("solo", {"steps": 50, "tokens": 120_000}, task_id="solo")
            f.session("s0", task=solo.child(CAPPED[caps], task_id="c0"))
            parent = Task("parent", {"usd": 0.5, "steps": 70}, task_id="parent")
            f.session("s1", task=parent.child({"steps": 30}, task_id="c1"))
            f.session("s2", task=parent.child(CAPPED[caps], task_id="c2"))
            shared = Task("shared", CAPPED[caps], task_id="shared", unattended=True)
            f.session("s3", task=shared)
            f.session("s4", task=shared)
        out.append(f)
    return out


@pytest.mark.parametrize("seed", range(4))
@pytest.mark.parametrize("caps", list(CAPPED))
@pytest.mark.parametrize("mode", ["warn", "feedback", "enforce"])
@pytest.mark.parametrize("tree", ["own", "child"])
def test_a_batch_charges_capped_tasks_exactly_as_one_event_at_a_time(
        implementation: str, seed: int, caps: str, mode: str, tree: str) -> None:
    """The property above for tasks bounding steps, tokens and dollars (the unattended
    defaults, caps low enough to note and exhaust inside batches): the batch core charges
    usage rows below the next mark and hands the row that reaches one to Python; decisions,
    alerts, notes, counters and outcomes are the same, batch after batch."""
    events = usage_heavy_traffic(seed)
    batch_fleet, single_fleet = capped_fleets(implementation, caps, mode, tree)
    got, want = [], []
    for start, stop in ((0, 300), (300, 301), (301, 900)):  # state carried between batches
        got += [(i + start, *rest) for i, *rest in
                summary(batch_fleet.observe_many(events[start:stop]))]
        want += [(i + start, *rest) for i, *rest in
                 summary(one_by_one(single_fleet, events[start:stop]))]
        assert got == want
    notes = [row for row in got if row[2] == "turn" and "task-budget" in str(row[3])]
    assert notes or mode == "warn", "a budget note was delivered"
    ended = 0
    for sid in {e[0] for e in events}:
        a, b = batch_fleet.session(sid), single_fleet.session(sid)
        assert a.status() == b.status()
        for ta, tb in zip(a.task.chain, b.task.chain, strict=True):
            assert task_counts_of(ta) == task_counts_of(tb), sid
            assert ta.noted == tb.noted and ta.notes == tb.notes, sid
            assert ta.exhausted == tb.exhausted, sid
            assert str(ta.outcome) == str(tb.outcome), sid
        ended += a.task.exhausted_by() is not None
    assert ended, "a task was exhausted inside a batch"


@settings(max_examples=40, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(seed=st.integers(0, 10_000), steps=st.sampled_from([None, 1, 2, 3, 7, 20, 45]),
       tokens=st.sampled_from([None, 1, 5_000, 40_000, 150_000]),
       usd=st.sampled_from([None, 0.000000001, 0.01, 0.05, 0.3]),
       mode=st.sampled_from(["warn", "feedback", "enforce"]),
       cuts=st.lists(st.integers(1, 399), max_size=4))
def test_capped_batches_equal_one_at_a_time_property(
        implementation: str, seed: int, steps: int | None, tokens: int | None,
        usd: float | None, mode: str, cuts: list[int]) -> None:
    """Any caps (down to one step, one token, one nano-dollar: notes and the cap on the same
    row), any traffic, any split into batches: the batch's decisions, notes, counters and
    outcomes are those of one event at a time."""
    from tripwire.budgets.task import Budget

    events = usage_heavy_traffic(seed, 400)
    budget = Budget(steps=steps or 0, tokens=tokens or 0, usd=usd or 0.0)
    batch_fleet, single_fleet = (fleet(implementation, mode=mode, unattended=True,
                                       max_session_cost_usd=0, budget=budget) for _ in range(2))
    bounds = [0, *sorted(set(cuts)), 400]
    for start, stop in zip(bounds, bounds[1:]):
        got = summary(batch_fleet.observe_many(events[start:stop]))
        want = summary(one_by_one(single_fleet, events[start:stop]))
        assert got == want
    for sid in {e[0] for e in events}:
        a, b = batch_fleet.session(sid), single_fleet.session(sid)
        assert a.status() == b.status()
        assert task_counts_of(a.task) == task_counts_of(b.task), sid
        assert (a.task.noted, a.task.notes, a.task.exhausted, str(a.task.outcome)) == \
            (b.task.noted, b.task.notes, b.task.exhausted, str(b.task.outcome)), sid


def task_counts_of(task: Any) -> dict[str, float]:
    return {c: task.used(c) for c in CONSUMED if c != "deadline_s"}


def test_a_capped_tasks_batch_charges_are_durable(tmp_path: Path, implementation: str) -> None:
    """A step-capped task charged by the batch core: its consumption is written before
    observe_many returns (one budget row per hand-back, not one per usage row), and a fleet on
    the same store restores it."""
    from tripwire.budgets.task import Budget

    config = GuardrailsConfig(mode="enforce", unattended=True, max_session_cost_usd=0,
                              budget=Budget(steps=100, usd=5.0))
    store = SQLiteStore(tmp_path / "f.sqlite")
    f = Fleet(config, store=store, implementation=implementation)
    rows = [("a", "turn_start")] + [("a", "usage", None, 100, 10, 0.01)] * 30
    f.observe_many(rows)
    task = f.session("a").task
    assert (task.steps, task.tokens, task.used("usd")) == (30, 3300, pytest.approx(0.3))
    history = store.histories()["a"].rows
    budget_rows = [r for r in history if r.kind == "budget"]
    assert len(budget_rows) <= 2 and budget_rows[-1].data["used"]["steps"] == 30
    again = Fleet(config, store=SQLiteStore(tmp_path / "f.sqlite"),
                  implementation=implementation)
    restored = again.session("a").task
    assert (restored.steps, restored.tokens, restored.usd) == (30, 3300, task.usd)
    # the 50% note falls on the 50th step: Python charges that row, and notes
    out = f.observe_many([("a", "usage", None, 100, 10, 0.01)] * 25 + [("a", "turn_start")])
    assert task.steps == 55 and task.notes == ()
    assert "You have used 50 of 100 model steps" in str(out[-1][2].feedback)
    budget_rows = [r for r in store.histories()["a"].rows if r.kind == "budget"]
    assert budget_rows[-1].data["used"]["steps"] == 55


@pytest.mark.parametrize("seed", range(4))
def test_batch_alert_texts_quote_the_same_calls(implementation: str, seed: int) -> None:
    events = patterned_traffic(seed)
    batch_fleet, single_fleet = fleet(implementation), fleet(implementation)
    got = summary(batch_fleet.observe_many(events))
    want = summary(one_by_one(single_fleet, events))
    assert got == want
    fired = {signal for row in got if row[2] != "turn" for signal, _ in row[5]}
    assert {"alternating-tool-cycle", "dominant-tool-call", "recycled-calls"} <= fired
    for sid in {e[0] for e in events}:  # the recent calls the next alert would quote
        a, b = batch_fleet.session(sid).watchdog, single_fleet.session(sid).watchdog
        assert [a.recent_call(age) for age in range(8)] == \
            [b.recent_call(age) for age in range(8)], sid


def test_a_batch_split_anywhere_decides_what_one_batch_decides(implementation: str) -> None:
    events = random_traffic(7)
    whole, split = fleet(implementation, mode="enforce"), fleet(implementation, mode="enforce")
    want = summary(whole.observe_many(events))
    got = []
    for start, stop in ((0, 1), (1, 140), (140, 141), (141, 600)):
        got += [(i + start, *rest) for i, *rest in summary(split.observe_many(events[start:stop]))]
    assert got == want
    for sid in {e[0] for e in events}:
        assert split.session(sid).status() == whole.session(sid).status()


def test_a_result_streamed_before_the_batch_is_counted_once(implementation: str) -> None:
    batched, single = fleet(implementation), fleet(implementation)
    for f in (batched, single):
        f.session("s").on_usage(model="claude-opus-4-5", input_tokens=1000)
        f.session("s").on_call("read_file", {"path": "a"}, id="c1")
        f.session("s").on_result_chunk("x" * 3000)  # 1,000 tokens, counted as they stream
    batched.observe_many([("s", "result", None, "x" * 3000, None, False, "c1"),
                          ("s", "result", "grep", "y" * 300)])
    single.session("s").on_result(id="c1", payload="x" * 3000)
    single.session("s").on_result("grep", payload="y" * 300)
    assert batched.session("s").utilization() == single.session("s").utilization()
    assert batched.session("s").utilization().unmeasured_bytes == 3300


def test_a_halt_inside_a_batch_blocks_that_session_only(implementation: str) -> None:
    f = fleet(implementation, mode="enforce")
    events = [("a", "turn_start"), ("b", "turn_start")]
    for _ in range(7):
        events += [("a", "call", *LOOP), ("b", "call", "grep", {"q": len(events)})]
    out = f.observe_many(events)
    halt = [(i, sid, d.action) for i, sid, d in out if isinstance(d, Decision)]
    assert halt[0] == (10, "a", "halt_session")  # a's fifth identical call
    assert [(i, sid) for i, sid, _ in halt[1:]] == [(12, "a"), (14, "a")]  # blocked, not observed
    assert f.session("a").watchdog.events == 6 and f.session("b").watchdog.events == 8


def test_usage_inside_a_batch(implementation: str) -> None:
    """Usage is charged and measured in the batch, even for a halted session (as on_usage
    does), whose usage rows then carry the halt like its other rows."""
    f = fleet(implementation, mode="enforce", max_session_cost_usd=1.0)
    events = [("h", "turn_start")] + [("h", "call", *LOOP)] * 5  # halted at row 5
    events += [("h", "usage", "claude-opus-4-5", 1000, 10, 0.25), ("h", "text", "hm"),
               ("h", "usage", None, 2000, 10, 0.25), ("u", "turn_start"),
               ("u", "usage", "claude-opus-4-5", 5000, 10, 0.5),
               ("u", "result", "read_file", "x" * 3000), ("u", "usage", None, None, 3, 0.125)]
    out = f.observe_many(events)
    assert [(i, sid, d.action) for i, sid, d in out] == [
        (5, "h", "halt_session"), (6, "h", "halt_session"), (7, "h", "halt_session"),
        (8, "h", "halt_session")]
    h, u = f.session("h").status(), f.session("u").status()
    assert h.spent_usd == 0.5 and h.context.tokens == 2000
    assert u.spent_usd == 0.625 and u.context.tokens == 6000  # 5,000 measured + 1,000 estimated
    assert f.session("h").watchdog.events == 8 and f.session("u").watchdog.events == 4
    # the session ceiling trips on the batch's fourth usage, decided by Guardrails
    out = f.observe_many([("u", "usage", None, None, 3, 0.375), ("u", "call", "grep", "{}")])
    assert [(i, d.action, d.guardrail) for i, _, d in out] == [
        (0, "halt_session", "cost_ceiling"), (1, "halt_session", "cost_ceiling")]


def test_columns_and_event_objects(implementation: str) -> None:
    f = fleet(implementation, mode="enforce")
    n = 6
    out = f.observe_many({
        "session": np.array(["x"] * n),
        "kind": np.array(["call"] * n),
        "name": np.array(["read_file"] * n, dtype=object),
        "args": np.array(['{"path": "a"}'] * n, dtype=object),
    })
    assert [(i, d.action) for i, _, d in out] == [(4, "halt_session"), (5, "halt_session")]
    g = fleet(implementation, mode="enforce")
    out = g.observe_many([("y", TurnStart())] + [("y", Call("grep", {"q": 1}, id=f"c{i}"))
                                                 for i in range(2)]
                         + [("y", Result(id="c1", error="denied"))] * 3)
    assert [(i, a.signal) for i, _, d in out for a in d.alerts] == [
        (5, "repeated-failure")]  # one error three times: one behaviour (SPEC §12.3)
    assert "grep" in out[0][2].alerts[0].reason  # the name came from the call id


def test_context_limits_inside_a_batch(implementation: str) -> None:
    f = fleet(implementation, mode="enforce")  # the 95% cut is enforce's
    events = [("c", "turn_start"), ("c", "usage", "claude-opus-4-5", 160_000, 10, None)]
    events += [("c", "result", "read_file", "x" * 15_000)] * 8  # +5,000 tokens each
    out = f.observe_many(events)
    got = [(i, d.action, d.guardrail) for i, _, d in out if isinstance(d, Decision)]
    assert got == [(7, "cut_turn", "context"), (8, "cut_turn", "context"), (9, "cut_turn", "context")]
    u = f.session("c").utilization()
    assert u.tokens == 190_000 and u.unmeasured_bytes == 90_000  # the cut event counted, no more
    assert f.session("c").status().compaction_pending


def test_bad_batches(implementation: str) -> None:
    from tripwire.errors import InvalidEvent

    f = fleet(implementation)
    with pytest.raises(InvalidEvent, match="unknown kind"):
        f.observe_many([("s", "teleport")])
    with pytest.raises(InvalidEvent, match="at most"):
        f.observe_many([("s", "text", "a", "b")])
    with pytest.raises(InvalidEvent, match="'session' and 'kind'"):
        f.observe_many({"kind": ["call"]})


def test_a_row_of_its_kind_alone_takes_its_fields_as_none(implementation: str) -> None:
    """("s", "result") is a result with every field None (the reference once ran past the end
    of its padding there; found by the engine fuzzer): nothing fires, nothing raises."""
    f = fleet(implementation)
    rows = [("s", "result"), ("s", "call")] * 4
    assert [(i, type(d).__name__) for i, _, d in f.observe_many(rows)
            if getattr(d, "alerts", ())] == []
    assert f.session("s").watchdog.events == 8


def test_a_malformed_row_fails_the_batch_before_any_event(implementation: str) -> None:
    from tripwire.errors import InvalidEvent

    f = fleet(implementation, mode="enforce")
    good = [("a", "call", *LOOP, f"c{i}") for i in range(5)]
    for bad, message in [
        (("a", "usage", "claude-opus-4-5", -5), "event 5: input_tokens must be an integer from 0"),
        # above validate.MAX_TOKENS, below the native fast path's 2**62 (issue 23)
        (("a", "usage", None, 10**12 + 1), "event 5: input_tokens must be an integer from 0"),
        (("a", "usage", None, 10, 1, float("nan")), "event 5: cost_usd must be a finite"),
        (("a", "usage", None, 10, True), "event 5: output_tokens must be an integer from 0"),
        (("a", "text", 42), "event 5: agent text must be a str"),
        (("a", "call", 7, "{}"), "event 5: tool name must be a str"),
        (("a", "result", "grep", None, None, False, "c1", False, "extra"),
         "event 5: a result takes"),
    ]:
        with pytest.raises(InvalidEvent, match=message):
            f.observe_many([*good, bad])
        assert f.session("a").watchdog.events == 0 and not f.session("a").halted


def test_a_refused_reset_mid_batch_reports_what_was_observed(implementation: str) -> None:
    from tripwire.errors import BatchInterrupted, InvalidReset

    f = fleet(implementation, mode="enforce")
    events = [("a", "call", *LOOP, f"c{i}") for i in range(5)]  # the fifth halts
    events += [("a", "reset", "nonsense"), ("b", "call", "grep", "{}")]
    with pytest.raises(BatchInterrupted) as info:
        f.observe_many(events)
    err = info.value
    assert (err.index, err.session_id) == (5, "a") and isinstance(err.error, InvalidReset)
    assert [(i, d.action) for i, _, d in err.outcomes] == [(4, "halt_session")]
    assert f.session("a").watchdog.events == 5 and f.session("a").halted
    assert f.session("a")._ids == {f"c{i}": "read_file" for i in range(5)}
    assert f.session("b").watchdog.events == 0  # after the refused reset: not observed


def test_session_ids_are_checked(implementation: str) -> None:
    from tripwire.errors import InvalidEvent

    f = fleet(implementation)
    with pytest.raises(InvalidEvent, match="session id"):
        f.observe_many([(1, "call", "grep", "{}"), ("s", "call", "grep", "{}")])
    with pytest.raises(InvalidEvent, match="session id"):
        f.session("")


def test_a_check_in_window_pauses_a_task_in_a_batch_as_one_at_a_time(
        implementation: str) -> None:
    """A task with a check-in window is charged row by row (the batch core has no room for
    it): the usage row that reaches the window pauses the task at that row, in a batch as one
    event at a time, and the turn after it is refused under enforce."""
    from tripwire.budgets.caps import Budget

    config = GuardrailsConfig(mode="enforce", unattended=True, max_session_cost_usd=0,
                              budget=Budget(steps=100, checkin={"steps": 3}))
    events: list[tuple] = [("s", "turn_start")]
    for n in range(5):
        events += [("s", "call", "read_file", f'{{"path": "m{n}.py"}}', None),
                   ("s", "result", "read_file", f"contents {n}"),
                   ("s", "usage", "m", 100, 10, 0.001)]
    events += [("s", "turn_end"), ("s", "turn_start")]
    batch_fleet = Fleet(config, implementation=implementation)
    single_fleet = Fleet(config, implementation=implementation)
    got = summary(batch_fleet.observe_many(events))
    assert got == summary(one_by_one(single_fleet, events))
    paused = [row for row in got if row[2] == "cut_turn"]
    assert paused and paused[0][0] == 9, got  # the third usage row
    for fleet in (batch_fleet, single_fleet):
        exhausted = fleet.session("s").task.exhausted_by()
        assert exhausted is not None and exhausted.counter == "checkin:steps"
        assert fleet.session("s").task.steps == 5  # what was spent after the pause counts too


def one_turn(g: Guardrails, i: int) -> None:
    g.start_turn()
    for j in range(6):
        g.on_call("read_file", json.dumps({"path": f"src/pkg{i}/m{j}.py"}))
        g.on_result("read_file", payload=f"contents {i} {j}")
    g.on_usage(model="claude-sonnet-4-5", input_tokens=5000, cost_usd=0.01)
    g.end_turn()


def test_a_fleet_session_holds_only_what_it_used(implementation: str) -> None:
    """A fleet's sessions are many: what a session without a store has not needed yet is not
    made (a call-id map, the context activity, a dict of models for its one model), what is
    the same for all is shared (the state of a task that used nothing yet, as its durable side
    holds it), and its policies hold its Durability, not a bound method of it each."""
    f = fleet(implementation, mode="enforce", unattended=True)
    a, b = f.session("a"), f.session("b")
    one_turn(a, 0)
    one_turn(b, 1)
    for g in (a, b):
        assert g._ids is None  # no call ids given
        assert g._context.activity is None  # no compaction or checkpoint yet
        usage = g._cost_policy.usage
        assert usage.first_model == "claude-sonnet-4-5" and usage.more is None
        assert [m.model for m in g.context_stats().models] == ["claude-sonnet-4-5"]
        assert type(g._task.sessions) is tuple
        for policy in (g._policy, g._cost_policy, g._halts, g._context_policy):
            assert policy._durable is g._durable
        assert g._halts is not g._halts  # a view made when asked: the policies hold the halts
        assert g._policy.pending == ()  # nothing pending after the turn: the shared empty tuple
    assert a._task.durable.written is b._task.durable.written
    # what the configuration decides is made once and shared: the cost bounds, the model's
    # limits, the empty feedback queue (each session gets its own at its first note)
    assert a._cost._bounds is b._cost._bounds
    assert a._context.limits is b._context.limits
    assert a._policy.feedback is b._policy.feedback and a._policy.feedback.shared
    a.on_call("read_file", "{}", id="c1")  # the map is made at the first id
    assert a._ids == {"c1": "read_file"}
    assert a.on_result(None, payload="x", id="c1") is not None


def test_a_note_for_one_session_stays_in_its_own_queue(implementation: str) -> None:
    """Sessions share an empty feedback queue until their first note: a note queued for one
    session is told to it alone, once, and the others' queues stay empty."""
    f = fleet(implementation, mode="feedback", unattended=False)
    loud, quiet = f.session("loud"), f.session("quiet")
    for g in (loud, quiet):
        g.start_turn()
    for _ in range(5):  # the fifth equivalent call in a row alerts
        loud.on_call("read_file", '{"path": "a.py"}')
        loud.on_result("read_file", payload="same")
    quiet.on_call("read_file", '{"path": "b.py"}')
    for g in (loud, quiet):
        g.end_turn()
    assert "repeated-tool-call" in loud.start_turn().feedback
    assert quiet.start_turn().feedback == ""
    assert not loud._policy.feedback.shared and len(loud._policy.feedback) == 0
    assert quiet._policy.feedback.shared and len(quiet._policy.feedback) == 0
    assert f.session("new").start_turn().feedback == ""
