"""A store that exists but fails its own integrity is unreadable, not absent (issue 23, attack
1): a new process restores every session halted (``store_unreadable``) — with the spend the
anchor proves when there is one — instead of running with a fresh allowance; ``verify`` and
``status`` report it; only an operator's ``tripwire reset`` clears it, by moving the store aside
and starting a new chain that carries what the anchor proves.

The store is built by real appends (``halted``: spent $3 then halted by a loop; ``spender``:
$1 + $2, never halted; ``quiet``: $0.75), then corrupted on disk (``tests/corruption.py``), on
SQLite; the schema-version corruption on PostgreSQL too.
"""

from __future__ import annotations

import io
import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from corruption import CORRUPTIONS, corrupt
from store_backends import Backend, backend_fixture

from tripwire import Guardrails, GuardrailsConfig
from tripwire.cli.main import main as cli_main
from tripwire.durability.sqlite import SQLiteStore
from tripwire.fleet.fleet import Fleet

CONFIG = GuardrailsConfig(mode="enforce", unattended=False, max_session_cost_usd=100.0)
LOOP = ("read_file", '{"path": "src/a.py"}')
SECRET = "a secret kept from the agent"
SPENT = {"halted": 3.0, "spender": 3.0, "quiet": 0.75}
UNREADABLE = "watchdog halted the session: store_unreadable: the guardrail store cannot be read"


def build(location: str, implementation: str) -> None:
    store = SQLiteStore(location) if "://" not in location else None
    if store is None:
        from tripwire.durability.postgres import PostgresStore

        store = PostgresStore(location)
    for sid, spends in (("halted", [3.0]), ("spender", [1.0, 2.0]), ("quiet", [0.75])):
        g = Guardrails(CONFIG, session_id=sid, implementation=implementation, store=store)
        for usd in spends:
            g.start_turn()
            g.on_usage(cost_usd=usd)
            g.end_turn()
        if sid == "halted":
            g.start_turn()
            assert [g.on_call(*LOOP) for _ in range(5)][-1].halt_session
    store.close()


_RESTORE = """
import json, sys
from tripwire import Guardrails, GuardrailsConfig
from tripwire.durability.open import open_store
config = GuardrailsConfig(mode="enforce", unattended=False, max_session_cost_usd=100.0)
store = open_store(sys.argv[1])
out = {}
for sid in sys.argv[2:]:
    s = Guardrails(config, session_id=sid, store=store).status()
    out[sid] = [s.halted, list(s.halted_by), s.watchdog_reason, s.spent_usd]
print(json.dumps(out))
"""


def restore_in_a_new_process(location: str, implementation: str,
                             *sessions: str) -> dict[str, Any]:
    env = {**os.environ, "TRIPWIRE_IMPLEMENTATION": implementation}
    done = subprocess.run([sys.executable, "-c", _RESTORE, location, *sessions],
                          capture_output=True, text=True, env=env, timeout=120)
    assert done.returncode == 0, done.stderr
    assert "Traceback" not in done.stderr
    result: dict[str, Any] = json.loads(done.stdout)
    return result


def cli(*argv: str) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    return cli_main(list(argv), out=out, err=err), out.getvalue(), err.getvalue()


@pytest.fixture
def secured(request: pytest.FixtureRequest, tmp_path: Path,
            monkeypatch: pytest.MonkeyPatch) -> Path | None:
    """With a secret key and an anchor (in the environment, as the child processes see it),
    or with neither (the public default key)."""
    if not request.param:
        monkeypatch.delenv("TRIPWIRE_STORE_KEY", raising=False)
        monkeypatch.delenv("TRIPWIRE_STORE_ANCHOR", raising=False)
        return None
    anchor = tmp_path / "operator" / "tripwire.anchor"
    anchor.parent.mkdir()
    monkeypatch.setenv("TRIPWIRE_STORE_KEY", SECRET)
    monkeypatch.setenv("TRIPWIRE_STORE_ANCHOR", str(anchor))
    return anchor


KEYS = pytest.mark.parametrize("secured", [False, True], ids=["default-key", "secret+anchor"],
                               indirect=True)


@KEYS
@pytest.mark.parametrize("how", CORRUPTIONS)
def test_a_corrupted_store_restores_every_session_halted_in_a_new_process(
        tmp_path: Path, implementation: str, how: str, secured: Path | None) -> None:
    db = tmp_path / "tripwire.db"
    build(str(db), implementation)
    corrupt(db, how)
    got = restore_in_a_new_process(str(db), implementation, *SPENT, "never-seen")
    for sid, (halted, by, reason, spent) in got.items():
        assert (halted, by) == (True, ["watchdog"]), (sid, got)
        assert reason.startswith(UNREADABLE), reason
        # the anchor proves the spend; without one, nothing is proven (and nothing refilled:
        # the session is halted until an operator acts)
        assert spent == (SPENT.get(sid, 0.0) if secured else 0.0), (sid, got)


@KEYS
def test_verify_and_status_report_an_unreadable_store(tmp_path: Path, implementation: str,
                                                      secured: Path | None) -> None:
    db = tmp_path / "tripwire.db"
    build(str(db), implementation)
    corrupt(db, "random-page")
    code, out, err = cli("verify", str(db))
    lines = out.splitlines()
    assert (code, err) == (1, "")
    assert lines[0] == (f"*: UNREADABLE: {db}: unreadable: the database is corrupt (database "
                        "disk image is malformed)")
    if secured:
        assert lines[1:4] == [
            "halted: UNREADABLE: the anchor proves $3.0000 spent, halted by watchdog",
            "quiet: UNREADABLE: the anchor proves $0.7500 spent",
            "spender: UNREADABLE: the anchor proves $3.0000 spent"]
    assert lines[-1].startswith("verdict: UNREADABLE (the store cannot be read; ")
    code, out, err = cli("status", str(db))
    records = [json.loads(line) for line in out.splitlines()]
    assert (code, err) == (1, "")
    assert records[0]["kind"] == "store" and records[0]["chain"] == "unreadable"
    sessions = {r["session"]: r for r in records[1:]}
    assert set(sessions) == (set(SPENT) if secured else set())
    for sid, record in sessions.items():
        assert (record["halted"], record["chain"], record["spent_usd"]) == (
            True, "unreadable", SPENT[sid])
    code, out, _ = cli("status", str(db), "--session", "quiet")
    (_, quiet) = [json.loads(line) for line in out.splitlines()]
    assert (code, quiet["halted"], quiet["spent_usd"]) == (1, True, 0.75 if secured else 0.0)


@KEYS
def test_reset_moves_an_unreadable_store_aside_and_carries_what_the_anchor_proves(
        tmp_path: Path, implementation: str, secured: Path | None) -> None:
    db = tmp_path / "tripwire.db"
    build(str(db), implementation)
    corrupt(db, "truncated")
    code, out, err = cli("reset", str(db), "--session", "halted")
    assert (code, err) == (0, ""), err
    replaced, reset = (json.loads(line) for line in out.splitlines())
    assert replaced["kind"] == "store_replaced"
    assert replaced["carried_sessions"] == (3 if secured else 0)
    aside = [Path(p) for p in replaced["moved_to"]]
    assert aside[0].name.startswith("tripwire.db.unreadable-") and aside[0].exists()
    assert (reset["kind"], reset["session"]) == ("reset", "halted")
    code, out, _ = cli("verify", str(db))
    assert code == 0 and out.splitlines()[-1].startswith("verdict: intact")
    got = restore_in_a_new_process(str(db), implementation, *SPENT)
    for sid, (halted, _, _, spent) in got.items():
        assert halted is False, (sid, got)  # the reset one, and the others the anchor proves
        assert spent == (SPENT[sid] if secured else 0.0), (sid, got)


def test_a_halt_the_anchor_proves_survives_another_sessions_reset(
        tmp_path: Path, implementation: str, monkeypatch: pytest.MonkeyPatch) -> None:
    anchor = tmp_path / "tripwire.anchor"
    monkeypatch.setenv("TRIPWIRE_STORE_KEY", SECRET)
    monkeypatch.setenv("TRIPWIRE_STORE_ANCHOR", str(anchor))
    db = tmp_path / "tripwire.db"
    build(str(db), implementation)
    corrupt(db, "header")
    assert cli("reset", str(db), "--session", "quiet")[0] == 0
    got = restore_in_a_new_process(str(db), implementation, *SPENT)
    assert got["halted"][0] is True and got["halted"][2].startswith(
        "watchdog halt carried over: the store was unreadable")
    assert [got[s][0] for s in ("spender", "quiet")] == [False, False]


def test_a_fleet_restores_every_session_its_anchor_knows_halted(
        tmp_path: Path, implementation: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TRIPWIRE_STORE_KEY", SECRET)
    monkeypatch.setenv("TRIPWIRE_STORE_ANCHOR", str(tmp_path / "tripwire.anchor"))
    db = tmp_path / "tripwire.db"
    build(str(db), implementation)
    corrupt(db, "schema-version")
    fleet = Fleet(CONFIG, implementation=implementation, store=SQLiteStore(db))
    assert fleet.restore_all() == 3
    for sid, spent in SPENT.items():
        status = fleet.session(sid).status()
        assert (status.halted, status.spent_usd) == (True, spent)
        assert status.watchdog_reason.startswith(UNREADABLE)


def test_a_wrong_key_is_named_by_every_verb_with_exit_2(tmp_path: Path, implementation: str,
                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    """Not tampering: ``verify`` and ``status`` used to print BROKEN (exit 1) for every row."""
    monkeypatch.setenv("TRIPWIRE_STORE_KEY", SECRET)
    db = tmp_path / "tripwire.db"
    build(str(db), implementation)
    monkeypatch.setenv("TRIPWIRE_STORE_KEY", "another key")
    expected = (f"tripwire: {db}: this key is not the one the store was created with (set "
                "TRIPWIRE_STORE_KEY to the store's key)\n")
    for argv in (["verify", str(db)], ["status", str(db)],
                 ["reset", str(db), "--session", "halted"]):
        assert cli(*argv) == (2, "", expected), argv


# -- PostgreSQL: a schema version the store does not know ----------------------------------


@pytest.fixture
def pg(tmp_path: Path) -> Iterator[Backend]:
    class Request:
        param = "postgres"

    yield from backend_fixture(Request(), tmp_path)  # type: ignore[arg-type]


def test_a_schema_version_postgres_does_not_know_halts_and_reset_moves_it_aside(
        pg: Backend, tmp_path: Path, implementation: str,
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TRIPWIRE_STORE_KEY", SECRET)
    monkeypatch.setenv("TRIPWIRE_STORE_ANCHOR", str(tmp_path / "tripwire.anchor"))
    build(pg.location, implementation)
    pg.raw("UPDATE meta SET value = '999' WHERE key = 'schema_version'")
    got = restore_in_a_new_process(pg.location, implementation, *SPENT)
    for sid, (halted, _, reason, spent) in got.items():
        assert (halted, spent) == (True, SPENT[sid])
        assert reason.startswith(UNREADABLE) and "schema version 999 is newer" in reason
    code, out, _ = cli("verify", pg.location)
    assert code == 1 and out.splitlines()[-1].startswith("verdict: UNREADABLE")
    code, out, err = cli("reset", pg.location, "--session", "halted")
    assert code == 0, err
    aside = json.loads(out.splitlines()[0])["moved_to"][0]
    assert aside.startswith(f"schema {pg.schema}_unreadable_")
    try:
        got = restore_in_a_new_process(pg.location, implementation, *SPENT)
        assert {sid: (v[0], v[3]) for sid, v in got.items()} == {
            sid: (False, spent) for sid, spent in SPENT.items()}
    finally:
        pg.raw(f"DROP SCHEMA {aside.removeprefix('schema ')} CASCADE")
