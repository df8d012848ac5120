"""One parser of guardrail names: the event format, the library and the CLI agree."""

from __future__ import annotations

import io

import pytest

from tripwire import Guardrails, GuardrailsConfig, InvalidEvent, InvalidReset
from tripwire.base.names import RESET_SCOPES, Guardrail
from tripwire.cli.main import main
from tripwire.interchange.events import parse_event


def test_reset_scopes_parse_case_and_space_insensitively() -> None:
    assert [Guardrail.parse_reset(f" {s.value.upper()} ") for s in RESET_SCOPES] == list(
        RESET_SCOPES)
    assert Guardrail.ALL.covers(Guardrail.WATCHDOG) and Guardrail.ALL.covers(
        Guardrail.COST_CEILING)
    assert not Guardrail.WATCHDOG.covers(Guardrail.COST_CEILING)


def test_unknown_scope_is_refused_alike_everywhere(implementation: str, tmp_path) -> None:
    listed = "must be one of watchdog, cost_ceiling, all, not 'everything'"
    with pytest.raises(InvalidEvent, match=f"field 'guardrail' {listed}"):
        parse_event({"type": "reset", "guardrail": "everything"})
    g = Guardrails(GuardrailsConfig(mode="enforce", unattended=False),
                   implementation=implementation)
    with pytest.raises(InvalidReset, match=f"guardrail {listed}"):
        g.reset("everything")
    err = io.StringIO()
    with pytest.raises(SystemExit) as exited:
        main(["reset", str(tmp_path / "t.db"), "--session", "s", "--guardrail", "everything"],
             io.StringIO(), err)
    assert exited.value.code == 2


def test_context_is_a_guardrail_but_not_a_reset_scope() -> None:
    assert Guardrail("context") is Guardrail.CONTEXT
    with pytest.raises(InvalidReset):
        Guardrail.parse_reset("context")
