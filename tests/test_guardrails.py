"""Guardrails: modes, feedback, halts, escalation, cost ceiling, resets (SPEC §3, §4).

Each test asserts the exact decision at the exact observation, on both engines.
"""

from __future__ import annotations

import logging
import math

import pytest
from conftest import in_threads

from tripwire import (
    GuardrailHalted,
    Guardrails,
    GuardrailsConfig,
    InvalidEvent,
    InvalidReset,
    Mode,
    OperatorEvent,
    ResetRefused,
    WatchdogConfig,
)
from tripwire.errors import ConfigError
from tripwire.policy.feedback import HEADER

LOOP = ("read_file", '{"path": "src/a.py"}')


def make(implementation: str, events: list | None = None, **settings) -> Guardrails:
    settings.setdefault("unattended", False)
    callback = events.append if events is not None else None
    return Guardrails(
        GuardrailsConfig(**settings),
        session_id="s1",
        on_event=callback,
        implementation=implementation,
    )


_turns = iter(range(10**9))


def no_op_turn(g: Guardrails, n: int = 3) -> list:
    """A turn whose reworded calls all come back no_op (the seed's mark_task_done loop)."""
    g.start_turn()
    decisions = []
    turn = next(_turns)
    for i in range(n):
        decisions.append(g.on_call("mark_task_done", {"detail": f"turn {turn} v{i}"}))
        decisions.append(g.on_result("mark_task_done", no_op=True, payload="already recorded"))
    return decisions


# -- enforce: in-turn cuts and halts ---------------------------------------------------------


def test_forty_identical_calls_in_one_turn_are_stopped_at_the_fifth(implementation: str) -> None:
    g = make(implementation, mode="enforce")
    g.start_turn()
    decisions = [g.on_call(*LOOP) for _ in range(40)]
    assert [d.action for d in decisions[:4]] == ["continue"] * 4
    assert decisions[4].action == "halt_session" and decisions[4].guardrail == "watchdog"
    assert [a.signal for a in decisions[4].alerts] == ["repeated-tool-call"]
    assert "repeated-tool-call" in decisions[4].reason
    assert all(d is decisions[4] for d in decisions[5:])  # nothing more is observed
    assert g.watchdog.events == 6  # start_turn + five calls
    assert g.halted and g.status().halted_by == ("watchdog",)


def test_a_halted_session_refuses_turns_before_any_model_call(implementation: str) -> None:
    g = make(implementation, mode="enforce")
    g.start_turn()
    for _ in range(5):
        g.on_call(*LOOP)
    g.end_turn()
    for _ in range(2):
        with pytest.raises(GuardrailHalted) as refused:
            g.start_turn()
        assert refused.value.guardrails == ("watchdog",)
        assert "repeated-tool-call" in refused.value.reason
    assert g.counters.refused_turns == 2
    assert g.refusal().action == "refuse_turn"


def test_reset_clears_the_halt_and_keeps_the_feedback(implementation: str) -> None:
    g = make(implementation, mode="enforce")
    g.start_turn()
    for _ in range(5):
        g.on_call(*LOOP)
    outcome = g.reset()
    assert outcome.cleared == ("watchdog",) and not g.halted
    turn = g.start_turn()
    assert turn.feedback.startswith(HEADER)
    assert "- repeated-tool-call: You called read_file 5 times" in turn.feedback
    # the detectors were reset: four more identical calls do not trip
    assert all(g.on_call(*LOOP).proceed for _ in range(4))
    assert g.on_call(*LOOP).action == "halt_session"


def test_warn_alerts_never_cut_under_enforce(implementation: str) -> None:
    g = make(implementation, mode="enforce")
    g.start_turn()
    decisions = [g.on_result("kubectl_get", error=e) for e in ("Forbidden", "Not Found",
                                                                 "Forbidden", "Forbidden")]
    assert [d.action for d in decisions] == ["continue"] * 4
    # three failures, not all one error: the streak; the third Forbidden: repeated-failure
    assert [[a.signal for a in d.alerts] for d in decisions] == [
        [], [], ["tool-failure-streak"], ["repeated-failure"]]


# -- turn scope and escalation ---------------------------------------------------------------


def test_no_op_streak_cuts_the_turn_but_does_not_halt(implementation: str) -> None:
    g = make(implementation, mode="enforce")
    decisions = no_op_turn(g)
    assert [d.action for d in decisions] == ["continue"] * 5 + ["cut_turn"]
    assert decisions[5].guardrail == "watchdog" and not g.halted
    g.end_turn()
    assert g.start_turn().feedback  # the next turn runs and is told why


def test_three_turns_cut_by_the_same_signal_halt(implementation: str, caplog) -> None:
    caplog.set_level(logging.WARNING, logger="tripwire")
    g = make(implementation, mode="enforce")
    for expected in ("cut_turn", "cut_turn", "halt_session"):
        decisions = no_op_turn(g)
        assert decisions[-1].action == expected
        g.end_turn()
    assert "no-op-streak cut 3 turns in a row" in g.status().watchdog_reason
    lines = [r.getMessage() for r in caplog.records if "cut the turn in flight" in r.getMessage()]
    assert "1 in a row now \u2014 at 3 the session halts" in lines[0]
    assert "2 in a row now" in lines[1]
    assert all(line.startswith("[session s1] watchdog guardrail") for line in lines)


def test_a_clean_turn_in_between_prevents_the_escalation(implementation: str) -> None:
    g = make(implementation, mode="enforce")
    for _ in range(2):
        assert no_op_turn(g)[-1].action == "cut_turn"
        g.end_turn()
        g.start_turn()
        g.on_call("read_file", '{"path": "x"}')
        g.end_turn()
    assert no_op_turn(g)[-1].action == "cut_turn"
    assert not g.halted


def test_a_reset_clears_the_escalation_count(implementation: str) -> None:
    g = make(implementation, mode="enforce")
    for _ in range(2):
        no_op_turn(g)
        g.end_turn()
    g.reset("watchdog")
    for expected in ("cut_turn", "cut_turn", "halt_session"):
        assert no_op_turn(g)[-1].action == expected
        g.end_turn()


# -- warn and feedback: post-turn reports ----------------------------------------------------


def test_warn_reports_after_the_turn_and_tells_the_model_nothing(implementation: str) -> None:
    events: list[OperatorEvent] = []
    g = make(implementation, events, mode="warn")
    g.start_turn()
    decisions = [g.on_call(*LOOP) for _ in range(6)]
    assert all(d.proceed for d in decisions)
    assert [a.signal for a in decisions[4].alerts] == ["repeated-tool-call"]
    assert decisions[4].alerts[0].event == 5
    assert [e.kind for e in events] == []  # nothing before the turn ends
    g.end_turn()
    assert [(e.kind, e.alert.signal) for e in events] == [("alert", "repeated-tool-call")]
    assert g.status().queued_feedback == 0 and not g.halted
    assert g.start_turn().feedback == ""


def test_feedback_mode_delivers_once_at_the_next_turn(implementation: str) -> None:
    g = make(implementation, mode="feedback")
    g.start_turn()
    for _ in range(5):
        assert g.on_call(*LOOP).proceed
    g.end_turn()
    block = g.start_turn().feedback
    assert block.count("[watchdog]") == 1
    lines = block.splitlines()
    assert lines[0] == HEADER
    assert lines[1].startswith("- repeated-tool-call: You called read_file 5 times")
    assert lines[-1] == "Adjust your approach on this turn accordingly."
    assert "operator" not in block and "/guardrail" not in block
    g.end_turn()
    assert g.start_turn().feedback == ""  # delivered once


def test_the_feedback_queue_keeps_the_newest_four(implementation: str) -> None:
    g = make(
        implementation,
        mode="feedback",
        watchdog=WatchdogConfig(
            signals={"repeated-tool-call": {"threshold": 2}}, only=frozenset({"repeated-tool-call"})
        ),
    )
    g.start_turn()
    for i in range(6):  # six different runs of two: six alerts
        g.on_call("read_file", {"path": f"f{i}.py"})
        g.on_call("read_file", {"path": f"f{i}.py"})
    g.end_turn()
    block = g.start_turn().feedback
    bullets = [line for line in block.splitlines() if line.startswith("- ")]
    assert len(bullets) == 4
    assert "f2.py" in bullets[0] and "f5.py" in bullets[3]  # f0 and f1 dropped


def test_speaking_withdraws_a_queued_silence_note(implementation: str) -> None:
    events: list[OperatorEvent] = []
    g = make(implementation, events, mode="feedback")
    g.start_turn()
    for i in range(12):
        g.on_call("grep", {"pattern": f"p{i}"})
    g.on_text("   ")  # whitespace is not speech
    g.on_text("Found the handler in src/app.py.")
    g.end_turn()
    assert [e.kind for e in events] == ["feedback_withdrawn", "alert"]  # the log still has it
    assert events[1].alert.signal == "tools-without-text"
    assert g.start_turn().feedback == ""


def test_withdrawal_under_enforce_takes_the_note_out_of_the_queue(implementation: str) -> None:
    g = make(implementation, mode="enforce")
    g.start_turn()
    for i in range(12):
        g.on_call("grep", {"pattern": f"p{i}"})
    assert g.status().queued_feedback == 1
    g.on_text("Summary so far: nothing matches.")
    assert g.status().queued_feedback == 0


def test_off_observes_nothing_but_the_cost_ceiling_still_works(implementation: str) -> None:
    g = make(implementation, mode="off", max_turn_cost_usd=0.02)
    assert g.watchdog is None
    g.start_turn()
    assert all(g.on_call(*LOOP) is not None and g.on_call(*LOOP).proceed for _ in range(20))
    assert g.on_usage(cost_usd=0.03).action == "cut_turn"


# -- modes and defaults ----------------------------------------------------------------------


def test_mode_precedence_and_defaults(implementation: str) -> None:
    assert GuardrailsConfig(unattended=True).resolve().mode == Mode.ENFORCE
    assert GuardrailsConfig(unattended=False).resolve().mode == Mode.WARN
    r = GuardrailsConfig(unattended=True, mode="  FeedBack ").resolve()
    assert (r.mode, r.mode_source) == (Mode.FEEDBACK, "explicit")
    r = GuardrailsConfig(unattended=True, file={"watchdog": {"mode": "warn"}}).resolve()
    assert (r.mode, r.mode_source) == (Mode.WARN, "config file")
    r = GuardrailsConfig(
        unattended=True, mode="enforce", file={"watchdog": {"mode": "warn"}}
    ).resolve()
    assert r.mode == Mode.ENFORCE
    with pytest.raises(ConfigError, match="off, warn, feedback, enforce"):
        GuardrailsConfig(mode="strict").resolve()


def test_session_ceiling_defaults(implementation: str) -> None:
    assert GuardrailsConfig(unattended=True).resolve().max_session_cost_usd == 10.0
    assert GuardrailsConfig(unattended=False).resolve().max_session_cost_usd == 0.0
    assert (
        GuardrailsConfig(unattended=True, max_session_cost_usd=0).resolve().max_session_cost_usd
        == 0
    )
    r = GuardrailsConfig(unattended=True, file={"cost": {"max_session_usd": 0}}).resolve()
    assert (r.max_session_cost_usd, r.session_ceiling_source) == (0.0, "config file")
    with pytest.raises(ConfigError, match=r"max_turn_cost_usd must not be negative \(0 means none\)"):
        GuardrailsConfig(max_turn_cost_usd=-1).resolve()  # refused, not read as "off"
    assert GuardrailsConfig().resolve().max_turn_cost_usd == 0.0
    for bad in (math.nan, math.inf, "5", True):
        with pytest.raises(ConfigError):
            GuardrailsConfig(max_session_cost_usd=bad).resolve()
    assert (
        "enforce mode [unattended default]"
        in GuardrailsConfig(unattended=True).resolve().describe()
    )


def test_unknown_config_settings_are_errors() -> None:
    with pytest.raises(ConfigError, match=r"unknown setting\(s\) in \[cost\]: max_turn"):
        GuardrailsConfig(file={"cost": {"max_turn": 1}}).resolve()
    with pytest.raises(ConfigError, match="positive integer"):
        GuardrailsConfig(feedback_queue=0).resolve()


# -- cost ceiling ----------------------------------------------------------------------------


def test_an_intra_turn_burn_is_cut_within_the_turn(implementation: str) -> None:
    g = make(implementation, max_turn_cost_usd=0.05)
    g.start_turn()
    decisions = [g.on_usage(model="m", cost_usd=0.01) for _ in range(10)]
    assert [d.action for d in decisions[:4]] == ["continue"] * 4
    assert decisions[4].action == "cut_turn" and decisions[4].guardrail == "cost_ceiling"
    assert decisions[4].reason == (
        "per-turn cost ceiling exceeded: this turn cost $0.0500, ceiling is $0.0500"
    )
    assert all(d is decisions[4] for d in decisions[5:])
    assert not g.halted
    assert g.status().spent_usd == pytest.approx(0.10)  # spend keeps counting
    g.end_turn()
    g.start_turn()  # a per-turn trip halts nothing
    assert g.on_usage(cost_usd=0.01).proceed


def test_three_per_turn_trips_in_a_row_halt_and_a_bare_reset_clears(implementation: str) -> None:
    g = make(implementation, max_turn_cost_usd=0.05)
    for expected in ("cut_turn", "cut_turn", "halt_session"):
        g.start_turn()
        assert g.on_usage(cost_usd=0.06).action == expected
        g.end_turn()
    assert "3 turns in a row" in g.status().cost_reason
    with pytest.raises(GuardrailHalted):
        g.start_turn()
    assert g.reset("cost_ceiling").cleared == ("per-turn cost escalation",)
    g.start_turn()
    assert g.on_usage(cost_usd=0.06).action == "cut_turn"  # the count starts again


def test_a_turn_inside_its_bound_clears_the_count(implementation: str) -> None:
    g = make(implementation, max_turn_cost_usd=0.05)
    for cost in (0.06, 0.06, 0.01, 0.06, 0.06):
        g.start_turn()
        g.on_usage(cost_usd=cost)
        g.end_turn()
    assert not g.halted


def test_a_session_trip_halts_and_a_reset_needs_enough_budget(implementation: str) -> None:
    g = make(implementation, max_session_cost_usd=10.0)
    g.start_turn()
    for _ in range(11):
        d = g.on_usage(cost_usd=1.0)
    assert d.action == "halt_session" and g.halted  # halted at $10.0000, the 10th call
    g.on_usage(cost_usd=1.0)  # late usage still counts
    assert g.status().spent_usd == pytest.approx(12.0)
    with pytest.raises(ResetRefused) as refused:
        g.reset()
    assert refused.value.needed_usd == pytest.approx(2.0)
    assert "add at least $2.0001" in refused.value.reason
    with pytest.raises(ResetRefused):
        g.reset(additional_budget_usd=2.0)  # exactly the shortfall: still refused
    assert g.halted  # a refused reset changes nothing
    outcome = g.reset(additional_budget_usd=5.0)
    assert outcome.cleared == ("per-session cost ceiling",)
    assert outcome.max_session_cost_usd == pytest.approx(15.0)
    status = g.status()
    assert status.spent_usd == pytest.approx(12.0)  # never zeroed
    assert status.max_session_cost_usd == pytest.approx(15.0) and not status.halted
    g.start_turn()
    assert g.on_usage(cost_usd=2.0).proceed
    assert g.on_usage(cost_usd=1.0).action == "halt_session"  # $15.0000 >= $15.0000


def test_a_refused_reset_leaves_a_tripped_watchdog_untouched(implementation: str) -> None:
    g = make(implementation, mode="enforce", max_session_cost_usd=1.0)
    g.start_turn()
    for _ in range(5):
        g.on_call(*LOOP)
    g.on_usage(cost_usd=2.0)
    assert g.status().halted_by == ("watchdog", "cost_ceiling")
    with pytest.raises(ResetRefused):
        g.reset("all")
    assert g.status().halted_by == ("watchdog", "cost_ceiling")
    outcome = g.reset("watchdog")
    assert outcome.cleared == ("watchdog",) and outcome.still_halted_by == ("cost_ceiling",)


def test_budget_cannot_arm_an_unconfigured_bound(implementation: str) -> None:
    g = make(implementation, max_turn_cost_usd=0.5)
    with pytest.raises(InvalidReset, match="no per-session cost ceiling"):
        g.reset(additional_budget_usd=5.0)
    with pytest.raises(InvalidReset, match="not the watchdog"):
        g.reset("watchdog", additional_budget_usd=5.0)
    with pytest.raises(InvalidReset, match="must not be negative"):
        make(implementation, max_session_cost_usd=1.0).reset(additional_budget_usd=-1.0)
    with pytest.raises(InvalidReset, match="guardrail must be one of"):
        g.reset("everything")


def test_budget_can_be_added_before_a_trip(implementation: str) -> None:
    g = make(implementation, max_session_cost_usd=1.0)
    assert g.reset(additional_budget_usd=1.0).max_session_cost_usd == pytest.approx(2.0)
    g.start_turn()
    assert g.on_usage(cost_usd=1.5).proceed


def test_bad_usage_is_an_invalid_event_and_changes_nothing(implementation: str) -> None:
    g = make(implementation, max_session_cost_usd=1.0)
    g.start_turn()
    g.on_usage(cost_usd=0.5)
    for bad in (
        {"cost_usd": -0.1},
        {"cost_usd": math.nan},
        {"cost_usd": math.inf},
        {"cost_usd": "0.1"},
        {"input_tokens": -5},
        {"output_tokens": 1.5},
    ):
        with pytest.raises(InvalidEvent):
            g.on_usage(**bad)
    assert g.status().spent_usd == pytest.approx(0.5)


# -- operator reporting, ids, threads --------------------------------------------------------


def test_cut_and_trip_log_lines(implementation: str, caplog) -> None:
    caplog.set_level(logging.INFO, logger="tripwire")
    g = make(implementation, max_turn_cost_usd=0.05)
    g.start_turn()
    g.on_usage(cost_usd=0.0512)
    g.end_turn()
    g.start_turn()
    g.on_usage(cost_usd=0.03)
    g.end_turn()
    # spend recorded after the turn ended still counts toward it: a trip at the boundary
    assert g.on_usage(cost_usd=0.03).action == "cut_turn"
    messages = [r.getMessage() for r in caplog.records]
    cut = next(m for m in messages if "cut the turn in flight" in m)
    assert cut.startswith(
        "[session s1] cost_ceiling guardrail cut the turn in flight "
        "\u2014 the cancellation that follows is this cut, not a provider failure: "
        "per-turn cost ceiling exceeded: this turn cost $0.0512, ceiling is $0.0500."
    )
    assert "the session is NOT halted" in cut and "1 in a row now" in cut
    assert any(
        m.startswith("[session s1] cost_ceiling guardrail tripped:") for m in messages
    )


def test_callback_errors_never_reach_the_agent_loop(implementation: str, caplog) -> None:
    def broken(event: OperatorEvent) -> None:
        raise RuntimeError("boom")

    g = Guardrails(
        GuardrailsConfig(mode="enforce", unattended=False),
        on_event=broken,
        implementation=implementation,
    )
    g.start_turn()
    for _ in range(5):
        decision = g.on_call(*LOOP)
    assert decision.action == "halt_session"
    # logged once, with its traceback; the later failures are counted
    logged = [r for r in caplog.records if "operator callback (on_event) raised" in r.getMessage()]
    assert len(logged) == 1 and logged[0].exc_info[0] is RuntimeError
    assert g.counters.callback_errors == 2  # the alert and the halt



def test_counters(implementation: str) -> None:
    g = make(implementation, mode="enforce", max_turn_cost_usd=0.05)
    g.start_turn()
    g.on_usage(cost_usd=0.1)
    g.end_turn()
    g.start_turn()
    for _ in range(5):
        g.on_call(*LOOP)
    with pytest.raises(GuardrailHalted):
        g.start_turn()
    snap = g.counters.snapshot()
    assert snap == {
        "alerts": {"repeated-tool-call/critical": 1},
        "trips": {"cost_ceiling": 1, "watchdog": 1},
        "refused_turns": 1,
        "callback_errors": 0,
    }


def test_results_by_id_use_the_calls_name(implementation: str) -> None:
    g = make(implementation, mode="warn")
    g.start_turn()
    for i in range(3):
        g.on_call("kubectl_get", {"i": i}, id=f"c{i}")
        decision = g.on_result(id=f"c{i}", error="Forbidden")
    assert "kubectl_get" in decision.alerts[0].reason


def test_concurrent_calls_do_not_corrupt_state(implementation: str) -> None:
    g = make(implementation, mode="warn")
    g.start_turn()

    def worker(t: int) -> None:
        for i in range(500):
            g.on_call("read_file", {"path": f"t{t}/f{i}.py"})
            g.on_result("read_file", payload=f"{t}:{i}")

    assert in_threads(worker) == []
    assert g.watchdog.events == 1 + 4 * 500 * 2
    assert g.watchdog.silent_calls == 4 * 500
    assert g.watchdog.stale_results == 0  # every payload was distinct
