"""Fault-injection regressions: inputs and races that crashed the host or lost durable rows.

Each test here failed before its fix (a segfault, a RecursionError out of the hot path, a halt
lost on eviction, a decision blocked by a held store lock ...). Crash trials with real
processes killed at random points are in ``test_crash.py``; store tampering in
``test_tamper.py``.
"""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap

import pytest

from tripwire import GuardrailsConfig, InvalidEvent, Watchdog
from tripwire.fleet.fleet import Fleet
from tripwire.interchange.events import Text

WARN = GuardrailsConfig(mode="warn", unattended=False)


def nested(depth: int) -> dict:
    root: dict = {}
    cur = root
    for _ in range(depth):
        cur["a"] = {}
        cur = cur["a"]
    return root


class ReprRaises:
    def __repr__(self) -> str:
        raise RuntimeError("repr is broken")


# -- batch ingest: the first row's session id ---------------------------------------------------


@pytest.mark.parametrize("rows", [
    [(None, "text", "x")],
    [(None, "call", "read_file", "{}")],
    [(None, Text("x"))],
    [(None, "text", "x"), ("s1", "text", "y")],
], ids=["text", "call", "event-object", "then-a-valid-row"])
def test_a_first_row_without_session_id_is_invalid(rows: list, implementation: str) -> None:
    fleet = Fleet(WARN, implementation=implementation)
    with pytest.raises(InvalidEvent, match=r"event 0: a session id is a non-empty str, not None"):
        fleet.observe_many(rows)
    assert len(fleet) == 0  # nothing was observed


def test_a_column_batch_with_a_leading_none_session_is_invalid(implementation: str) -> None:
    fleet = Fleet(WARN, implementation=implementation)
    with pytest.raises(InvalidEvent, match=r"event 0: a session id is a non-empty str, not None"):
        fleet.observe_many({"session": [None, "s1"], "kind": ["text", "text"],
                            "text": ["x", "y"]})
    assert len(fleet) == 0


def test_the_native_batch_decoder_does_not_crash_the_process() -> None:
    """The segfault itself, in a child process so a regression reports instead of killing
    the test run."""
    code = textwrap.dedent("""
        from tripwire import GuardrailsConfig, InvalidEvent
        from tripwire.interchange.events import Text
        from tripwire.fleet.fleet import Fleet
        for rows in ([(None, "text", "x")], [(None, "call", "f", "{}")], [(None, Text("x"))]):
            try:
                Fleet(GuardrailsConfig(mode="warn", unattended=False),
                      implementation="native").observe_many(rows)
            except InvalidEvent:
                pass
            else:
                raise SystemExit("accepted a row without a session id")
        print("ok")
    """)
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          timeout=120, check=False, env={**os.environ})
    assert proc.returncode == 0, (proc.returncode, proc.stderr)
    assert proc.stdout.strip() == "ok"


# -- deeply nested and unrepresentable args --------------------------------------------------


def test_deeply_nested_decoded_args_are_observed(implementation: str) -> None:
    """10,000 levels of dict, passed as a Python object: a call like any other (compared as
    the raw bytes of its serialization, past the canonicalizer's depth), never RecursionError."""
    w = Watchdog(implementation=implementation)
    args = nested(10_000)
    alerts = [w.observe_call("write", args) for _ in range(5)]
    assert [a.signal for a in alerts[4]] == ["repeated-tool-call"]
    assert all(not a for a in alerts[:4])
    assert alerts[4][0].reason.count('{"a":') >= 10  # the quote is the serialization, cut short


def test_deeply_nested_args_through_guardrails_and_batches(implementation: str) -> None:
    fleet = Fleet(GuardrailsConfig(mode="enforce", unattended=False),
                  implementation=implementation)
    g = fleet.session("s1")
    g.start_turn()
    for _ in range(4):
        assert g.on_call("write", nested(5_000)).proceed
    assert g.on_call("write", nested(5_000)).halt_session
    out = fleet.observe_many([("s2", "turn_start")]
                             + [("s2", "call", "write", nested(3_000))] * 5)
    assert [(i, d.action) for i, _, d in out] == [(5, "halt_session")]


def test_deep_results_and_errors_are_observed(implementation: str) -> None:
    w = Watchdog(implementation=implementation)
    alerts = [w.observe_result("t", error=nested(4_000)) for _ in range(3)]
    # one error thrice: repeated-failure's alone (SPEC §12.3)
    assert [a.signal for a in alerts[2]] == ["repeated-failure"]
    w2 = Watchdog(implementation=implementation)
    assert w2.observe_result("t", payload=nested(4_000)) == ()


def test_a_value_whose_repr_raises_is_observed(implementation: str) -> None:
    w = Watchdog(implementation=implementation)
    for _ in range(4):
        assert w.observe_call("t", {"x": ReprRaises()}) == ()
    (alert,) = w.observe_call("t", {"x": ReprRaises()})
    assert alert.signal == "repeated-tool-call"
    assert "<unrepresentable ReprRaises>" in alert.reason
    failing = [w.observe_result("t", error=ReprRaises()) for _ in range(3)]
    assert [a.signal for a in failing[2]] == ["repeated-failure"]  # one error thrice (§12.3)


def test_circular_args_are_observed(implementation: str) -> None:
    loop: dict = {"k": 1}
    loop["self"] = loop
    w = Watchdog(implementation=implementation)
    for _ in range(4):
        assert w.observe_call("t", loop) == ()
    assert [a.signal for a in w.observe_call("t", loop)] == ["repeated-tool-call"]


def test_deep_serialization_agrees_with_json_where_both_apply() -> None:
    from tripwire.base.inputs import _iterative_json, _to_json

    value = {"b": [1, 2.5, None, True, "é"], "a": {"z": {}, "y": []}, 3: "int key"}
    import json

    for sort_keys in (False, True):
        expected = json.dumps({str(k) if not isinstance(k, str) else k: v
                               for k, v in value.items()}, ensure_ascii=False,
                              separators=(",", ":"), sort_keys=sort_keys)
        assert _iterative_json(value, sort_keys) == expected
    assert _to_json(nested(300), sort_keys=False) == (
        '{"a":' * 300 + "{}" + "}" * 300).encode()


# -- spend is durable at every usage event -----------------------------------------------------

import sqlite3  # noqa: E402
import threading  # noqa: E402
import time  # noqa: E402
from pathlib import Path  # noqa: E402

from tripwire import GuardrailHalted, Guardrails  # noqa: E402
from tripwire.cli.main import main as cli_main  # noqa: E402
from tripwire.durability.sqlite import SQLiteStore  # noqa: E402
from tripwire.errors import StoreError  # noqa: E402

LOOP = ("read_file", '{"path": "src/a.py"}')
ENFORCE = GuardrailsConfig(mode="enforce", unattended=False)


def restored_spend(db: Path, implementation: str, session: str = "s1") -> float:
    g = Guardrails(ENFORCE, session_id=session, implementation=implementation,
                   store=SQLiteStore(db))
    return g.status().spent_usd


def test_a_turn_halted_by_the_watchdog_keeps_its_spend(tmp_path: Path,
                                                       implementation: str) -> None:
    db = tmp_path / "g.sqlite"
    g = Guardrails(ENFORCE, session_id="s1", implementation=implementation,
                   store=SQLiteStore(db))
    g.start_turn()
    g.on_usage(model="m", input_tokens=10, cost_usd=9.0)
    decisions = [g.on_call(*LOOP) for _ in range(5)]
    assert decisions[-1].halt_session
    g.end_turn()
    assert restored_spend(db, implementation) == pytest.approx(9.0)


def test_a_turn_cut_by_the_watchdog_keeps_its_spend(tmp_path: Path, implementation: str) -> None:
    db = tmp_path / "g.sqlite"
    g = Guardrails(ENFORCE, session_id="s1", implementation=implementation,
                   store=SQLiteStore(db))
    g.start_turn()
    g.on_usage(cost_usd=2.5)
    for _ in range(3):
        decision = g.on_result("t", no_op=True, payload="x")
    assert decision.cut_turn and not g.halted
    g.end_turn()
    assert restored_spend(db, implementation) == pytest.approx(2.5)


def test_spend_is_in_the_store_when_on_usage_returns(tmp_path: Path,
                                                     implementation: str) -> None:
    """No turn end, no trip: the usage event alone (the crash trials of test_crash.py kill the
    process at random points on top of this)."""
    db = tmp_path / "g.sqlite"
    g = Guardrails(ENFORCE, session_id="s1", implementation=implementation,
                   store=SQLiteStore(db))
    g.start_turn()
    g.on_usage(cost_usd=3.85)
    g.on_usage(cost_usd=0.10)
    assert restored_spend(db, implementation) == pytest.approx(3.95)


def test_a_batch_keeps_the_spend_of_a_halted_turn(tmp_path: Path, implementation: str) -> None:
    db = tmp_path / "g.sqlite"
    fleet = Fleet(ENFORCE, store=SQLiteStore(db), implementation=implementation)
    out = fleet.observe_many([("s1", "turn_start"), ("s1", "usage", "m", 10, 5, 9.0)]
                             + [("s1", "call", *LOOP)] * 5 + [("s2", "usage", "m", 1, 1, 0.25)])
    assert [(i, d.action) for i, _, d in out] == [(6, "halt_session")]
    assert restored_spend(db, implementation) == pytest.approx(9.0)
    assert restored_spend(db, implementation, "s2") == pytest.approx(0.25)


# -- eviction ----------------------------------------------------------------------------------


class FlakyStore:
    """A real store that refuses appends while ``failing`` (a held lock, a full disk)."""

    def __init__(self, db: Path, delay: float = 0.0) -> None:
        self.inner = SQLiteStore(db)
        self.failing = False
        self.delay = delay
        self.appended: list[tuple[str, str, dict]] = []
        self._lock = threading.Lock()

    def append(self, session: str, kind: str, data: dict, *, wait: float | None = None):
        if self.delay:
            time.sleep(self.delay)
        if self.failing:
            raise StoreError("flaky.sqlite: database is locked")
        row = self.inner.append(session, kind, data, wait=wait)
        with self._lock:
            self.appended.append((session, kind, data))
        return row

    def history(self, session: str):
        return self.inner.history(session)

    def histories(self, sessions=None):
        return self.inner.histories(sessions)


def test_evict_keeps_a_session_whose_halt_is_not_in_the_store(tmp_path: Path,
                                                              implementation: str) -> None:
    store = FlakyStore(tmp_path / "g.sqlite")
    fleet = Fleet(ENFORCE, store=store, implementation=implementation)
    fleet.session("s1").start_turn()
    store.failing = True
    decisions = [fleet.on_call("s1", *LOOP) for _ in range(5)]
    assert decisions[-1].halt_session
    assert not fleet.evict("s1") and "s1" in fleet  # its halt exists only in memory
    assert fleet.evict_idle(0) == 0
    store.failing = False
    assert fleet.evict("s1") and "s1" not in fleet
    with pytest.raises(GuardrailHalted):
        fleet.session("s1").start_turn()  # restored from the store: still halted


def test_eviction_racing_a_session_in_use_loses_no_decision(tmp_path: Path,
                                                           implementation: str) -> None:
    """The agent's thread halts and resets its session over and over while another thread
    evicts it: no exception reaches the agent, every halt decision reaches it, and each halt
    and reset is written exactly once."""
    store = FlakyStore(tmp_path / "g.sqlite", delay=0.002)  # a slow store widens every window
    fleet = Fleet(ENFORCE, store=store, implementation=implementation)
    halts, resets, errors = [], [], []
    stop = threading.Event()

    def agent() -> None:
        try:
            for n in range(30):
                fleet.session("s1").start_turn()
                args = f'{{"path": "f{n}.py"}}'
                for _ in range(5):
                    decision = fleet.on_call("s1", "read_file", args)
                    if decision.halt_session:
                        halts.append(n)
                        break
                fleet.reset("s1")
                resets.append(n)
        except BaseException as exc:
            errors.append(exc)
        finally:
            stop.set()

    def evictor() -> None:
        try:
            while not stop.is_set():
                fleet.evict("s1")
                fleet.evict_idle(0)
        except BaseException as exc:
            errors.append(exc)

    threads = [threading.Thread(target=agent), threading.Thread(target=evictor)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=120)
    assert errors == []
    assert len(resets) == 30
    trips = [d for s, k, d in store.appended if k == "trip" and d["halts"]]
    assert len(trips) == len(halts)  # each halt written once
    assert len([1 for _, k, _ in store.appended if k == "reset"]) == 30


# -- store failures: fail open, promptly, without losing rows ---------------------------------


def test_a_deleted_database_file_keeps_rows_in_memory(tmp_path: Path, implementation: str,
                                                      caplog) -> None:
    db = tmp_path / "g.sqlite"
    g = Guardrails(ENFORCE, session_id="s1", implementation=implementation,
                   store=SQLiteStore(db))
    g.start_turn()
    for suffix in ("", "-wal", "-shm"):
        Path(f"{db}{suffix}").unlink(missing_ok=True)
    decisions = [g.on_call(*LOOP) for _ in range(5)]
    assert decisions[-1].halt_session and g.halted
    assert g.unpersisted_rows == 1  # not "written" into the unlinked file
    assert any("deleted or replaced while in use" in r.getMessage() for r in caplog.records)


def test_guardrails_on_a_corrupt_store_restore_halted_not_fresh(tmp_path: Path,
                                                                implementation: str,
                                                                caplog) -> None:
    """A store that exists but is not a database is unreadable, not absent (issue 23): under
    enforce the session restores halted (store_unreadable) instead of with a fresh allowance;
    below enforce and without a cost ceiling it keeps deciding in memory, as before."""
    db = tmp_path / "junk.sqlite"
    db.write_bytes(os.urandom(8192))
    g = Guardrails(ENFORCE, session_id="s1", implementation=implementation,
                   store=SQLiteStore(db))  # neither raises
    with pytest.raises(GuardrailHalted, match="store_unreadable: the guardrail store cannot "
                                              "be read"):
        g.start_turn()
    messages = [r.getMessage() for r in caplog.records]
    assert any("store unavailable" in m for m in messages)
    warn = Guardrails(GuardrailsConfig(mode="warn", unattended=False), session_id="s2",
                      implementation=implementation, store=SQLiteStore(db))
    warn.start_turn()
    assert [warn.on_call(*LOOP) for _ in range(5)][-1].proceed


def test_a_held_write_lock_does_not_hold_the_decision(tmp_path: Path,
                                                      implementation: str) -> None:
    """Another writer holds the lock far longer than the store's timeout would wait: the halt
    decision returns while the lock is still held (the holder lets go only once it has), and
    the row reaches the store in the background once the lock is free."""
    db = tmp_path / "g.sqlite"
    g = Guardrails(ENFORCE, session_id="s1", implementation=implementation,
                   store=SQLiteStore(db, timeout=60.0))
    g.start_turn()
    for _ in range(4):
        g.on_call(*LOOP)
    holder = sqlite3.connect(db, isolation_level=None)
    holder.execute("BEGIN IMMEDIATE")
    decided = threading.Event()
    result: list = []

    def decide() -> None:
        result.append(g.on_call(*LOOP))
        decided.set()

    t = threading.Thread(target=decide)
    t.start()
    assert decided.wait(30), "the decision waited for the store's lock"
    assert result[0].halt_session and g.unpersisted_rows == 1
    holder.execute("ROLLBACK")
    holder.close()
    t.join()
    deadline = time.monotonic() + 30
    while g.unpersisted_rows and time.monotonic() < deadline:
        time.sleep(0.02)
    assert g.unpersisted_rows == 0  # the background retrier wrote it
    with pytest.raises(GuardrailHalted):
        Guardrails(ENFORCE, session_id="s1", implementation=implementation,
                   store=SQLiteStore(db)).start_turn()


def test_a_refused_turn_retries_the_outbox(tmp_path: Path, implementation: str) -> None:
    store = FlakyStore(tmp_path / "g.sqlite")
    g = Guardrails(ENFORCE, session_id="s1", implementation=implementation, store=store)
    g.start_turn()
    store.failing = True
    assert [g.on_call(*LOOP) for _ in range(5)][-1].halt_session
    store.failing = False
    with pytest.raises(GuardrailHalted):
        g.start_turn()  # never reaches end_turn: the refusal is a decision point too
    assert g.unpersisted_rows == 0
    assert [k for _, k, _ in store.appended] == ["trip"]


def test_rows_of_dropped_guardrails_are_still_written(tmp_path: Path,
                                                      implementation: str) -> None:
    """A host that lets go of a session's guardrails while its halt waits for the store: the
    retrier holds the rows itself and writes them once the store takes them."""
    import gc

    store = FlakyStore(tmp_path / "g.sqlite")
    g = Guardrails(ENFORCE, session_id="s1", implementation=implementation, store=store)
    g.start_turn()
    store.failing = True
    assert [g.on_call(*LOOP) for _ in range(5)][-1].halt_session
    del g
    gc.collect()
    store.failing = False
    deadline = time.monotonic() + 30
    while not store.appended and time.monotonic() < deadline:
        time.sleep(0.02)
    assert [k for _, k, _ in store.appended] == ["trip"]


def test_a_halt_waiting_in_the_outbox_is_written_at_exit(tmp_path: Path,
                                                         implementation: str) -> None:
    """A real process halts while another holds the store's lock, then exits normally: the
    halt is written on the way out (or by the background retrier before), never lost."""
    db = tmp_path / "g.sqlite"
    SQLiteStore(db).close()
    holder = sqlite3.connect(db, isolation_level=None)
    holder.execute("BEGIN IMMEDIATE")
    code = textwrap.dedent("""
        import sys
        from tripwire import Guardrails, GuardrailsConfig
        from tripwire.durability.sqlite import SQLiteStore
        g = Guardrails(GuardrailsConfig(mode="enforce", unattended=False), session_id="s1",
                       store=SQLiteStore(sys.argv[1]))
        g.start_turn()
        d = [g.on_call("read_file", '{"path": "a"}') for _ in range(5)][-1]
        print("halted" if d.halt_session else "not halted", g.unpersisted_rows, flush=True)
        sys.stdin.readline()  # the parent lets go of the lock, then says so
    """)
    env = {**os.environ, "TRIPWIRE_IMPLEMENTATION": implementation}
    proc = subprocess.Popen([sys.executable, "-c", code, str(db)], env=env, text=True,
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE)
    assert proc.stdout.readline().split() == ["halted", "1"]
    holder.execute("ROLLBACK")
    holder.close()
    proc.stdin.write("go\n")
    proc.stdin.close()
    assert proc.wait(timeout=60) == 0, proc.stderr.read()
    with pytest.raises(GuardrailHalted):
        Guardrails(ENFORCE, session_id="s1", implementation=implementation,
                   store=SQLiteStore(db)).start_turn()


# -- the CLI's reset with the wrong key ---------------------------------------------------------


def test_a_reset_with_the_wrong_key_is_refused(tmp_path: Path, implementation: str,
                                               monkeypatch) -> None:
    import io

    db = tmp_path / "g.sqlite"
    monkeypatch.setenv("TRIPWIRE_STORE_KEY", "a secret the agent cannot read")
    g = Guardrails(ENFORCE, session_id="s1", implementation=implementation,
                   store=SQLiteStore(db))
    g.start_turn()
    assert [g.on_call(*LOOP) for _ in range(5)][-1].halt_session
    monkeypatch.delenv("TRIPWIRE_STORE_KEY")
    out, err = io.StringIO(), io.StringIO()
    assert cli_main(["reset", str(db), "--session", "s1"], out=out, err=err) == 2
    assert out.getvalue() == ""
    assert err.getvalue().count("\n") == 1
    assert "this key is not the one the store was created with" in err.getvalue()
    monkeypatch.setenv("TRIPWIRE_STORE_KEY", "a secret the agent cannot read")
    store = SQLiteStore(db)
    assert [r.kind for r in store.history("s1").rows] == ["trip"]  # nothing was appended
    assert store.verify()[0].intact
    assert cli_main(["reset", str(db), "--session", "s1"], out=out, err=err) == 0



# -- read-only operator verbs (the solid issue, section 7) ---------------------------------------


@pytest.mark.parametrize("verb", ["status", "verify"])
@pytest.mark.parametrize("content", ["foreign", "empty"])
def test_read_only_verbs_refuse_a_file_that_is_not_a_store(tmp_path: Path, verb: str,
                                                           content: str) -> None:
    import hashlib
    import io

    db = tmp_path / "other.sqlite"
    if content == "foreign":
        with sqlite3.connect(db) as raw:
            raw.execute("CREATE TABLE customers(id INTEGER PRIMARY KEY, name TEXT)")
    else:
        db.write_bytes(b"")
    before = hashlib.sha256(db.read_bytes()).hexdigest()
    out, err = io.StringIO(), io.StringIO()
    assert cli_main([verb, str(db)], out=out, err=err) == 2
    assert out.getvalue() == ""
    assert err.getvalue() == f"tripwire: {db}: not a tripwire store (no tripwire tables in it)\n"
    assert hashlib.sha256(db.read_bytes()).hexdigest() == before  # nothing was written
    assert not Path(f"{db}-wal").exists()


def test_verify_prints_a_verdict_for_an_empty_store(tmp_path: Path) -> None:
    import io

    db = tmp_path / "g.sqlite"
    SQLiteStore(db).close()
    out = io.StringIO()
    assert cli_main(["verify", str(db)], out=out, err=io.StringIO()) == 0
    assert out.getvalue() == "verdict: intact (0 sessions, 0 rows)\n"


def test_read_only_verbs_do_not_announce_the_default_key(tmp_path: Path) -> None:
    db = tmp_path / "g.sqlite"
    SQLiteStore(db).close()
    env = {k: v for k, v in os.environ.items() if k != "TRIPWIRE_STORE_KEY"}
    for verb in ("status", "verify"):
        proc = subprocess.run([sys.executable, "-m", "tripwire", verb, str(db)], env=env,
                              capture_output=True, text=True, timeout=60, check=False)
        assert proc.returncode == 0 and proc.stderr == "", (verb, proc.stderr)


# -- batch ingest validates what the API validates (the solid issue, section 6) ------------------


@pytest.mark.parametrize(("row", "message"), [
    (("s1", "result", "t", "x", None, "false"), "field 'no_op' must be a boolean, not str"),
    (("s1", "result", "t", "x", None, 1), "field 'no_op' must be a boolean, not int"),
    (("s1", "call", "t", "{}", 5), "field 'id' must be a string, not int"),
    (("s1", "result", "t", "x", None, False, 5), "field 'id' must be a string, not int"),
], ids=["no_op-str", "no_op-int", "call-id-int", "result-id-int"])
def test_batch_rows_are_validated_as_the_api_validates(row: tuple, message: str,
                                                       implementation: str) -> None:
    fleet = Fleet(WARN, implementation=implementation)
    with pytest.raises(InvalidEvent, match=f"event 1: {message}"):
        fleet.observe_many([("s1", "turn_start"), row])
    g = fleet.session("s2")
    with pytest.raises(InvalidEvent, match=message):  # the API's own words
        if row[1] == "call":
            g.on_call("t", "{}", id=row[4])
        else:
            g.on_result("t", payload="x", no_op=row[5], id=row[6] if len(row) > 6 else None)


def test_a_batch_usage_row_out_of_range_is_invalid_in_both_engines(implementation: str) -> None:
    fleet = Fleet(WARN, implementation=implementation)
    with pytest.raises(InvalidEvent, match=r"^event 1: cost_usd must be at most \$1,000,000,000"):
        fleet.observe_many([("s1", "turn_start"), ("s1", "usage", "m", 10, 1, 1e308)])
