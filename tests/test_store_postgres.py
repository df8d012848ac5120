"""What only the PostgreSQL store has: a server that is not there, a lost connection, schema
names, read-only opening of a schema without tripwire's tables, the NOTIFY of each append, and
many writers in separate processes (SPEC §5). The shared store suite (test_store.py) runs on
both backends."""

from __future__ import annotations

import multiprocessing
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from store_backends import Backend, backend_fixture, postgres_url

from tripwire.durability.chain import ChainReport
from tripwire.durability.open import open_store
from tripwire.errors import StoreError


@pytest.fixture(params=["postgres"])
def pg(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Backend]:
    yield from backend_fixture(request, tmp_path)


def test_open_store_picks_the_backend_by_location(pg: Backend, tmp_path: Path) -> None:
    from tripwire.durability.postgres import PostgresStore
    from tripwire.durability.sqlite import SQLiteStore

    with open_store(pg.location) as store:
        assert isinstance(store, PostgresStore)
        assert store.schema == pg.schema
    with open_store(tmp_path / "t.db") as store:
        assert isinstance(store, SQLiteStore)


def test_an_unreachable_server_fails_open_and_hides_the_password(
        tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    postgres_url()  # only where the PostgreSQL tests run
    from tripwire.durability.postgres import PostgresStore

    url = f"postgresql://me:s3cret@/db?host={tmp_path}&schema=x"  # no server on that socket
    store = PostgresStore(url, timeout=1)  # no exception: the guardrails keep deciding
    assert "store unavailable" in caplog.text and "s3cret" not in caplog.text
    with pytest.raises(StoreError, match=r"cannot open the store") as caught:
        store.check()
    assert "s3cret" not in str(caught.value) and "postgresql://me@/db" in str(caught.value)
    with pytest.raises(StoreError, match="cannot open the store"):  # tried again, each use
        store.append("s", "spend", {"usd": 1.0})


@pytest.mark.parametrize("schema", ["Tripwire", "a-b", "x; drop table rows", "", "a" * 64])
def test_a_schema_name_that_is_not_a_plain_sql_name_is_refused(schema: str) -> None:
    postgres_url()
    from tripwire.durability.postgres import PostgresStore

    with pytest.raises(StoreError, match="the store's schema must be a lower-case SQL name"):
        PostgresStore("postgresql:///db", schema=schema)


def test_read_only_refuses_a_schema_without_tripwire_tables_and_creates_nothing(
        pg: Backend) -> None:
    with pytest.raises(StoreError, match=f"not a tripwire store .*schema {pg.schema}"):
        pg.open(read_only=True).check()
    assert pg.query("SELECT count(*) FROM information_schema.tables WHERE table_schema = ?",
                    (pg.schema,)) == [(0,)]
    with pg.open() as store:
        store.append("s", "trip", {"halts": True})
    with pg.open(read_only=True) as store:
        assert store.verify() == [ChainReport("s", True, 1, None, None, True, 0)]
        with pytest.raises(StoreError, match="opened read-only"):
            store.append("s", "spend", {})


def test_a_lost_connection_is_reopened_on_the_next_use(pg: Backend) -> None:
    with pg.open() as store:
        store.append("s", "spend", {"usd": 1.0})
        pid = store._conn.info.backend_pid
        pg.raw(("SELECT pg_terminate_backend(?)", (pid,)))
        with pytest.raises(StoreError, match="cannot append to the store"):
            store.append("s", "spend", {"usd": 2.0})  # the guardrails' outbox keeps it
        assert store.append("s", "spend", {"usd": 2.0}).seq == 1  # a new connection
        assert store.verify() == [ChainReport("s", True, 2, None, None, True, None)]


def test_each_append_notifies_its_session(pg: Backend) -> None:
    import psycopg

    with psycopg.connect(pg.base, autocommit=True) as listener, pg.open() as store:
        listener.execute(f'LISTEN "{store.channel}"')
        store.append("s-1", "trip", {"halts": True})
        store.append("s-2", "spend", {"usd": 1.0})
        got = [(n.channel, n.payload) for n in listener.notifies(timeout=5, stop_after=2)]
    assert got == [(f"tripwire.{pg.schema}", "s-1"), (f"tripwire.{pg.schema}", "s-2")]


def _writer(location: str, worker: int, rows: int, barrier: Any) -> None:
    store = open_store(location, timeout=60)
    store.check()
    barrier.wait()
    for i in range(rows):
        store.append(f"s-{i % 3}", "spend", {"worker": worker, "i": i})
    store.close()


def test_eight_processes_appending_at_once_lose_and_break_nothing(pg: Backend) -> None:
    """No sleep between appends: every writer contends for the store's lock all the time."""
    spawn = multiprocessing.get_context("spawn")
    barrier = spawn.Barrier(8, timeout=120)
    workers = [spawn.Process(target=_writer, args=(pg.location, w, 60, barrier))
               for w in range(8)]
    for w in workers:
        w.start()
    for w in workers:
        w.join(timeout=180)
    assert [w.exitcode for w in workers] == [0] * 8
    with pg.open() as store:
        assert store.verify() == [ChainReport(f"s-{k}", True, 160, None, None, True, None)
                                  for k in range(3)]  # and no "*": the manifest counted 480
        for k in range(3):
            rows = store.history(f"s-{k}").rows
            assert [r.seq for r in rows] == list(range(160))
            for w in range(8):
                assert [r.data["i"] for r in rows if r.data["worker"] == w] == \
                    [i for i in range(60) if i % 3 == k]


def test_the_operator_verbs_take_a_postgresql_url(pg: Backend) -> None:
    import io
    import json

    from tripwire.cli.main import main as cli_main

    def run(*argv: str) -> tuple[int, str, str]:
        out, err = io.StringIO(), io.StringIO()
        return cli_main(list(argv), out=out, err=err), out.getvalue(), err.getvalue()

    code, out, err = run("status", pg.location)  # nothing there yet: refused, nothing created
    assert (code, out) == (2, "")
    assert err == (f"tripwire: {pg.open(read_only=True).path}: not a tripwire store (no "
                   f"tripwire tables in schema {pg.schema})\n")
    with pg.open() as store:
        store.append("s", "trip", {"halts": True, "guardrail": "watchdog", "reason": "loop"})
    code, out, _ = run("status", pg.location)
    assert code == 0
    record = json.loads(out)
    assert (record["session"], record["halted_by"], record["chain"]) == ("s", ["watchdog"],
                                                                         "intact")
    assert run("verify", pg.location)[:2] == (0, "s: intact (1 row)\n"
                                                 "verdict: intact (1 session, 1 row)\n")
    code, out, _ = run("reset", pg.location, "--session", "s")
    assert (code, json.loads(out)["cleared"]) == (0, ["watchdog"])
    code, _, err = run("status", pg.location, "--session", "nobody")
    assert code == 2 and err.endswith("no session 'nobody'\n")
