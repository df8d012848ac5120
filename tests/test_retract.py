"""Retracting calls the host's permission gate refused (issue 15 §7, the seed's #1086): the
refused calls come off the call-pattern state in both engines, so the next turn's first identical
call is not counted as the fifth in a row; a halt or an alert already raised is never cleared."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from test_differential import configs, events

from tripwire import GuardrailHalted, Guardrails, GuardrailsConfig, Watchdog, WatchdogConfig
from tripwire.errors import InvalidEvent

READ = ("read_file", '{"path": "src/a.py"}')


def replay(wd: Watchdog, trace: list[tuple]) -> list[tuple[int, str]]:
    """(event, signal) of every alert; ("retract", n) retracts n calls (not an event)."""
    got: list[tuple[int, str]] = []
    for e in trace:
        if e[0] == "retract":
            wd.retract_calls(e[1])
            continue
        if e[0] == "call":
            alerts = wd.observe_call(e[1], e[2])
        elif e[0] == "result":
            alerts = wd.observe_result(e[1], error=e[2], no_op=e[3], payload=e[4])
        elif e[0] == "text":
            alerts = wd.observe_text(e[1])
        elif e[0] == "turn_end":
            alerts = wd.end_turn()
        else:
            alerts = wd.reset()
        got.extend((a.event, a.signal) for a in alerts)
    return got


def only(*signals: str, **knobs: Any) -> WatchdogConfig:
    return WatchdogConfig(signals={s: knobs for s in signals} if knobs else {},
                          only=frozenset(signals))


def call(name: str, args: str = "{}") -> tuple:
    return ("call", name, args)


# -- the watchdog, detector by detector ---------------------------------------------------------


def test_the_next_turns_first_identical_call_is_not_the_fifth(implementation: str) -> None:
    refused = [call(*READ)] * 4 + [("turn_end",)]
    # without the retraction the first call of the next turn is the fifth in a row: event 5
    wd = Watchdog(implementation=implementation)
    assert replay(wd, refused + [call(*READ)]) == [(5, "repeated-tool-call")]
    # retracted, the run starts again: the fifth identical call of the new turn trips (event 9)
    wd = Watchdog(implementation=implementation)
    assert replay(wd, refused + [("retract", 4)] + [call(*READ)] * 5) == [(9, "repeated-tool-call")]
    assert wd.repeat_run == 5


def test_calls_before_the_refused_ones_stay_in_the_run(implementation: str) -> None:
    # two calls ran, three were refused: the run is 2, and the third call of the next turn trips
    wd = Watchdog(implementation=implementation)
    trace = [call(*READ)] * 5
    assert replay(wd, trace[:4]) == []
    wd.retract_calls(2)
    assert wd.repeat_run == 2
    assert replay(wd, [("turn_end",)] + [call(*READ)] * 3) == [(7, "repeated-tool-call")]


def test_an_alert_already_raised_is_not_raised_again(implementation: str) -> None:
    wd = Watchdog(implementation=implementation)
    assert replay(wd, [call(*READ)] * 6) == [(4, "repeated-tool-call")]
    wd.retract_calls(2)  # the run is 4 and has reported: one alert per pattern
    assert wd.repeat_run == 4
    assert replay(wd, [call(*READ)] * 3) == []
    # a run made only of retracted calls is forgotten and re-armed
    wd.retract_calls(100)
    assert wd.repeat_run == 0
    assert replay(wd, [call(*READ)] * 5) == [(13, "repeated-tool-call")]


def test_name_run_and_run_without_text(implementation: str) -> None:
    reads = [call("read_file", f'{{"path": "f{i}.py"}}') for i in range(20)]
    wd = Watchdog(only("repeated-tool-name", "tools-without-text"), implementation=implementation)
    assert replay(wd, reads[:11]) == []
    wd.retract_calls(3)  # 8 in the name run and 8 without text
    assert (wd.name_run, wd.silent_calls) == (8, 8)
    # tools-without-text at its 12th call (event 14 = the 4th new one), the name run at its 15th
    assert replay(wd, reads[11:18]) == [(14, "tools-without-text"), (17, "repeated-tool-name")]


def test_words_inside_the_retracted_calls(implementation: str) -> None:
    # the run without text counts only calls after the words; retracting more forgets it
    wd = Watchdog(only("tools-without-text"), implementation=implementation)
    replay(wd, [call("a")] * 5 + [("text", "checking")] + [call("b")] * 2)
    wd.retract_calls(4)
    assert wd.silent_calls == 0


def test_the_cycle_reads_the_history_without_the_refused_calls(implementation: str) -> None:
    a, b = call("read_file", '{"path": "a"}'), call("edit", '{"path": "a"}')
    # a b a b, then a refused a: retracted, the next turn's a b completes three laps
    trace = [a, b, a, b, a]
    wd = Watchdog(only("alternating-tool-cycle"), implementation=implementation)
    assert replay(wd, trace + [("retract", 1), ("turn_end",), a, b]) == [
        (7, "alternating-tool-cycle")]
    # kept, the refused a breaks the pattern (a b a b a a b): no cycle
    wd = Watchdog(only("alternating-tool-cycle"), implementation=implementation)
    assert replay(wd, trace + [("turn_end",), a, b]) == []


def test_the_density_window_loses_the_refused_calls(implementation: str) -> None:
    x = call("search", '{"q": "retry policy"}')
    others = [call("read_file", f'{{"path": "o{i}"}}') for i in range(9)]
    before = [x, others[0], x, others[1], x, others[2], x, others[3], x, others[4]]  # x 5 times
    refused = [x, others[5], x]  # x 7 times: under the threshold of 8
    config = WatchdogConfig(signals={"dominant-tool-call": {"window": 20}},
                            only=frozenset({"dominant-tool-call"}))
    wd = Watchdog(config, implementation=implementation)
    # kept, the next x is the eighth in the window (event 13)
    assert replay(wd, before + refused + [x]) == [(13, "dominant-tool-call")]
    wd = Watchdog(config, implementation=implementation)
    # retracted, the window holds 5; x, o, x, o, x: the eighth x is the fifth new call (event 17)
    trace = before + refused + [("retract", 3), x, others[6], x, others[7], x]
    assert replay(wd, trace) == [(17, "dominant-tool-call")]


def test_results_and_the_event_index_are_untouched(implementation: str) -> None:
    wd = Watchdog(implementation=implementation)
    trace = [call("bash"), ("result", "bash", "denied by the operator", False, None)] * 2
    replay(wd, trace)
    wd.retract_calls(2)
    assert wd.failure_streak == 2  # a refusal reported as a failed result stays a failure
    assert wd.events == 4
    # the third refusal, the same error: repeated-failure's (one behaviour, SPEC §12.3)
    assert replay(wd, [call("bash"), ("result", "bash", "denied by the operator", False, None)]
                  ) == [(5, "repeated-failure")]


def test_retracting_nothing_or_more_than_was_seen(implementation: str) -> None:
    wd = Watchdog(implementation=implementation)
    wd.retract_calls(0)
    wd.retract_calls(50)  # nothing observed yet
    assert replay(wd, [call(*READ)] * 3) == []
    wd.retract_calls(0)
    assert wd.repeat_run == 3
    assert wd.recent_call(0) == READ
    wd.retract_calls(1)
    assert wd.recent_call(0) == READ and wd.recent_call(1) == READ


def test_the_text_ring_follows_the_call_ring(implementation: str) -> None:
    # the cycle alert after a retraction quotes the calls that are really in the history
    wd = Watchdog(only("alternating-tool-cycle"), implementation=implementation)
    for i in range(13):  # wrap the 12-entry ring
        wd.observe_call(f"t{i}", "{}")
    wd.retract_calls(3)
    assert [wd.recent_call(k)[0] for k in range(3)] == ["t9", "t8", "t7"]
    alerts = ()
    for name in ["p", "q", "p", "q", "p", "q"]:
        alerts = wd.observe_call(name, "{}")
    assert [a.signal for a in alerts] == ["alternating-tool-cycle"]
    assert "p" in alerts[0].reason and "q" in alerts[0].reason


@pytest.mark.parametrize("bad", [-1, "3", 2.0, True, None])
def test_a_bad_count_is_a_typed_error(implementation: str, bad: Any) -> None:
    with pytest.raises(InvalidEvent, match="retract_calls takes a count of calls"):
        Watchdog(implementation=implementation).retract_calls(bad)


# -- Guardrails ------------------------------------------------------------------------------------


def guardrails(implementation: str, mode: str) -> Guardrails:
    return Guardrails(GuardrailsConfig(mode=mode, unattended=False), session_id="gate",
                      implementation=implementation)


def test_enforce_the_refused_calls_do_not_halt_the_next_turn(implementation: str) -> None:
    # kept: the next turn's first call is the fifth in a row; retracted: the run is the one call
    # that ran, so the fourth call of the next turn is the fifth
    for retract, halted_at in ((False, 0), (True, 3)):
        g = guardrails(implementation, "enforce")
        g.start_turn()
        assert all(g.on_call(*READ).proceed for _ in range(4))  # the gate refused the last 3
        if retract:
            g.retract_calls(3)
        g.end_turn()
        g.start_turn()
        decisions = [g.on_call(*READ) for _ in range(5)]
        actions = [d.action for d in decisions]
        assert actions[:halted_at] == ["continue"] * halted_at
        assert actions[halted_at] == "halt_session"
        assert [a.signal for a in decisions[halted_at].alerts] == ["repeated-tool-call"]


def test_a_halt_is_never_cleared_by_a_retraction(implementation: str) -> None:
    g = guardrails(implementation, "enforce")
    g.start_turn()
    decisions = [g.on_call(*READ) for _ in range(5)]
    assert decisions[4].action == "halt_session"
    g.retract_calls(5)
    assert g.halted and g.status().halted_by == ("watchdog",)
    assert g.on_call(*READ).action == "halt_session"  # still blocked in this turn
    g.end_turn()
    with pytest.raises(GuardrailHalted):
        g.start_turn()


def test_warn_an_alert_raised_before_the_retraction_is_still_reported(implementation: str) -> None:
    seen: list[Any] = []
    g = Guardrails(GuardrailsConfig(mode="warn", unattended=False), session_id="gate",
                   on_event=seen.append, implementation=implementation)
    g.start_turn()
    for _ in range(5):
        g.on_call(*READ)
    g.retract_calls(5)
    g.end_turn()
    assert [e.alert.signal for e in seen if e.kind == "alert"] == ["repeated-tool-call"]
    # and the run starts again
    g.start_turn()
    assert not any(g.on_call(*READ).alerts for _ in range(4))


def test_off_mode_and_bad_counts(implementation: str) -> None:
    g = guardrails(implementation, "off")
    g.retract_calls(2)  # nothing observed: nothing to take back
    with pytest.raises(InvalidEvent):
        g.retract_calls(-2)  # checked in every mode


# -- the engines agree -------------------------------------------------------------------------


@st.composite
def traces_with_retractions(draw: st.DrawFn) -> list[tuple]:
    trace = draw(events())
    for _ in range(draw(st.integers(0, 4))):
        at = draw(st.integers(0, len(trace)))
        trace.insert(at, ("retract", draw(st.integers(0, 14))))
    return trace


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(traces_with_retractions(), configs())
def test_native_and_reference_agree_with_retractions(trace: list[tuple],
                                                      config: WatchdogConfig) -> None:
    fast = Watchdog(config, implementation="native")
    spec = Watchdog(config, implementation="python")
    assert replay(fast, trace) == replay(spec, trace)
    assert (fast.repeat_run, fast.name_run, fast.silent_calls) == \
        (spec.repeat_run, spec.name_run, spec.silent_calls)


def test_density_counts_the_window_retraction_brought_back(implementation: str) -> None:
    """Taking calls back brings older ones into the density window again: a key that is at
    the threshold there trips at the next call (the native fast path, which counts only the
    newest key, is re-armed by a retraction)."""
    config = WatchdogConfig(signals={"dominant-tool-call": {
        "window": 4, "threshold": 2, "defer_run": 0, "defer_cycle_period": 0}},
        only=frozenset({"dominant-tool-call"}))
    wd = Watchdog(config, implementation=implementation)
    # a twice (event 1); then d, b, c: a is once in the window again, which re-arms it
    trace = [call(n) for n in "aadbc"] + [("retract", 2), call("b")]
    # b and c taken back, the window is a, a, d, b: a is twice in it
    assert replay(wd, trace) == [(1, "dominant-tool-call"), (5, "dominant-tool-call")]
