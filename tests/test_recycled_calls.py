"""recycled-calls (SPEC §12.4): calls in a row that each repeat a call made among the last 64
and get the same answer that call got before. Both engines, exact events: the long cycles real
runs repeat until their limit, the same cycle with changing answers, two empty greps, the
stand-downs for the repeat and cycle detectors, which call a result answers, the memory."""

from __future__ import annotations

import json
from typing import Any

import pytest

from tripwire import Watchdog, WatchdogConfig
from tripwire.signals import BY_ID
from tripwire.signals.recycled_calls import PENDING

#: One lap of a SWE-agent run going round in a circle (every action runs in its shell): open
#: the file, search it, jump, an edit the linter rejects (the file is unchanged), run the
#: reproduction, look for the file again, ... up to 14 steps. The answers carry timings and a
#: line counter: the same answers all the same (SPEC §12.1).
LAP = [
    ("open src/marshmallow/fields.py",
     "[File: /testbed/src/marshmallow/fields.py (1987 lines total)]\n1:\"\"\"Field classes.\"\"\""),
    ("search_file \"def _serialize\"", "Found 12 matches for \"def _serialize\" in fields.py"),
    ("goto 1114", "[File: /testbed/src/marshmallow/fields.py (1987 lines total)]\n1114:    def"),
    ("edit 1117:1117\n        return int(value.total_seconds())\nend_of_edit",
     "Your proposed edit has introduced new syntax error(s). Please read this error message "
     "carefully and then retry editing the file.\nERRORS:\n- E999 IndentationError"),
    ("python reproduce.py", "Traceback (most recent call last):\n  File \"reproduce.py\", line 6"
     "\nAttributeError: 'int' object has no attribute 'total_seconds'\n[done in {t}s]"),
    ("find_file fields.py", "Found 1 matches for \"fields.py\" in /testbed:\n/testbed/src/fields.py"),
    ("python -c 'import marshmallow; print(marshmallow.__version__)'", "3.0.0\n"),
    ("grep -n total_seconds src/marshmallow/fields.py", "1117:        return value.total_seconds()"),
    ("cat reproduce.py", "from datetime import timedelta\nfrom marshmallow.fields import TimeDelta"),
    ("ls tests", "test_fields.py\ntest_schema.py\nconftest.py"),
    ("python -m pytest tests/test_fields.py -x -q",
     "F\n=== 1 failed in {t}s ===\nFAILED tests/test_fields.py::test_timedelta"),
    ("git diff", ""),
    ("scroll_down", "[File: /testbed/src/marshmallow/fields.py (1987 lines total)]\n1214:"),
    ("bash: line count", "/bin/bash: line {n}: count: command not found"),
]


def lap(period: int, laps: int, *, changing: bool = False, start: int = 0) -> list[tuple]:
    """``laps`` laps of the first ``period`` steps: each a thought, the call, its answer."""
    out: list[tuple] = []
    for i in range(laps):
        for k in range(period):
            command, answer = LAP[k]
            n = start + i * period + k
            text = answer.format(t=f"0.{41 + n % 50}", n=11301 + 15 * n)
            if changing:
                text += f"\n{n} checks so far"
            out += [("text", f"Step {k + 1}: let me look at this again."),
                    ("call", "bash", json.dumps({"command": command})),
                    ("result", "bash", text)]
    return out


def replay(wd: Watchdog, trace: list[tuple]) -> list[tuple[int, str]]:
    """(event index, signal) of every alert, counting from the watchdog's own next event."""
    got = []
    for index, e in enumerate(trace, start=wd.events):
        if e[0] == "call":
            alerts = wd.observe_call(e[1], e[2])
        elif e[0] == "result":
            alerts = wd.observe_result(e[1], payload=e[2], error=e[3] if len(e) > 3 else None,
                                       no_op=e[4] if len(e) > 4 else False)
        elif e[0] == "text":
            alerts = wd.observe_text(e[1])
        elif e[0] == "turn_end":
            alerts = wd.end_turn()
        else:
            alerts = wd.reset()
        for a in alerts:
            assert a.event == index
            got.append((index, a.signal))
    return got


def step(k: int) -> int:
    """The event of step k's (1-based) answer: each step is a thought, a call, its answer."""
    return 3 * k - 1


@pytest.mark.parametrize(("period", "expected"), [
    # lap 2's sixth answer is the sixth already seen this turn (no-new-state, a warning); the
    # eighth repeated call, step period + 8, trips recycled-calls, once for the whole loop
    (6, [(step(12), "no-new-state"), (step(14), "recycled-calls")]),
    (7, [(step(13), "no-new-state"), (step(15), "recycled-calls")]),
    # the 14-step lap has an empty answer (`git diff`, its 12th step): no payload to
    # no-new-state, which restarts its run after it (and so warns again), a repeat like any
    # other answer to recycled-calls; that fourth warning with no new answer between is
    # persistent-warnings (issue 39)
    (14, [(step(20), "no-new-state"), (step(22), "recycled-calls"),
          (step(32), "no-new-state"), (step(46), "no-new-state"),
          (step(46), "persistent-warnings")]),
])
def test_long_cycles_with_identical_answers_trip_once(
        implementation: str, period: int, expected: list) -> None:
    wd = Watchdog(implementation=implementation)
    # until the call limit: four laps
    assert replay(wd, lap(period, 4)) == expected
    assert wd.recycled_run == 3 * period


def test_the_alert_names_the_loop(implementation: str) -> None:
    wd = Watchdog(implementation=implementation)
    alerts = [a for e in lap(6, 3) if e[0] != "text" for a in (
        wd.observe_call(e[1], e[2]) if e[0] == "call" else wd.observe_result(e[1], payload=e[2]))
        if a.signal == "recycled-calls"]
    (alert,) = alerts
    assert (alert.severity, alert.scope, alert.count, alert.tool) == (
        "critical", "session", 8, "bash")
    # the last 8 calls, oldest first: steps 1..6 of lap 2, then 1 and 2 of lap 3
    tools = "bash:open, bash:search_file, bash:goto, bash:edit, bash:python, bash:find_file"
    assert alert.reason == (
        f"The last 8 calls ({tools}) each repeated a call made among the last 64 calls, with "
        "the same arguments, and got the same answer that call got before: a loop longer than "
        "a simple cycle, with nothing new going in or coming out.")
    assert alert.guidance.startswith(f"Your last 8 tool calls ({tools}) each repeated")
    assert "reset" not in alert.guidance and "/guardrail" not in alert.guidance


def test_the_same_cycle_with_changing_answers_stays_quiet(implementation: str) -> None:
    # a monitoring round: the same checks in the same order, each answer new
    assert replay(Watchdog(implementation=implementation), lap(6, 4, changing=True)) == []
    assert replay(Watchdog(implementation=implementation), lap(14, 3, changing=True)) == []


GREPS = [json.dumps({"command": f"grep -rn '{p}' src/"}) for p in ("_parse_date", "parse_iso")]
#: Two greps alternating irregularly (no 2..4 cycle, neither 8 of any 12 calls).
ORDER = [0, 1, 1, 0, 0, 1, 0, 1, 1, 0, 0, 1, 1, 0, 1, 0]


def greps(result: Any) -> list[tuple]:
    out: list[tuple] = []
    for i in ORDER:
        out += [("text", "Maybe it is defined under another name."), ("call", "bash", GREPS[i]),
                result]
    return out


def test_two_greps_finding_nothing_trip(implementation: str) -> None:
    # the first of each is new; the eighth repeat is the tenth grep's empty answer (event 29).
    # Empty answers are never "already seen" (no-new-state), the repeat and cycle detectors
    # see no run and no cycle: recycled-calls. (Past 15 greps, their one identity, bash:grep,
    # is also repeated-tool-name's warning. The same sentence before each grep is a monologue
    # at its third time: repeated-text's warning, SPEC §12.4.)
    trace = greps(("result", "bash", ""))
    assert replay(Watchdog(implementation=implementation), trace) == [
        (6, "repeated-text"), (29, "recycled-calls"), (43, "repeated-tool-name")]
    # grep exits 1 with no output: failures, each answer its error signature. The third is
    # one error thrice (repeated-failure, a warning); recycled-calls at the same call
    failing = greps(("result", "bash", "", "exit status 1"))
    assert replay(Watchdog(implementation=implementation), failing) == [
        (6, "repeated-text"), (8, "repeated-failure"), (29, "recycled-calls"),
        (43, "repeated-tool-name")]


def test_a_failure_and_a_success_never_compare_equal(implementation: str) -> None:
    only = WatchdogConfig(only=frozenset({"recycled-calls"}))
    trace: list[tuple] = []
    for i in range(12):
        trace += [("call", "bash", GREPS[0]),
                  ("result", "bash", "", "exit status 1") if i % 2 else ("result", "bash", "")]
    assert replay(Watchdog(only, implementation=implementation), trace) == []
    # a no-op's answer is marked too
    trace = [e for i in range(12) for e in (
        ("call", "sync", "{}"), ("result", "sync", "done", None, i % 2 == 1))]
    assert replay(Watchdog(only, implementation=implementation), trace) == []


def test_it_stands_down_for_the_repeat_and_the_cycle_detector(implementation: str) -> None:
    """One loop, one alert (SPEC §12.4): the loops the repeat and the cycle detector report
    are recycled calls too, and recycled-calls stands down for them."""
    calls = WatchdogConfig(only=frozenset({
        "recycled-calls", "repeated-tool-call", "alternating-tool-cycle"}))
    read = ("call", "read_file", '{"path": "a.py"}')
    same = ("result", "read_file", "def main(): ...")
    # one call, one answer, 20 times: the repeat detector's at the fifth call; the eighth
    # repeated answer (event 17) stands down, and the run counts as reported
    trace = [read, same] * 20
    assert replay(Watchdog(calls, implementation=implementation), trace) == [
        (8, "repeated-tool-call")]
    # a 2-call cycle: the cycle detector's at the sixth call
    grep = ("call", "grep", '{"pattern": "main"}')
    found = ("result", "grep", "a.py:1: def main(): ...")
    assert replay(Watchdog(calls, implementation=implementation),
                  [read, same, grep, found] * 10) == [(10, "alternating-tool-cycle")]
    # a 4-call cycle: recycled-calls' eighth repeat (event 23) stands down for the clean
    # cycle of the last 8 calls, which the cycle detector reports at the twelfth (event 22)
    four = [read, same, grep, found, ("call", "ls", "{}"), ("result", "ls", "a.py"),
            ("call", "cat", '{"path": "b.py"}'), ("result", "cat", "import a")]
    assert replay(Watchdog(calls, implementation=implementation), four * 6) == [
        (22, "alternating-tool-cycle")]
    # stand-downs need the detector they defer to (SPEC §10.19)
    no_repeat = WatchdogConfig(only=frozenset({"recycled-calls", "alternating-tool-cycle"}))
    assert replay(Watchdog(no_repeat, implementation=implementation), trace) == [
        (17, "recycled-calls")]
    no_cycle = WatchdogConfig(only=frozenset({"recycled-calls", "repeated-tool-call"}))
    assert replay(Watchdog(no_cycle, implementation=implementation), four * 6) == [
        (23, "recycled-calls")]


def test_which_call_a_result_answers(implementation: str) -> None:
    only = WatchdogConfig(only=frozenset({"recycled-calls"}))
    a, b = ("call", "grep", '{"pattern": "a"}'), ("call", "grep", '{"pattern": "b"}')
    ra, rb = ("result", "grep", "found a"), ("result", "grep", "found b")
    # parallel calls: results answer the oldest unanswered call of their tool, in order; the
    # eighth repeat is the fifth round's second result
    trace = [a, b, ra, rb] * 5
    assert replay(Watchdog(only, implementation=implementation), trace) == [(19, "recycled-calls")]
    # answered in the other order every time, each call gets the other's answer every time:
    # the same loop all the same
    assert replay(Watchdog(only, implementation=implementation), [a, b, rb, ra] * 5) == [
        (19, "recycled-calls")]
    # but an order that changes is no repeat
    assert replay(Watchdog(only, implementation=implementation),
                  [a, b, ra, rb, a, b, rb, ra] * 3) == []
    # calls with no answer yet neither count nor break the run; results without a pending
    # call of their tool are nobody's
    trace = [a, ra, b, rb] * 2 + [("call", "ls", "{}")] * 3 + [a, ra, b, rb] * 2
    trace += [("result", "cat", "x")] * 3 + [a, ra, b, rb] * 2
    wd = Watchdog(only, implementation=implementation)
    assert replay(wd, trace) == [(25, "recycled-calls")]
    assert wd.recycled_run == 10


def test_the_pending_calls_are_bounded(implementation: str) -> None:
    only = WatchdogConfig(only=frozenset({"recycled-calls"}))
    calls = [("call", "grep", json.dumps({"pattern": f"p{i}"})) for i in range(PENDING + 1)]
    results = [("result", "grep", f"found {i}") for i in range(PENDING + 1)]
    eight = calls[:PENDING] + results[:PENDING]
    # eight in flight are all remembered: the second round repeats the first
    assert replay(Watchdog(only, implementation=implementation), eight * 3) == [
        (31, "recycled-calls")]
    # nine in flight: the first (p8) is forgotten, so p8's answer goes to p0, p0's to p1...:
    # no call of the second round gets its earlier answer, and the third round none either
    nine = [calls[PENDING], *calls[:PENDING], results[PENDING], *results[:PENDING]]
    assert replay(Watchdog(only, implementation=implementation), eight + nine + eight) == []


def test_exempt_tools_neither_count_nor_break(implementation: str) -> None:
    only = WatchdogConfig(only=frozenset({"recycled-calls"}))
    wait = [("call", "wait_and_verify", '{"check": "deploy"}'),
            ("result", "wait_and_verify", "pending")]
    a = [("call", "grep", '{"pattern": "a"}'), ("result", "grep", "")]
    b = [("call", "grep", '{"pattern": "b"}'), ("result", "grep", "")]
    trace = (a + b + wait) * 6
    # the repeats are a's and b's only, the exempt polls between neither count nor break:
    # the eighth is b's fifth result (event 27)
    assert replay(Watchdog(only, implementation=implementation), trace) == [(27, "recycled-calls")]


def test_the_window_knob(implementation: str) -> None:
    config = WatchdogConfig(signals={"recycled-calls": {"window": 12}},
                            only=frozenset({"recycled-calls"}))
    # a 14-call cycle is longer than a 12-call window: no call was seen within it
    assert replay(Watchdog(config, implementation=implementation), lap(14, 3)) == []
    assert replay(Watchdog(config, implementation=implementation), lap(7, 3)) == [
        (3 * 15 - 1, "recycled-calls")]
    with pytest.raises(Exception, match="window must be an integer in \\[2, 64\\]"):
        WatchdogConfig(signals={"recycled-calls": {"window": 65}})


def test_reset_and_turns(implementation: str) -> None:
    only = WatchdogConfig(only=frozenset({"recycled-calls"}))
    # session-lived: a turn boundary does not break it; a reset clears it
    trace = lap(6, 2) + [("turn_end",)] + lap(6, 1, start=12)
    assert replay(Watchdog(only, implementation=implementation), trace) == [(
        3 * 14, "recycled-calls")]
    trace = lap(6, 2) + [("reset",)] + lap(6, 3, start=12)
    assert replay(Watchdog(only, implementation=implementation), trace) == [
        (3 * 12 + 1 + step(14), "recycled-calls")]


def test_retracted_calls_leave_the_pending_calls(implementation: str) -> None:
    only = WatchdogConfig(only=frozenset({"recycled-calls"}))
    wd = Watchdog(only, implementation=implementation)
    a, ra = ("call", "grep", '{"pattern": "a"}'), ("result", "grep", "")
    replay(wd, [a, ra] + [("call", "grep", '{"pattern": "refused"}')] * 3)
    wd.retract_calls(3)
    # the refused calls are not answered by the next results (which would break the run)
    assert replay(wd, [a, ra] * 8) == [(20, "recycled-calls")]


def test_spec_entry() -> None:
    spec = BY_ID["recycled-calls"]
    assert (spec.severity, spec.scope, spec.index) == ("critical", "session", 9)
    settings = WatchdogConfig().engine_settings()
    assert (settings.recycled_threshold, settings.recycled_window) == (8, 64)
    assert WatchdogConfig(signals={"recycled-calls": {"threshold": 1}}) \
        .engine_settings().recycled_threshold == 2


def test_a_recorded_loop_of_the_corpus(implementation: str) -> None:
    """tau-bench task 9, trial 2: the agent books, fails with the same payment error, thinks
    the same thought, and books again, five times. (The shared corpus holds no recycled run of
    8: this loop's is 5, the longest.) It is a clean 2-call cycle, so it is the cycle
    detector's, and recycled-calls stands down for it: one loop, one alert. Without the cycle
    detector, recycled-calls reports it, here with a threshold of 5, at its fifth repeat."""
    from conftest import need_shared

    from tripwire.interchange.adapters import read, transcripts
    from tripwire.interchange.events import Call, Result, Text

    (transcript,) = transcripts([str(need_shared("corpus", "tau-bench-airline"))])
    events = [item.event for item in read(transcript)
              if item.session.endswith("#task-9-trial-2") and item.event is not None]

    def alerts(config: WatchdogConfig) -> list[tuple[int, str]]:
        wd = Watchdog(config, implementation=implementation)
        got = []
        for e in events:
            if isinstance(e, Call):
                fired = wd.observe_call(e.name, e.args)
            elif isinstance(e, Result):
                fired = wd.observe_result(e.name or "", error=e.error, no_op=e.no_op,
                                          payload=e.payload)
            elif isinstance(e, Text):
                fired = wd.observe_text(e.text)
            else:  # turn boundaries
                fired = wd.end_turn()
            got += [(a.event, a.signal) for a in fired]
        assert wd.recycled_run == 5
        return got

    assert len(events) == 70
    assert alerts(WatchdogConfig()) == [(65, "alternating-tool-cycle")]
    no_cycle = {"alternating-tool-cycle": {"enabled": False}}
    assert alerts(WatchdogConfig(signals=no_cycle)) == []
    assert alerts(WatchdogConfig(signals={**no_cycle, "recycled-calls": {"threshold": 5}})) == [
        (68, "recycled-calls")]
