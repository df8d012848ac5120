"""Spend in the durable store (SPEC §5): each row carries its writer's own running total, the
session's spend is the sum over writers (exact when several processes charge one session at
once); a store written in the previous format (``spent_usd``, the session's total, alone)
restores to the totals it restored to before; the chain's tamper rules hold for the new rows.
On both store backends and both engines.

``fixtures/stores/spend-v1.sqlite`` is a store written by tripwire at commit 2a6b80a (the
previous format; ``make_spend_v1.py`` beside it made it), ``spend-v1.json`` its rows and the
totals that version restored from them.
"""

from __future__ import annotations

import json
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import msgpack
import pytest
from store_backends import BACKENDS, Backend, backend_fixture

from tripwire import Guardrails, GuardrailsConfig
from tripwire.base.money import NANO
from tripwire.durability.chain import KEY_ENV
from tripwire.durability.fold import SpendTally, fold_history
from tripwire.durability.rows import Spend
from tripwire.durability.sqlite import SQLiteStore

FIXTURES = Path(__file__).resolve().parent / "fixtures" / "stores"
V1 = json.loads((FIXTURES / "spend-v1.json").read_text())
#: what tripwire at 2a6b80a restored from these rows: [spent_usd, granted_budget_usd, halted]
V1_RESTORED = {"solo": [1.25, 0.5, False], "moved": [4.375, 0.0, False]}
SOLO = GuardrailsConfig(mode="enforce", unattended=False, max_session_cost_usd=1.0)
MOVED = GuardrailsConfig(mode="enforce", unattended=False, max_session_cost_usd=100.0)


@pytest.fixture(autouse=True)
def _no_env_key(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(KEY_ENV, raising=False)  # the fixtures are sealed with the default key


@pytest.fixture(params=BACKENDS)
def backend(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Backend]:
    yield from backend_fixture(request, tmp_path)


def restored(store: Any, session: str, implementation: str) -> list[Any]:
    s = Guardrails(SOLO if session == "solo" else MOVED, session_id=session, store=store,
                   implementation=implementation).status()
    return [s.spent_usd, s.granted_budget_usd, s.halted]


def spend_rows(store: Any, session: str) -> list[tuple[str, int, float]]:
    return [(r.data["spend_writer"], r.data["spend_nano"], r.data["spent_usd"])
            for r in store.history(session).rows if "spend_writer" in r.data]


def test_the_fixture_is_the_previous_format() -> None:
    with_spend = [r["data"] for r in V1["rows"] if "spent_usd" in r["data"]]
    assert len(with_spend) == 9 and not any("spend_writer" in d for d in with_spend)
    assert V1["restored"] == V1_RESTORED  # as that version reported them when it wrote them


def test_a_previous_version_s_sqlite_store_restores_its_totals(tmp_path: Path,
                                                               implementation: str) -> None:
    path = tmp_path / "v1.sqlite"
    shutil.copy(FIXTURES / "spend-v1.sqlite", path)
    with SQLiteStore(path) as store:
        assert [r.intact for r in store.verify()] == [True, True]
        for session, expected in V1_RESTORED.items():
            assert restored(store, session, implementation) == expected
            assert fold_history(store.history(session)).spent_nano == round(expected[0] * NANO)


def test_previous_format_rows_restore_their_totals_and_new_charges_add(
        backend: Backend, implementation: str) -> None:
    with backend.open() as store:
        for row in V1["rows"]:
            store.append(row["session"], row["kind"], row["data"])
        for session, expected in V1_RESTORED.items():
            assert restored(store, session, implementation) == expected
        # a daemon of this version goes on: its charges add to the old total, exactly
        g = Guardrails(MOVED, session_id="moved", store=store, implementation=implementation)
        g.start_turn()
        g.on_usage(cost_usd=0.5)
        g.end_turn()
        [(writer, own, seen)] = spend_rows(store, "moved")[-1:]
        assert (own, seen) == (500_000_000, 4.875)
        folded = fold_history(store.history("moved"))
        assert folded.spend == SpendTally(4_375_000_000, {writer: 500_000_000})
        assert restored(store, "moved", implementation) == [4.875, 0.0, False]


def test_two_writers_in_one_session_sum_exactly(backend: Backend, implementation: str) -> None:
    """Two guardrails of one session on one shared store (two daemons' view of it), charging
    inside open turns with no boundary between: neither sees the other's charges, the store
    holds both."""
    with backend.open(shared=True) as store:
        a = Guardrails(MOVED, session_id="s", store=store, implementation=implementation)
        b = Guardrails(MOVED, session_id="s", store=store, implementation=implementation)
        a.start_turn()
        b.start_turn()
        for usd in (0.1, 0.2, 0.3):
            a.on_usage(cost_usd=usd)
            b.on_usage(cost_usd=usd * 2)
        assert (a.status().spent_usd, b.status().spent_usd) == (0.6, 1.2)
        rows = spend_rows(store, "s")
        first = rows[0][0]  # a charged first
        # each writer's rows carry its own running total (nano-dollars) and its own view
        assert [(own, seen) for w, own, seen in rows if w == first] == [
            (100_000_000, 0.1), (300_000_000, 0.3), (600_000_000, 0.6)]
        assert [(own, seen) for w, own, seen in rows if w != first] == [
            (200_000_000, 0.2), (600_000_000, 0.6), (1_200_000_000, 1.2)]
        assert fold_history(store.history("s")).spent_nano == 1_800_000_000
        a.end_turn()
        b.end_turn()
        a.start_turn()  # the shared read at the turn start: the sum
        assert a.status().spent_usd == 1.8
        a.on_usage(cost_usd=0.05)  # a's own total goes on from its own 0.6, not from the sum
        assert spend_rows(store, "s")[-1][1:] == (650_000_000, 1.85)
        assert restored(store, "s", implementation)[0] == 1.85


def test_a_row_written_twice_counts_once(backend: Backend, implementation: str) -> None:
    """A retried append whose first commit did land (its answer was lost) repeats a row: a
    writer's total is its largest, so the repeat adds nothing."""
    with backend.open() as store:
        g = Guardrails(MOVED, session_id="d", store=store, implementation=implementation)
        g.start_turn()
        g.on_usage(cost_usd=0.75)
        last = store.history("d").rows[-1]
        store.append("d", last.kind, last.data)
        assert restored(store, "d", implementation)[0] == 0.75


def test_the_tally_takes_each_writer_s_largest_total_on_an_old_base() -> None:
    tally = SpendTally()
    for data in ({"spent_usd": 2.0}, {"spent_usd": 3.5},  # previous format: the last one wins
                 {"spent_usd": 3.6, "spend_writer": "a", "spend_nano": 100},
                 {"spent_usd": 3.7, "spend_writer": "b", "spend_nano": 250},
                 {"spent_usd": 3.6, "spend_writer": "a", "spend_nano": 100},  # a repeat
                 {"spent_usd": 3.9, "spend_writer": "a", "spend_nano": 400},
                 {"spend_writer": "c", "spend_nano": "7"},  # not a count: nothing
                 {"tokens": 80}):
        tally.add(Spend.from_data(data))
    assert tally == SpendTally(3_500_000_000, {"a": 400, "b": 250})
    assert (tally.total, tally.others("a"), tally.others("z"), tally.others(None)) == (
        3_500_000_650, 3_500_000_250, 3_500_000_650, 3_500_000_650)


def test_an_edited_spend_row_breaks_the_chain_and_halts(backend: Backend,
                                                        implementation: str) -> None:
    """An agent that lowers its writer's total in a row: the row's MAC fails, the session
    restores halted with the spend it can still prove (the rows before the edit)."""
    with backend.open() as store:
        g = Guardrails(MOVED, session_id="t", store=store, implementation=implementation)
        g.start_turn()
        for usd in (1.0, 2.0, 4.0):
            g.on_usage(cost_usd=usd)
        rows = store.history("t").rows
        edited = {**rows[-1].data, "spend_nano": 1, "spent_usd": 1e-9}
        backend.raw(("UPDATE rows SET body = ? WHERE session = ? AND seq = ?",
                     (msgpack.packb(edited, use_bin_type=True), "t", rows[-1].seq)))
        [report] = store.verify("t")
        assert (report.intact, report.first_broken, report.problem) == (
            False, rows[-1].seq, f"row {rows[-1].seq} was edited or reordered")
        s = Guardrails(MOVED, session_id="t", store=store,
                       implementation=implementation).status()
        assert (s.halted, s.halted_by, s.spent_usd) == (True, ("watchdog",), 3.0)


def test_deleting_one_writer_s_rows_is_seen(backend: Backend, implementation: str) -> None:
    """Two writers' rows share the session's one chain: deleting the rows of one (to drop its
    charges from the sum) leaves a gap the chain reports."""
    with backend.open(shared=True) as store:
        a = Guardrails(MOVED, session_id="w", store=store, implementation=implementation)
        b = Guardrails(MOVED, session_id="w", store=store, implementation=implementation)
        a.start_turn()
        b.start_turn()
        a.on_usage(cost_usd=5.0)
        b.on_usage(cost_usd=0.5)
        a.on_usage(cost_usd=5.0)
        b.on_usage(cost_usd=0.25)
        rows = store.history("w").rows
        a_writer = rows[0].data["spend_writer"]
        gone = [r.seq for r in rows if r.data.get("spend_writer") == a_writer]
        assert gone == [0, 2]
        for seq in gone:
            backend.raw(("DELETE FROM rows WHERE session = ? AND seq = ?", ("w", seq)))
        [report] = store.verify("w")
        assert (report.intact, report.first_broken, report.problem) == (
            False, 0, "row 0 is missing")
        s = Guardrails(MOVED, session_id="w", store=store,
                       implementation=implementation).status()
        assert (s.halted, s.halted_by, s.spent_usd) == (True, ("watchdog",), 0.0)
