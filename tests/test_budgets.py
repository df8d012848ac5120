"""Task budgets and terminal outcomes (SPEC §7.1, §7.2): exact outcomes at exact events, on both
engines, the seed's regression traces (``seeds/runaway-agents.md``: a repeating tool, an
alternating two-step cycle, a permanently blocking stop hook, a child exhausting its
allocation, a restart near the limit) and the twenty-step example."""

from __future__ import annotations

import json
import os
import signal
import sqlite3
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest
from conftest import IMPLEMENTATIONS

from tripwire import Guardrails, GuardrailsConfig
from tripwire.base.decision import CONTINUE
from tripwire.budgets.caps import Budget
from tripwire.budgets.task import Task
from tripwire.cli.main import main
from tripwire.durability.sqlite import SQLiteStore
from tripwire.errors import ConfigError, GuardrailHalted
from tripwire.fleet.fleet import Fleet


class Clock:
    """A host clock the test moves by hand."""

    def __init__(self, now: float = 1000.0) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now


def guard(implementation: str, mode: str = "enforce", *, task: Task | None = None,
          clock: Clock | None = None, store: Any = None, session_id: str = "s1",
          **config: Any) -> Guardrails:
    return Guardrails(GuardrailsConfig(mode=mode, unattended=False, **config),
                      implementation=implementation, task=task, clock=clock, store=store,
                      session_id=session_id)


# -- counters, defaults, notes ------------------------------------------------------------------


def test_defaults_follow_the_table() -> None:
    assert Budget.defaults(False).caps() == {
        "steps": None, "tool_calls": None, "tokens": None, "usd": None, "deadline_s": None,
        "tool_timeout_s": None, "stop_rejections": 8, "retries": None, "reviews": 10}
    assert Budget.defaults(True).caps()["steps"] == 1000
    interactive = GuardrailsConfig(unattended=False).resolve().budget
    unattended = GuardrailsConfig(unattended=True, budget=Budget(steps=0)).resolve().budget
    assert interactive.caps()["steps"] is None and unattended.caps()["steps"] is None
    with pytest.raises(ConfigError, match="unknown budget counter"):
        Budget.from_mapping({"step": 3})
    with pytest.raises(ConfigError, match=r"a number from 0 \(off\)"):
        Budget(steps=-1)


def test_each_counter_is_separate(implementation: str) -> None:
    task = Task(budget=Budget(steps=3, tool_calls=100, tokens=1000, usd=1.0))
    g = guard(implementation, task=task)
    g.start_turn()
    for i in range(2):
        assert g.on_usage(input_tokens=100, output_tokens=20, cost_usd=0.25) is CONTINUE
        assert not g.on_call("read_file", {"path": f"f{i}"}).cut_turn
    assert (task.steps, task.tool_calls, task.tokens, task.used("usd")) == (2, 2, 240, 0.5)
    assert task.retries == task.stop_rejections == 0
    cut = g.on_usage(input_tokens=100, output_tokens=20, cost_usd=0.25)
    assert cut.cut_turn and cut.guardrail == "budget"
    assert task.outcome is not None and str(task.outcome) == "exhausted(steps)"
    report = task.outcome.report
    assert report.counter("tokens").used == 360 and report.counter("tokens").cap == 1000
    assert report.counter("usd").used == pytest.approx(0.75)


def test_notes_at_50_and_80_percent_join_the_feedback_block(implementation: str) -> None:
    task = Task(budget=Budget(tool_calls=10))
    g = guard(implementation, mode="feedback", task=task)
    seen = []
    for i in range(9):
        seen.append(g.start_turn().feedback)
        g.on_call("read_file", {"path": f"f{i}"})
        g.end_turn()
    notes = [(i, f.splitlines()[1]) for i, f in enumerate(seen) if f]
    assert notes == [(5, "- task-budget: You have used 5 of 10 tool calls for this task."),
                     (8, "- task-budget: You have used 8 of 10 tool calls for this task.")]
    assert seen[5].startswith("[watchdog]")
    # warn: nothing reaches the model
    quiet = guard(implementation, mode="warn", task=Task(budget=Budget(tool_calls=4)))
    feedback = []
    for i in range(4):
        feedback.append(quiet.start_turn().feedback)
        quiet.on_call("read_file", {"path": f"f{i}"})
    assert feedback == ["", "", "", ""]


def test_tool_call_cap_counts_the_call_that_would_pass_it(implementation: str) -> None:
    task = Task(budget=Budget(tool_calls=3))
    g = guard(implementation, task=task)
    g.start_turn()
    decisions = [g.on_call("read_file", {"path": f"f{i}"}) for i in range(4)]
    assert [d.cut_turn for d in decisions] == [False, False, False, True]
    assert decisions[3].guardrail == "budget"
    assert str(task.outcome) == "exhausted(tool_calls)"
    g.end_turn()
    with pytest.raises(GuardrailHalted) as refused:
        g.start_turn()
    assert refused.value.guardrails == ("budget",)


def test_a_budget_cut_and_a_watchdog_halt_at_one_call_report_both(implementation: str
                                                                   ) -> None:
    """Issue 23: the call that exhausts the task also trips the watchdog. The alert used to be
    lost (the call never reached the watchdog); now both are reported and the stronger
    decision stands: the watchdog's halt over the budget's cut."""
    task = Task(budget=Budget(tool_calls=4))
    g = guard(implementation, task=task)
    g.start_turn()
    decisions = [g.on_call("read_file", {"path": "a.py"}) for _ in range(5)]
    assert [d.action for d in decisions] == ["continue"] * 4 + ["halt_session"]
    assert decisions[4].guardrail == "watchdog"
    assert [a.signal for a in decisions[4].alerts] == ["repeated-tool-call"]
    assert str(task.outcome) == "exhausted(tool_calls)"  # the exhaustion stands too
    assert g.halted


def test_a_budget_cut_keeps_a_warn_alert_of_the_same_call(implementation: str) -> None:
    """A weaker watchdog verdict (a warn alert) does not replace the cut: the cut stands and
    carries the alert."""
    from tripwire import WatchdogConfig

    task = Task(budget=Budget(tool_calls=2))
    watchdog = WatchdogConfig(signals={"repeated-tool-name": {"threshold": 3}})
    g = guard(implementation, task=task, watchdog=watchdog)
    g.start_turn()
    decisions = [g.on_call("read_file", {"path": f"f{i}"}) for i in range(3)]
    assert [d.action for d in decisions] == ["continue", "continue", "cut_turn"]
    assert decisions[2].guardrail == "budget"
    assert [(a.signal, a.severity) for a in decisions[2].alerts] == [
        ("repeated-tool-name", "warn")]


def test_replay_reports_the_alert_at_the_events_budget_cut() -> None:
    from conftest import ROOT

    done = subprocess.run([sys.executable, "-m", "tripwire", "replay",
                           str(ROOT / "corpus" / "examples" / "read-file-loop.jsonl"),
                           "--mode", "enforce", "--max-tool-calls", "5"],
                          capture_output=True, text=True, timeout=120)
    records = [json.loads(line) for line in done.stdout.splitlines()]
    kinds = [(r["kind"], r.get("event"), r.get("signal") or r.get("action") or
              r.get("outcome")) for r in records if r["kind"] != "summary"]
    assert kinds[:3] == [("alert", 18, "repeated-tool-call"), ("decision", 18, "halt_session"),
                         ("outcome", 18, "exhausted")]
    assert records[-1]["alerts"] == 1


def test_warn_reports_the_exhaustion_and_cuts_nothing(implementation: str) -> None:
    task = Task(budget=Budget(steps=2))
    g = guard(implementation, mode="warn", task=task)
    g.start_turn()
    assert g.on_usage(input_tokens=1) is CONTINUE
    assert g.on_usage(input_tokens=1) is CONTINUE
    assert task.outcome is not None and task.outcome.kind == "exhausted"
    g.end_turn()
    g.start_turn()  # not refused
    assert task.finish("done").kind == "exhausted"


# -- stop hooks -------------------------------------------------------------------------------


def test_a_permanently_blocking_stop_hook_exhausts_at_the_9th_rejection(
        implementation: str) -> None:
    g = guard(implementation)
    g.start_turn()
    g.on_text("The parser is fixed; all tests pass.")
    decisions = [g.on_stop_attempt(False) for _ in range(9)]
    assert [d.cut_turn for d in decisions] == [False] * 8 + [True]
    outcome = g.task.outcome
    assert outcome is not None and outcome.kind == "exhausted"
    assert outcome.counter == "stop_rejections"
    assert outcome.answer == "The parser is fixed; all tests pass." and not outcome.verified
    assert outcome.report.counter("stop_rejections").used == 9
    # a cap does not make the rejected answer acceptable
    final = g.task.finish("The parser is fixed; all tests pass.")
    assert final.kind == "exhausted" and not final.verified and not final.answered


def test_an_accepted_stop_then_finish_is_answered(implementation: str) -> None:
    g = guard(implementation)
    g.start_turn()
    for _ in range(8):
        g.on_stop_attempt(False)
    assert g.on_stop_attempt(True) is CONTINUE
    outcome = g.task.finish("done", evidence="tests pass")
    assert outcome.kind == "answered" and outcome.verified and outcome.evidence == "tests pass"


# -- children ---------------------------------------------------------------------------------


def test_a_child_exhausting_its_allocation_while_the_parent_continues(
        implementation: str) -> None:
    parent = Task("fix the test", Budget(steps=10))
    child = parent.child({"steps": 3}, objective="look at the parser")
    worker = guard(implementation, task=child, session_id="worker")
    lead = guard(implementation, task=parent, session_id="lead")
    worker.start_turn()
    decisions = [worker.on_usage(input_tokens=10) for _ in range(3)]
    assert [d.cut_turn for d in decisions] == [False, False, True]
    assert child.outcome is not None and child.outcome.counter == "steps"
    assert child.outcome.by_task == child.task_id
    assert parent.steps == 3 and parent.outcome is None  # charged at once, not exhausted
    lead.start_turn()
    assert [lead.on_usage(input_tokens=10).cut_turn for _ in range(6)] == [False] * 6
    outcome = parent.finish("fixed")
    assert outcome.kind == "answered"
    assert outcome.report.counter("steps").used == 9
    (child_report,) = outcome.report.children
    assert child_report.counter("steps").used == 3 and child_report.counter("steps").cap == 3


def test_a_child_exhausting_the_parents_remaining_allowance(implementation: str) -> None:
    parent = Task("fix the test", Budget(steps=5))
    lead = guard(implementation, task=parent, session_id="lead")
    lead.start_turn()
    for _ in range(3):
        lead.on_usage(input_tokens=10)
    child = parent.child({"steps": 10})
    worker = guard(implementation, task=child, session_id="worker")
    worker.start_turn()
    decisions = [worker.on_usage(input_tokens=10) for _ in range(2)]
    assert [d.cut_turn for d in decisions] == [False, True]
    ex = child.exhausted
    assert ex is not None and (ex.counter, ex.by_task, ex.remaining) == (
        "steps", parent.task_id, 0.0)
    assert child.outcome is not None and child.outcome.by_task == parent.task_id
    assert child.steps == 2 and parent.steps == 5
    assert parent.outcome is not None and str(parent.outcome) == "exhausted(steps)"
    cut = lead.on_call("read_file", {"path": "a"})  # the lead's turn in flight is cut too
    assert cut.cut_turn and cut.guardrail == "budget"


def test_an_allowance_is_a_cap_not_a_reservation() -> None:
    parent = Task(budget=Budget(steps=10))
    parent.child({"steps": 8})
    for _ in range(9):
        assert parent.step() is None
    assert parent.remaining()["steps"] == 1


# -- time -------------------------------------------------------------------------------------


def test_a_tool_timeout_cancels_the_call_and_counts_as_a_failure(implementation: str) -> None:
    clock = Clock()
    task = Task(budget=Budget(tool_timeout_s=30), clock=clock)
    g = guard(implementation, task=task, clock=clock)
    g.start_turn()
    assert not g.on_call("bash", {"command": "make test"}, id="c1").cut_turn
    clock.now += 29
    assert g.poll() is CONTINUE
    clock.now += 1
    cancel = g.poll()
    assert cancel.cancel_tool and cancel.call_ids == ("c1",) and cancel.proceed
    assert not cancel.cut_turn and cancel.guardrail == "budget"
    assert task.tool_timeouts == 1 and task.exhausted is None  # not an exhaustion
    assert g.on_result(id="c1", payload="late") is CONTINUE  # the late result is not observed
    # three timeouts in a row are three failed results for the watchdog
    for i in (2, 3):
        g.on_call("bash", {"command": f"make test{i}"}, id=f"c{i}")
        clock.now += 30
        decision = g.poll()
        assert decision.call_ids == (f"c{i}",)
    # one timeout error, thrice: one behaviour, repeated-failure's alone (SPEC §12.3)
    assert [a.signal for a in decision.alerts] == ["repeated-failure"]
    assert task.finish("gave up").report.tool_timeouts == 3


def test_calls_without_a_result_are_uncertain_side_effects(implementation: str) -> None:
    g = guard(implementation)
    g.start_turn()
    g.on_call("write_file", {"path": "a"}, id="w1")
    g.on_call("read_file", {"path": "a"}, id="r1")
    g.on_result(id="r1", payload="x")
    outcome = g.task.interrupt("operator stop", unfinished="the parser fix is not applied")
    assert outcome.kind == "interrupted" and outcome.reason == "operator stop"
    assert [(u.call_id, u.name) for u in outcome.report.uncertain] == [("w1", "write_file")]
    assert outcome.report.unfinished == "the parser fix is not applied"


def test_a_halted_session_ends_its_task_halted(implementation: str) -> None:
    """The seed's repeating tool under a budget: the watchdog halts it long before the budget
    ends it, and the task's outcome says which guardrail."""
    task = Task(budget=Budget(steps=20))
    g = guard(implementation, task=task)
    g.start_turn()
    for i in range(5):
        g.on_usage(input_tokens=10)
        d = g.on_call("bash", {"command": "pytest tests/test_parser.py"}, id=f"c{i}")
    assert d.halt_session and [a.signal for a in d.alerts] == ["repeated-tool-call"]
    outcome = task.finish("tried")
    assert (outcome.kind, outcome.guardrail) == ("halted", "watchdog")
    assert outcome.report.counter("steps").used == 5
    assert outcome.report.guardrails[0]["action"] == "halt_session"


def test_an_alternating_cycle_under_a_budget(implementation: str) -> None:
    task = Task(budget=Budget(steps=20, tool_calls=50))
    g = guard(implementation, task=task)
    g.start_turn()
    block = [("edit_file", {"path": "parser.py", "patch": "a"}),
             ("bash", {"command": "pytest tests/test_parser.py"})]
    decisions = []
    for i in range(6):
        g.on_usage(input_tokens=10)
        decisions.append(g.on_call(*block[i % 2]))
    assert [d.halt_session for d in decisions] == [False] * 5 + [True]
    assert [a.signal for a in decisions[5].alerts] == ["alternating-tool-cycle"]
    assert task.tool_calls == 6 and task.steps == 6
    assert str(task.finish()) == "halted(watchdog)"


# -- fleets -----------------------------------------------------------------------------------


def test_a_fleet_hosts_a_task_whose_sessions_charge_it_together(implementation: str) -> None:
    fleet = Fleet(GuardrailsConfig(mode="enforce", unattended=False),
                  implementation=implementation)
    task = fleet.task("t1", "fix the test", {"tool_calls": 4})
    a, b = fleet.session("a", task=task), fleet.session("b", task=task)
    assert fleet.task("t1") is task and a.task is task and b.task is task
    a.start_turn()
    b.start_turn()
    cuts = [g.on_call("read_file", {"path": f"f{i}"}).cut_turn
            for i, g in enumerate([a, b, a, b, a])]
    assert cuts == [False, False, False, False, True]
    assert task.tool_calls == 5
    assert b.on_call("read_file", {"path": "z"}).cut_turn  # the other session's turn too


def test_batch_ingest_charges_a_bounded_task_row_by_row(implementation: str) -> None:
    fleet = Fleet(GuardrailsConfig(mode="enforce", unattended=False),
                  implementation=implementation)
    task = fleet.task("t", budget={"tool_calls": 2})
    fleet.session("s", task=task)
    rows = [("s", "turn_start")] + [("s", "call", "read_file", json.dumps({"path": str(i)}))
                                    for i in range(4)] + [("s", "usage", "m", 10, 5, 0.01)]
    out = fleet.observe_many(rows)
    assert [(i, d.action) for i, _, d in out] == [(3, "cut_turn"), (4, "cut_turn"),
                                                  (5, "cut_turn")]
    assert task.tool_calls == 3 and task.steps == 1 and task.tokens == 15


# -- replay -----------------------------------------------------------------------------------

SPELLINGS = ["pytest tests/test_parser.py", "python -m pytest tests/test_parser.py",
             "python3 -m pytest tests/test_parser.py -q", "py.test tests/test_parser.py",
             "cd . && pytest -x tests/test_parser.py"]


def twenty_steps(path: Path) -> Path:
    """The seed's example: the same missing dependency each time, the command respelled on
    each attempt (no two calls alike), one attempt per turn."""
    events: list[dict[str, Any]] = [{"type": "task_start", "objective": "fix the parser test",
                                     "budget": {"steps": 20}}]
    for i in range(25):
        events += [
            {"type": "turn_start"},
            {"type": "usage", "model": "m", "input_tokens": 100, "output_tokens": 10,
             "cost_usd": 0.01},
            {"type": "text", "text": "Running the test again."},
            {"type": "call", "name": "bash", "id": f"c{i}",
             "args": {"command": f"{SPELLINGS[i % 5]}{' ' * (i // 5)} # attempt {i}"}},
            {"type": "result", "id": f"c{i}",
             "payload": f"E   ModuleNotFoundError: No module named 'yaml' (run {i})"},
            {"type": "turn_end"},
        ]
    path.write_text("".join(json.dumps(e) + "\n" for e in events))
    return path


def replay(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, list[dict[str, Any]]]:
    code = main(["replay", *argv])
    return code, [json.loads(line) for line in capsys.readouterr().out.splitlines()]


def test_twenty_steps_no_detector_fires_the_budget_ends_it(
        tmp_path: Path, implementation: str, capsys: pytest.CaptureFixture[str]) -> None:
    path = twenty_steps(tmp_path / "twenty.jsonl")
    code, records = replay(capsys, str(path), "--mode", "enforce", "--implementation",
                           implementation, "--fail-on", "exhausted")
    assert code == 3
    assert [r for r in records if r["kind"] == "alert"] == []
    cut = [r for r in records if r["kind"] == "decision" and r["action"] == "cut_turn"]
    (outcome,) = [r for r in records if r["kind"] == "outcome"]
    usage_20 = 1 + 19 * 6 + 1  # the 20th turn's usage event
    assert [c["event"] for c in cut] == [usage_20] and cut[0]["guardrail"] == "budget"
    assert (outcome["event"], outcome["outcome"], outcome["counter"]) == (
        usage_20, "exhausted", "steps")
    assert outcome["report"]["counters"]["steps"] == {"used": 20, "cap": 20, "remaining": 0}
    refused = [r["event"] for r in records if r.get("action") == "refuse_turn"]
    assert refused == [1 + 6 * t for t in range(20, 25)]
    feedback = [(r["event"], r["text"].splitlines()[1]) for r in records
                if r["kind"] == "feedback"]
    assert feedback == [(61, "- task-budget: You have used 10 of 20 model steps for this task."),
                        (97, "- task-budget: You have used 16 of 20 model steps for this task.")]


def test_replay_flags_bound_the_implicit_task(
        tmp_path: Path, implementation: str, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "s.jsonl"
    lines = [{"type": "turn_start"}]
    lines += [{"type": "call", "name": "read_file", "args": {"path": f"f{i}"}, "ts": 10.0 + i}
              for i in range(5)]
    path.write_text("".join(json.dumps(e) + "\n" for e in lines))
    code, records = replay(capsys, str(path), "--implementation", implementation,
                           "--max-tool-calls", "3")
    assert code == 0
    (outcome,) = [r for r in records if r["kind"] == "outcome"]
    assert (outcome["event"], outcome["counter"]) == (4, "tool_calls")  # warn: nothing cut
    assert records[-1]["outcomes"] == {"exhausted": 1}
    code, records = replay(capsys, str(path), "--implementation", implementation,
                           "--deadline-s", "2.5", "--mode", "enforce")
    (outcome,) = [r for r in records if r["kind"] == "outcome"]
    # the task's time starts at the first ts (10.0, event 1): event 4 (ts 13.0) is past 2.5 s
    assert (outcome["event"], outcome["counter"]) == (4, "deadline_s")
    assert [r["event"] for r in records if r["kind"] == "decision"] == [4]


def test_replay_a_blocking_stop_hook_and_a_tool_timeout(
        tmp_path: Path, implementation: str, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "stop.jsonl"
    events: list[dict[str, Any]] = [{"type": "task_start", "objective": "o"},
                                    {"type": "turn_start", "ts": 0},
                                    {"type": "text", "text": "Done: the parser is fixed."}]
    events += [{"type": "stop_attempt", "accepted": False}] * 9
    events += [{"type": "task_end", "answer": "Done: the parser is fixed."}]
    path.write_text("".join(json.dumps(e) + "\n" for e in events))
    code, records = replay(capsys, str(path), "--mode", "enforce", "--implementation",
                           implementation)
    assert code == 0
    (outcome,) = [r for r in records if r["kind"] == "outcome"]
    assert (outcome["event"], outcome["outcome"], outcome["counter"]) == (
        11, "exhausted", "stop_rejections")
    assert outcome["answer"] == "Done: the parser is fixed." and outcome["verified"] is False
    timeout = tmp_path / "timeout.jsonl"
    timeout.write_text("".join(json.dumps(e) + "\n" for e in [
        {"type": "turn_start", "ts": 100},
        {"type": "call", "name": "bash", "id": "c1", "args": {"command": "sleep 999"},
         "ts": 100},
        {"type": "text", "text": "waiting", "ts": 125},
        {"type": "text", "text": "still waiting", "ts": 131},
        {"type": "result", "id": "c1", "payload": "late", "ts": 200}]))
    code, records = replay(capsys, str(timeout), "--implementation", implementation,
                           "--tool-timeout-s", "30")
    assert code == 0
    (cancel,) = [r for r in records if r["kind"] == "decision"]
    assert (cancel["event"], cancel["action"], cancel["call_ids"]) == (3, "cancel_tool", ["c1"])
    (outcome,) = [r for r in records if r["kind"] == "outcome"]
    assert outcome["outcome"] == "interrupted" and outcome["report"]["tool_timeouts"] == 1


def test_a_bad_task_event_is_a_typed_error(tmp_path: Path,
                                           capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "bad.jsonl"
    path.write_text(json.dumps({"type": "task_start", "budget": {"stepz": 3}}) + "\n")
    assert main(["replay", str(path)]) == 2
    err = capsys.readouterr().err
    assert "unknown field 'budget' counter(s) 'stepz'" in err and len(err.splitlines()) == 1


# -- durability -------------------------------------------------------------------------------

NEAR_THE_LIMIT = """
    import sys
    from tripwire import Guardrails, GuardrailsConfig
    from tripwire.durability.sqlite import SQLiteStore
    db, implementation, steps = sys.argv[1], sys.argv[2], int(sys.argv[3])
    g = Guardrails(GuardrailsConfig(mode="enforce", unattended=True), session_id="s",
                   implementation=implementation, store=SQLiteStore(db))
    g.start_turn()
    out = []
    for _ in range(steps):
        d = g.on_usage(model="m", input_tokens=10, output_tokens=1)
        out.append(d.action)
    print(" ".join(out), flush=True)
    print("ready", flush=True)
    sys.stdin.readline()  # wait to be killed
"""


def run_until_ready(script: str, *args: str) -> str:
    proc = subprocess.Popen([sys.executable, "-c", textwrap.dedent(script), *args],
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    assert proc.stdout is not None
    out = proc.stdout.readline()
    assert proc.stdout.readline() == "ready\n"
    os.kill(proc.pid, signal.SIGKILL)  # no exit handler, no flush: what is stored is stored
    proc.wait(timeout=60)
    return out.strip()


def test_a_restart_near_the_limit_resumes_the_consumption(tmp_path: Path,
                                                          implementation: str) -> None:
    """Real processes: killed after 995 of 1,000 steps (the unattended default), restarted,
    exhausted at the 5th step more."""
    db = str(tmp_path / "g.sqlite")
    first = run_until_ready(NEAR_THE_LIMIT, db, implementation, "995").split()
    assert first == ["continue"] * 995
    second = run_until_ready(NEAR_THE_LIMIT, db, implementation, "5").split()
    assert second == ["continue"] * 4 + ["cut_turn"]
    store = SQLiteStore(db)
    assert all(r.intact for r in store.verify())
    g = Guardrails(GuardrailsConfig(mode="enforce", unattended=True), session_id="s",
                   implementation=implementation, store=store)
    assert g.task.steps == 1000 and g.task.exhausted is not None
    with pytest.raises(GuardrailHalted):
        g.start_turn()


DEADLINE = """
    import sys, time
    from tripwire.budgets.task import Task
    from tripwire.durability.sqlite import SQLiteStore
    db, offset = sys.argv[1], float(sys.argv[2])
    task = Task("o", {"deadline_s": 30}, task_id="t", store=SQLiteStore(db),
                clock=lambda: time.time() + offset)
    ex = task.check_time()
    print(ex.counter if ex else "running", round(task.elapsed()), flush=True)
    print("ready", flush=True)
    sys.stdin.readline()
"""


def test_a_deadline_holds_across_a_restart(tmp_path: Path) -> None:
    db = str(tmp_path / "g.sqlite")
    assert run_until_ready(DEADLINE, db, "0") == "running 0"
    # a restart does not move the start: 31 s later by the host's clock it is past
    assert run_until_ready(DEADLINE, db, "0").split()[0] == "running"
    assert run_until_ready(DEADLINE, db, "31").split()[0] == "deadline_s"
    task = Task("o", {"deadline_s": 30}, task_id="t", store=SQLiteStore(db))
    assert task.exhausted is not None and task.finish("late").kind == "exhausted"


def test_a_deleted_budget_row_is_caught_by_the_chain(tmp_path: Path, implementation: str,
                                                     capsys: pytest.CaptureFixture[str]) -> None:
    db = tmp_path / "g.sqlite"
    task = Task("o", {"steps": 10}, task_id="t", store=SQLiteStore(db))
    g = guard(implementation, task=task)
    g.start_turn()
    for _ in range(6):
        g.on_usage(input_tokens=1)
    assert task.steps == 6
    with sqlite3.connect(db) as raw:  # hide the last 3 steps' rows but one
        raw.execute("DELETE FROM rows WHERE session = 'task:t' AND kind = 'budget' AND seq = "
                    "(SELECT max(seq) - 1 FROM rows WHERE session = 'task:t')")
    assert main(["verify", str(db)]) == 1
    assert "task:t: BROKEN" in capsys.readouterr().out
    restored = Task("o", {"steps": 10}, task_id="t", store=SQLiteStore(db))
    assert restored.tampered is not None
    g2 = guard(implementation, task=restored, session_id="s2")
    with pytest.raises(GuardrailHalted) as refused:
        g2.start_turn()
    assert refused.value.guardrails == ("budget",)
    # a session on the same store is halted too: the store as a whole is short of a row
    g3 = guard(implementation, store=SQLiteStore(db), session_id="s3")
    assert g3.halted and g3.status().halted_by == ("watchdog",)
    assert (restored.finish("x").kind, restored.outcome.reason) == (
        "blocked", "history_tampered")


def test_status_shows_tasks_and_outcomes(tmp_path: Path, implementation: str,
                                         capsys: pytest.CaptureFixture[str]) -> None:
    db = tmp_path / "g.sqlite"
    task = Task("fix the test", {"steps": 2}, task_id="t", store=SQLiteStore(db))
    g = guard(implementation, task=task, store=SQLiteStore(db))
    g.start_turn()
    g.on_usage(input_tokens=1, cost_usd=0.01)
    g.on_usage(input_tokens=1, cost_usd=0.01)
    assert main(["status", str(db)]) == 0
    lines = [json.loads(x) for x in capsys.readouterr().out.splitlines()]
    (line,) = [x for x in lines if x["kind"] == "task"]
    assert (line["task"], line["objective"], line["outcome"], line["counter"]) == (
        "t", "fix the test", "exhausted", "steps")
    assert line["used"]["steps"] == 2 and line["chain"] == "intact"
    assert [x["session"] for x in lines if x["kind"] == "session"] == ["s1"]


def test_the_supervisor_charges_the_task_it_serves_and_is_heard_next_turn(
        implementation: str) -> None:
    task = Task(budget=Budget(steps=3, reviews=4))
    g = guard(implementation, mode="feedback", task=task)
    g.start_turn()
    g.on_usage(input_tokens=10)
    assert task.charge("reviews") is None
    assert task.charge_usage(input_tokens=500, output_tokens=50, cost_usd=0.02) is None
    task.tell("The last three test runs failed before any test ran: inspect the install.")
    g.end_turn()
    block = g.start_turn().feedback.splitlines()
    assert block[1:3] == [
        "- task-budget: You have used 2 of 3 model steps for this task.",
        "- progress-supervisor: The last three test runs failed before any test ran: "
        "inspect the install."]
    assert (task.steps, task.tokens, task.used("usd")) == (2, 560, 0.02)
    assert [task.charge("reviews") is None for _ in range(4)] == [True] * 3 + [False]
    assert str(task.outcome) == "exhausted(reviews)"  # the 5th review passes the cap of 4
    assert [n for _, n in task.notes] == ["You have used 2 of 4 progress reviews for this task.",
                                          "You have used 4 of 4 progress reviews for this task."]


def test_a_child_of_a_stored_task_restores_with_its_consumption(tmp_path: Path) -> None:
    db = tmp_path / "g.sqlite"
    parent = Task("o", {"steps": 100}, task_id="p", store=SQLiteStore(db))
    child = parent.child({"steps": 5}, task_id="c")
    for _ in range(3):
        child.step()
    parent2 = Task("o", {"steps": 100}, task_id="p", store=SQLiteStore(db))
    child2 = parent2.child({"steps": 5}, task_id="c")
    assert (parent2.steps, child2.steps) == (3, 3)
    child2.step()
    assert child2.step() is not None and parent2.steps == 5


def test_a_session_restored_later_resumes_its_implicit_task(tmp_path: Path,
                                                           implementation: str) -> None:
    db = tmp_path / "g.sqlite"
    config = GuardrailsConfig(mode="enforce", unattended=False, budget=Budget(steps=3))
    g = Guardrails(config, implementation=implementation, store=SQLiteStore(db))
    g.start_turn()
    g.on_usage(input_tokens=1)
    g.on_usage(input_tokens=1)
    later = Guardrails(config, implementation=implementation)
    later.restore(SQLiteStore(db))
    assert later.task.steps == 2
    later.start_turn()
    assert later.on_usage(input_tokens=1).cut_turn
    again = Guardrails(config, implementation=implementation, store=SQLiteStore(db))
    assert again.task.steps == 3 and str(again.task.outcome) == "exhausted(steps)"


def test_batch_ingest_charges_usage_rows_of_a_step_bounded_task(implementation: str) -> None:
    fleet = Fleet(GuardrailsConfig(mode="enforce", unattended=False),
                  implementation=implementation)
    bounded = fleet.session("bounded", task=fleet.task("t", budget={"steps": 2}))
    free = fleet.session("free")  # its implicit task caps nothing a row advances
    rows: list[tuple[Any, ...]] = [("bounded", "turn_start"), ("free", "turn_start")]
    for i in range(3):
        rows += [("bounded", "usage", "m", 10, 5, 0.01), ("free", "usage", "m", 10, 5, 0.01),
                 ("bounded", "call", "read_file", json.dumps({"path": str(i)})),
                 ("free", "call", "read_file", json.dumps({"path": str(i)}))]
    out = fleet.observe_many(rows)
    assert [(i, s, d.action) for i, s, d in out] == [
        (6, "bounded", "cut_turn"), (8, "bounded", "cut_turn"), (10, "bounded", "cut_turn"),
        (12, "bounded", "cut_turn")]
    assert str(bounded.task.outcome) == "exhausted(steps)" and bounded.task.steps == 3
    assert free.task.used("usd") == pytest.approx(0.03) and free.task.outcome is None
    # the rows the batch core observed charge the free session's task too, once per batch
    assert (free.task.steps, free.task.tokens, free.task.tool_calls) == (3, 45, 3)


# -- the tool-call counter's fast path (native: C integers the core holds a typed reference to)


def test_every_reader_sees_the_fast_paths_tool_call_count(tmp_path: Path,
                                                          implementation: str) -> None:
    """Calls below the task's mark are charged on the fast path (on the native engine through
    the task's native counter); the count, notes, cap, report and store see each one."""
    db = tmp_path / "g.sqlite"
    task = Task("o", {"tool_calls": 10}, task_id="t", store=SQLiteStore(db))
    g = guard(implementation, task=task)
    expected = "tripwire._native" if implementation == "native" else "tripwire.budgets.calls"
    assert type(task.calls).__module__ == expected  # the engine's own counter
    g.start_turn()
    for i in range(4):
        assert g.on_call("read_file", {"path": f"f{i}"}, id=f"c{i}") is CONTINUE
    assert (task.tool_calls, task.call_mark) == (4, 5)  # the next call reaches the 50% note
    assert task.remaining()["tool_calls"] == 6 and task.notes == ()
    assert g.on_call("read_file", {"path": "f4"}) is CONTINUE
    assert [n for _, n in task.notes] == ["You have used 5 of 10 tool calls for this task."]
    g.end_turn()  # written at the turn end
    restored = Task("o", {"tool_calls": 10}, task_id="t", store=SQLiteStore(db))
    assert restored.tool_calls == 5 and restored.call_mark == 8
    report = task.report()
    assert report.counter("tool_calls").used == 5 and report.counter("tool_calls").cap == 10
    assert [u.call_id for u in report.uncertain] == ["c0", "c1", "c2", "c3"]
    g.start_turn()
    decisions = [g.on_call("read_file", {"path": f"g{i}"}) for i in range(6)]
    assert [d.cut_turn for d in decisions] == [False] * 5 + [True]
    assert str(task.outcome) == "exhausted(tool_calls)" and task.tool_calls == 11


def other(implementation: str) -> str:
    name = "python" if implementation == "native" else "native"
    if name not in IMPLEMENTATIONS:
        pytest.skip(f"needs both engines (TRIPWIRE_TEST_IMPLEMENTATIONS has no {name})")
    return name


def test_a_task_shared_across_engines_counts_every_call_once(implementation: str) -> None:
    """A task one session runs, then two (of different engines), then one again: one count.
    The second session keeps the counter the first holds (never a copy of it); a shared task
    takes the locked path on every call, and the fast path again when one session is left."""
    task = Task(budget=Budget(tool_calls=9))
    first = guard(implementation, task=task, session_id="first")
    kind = type(task.calls)
    first.start_turn()
    assert [first.on_call("grep", {"q": i}).cut_turn for i in range(3)] == [False] * 3
    second = guard(other(implementation), task=task, session_id="second")
    assert type(task.calls) is kind and task.call_mark == 0  # shared: the locked path
    second.start_turn()
    calls = [g.on_call("grep", {"q": 10 + i}).cut_turn for i, g in
             enumerate([second, first, second])]
    assert calls == [False] * 3 and task.tool_calls == 6
    second.run_task(Task())  # the second session leaves the task
    assert task.call_mark == 8  # the 80% note's call (ceil(7.2)); the 50% one came at 5
    assert [n for _, n in task.notes] == ["You have used 5 of 9 tool calls for this task."]
    assert [first.on_call("grep", {"q": 20 + i}).cut_turn for i in range(4)] == [
        False, False, False, True]
    assert str(task.outcome) == "exhausted(tool_calls)" and task.tool_calls == 10
    assert second.task.tool_calls == 0


def test_a_session_moving_to_another_task_leaves_the_first_ones_count_exact(
        implementation: str) -> None:
    """The native core holds the count of the task its session runs alone: a session that
    moves on leaves the count with the task, and charges the next task only."""
    first, second = Task(budget=Budget(tool_calls=9)), Task(budget=Budget(tool_calls=9))
    g = guard(implementation, task=first)
    g.start_turn()
    for i in range(3):
        assert g.on_call("grep", {"q": i}) is CONTINUE
    assert (first.tool_calls, first.call_mark) == (3, 5)
    g.run_task(second)
    first.tool_calls += 1  # a host's own charge to the task the session left
    for i in range(2):
        assert g.on_call("grep", {"q": 10 + i}) is CONTINUE
    assert (first.tool_calls, first.call_mark) == (4, 5)
    assert (second.tool_calls, second.call_mark) == (2, 5)
    second.tool_calls = 7  # a write the session's next calls count on from (the cap at 10)
    assert [g.on_call("grep", {"q": 20 + i}).cut_turn for i in range(3)] == [False] * 2 + [True]
    assert second.tool_calls == 10 and str(second.outcome) == "exhausted(tool_calls)"
    assert first.tool_calls == 4 and first.outcome is None


def test_the_session_left_on_a_shared_task_counts_every_call(implementation: str) -> None:
    """Two sessions of one engine share a task, then the one holding its count leaves: the
    other goes on counting (on the locked path), from the count the first one left."""
    task = Task(budget=Budget(tool_calls=20))
    first = guard(implementation, task=task, session_id="first")
    first.start_turn()
    assert [first.on_call("grep", {"q": i}).cut_turn for i in range(3)] == [False] * 3
    second = guard(implementation, task=task, session_id="second")
    second.start_turn()
    assert second.on_call("grep", {"q": 3}) is CONTINUE and task.tool_calls == 4
    first.run_task(Task())
    assert [second.on_call("grep", {"q": 4 + i}).cut_turn for i in range(6)] == [False] * 6
    assert task.tool_calls == 10 and first.task.tool_calls == 0
    assert [n for _, n in task.notes] == ["You have used 10 of 20 tool calls for this task."]


def test_a_child_charges_its_ancestors_with_each_call(implementation: str) -> None:
    parent = Task(budget=Budget(tool_calls=5))
    child = parent.child({"tool_calls": 100})
    g = guard(implementation, task=child, session_id="worker")
    g.start_turn()
    decisions = [g.on_call("grep", {"q": i}) for i in range(6)]
    assert [d.cut_turn for d in decisions] == [False] * 5 + [True]
    assert (child.tool_calls, parent.tool_calls) == (6, 6)
    ex = child.exhausted
    assert ex is not None and (ex.counter, ex.by_task) == ("tool_calls", parent.task_id)


def test_a_charge_past_the_native_counters_range_is_a_typed_error() -> None:
    with pytest.raises(ConfigError, match="below 2\\*\\*62"):
        Task().charge("tool_calls", 1 << 62)


def test_batch_ingest_charges_an_uncapped_task_what_one_at_a_time_does(
        implementation: str) -> None:
    """Two sessions of a task that caps nothing the rows advance, and one of its own: the
    batch core observes every row and hands each task the totals; the counts equal the
    one-at-a-time path's, including at a row Python acts on and when the batch is cut short
    by a refused reset."""
    from tripwire.errors import BatchInterrupted

    rows: list[tuple[Any, ...]] = [("a", "turn_start"), ("b", "turn_start"), ("c", "turn_start")]
    for i in range(4):
        rows += [("a", "usage", "m", 100 + i, 7, 0.01), ("b", "call", "grep", f'{{"q": {i}}}'),
                 ("a", "call", "read_file", f'{{"path": "{i}"}}'), ("c", "usage", None, 5, 1),
                 ("c", "call", "bash", f'{{"command": "ls {i}"}}')]
    rows += [("a", "turn_end"), ("c", "reset", "nonsense"), ("b", "call", "grep", "{}")]
    fleets = [Fleet(GuardrailsConfig(mode="enforce", unattended=False),
                    implementation=implementation) for _ in range(2)]
    counts = []
    for k, f in enumerate(fleets):
        shared = f.task("t", budget={"stop_rejections": 3})  # nothing a row advances
        f.session("a", task=shared), f.session("b", task=shared), f.session("c")
        if k == 0:
            with pytest.raises(BatchInterrupted) as info:
                f.observe_many(rows)
            assert info.value.index == len(rows) - 2
        else:
            for sid, kind, *x in rows[:-2]:
                g = f.session(sid)
                if kind == "call":
                    g.on_call(*x)
                elif kind == "usage":
                    g.on_usage(model=x[0], input_tokens=x[1], output_tokens=x[2],
                               cost_usd=x[3] if len(x) > 3 else None)
                elif kind == "turn_start":
                    g.start_turn()
                else:
                    g.end_turn()
        counts.append([(t.steps, t.tokens, t.usd, t.tool_calls)
                       for t in (shared, f.session("c").task)])
    assert counts[0] == counts[1] == [(4, 434, 40_000_000, 8), (4, 24, 0, 4)]


def test_a_tasks_guardrail_history_is_bounded(implementation: str) -> None:
    """Issue 23: every cut turn added an entry to the task's history, without bound (+21 MB per
    million calls). The report keeps the latest 64 and counts the earlier ones."""
    from tripwire.budgets.task import HISTORY

    g = guard(implementation, max_turn_cost_usd=0.01, cost_escalate_after=1_000)
    for _ in range(200):
        g.start_turn()
        assert g.on_usage(cost_usd=0.02).action == "cut_turn"
        g.end_turn()
    report = g.task.report()
    assert len(report.guardrails) == HISTORY == 64
    assert report.guardrails_dropped == 200 - HISTORY
    assert report.to_dict()["guardrails_dropped"] == 136
    assert all(entry["guardrail"] == "cost_ceiling" for entry in report.guardrails)
