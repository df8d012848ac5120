"""The README's examples, as a type checker sees them (``mypy --strict`` runs on this file in
CI, and tests/test_typing.py runs it): the public API must be typed, not assembled at runtime."""

from __future__ import annotations

import tempfile
from pathlib import Path
from typing import TYPE_CHECKING, Any

from tripwire import (
    Alert,
    Decision,
    GuardrailHalted,
    Guardrails,
    GuardrailsConfig,
    Turn,
    Watchdog,
    WatchdogConfig,
)
from tripwire.durability.sqlite import SQLiteStore
from tripwire.fleet.fleet import Fleet

if TYPE_CHECKING:
    from typing_extensions import assert_type
else:
    def assert_type(value: Any, _type: Any) -> Any:
        return value


def guardrails_loop(user_prompt: str, file_text: str) -> str:
    guardrails = Guardrails(GuardrailsConfig(mode="enforce", max_turn_cost_usd=0.50),
                            session_id="s-7")
    try:
        turn = guardrails.start_turn()
    except GuardrailHalted as halted:
        return halted.reason
    assert_type(turn, Turn)
    prompt = turn.prepend(user_prompt)
    decision = guardrails.on_call("read_file", '{"path": "src/main.py"}', id="c1")
    assert_type(decision, Decision)
    if decision.cut_turn:
        return decision.reason
    guardrails.on_result(id="c1", payload=file_text)
    guardrails.on_usage(model="claude-sonnet-4-5", input_tokens=5200, cost_usd=0.017)
    guardrails.end_turn()
    return prompt


def watchdog_alone() -> list[str]:
    watchdog = Watchdog(WatchdogConfig(signals={"repeated-tool-call": {"threshold": 3}}))
    fired: list[str] = []
    for _ in range(3):
        alerts = watchdog.observe_call("read_file", '{"path": "a.py"}')
        assert_type(alerts, tuple[Alert, ...])
        fired += [a.signal for a in alerts]
    watchdog.observe_result("read_file", payload="same")
    watchdog.observe_text("reading a.py again")
    watchdog.end_turn()
    watchdog.reset()
    python = Watchdog(implementation="python")
    assert_type(python, Watchdog)
    return fired


def fleet(rows: list[tuple[Any, ...]]) -> int:
    with tempfile.TemporaryDirectory() as tmp:
        store = SQLiteStore(str(Path(tmp) / "tripwire.db"))
        try:
            f = Fleet(GuardrailsConfig(mode="enforce"), store=store)
            f.restore_all()
            f.on_call("agent-7", "read_file", '{"path": "a.py"}')
            return len(f.observe_many(rows))
        finally:
            store.close()


def main() -> None:
    guardrails_loop("fix the bug", "print('hi')\n")
    assert watchdog_alone() == ["repeated-tool-call"]
    assert fleet([("agent-7", "call", "read_file", '{"path": "b.py"}')]) == 0


if __name__ == "__main__":
    main()
