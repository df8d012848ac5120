"""Every row of the attack table in docs/durability.md: the attack, what `verify` says, and how
the attacked session restores — with the public default key, and with a secret key and an
anchor file — on both backends (SQLite, PostgreSQL), except the attacks on the SQLite file
itself (an older copy, the file deleted, the WAL deleted).

The store is built by real appends: session ``halted`` (spent $3, then halted by the watchdog),
``spender`` (spent $1 + $2 in two turns, never halted) and ``quiet`` (spent $0.50). An agent that
can write the database then attacks it; the operator's process restores under ``enforce``
with a $100 per-session ceiling.
"""

from __future__ import annotations

import io
import os
import shutil
import sqlite3
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import msgpack
import pytest
from store_backends import BACKENDS, Backend, backend_fixture

from tripwire import Guardrails, GuardrailsConfig
from tripwire.cli.main import main as cli_main
from tripwire.durability.chain import DEFAULT_KEY, head_mac, list_hash, manifest_mac, row_mac
from tripwire.durability.sqlite import SQLiteStore

CONFIG = GuardrailsConfig(mode="enforce", unattended=False, max_session_cost_usd=100.0)
LOOP = ("read_file", '{"path": "src/a.py"}')
SECRET = "a secret kept from the agent"


def build(b: Backend, implementation: str, anchor: Path | None) -> dict[str, Any]:
    """The store before the attack; returns snapshots an attacker might keep (an older copy
    of the file on SQLite; the spender's head after its first turn on both)."""
    snapshots: dict[str, Any] = {}
    store = b.open(anchor=anchor)
    for sid, spends in (("halted", [3.0]), ("spender", [1.0, 2.0]), ("quiet", [0.5])):
        g = Guardrails(CONFIG, session_id=sid, implementation=implementation, store=store)
        for n, usd in enumerate(spends):
            g.start_turn()
            g.on_usage(cost_usd=usd)
            g.end_turn()
            if sid == "spender" and n == 0:
                (snapshots["spender-head-1"],) = b.query(
                    "SELECT * FROM heads WHERE session = 'spender'")
        if sid == "halted":
            g.start_turn()
            assert [g.on_call(*LOOP) for _ in range(5)][-1].halt_session
    if b.kind == "sqlite":
        snapshots["older-copy"] = _copy(Path(b.location), "older")
    g = Guardrails(CONFIG, session_id="quiet", implementation=implementation, store=store)
    g.start_turn()
    g.on_usage(cost_usd=0.25)  # one more row after the "older copy"
    store.close()
    return snapshots


def _copy(db: Path, name: str) -> Path:
    with sqlite3.connect(db) as src, sqlite3.connect(db.with_name(name + ".sqlite")) as dst:
        src.backup(dst)
    return db.with_name(name + ".sqlite")


def sql(b: Backend, *statements: str | tuple[str, tuple]) -> None:
    b.raw(*statements)


def last_seq(b: Backend, session: str) -> int:
    return int(b.query("SELECT max(seq) FROM rows WHERE session = ?", (session,))[0][0])


def flip_byte(b: Backend, session: str, seq: int) -> None:
    ((body,),) = b.query("SELECT body FROM rows WHERE session = ? AND seq = ?", (session, seq))
    edited = bytearray(body)
    edited[-1] ^= 0x01
    b.raw(("UPDATE rows SET body = ? WHERE session = ? AND seq = ?",
           (bytes(edited), session, seq)))


def reseal_without_halt(b: Backend, key: bytes) -> None:
    """The strongest attack with a key in hand: drop the halt row and re-seal chain, head and
    manifest consistently (possible with the public default key only)."""
    halt = last_seq(b, "halted")
    b.raw(("DELETE FROM rows WHERE session = 'halted' AND seq = ?", (halt,)))
    rows = b.query("SELECT seq, kind, body, time FROM rows WHERE session = 'halted' "
                   "ORDER BY seq")
    prev = bytes(32)
    statements: list[str | tuple[str, tuple]] = []
    for seq, kind, body, when in rows:
        prev = row_mac(key, "halted", seq, kind, body, when, prev)
        statements.append(("UPDATE rows SET mac = ? WHERE session = 'halted' AND seq = ?",
                           (prev, seq)))
    statements.append(("UPDATE heads SET count = ?, last_mac = ?, last_halt_seq = NULL, mac = ? "
                       "WHERE session = 'halted'",
                       (len(rows), prev, head_mac(key, "halted", len(rows), prev, None))))
    total = int(b.query("SELECT count(*) FROM rows")[0][0])
    halted = msgpack.packb([], use_bin_type=True)
    statements.append(("UPDATE manifest SET rows = ?, halted = ?, halted_hash = ?, mac = ?",
                       (total, halted, list_hash(halted),
                        manifest_mac(key, total, list_hash(halted)))))
    b.raw(*statements)


def drop_everything(b: Backend) -> None:
    sql(b, "DROP TABLE rows", "DROP TABLE heads", "DROP TABLE manifest", "DROP TABLE meta")


def delete_file(b: Backend) -> None:
    for suffix in ("", "-wal", "-shm"):
        Path(f"{b.location}{suffix}").unlink(missing_ok=True)


# (id, attacked session, attack(store, snapshots), detected with the default key, detected with
# a secret key and an anchor, SQLite only). Detected means: `verify` exits 1 and the session
# restores halted. The SQLite-only attacks work on the file itself.
Attack = Callable[[Backend, dict[str, Any]], None]
ATTACKS: list[tuple[str, str, Attack, bool, bool, bool]] = [
    ("edit the halt row", "halted",
     lambda db, s: flip_byte(db, "halted", last_seq(db, "halted")), True, True, False),
    ("edit the first row of a session that never halted", "spender",
     lambda db, s: flip_byte(db, "spender", 0), True, True, False),
    ("delete the halt row", "halted",
     lambda db, s: sql(db, f"DELETE FROM rows WHERE session = 'halted' AND seq = "
                           f"{last_seq(db, 'halted')}"), True, True, False),
    ("delete a middle row", "spender",
     lambda db, s: sql(db, "DELETE FROM rows WHERE session = 'spender' AND seq = 0"), True, True,
     False),
    ("reorder two rows", "spender",
     lambda db, s: sql(db, "UPDATE rows SET seq = -1 WHERE session = 'spender' AND seq = 0",
                       "UPDATE rows SET seq = 0 WHERE session = 'spender' AND seq = 1",
                       "UPDATE rows SET seq = 1 WHERE session = 'spender' AND seq = -1"),
     True, True, False),
    ("insert a forged row", "spender",
     lambda db, s: sql(db, ("INSERT INTO rows VALUES ('spender', 2, 'reset', ?, 0, ?)",
                            (msgpack.packb({"guardrail": "all", "budget_usd": 1000.0}),
                             bytes(32)))), True, True, False),
    ("delete the session's head", "halted",
     lambda db, s: sql(db, "DELETE FROM heads WHERE session = 'halted'"), True, True, False),
    ("edit the session's head", "halted",
     lambda db, s: sql(db, "UPDATE heads SET count = 1 WHERE session = 'halted'"), True, True,
     False),
    ("delete a halted session whole", "halted",
     lambda db, s: sql(db, "DELETE FROM rows WHERE session = 'halted'",
                       "DELETE FROM heads WHERE session = 'halted'"), True, True, False),
    ("delete a session that never halted whole", "spender",
     lambda db, s: sql(db, "DELETE FROM rows WHERE session = 'spender'",
                       "DELETE FROM heads WHERE session = 'spender'"), True, True, False),
    ("delete a halted session and the manifest record", "halted",
     lambda db, s: sql(db, "DELETE FROM rows WHERE session = 'halted'",
                       "DELETE FROM heads WHERE session = 'halted'", "DELETE FROM manifest"),
     True, True, False),
    ("delete later rows and replay an older head", "spender",
     lambda db, s: _replay_old_head(db, s["spender-head-1"]), True, True, False),
    ("empty every table", "halted",
     lambda db, s: sql(db, "DELETE FROM rows", "DELETE FROM heads", "DELETE FROM manifest"),
     True, True, False),
    ("drop every table", "halted", lambda db, s: drop_everything(db), False, True, False),
    ("replace the file with an older copy", "quiet",
     lambda db, s: shutil.copyfile(s["older-copy"], db.location), False, True, True),
    ("delete the database file", "halted", lambda db, s: delete_file(db), False, True, True),
    ("re-seal the chain without the halt row", "halted",
     lambda db, s: reseal_without_halt(db, DEFAULT_KEY), False, True, False),
]


def _replay_old_head(b: Backend, head: tuple[Any, ...]) -> None:
    count = head[1]
    sql(b, f"DELETE FROM rows WHERE session = 'spender' AND seq >= {count}",
        "DELETE FROM heads WHERE session = 'spender'",
        ("INSERT INTO heads VALUES (?, ?, ?, ?, ?)", head))


def run_cli(*argv: str) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    return cli_main(list(argv), out=out, err=err), out.getvalue(), err.getvalue()


@pytest.fixture
def backend(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Backend]:
    yield from backend_fixture(request, tmp_path)


CASES = [(kind, *attack[:5]) for kind in BACKENDS for attack in ATTACKS
         if kind == "sqlite" or not attack[5]]


@pytest.mark.parametrize("secret", [False, True], ids=["default-key", "secret-key+anchor"])
@pytest.mark.parametrize(("backend", "name", "session", "attack", "by_default", "by_secret"),
                         CASES, ids=[f"{c[0]}-{c[1].replace(' ', '-')}" for c in CASES],
                         indirect=["backend"])
def test_attack(backend: Backend, tmp_path: Path, implementation: str, monkeypatch,
                secret: bool, name: str, session: str, attack: Attack, by_default: bool,
                by_secret: bool) -> None:
    anchor = tmp_path / "operator" / "tripwire.anchor" if secret else None
    if secret:
        anchor.parent.mkdir()
        monkeypatch.setenv("TRIPWIRE_STORE_KEY", SECRET)
        monkeypatch.setenv("TRIPWIRE_STORE_ANCHOR", str(anchor))
    else:
        monkeypatch.delenv("TRIPWIRE_STORE_KEY", raising=False)
        monkeypatch.delenv("TRIPWIRE_STORE_ANCHOR", raising=False)
    snapshots = build(backend, implementation, anchor)
    attack(backend, snapshots)
    detected = by_secret if secret else by_default
    gone = backend.kind == "sqlite" and not Path(backend.location).exists()
    code, out, _ = run_cli("verify", backend.location) if not gone else (1, "", "no file")
    store = backend.open()
    g = Guardrails(CONFIG, session_id=session, implementation=implementation, store=store)
    if detected:
        # 1: a broken verdict; 2 only where no tripwire tables are left to verify
        assert code == (2 if name == "drop every table" else 1), out
        assert g.halted and g.status().halted_by[0] == "watchdog", name
        assert "tampered" in (g.status().watchdog_reason or "")
    else:  # the documented limits of the public key and of a store without an anchor
        assert not (g.halted and "tampered" in (g.status().watchdog_reason or ""))
    store.close()


@pytest.mark.parametrize("secret", [False, True], ids=["default-key", "secret-key"])
def test_deleting_the_wal_loses_nothing(tmp_path: Path, implementation: str, monkeypatch,
                                        secret: bool) -> None:
    b = Backend("sqlite", tmp_path)
    """Every append is checkpointed into the main file: deleting -wal and -shm behind the
    store's back rolls nothing back, and the halt stands."""
    if secret:
        monkeypatch.setenv("TRIPWIRE_STORE_KEY", SECRET)
    db = Path(b.location)
    build(b, implementation, None)
    for suffix in ("-wal", "-shm"):
        Path(f"{db}{suffix}").unlink(missing_ok=True)
    code, out, _ = run_cli("verify", str(db))
    assert code == 0 and out.splitlines()[-1] == "verdict: intact (3 sessions, 6 rows)"
    g = Guardrails(CONFIG, session_id="halted", implementation=implementation,
                   store=SQLiteStore(db))
    assert g.halted and "tampered" not in g.status().watchdog_reason
    assert g.status().spent_usd == pytest.approx(3.0)


@pytest.mark.parametrize("backend", BACKENDS, indirect=True)
def test_an_untampered_store_restores_exactly(backend: Backend, tmp_path: Path,
                                              implementation: str) -> None:
    """The control: no attack, no false alarm, every spend as written."""
    build(backend, implementation, tmp_path / "anchor")
    store = backend.open(anchor=tmp_path / "anchor")
    assert all(r.intact for r in store.verify())
    spent = {}
    for sid in ("halted", "spender", "quiet"):
        g = Guardrails(CONFIG, session_id=sid, implementation=implementation, store=store)
        spent[sid] = (g.halted, round(g.status().spent_usd, 9))
    assert spent == {"halted": (True, 3.0), "spender": (False, 3.0), "quiet": (False, 0.75)}
    assert os.path.exists(tmp_path / "anchor")
