"""What the per-writer spend rows cost against the previous format (SPEC §5): each spend row
now carries ``spend_writer`` and ``spend_nano`` (about 40 bytes more), and the fold sums each
writer's largest total instead of taking the last row's.

Two stores hold the same rows, written by real guardrails: the current format, and the same
data without the two fields (what the previous version wrote). Each measurement alternates the
two formats round by round in one run and reports the ratio new / old of the medians:

- ``fold``: ``fold_history`` of one session's 2,000 rows (CPU only), and its spend part alone:
  ``SpendTally`` over the new rows against the previous rule (the last ``spent_usd``) over the
  old ones;
- ``restore``: a session's guardrails built on the store (read, verify the chain, fold, apply);
- ``restore_all``: ``Fleet.restore_all`` of 1,000 sessions x 8 rows;
- ``append``: one spend row appended, fsync'd (``synchronous=FULL``), and with the fsync off
  (``synchronous=OFF``: the encoding, MAC and SQL alone).

    python -m pytest benchmarks/test_bench_spend_rows.py -q -s
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from tripwire import Guardrails, GuardrailsConfig
from tripwire.durability.fold import SpendTally, fold_history
from tripwire.durability.rows import Spend
from tripwire.durability.sqlite import SQLiteStore
from tripwire.fleet.fleet import Fleet

CONFIG = GuardrailsConfig(mode="enforce", unattended=False, max_session_cost_usd=1e6)
NEW_FIELDS = ("spend_writer", "spend_nano")
TURNS = 1_000  # one session: two spend rows a turn
SESSIONS, SESSION_TURNS = 1_000, 4


def _quiet(store: SQLiteStore) -> None:
    with store._use("tune") as db:
        db.execute("PRAGMA synchronous = OFF")  # building is not what is measured


def _write(store: SQLiteStore, session: str, turns: int) -> None:
    g = Guardrails(CONFIG, session_id=session, store=store)
    for t in range(turns):
        g.start_turn()
        g.on_usage(model="m", input_tokens=1000, output_tokens=100, cost_usd=0.01)
        g.on_call("read_file", f'{{"path": "{t}.py"}}')
        g.on_usage(model="m", input_tokens=1100, output_tokens=50, cost_usd=0.02)
        g.end_turn()
    assert g.flush()


def _old_copy(new: SQLiteStore, old: SQLiteStore) -> None:
    """The same rows, in the previous format (the two fields dropped)."""
    for session, history in new.histories().items():
        for row in history.rows:
            data = {k: v for k, v in row.data.items() if k not in NEW_FIELDS}
            old.append(session, row.kind, data)


@pytest.fixture(scope="module")
def stores(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    tmp = tmp_path_factory.mktemp("spend")
    paths = {"new": tmp / "new.db", "old": tmp / "old.db"}
    with SQLiteStore(paths["new"]) as new, SQLiteStore(paths["old"]) as old:
        _quiet(new)
        _quiet(old)
        _write(new, "big", TURNS)
        for i in range(SESSIONS):
            _write(new, f"s-{i:04d}", SESSION_TURNS)
        _old_copy(new, old)
    return paths


def _ratio(new: Callable[[], Any], old: Callable[[], Any], rounds: int) -> dict[str, float]:
    times: dict[str, list[float]] = {"new": [], "old": []}
    for r in range(rounds + 2):
        for name, fn in (("new", new), ("old", old)) if r % 2 else (("old", old), ("new", new)):
            begin = time.perf_counter()
            fn()
            if r >= 2:  # two warm-up rounds
                times[name].append(time.perf_counter() - begin)
    med = {k: statistics.median(v) for k, v in times.items()}
    return {"new_ms": round(med["new"] * 1000, 3), "old_ms": round(med["old"] * 1000, 3),
            "ratio": round(med["new"] / med["old"], 3)}


def _report(benchmark: Any, what: str, result: dict[str, float]) -> None:
    benchmark.pedantic(lambda: None, rounds=1)
    benchmark.extra_info.update(result)
    print(f"\n{what}: new {result['new_ms']} ms, old {result['old_ms']} ms, "
          f"ratio {result['ratio']}")


@pytest.mark.benchmark(group="spend_rows")
def test_fold_ratio(benchmark: Any, stores: dict[str, Path]) -> None:
    with SQLiteStore(stores["new"]) as new, SQLiteStore(stores["old"]) as old:
        h_new, h_old = new.history("big"), old.history("big")
    total = 30 * 10**6 * TURNS  # $0.03 a turn
    assert fold_history(h_new).spent_nano == fold_history(h_old).spent_nano == total
    fold = _ratio(lambda: fold_history(h_new), lambda: fold_history(h_old), 40)

    def tally() -> int:
        spend = SpendTally()
        for row in h_new.rows:
            data = row.data
            if "spent_usd" in data or "spend_writer" in data:
                spend.add(Spend.from_data(data))
        return spend.total

    def last_wins() -> float:  # the previous rule, as restore.fold_history had it
        spent = 0.0
        for row in h_old.rows:
            data = row.data
            if "spent_usd" in data:
                spent = float(data["spent_usd"])
        return spent

    assert tally() == round(last_wins() * 1e9) == total
    spend = _ratio(tally, last_wins, 40)
    _report(benchmark, f"fold_history of {len(h_new.rows)} rows", fold)
    benchmark.extra_info.update({f"spend_rule_{k}": v for k, v in spend.items()})
    print(f"the spend rule alone (SpendTally / the last spent_usd): new {spend['new_ms']} ms, "
          f"old {spend['old_ms']} ms, ratio {spend['ratio']}")


@pytest.mark.benchmark(group="spend_rows")
def test_restore_ratio(benchmark: Any, stores: dict[str, Path]) -> None:
    with SQLiteStore(stores["new"]) as new, SQLiteStore(stores["old"]) as old:
        def restore(store: SQLiteStore) -> Callable[[], Any]:
            return lambda: Guardrails(CONFIG, session_id="big", store=store)
        assert restore(new)().status().spent_usd == restore(old)().status().spent_usd
        result = _ratio(restore(new), restore(old), 20)
    _report(benchmark, f"restore of one session ({2 * TURNS} spend rows)", result)


@pytest.mark.benchmark(group="spend_rows")
def test_restore_all_ratio(benchmark: Any, stores: dict[str, Path]) -> None:
    with SQLiteStore(stores["new"]) as new, SQLiteStore(stores["old"]) as old:
        result = _ratio(lambda: Fleet(CONFIG, store=new).restore_all(),
                        lambda: Fleet(CONFIG, store=old).restore_all(), 6)
    _report(benchmark, f"Fleet.restore_all of {SESSIONS + 1} sessions", result)


@pytest.mark.benchmark(group="spend_rows")
@pytest.mark.parametrize("synchronous", ["FULL", "OFF"])
def test_append_ratio(benchmark: Any, stores: dict[str, Path], tmp_path: Path,
                      synchronous: str) -> None:
    with SQLiteStore(stores["new"]) as source:
        row = source.history("big").rows[-1]
    assert row.kind == "spend"
    new_data = row.data
    old_data = {k: v for k, v in new_data.items() if k not in NEW_FIELDS}
    with SQLiteStore(tmp_path / "a.db") as store:
        with store._use("tune") as db:
            db.execute(f"PRAGMA synchronous = {synchronous}")
        result = _ratio(lambda: store.append("n", "spend", new_data),
                        lambda: store.append("o", "spend", old_data), 200)
    _report(benchmark, f"append of a spend row (synchronous={synchronous})", result)
