"""Budgets that pause, raise and resume (SPEC §13): exact outcomes at exact events, on both
engines and across real processes killed with SIGKILL: a raise after an exhaustion, an
insufficient raise refused on every surface, a check-in window across a restart, a child whose
parent is raised; and ``retries`` / ``on_retry`` exhausting as documented."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path
from typing import Any

import pytest
from test_budgets import guard, run_until_ready

from tripwire.budgets.caps import Budget
from tripwire.budgets.task import Task
from tripwire.cli.main import main
from tripwire.durability import rows
from tripwire.durability.sqlite import SQLiteStore
from tripwire.errors import ConfigError, GuardrailHalted, RaiseRefused, TaskEnded


def exhaust_steps(g: Any, n: int) -> list[str]:
    return [g.on_usage(input_tokens=1).action for _ in range(n)]


# -- raise_cap ---------------------------------------------------------------------------------


def test_a_raise_continues_an_exhausted_task_and_keeps_its_consumption(
        implementation: str) -> None:
    task = Task("o", {"steps": 3})
    g = guard(implementation, task=task)
    g.start_turn()
    assert exhaust_steps(g, 3) == ["continue", "continue", "cut_turn"]
    assert str(task.outcome) == "exhausted(steps)"
    with pytest.raises(GuardrailHalted):
        g.start_turn()
    with pytest.raises(RaiseRefused) as bare:  # a bare resume is refused
        task.raise_cap("steps", 0)
    assert (bare.value.task_id, bare.value.counter, bare.value.raise_needed) == (
        task.task_id, "steps", 1)
    assert str(task.outcome) == "exhausted(steps)"  # nothing changed
    assert task.raise_cap("steps", by=2) == 5
    assert (task.steps, task.outcome, task.exhausted, task.remaining()["steps"]) == (
        3, None, None, 2)
    assert [str(o) for o in task.continued] == ["exhausted(steps)"]
    assert [(r.counter, r.by, r.cap, r.used) for r in task.raises] == [("steps", 2, 5, 3)]
    g.start_turn()  # the next turn starts
    assert exhaust_steps(g, 2) == ["continue", "cut_turn"]
    assert str(task.outcome) == "exhausted(steps)" and task.steps == 5


def test_the_smallest_sufficient_raise_by_counter(implementation: str) -> None:
    task = Task("o", {"stop_rejections": 2, "usd": 0.5})
    g = guard(implementation, task=task)
    g.start_turn()
    for _ in range(3):  # an attempt counter: the 3rd refusal passes a cap of 2
        g.on_stop_attempt(False, "done")
    assert str(task.outcome) == "exhausted(stop_rejections)"
    with pytest.raises(RaiseRefused) as short:
        task.raise_cap("stop_rejections", 0)
    assert short.value.raise_needed == 1 and "stop_rejections=+1" in str(short.value)
    task.raise_cap("stop_rejections", 1)  # at the cap again, not past it: continues
    assert task.outcome is None and task.remaining()["stop_rejections"] == 0
    money = Task("o", {"usd": 0.5})
    g2 = guard(implementation, task=money, session_id="s2")
    g2.start_turn()
    g2.on_usage(input_tokens=1, cost_usd=0.75)
    assert str(money.outcome) == "exhausted(usd)"
    with pytest.raises(RaiseRefused) as short:  # a spent counter: strictly above the use
        money.raise_cap("usd", 0.25)
    assert short.value.raise_needed == pytest.approx(0.250000001)
    assert money.raise_cap("usd", 0.5) == 1.0 and money.outcome is None


def test_what_cannot_be_raised() -> None:
    task = Task("o", {"steps": 3})
    with pytest.raises(ConfigError, match="cannot raise 'checkin:steps'.*check_in"):
        task.raise_cap("checkin:steps", 1)
    with pytest.raises(ConfigError, match="no cap of tokens"):
        task.raise_cap("tokens", 1)
    with pytest.raises(ConfigError, match="at least 0"):
        task.raise_cap("steps", -1)
    assert task.raise_cap("steps", 2) == 5  # a raise before any exhaustion: just a raise
    task.finish("done")
    with pytest.raises(TaskEnded):
        task.raise_cap("steps", 1)


def test_a_child_whose_parent_is_raised_resumes(implementation: str) -> None:
    parent = Task("p", {"steps": 4}, task_id="p")
    child = parent.child({"steps": 10}, task_id="c")
    g = guard(implementation, task=child)
    g.start_turn()
    assert exhaust_steps(g, 4) == ["continue"] * 3 + ["cut_turn"]
    assert (str(child.outcome), child.outcome.by_task, str(parent.outcome)) == (
        "exhausted(steps)", "p", "exhausted(steps)")
    with pytest.raises(RaiseRefused) as refused:  # the child's cap is not what ran out
        child.raise_cap("steps", 5)
    assert (refused.value.task_id, refused.value.exhausted_task,
            refused.value.raise_needed) == ("p", "c", 1)
    parent.raise_cap("steps", 2)
    assert parent.outcome is None
    g.start_turn()  # the child resumes with its parent
    assert child.outcome is None and [str(o) for o in child.continued] == ["exhausted(steps)"]
    assert exhaust_steps(g, 2) == ["continue", "cut_turn"]
    assert (child.steps, parent.steps, child.outcome.by_task) == (6, 6, "p")


# -- durability: real processes killed with SIGKILL ---------------------------------------------

RAISE = """
    import sys
    from tripwire.budgets.task import Task
    from tripwire.durability.sqlite import SQLiteStore
    db, steps, by = sys.argv[1], int(sys.argv[2]), float(sys.argv[3])
    task = Task("o", {"steps": 3}, task_id="t", store=SQLiteStore(db))
    before = [task.steps, task.cap("steps"), str(task.outcome)]
    for _ in range(steps):
        task.step()
    if by:
        task.raise_cap("steps", by)
    print(" ".join(map(str, before + [task.steps, task.cap("steps"), str(task.outcome)])),
          flush=True)
    print("ready", flush=True)
    sys.stdin.readline()
"""


def test_a_raise_holds_across_sigkill_and_restart(tmp_path: Path,
                                                  capsys: pytest.CaptureFixture[str]) -> None:
    db = str(tmp_path / "g.sqlite")
    # exhausted at the 3rd step, raised by 2, killed
    assert run_until_ready(RAISE, db, "3", "2") == "0 3 None 3 5 None"
    # restarted: the raised cap and the consumption both hold; the 5th step exhausts
    assert run_until_ready(RAISE, db, "2", "0") == "3 5 None 5 5 exhausted(steps)"
    # restarted again: exhausted at the raised cap, consumption kept, nothing refilled
    assert run_until_ready(RAISE, db, "0", "0") == "5 5 exhausted(steps) 5 5 exhausted(steps)"
    assert main(["verify", db]) == 0
    capsys.readouterr()
    assert main(["status", db]) == 0
    (line,) = [x for x in map(json.loads, capsys.readouterr().out.splitlines())
               if x["kind"] == "task"]
    assert (line["outcome"], line["counter"], line["used"]["steps"]) == (
        "exhausted", "steps", 5)
    assert [(r["counter"], r["by"], r["cap"]) for r in line["raises"]] == [("steps", 2, 5)]
    assert line["continued"] == [{"outcome": "exhausted", "counter": "steps"}]


def test_a_deleted_raise_row_is_caught_by_verify(tmp_path: Path,
                                                 capsys: pytest.CaptureFixture[str]) -> None:
    db = tmp_path / "g.sqlite"
    task = Task("o", {"steps": 2}, task_id="t", store=SQLiteStore(db))
    task.step(2)
    task.raise_cap("steps", 5)
    task.step()
    assert main(["verify", str(db)]) == 0
    with sqlite3.connect(db) as raw:
        raw.execute("DELETE FROM rows WHERE session = 'task:t' AND kind = 'raise'")
    capsys.readouterr()
    assert main(["verify", str(db)]) == 1
    assert "task:t: BROKEN" in capsys.readouterr().out
    restored = Task("o", {"steps": 2}, task_id="t", store=SQLiteStore(db))
    assert restored.tampered is not None


def test_raise_and_check_in_rows_round_trip() -> None:
    for row in (rows.RaiseRow("t", "usd", 250_000_000, 1_250_000_000, 1_300_000_000, "usd",
                              None, "tripwire reset"),
                rows.RaiseRow("c", "steps", 0, None, None, "steps", "p"),
                rows.CheckInRow("t", {"tool_calls": 12, "usd": 3}, "checkin:usd", "hook"),
                rows.CheckInRow("t", None)):
        assert rows.parse(row.KIND, row.to_data()) == row
    assert {rows.RaiseRow.KIND, rows.CheckInRow.KIND} <= rows.TASK_KINDS


# -- check-in windows ---------------------------------------------------------------------------


def test_a_check_in_window_pauses_and_a_check_in_opens_the_next(implementation: str) -> None:
    task = Task("o", Budget(tool_calls=100, checkin={"tool_calls": 3}))
    g = guard(implementation, task=task)
    g.start_turn()
    actions = [g.on_call("read_file", {"path": f"f{i}"}).action for i in range(4)]
    assert actions == ["continue"] * 3 + ["cut_turn"]
    assert str(task.outcome) == "exhausted(checkin:tool_calls)"
    assert "check-in window of tool calls: 4 of 3" in task.outcome.reason
    with pytest.raises(GuardrailHalted):
        g.start_turn()
    assert task.check_in() is True
    assert (task.outcome, task.tool_calls, task.window_used("tool_calls")) == (None, 4, 0)
    g.start_turn()
    actions = [g.on_call("read_file", {"path": f"g{i}"}).action for i in range(4)]
    assert actions == ["continue"] * 3 + ["cut_turn"]
    assert task.tool_calls == 8 and str(task.outcome) == "exhausted(checkin:tool_calls)"
    assert Task("o", {"steps": 1}).check_in() is False  # no windows: nothing to open


WINDOW = """
    import sys
    from tripwire.budgets.task import Task
    from tripwire.durability.sqlite import SQLiteStore
    db, calls, check_in = sys.argv[1], int(sys.argv[2]), sys.argv[3] == "1"
    task = Task("o", {"tool_calls": 100, "checkin": {"usd": 1.0, "tool_calls": 3}},
                task_id="w", store=SQLiteStore(db))
    before = str(task.outcome)
    if check_in:
        task.check_in()
    for _ in range(calls):
        task.charge("tool_calls")
    task.persist()
    print(before, task.tool_calls, task.window_used("tool_calls"), str(task.outcome),
          flush=True)
    print("ready", flush=True)
    sys.stdin.readline()
"""


def test_a_check_in_window_holds_across_sigkill_and_restart(tmp_path: Path) -> None:
    db = str(tmp_path / "g.sqlite")
    assert run_until_ready(WINDOW, db, "4", "0") == "None 4 4 exhausted(checkin:tool_calls)"
    # restarted: still paused; the check-in opens a window counted from 4 calls
    assert run_until_ready(WINDOW, db, "2", "1") == \
        "exhausted(checkin:tool_calls) 6 2 None"
    # restarted: the window holds (2 used of 3): the 2nd call more passes it
    assert run_until_ready(WINDOW, db, "2", "0") == "None 8 4 exhausted(checkin:tool_calls)"
    assert main(["verify", db]) == 0


# -- every surface refuses an insufficient raise ------------------------------------------------


def test_tripwire_reset_raises_and_refuses_like_add_budget(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    db = str(tmp_path / "g.sqlite")
    task = Task("o", {"steps": 3, "checkin": {"steps": 10}}, task_id="t", store=SQLiteStore(db))
    task.step(3)
    capsys.readouterr()
    assert main(["reset", db, "--task", "t", "--raise", "steps=+0"]) == 4
    assert "raise task t's steps by at least 1 (steps=+1)" in capsys.readouterr().err
    assert main(["reset", db, "--task", "t", "--raise", "steps=+200"]) == 0
    line = json.loads(capsys.readouterr().out)
    assert (line["cap"], line["used"], line["resumed"], line["outcome"]) == (
        203, 3, "exhausted(steps)", None)
    assert main(["reset", db, "--task", "t", "--raise", "steps=250"]) == 0  # to 250
    assert json.loads(capsys.readouterr().out)["cap"] == 250
    assert main(["reset", db, "--task", "t", "--check-in"]) == 0
    assert json.loads(capsys.readouterr().out)["opened"] is True
    assert main(["reset", db, "--task", "nope", "--raise", "steps=+1"]) == 2
    assert main(["reset", db, "--task", "t"]) == 2  # nothing asked
    restored = Task("o", {"steps": 3, "checkin": {"steps": 10}}, task_id="t",
                    store=SQLiteStore(db))
    assert (restored.cap("steps"), restored.steps, restored.outcome, restored.check_ins) == (
        250, 3, None, 1)


def test_a_sessions_implicit_task_is_raised_by_its_session_id(
        tmp_path: Path, implementation: str, capsys: pytest.CaptureFixture[str]) -> None:
    db = str(tmp_path / "g.sqlite")
    config = {"budget": Budget(steps=2)}
    g = guard(implementation, store=SQLiteStore(db), session_id="s", **config)
    g.start_turn()
    assert exhaust_steps(g, 2) == ["continue", "cut_turn"]
    assert main(["reset", db, "--task", "s", "--raise", "steps=+0"]) == 4
    assert main(["reset", db, "--task", "s", "--raise", "steps=+2"]) == 0
    g.start_turn()  # the live session takes the raise another process wrote
    assert exhaust_steps(g, 2) == ["continue", "cut_turn"]
    g2 = guard(implementation, store=SQLiteStore(db), session_id="s", **config)
    assert (g2.task.steps, g2.task.cap("steps"), str(g2.task.outcome)) == (
        4, 4, "exhausted(steps)")


# -- retries ------------------------------------------------------------------------------------


def test_retries_exhaust_on_the_retry_that_would_pass_the_cap(implementation: str) -> None:
    task = Task("o", {"retries": 2})
    g = guard(implementation, task=task)
    g.start_turn()
    assert [g.on_retry("503").action for _ in range(2)] == ["continue", "continue"]
    assert (task.retries, task.outcome) == (2, None)
    cut = g.on_retry("503")  # the 3rd retry passes a cap of 2
    assert (cut.action, cut.guardrail) == ("cut_turn", "budget")
    assert str(task.outcome) == "exhausted(retries)" and task.retries == 3
    assert "model request retries: 3 of 2" in task.outcome.reason
    bare = Task("o", {"retries": 1})
    assert bare.on_retry() is None
    assert bare.on_retry("timeout").counter == "retries"
    assert bare.raise_cap("retries", 1) == 2 and bare.outcome is None
    assert bare.on_retry() is not None and str(bare.outcome) == "exhausted(retries)"


def test_serve_raises_a_task_and_refuses_an_insufficient_raise_with_409(
        tmp_path: Path, implementation: str) -> None:
    pytest.importorskip("starlette", reason="tripwire serve needs the serve extra")
    pytest.importorskip("httpx", reason="the serve tests talk HTTP with httpx")
    from starlette.testclient import TestClient

    from tripwire import GuardrailsConfig
    from tripwire.cli.serve import create_app
    from tripwire.fleet.fleet import Fleet

    token = {"Authorization": "Bearer t0ken"}
    fleet = Fleet(GuardrailsConfig(mode="enforce", budget=Budget(steps=2, checkin={"usd": 1})),
                  implementation=implementation, store=SQLiteStore(tmp_path / "g.sqlite"))
    client = TestClient(create_app(fleet, "t0ken"))
    usage = {"type": "usage", "input_tokens": 1}
    r = client.post("/sessions/s/events", json=[{"type": "turn_start"}, usage, usage],
                    headers=token)
    assert [d["action"] for d in r.json()["decisions"]] == ["cut_turn"]
    r = client.post("/tasks/s/budget", json={"raise": {"steps": 0}}, headers=token)
    assert r.status_code == 409
    assert {k: r.json()[k] for k in ("task", "counter", "raise_needed", "used", "cap")} == {
        "task": "s", "counter": "steps", "raise_needed": 1, "used": 2, "cap": 2}
    assert "steps=+1" in r.json()["error"]
    r = client.post("/tasks/s/budget", json={"raise": {"steps": 2}}, headers=token)
    assert r.status_code == 200
    assert (r.json()["caps"], r.json()["resumed"], r.json()["outcome"]) == (
        {"steps": 4}, "exhausted(steps)", None)
    r = client.post("/sessions/s/events", json=[{"type": "turn_start"}, usage], headers=token)
    # the next turn starts (with the budget note queued before the cut); its step is allowed
    assert [d["action"] for d in r.json()["decisions"]] == ["continue"]
    r = client.post("/tasks/s/check-in", headers=token)
    assert (r.status_code, r.json()["opened"]) == (200, True)
    assert client.post("/tasks/nope/budget", json={"raise": {"steps": 1}},
                       headers=token).status_code == 404
    assert client.post("/tasks/s/budget", json={"raise": {"checkin:usd": 1}},
                       headers=token).status_code == 400


def test_replay_takes_budget_raise_and_check_in_events(
        tmp_path: Path, implementation: str, capsys: pytest.CaptureFixture[str],
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TRIPWIRE_IMPLEMENTATION", implementation)
    usage = {"type": "usage", "input_tokens": 1, "cost_usd": 0.0}
    call = {"type": "call", "name": "read_file", "args": {"path": "a"}}
    events = [{"type": "task_start", "objective": "fix",
               "budget": {"steps": 2, "checkin": {"tool_calls": 1}}},
              {"type": "turn_start"}, usage, usage,
              {"type": "budget_raise", "counter": "steps", "by": 0},
              {"type": "budget_raise", "counter": "steps", "by": 2},
              {"type": "turn_start"}, usage, call, call,
              {"type": "check_in"}, {"type": "turn_start"}, call,
              {"type": "task_end", "answer": "done"}]
    path = tmp_path / "run.jsonl"
    path.write_text("".join(json.dumps(e) + "\n" for e in events))
    assert main(["replay", "--mode", "enforce", str(path)]) == 0
    records = [json.loads(x) for x in capsys.readouterr().out.splitlines()]
    shown = [(r["event"], r["kind"], r.get("outcome") or r.get("counter") or r.get("action"),
              r.get("refused") or r.get("resumed") or r.get("raise_needed"))
             for r in records if r["kind"] in ("outcome", "budget_raise", "check_in",
                                               "decision")]
    assert shown == [
        (3, "decision", "cut_turn", None), (3, "outcome", "exhausted", None),
        (4, "budget_raise", "steps", True), (5, "budget_raise", "steps", "exhausted(steps)"),
        (9, "decision", "cut_turn", None), (9, "outcome", "exhausted", None),
        (10, "check_in", None, "exhausted(checkin:tool_calls)"),
        (13, "outcome", "answered", None)]
    refused = next(r for r in records if r.get("refused"))
    assert refused["raise_needed"] == 1
    paused = [r for r in records if r["kind"] == "outcome"][1]
    assert paused["counter"] == "checkin:tool_calls"
    with pytest.raises(Exception, match="field 'counter' must name a counter"):
        from tripwire.interchange.events import parse_event
        parse_event({"type": "budget_raise", "counter": "checkin:usd", "by": 1})


# -- one-shot runs ------------------------------------------------------------------------------


class _Terminal:
    """A stdin that is an interactive terminal."""

    def isatty(self) -> bool:
        return True


def test_a_one_shot_run_is_unattended_whatever_stdin_is(
        monkeypatch: pytest.MonkeyPatch) -> None:
    from tripwire import GuardrailsConfig

    monkeypatch.setattr("sys.stdin", _Terminal())
    assert GuardrailsConfig().resolve().unattended is False  # a terminal: attended
    one_shot = GuardrailsConfig(one_shot=True).resolve()
    assert one_shot.unattended is True and one_shot.budget.steps == 1000
    from_file = GuardrailsConfig(file={"session": {"one_shot": True}}).resolve()
    assert from_file.unattended is True
    with pytest.raises(ConfigError, match="one-shot run is unattended"):
        GuardrailsConfig(one_shot=True, unattended=False).resolve()


def test_a_session_raised_from_outside_resumes_after_sigkill(tmp_path: Path,
                                                             implementation: str) -> None:
    """Real processes, both engines: a session's implicit task exhausted at 1,000 steps (the
    unattended default), killed; an insufficient raise refused (exit 4), a raise of 10 written
    by ``tripwire reset``; the restarted session has the raised cap and the consumption, and
    its 10th step more is cut."""
    from test_budgets import NEAR_THE_LIMIT

    db = str(tmp_path / "g.sqlite")
    first = run_until_ready(NEAR_THE_LIMIT, db, implementation, "1000").split()
    assert first == ["continue"] * 999 + ["cut_turn"]
    assert main(["reset", db, "--task", "s", "--raise", "steps=+0"]) == 4
    assert main(["reset", db, "--task", "s", "--raise", "steps=+10"]) == 0
    second = run_until_ready(NEAR_THE_LIMIT, db, implementation, "10").split()
    assert second == ["continue"] * 9 + ["cut_turn"]
    assert main(["verify", db]) == 0


def test_an_unreadable_stores_anchor_carries_a_raise(tmp_path: Path, implementation: str,
                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    """The anchor proves a raise too: a store that cannot be read, moved aside by
    ``tripwire reset``, starts its new chain with the raised cap, not the exhaustion the
    raise continued."""
    from corruption import corrupt

    anchor = tmp_path / "operator" / "tripwire.anchor"
    anchor.parent.mkdir()
    monkeypatch.setenv("TRIPWIRE_STORE_KEY", "a secret kept from the agent")
    monkeypatch.setenv("TRIPWIRE_STORE_ANCHOR", str(anchor))
    db = tmp_path / "tripwire.db"
    task = Task("o", {"steps": 3, "checkin": {"tool_calls": 5}}, task_id="t",
                store=SQLiteStore(db))
    g = guard(implementation, task=task, store=SQLiteStore(db), session_id="s")
    g.start_turn()
    assert exhaust_steps(g, 3)[-1] == "cut_turn"
    task.raise_cap("steps", 4)
    task.check_in()
    task.step()
    g.flush()
    del g, task
    corrupt(db, "truncated")
    assert main(["reset", str(db), "--session", "s"]) == 0
    restored = Task("o", {"steps": 3, "checkin": {"tool_calls": 5}}, task_id="t",
                    store=SQLiteStore(db))
    assert (restored.steps, restored.cap("steps"), restored.outcome, restored.tampered) == (
        4, 7, None, None)
    assert restored.windows == {"tool_calls": 0}
