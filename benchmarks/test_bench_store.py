"""Durable store hot paths (SPEC §5): a halt append that is fsync'd before it returns, and the
restore read of a whole store.

Targets: append median <= 5 ms (a halt is recorded before the turn is refused, so it sits on the
agent's path); histories() of 10,000 sessions x 3 rows <= 2 s (restore at process start).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tripwire.durability.sqlite import SQLiteStore

SESSIONS = 10_000
HALT = {"halts": True, "guardrail": "watchdog", "reason": "same call repeated 5 times"}


@pytest.fixture(scope="module")
def big_store(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """10,000 sessions of context, spend and a halt, built once per module."""
    path = tmp_path_factory.mktemp("store") / "big.db"
    with SQLiteStore(path) as store:
        # Building is not what is measured: skip the per-commit fsync for the 30,000 appends.
        with store._use("tune") as db:
            db.execute("PRAGMA synchronous = OFF")
        for i in range(SESSIONS):
            session = f"s-{i:05d}"
            store.append(session, "context", {"tokens": 1200 + i})
            store.append(session, "spend", {"usd": 0.25, "model": "claude-sonnet"})
            store.append(session, "trip", HALT)
    return path


@pytest.mark.benchmark(group="store_append")
def test_append_halt_fsync(benchmark, tmp_path: Path) -> None:
    benchmark.extra_info["target_median_ms"] = 5
    with SQLiteStore(tmp_path / "append.db") as store:
        benchmark.pedantic(
            store.append, args=("s-1", "trip", HALT), rounds=300, iterations=1, warmup_rounds=10
        )
        assert store.verify() == [store.history("s-1").report]
        assert store.history("s-1").report.intact


@pytest.mark.benchmark(group="store_restore")
def test_histories_10k_sessions(benchmark, big_store: Path) -> None:
    benchmark.extra_info["target_s"] = 2
    benchmark.extra_info["rows"] = 3 * SESSIONS
    with SQLiteStore(big_store) as store:
        found = benchmark.pedantic(store.histories, rounds=5, iterations=1, warmup_rounds=1)
    assert len(found) == SESSIONS
    assert all(h.report.intact and h.report.last_halt_seq == 2 for h in found.values())


@pytest.mark.benchmark(group="store_restore")
def test_history_one_session_of_10k(benchmark, big_store: Path) -> None:
    with SQLiteStore(big_store) as store:
        history = benchmark.pedantic(
            store.history, args=("s-05000",), rounds=200, iterations=1, warmup_rounds=5
        )
    assert len(history.rows) == 3 and history.report.intact


@pytest.fixture(scope="module")
def fleet_store(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """10,000 sessions written by real Guardrails: every tenth halted by a loop, all with spend."""
    from tripwire import GuardrailsConfig
    from tripwire.fleet.fleet import Fleet

    path = tmp_path_factory.mktemp("fleet") / "fleet.db"
    store = SQLiteStore(path)
    with store._use("tune") as db:  # building is not measured: no fsync per row
        db.execute("PRAGMA synchronous = OFF")
    fleet = Fleet(GuardrailsConfig(mode="enforce", unattended=True), store=store)
    for i in range(SESSIONS):
        g = fleet.session(f"s-{i:05d}")
        g.start_turn()
        for _ in range(5 if i % 10 == 0 else 1):
            g.on_call("read_file", '{"path": "src/a.py"}')
        g.on_usage(model="claude-sonnet-4-5", input_tokens=4000, cost_usd=0.02)
        g.end_turn()
    store.close()
    return path


@pytest.mark.benchmark(group="store_restore")
def test_restore_10k_sessions_into_a_fleet(benchmark, fleet_store: Path) -> None:
    """A daemon's start: every stored session folded back into a fresh Fleet (target <= 2 s)."""
    from tripwire import GuardrailsConfig
    from tripwire.fleet.fleet import Fleet

    benchmark.extra_info["target_s"] = 2

    def restore() -> Fleet:
        fleet = Fleet(GuardrailsConfig(mode="enforce", unattended=True),
                      store=SQLiteStore(fleet_store))
        fleet.restore_all()
        return fleet

    fleet = benchmark.pedantic(restore, rounds=3, iterations=1)
    assert len(fleet) == SESSIONS
    halted = fleet.status()
    assert len(halted) == SESSIONS // 10 and all(h.in_memory for h in halted)
