"""Durable store: round trips, tamper verdicts, durability and concurrency with real processes,
bad files, key resolution (SPEC §5)."""

from __future__ import annotations

import math
import multiprocessing
import os
import sqlite3
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import blake3
import msgpack
import pytest
from store_backends import BACKENDS, Backend, backend_fixture

from tripwire.durability.chain import (
    DEFAULT_KEY_NOTICE,
    KEY_ENV,
    ChainReport,
    EventStore,
    Row,
    SessionHistory,
    format_reports,
    resolve_key,
    row_mac,
)
from tripwire.durability.open import open_store
from tripwire.durability.sqlite import SQLiteStore
from tripwire.errors import StoreError, StoreUnreadable, TripwireError

HALT_1 = {"halts": True, "guardrail": "watchdog", "reason": "same call repeated 5 times"}
HALT_2 = {"halts": True, "guardrail": "cost_ceiling", "reason": "spent $5.20 of $5.00"}
# s-1: halt at 2, reset at 3, halt again at 4 (the last row); s-2: three plain rows.
S1 = [
    ("context", {"tokens": 1200}),
    ("spend", {"usd": 0.25, "halts": False}),
    ("trip", HALT_1),
    ("reset", {"guardrails": ["watchdog"], "budget_usd": 2.0}),
    ("trip", HALT_2),
]
S2 = [("spend", {"usd": 0.5}), ("spend", {"usd": 0.75}), ("context", {"tokens": 80})]
MANIFEST_ROWS = len(S1) + len(S2)


@pytest.fixture(autouse=True)
def _no_env_key(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(KEY_ENV, raising=False)  # the default key unless a test sets one


@pytest.fixture(params=BACKENDS)
def backend(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Backend]:
    """An empty store location on each backend (SQLite file, PostgreSQL schema)."""
    yield from backend_fixture(request, tmp_path)


@pytest.fixture
def path(backend: Backend) -> Backend:
    """A store holding S1 and S2, closed again so tests tamper with the bare database."""
    with backend.open() as store:
        for kind, data in S1:
            store.append("s-1", kind, data)
        for kind, data in S2:
            store.append("s-2", kind, data)
    return backend


def raw(path: Backend, *statements: tuple[str, tuple[Any, ...]] | str) -> None:
    """Tamper with the database as an agent with write access would: plain SQL, no key."""
    path.raw(*statements)


def report(
    session: str,
    rows: int,
    first_broken: int | None = None,
    problem: str | None = None,
    *,
    head_valid: bool = True,
    last_halt_seq: int | None = 4,
) -> ChainReport:
    return ChainReport(
        session, first_broken is None, rows, first_broken, problem, head_valid, last_halt_seq
    )


S2_INTACT = report("s-2", 3, last_halt_seq=None)


def manifest_report(problem: str, present: int, *, valid: bool = True) -> ChainReport:
    return ChainReport("*", False, present, None, problem, valid, None)


def check(path: Backend, expected: ChainReport, *, store_report: ChainReport | None = None) -> None:
    """history(), histories() and verify() agree on the verdict for s-1; the trusted prefix is
    exactly the rows before first_broken."""
    with path.open() as store:
        history = store.history("s-1")
        assert history.report == expected
        assert store.histories()["s-1"] == history
        assert store.verify("s-1") == [expected]
        cut = len(S1) if expected.first_broken is None else expected.first_broken
        cut = min(cut, len(S1))
        assert [(r.seq, r.kind, r.data) for r in history.rows] == [
            (i, kind, data) for i, (kind, data) in enumerate(S1[:cut])
        ]
        whole = [expected, S2_INTACT] + ([store_report] if store_report else [])
        assert store.verify() == whole


# --- round trips --------------------------------------------------------------------------------


def test_append_returns_the_row_and_history_reads_it_back(backend: Backend) -> None:
    data = {
        "usd": 0.1 + 0.2,
        "big": 2**63,
        "neg": -(2**63),
        "huge": 1e300,
        "inf": math.inf,
        "none": None,
        "flag": False,
        "text": "naïve — ✓",
        "nested": {"calls": [{"name": "bash", "args": {"cmd": "ls"}}, [1, 2.5, None]]},
        "pair": (1, "two"),
    }
    before = time.time()
    with backend.open() as store:
        appended = [
            store.append("s-1", kind, data) for kind in ("trip", "reset", "spend", "context")
        ]
        history = store.history("s-1")
    assert [r.seq for r in appended] == [0, 1, 2, 3]
    assert [r.kind for r in appended] == ["trip", "reset", "spend", "context"]
    assert history.rows == tuple(appended)
    assert history.report == ChainReport("s-1", True, 4, None, None, True, None)
    row = history.rows[0]
    assert isinstance(row, Row)
    assert row.session == "s-1"
    assert row.data == {**data, "pair": [1, "two"]}  # tuples come back as lists
    assert row.data["usd"] == 0.30000000000000004
    assert before <= row.time <= time.time()


def test_sessions_are_chained_independently(path: Backend) -> None:
    with path.open() as store:
        assert store.sessions() == ["s-1", "s-2"]
        assert [r.seq for r in store.history("s-2").rows] == [0, 1, 2]
        assert store.history("s-1").report == report("s-1", 5)
        assert store.verify() == [report("s-1", 5), S2_INTACT]
        assert store.append("s-2", "spend", {"usd": 1.0}).seq == 3


def test_last_halt_seq_follows_rows_with_halts_true(path: Backend) -> None:
    with path.open() as store:
        assert store.history("s-1").report.last_halt_seq == 4
        store.append("s-1", "reset", {"halts": "yes"})  # only True marks a halt
        assert store.history("s-1").report.last_halt_seq == 4
        store.append("s-1", "trip", {"halts": True})
        assert store.history("s-1").report.last_halt_seq == 6


def test_histories_selects_sessions_and_reports_unknown_ones_as_empty(path: Backend) -> None:
    with path.open() as store:
        found = store.histories(["s-2", "nobody", "s-2"])
        assert list(found) == ["s-2", "nobody"]
        assert found["s-2"].report == S2_INTACT
        assert found["nobody"] == SessionHistory(
            (), ChainReport("nobody", True, 0, None, None, True, None)
        )
        assert list(store.histories()) == ["s-1", "s-2"]
        assert store.history("nobody").rows == ()


def test_store_implements_the_protocol(backend: Backend) -> None:
    with backend.open() as store:
        assert isinstance(store, EventStore)
        if backend.kind == "sqlite":
            assert store.path == backend.location
        else:  # the URL without its password, naming the schema
            assert store.path.endswith(f"schema={backend.schema}")
        assert store.key_source == "default"


@pytest.mark.parametrize(
    ("session", "kind", "data", "message"),
    [
        ("s", "halt", {}, "unknown row kind 'halt'"),
        ("s", "trip", {"b": b"bytes"}, "type bytes at data.b is not storable"),
        ("s", "trip", {"n": {1: "x"}}, "keys must be str, got int at data.n"),
        ("s", "trip", {"n": 2**64}, "integer out of range at data.n"),
        ("s", "trip", ["not", "a", "map"], "row data must be a mapping, not list"),
        ("", "trip", {}, "session must be a non-empty str"),
        ("*", "trip", {}, 'session "*" is reserved'),
    ],
)
def test_append_rejects_bad_input_and_writes_nothing(
    backend: Backend, session: str, kind: str, data: Any, message: str
) -> None:
    with backend.open() as store:
        with pytest.raises(ValueError, match=message.replace("*", r"\*")):
            store.append(session, kind, data)
        assert store.sessions() == []
        assert store.verify() == []


# --- tampering ----------------------------------------------------------------------------------


def test_edited_halt_row_breaks_the_chain_at_that_row(path: Backend) -> None:
    forged = msgpack.packb({**HALT_1, "reason": "operator asked for a pause"})
    raw(path, ("UPDATE rows SET body = ? WHERE session = 's-1' AND seq = 2", (forged,)))
    check(path, report("s-1", 5, 2, "row 2 was edited or reordered"))


def test_halt_row_turned_into_a_non_halt_breaks_the_chain(path: Backend) -> None:
    raw(path, "UPDATE rows SET kind = 'spend' WHERE session = 's-1' AND seq = 4")
    check(path, report("s-1", 5, 4, "row 4 was edited or reordered"))


def test_deleted_middle_row_is_missing(path: Backend) -> None:
    raw(path, "DELETE FROM rows WHERE session = 's-1' AND seq = 2")
    check(
        path,
        report("s-1", 4, 2, "row 2 is missing"),
        store_report=manifest_report(
            "1 row is missing from the store: the manifest records 8 rows", 7
        ),
    )


def test_deleted_last_halt_row_is_caught_by_the_head(path: Backend) -> None:
    raw(path, "DELETE FROM rows WHERE session = 's-1' AND seq = 4")
    expected = report("s-1", 4, 4, "row 4 is missing: the head records 5 rows")
    check(
        path,
        expected,
        store_report=manifest_report(
            "1 row is missing from the store: the manifest records 8 rows", 7
        ),
    )
    # The valid head still says where the halt was, though its row is gone.
    assert expected.last_halt_seq == 4


def test_deleted_tail_rows_are_reported_as_a_range(path: Backend) -> None:
    raw(path, "DELETE FROM rows WHERE session = 's-1' AND seq >= 2")
    check(
        path,
        report("s-1", 2, 2, "rows 2-4 are missing: the head records 5 rows"),
        store_report=manifest_report(
            "3 rows are missing from the store: the manifest records 8 rows", 5
        ),
    )


def test_deleted_head_leaves_every_row_but_no_guarantee_after_them(path: Backend) -> None:
    raw(path, "DELETE FROM heads WHERE session = 's-1'")
    check(
        path,
        report("s-1", 5, 5, "no head record for 5 rows", head_valid=False, last_halt_seq=None),
    )


def test_deleted_head_and_halt_row_is_still_broken(path: Backend) -> None:
    raw(
        path,
        "DELETE FROM heads WHERE session = 's-1'",
        "DELETE FROM rows WHERE session = 's-1' AND seq = 4",
    )
    check(
        path,
        report("s-1", 4, 4, "no head record for 4 rows", head_valid=False, last_halt_seq=None),
        store_report=manifest_report(
            "1 row is missing from the store: the manifest records 8 rows", 7
        ),
    )


def test_swapped_rows_are_reordered(path: Backend) -> None:
    raw(
        path,
        "UPDATE rows SET seq = -1 WHERE session = 's-1' AND seq = 1",
        "UPDATE rows SET seq = 1 WHERE session = 's-1' AND seq = 2",
        "UPDATE rows SET seq = 2 WHERE session = 's-1' AND seq = -1",
    )
    check(path, report("s-1", 5, 1, "row 1 was edited or reordered"))


def test_forged_row_after_the_last_is_inserted(path: Backend) -> None:
    body = msgpack.packb({"guardrails": ["watchdog"], "budget_usd": 100.0})
    raw(
        path,
        (
            "INSERT INTO rows VALUES ('s-1', 5, 'reset', ?, ?, ?)",
            (body, time.time(), os.urandom(32)),
        ),
    )
    check(
        path,
        report("s-1", 6, 5, "row 5 was inserted: the head records 5 rows"),
        store_report=manifest_report(
            "1 row is not in the manifest: the manifest records 8 rows", 9
        ),
    )


def test_forged_row_inserted_in_the_middle_breaks_the_chain(path: Backend) -> None:
    body = msgpack.packb({"guardrails": ["watchdog"], "budget_usd": 100.0})
    raw(
        path,
        *(f"UPDATE rows SET seq = {s + 1} WHERE session = 's-1' AND seq = {s}" for s in (4, 3, 2)),
        (
            "INSERT INTO rows VALUES ('s-1', 2, 'reset', ?, ?, ?)",
            (body, time.time(), os.urandom(32)),
        ),
    )
    check(
        path,
        report("s-1", 6, 2, "row 2 was edited or reordered"),
        store_report=manifest_report(
            "1 row is not in the manifest: the manifest records 8 rows", 9
        ),
    )


def test_edited_head_last_halt_seq_invalidates_the_head(path: Backend) -> None:
    raw(path, "UPDATE heads SET last_halt_seq = NULL WHERE session = 's-1'")
    check(
        path,
        report(
            "s-1", 5, 5, "head record was forged or edited", head_valid=False, last_halt_seq=None
        ),
    )


def test_deleted_session_is_caught_by_the_manifest(path: Backend) -> None:
    raw(path, "DELETE FROM rows WHERE session = 's-2'", "DELETE FROM heads WHERE session = 's-2'")
    with path.open() as store:
        # The session's own rows cannot tell it from one never seen, but every history read
        # carries the store-level verdict (restore halts on it)
        missing = "3 rows are missing from the store: the manifest records 8 rows"
        assert store.history("s-2") == SessionHistory(
            (), ChainReport("s-2", True, 0, None, None, True, None), missing
        )
        assert store.history("s-1").store_problem == missing
        assert store.sessions() == ["s-1"]
        assert store.verify() == [
            report("s-1", 5),
            manifest_report("3 rows are missing from the store: the manifest records 8 rows", 5),
        ]


def test_deleted_halted_session_is_named_by_the_manifest(path: Backend) -> None:
    """s-1 recorded halts: deleting it whole (rows and head) cannot pass for a fresh session."""
    raw(path, "DELETE FROM rows WHERE session = 's-1'", "DELETE FROM heads WHERE session = 's-1'")
    deleted = ChainReport(
        "s-1", False, 0, 0,
        "the session's rows and head were deleted (the manifest records a halt for it)",
        False, None,
    )
    with path.open() as store:
        assert store.history("s-1") == SessionHistory(
            (), deleted, "5 rows are missing from the store: the manifest records 8 rows")
        assert store.histories()["s-1"].report == deleted
        assert store.verify() == [
            deleted,
            S2_INTACT,
            manifest_report("5 rows are missing from the store: the manifest records 8 rows", 3),
        ]


def test_the_manifests_halt_list_cannot_be_edited(path: Backend) -> None:
    """Taking a session off the list breaks the manifest's MAC: the store reports it."""
    empty = msgpack.packb([])
    raw(path, ("UPDATE manifest SET halted = ?", (empty,)))
    with path.open() as store:
        assert store.verify()[-1] == manifest_report(
            "manifest record was forged or edited", 8, valid=False
        )
    raw(path, ("UPDATE manifest SET halted_hash = ?", (blake3.blake3(empty).digest(),)))
    with path.open() as store:  # the hash is under the manifest's MAC
        assert store.verify()[-1] == manifest_report(
            "manifest record was forged or edited", 8, valid=False
        )


def test_the_manifest_lists_each_halted_session_once(backend: Backend) -> None:
    with backend.open() as store:
        for session in ("b", "a", "b", "c"):
            store.append(session, "trip", HALT_1)
        store.append("d", "spend", {"usd": 1.0})
    ((halted,),) = backend.query("SELECT halted FROM manifest")
    assert msgpack.unpackb(halted) == ["a", "b", "c"]


def test_deleted_or_edited_manifest_is_reported(path: Backend) -> None:
    raw(path, "UPDATE manifest SET rows = 5")
    with path.open() as store:
        assert store.verify()[-1] == manifest_report(
            "manifest record was forged or edited", 8, valid=False
        )
    raw(path, "DELETE FROM manifest")
    with path.open() as store:
        store.append("s-1", "spend", {"usd": 1.0})  # does not re-create the manifest
        assert store.verify()[-1] == manifest_report(
            "no manifest record for 9 rows", 9, valid=False
        )


def test_wrong_key_reports_every_session_broken(path: Backend) -> None:
    hint = " (this key is not the one the store was created with)"
    with path.open(key="not the key") as store:
        assert store.verify() == [
            report(
                "s-1",
                5,
                0,
                "row 0 was edited or reordered" + hint,
                head_valid=False,
                last_halt_seq=None,
            ),
            report(
                "s-2",
                3,
                0,
                "row 0 was edited or reordered" + hint,
                head_valid=False,
                last_halt_seq=None,
            ),
            manifest_report("manifest record was forged or edited" + hint, 8, valid=False),
        ]
        assert store.history("s-1").rows == ()


def test_undecodable_body_is_a_broken_link_not_an_exception(path: Backend) -> None:
    raw(
        path,
        ("UPDATE rows SET body = ? WHERE session = 's-1' AND seq = 3", (b"\xc1\xc1 not msgpack",)),
    )
    check(path, report("s-1", 5, 3, "row 3 was edited or reordered"))
    # Even a body sealed with the right key (a writer bug, or a stolen key) that is not a map.
    ((when, prev),) = path.query(
        "SELECT r3.time, r2.mac FROM rows r3, rows r2 WHERE r3.session = 's-1' AND r3.seq = 3 AND r2.session = 's-1' AND r2.seq = 2"
    )
    body = b"\xc1\xc1 not msgpack"
    mac = row_mac(resolve_key(None), "s-1", 3, "reset", body, when, prev)
    raw(path, ("UPDATE rows SET mac = ? WHERE session = 's-1' AND seq = 3", (mac,)))
    check(path, report("s-1", 5, 3, "row 3 cannot be decoded"))


def test_append_after_tampering_never_heals_the_chain(path: Backend) -> None:
    raw(path, "DELETE FROM rows WHERE session = 's-1' AND seq = 4")
    with path.open() as store:
        # The head, not the rows left, says where the chain ends: the deleted halt stays a gap.
        assert store.append("s-1", "spend", {"usd": 0.1}).seq == 5
        assert store.history("s-1").report == report("s-1", 5, 4, "row 4 is missing")
        assert store.verify()[-1] == manifest_report(
            "1 row is missing from the store: the manifest records 9 rows", 8
        )
    raw(path, "DELETE FROM heads WHERE session = 's-2'")
    with path.open() as store:
        assert store.append("s-2", "spend", {"usd": 0.1}).seq == 3
        assert store.history("s-2").report == report(
            "s-2", 4, 4, "no head record for 4 rows", head_valid=False, last_halt_seq=None
        )
        assert len(store.history("s-2").rows) == 4  # the new row is kept and still chained


def test_append_after_a_forged_row_keeps_it_reported(path: Backend) -> None:
    raw(
        path,
        (
            "INSERT INTO rows VALUES ('s-1', 5, 'reset', ?, ?, ?)",
            (msgpack.packb({}), time.time(), os.urandom(32)),
        ),
    )
    with path.open() as store:
        assert store.append("s-1", "spend", {"usd": 0.1}).seq == 6
        # The new row goes after the forged one, so the head now spans it: a bad MAC at 5.
        assert store.history("s-1").report == report("s-1", 7, 5, "row 5 was edited or reordered")


def test_replayed_old_head_is_caught_only_by_the_manifest(path: Backend) -> None:
    (old_head,) = path.query("SELECT * FROM heads WHERE session = 's-1'")
    with path.open() as store:
        store.append("s-1", "trip", HALT_1)
    # Delete the new halt and put back the head from before it: a validly sealed, stale head.
    raw(
        path,
        "DELETE FROM rows WHERE session = 's-1' AND seq = 5",
        "DELETE FROM heads WHERE session = 's-1'",
        ("INSERT INTO heads VALUES (?, ?, ?, ?, ?)", old_head),
    )
    with path.open() as store:
        assert store.history("s-1").report == report("s-1", 5)  # documented limit
        assert store.verify()[-1] == manifest_report(
            "1 row is missing from the store: the manifest records 9 rows", 8
        )


def test_head_from_another_file_does_not_match_the_last_row(path: Backend) -> None:
    other = path.other("other")
    with other.open() as store:
        for kind, data in S1:
            store.append("s-1", kind, data)
    (foreign,) = other.query("SELECT * FROM heads WHERE session = 's-1'")
    raw(path, "DELETE FROM heads WHERE session = 's-1'",
        ("INSERT INTO heads VALUES (?, ?, ?, ?, ?)", foreign))
    check(path, report("s-1", 5, 4, "head record does not match row 4"))


def test_newer_schema_is_refused(path: Backend) -> None:
    raw(path, ("UPDATE meta SET value = ? WHERE key = 'schema_version'", (path.number(99),)))
    with pytest.raises(
        StoreError, match=r"schema version 99 is newer than this tripwire supports \(1\)"
    ):
        path.open().check()


def test_dropped_table_is_recreated_and_reported(path: Backend) -> None:
    raw(path, "DROP TABLE heads")
    with path.open() as store:
        assert store.history("s-2").report == report(
            "s-2", 3, 3, "no head record for 3 rows", head_valid=False, last_halt_seq=None
        )


# --- processes ----------------------------------------------------------------------------------

_DURABLE_CHILD = """
import os, sys
from tripwire.durability.open import open_store
store = open_store(sys.argv[1])
store.append("s-7", "trip", {"halts": True, "reason": "runaway"})
os._exit(0)  # no close, no atexit: only what append made durable survives
"""


def test_halt_appended_by_a_process_that_dies_at_once_is_read_back(backend: Backend) -> None:
    subprocess.run([sys.executable, "-c", _DURABLE_CHILD, backend.location], check=True,
                   timeout=60)
    with backend.open() as store:
        history = store.history("s-7")
        assert history.report == ChainReport("s-7", True, 1, None, None, True, 0)
        assert history.rows[0].data == {"halts": True, "reason": "runaway"}


def _append_worker(path: str, worker: int, barrier: Any) -> None:
    barrier.wait()
    store = open_store(path, timeout=30)  # opening races too: both may create the tables
    barrier.wait()  # spawn start-up takes longer than the appends: line them up again
    for i in range(200):
        for session in ("a", "b"):
            store.append(session, "spend", {"worker": worker, "i": i})
        time.sleep(0.0005)  # let go of the lock now and then, or one writer runs the table
    store.close()


def test_two_processes_append_to_the_same_sessions(backend: Backend) -> None:
    p = backend.location
    spawn = multiprocessing.get_context("spawn")
    barrier = spawn.Barrier(2, timeout=60)
    workers = [spawn.Process(target=_append_worker, args=(p, w, barrier)) for w in range(2)]
    for w in workers:
        w.start()
    for w in workers:
        w.join(timeout=120)
    assert [w.exitcode for w in workers] == [0, 0]
    with backend.open() as store:
        assert store.verify() == [
            ChainReport("a", True, 400, None, None, True, None),
            ChainReport("b", True, 400, None, None, True, None),
        ]  # and no "*" report: the manifest counted all 800
        for session in ("a", "b"):
            rows = store.history(session).rows
            assert [r.seq for r in rows] == list(range(400))
            for w in range(2):
                assert [r.data["i"] for r in rows if r.data["worker"] == w] == list(range(200))


# --- bad files ----------------------------------------------------------------------------------


def test_missing_file_is_created(tmp_path: Path) -> None:
    p = tmp_path / "new.db"
    with SQLiteStore(p) as store:
        assert store.verify() == []
    assert p.is_file()
    with sqlite3.connect(p) as db:
        assert db.execute("PRAGMA journal_mode").fetchone() == ("wal",)


def test_an_unopenable_store_does_not_raise_at_construction(tmp_path: Path, caplog) -> None:
    """A host that builds its guardrails with a broken store keeps running (fail open): the
    store says why once, and raises StoreError at each use until it opens."""
    p = tmp_path / "junk.db"
    p.write_bytes(bytes(range(256)) * 64)
    store = SQLiteStore(p)
    assert any("store unavailable" in r.getMessage() and str(p) in r.getMessage()
               for r in caplog.records)
    with pytest.raises(StoreUnreadable, match="the file is not a SQLite database"):
        store.append("s", "spend", {"spent_usd": 1.0})
    with pytest.raises(StoreUnreadable, match="the file is not a SQLite database"):
        store.history("s")
    p.unlink()  # the operator moves the junk aside: the next use opens a new store
    store.append("s", "spend", {"spent_usd": 1.0})
    assert [r.kind for r in store.history("s").rows] == ["spend"]


def test_corrupt_file_raises_store_error_naming_it(tmp_path: Path) -> None:
    p = tmp_path / "junk.db"
    p.write_bytes(bytes(range(256)) * 64)
    with pytest.raises(StoreUnreadable, match="unreadable: the file is not a SQLite "
                                              "database") as caught:
        SQLiteStore(p).check()
    assert str(p) in str(caught.value)
    assert isinstance(caught.value, StoreError) and isinstance(caught.value, TripwireError)


def test_directory_raises_store_error(tmp_path: Path) -> None:
    with pytest.raises(StoreError, match="is a directory, not a database file") as caught:
        SQLiteStore(tmp_path).check()
    assert str(tmp_path) in str(caught.value)


def test_missing_directory_raises_store_error(tmp_path: Path) -> None:
    p = tmp_path / "no" / "such" / "t.db"
    with pytest.raises(StoreError, match="unable to open database file") as caught:
        SQLiteStore(p).check()
    assert str(p) in str(caught.value)


class _Holder:
    """Another writer holding the store's write lock: SQLite's exclusive lock, or a PostgreSQL
    transaction holding the manifest in EXCLUSIVE mode (reads pass, writes wait)."""

    def __init__(self, backend: Backend) -> None:
        self.backend = backend
        if backend.kind == "sqlite":
            self.db: Any = sqlite3.connect(backend.location, isolation_level=None)
            self.db.execute("BEGIN EXCLUSIVE")
        else:
            import psycopg

            self.db = psycopg.connect(backend.base, autocommit=True)
            self.db.execute(f"SET search_path TO {backend.schema}")
            self.db.execute("BEGIN")
            self.db.execute("LOCK TABLE manifest IN EXCLUSIVE MODE")

    def release(self) -> None:
        self.db.execute("ROLLBACK")
        self.db.close()


def test_locked_database_raises_store_error_after_the_timeout(path: Backend) -> None:
    store = path.open(timeout=0.05)
    store.check()
    holder = _Holder(path)
    try:
        started = time.monotonic()
        with pytest.raises(
            StoreError, match=r"database is locked: could not append to the store within 0\.05 s"
        ) as caught:
            store.append("s-1", "spend", {"usd": 1.0})
        assert time.monotonic() - started < 2
        assert store.path in str(caught.value)
        assert store.history("s-1").report == report("s-1", 5)  # readers are not blocked
        with pytest.raises(StoreError, match=r"could not append to the store within 0\.01 s"):
            store.append("s-1", "spend", {"usd": 1.0}, wait=0.01)  # one call's own bound
    finally:
        holder.release()
    assert store.append("s-1", "spend", {"usd": 1.0}).seq == 5  # the failed append left nothing
    store.close()


def test_closed_store_refuses_use(tmp_path: Path) -> None:
    store = SQLiteStore(tmp_path / "t.db")
    store.close()
    store.close()
    with pytest.raises(StoreError, match="the store is closed"):
        store.append("s", "trip", {})


# --- keys ---------------------------------------------------------------------------------------


def test_default_key_is_the_documented_derivation() -> None:
    expected = blake3.blake3(
        b"tripwire local store", derive_key_context="tripwire 2026 default store key"
    ).digest()
    assert resolve_key(None) == expected
    assert len(expected) == 32


def test_key_from_environment(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv(KEY_ENV, "ab" * 32 + "\n")
    assert resolve_key(None) == bytes.fromhex("ab" * 32)
    assert resolve_key("cd" * 32) == bytes.fromhex("cd" * 32)  # an explicit key wins
    assert SQLiteStore(tmp_path / "t.db").key_source == "environment"
    monkeypatch.setenv(KEY_ENV, "")  # set but empty counts as unset: the default key
    assert (
        resolve_key(None)
        == blake3.blake3(
            b"tripwire local store", derive_key_context="tripwire 2026 default store key"
        ).digest()
    )


def test_explicit_key_forms() -> None:
    raw32 = bytes(range(32))
    assert resolve_key(raw32) == raw32
    assert resolve_key(raw32.hex()) == raw32
    assert resolve_key(raw32.hex().upper()) == raw32
    phrase = blake3.blake3(
        b"correct horse", derive_key_context="tripwire 2026 store key from passphrase"
    ).digest()
    assert resolve_key("correct horse") == phrase
    assert resolve_key(b"correct horse") == phrase
    assert (
        resolve_key("g" * 64)
        == blake3.blake3(
            b"g" * 64, derive_key_context="tripwire 2026 store key from passphrase"
        ).digest()
    )
    assert resolve_key(b"\x01" * 16) != resolve_key(None)


@pytest.mark.parametrize("key", ["", b"", 42])
def test_bad_key_raises_store_error(key: Any) -> None:
    with pytest.raises(StoreError, match="the store key"):
        resolve_key(key)


def test_the_same_key_in_any_form_reads_the_store(tmp_path: Path) -> None:
    key = os.urandom(32)
    with SQLiteStore(tmp_path / "t.db", key=key) as store:
        store.append("s", "trip", {"halts": True})
        assert store.key_source == "argument"
    with SQLiteStore(tmp_path / "t.db", key=key.hex()) as store:
        assert store.verify() == [ChainReport("s", True, 1, None, None, True, 0)]


def test_default_key_notice_names_the_variable() -> None:
    assert "TRIPWIRE_STORE_KEY" in DEFAULT_KEY_NOTICE
    assert "naive" in DEFAULT_KEY_NOTICE
    assert DEFAULT_KEY_NOTICE.count(". ") == 0 and DEFAULT_KEY_NOTICE.endswith(".")


# --- reports ------------------------------------------------------------------------------------


def test_format_reports() -> None:
    reports = [
        ChainReport("s-7", True, 12, None, None, True, 4),
        ChainReport("s-8", True, 1, None, None, True, None),
        ChainReport("s-9", False, 5, 3, "row 3 was edited or reordered", True, 2),
        ChainReport("s-10", False, 4, 4, "row 4 is missing: the head records 5 rows", True, 4),
        ChainReport(
            "*",
            False,
            7,
            None,
            "1 row is missing from the store: the manifest records 8 rows",
            True,
            None,
        ),
    ]
    assert format_reports(reports) == "\n".join(
        [
            "s-7: intact (12 rows)",
            "s-8: intact (1 row)",
            "s-9: BROKEN at row 3: row 3 was edited or reordered",
            "s-10: BROKEN at row 4: row 4 is missing: the head records 5 rows (the head records a halt at row 4)",
            "*: BROKEN: 1 row is missing from the store: the manifest records 8 rows",
        ]
    )
    assert format_reports([]) == ""


def test_format_reports_of_a_tampered_store(path: Backend) -> None:
    raw(path, "DELETE FROM rows WHERE session = 's-1' AND seq = 4")
    with path.open() as store:
        assert format_reports(store.verify()) == (
            "s-1: BROKEN at row 4: row 4 is missing: the head records 5 rows (the head records a halt at row 4)\n"
            "s-2: intact (3 rows)\n"
            "*: BROKEN: 1 row is missing from the store: the manifest records 8 rows"
        )


def test_the_default_key_is_announced_once(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                           caplog: pytest.LogCaptureFixture) -> None:
    import tripwire.durability.chain

    monkeypatch.setattr(tripwire.durability.chain, "_noticed", False)
    with caplog.at_level("WARNING", logger="tripwire"):
        SQLiteStore(tmp_path / "k.db", key="a secret").close()
        assert caplog.records == []  # a real key: nothing to say
        SQLiteStore(tmp_path / "d.db").close()
        SQLiteStore(tmp_path / "d.db").close()
    assert [r.getMessage() for r in caplog.records] == [DEFAULT_KEY_NOTICE]
