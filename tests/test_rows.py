"""The stored row kinds as typed records (``durability/rows.py``): written and read in one module,
in the format earlier versions wrote.

``fixtures/stores/rows-v1.json`` holds the rows the writers of tripwire at commit c31c66a stored
(dicts built by each writer: the policies, the library's and ``tripwire reset``'s resets, the
tasks, the context guard, the rows carried over an unreadable store), what that version
restored of each session, and what ``tripwire status`` printed (``make_rows_v1.py`` beside it
made it, and remakes it from the writers of today). Here: every row reads back into its record
and writes out as the same bytes; a store holding those raw dict rows restores to what that
version restored, on both engines; and today's writers, driven through the same sessions, store
the same rows.
"""

from __future__ import annotations

import io
import json
import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import msgpack
import pytest

from tripwire import Guardrails, GuardrailsConfig
from tripwire.budgets.task import Budget, Task
from tripwire.cli.main import main as cli
from tripwire.context.guard import ContextConfig
from tripwire.durability import rows
from tripwire.durability.chain import KEY_ENV
from tripwire.durability.sqlite import SQLiteStore

FIXTURES = Path(__file__).resolve().parent / "fixtures" / "stores"
V1 = json.loads((FIXTURES / "rows-v1.json").read_text())
#: the configurations the fixture's sessions ran and restored under (make_rows_v1.CONFIGS)
CONFIGS = {
    "wd": dict(mode="enforce", unattended=False, max_turn_cost_usd=0.5, max_session_cost_usd=5.0),
    "cost": dict(mode="enforce", unattended=False, max_session_cost_usd=1.0),
    "esc": dict(mode="enforce", unattended=False, max_turn_cost_usd=0.1),
    "ctx": dict(mode="warn", unattended=False, context=ContextConfig()),
    "job": dict(mode="enforce", unattended=False, budget=Budget(tool_calls=3)),
}


@pytest.fixture(autouse=True)
def _key(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(KEY_ENV, "k" * 64)
    monkeypatch.delenv("TRIPWIRE_STORE_ANCHOR", raising=False)


def all_rows() -> list[tuple[str, str, str, dict[str, Any]]]:
    return [(store, sid, kind, data) for store, found in V1["stores"].items()
            for sid, kind, data in found]


def test_the_fixture_has_every_kind_and_every_writer() -> None:
    kinds = {kind for _, _, kind, _ in all_rows()}
    # turn rows came after the fixture's version (a hook's durable turn: test_turn_row_*), and
    # raise and check-in rows too (test_resume.py: test_raise_and_check_in_rows_round_trip)
    assert kinds == rows.KINDS - {rows.TurnRow.KIND, rows.RaiseRow.KIND, rows.CheckInRow.KIND}
    resets = [d for _, _, kind, d in all_rows() if kind == "reset"]
    assert {d.get("by") for d in resets} == {None, "tripwire reset", "tripwire reset (carried)"}
    assert any("carried over" in d["reason"] for _, _, kind, d in all_rows() if kind == "trip")
    assert any(d.get("estimated") for _, _, kind, d in all_rows() if kind == "spend")


@pytest.mark.parametrize(("store", "session", "kind", "data"), all_rows(),
                         ids=lambda v: v if isinstance(v, str) else "")
def test_a_row_reads_into_its_record_and_writes_out_the_same(store: str, session: str,
                                                             kind: str, data: dict) -> None:
    record = rows.parse(kind, data)
    assert kind == type(record).KIND
    assert rows.parse(kind, record.to_data()) == record  # a record is all its row says
    if store == "live":  # the live writers' rows: the same bytes, so the same MACs
        assert msgpack.packb(record.to_data(), use_bin_type=True) == \
            msgpack.packb(data, use_bin_type=True)


def test_rows_of_earlier_versions_read_with_defaults() -> None:
    """A key an earlier version did not write reads as its default; a value of the wrong
    type as absent; nothing raises."""
    spend = rows.SpendRow.from_data({"spent_usd": 2})  # the format before spend writers
    assert spend.spend == rows.Spend(spent_usd=2.0) and spend.counts is None
    trip = rows.TripRow.from_data({"halts": 1, "reason": None, "in_a_row": "3"})
    assert (trip.halts, trip.reason, trip.in_a_row, trip.spend) == (False, "", None,
                                                                    rows.NO_SPEND)
    reset = rows.ResetRow.from_data({"guardrails": ["watchdog"], "budget_usd": 2.0})
    assert (reset.guardrail, reset.budget_usd, reset.cleared) == ("all", 2.0, ())
    assert rows.ResetRow.from_data({"guardrail": 7}).guardrail is None  # resets nothing
    assert rows.BudgetRow.from_data({"task": "t", "tool_timeouts": "x"}).tool_timeouts is None
    assert rows.ContextRow.from_data({"event": "compaction-boundary"}).boundary() == (
        "compaction", None, 0)


def _replay(store_rows: list, path: Path) -> SQLiteStore:
    """A new store holding ``store_rows`` as the raw dicts they were written as."""
    store = SQLiteStore(path)
    for sid, kind, data in store_rows:
        store.append(sid, kind, data)
    return store


def _clockless(value: Any) -> Any:
    """``value`` without what depends on the clock a row was written at: the row's time
    (a compaction's), a task's elapsed deadline."""
    if isinstance(value, dict):
        return {k: ("clock" if v is not None and (k.endswith("_at") or k == "deadline_s")
                    else _clockless(v)) for k, v in value.items()}
    if isinstance(value, list):
        return [_clockless(v) for v in value]
    return value


def _status(path: Path) -> list[Any]:
    buf = io.StringIO()
    cli(["status", str(path)], out=buf)
    return _clockless([json.loads(line) for line in buf.getvalue().splitlines()])


def _task_state(task: Task) -> dict[str, Any]:
    outcome = task.outcome.to_dict() if task.outcome else None
    if outcome is not None:
        del outcome["report"]
    return {"steps": task.steps, "tool_calls": task.tool_calls, "tokens": task.tokens,
            "usd": task.usd, "exhausted": task.exhausted.to_dict() if task.exhausted else None,
            "outcome": outcome}


def _restored(store: SQLiteStore, sid: str, implementation: str) -> dict[str, Any]:
    g = Guardrails(GuardrailsConfig(**CONFIGS[sid]), session_id=sid, store=store,
                   implementation=implementation)
    s = g.status()
    return {"halted_by": list(s.halted_by), "watchdog_reason": s.watchdog_reason,
            "cost_reason": s.cost_reason, "spent_usd": s.spent_usd,
            "max_turn_cost_usd": s.max_turn_cost_usd,
            "max_session_cost_usd": s.max_session_cost_usd,
            "granted_budget_usd": s.granted_budget_usd, "would_retrip": s.would_retrip,
            "budget_needed_usd": s.budget_needed_usd, "queued_feedback": s.queued_feedback,
            "context": g.context_stats().to_dict(), "task": _task_state(g.task)}


@pytest.mark.parametrize("name", ["live", "carried"])
def test_a_store_of_the_previous_writers_restores_as_it_did(name: str, implementation: str,
                                                            tmp_path: Path) -> None:
    path = tmp_path / f"{name}.sqlite"
    store = _replay(V1["stores"][name], path)
    assert _status(path) == _clockless(V1["status"][name])
    restored = {sid: _restored(store, sid, implementation) for sid in store.sessions()
                if sid in CONFIGS}
    assert _clockless(restored) == _clockless(V1["restored"][name])
    if name == "live":
        report = Task("write the report", Budget(steps=5, usd=2.0), task_id="report",
                      store=store)
        assert _task_state(report) == V1["restored"]["task:report"]
    store.close()


def _normalized(found: dict[str, list], tmp: str) -> dict[str, list]:
    """Rows with what differs from one run to the next named instead: each spend writer's
    random id by its order of appearance, the clock, the temporary directory."""
    writers: dict[str, str] = {}

    def norm(value: Any, key: str = "") -> Any:
        if key == "spend_writer" and value not in ("carried", "anchor"):
            return writers.setdefault(value, f"writer {len(writers)}")
        if isinstance(value, dict):
            return {k: norm(v, k) for k, v in value.items()}
        if isinstance(value, list):
            return [norm(v) for v in value]
        if isinstance(value, str):
            return value.replace(tmp, "<tmp>")
        return value

    return {name: [[sid, kind, list(data), norm(_clockless(data))]
                   for sid, kind, data in store_rows]
            for name, store_rows in found.items()}


def test_today_s_writers_store_the_rows_the_previous_ones_did(tmp_path: Path) -> None:
    """The fixture's sessions driven again through today's writers: the same rows, key for
    key and in the same order (the carried-over rows of an unreadable store: the same keys
    and values, whatever their order)."""
    out = tmp_path / "rows.json"
    env = {**os.environ, "TRIPWIRE_IMPLEMENTATION": "python", "TMPDIR": str(tmp_path)}
    subprocess.run([sys.executable, str(FIXTURES / "make_rows_v1.py"), str(out)], env=env,
                   check=True, capture_output=True, timeout=300)
    today = json.loads(out.read_text())
    tmp_of = re.compile(r"(/[^ ]*?/tmp\w+)/anchored\.sqlite")

    def tmp_dir(found: dict[str, Any]) -> str:
        return next(m.group(1) for _, _, d in found["stores"]["carried"]
                    for m in [tmp_of.search(json.dumps(d))] if m)

    then, now = _normalized(V1["stores"], tmp_dir(V1)), _normalized(today["stores"],
                                                                      tmp_dir(today))
    # one row more since: a capped implicit task's start row, written once just before its
    # first budget row (so that status can show its caps); every other row as it was
    then_tasks = {r[0] for r in then["live"] if r[1] == "task"}
    added = [i for i, r in enumerate(now["live"]) if r[1] == "task" and r[0] not in then_tasks]
    assert [now["live"][i + 1][:2] for i in added] == [[now["live"][i][0], "budget"]
                                                       for i in added]
    assert [r for i, r in enumerate(now["live"]) if i not in added] == then["live"]
    assert [[s, k, {key: v for key, v in d.items() if v is not None}]
            for s, k, _, d in now["carried"]] == \
        [[s, k, {key: v for key, v in d.items() if v is not None}]
         for s, k, _, d in then["carried"]]
    # status as it was but for that row: the implicit task's caps shown (they were null) and
    # its session's row count one more
    job_caps = {"steps": 0, "tool_calls": 3, "tokens": 0, "usd": 0.0, "deadline_s": "clock",
                "tool_timeout_s": 0.0, "stop_rejections": 8, "retries": 0, "reviews": 10}
    expected = []
    for line in _clockless(V1["status"]["live"]):
        if line.get("kind") == "session" and line["session"] == "job":
            line = {**line, "rows": line["rows"] + 1}
        elif line.get("kind") == "task" and line["task"] == "job":
            assert (line["budget"], line["objective"]) == (None, None)
            line = {**line, "budget": job_caps, "objective": ""}
        expected.append(line)
    assert _clockless(today["status"]["live"]) == expected


def test_turn_row_round_trips_and_reads_odd_fields_as_absent() -> None:
    from tripwire.base.alert import Alert
    from tripwire.base.decision import CUT_TURN, Decision

    alert = Alert("repeated-tool-call", "critical", None, "[watchdog] stop", "[watchdog] stop", -1)
    turn = rows.TurnRow(True, Decision(CUT_TURN, "watchdog", "looping", (alert,)),
                        (("no-op-streak", "say something"),))
    data = turn.to_data()
    assert data == {"open": True,
                    "blocked": {"action": CUT_TURN, "guardrail": "watchdog", "reason": "looping",
                                "alerts": [["repeated-tool-call", "critical", "[watchdog] stop"]]},
                    "feedback": [["no-op-streak", "say something"]]}
    back = rows.parse("turn", msgpack.unpackb(msgpack.packb(data)))
    assert back == turn and back.unblocked() == rows.TurnRow(True, None, turn.feedback)
    odd = rows.parse("turn", {"open": 1, "blocked": {"action": "refuse_turn", "reason": "x"},
                              "feedback": [["a"], ["b", 2], ["c", "d"]]})
    assert odd == rows.TurnRow(False, None, (("c", "d"),))
