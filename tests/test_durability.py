"""Halts, budget and spend survive restarts (SPEC §5): real processes, tampering, bad stores."""

from __future__ import annotations

import io
import json
import logging
import os
import sqlite3
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from conftest import ROOT

from tripwire import GuardrailHalted, Guardrails, GuardrailsConfig, ResetRefused
from tripwire.cli.main import main
from tripwire.durability.sqlite import SQLiteStore

LOOP = ("read_file", '{"path": "src/a.py"}')


def child(code: str, implementation: str, *args: str) -> subprocess.CompletedProcess:
    """Run code in a fresh interpreter (the "process that crashes")."""
    env = {**os.environ, "TRIPWIRE_IMPLEMENTATION": implementation}
    proc = subprocess.run([sys.executable, "-c", textwrap.dedent(code), *args], env=env,
                          capture_output=True, text=True, timeout=120, check=False)
    assert proc.returncode == 0, proc.stderr
    return proc


def open_guardrails(db: Path, implementation: str, session: str = "s1", **config) -> Guardrails:
    config.setdefault("unattended", False)
    return Guardrails(GuardrailsConfig(**config), session_id=session,
                      implementation=implementation, store=SQLiteStore(db))


HALT_AND_CRASH = """
    import os, sys
    from tripwire import Guardrails, GuardrailsConfig
    from tripwire.durability.sqlite import SQLiteStore
    g = Guardrails(GuardrailsConfig(mode="enforce", unattended=False), session_id="s1",
                   store=SQLiteStore(sys.argv[1]))
    g.start_turn()
    while True:
        d = g.on_call("read_file", '{"path": "src/a.py"}')
        if d.halt_session:
            os._exit(0)  # die the instant the harness has its decision: no cleanup, no flush
"""


def test_a_halt_survives_a_crash(tmp_path: Path, implementation: str) -> None:
    db = tmp_path / "guardrails.sqlite"
    child(HALT_AND_CRASH, implementation, str(db))
    g = open_guardrails(db, implementation, mode="enforce")
    assert g.halted and g.status().halted_by == ("watchdog",)
    assert g.on_call(*LOOP).action == "refuse_turn"  # restored: nothing is observed
    with pytest.raises(GuardrailHalted) as refused:
        g.start_turn()
    assert "repeated-tool-call" in refused.value.reason
    g.reset()
    feedback = g.start_turn().feedback  # re-synthesized from the persisted reason
    assert "- restored-watchdog-halt: Before a restart this session was halted" in feedback
    assert "You called read_file 5 times" in feedback and "operator" not in feedback
    # and the reset itself is durable: a third process starts clean
    assert not open_guardrails(db, implementation, mode="enforce").halted


def test_granted_budget_and_spend_survive_a_restart(tmp_path: Path, implementation: str) -> None:
    db = tmp_path / "g.sqlite"
    child("""
        import os, sys
        from tripwire import Guardrails, GuardrailsConfig
        from tripwire.durability.sqlite import SQLiteStore
        g = Guardrails(GuardrailsConfig(max_session_cost_usd=1.0, unattended=False),
                       session_id="s1", store=SQLiteStore(sys.argv[1]))
        g.start_turn()
        assert g.on_usage(cost_usd=1.5).halt_session
        g.reset(additional_budget_usd=1.0)
        g.start_turn()
        g.on_usage(cost_usd=0.2)
        g.end_turn()  # a turn boundary persists the spend
        os._exit(0)
    """, implementation, str(db))
    g = open_guardrails(db, implementation, max_session_cost_usd=1.0)
    status = g.status()
    assert not status.halted
    assert status.spent_usd == pytest.approx(1.7)          # the same dollars, never re-windowed
    assert status.max_session_cost_usd == pytest.approx(2.0)  # the granted dollar stands
    g.start_turn()
    assert g.on_usage(cost_usd=0.2).proceed
    assert g.on_usage(cost_usd=0.1).halt_session  # $2.0000 >= $2.0000


def test_a_clean_turn_after_a_restart_clears_the_escalation_count(
        tmp_path: Path, implementation: str) -> None:
    """Escalation counts turns cut in a row: a clean turn in a later process clears the
    restored count durably, so cut / clean / cut never reads as two cuts in a row."""
    db = tmp_path / "guardrails.sqlite"

    def no_op_turn(g: Guardrails, turn: int):
        g.start_turn()
        for i in range(3):
            g.on_call("mark_task_done", {"detail": f"turn {turn} v{i}"})
            decision = g.on_result("mark_task_done", no_op=True, payload="already recorded")
        return decision

    for turn in range(4):  # each turn in a new process: cut, clean, cut, clean, ...
        g = open_guardrails(db, implementation, mode="enforce")
        if turn % 2 == 0:
            decision = no_op_turn(g, turn)
            assert (decision.action, decision.guardrail) == ("cut_turn", "watchdog")
        else:
            g.start_turn()
            g.on_call("read_file", {"path": f"src/{turn}.py"})
            g.end_turn()
    g = open_guardrails(db, implementation, mode="enforce")
    assert no_op_turn(g, 9).action == "cut_turn"  # 1 in a row, not 3
    assert not g.halted


def test_restore_never_overrules_live_config(tmp_path: Path, implementation: str) -> None:
    db = tmp_path / "g.sqlite"
    child(HALT_AND_CRASH, implementation, str(db))
    warn = open_guardrails(db, implementation, mode="warn")
    assert not warn.halted  # a warn process does not resurrect an enforce halt
    assert warn.start_turn().feedback == ""  # and tells the model nothing
    feedback = open_guardrails(db, implementation, mode="feedback")
    assert not feedback.halted
    assert "restored-watchdog-halt" in feedback.start_turn().feedback

    cost_db = tmp_path / "cost.sqlite"
    g = open_guardrails(cost_db, implementation, max_session_cost_usd=1.0)
    g.start_turn()
    assert g.on_usage(cost_usd=2.0).halt_session
    g.reset(additional_budget_usd=5.0)
    g.on_usage(cost_usd=5.0)
    assert g.halted
    unbounded = open_guardrails(cost_db, implementation)  # no per-session ceiling any more
    assert not unbounded.halted and unbounded.status().granted_budget_usd == 0.0
    assert unbounded.status().spent_usd == pytest.approx(7.0)


def test_a_deleted_halt_row_is_detected_and_the_session_stays_halted(
        tmp_path: Path, implementation: str) -> None:
    db = tmp_path / "g.sqlite"
    child(HALT_AND_CRASH, implementation, str(db))
    with sqlite3.connect(db) as raw:  # the agent deletes its own halt row
        raw.execute("DELETE FROM rows WHERE kind = 'trip'")
    out, err = io.StringIO(), io.StringIO()
    assert main(["verify", str(db)], out=out, err=err) == 1
    assert "s1: BROKEN" in out.getvalue()
    g = open_guardrails(db, implementation, mode="enforce")
    assert g.halted
    with pytest.raises(GuardrailHalted, match="tampered"):
        g.start_turn()


def test_a_halted_session_deleted_whole_stays_halted(tmp_path: Path,
                                                    implementation: str) -> None:
    """Rows and head gone: the store's manifest still lists the session as once halted."""
    from tripwire.fleet.fleet import Fleet

    db = tmp_path / "g.sqlite"
    child(HALT_AND_CRASH, implementation, str(db))
    with sqlite3.connect(db) as raw:
        raw.execute("DELETE FROM rows WHERE session = 's1'")
        raw.execute("DELETE FROM heads WHERE session = 's1'")
    out, err = io.StringIO(), io.StringIO()
    assert main(["verify", str(db)], out=out, err=err) == 1
    assert "s1: BROKEN" in out.getvalue() and "deleted" in out.getvalue()
    g = open_guardrails(db, implementation, mode="enforce")
    with pytest.raises(GuardrailHalted, match="tampered"):
        g.start_turn()
    fleet = Fleet(GuardrailsConfig(mode="enforce", unattended=False), store=SQLiteStore(db),
                  implementation=implementation)
    assert [(h.session_id, h.in_memory) for h in fleet.status()] == [("s1", False)]
    assert "tampered" in fleet.status()[0].reason


def test_an_edited_halt_reason_is_detected(tmp_path: Path, implementation: str) -> None:
    db = tmp_path / "g.sqlite"
    child(HALT_AND_CRASH, implementation, str(db))
    with sqlite3.connect(db) as raw:
        (body,) = raw.execute("SELECT body FROM rows WHERE kind = 'trip'").fetchone()
        raw.execute("UPDATE rows SET body = ? WHERE kind = 'trip'",
                    (body.replace(b"repeated", b"harmless"),))
    reports = SQLiteStore(db).verify()
    assert [r.intact for r in reports if r.session == "s1"] == [False]
    assert open_guardrails(db, implementation, mode="enforce").halted


def test_a_break_before_any_halt_restores_halted_with_the_spend_it_can_prove(
        tmp_path: Path, implementation: str, caplog) -> None:
    """An edited row may have held spend: restoring less would hand out a fresh budget, so the
    session halts (tamper) and keeps the spend of the rows that still chain."""
    db = tmp_path / "g.sqlite"
    g = open_guardrails(db, implementation, max_turn_cost_usd=1.0)
    for _ in range(2):
        g.start_turn()
        g.on_usage(cost_usd=0.5)
        g.end_turn()
    with sqlite3.connect(db) as raw:
        raw.execute("UPDATE rows SET body = X'00' WHERE seq = 1")
    caplog.set_level(logging.WARNING, logger="tripwire")
    g = open_guardrails(db, implementation, max_turn_cost_usd=1.0)
    assert g.halted and g.status().halted_by == ("watchdog",)
    assert g.status().spent_usd == pytest.approx(0.5)  # row 0 (the first turn's) still chains
    assert any("[session s1] watchdog halted the session: the session's guardrail history was "
               "tampered with (row 1 was edited or reordered)" in r.getMessage()
               for r in caplog.records)


def test_an_unreadable_store_fails_open(tmp_path: Path, implementation: str, caplog) -> None:
    db = tmp_path / "g.sqlite"
    db.write_bytes(os.urandom(4096))
    caplog.set_level(logging.WARNING, logger="tripwire")
    from tripwire.errors import StoreError

    with pytest.raises(StoreError):
        SQLiteStore(db).history("s1")
    g = Guardrails(GuardrailsConfig(mode="enforce", unattended=False), session_id="s9",
                   implementation=implementation)
    g.restore(_BrokenStore())
    assert not g.halted
    assert any("[session s9] guardrail history unreadable" in r.getMessage()
               for r in caplog.records)


class _BrokenStore:
    def history(self, session: str):
        from tripwire.errors import StoreError

        raise StoreError("g.sqlite: file is not a database")

    def append(self, session: str, kind: str, data: dict, *, wait: float | None = None):
        from tripwire.errors import StoreError

        raise StoreError("g.sqlite: database is locked")


def test_a_failing_store_keeps_the_halt_and_retries(tmp_path: Path, implementation: str,
                                                    caplog) -> None:
    g = Guardrails(GuardrailsConfig(mode="enforce", unattended=False), session_id="s2",
                   implementation=implementation, store=None)
    g.restore(_EmptyStore())
    g.durable_log.store = _BrokenStore()
    g.start_turn()
    for _ in range(5):
        decision = g.on_call(*LOOP)
    assert decision.halt_session and g.halted  # the halt stands in memory
    assert not g.flush()  # the row waits in the outbox
    good = SQLiteStore(tmp_path / "g.sqlite")
    g.durable_log.store = good
    assert g.flush()
    assert [r.kind for r in good.history("s2").rows] == ["trip"]
    assert any("could not persist a trip row" in r.getMessage() for r in caplog.records)


class _EmptyStore:
    def history(self, session: str):
        from tripwire.durability.chain import ChainReport, SessionHistory

        return SessionHistory((), ChainReport(session, True, 0, None, None, True, None))


def test_a_missing_store_file_is_created(tmp_path: Path, implementation: str) -> None:
    db = tmp_path / "new" / "g.sqlite"
    db.parent.mkdir()
    g = open_guardrails(db, implementation, mode="enforce")
    g.start_turn()
    for _ in range(5):
        g.on_call(*LOOP)
    assert db.exists() and SQLiteStore(db).history("s1").report.intact


def test_two_processes_write_one_store(tmp_path: Path, implementation: str) -> None:
    db = tmp_path / "g.sqlite"
    code = """
        import sys
        from tripwire import Guardrails, GuardrailsConfig
        from tripwire.durability.sqlite import SQLiteStore
        store = SQLiteStore(sys.argv[1])
        for n in range(20):
            g = Guardrails(GuardrailsConfig(mode="enforce", unattended=False),
                           session_id=f"{sys.argv[2]}-{n}", store=store)
            g.start_turn()
            for _ in range(5):
                g.on_call("read_file", '{"path": "x"}')
            g.reset()
    """
    env = {**os.environ, "TRIPWIRE_IMPLEMENTATION": implementation}
    procs = [subprocess.Popen([sys.executable, "-c", textwrap.dedent(code), str(db), tag],
                              env=env) for tag in ("a", "b")]
    assert [p.wait(timeout=120) for p in procs] == [0, 0]
    reports = SQLiteStore(db).verify()
    sessions = [r for r in reports if r.session != "*"]
    assert len(sessions) == 40 and all(r.intact and r.rows == 2 for r in reports if r.session != "*")
    assert all(r.intact for r in reports)


# -- the CLI on a store written by other processes ----------------------------------------------

def cli(*argv: str) -> tuple[int, list[dict], str]:
    out, err = io.StringIO(), io.StringIO()
    code = main(list(argv), out=out, err=err)
    return code, [json.loads(x) for x in out.getvalue().splitlines() if x.startswith("{")], err.getvalue()


def test_status_and_reset_from_another_process(tmp_path: Path, implementation: str) -> None:
    db = tmp_path / "g.sqlite"
    child(HALT_AND_CRASH, implementation, str(db))
    code, records, _ = cli("status", str(db))
    assert code == 0
    (s1,) = records
    assert (s1["session"], s1["halted"], s1["halted_by"], s1["chain"]) == (
        "s1", True, ["watchdog"], "intact")
    live = open_guardrails(db, implementation, mode="enforce")  # a daemon hosting s1
    code, records, _ = cli("reset", str(db), "--session", "s1")  # the operator, elsewhere
    assert code == 0 and records[0]["cleared"] == ["watchdog"]
    live.start_turn()  # the daemon takes the reset at the session's next turn
    assert not live.halted
    assert cli("status", str(db))[1][0]["halted"] is False


def test_a_cli_reset_is_refused_until_enough_budget(tmp_path: Path, implementation: str) -> None:
    db = tmp_path / "g.sqlite"
    g = open_guardrails(db, implementation, max_session_cost_usd=1.0)
    g.start_turn()
    g.on_usage(cost_usd=1.5)
    code, _, err = cli("reset", str(db), "--session", "s1")
    assert code == 4 and "add at least $0.5001" in err
    assert cli("reset", str(db), "--session", "s1", "--add-budget", "0.5")[0] == 4
    code, records, _ = cli("reset", str(db), "--session", "s1", "--add-budget", "0.6")
    assert code == 0 and records[0]["max_session_cost_usd"] == pytest.approx(1.6)
    assert cli("reset", str(db), "--session", "s1", "--guardrail", "watchdog",
               "--add-budget", "1")[0] == 2
    restored = open_guardrails(db, implementation, max_session_cost_usd=1.0)
    assert not restored.halted and restored.status().max_session_cost_usd == pytest.approx(1.6)


def test_a_cli_reset_refuses_what_the_library_refuses(tmp_path: Path, implementation: str,
                                                     capsys: pytest.CaptureFixture[str]) -> None:
    """The CLI checks the library's own rule (CostCeiling.check_reset), on exact nano-dollars:
    a non-finite budget is refused (it would make the session unrestorable), and three
    ten-cent usages against a $0.30 ceiling are exactly at it (floats would sum 0.30000000000000004)."""
    db = tmp_path / "g.sqlite"
    g = open_guardrails(db, implementation, max_session_cost_usd=0.3)
    g.start_turn()
    for _ in range(3):
        g.on_usage(cost_usd=0.1)
    assert g.halted
    for bad, why in (("inf", "must be a finite number of US dollars"),
                     ("nan", "must be a finite number of US dollars"),
                     ("-1", "must not be negative")):
        with pytest.raises(SystemExit) as usage:  # a usage error, as money.py words it
            cli("reset", str(db), "--session", "s1", "--add-budget", bad)
        assert usage.value.code == 2 and why in capsys.readouterr().err
    code, _, err = cli("reset", str(db), "--session", "s1")
    assert code == 4 and "add at least $0.0001" in err  # spent == ceiling: any budget will do
    library = open_guardrails(db, implementation, max_session_cost_usd=0.3)
    with pytest.raises(ResetRefused) as refused:
        library.reset()
    assert f"tripwire: {refused.value.reason}\n" == err
    code, records, _ = cli("reset", str(db), "--session", "s1", "--add-budget", "0.01")
    assert code == 0 and records[0]["cleared"] == ["per-session cost ceiling"]
    restored = open_guardrails(db, implementation, max_session_cost_usd=0.3)
    assert not restored.halted and restored.status().max_session_cost_usd == pytest.approx(0.31)


def test_cli_errors(tmp_path: Path) -> None:
    assert cli("status", str(tmp_path / "none.sqlite"))[0] == 2
    db = tmp_path / "g.sqlite"
    SQLiteStore(db).close()
    code, _, err = cli("reset", str(db), "--session", "ghost")
    assert code == 2 and "no session 'ghost'" in err
    assert cli("verify", str(db))[0] == 0


def test_replay_continues_the_first_halfs_halt_in_a_new_process(tmp_path: Path,
                                                              implementation: str) -> None:
    lines = (ROOT / "corpus" / "examples" / "read-file-loop.jsonl").read_text().splitlines()
    first, second = tmp_path / "part1.jsonl", tmp_path / "part2.jsonl"
    first.write_text("\n".join(lines[:20]) + "\n")
    second.write_text('{"type": "turn_start"}\n' + "\n".join(lines[20:]) + "\n")
    db = tmp_path / "g.sqlite"
    env = {**os.environ, "TRIPWIRE_IMPLEMENTATION": implementation}
    run = [sys.executable, "-m", "tripwire", "replay", "--mode", "enforce", "--store", str(db),
           "--session", "loop"]
    one = subprocess.run([*run, str(first)], env=env, capture_output=True, text=True, check=False)
    assert one.returncode == 0, one.stderr
    assert '"action": "halt_session"' in one.stdout
    two = subprocess.run([*run, str(second)], env=env, capture_output=True, text=True,
                         check=False)
    records = [json.loads(x) for x in two.stdout.splitlines() if x.startswith("{")]
    assert records[0]["kind"] == "decision" and records[0]["action"] == "refuse_turn"
    assert records[0]["event"] == 0 and "repeated-tool-call" in records[0]["reason"]
