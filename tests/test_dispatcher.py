"""Guardrails as a dispatcher over policies: each policy's ``snapshot()`` is what the session's
durable rows carry of it, and ``apply(folded)`` takes a folded history back into it (SPEC §5;
persistence.Durability writes and restores through them, no field of a policy is set from
outside)."""

from __future__ import annotations

from pathlib import Path

from tripwire import Guardrails, GuardrailsConfig
from tripwire.durability.sqlite import SQLiteStore

CONFIG = dict(mode="enforce", unattended=False, max_turn_cost_usd=0.5, max_session_cost_usd=5.0)


def open_session(db: Path, implementation: str) -> Guardrails:
    return Guardrails(GuardrailsConfig(**CONFIG), session_id="s1",
                      implementation=implementation, store=SQLiteStore(db))


def cut_twice(g: Guardrails) -> None:
    """One turn cut by the watchdog, then by the cost ceiling (spend counts while cut), with a
    model whose usage had no price."""
    g.start_turn()
    for i in range(3):
        g.on_call("mark_task_done", {"detail": f"v{i}"})
        decision = g.on_result("mark_task_done", no_op=True, payload="already recorded")
    assert (decision.action, decision.guardrail) == ("cut_turn", "watchdog")
    decision = g.on_usage(model="m1", input_tokens=100, output_tokens=20, cost_usd=0.6)
    assert (decision.action, decision.guardrail) == ("cut_turn", "cost_ceiling")
    g.on_usage(model="m2", input_tokens=7, output_tokens=3, unpriced=True)
    g.end_turn()


def test_a_spend_row_is_the_policies_snapshots(tmp_path: Path, implementation: str) -> None:
    db = tmp_path / "g.sqlite"
    g = open_session(db, implementation)
    cut_twice(g)
    rows = [r for r in SQLiteStore(db).history("s1").rows if r.kind != "context"]
    assert [r.kind for r in rows] == ["trip", "trip", "spend"]  # the spend: at the turn end
    assert rows[-1].data == {
        **g._cost_policy.snapshot().to_data(), "watchdog_cut_signal": "no-op-streak",
        "watchdog_in_a_row": 1, "cost_in_a_row": 1,
        "models": {"m1": [1, 100, 20, 600_000_000], "m2": [1, 7, 3, 0]},
    }
    assert rows[-1].data["unpriced_models"] == ["m2"]
    assert g._policy.snapshot() == ("no-op-streak", 1)


def test_restore_applies_the_folded_history_to_each_policy(tmp_path: Path,
                                                            implementation: str) -> None:
    db = tmp_path / "g.sqlite"
    g = open_session(db, implementation)
    cut_twice(g)
    restored = open_session(db, implementation)
    assert restored._policy.snapshot() == g._policy.snapshot()
    # a restarted process is a new spend writer: the old charges are another writer's now
    mine = ("spend_writer", "spend_nano")
    assert {k: v for k, v in restored._cost.snapshot().to_data().items() if k not in mine} == \
        {k: v for k, v in g._cost.snapshot().to_data().items() if k not in mine}
    assert g._cost.snapshot().own_nano == 600_000_000
    assert restored._cost.snapshot().own_nano == 0
    assert restored._cost.snapshot().writer != g._cost.snapshot().writer
    assert restored._cost.in_a_row == g._cost.in_a_row == 1
    # the session's own history applied again changes no policy: apply takes a fold forward
    folded = g.durable_log.read()
    before = [p.snapshot() for p in (g._policy, g._cost_policy, g._context_policy, g._budget)]
    for policy in (g._policy, g._cost_policy, g._context_policy, g._budget):
        policy.apply(folded)
    assert [p.snapshot() for p in (g._policy, g._cost_policy, g._context_policy,
                                   g._budget)] == before
