"""A Fleet's session table (both engines): every call reaches its own session whether the
caller passes the id object the session was made with or an equal str made afresh, through
creation, growth, eviction and restore; and the native table's index by id object stays in
step with its dict (checked through the index itself, which the dict would otherwise mask)."""

from __future__ import annotations

import random
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tripwire import GuardrailsConfig, WatchdogConfig
from tripwire.durability.sqlite import SQLiteStore
from tripwire.fleet.fleet import Fleet

CALL = ("read_file", '{"path": "src/a.py"}')


def fleet(implementation: str, **kwargs) -> Fleet:
    return Fleet(GuardrailsConfig(mode="warn", unattended=False), implementation=implementation,
                 **kwargs)


def fresh(session_id: str) -> str:
    """An equal str that is another object (as an id parsed from a request would be)."""
    copy = "".join(list(session_id))
    assert copy == session_id and copy is not session_id
    return copy


def check_index(f: Fleet) -> None:
    """The native index holds exactly the table's sessions, each under the id object it was
    made with (the reference table has no index)."""
    table = f._sessions
    if not hasattr(table, "_index_finds"):
        return
    assert table._index_size() == len(f)
    for sid, g in table.items():
        assert table._index_finds(sid) is g
        assert table._index_finds(fresh(sid)) is None


def test_a_call_reaches_its_session_by_the_same_or_an_equal_id(implementation: str) -> None:
    f = fleet(implementation)
    ids = [f"session-{i}" for i in range(200)]  # past the index's first size (64 slots)
    for sid in ids:
        f.on_call(sid, *CALL)  # creates it
    for sid in ids[::2]:
        f.on_call(fresh(sid), *CALL)
    assert len(f) == 200
    for i, sid in enumerate(ids):
        assert f.session(fresh(sid)).watchdog.events == (2 if i % 2 == 0 else 1)
    check_index(f)


def test_a_session_made_under_an_equal_id_is_found_by_either(implementation: str) -> None:
    f = fleet(implementation)
    first = "job-7"
    g = f.session(first)
    assert f.on_call(fresh(first), *CALL).proceed and f.on_call(first, *CALL).proceed
    assert g.watchdog.events == 2
    check_index(f)


def test_an_evicted_session_is_made_anew_on_its_next_call(implementation: str) -> None:
    f = fleet(implementation)
    ids = [f"s{i}" for i in range(100)]
    for sid in ids:
        f.on_call(sid, *CALL)
    gone = [f.session(sid) for sid in ids[:60]]
    for sid in ids[:60]:
        assert f.evict(fresh(sid) if sid.endswith("1") else sid)
    assert not any(getattr(g, "_in_table_index", False) for g in gone)
    check_index(f)
    for sid in ids:
        f.on_call(sid, *CALL)
    # an evicted session without a store comes back empty: one call since; the others two
    assert [f.session(sid).watchdog.events for sid in ids] == [1] * 60 + [2] * 40
    check_index(f)


def test_evicted_and_restored_sessions_are_indexed(tmp_path: Path, implementation: str) -> None:
    store = SQLiteStore(tmp_path / "tw.db")
    f = fleet(implementation, store=store)
    for i in range(30):
        g = f.session(f"r{i}")
        g.start_turn()
        g.on_call(*CALL)
        g.on_usage(cost_usd=0.01)  # a durable row: the store knows the session
        g.end_turn()
    for i in range(30):
        assert f.evict(f"r{i}")
    assert len(f) == 0
    check_index(f)
    assert f.restore_all() == 30
    check_index(f)
    assert f.on_call("r3", *CALL).proceed


def test_the_table_refuses_a_second_session_under_one_id(implementation: str) -> None:
    f = fleet(implementation)
    g = f.session("a")
    with pytest.raises(KeyError, match="in the table already"):
        f._sessions.add(fresh("a"), g)
    assert not f._sessions.remove("a", object()) and f._sessions.remove("a", g)
    assert len(f) == 0
    check_index(f)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow,
                                                                 HealthCheck.function_scoped_fixture])
@given(ops=st.lists(st.tuples(st.sampled_from(["call", "call-fresh", "evict", "evict-idle"]),
                              st.integers(0, 126)), min_size=1, max_size=600),
       seed=st.integers(0, 2**16))
def test_any_sequence_of_calls_and_evictions_matches_a_dict(implementation: str,
                                                            ops: list[tuple[str, int]],
                                                            seed: int) -> None:
    """Random creation, calls by kept and fresh ids, and evictions (which move entries of the
    index's probe runs back) against a plain dict model of each session's call count."""
    f = fleet(implementation)
    ids = [f"t{i:03d}" for i in range(127)]  # up to 127 of 256 slots: long probe runs
    model: dict[str, int] = {}
    rng = random.Random(seed)
    for op, k in ops:
        sid = ids[k]
        if op.startswith("call"):
            f.on_call(fresh(sid) if op == "call-fresh" else sid, *CALL)
            model[sid] = model.get(sid, 0) + 1
        elif op == "evict":
            assert f.evict(sid) == (sid in model)
            model.pop(sid, None)
        else:  # evict a random third of the sessions at once
            for gone in rng.sample(sorted(model), len(model) // 3):
                assert f.evict(fresh(gone))
                del model[gone]
    assert sorted(f) == sorted(model)
    assert {sid: f._sessions.get(sid).watchdog.events for sid in f} == model
    check_index(f)


def test_the_index_survives_rounds_of_growth_and_eviction(implementation: str) -> None:
    """Thousands of sessions made and evicted in rounds: the index grows, and each eviction
    empties a slot in the middle of probe runs (whose later entries move back)."""
    f = fleet(implementation)
    rng = random.Random(3)
    live: list[str] = []
    for round_ in range(6):
        made = [f"w{round_}-{i}" for i in range(700)]
        for sid in made:
            f.on_call(sid, *CALL)
        live += made
        rng.shuffle(live)
        for sid in live[:500]:
            assert f.evict(sid)
        live = live[500:]
        check_index(f)
    assert sorted(f) == sorted(live) and len(f) == 6 * 200
    assert all(f._sessions.get(sid).watchdog.events == 1 for sid in live)


def test_a_call_after_the_watchdog_is_initialized_again_uses_its_new_state(
        implementation: str) -> None:
    """The native core remembers the engine's native session to fetch it early; an engine
    initialized again (a new native session, here of another size, so at another address)
    must be seen at the very next call."""
    f = Fleet(GuardrailsConfig(mode="enforce", unattended=False), implementation=implementation)
    g = f.session("a")
    g.start_turn()
    for _ in range(2):
        assert f.on_call("a", *CALL).proceed
    g.watchdog.__init__(WatchdogConfig({"repeated-tool-call": {"threshold": 3},
                                        "dominant-tool-call": {"window": 64}}))
    assert g.watchdog.events == 0
    for _ in range(2):
        assert f.on_call("a", *CALL).proceed
    assert g.watchdog.events == 2
    assert not f.on_call("a", *CALL).proceed  # the new state's third identical call halts


def test_a_call_through_the_fleet_stamps_the_last_use_on_the_monotonic_clock(
        implementation: str) -> None:
    """The native table writes the time in C: it must be time.monotonic()'s (evict_idle
    compares the two)."""
    import time

    f = fleet(implementation)
    f.session("a")
    before = time.monotonic()
    f.on_call("a", *CALL)
    after = time.monotonic()
    assert before <= f._sessions.get("a").last_used <= after
    assert f.evict_idle(3600) == 0 and f.evict_idle(0) == 1


@pytest.mark.parametrize("collected", [False, True], ids=["deleted", "collected-in-a-cycle"])
def test_a_session_outlives_its_fleet(implementation: str, collected: bool) -> None:
    """A Guardrails kept after its fleet is gone still observes (the native table unhooks its
    sessions from its index when it goes, whether freed at once or by the cycle collector)."""
    import gc

    f = fleet(implementation)
    ids = [f"o{i}" for i in range(100)]  # the index grown twice, slots moved
    for sid in ids:
        f.on_call(sid, *CALL)
    kept = [f.session(sid) for sid in ids[::7]]
    assert all(getattr(g, "_in_table_index", True) for g in kept)
    if collected:
        f.cycle = f  # type: ignore[attr-defined]  # only the cycle collector frees it
    del f
    gc.collect()
    for g in kept:
        assert not getattr(g, "_in_table_index", False)
        assert g.on_call(*CALL).proceed and g.watchdog.events == 2
