"""SPEC §12.4's signals the anchors have: unknown-tool, repeated-text, empty-responses and
compaction-storm. Both engines, exact events: each trips at its event, not one event below its
threshold, re-arms, and stands down where one behaviour would raise two alerts. The vectors at
the end have the conformance data's shape (events, the signals on, the alerts expected) and
run through the watchdog, one event at a time through ``Guardrails`` and through a batch."""

from __future__ import annotations

import io
import json
from pathlib import Path
from typing import Any

import pytest

from tripwire import Guardrails, GuardrailsConfig, Watchdog, WatchdogConfig
from tripwire.cli.main import main
from tripwire.context.guard import ContextConfig
from tripwire.errors import ConfigError
from tripwire.fleet.fleet import Fleet
from tripwire.interchange.events import parse_event

NOPE = "No such tool available: todo_write"


def replay(wd: Watchdog, trace: list[tuple]) -> list[tuple[int, str]]:
    """(event index, signal) of every alert. Events: ("call", name), ("ok", name) a success
    with a new payload, ("same", name) one with the same payload each time,
    ("fail", name, error), ("unknown", name) a result flagged unknown_tool, ("text", words),
    ("response",), ("compaction",), ("turn_start",), ("turn_end",)."""
    got = []
    for index, e in enumerate(trace):
        kind = e[0]
        if kind == "call":
            alerts = wd.observe_call(e[1], e[2] if len(e) > 2 else "{}")
        elif kind == "ok":
            alerts = wd.observe_result(e[1], payload=f"output {index}")
        elif kind == "same":
            alerts = wd.observe_result(e[1], payload="the same output")
        elif kind == "fail":
            alerts = wd.observe_result(e[1], error=e[2])
        elif kind == "unknown":
            alerts = wd.observe_result(e[1], error=NOPE, unknown_tool=True)
        elif kind == "text":
            alerts = wd.observe_text(e[1])
        elif kind == "response":
            alerts = wd.observe_response()
        elif kind == "compaction":
            alerts = wd.observe_compaction()
        elif kind == "turn_start":  # as Guardrails.start_turn: an event, then the boundary
            wd.count_event()
            wd.turn_boundary()
            alerts = ()
        else:
            alerts = wd.end_turn()
        for a in alerts:
            assert a.event == index
            got.append((index, a.signal))
    return got


def only(*ids: str, **knobs: Any) -> WatchdogConfig:
    signals = {ids[0]: knobs} if knobs else {}
    return WatchdogConfig(signals=signals, only=frozenset(ids))


def missing(n: int, name: str = "todo_write") -> list[tuple]:
    """n calls of a tool the host does not have, each answered so."""
    return [e for _ in range(n) for e in (("call", name), ("unknown", name))]


# -- unknown-tool ---------------------------------------------------------------------------


def test_unknown_tool_trips_at_the_third_and_the_failure_signals_stand_down(
        implementation: str) -> None:
    # the third missing call's result (event 5): unknown-tool alone, though these are three
    # failures of one tool with one error (tool-failure-streak, repeated-failure: one behaviour)
    assert replay(Watchdog(implementation=implementation), missing(3)) == [(5, "unknown-tool")]
    # not one below
    assert replay(Watchdog(implementation=implementation), missing(2)) == []


def test_unknown_tool_re_arms_when_a_call_reaches_a_tool(implementation: str) -> None:
    trace = missing(2) + [("call", "read"), ("ok", "read")] + missing(3) + missing(1) + \
        [("call", "read"), ("ok", "read")] + missing(3)
    assert replay(Watchdog(only("unknown-tool"), implementation=implementation), trace) == [
        (11, "unknown-tool"), (21, "unknown-tool")]


def test_unknown_tool_counts_within_a_turn(implementation: str) -> None:
    trace = missing(2) + [("turn_end",), ("turn_start",)] + missing(2) + [("turn_start",)] + \
        missing(3)
    assert replay(Watchdog(only("unknown-tool"), implementation=implementation), trace) == [
        (16, "unknown-tool")]


def test_without_unknown_tool_the_failures_are_the_failure_signals(implementation: str) -> None:
    off = WatchdogConfig(signals={"unknown-tool": {"enabled": False}})
    # one tool, one error thrice: repeated-failure's (the streak stands down for it, §12.3)
    assert replay(Watchdog(off, implementation=implementation), missing(3)) == [
        (5, "repeated-failure")]


def test_a_streak_of_different_failures_is_still_the_streaks(implementation: str) -> None:
    trace = missing(2) + [("call", "bash"), ("fail", "bash", "exit status 2")]
    assert replay(Watchdog(implementation=implementation), trace) == [
        (5, "tool-failure-streak")]


def test_known_tools_name_the_unknown_ones(implementation: str) -> None:
    config = WatchdogConfig(signals={"unknown-tool": {"known_tools": ["read", "edit"]}})
    trace = [e for _ in range(3) for e in (("call", "grep"), ("fail", "grep", "no tool"))]
    assert replay(Watchdog(config, implementation=implementation), trace) == [
        (5, "unknown-tool")]
    # successes of a tool outside the list count too: the host says it does not have it
    trace = [e for _ in range(3) for e in (("call", "grep"), ("ok", "grep"))]
    assert replay(Watchdog(config, implementation=implementation), trace) == [
        (5, "unknown-tool")]
    # a listed tool failing is no unknown tool: one error thrice is repeated-failure's
    trace = [e for _ in range(3) for e in (("call", "read"), ("fail", "read", "no file"))]
    assert replay(Watchdog(config, implementation=implementation), trace) == [
        (5, "repeated-failure")]


def test_guardrails_take_known_tools_and_the_flag(implementation: str) -> None:
    g = Guardrails(GuardrailsConfig(mode="warn", known_tools=("read_file",)),
                   implementation=implementation)
    g.start_turn()
    signals = []
    for i in range(3):
        g.on_call("TodoWrite", "{}", id=f"c{i}")
        signals += [a.signal for a in g.on_result(id=f"c{i}", error="boom").alerts]
    assert signals == ["unknown-tool"]
    g = Guardrails(GuardrailsConfig(mode="warn"), implementation=implementation)
    g.start_turn()
    signals = []
    for i in range(3):
        g.on_call("TodoWrite", "{}", id=f"c{i}")
        signals += [a.signal for a in g.on_result(id=f"c{i}", error=NOPE,
                                                  unknown_tool=True).alerts]
    assert signals == ["unknown-tool"]
    with pytest.raises(ConfigError, match="known_tools must be a list of tool names"):
        GuardrailsConfig(known_tools="read_file").resolve()


def test_unknown_tool_promoted_cuts_the_turn(implementation: str) -> None:
    config = WatchdogConfig(signals={"unknown-tool": {"severity": "critical"}})
    g = Guardrails(GuardrailsConfig(mode="enforce", watchdog=config),
                   implementation=implementation)
    g.start_turn()
    decisions = []
    for _ in range(3):
        g.on_call("todo_write", "{}")
        decisions.append(g.on_result("todo_write", error=NOPE, unknown_tool=True))
    assert [d.cut_turn for d in decisions] == [False, False, True]
    (alert,) = decisions[-1].alerts
    assert (alert.severity, alert.scope) == ("critical", "turn")
    assert "todo_write" in alert.guidance and "reset" not in alert.guidance


# -- repeated-text --------------------------------------------------------------------------


def test_repeated_text_trips_at_the_third_same_message(implementation: str) -> None:
    trace = []
    for i, words in enumerate(["I will now run the tests.", "I will now  run the tests.\n",
                               " I will now run\tthe tests."]):
        trace += [("text", words), ("call", "bash", json.dumps({"n": i})), ("ok", "bash")]
    assert replay(Watchdog(only("repeated-text"), implementation=implementation), trace) == [
        (6, "repeated-text")]
    assert replay(Watchdog(only("repeated-text"), implementation=implementation),
                  trace[:6]) == []


def test_repeated_text_a_monologue_without_calls(implementation: str) -> None:
    trace = [("text", "Thinking about it."), ("response",)] * 3
    assert replay(Watchdog(implementation=implementation), trace) == [(4, "repeated-text")]


def test_repeated_text_re_arms_on_other_words_and_ends_at_a_turn(implementation: str) -> None:
    same = ("text", "Checking the logs.")
    trace = [same, same, ("text", "Found it."), same, same, same, same, ("turn_start",),
             same, same]
    assert replay(Watchdog(only("repeated-text"), implementation=implementation), trace) == [
        (5, "repeated-text")]
    # text without words is no message: it neither counts nor breaks the run
    trace = [same, ("text", "  \n"), same, ("text", ""), same]
    assert replay(Watchdog(only("repeated-text"), implementation=implementation), trace) == [
        (4, "repeated-text")]


def test_repeated_text_stands_down_for_the_repeat_detector(implementation: str) -> None:
    # the same thought before the same call: the repeat detector's loop, one alert
    trace = []
    for _ in range(5):
        trace += [("text", "Let me look at the directory."), ("call", "bash", '{"c": "ls"}'),
                  ("same", "bash")]
    got = replay(Watchdog(only("repeated-text", "repeated-tool-call"),
                          implementation=implementation), trace)
    assert got == [(13, "repeated-tool-call")]
    # with the repeat detector off, the monologue is repeated-text's
    off = WatchdogConfig(signals={"repeated-tool-call": {"enabled": False}},
                         only=frozenset({"repeated-text", "repeated-tool-call"}))
    assert replay(Watchdog(off, implementation=implementation), trace) == [(6, "repeated-text")]


# -- empty-responses ------------------------------------------------------------------------


def test_empty_responses_trip_at_the_third_empty_one(implementation: str) -> None:
    # usage before its content (OpenAI-style): R0 has a call after it; R1, R2, R3 nothing
    trace = [("response",), ("call", "read"), ("ok", "read"), ("response",), ("response",),
             ("response",), ("response",)]
    assert replay(Watchdog(implementation=implementation), trace) == [(6, "empty-responses")]
    assert replay(Watchdog(implementation=implementation), trace[:6]) == []
    # usage after its content (Claude Code): the response with the text, then three empty ones
    trace = [("text", "Done reading."), ("response",), ("response",), ("response",),
             ("response",)]
    assert replay(Watchdog(implementation=implementation), trace) == [(4, "empty-responses")]


def test_empty_responses_re_arm_on_a_call_or_words(implementation: str) -> None:
    trace = [("response",)] * 4 + [("call", "read"), ("response",)] + [("response",)] * 3 + \
        [("text", "ok"), ("response",), ("response",), ("response",)]
    # R0..R3 (the third empty one at 3); a call; R5 had it; R6, R7, R8 are three more empty
    # ones; words; R10 had them; R11, R12: two
    assert replay(Watchdog(implementation=implementation), trace) == [
        (3, "empty-responses"), (8, "empty-responses")]


def test_guardrails_usage_and_on_response_are_responses(implementation: str) -> None:
    g = Guardrails(GuardrailsConfig(mode="warn"), implementation=implementation)
    g.start_turn()
    got = [[a.signal for a in g.on_usage(model="m", input_tokens=10, output_tokens=0).alerts]
           for _ in range(4)]
    assert got == [[], [], [], ["empty-responses"]]
    g = Guardrails(GuardrailsConfig(mode="warn"), implementation=implementation)
    g.start_turn()
    got = [[a.signal for a in g.on_response().alerts] for _ in range(4)]
    assert got == [[], [], [], ["empty-responses"]]


# -- compaction-storm -----------------------------------------------------------------------


def test_compaction_storm_three_in_one_turn(implementation: str) -> None:
    # the read between the compactions answers what the turn already saw: no work between them
    trace = [("turn_start",), ("call", "read"), ("same", "read"), ("compaction",),
             ("call", "read"), ("same", "read"), ("compaction",), ("compaction",)]
    wd = Watchdog(implementation=implementation)
    assert replay(wd, trace) == [(7, "compaction-storm")]
    assert replay(Watchdog(implementation=implementation), trace[:7]) == []


def test_compaction_storm_five_without_a_turn_that_ends_in_text(implementation: str) -> None:
    # each turn: one compaction, a call whose result never came (the turn was cut), and no
    # answer at its end (a result with a new answer would be work between the compactions)
    def turns(n: int, start: int = 0) -> list[tuple]:
        return [e for i in range(start, start + n) for e in (
            ("turn_start",), ("text", "Reading."), ("compaction",),
            ("call", "read", f'{{"path": "f{i}"}}'), ("response",), ("turn_end",))]
    assert replay(Watchdog(implementation=implementation), turns(5)) == [
        (26, "compaction-storm")]
    assert replay(Watchdog(implementation=implementation), turns(4)) == []
    # a turn that ends in the agent's words between them: the context let it answer
    answered = [*turns(1, 3)[:-1], ("text", "Here is what I found."), ("turn_end",)]
    assert replay(Watchdog(implementation=implementation),
                  turns(3) + answered + turns(4, 4)) == []
    assert replay(Watchdog(implementation=implementation),
                  turns(3) + answered + turns(5, 4)) == [(51, "compaction-storm")]


def test_compaction_storm_is_critical_and_re_arms_after_an_answer(implementation: str) -> None:
    c = ("compaction",)
    trace = [("turn_start",), c, c, c, c, ("text", "Answer."), ("turn_end",),
             ("turn_start",), c, c, c]
    wd = Watchdog(implementation=implementation)
    got = []
    for index, e in enumerate(trace):
        alerts = wd.observe_compaction() if e == c else ()
        if e[0] == "turn_start":
            wd.count_event()
            wd.turn_boundary()
        elif e[0] == "text":
            alerts = wd.observe_text(e[1])
        elif e[0] == "turn_end":
            alerts = wd.end_turn()
        got += [(index, a.signal, a.severity, a.scope) for a in alerts]
    assert got == [(3, "compaction-storm", "critical", "session"),
                   (10, "compaction-storm", "critical", "session")]


def test_guardrails_compactions_halt_under_enforce(implementation: str) -> None:
    g = Guardrails(GuardrailsConfig(mode="enforce"), implementation=implementation)
    g.start_turn()
    decisions = [g.on_compaction(automatic=True) for _ in range(3)]
    assert [d.action for d in decisions] == ["continue", "continue", "halt_session"]
    assert g.halted and g.on_call("read", "{}").halt_session


def test_compact_counts_the_compactions_it_runs(implementation: str) -> None:
    # context management off: compact() is skipped, and a skipped one is no compaction
    off = GuardrailsConfig(mode="enforce", context=ContextConfig(enabled=False))
    g = Guardrails(off, implementation=implementation)
    g.start_turn()
    for _ in range(3):
        assert g.compact([{"role": "user", "content": "hi"}]).kind == "skipped"
    assert not g.halted and g.watchdog is not None
    assert g.watchdog.compaction_storm == (0, 0)
    # one that ran and could not free anything counts: failing at the limit and looping is
    # the storm Claude Code users report
    g = Guardrails(GuardrailsConfig(mode="enforce"), implementation=implementation)
    g.start_turn()
    for _ in range(3):
        assert g.compact([{"role": "user", "content": "hi"}]).kind == "failed"
    assert g.halted and g.halted_by == ("watchdog",)


# -- replay, the fleet's batch, the readers -------------------------------------------------


def test_replay_acts_on_compactions_and_unknown_tools(implementation: str,
                                                      tmp_path: Path) -> None:
    events = [{"type": "turn_start"}]
    for i in range(3):
        events += [{"type": "call", "name": "todo_write", "id": f"c{i}"},
                   {"type": "result", "id": f"c{i}", "error": NOPE, "unknown_tool": True}]
    events += [{"type": "compaction", "automatic": True}] * 3
    path = tmp_path / "s.jsonl"
    path.write_text("".join(json.dumps(e) + "\n" for e in events))
    out = io.StringIO()
    assert main(["replay", str(path), "--implementation", implementation], out=out,
                err=io.StringIO()) == 0
    records = [json.loads(line) for line in out.getvalue().splitlines()]
    assert [(r["event"], r["signal"]) for r in records if r["kind"] == "alert"] == [
        (6, "unknown-tool"), (9, "compaction-storm")]


def test_openai_agents_unknown_tool_error_is_observed(implementation: str) -> None:
    pytest.importorskip("agents")
    from agents.exceptions import ModelBehaviorError

    from tripwire.harnesses.integrations.openai_agents import TripwireRunHooks

    g = Guardrails(GuardrailsConfig(mode="warn"), implementation=implementation)
    hooks = TripwireRunHooks(g)
    for _ in range(3):
        hooks.on_run_error(ModelBehaviorError("Tool search_web not found in agent coder"))
    hooks.on_run_error(ValueError("something else"))
    assert g.watchdog is not None and g.watchdog.unknown_tool_run == 3
    assert g.watchdog.events == 7  # the turn's start, and a call and a result each


#: Conformance-style vectors: the events (the interchange format's records), the signals on
#: ("default": all of them), and the alerts expected as (event, signal, severity).
VECTORS: list[dict[str, Any]] = [
    {"name": "unknown-tool-claude-code",
     "events": [{"type": "turn_start"}] + [
         e for i in range(3) for e in (
             {"type": "call", "name": "TodoWrite", "id": f"t{i}"},
             {"type": "result", "id": f"t{i}", "unknown_tool": True,
              "error": "<tool_use_error>Error: No such tool available: TodoWrite"
                       "</tool_use_error>"})],
     "expect": [(6, "unknown-tool", "warn")]},
    {"name": "unknown-tool-two-then-a-tool",
     "events": [{"type": "turn_start"}] + [
         e for i in range(2) for e in (
             {"type": "call", "name": "TodoWrite", "id": f"t{i}"},
             {"type": "result", "id": f"t{i}", "unknown_tool": True, "error": "no such tool"})]
     + [{"type": "call", "name": "Read", "id": "r"}, {"type": "result", "id": "r",
                                                     "payload": "text"}]
     + [{"type": "call", "name": "TodoWrite", "id": "t9"},
        {"type": "result", "id": "t9", "unknown_tool": True, "error": "no such tool"}],
     "expect": []},
    {"name": "openhands-monologue",
     "events": [{"type": "turn_start"}] + [{"type": "text", "text": "I need to think."},
                                           {"type": "usage", "model": "m"}] * 3,
     "expect": [(5, "repeated-text", "warn")]},
    {"name": "openhands-empty-responses",
     "events": [{"type": "turn_start"}, {"type": "usage", "model": "m"},
                {"type": "call", "name": "ls", "args": {}}, {"type": "result", "name": "ls",
                                                             "payload": "a b"}]
     + [{"type": "usage", "model": "m"}] * 4,
     "expect": [(7, "empty-responses", "warn")]},
    {"name": "condensation-loop",  # the same listing between compactions: nothing new
     "events": [{"type": "turn_start"}, {"type": "call", "name": "ls", "args": {}},
                {"type": "result", "name": "ls", "payload": "x"}]
     + [{"type": "compaction", "automatic": True}, {"type": "usage", "model": "m"},
        {"type": "call", "name": "ls", "args": {}},
        {"type": "result", "name": "ls", "payload": "x"}] * 3,
     "expect": [(11, "compaction-storm", "critical")]},
    {"name": "compactions-across-answered-turns",
     "events": [e for _ in range(6) for e in (
         {"type": "turn_start"}, {"type": "compaction", "automatic": True},
         {"type": "text", "text": "Here is the answer."}, {"type": "turn_end"})],
     "expect": []},
]


def _guardrails_alerts(implementation: str, records: list[dict]) -> list[tuple]:
    g = Guardrails(GuardrailsConfig(mode="warn"), implementation=implementation)
    got = []
    for i, record in enumerate(records):
        e = parse_event(record)
        kind = record["type"]
        if kind == "turn_start":
            g.start_turn()
            continue
        d = (g.end_turn() if kind == "turn_end" else
             g.on_call(e.name, e.args, id=e.id) if kind == "call" else
             g.on_result(e.name, id=e.id, error=e.error, payload=e.payload,
                         unknown_tool=e.unknown_tool) if kind == "result" else
             g.on_text(e.text) if kind == "text" else
             g.on_usage(model=e.model) if kind == "usage" else
             g.on_compaction(automatic=e.automatic))
        got += [(i, a.signal, a.severity) for a in d.alerts]
    return got


@pytest.mark.parametrize("vector", VECTORS, ids=[v["name"] for v in VECTORS])
def test_vectors_one_at_a_time_and_in_a_batch(implementation: str,
                                              vector: dict[str, Any]) -> None:
    assert _guardrails_alerts(implementation, vector["events"]) == vector["expect"]
    fleet = Fleet(GuardrailsConfig(mode="warn"), implementation=implementation)
    rows = [("s", parse_event(record)) for record in vector["events"]]
    got = [(i, a.signal, a.severity) for i, _, d in fleet.observe_many(rows)
           for a in getattr(d, "alerts", ())]
    assert got == vector["expect"]
