"""Polling is not a loop (SPEC §10.24, §12.2): the repeat detector weighs the results of its run.

A run of equivalent calls is a *poll* once it has observed change: every result of the run's
tool that has arrived since the run began is a success with a payload, and its answer (SPEC
§12.1) changed at least once. A poll trips when its answer has not changed for
``poll_plateau`` (10) results, at the run's next call; a failure, a no-op or a result without
payload ends it at once. Every test runs on both engines and names the exact events.
"""

from __future__ import annotations

from typing import Any

import pytest

from tripwire import GuardrailsConfig, Watchdog, WatchdogConfig
from tripwire.fleet.fleet import Fleet
from tripwire.signals.repeated_tool_call import POLL_ENDED, Poll

POLL = ("bash", '{"command": "kubectl rollout status deploy/api"}')
READ = ("read_file", '{"path": "src/app.py"}')


def replay(wd: Watchdog, trace: list[tuple]) -> list[tuple[int, str]]:
    """(event index, signal) of every alert; each alert's event is the index it tripped at."""
    got = []
    for index, e in enumerate(trace):
        if e[0] == "call":
            alerts = wd.observe_call(e[1], e[2])
        elif e[0] == "result":
            alerts = wd.observe_result(e[1], payload=e[2], error=e[3], no_op=e[4])
        else:
            alerts = wd.observe_text(e[1])
        for a in alerts:
            assert a.event == index
            got.append((index, a.signal))
    return got


def call(tool: tuple[str, str] = POLL) -> tuple:
    return ("call", *tool)


def result(payload: Any, tool: str = POLL[0], error: Any = None, no_op: bool = False) -> tuple:
    return ("result", tool, payload, error, no_op)


def polls(n: int, start: int = 0, tool: tuple[str, str] = POLL) -> list[tuple]:
    """n polls (a call, then its result), each output new."""
    out: list[tuple] = []
    for i in range(start, start + n):
        out += [call(tool), result(f"{i} of 20 updated replicas are available", tool=tool[0])]
    return out


def repeat_alert(wd: Watchdog, trace: list[tuple]) -> Any:
    """The one alert the trace raises, which must be repeated-tool-call."""
    alerts = [a for e in trace for a in (
        wd.observe_call(e[1], e[2]) if e[0] == "call" else
        wd.observe_result(e[1], payload=e[2], error=e[3], no_op=e[4]))]
    (alert,) = alerts
    assert alert.signal == "repeated-tool-call"
    return alert


def test_polling_with_changing_output_stays_quiet_for_20_polls(implementation: str) -> None:
    wd = Watchdog(implementation=implementation)
    trace: list[tuple] = []
    for i in range(20):
        trace += polls(1, start=i)
        if i % 5 == 4:
            trace.append(("text", f"{i + 1} of 20 replicas are up; still waiting."))
    assert replay(wd, trace) == []
    assert wd.repeat_run == 20 and wd.repeat_poll == Poll.CHANGING


def stuck(n: int, answer: str = "7 of 20 updated replicas are available") -> list[tuple]:
    """n more polls, all with one answer (``answer``, then the time the check took, which
    changes every time: the first is a change from the polls before)."""
    out: list[tuple] = []
    for i in range(n):
        out += [call(), result(f"{answer} (checked in {0.4 + i / 10:.1f}s)")]
    return out


def test_a_poll_stuck_for_poll_plateau_answers_trips_at_the_next_call(
        implementation: str) -> None:
    # seven polls that move (events 0..13), then ten stuck ones: the tenth result with one
    # answer is event 33, so the next call (34) trips
    trace = [*polls(7), *stuck(10), call()]
    assert replay(Watchdog(only_repeat(), implementation=implementation), trace) == [
        (34, "repeated-tool-call")]
    # stuck for 12: the same event, whatever follows
    wd = Watchdog(only_repeat(), implementation=implementation)
    assert replay(wd, [*polls(7), *stuck(12), call()]) == [(34, "repeated-tool-call")]
    assert wd.repeat_run == 20 and wd.repeat_poll == Poll.STOPPED_CHANGING


def test_a_poll_with_progress_and_a_7_answer_plateau_stays_quiet(implementation: str) -> None:
    # a rollout that sits at "5 of 20" for seven polls, then moves on: healthy (with the
    # defaults no-new-state reports the plateau to the operator, a warning)
    trace = [*polls(6), *stuck(7, "5 of 20 updated replicas are available"), *polls(6, 6)]
    assert replay(Watchdog(only_repeat(), implementation=implementation), trace) == []
    # default config: the plateau's seventh answer is the sixth already seen (no-new-state),
    # and the twelfth call without a word (event 22) is tools-without-text's
    assert replay(Watchdog(implementation=implementation), trace) == [
        (22, "tools-without-text"), (25, "no-new-state")]


def test_poll_plateau_is_a_knob(implementation: str) -> None:
    config = WatchdogConfig(signals={"repeated-tool-call": {"poll_plateau": 3}},
                            only=frozenset({"repeated-tool-call"}))
    # seven polls (0..13), three stuck: the third result with one answer is event 19
    assert replay(Watchdog(config, implementation=implementation),
                  [*polls(7), *stuck(3), call()]) == [(20, "repeated-tool-call")]
    assert WatchdogConfig(signals={"repeated-tool-call": {"poll_plateau": 0}}) \
        .engine_settings().poll_plateau == 2  # counts below 2 become 2


def test_the_alert_after_the_output_stopped_changing_says_so(implementation: str) -> None:
    wd = Watchdog(only_repeat(), implementation=implementation)
    alert = repeat_alert(wd, [*polls(6), *stuck(10, "5 of 20 updated replicas are available"),
                              call()])
    assert alert.count == 17
    assert "the output has not changed for the last 10 polls" in alert.guidance
    assert "until the output has not changed for the last 10 polls" in alert.reason
    assert "You called bash 17 times in a row with the same arguments" in alert.guidance


def test_a_failing_poll_trips_as_before(implementation: str) -> None:
    wd = Watchdog(implementation=implementation)
    trace: list[tuple] = []
    for _ in range(5):
        trace += [call(), result(None, error="connection refused")]
    # the third failure is one error three times (repeated-failure's alone, SPEC §12.3); the
    # fifth call a repeat, as with no results at all
    assert replay(wd, trace) == [(5, "repeated-failure"), (8, "repeated-tool-call")]
    plain = Watchdog(implementation=implementation)
    before = repeat_alert(plain, [call()] * 5)
    again = Watchdog(only_repeat(), implementation=implementation)
    alert = repeat_alert(again, [e for _ in range(5) for e in (
        call(), result(None, error="connection refused"))][:-1])
    assert (alert.reason, alert.guidance, alert.count) == (
        before.reason, before.guidance, before.count)


def test_a_poll_that_fails_after_changing_trips_at_the_next_call(implementation: str) -> None:
    wd = Watchdog(only_repeat(), implementation=implementation)
    trace = [*polls(7), call(), result(None, error="timed out waiting for the condition"), call()]
    assert replay(wd, trace) == [(16, "repeated-tool-call")]
    wd = Watchdog(only_repeat(), implementation=implementation)
    alert = repeat_alert(wd, trace)
    assert "the last poll failed" in alert.guidance and alert.count == 9


@pytest.mark.parametrize(("ending", "said"), [
    (result("nothing to do", no_op=True), POLL_ENDED[Poll.NO_OP]),
    (result(None), POLL_ENDED[Poll.NO_PAYLOAD]),
])
def test_a_no_op_or_a_result_without_payload_ends_the_exemption(
        implementation: str, ending: tuple, said: str) -> None:
    wd = Watchdog(only_repeat(), implementation=implementation)
    trace = [*polls(6), call(), ending, call()]
    assert replay(wd, trace) == [(14, "repeated-tool-call")]
    wd = Watchdog(only_repeat(), implementation=implementation)
    assert said in repeat_alert(wd, trace).guidance


def test_the_exemption_stays_ended_for_the_run(implementation: str) -> None:
    # a failed poll ends it; new output afterwards does not bring it back
    wd = Watchdog(only_repeat(), implementation=implementation)
    trace = [*polls(2), call(), result(None, error="connection reset")]
    trace += polls(4, start=2)
    assert replay(wd, trace) == [(8, "repeated-tool-call")]  # the fifth call
    assert wd.repeat_poll == Poll.FAILED
    # nor after a plateau
    wd = Watchdog(only_repeat(), implementation=implementation)
    assert replay(wd, [*polls(2), *stuck(10, "1 of 20 updated replicas are available"),
                       *polls(4, start=2)]) == [(24, "repeated-tool-call")]
    assert wd.repeat_poll == Poll.STOPPED_CHANGING


def test_identical_calls_with_identical_output_trip_at_the_fifth_exactly_as_today(
        implementation: str) -> None:
    wd = Watchdog(implementation=implementation)
    trace: list[tuple] = []
    for _ in range(5):
        trace += [call(READ), result("def main(): ...", tool=READ[0])]
    assert replay(wd, trace) == [(8, "repeated-tool-call")]
    # the same texts as the same five calls with no results at all
    with_output = Watchdog(implementation=implementation)
    a = repeat_alert(with_output, trace[:-1])
    b = repeat_alert(Watchdog(implementation=implementation), [call(READ)] * 5)
    assert (a.reason, a.guidance, a.count) == (b.reason, b.guidance, b.count)
    assert all(phrase not in a.guidance for phrase in POLL_ENDED.values())


def test_a_run_with_one_result_has_observed_no_change_yet(implementation: str) -> None:
    # parallel calls: only the first has its result when the fifth is made
    wd = Watchdog(only_repeat(), implementation=implementation)
    trace = [call(), result("0 of 20 updated replicas are available")] + [call()] * 4
    assert replay(wd, trace) == [(5, "repeated-tool-call")]


def test_late_results_of_parallel_calls_use_what_has_arrived(implementation: str) -> None:
    wd = Watchdog(only_repeat(), implementation=implementation)
    # two polls answered, then four more in parallel: at the fifth and sixth call the run has
    # observed change (what has arrived), so it is exempt
    trace = polls(2) + [call()] * 4
    # then their results, late: the third new, the fourth failed, the fifth new again
    trace += [result("2 of 20 updated replicas are available"),
              result(None, error="timed out"),
              result("3 of 20 updated replicas are available")]
    trace += [call()]
    assert replay(wd, trace) == [(11, "repeated-tool-call")]
    assert wd.repeat_run == 7


def test_parallel_calls_with_no_result_yet_trip_at_the_fifth(implementation: str) -> None:
    wd = Watchdog(only_repeat(), implementation=implementation)
    trace = [call()] * 5 + polls(0) + [result(f"{i} of 20") for i in range(5)]
    assert replay(wd, trace) == [(4, "repeated-tool-call")]


def test_only_results_of_the_runs_tool_count(implementation: str) -> None:
    wd = Watchdog(only_repeat(), implementation=implementation)
    trace = polls(2) + [call()] * 3
    # a late result of an earlier grep is not the run's, whatever it says
    trace += [result(None, tool="grep", error="no such file"), result("x", tool="grep"),
              result("x", tool="grep")]
    assert replay(wd, trace) == []
    assert wd.repeat_poll == Poll.CHANGING
    # results of the poll's tool that arrive after a read broke its run are not the read's
    wd = Watchdog(only_repeat(), implementation=implementation)
    trace = [call(), call(READ), result("a"), result("b")] + [call(READ)] * 4
    assert replay(wd, trace) == [(7, "repeated-tool-call")]


def test_a_new_run_starts_with_no_evidence(implementation: str) -> None:
    wd = Watchdog(only_repeat(), implementation=implementation)
    trace = polls(6) + [call(READ)] + [call()] * 5
    # the read breaks the poll's run; the new run of five polls has no result: it trips
    assert replay(wd, trace) == [(17, "repeated-tool-call")]
    wd.reset()
    assert wd.repeat_poll == Poll.AWAITING and wd.repeat_run == 0
    assert replay(wd, polls(10)) == []


def test_an_exempt_tool_polls_too(implementation: str) -> None:
    # wait_and_verify is exempt from no-new-state, not from the repeat detector: its output is
    # weighed here, and a stalled one still trips
    tool = ("wait_and_verify", '{"check": "deploy/api"}')
    wd = Watchdog(implementation=implementation)
    assert replay(wd, polls(10, tool=tool)) == []
    trace = [call(tool), result("9 of 20", tool=tool[0])] * 8 + [call(tool)]
    wd = Watchdog(implementation=implementation)
    assert replay(wd, trace) == [(8, "repeated-tool-call")]


def test_density_stays_silent_on_a_polling_run_of_8_in_12(implementation: str) -> None:
    wd = Watchdog(implementation=implementation)
    trace = [("call", "grep", f'{{"pattern": "def f{i}"}}') for i in range(4)]
    trace += [("text", "Found the deployment; waiting for it to roll out."), *polls(8)]
    assert replay(wd, trace) == []
    # the poll is 8 of the window's 12: without the run stand-down, density would say so
    eager = WatchdogConfig(signals={"dominant-tool-call": {"defer_run": 0}},
                           only=frozenset({"dominant-tool-call"}))
    assert replay(Watchdog(eager, implementation=implementation), trace) == [
        (19, "dominant-tool-call")]
    # the same eight calls not in one run are a dominant call
    wd = Watchdog(implementation=implementation)
    mixed = [e for i in range(4) for e in (("call", "grep", f'{{"pattern": "def f{i}"}}'),
                                           call(), result(f"{i}"), call(), result(f"{i}b"))]
    mixed.insert(10, ("text", "Halfway there."))
    assert replay(wd, mixed) == [(19, "dominant-tool-call")]


def test_a_polling_session_is_not_halted_by_id(implementation: str) -> None:
    """Through Guardrails in enforce mode, results named only by their call's id."""
    for batched in (False, True):
        f = Fleet(GuardrailsConfig(mode="enforce", unattended=False),
                  implementation=implementation)
        events: list[tuple] = [("s", "turn_start")]
        for i in range(12):
            events += [("s", "call", *POLL, f"c{i}"),
                       ("s", "result", None, f"{i} of 12 ready", None, False, f"c{i}")]
            if i % 4 == 3:
                events.append(("s", "text", "still rolling out"))
        for i in range(12, 21):  # stuck at its last answer: nine more, the tenth such result
            events += [("s", "call", *POLL, f"c{i}"),
                       ("s", "result", None, "11 of 12 ready", None, False, f"c{i}")]
        events += [("s", "call", *POLL, "c21")]
        if batched:
            outcomes = f.observe_many(events)
            halts = [(i, d.action) for i, _, d in outcomes if getattr(d, "halt_session", False)]
        else:
            g = f.session("s")
            g.start_turn()
            halts = []
            for i, (_, kind, *x) in enumerate(events[1:], start=1):
                if kind == "call":
                    d = g.on_call(x[0], x[1], id=x[2])
                elif kind == "result":
                    d = g.on_result(x[0], payload=x[1], error=x[2], no_op=x[3], id=x[4])
                else:
                    d = g.on_text(x[0])
                if d.halt_session:
                    halts.append((i, d.action))
        assert halts[:1] == [(len(events) - 1, "halt_session")], batched
        assert f.session("s").halted


def only_repeat() -> WatchdogConfig:
    return WatchdogConfig(signals={"repeated-tool-call": {}},
                          only=frozenset({"repeated-tool-call"}))
