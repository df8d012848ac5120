"""Every row of the attack table in docs/durability.md: the attack, what `verify` says, and how
the attacked session restores — with the public default key, and with a secret key and an
anchor file.

The store is built by real appends: session ``halted`` (spent $3, then halted by the watchdog),
``spender`` (spent $1 + $2 in two turns, never halted) and ``quiet`` (spent $0.50). An agent that
can write the database file then attacks it; the operator's process restores under ``enforce``
with a $100 per-session ceiling.
"""

from __future__ import annotations

import io
import os
import shutil
import sqlite3
from collections.abc import Callable
from pathlib import Path

import msgpack
import pytest

from tripwire import Guardrails, GuardrailsConfig
from tripwire.cli import main as cli_main
from tripwire.store import (
    DEFAULT_KEY,
    SQLiteStore,
    _head_mac,
    _list_hash,
    _manifest_mac,
    _row_mac,
)

CONFIG = GuardrailsConfig(mode="enforce", unattended=False, max_session_cost_usd=100.0)
LOOP = ("read_file", '{"path": "src/a.py"}')
SECRET = "a secret kept from the agent"


def build(db: Path, implementation: str, anchor: Path | None) -> dict[str, Path]:
    """The store before the attack; returns snapshots an attacker might keep."""
    snapshots = {}
    store = SQLiteStore(db, anchor=anchor)
    for sid, spends in (("halted", [3.0]), ("spender", [1.0, 2.0]), ("quiet", [0.5])):
        g = Guardrails(CONFIG, session_id=sid, implementation=implementation, store=store)
        for n, usd in enumerate(spends):
            g.start_turn()
            g.on_usage(cost_usd=usd)
            g.end_turn()
            if sid == "spender" and n == 0:
                snapshots["spender-head-1"] = _copy(db, "after-spender-1")
        if sid == "halted":
            g.start_turn()
            assert [g.on_call(*LOOP) for _ in range(5)][-1].halt_session
    snapshots["older-copy"] = _copy(db, "older")
    g = Guardrails(CONFIG, session_id="quiet", implementation=implementation, store=store)
    g.start_turn()
    g.on_usage(cost_usd=0.25)  # one more row after the "older copy"
    store.close()
    return snapshots


def _copy(db: Path, name: str) -> Path:
    with sqlite3.connect(db) as src, sqlite3.connect(db.with_name(name + ".sqlite")) as dst:
        src.backup(dst)
    return db.with_name(name + ".sqlite")


def sql(db: Path, *statements: str | tuple[str, tuple]) -> None:
    with sqlite3.connect(db) as raw:
        for st in statements:
            raw.execute(*(st if isinstance(st, tuple) else (st,)))


def last_seq(db: Path, session: str) -> int:
    with sqlite3.connect(db) as raw:
        return raw.execute("SELECT max(seq) FROM rows WHERE session = ?", (session,)).fetchone()[0]


def flip_byte(db: Path, session: str, seq: int) -> None:
    with sqlite3.connect(db) as raw:
        (body,) = raw.execute("SELECT body FROM rows WHERE session = ? AND seq = ?",
                              (session, seq)).fetchone()
        edited = bytearray(body)
        edited[-1] ^= 0x01
        raw.execute("UPDATE rows SET body = ? WHERE session = ? AND seq = ?",
                    (bytes(edited), session, seq))


def reseal_without_halt(db: Path, key: bytes) -> None:
    """The strongest attack with a key in hand: drop the halt row and re-seal chain, head and
    manifest consistently (possible with the public default key only)."""
    halt = last_seq(db, "halted")
    with sqlite3.connect(db) as raw:
        raw.execute("DELETE FROM rows WHERE session = 'halted' AND seq = ?", (halt,))
        rows = raw.execute("SELECT seq, kind, body, time FROM rows WHERE session = 'halted' "
                           "ORDER BY seq").fetchall()
        prev = bytes(32)
        for seq, kind, body, when in rows:
            prev = _row_mac(key, "halted", seq, kind, body, when, prev)
            raw.execute("UPDATE rows SET mac = ? WHERE session = 'halted' AND seq = ?",
                        (prev, seq))
        raw.execute("UPDATE heads SET count = ?, last_mac = ?, last_halt_seq = NULL, mac = ? "
                    "WHERE session = 'halted'",
                    (len(rows), prev, _head_mac(key, "halted", len(rows), prev, None)))
        total = raw.execute("SELECT count(*) FROM rows").fetchone()[0]
        halted = msgpack.packb([], use_bin_type=True)
        raw.execute("UPDATE manifest SET rows = ?, halted = ?, halted_hash = ?, mac = ?",
                    (total, halted, _list_hash(halted),
                     _manifest_mac(key, total, _list_hash(halted))))


def drop_everything(db: Path) -> None:
    sql(db, "DROP TABLE rows", "DROP TABLE heads", "DROP TABLE manifest", "DROP TABLE meta")


def delete_file(db: Path) -> None:
    for suffix in ("", "-wal", "-shm"):
        Path(f"{db}{suffix}").unlink(missing_ok=True)


# (id, attacked session, attack(db, snapshots), detected with the default key, detected with a
# secret key and an anchor). Detected means: `verify` exits 1 and the session restores halted.
Attack = Callable[[Path, dict[str, Path]], None]
ATTACKS: list[tuple[str, str, Attack, bool, bool]] = [
    ("edit the halt row", "halted",
     lambda db, s: flip_byte(db, "halted", last_seq(db, "halted")), True, True),
    ("edit the first row of a session that never halted", "spender",
     lambda db, s: flip_byte(db, "spender", 0), True, True),
    ("delete the halt row", "halted",
     lambda db, s: sql(db, f"DELETE FROM rows WHERE session = 'halted' AND seq = "
                           f"{last_seq(db, 'halted')}"), True, True),
    ("delete a middle row", "spender",
     lambda db, s: sql(db, "DELETE FROM rows WHERE session = 'spender' AND seq = 0"), True, True),
    ("reorder two rows", "spender",
     lambda db, s: sql(db, "UPDATE rows SET seq = -1 WHERE session = 'spender' AND seq = 0",
                       "UPDATE rows SET seq = 0 WHERE session = 'spender' AND seq = 1",
                       "UPDATE rows SET seq = 1 WHERE session = 'spender' AND seq = -1"),
     True, True),
    ("insert a forged row", "spender",
     lambda db, s: sql(db, ("INSERT INTO rows VALUES ('spender', 2, 'reset', ?, 0, ?)",
                            (msgpack.packb({"guardrail": "all", "budget_usd": 1000.0}),
                             bytes(32)))), True, True),
    ("delete the session's head", "halted",
     lambda db, s: sql(db, "DELETE FROM heads WHERE session = 'halted'"), True, True),
    ("edit the session's head", "halted",
     lambda db, s: sql(db, "UPDATE heads SET count = 1 WHERE session = 'halted'"), True, True),
    ("delete a halted session whole", "halted",
     lambda db, s: sql(db, "DELETE FROM rows WHERE session = 'halted'",
                       "DELETE FROM heads WHERE session = 'halted'"), True, True),
    ("delete a session that never halted whole", "spender",
     lambda db, s: sql(db, "DELETE FROM rows WHERE session = 'spender'",
                       "DELETE FROM heads WHERE session = 'spender'"), True, True),
    ("delete a halted session and the manifest record", "halted",
     lambda db, s: sql(db, "DELETE FROM rows WHERE session = 'halted'",
                       "DELETE FROM heads WHERE session = 'halted'", "DELETE FROM manifest"),
     True, True),
    ("delete later rows and replay an older head", "spender",
     lambda db, s: _replay_old_head(db, s["spender-head-1"]), True, True),
    ("empty every table", "halted",
     lambda db, s: sql(db, "DELETE FROM rows", "DELETE FROM heads", "DELETE FROM manifest"),
     True, True),
    ("drop every table", "halted", lambda db, s: drop_everything(db), False, True),
    ("replace the file with an older copy", "quiet",
     lambda db, s: shutil.copyfile(s["older-copy"], db), False, True),
    ("delete the database file", "halted", lambda db, s: delete_file(db), False, True),
    ("re-seal the chain without the halt row", "halted",
     lambda db, s: reseal_without_halt(db, DEFAULT_KEY), False, True),
]


def _replay_old_head(db: Path, snapshot: Path) -> None:
    with sqlite3.connect(snapshot) as old:
        head = old.execute("SELECT * FROM heads WHERE session = 'spender'").fetchone()
        count = head[1]
    sql(db, f"DELETE FROM rows WHERE session = 'spender' AND seq >= {count}",
        ("INSERT OR REPLACE INTO heads VALUES (?, ?, ?, ?, ?)", head))


def run_cli(*argv: str) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    return cli_main(list(argv), out=out, err=err), out.getvalue(), err.getvalue()


@pytest.mark.parametrize("secret", [False, True], ids=["default-key", "secret-key+anchor"])
@pytest.mark.parametrize(("name", "session", "attack", "by_default", "by_secret"), ATTACKS,
                         ids=[a[0].replace(" ", "-") for a in ATTACKS])
def test_attack(tmp_path: Path, implementation: str, monkeypatch, secret: bool, name: str,
                session: str, attack: Attack, by_default: bool, by_secret: bool) -> None:
    anchor = tmp_path / "operator" / "tripwire.anchor" if secret else None
    if secret:
        anchor.parent.mkdir()
        monkeypatch.setenv("TRIPWIRE_STORE_KEY", SECRET)
        monkeypatch.setenv("TRIPWIRE_STORE_ANCHOR", str(anchor))
    else:
        monkeypatch.delenv("TRIPWIRE_STORE_KEY", raising=False)
        monkeypatch.delenv("TRIPWIRE_STORE_ANCHOR", raising=False)
    db = tmp_path / "tripwire.sqlite"
    snapshots = build(db, implementation, anchor)
    attack(db, snapshots)
    detected = by_secret if secret else by_default
    code, out, _ = run_cli("verify", str(db)) if db.exists() else (1, "", "no file")
    g = Guardrails(CONFIG, session_id=session, implementation=implementation,
                   store=SQLiteStore(db))
    if detected:
        # 1: a broken verdict; 2 only where no tripwire tables are left to verify
        assert code == (2 if name == "drop every table" else 1), out
        assert g.halted and g.status().halted_by[0] == "watchdog", name
        assert "tampered" in (g.status().watchdog_reason or "")
    else:  # the documented limits of the public key and of a store without an anchor
        assert not (g.halted and "tampered" in (g.status().watchdog_reason or ""))


@pytest.mark.parametrize("secret", [False, True], ids=["default-key", "secret-key"])
def test_deleting_the_wal_loses_nothing(tmp_path: Path, implementation: str, monkeypatch,
                                        secret: bool) -> None:
    """Every append is checkpointed into the main file: deleting -wal and -shm behind the
    store's back rolls nothing back, and the halt stands."""
    if secret:
        monkeypatch.setenv("TRIPWIRE_STORE_KEY", SECRET)
    db = tmp_path / "tripwire.sqlite"
    build(db, implementation, None)
    for suffix in ("-wal", "-shm"):
        Path(f"{db}{suffix}").unlink(missing_ok=True)
    code, out, _ = run_cli("verify", str(db))
    assert code == 0 and out.splitlines()[-1] == "verdict: intact (3 sessions, 6 rows)"
    g = Guardrails(CONFIG, session_id="halted", implementation=implementation,
                   store=SQLiteStore(db))
    assert g.halted and "tampered" not in g.status().watchdog_reason
    assert g.status().spent_usd == pytest.approx(3.0)


def test_an_untampered_store_restores_exactly(tmp_path: Path, implementation: str) -> None:
    """The control: no attack, no false alarm, every spend as written."""
    db = tmp_path / "tripwire.sqlite"
    build(db, implementation, tmp_path / "anchor")
    store = SQLiteStore(db, anchor=tmp_path / "anchor")
    assert all(r.intact for r in store.verify())
    spent = {}
    for sid in ("halted", "spender", "quiet"):
        g = Guardrails(CONFIG, session_id=sid, implementation=implementation, store=store)
        spent[sid] = (g.halted, round(g.status().spent_usd, 9))
    assert spent == {"halted": (True, 3.0), "spender": (False, 3.0), "quiet": (False, 0.75)}
    assert os.path.exists(tmp_path / "anchor")
