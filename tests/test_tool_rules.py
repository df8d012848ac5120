"""Per-tool rules (issue 39): ``[tools.<name>]`` / ``WatchdogConfig(tools=...)``, for calls of one
tool (or of a glob's tools) a signal's threshold or "off".

Every scenario runs on both engines, one event at a time and through a fleet's batch path,
and states exactly which signal fires at which event; the config errors are one line each,
and on the command line exit 2.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from conftest import feed, need_shared
from hypothesis import given, settings
from hypothesis import strategies as st

from tripwire import GuardrailsConfig, Watchdog
from tripwire.errors import ConfigError
from tripwire.fleet import Fleet
from tripwire.interchange.adapters import read_transcript
from tripwire.interchange.events import Call, Result, Text
from tripwire.session.config import read_config_file
from tripwire.signals import BY_ID, WatchdogConfig
from tripwire.signals.tool_rules import OFF, ToolRule

GDB = {"mcp__gdb__*": {"repeated-tool-call": "off", "repeated-tool-name": 40}}
#: the scenarios have no agent text: tools-without-text would fire at every 12th call
QUIET = {"tools-without-text": {"enabled": False}}


def call(name: str, args: Any = "{}") -> dict[str, Any]:
    return {"kind": "call", "name": name, "args": args}


def result(name: str, payload: Any = None, error: Any = None,
           no_op: bool = False) -> dict[str, Any]:
    return {"kind": "result", "name": name, "payload": payload, "error": error, "no_op": no_op}


def fail(name: str, error: str = "ModuleNotFoundError: No module named 'numpy'") -> dict[str, Any]:
    return result(name, error=error)


def alerts_of(config: WatchdogConfig, events: list[dict[str, Any]],
              implementation: str) -> list[tuple[int, str]]:
    wd = Watchdog(config, implementation=implementation)
    out = []
    for i, event in enumerate(events):
        out += [(i, a.signal) for a in feed(wd, event)]
    return out


def batch_alerts_of(config: WatchdogConfig, events: list[dict[str, Any]],
                    implementation: str) -> list[tuple[int, str]]:
    """The same events as batch rows of one fleet session (the native batch resolves each
    row's rule at bind, outside the GIL-free loop)."""
    rows: list[tuple[Any, ...]] = []
    for e in events:
        if e["kind"] == "call":
            rows.append(("s", "call", e["name"], e["args"]))
        else:
            rows.append(("s", "result", e["name"], e.get("payload"), e.get("error"),
                         e.get("no_op", False)))
    fleet = Fleet(GuardrailsConfig(mode="warn", unattended=False, watchdog=config),
                  implementation=implementation)
    return [(i, a.signal) for i, _, outcome in fleet.observe_many(rows)
            for a in getattr(outcome, "alerts", ())]


# (what it shows, rules, events, expected alerts as (event index, signal))
SCENARIOS: list[tuple[str, dict[str, Any], list[dict[str, Any]], list[tuple[int, str]]]] = [
    ("no rule: the gdb loop is a repeat at the 5th call, the name run stands down for it",
     {}, [call("mcp__gdb__next")] * 45, [(4, "repeated-tool-call")]),
    ("the issue's example: repeats off, the name run warns at 40 (no stand-down for a repeat "
     "that is off)",
     GDB, [call("mcp__gdb__next")] * 45, [(39, "repeated-tool-name")]),
    ("a rule for one tool leaves another tool's repeats alone",
     GDB, [call("mcp__gdb__next")] * 6 + [call("read_file", '{"path": "a"}')] * 5,
     [(10, "repeated-tool-call")]),
    ("a per-tool threshold above the signal's: the run trips at 8, the name run stands down "
     "at the tool's own 8",
     {"poll": {"repeated-tool-call": 8}}, [call("poll")] * 20, [(7, "repeated-tool-call")]),
    ("a per-tool threshold below the signal's",
     {"deploy": {"repeated-tool-call": 2}}, [call("deploy")] * 3, [(1, "repeated-tool-call")]),
    ("repeated-tool-name off: varied args of one tool never warn",
     {"move_file": {"repeated-tool-name": "off"}},
     [call("move_file", json.dumps({"src": f"in/{i}", "dst": f"out/{i}"})) for i in range(30)],
     []),
    ("precedence per signal: the exact name over the more specific glob over the less",
     {"mcp__*": {"repeated-tool-call": 3, "repeated-tool-name": 4},
      "mcp__gdb__*": {"repeated-tool-call": "off"},
      "mcp__gdb__info": {"repeated-tool-call": 6}},
     [call("mcp__fs__read")] * 3 + [call("mcp__gdb__next")] * 5 + [call("mcp__gdb__info")] * 6,
     # mcp__gdb__info: the name run (4, from mcp__*) before its own repeat threshold (6)
     [(2, "repeated-tool-call"), (6, "repeated-tool-name"), (11, "repeated-tool-name"),
      (13, "repeated-tool-call")]),
    ("repeated-failure at the tool's own threshold",
     {"flaky_api": {"repeated-failure": 4}},
     [call("flaky_api"), fail("flaky_api")] * 4, [(7, "repeated-failure")]),
    ("repeated-failure off: its failures are not counted, so the failure streak reports them",
     {"flaky_api": {"repeated-failure": "off"}},
     [call("flaky_api", json.dumps({"try": i})) if j == 0 else fail("flaky_api")
      for i in range(5) for j in range(2)],
     [(5, "tool-failure-streak")]),
    ("the same failures without a rule: repeated-failure at 3, the streak stands down",
     {},
     [call("flaky_api", json.dumps({"try": i})) if j == 0 else fail("flaky_api")
      for i in range(5) for j in range(2)],
     [(5, "repeated-failure")]),
    ("no-new-state off for one tool: its stale results neither count nor break the run",
     {"cat": {"no-new-state": "off"}},
     [e for i in range(7) for e in (call("read", json.dumps({"p": i})), result("read", "same"),
                                    call("cat", json.dumps({"p": i})), result("cat", "same"))],
     [(25, "no-new-state")]),  # read's 7th result: its 6th already seen
    ("no-new-state as the signal has it: both tools' stale results count",
     {},
     [e for i in range(7) for e in (call("read", json.dumps({"p": i})), result("read", "same"),
                                    call("cat", json.dumps({"p": i})), result("cat", "same"))],
     [(13, "no-new-state")]),
]


@pytest.mark.parametrize("what,tools,events,expected", SCENARIOS,
                         ids=[s[0][:50] for s in SCENARIOS])
def test_scenario(implementation: str, what: str, tools: dict[str, Any],
                  events: list[dict[str, Any]], expected: list[tuple[int, str]]) -> None:
    config = WatchdogConfig(signals=QUIET, tools=tools)
    assert alerts_of(config, events, implementation) == expected, what
    assert batch_alerts_of(config, events, implementation) == expected, what


@pytest.mark.parametrize("what,tools,events,expected", SCENARIOS,
                         ids=[s[0][:50] for s in SCENARIOS])
def test_engines_decide_identically(what: str, tools: dict[str, Any],
                                    events: list[dict[str, Any]],
                                    expected: list[tuple[int, str]]) -> None:
    """Conformance-style: the two engines give the same alerts, texts and counts included."""
    config = WatchdogConfig(signals=QUIET, tools=tools)
    runs = []
    for implementation in ("native", "python"):
        wd = Watchdog(config, implementation=implementation)
        runs.append([a for e in events for a in feed(wd, e)])
    assert runs[0] == runs[1]


# The signals that watch patterns across tools: "off" for a tool takes its calls or results
# out of the pattern. (what, signals config, rules, events, expected)
def _reads(n: int, start: int = 0) -> list[dict[str, Any]]:
    return [call("read", json.dumps({"p": start + i})) for i in range(n)]


GDB_STEPS = [call("mcp__gdb__step"), call("mcp__gdb__print", '{"expr": "i"}')] * 4
POLLING = [e for i in range(6) for e in (call("poll"), call("poll"),
                                         call("read", json.dumps({"p": i})))]
FAILURES = [call("bash", '{"c": 1}'), fail("bash", "disk full"),
            call("run_tests"), fail("run_tests", "AssertionError: expected two"),
            call("bash", '{"c": 2}'), fail("bash", "permission denied"),
            call("bash", '{"c": 3}'), fail("bash", "connection refused")]
NO_OPS = [call("wait"), result("wait", no_op=True), call("read", '{"p": 1}'),
          result("read", no_op=True), call("wait"), result("wait", no_op=True),
          call("read", '{"p": 2}'), result("read", no_op=True),
          call("read", '{"p": 3}'), result("read", no_op=True)]
INTERLEAVED = [e for i in range(12) for e in (call("mcp__gdb__next"),
                                              call("read", json.dumps({"p": i})))]
CROSS_SCENARIOS: list[tuple[str, dict[str, Any], dict[str, Any], list[dict[str, Any]],
                            list[tuple[int, str]]]] = [
    ("no rule: the silent streak counts every call (the 12th)",
     {}, {}, INTERLEAVED, [(11, "tools-without-text")]),
    ("tools-without-text off for the gdb tools: only the reads count (the 12th read)",
     {}, {"mcp__gdb__*": {"tools-without-text": "off"}}, INTERLEAVED,
     [(23, "tools-without-text")]),
    ("no rule: step/print, three laps, is a cycle at the 6th call",
     QUIET, {}, GDB_STEPS + [call("read", '{"p": "a"}'), call("read", '{"p": "b"}')] * 3,
     [(5, "alternating-tool-cycle"), (13, "alternating-tool-cycle")]),
    ("alternating-tool-cycle off for one tool of the block: that cycle is quiet, another "
     "tool's cycle still trips",
     QUIET, {"mcp__gdb__print": {"alternating-tool-cycle": "off"}},
     GDB_STEPS + [call("read", '{"p": "a"}'), call("read", '{"p": "b"}')] * 3,
     [(13, "alternating-tool-cycle")]),
    ("no rule: poll is 8 of the last 11 calls",
     QUIET, {}, POLLING, [(10, "dominant-tool-call")]),
    ("dominant-tool-call off for poll", QUIET, {"poll": {"dominant-tool-call": "off"}},
     POLLING, []),
    ("no rule: three different failures in a row", QUIET, {}, FAILURES,
     [(5, "tool-failure-streak")]),
    ("tool-failure-streak off for the test runner: its failure neither counts nor breaks the "
     "streak (bash's third)",
     QUIET, {"run_tests": {"tool-failure-streak": "off"}}, FAILURES,
     [(7, "tool-failure-streak")]),
    ("no rule: three no-ops in a row", QUIET, {}, NO_OPS, [(5, "no-op-streak")]),
    ("no-op-streak off for wait: read's third no-op", QUIET, {"wait": {"no-op-streak": "off"}},
     NO_OPS, [(9, "no-op-streak")]),
]


@pytest.mark.parametrize("what,signals,tools,events,expected", CROSS_SCENARIOS,
                         ids=[s[0][:50] for s in CROSS_SCENARIOS])
def test_cross_tool_scenario(implementation: str, what: str, signals: dict[str, Any],
                             tools: dict[str, Any], events: list[dict[str, Any]],
                             expected: list[tuple[int, str]]) -> None:
    config = WatchdogConfig(signals=signals, tools=tools)
    assert alerts_of(config, events, implementation) == expected, what
    assert batch_alerts_of(config, events, implementation) == expected, what
    runs = []
    for impl in ("native", "python"):
        wd = Watchdog(config, implementation=impl)
        runs.append([a for e in events for a in feed(wd, e)])
    assert runs[0] == runs[1]  # texts and counts too


def test_a_silence_rule_retracts_exactly(implementation: str) -> None:
    """A retry that takes back calls of a tool the streak does not count leaves the counted
    ones: 5 reads, 5 gdb calls taken back, then 7 reads make the 12th counted call."""
    config = WatchdogConfig(tools={"mcp__gdb__*": {"tools-without-text": "off"}})
    wd = Watchdog(config, implementation=implementation)
    fired = []
    for i in range(5):
        fired += wd.observe_call("read", json.dumps({"p": i}))
    for i in range(5):
        fired += wd.observe_call("mcp__gdb__next", json.dumps({"n": i}))
    assert wd.silent_calls == 5
    wd.retract_calls(5)
    assert wd.silent_calls == 5
    for i in range(7):
        fired += [(i, a.signal, a.count) for a in wd.observe_call("read", json.dumps({"q": i}))]
    assert fired == [(6, "tools-without-text", 12)]


def test_streak_texts_name_only_the_counted_tools(implementation: str) -> None:
    """The failure streak's text lists the tools it counted, not the ruled-off one."""
    config = WatchdogConfig(signals=QUIET, tools={"run_tests": {"tool-failure-streak": "off"}})
    wd = Watchdog(config, implementation=implementation)
    alerts = [a for e in FAILURES for a in feed(wd, e)]
    assert [a.signal for a in alerts] == ["tool-failure-streak"]
    assert "run_tests" not in alerts[0].reason and "bash" in alerts[0].reason


def decisions(tools: dict[str, Any] | None, calls: int,
              implementation: str) -> list[tuple[int, str, tuple[str, ...]]]:
    """Under enforce, the decisions other than a plain continue: (call, action, signals)."""
    from tripwire import Guardrails

    g = Guardrails(GuardrailsConfig(mode="enforce", unattended=False, tools=tools,
                                    watchdog=WatchdogConfig(signals=QUIET)),
                   implementation=implementation)
    g.start_turn()
    out = []
    for n in range(calls):
        d = g.on_call("mcp__gdb__next", "{}")
        if d.action != "continue" or d.alerts:
            out.append((n, d.action, tuple(a.signal for a in d.alerts)))
        if d.halt_session:
            break
    return out


def test_the_decisions_under_enforce(implementation: str) -> None:
    """Without the rule the fifth `next` halts the session; with it the session goes on and
    the fortieth call carries the name run's warning."""
    assert decisions(None, 45, implementation) == [
        (4, "halt_session", ("repeated-tool-call",))]
    assert decisions(GDB, 45, implementation) == [(39, "continue", ("repeated-tool-name",))]


def test_exempt_tools_is_three_signals_off(implementation: str) -> None:
    """The old key means what it meant: [tools.X] with no-new-state, repeated-failure and
    recycled-calls off; no-new-state off alone leaves repeated-failure counting X."""
    events = ([e for i in range(7) for e in (call("wait", json.dumps({"i": i})),
                                              result("wait", "pending"))]
              + [call("wait"), fail("wait")] * 3)
    old = WatchdogConfig(signals={"no-new-state": {"exempt_tools": ["wait"]}})
    new = WatchdogConfig(signals={"no-new-state": {"exempt_tools": []}},
                         tools={"wait": {"no-new-state": "off", "repeated-failure": "off",
                                         "recycled-calls": "off"}})
    only = WatchdogConfig(signals={"no-new-state": {"exempt_tools": []}},
                          tools={"wait": {"no-new-state": "off"}})
    none = WatchdogConfig(signals={"no-new-state": {"exempt_tools": []}})
    assert alerts_of(none, events, implementation) == [(13, "no-new-state"),
                                                       (19, "repeated-failure")]
    # its failures uncounted by repeated-failure, the failure streak does not stand down
    assert alerts_of(old, events, implementation) == [(19, "tool-failure-streak")]
    assert alerts_of(new, events, implementation) == [(19, "tool-failure-streak")]
    assert alerts_of(only, events, implementation) == [(19, "repeated-failure")]
    rule = old.engine_settings().tool_rules.lookup("wait")
    bits = sum(BY_ID[s].bit for s in ("no-new-state", "repeated-failure", "recycled-calls"))
    assert rule == ToolRule(off=bits, repeat_threshold=5, name_threshold=15,
                            repeated_failure_threshold=OFF)


def test_a_tools_own_rule_wins_over_exempt_tools_for_what_it_sets() -> None:
    config = WatchdogConfig(signals={"no-new-state": {"exempt_tools": ["wait"]}},
                            tools={"wait": {"repeated-failure": 6}})
    rule = config.engine_settings().tool_rules.lookup("wait")
    assert rule.repeated_failure_threshold == 6
    assert rule.off == BY_ID["no-new-state"].bit | BY_ID["recycled-calls"].bit


def test_lookup_precedence() -> None:
    rules = WatchdogConfig(signals={"no-new-state": {"exempt_tools": []}}, tools={
        "mcp__*": {"repeated-tool-call": 3, "repeated-tool-name": 30},
        "mcp__gdb__*": {"repeated-tool-call": "off"},
        "mcp__gdb__info": {"repeated-failure": 7},
        "[ab]x": {"repeated-tool-name": 9},
    }).engine_settings().tool_rules
    assert rules.lookup("read_file") is None
    assert rules.lookup("mcp__fs__read") == ToolRule(0, 3, 30, 3)
    assert rules.lookup("mcp__gdb__next") == ToolRule(BY_ID["repeated-tool-call"].bit, OFF, 30, 3)
    assert rules.lookup("mcp__gdb__info") == ToolRule(BY_ID["repeated-tool-call"].bit, OFF, 30, 7)
    assert rules.lookup("ax") == ToolRule(0, 5, 9, 3)
    assert rules.lookup("cx") is None
    assert rules.for_calls


def test_no_rules_no_lookup() -> None:
    """The default config's only rule is exempt_tools' (results); none judges calls."""
    rules = WatchdogConfig().engine_settings().tool_rules
    assert rules is not None and not rules.for_calls
    assert WatchdogConfig(signals={"no-new-state": {"exempt_tools": []}}
                          ).engine_settings().tool_rules is None


RULES_TAKE = ("repeated-tool-call, alternating-tool-cycle, dominant-tool-call, "
              "repeated-tool-name, tool-failure-streak, no-op-streak, no-new-state, "
              "tools-without-text, repeated-failure, recycled-calls")


@pytest.mark.parametrize("tools,message", [
    ({"x": {"repeated-tool-cal": 3}},
     "tools.'x': unknown signal 'repeated-tool-cal' (per-tool rules take: " + RULES_TAKE + ")"),
    ({"x": {"compaction-storm": "off"}},
     "tools.'x': compaction-storm takes no per-tool rule (per-tool rules take: "
     + RULES_TAKE + ")"),
    ({"x": {"dominant-tool-call": 9}},
     "tools.'x': dominant-tool-call has no per-call threshold: only \"off\" applies to it"),
    ({"x": {"no-new-state": 3}},
     "tools.'x': no-new-state has no per-call threshold: only \"off\" applies to it"),
    ({"x": {"repeated-tool-call": 1}},
     "tools.'x': repeated-tool-call must be \"off\" or an integer in [2, 1000000], not 1"),
    ({"x": {"repeated-tool-call": 2_000_000}},
     "tools.'x': repeated-tool-call must be \"off\" or an integer in [2, 1000000], "
     "not 2000000"),
    ({"x": {"repeated-failure": True}},
     "tools.'x': repeated-failure must be \"off\" or an integer in [2, 1000000], not True"),
    ({"x": {"repeated-tool-call": "never"}},
     "tools.'x': repeated-tool-call must be \"off\" or a threshold, not 'never'"),
    ({"x": 3}, "tools.'x' must be a table of signal = threshold or \"off\", not 3"),
    ({"a*": {"repeated-tool-call": 3}, "*b": {"repeated-tool-call": "off"}},
     "tools: 'a*' and '*b' can match the same tool and are as specific as each other for "
     "repeated-tool-call: name the tool exactly or make one pattern more specific"),
])
def test_config_errors(tools: dict[str, Any], message: str) -> None:
    with pytest.raises(ConfigError) as e:
        WatchdogConfig(tools=tools)
    assert str(e.value) == message
    assert "\n" not in str(e.value)


def test_a_config_with_rules_derived_again_keeps_them() -> None:
    config = WatchdogConfig(tools=GDB)
    again = config.with_knobs("repeated-tool-call", threshold=4).restricted_to(
        {"repeated-tool-call", "repeated-tool-name"})
    assert again.tools == config.tools == {
        "mcp__gdb__*": {"repeated-tool-call": OFF, "repeated-tool-name": 40}}
    resolved = GuardrailsConfig(tools=GDB, known_tools=["mcp__gdb__next"]).resolve()
    assert resolved.watchdog.tools == config.tools


def test_globs_that_cannot_clash_are_not_ambiguous() -> None:
    WatchdogConfig(tools={"a*": {"repeated-tool-call": 3}, "b*": {"repeated-tool-call": 4}})
    WatchdogConfig(tools={"a*": {"repeated-tool-call": 3}, "*b": {"repeated-tool-name": 4}})
    WatchdogConfig(tools={"mcp__gdb__*": {"repeated-tool-call": 3},
                          "mcp__*": {"repeated-tool-call": 4}})
    WatchdogConfig(tools={"a?c": {"repeated-tool-call": 3}, "a?d": {"repeated-tool-call": 4}})


def test_config_file_and_guardrails_config(tmp_path: Path, implementation: str) -> None:
    path = tmp_path / "tripwire.toml"
    path.write_text('[signals.tools-without-text]\nenabled = false\n'
                    '[tools."mcp__gdb__*"]\nrepeated-tool-call = "off"\n'
                    'repeated-tool-name = 40\n', encoding="utf-8")
    from_file = GuardrailsConfig.from_file(str(path)).resolve().watchdog
    explicit = GuardrailsConfig(watchdog=WatchdogConfig(signals=QUIET),
                                tools=GDB).resolve().watchdog
    assert from_file.tools == explicit.tools == {
        "mcp__gdb__*": {"repeated-tool-call": OFF, "repeated-tool-name": 40}}
    events = [call("mcp__gdb__next")] * 45
    assert alerts_of(from_file, events, implementation) == [(39, "repeated-tool-name")]
    # GuardrailsConfig(tools=...) replaces the file's tables whole
    replaced = GuardrailsConfig.from_file(str(path), tools={}).resolve().watchdog
    assert alerts_of(replaced, events, implementation) == [(4, "repeated-tool-call")]
    assert read_config_file(path)["tools"] == {"mcp__gdb__*": GDB["mcp__gdb__*"]}


def test_a_bad_rule_on_the_command_line_is_one_line_and_exit_2(tmp_path: Path) -> None:
    config = tmp_path / "bad.toml"
    config.write_text('[tools.x]\nno-new-state = 3\n', encoding="utf-8")
    events = tmp_path / "events.jsonl"
    events.write_text('{"type": "call", "name": "x", "args": {}}\n', encoding="utf-8")
    proc = subprocess.run([sys.executable, "-m", "tripwire", "replay", "--config", str(config),
                           str(events)], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 2, proc.stderr
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1, proc.stderr
    assert "no-new-state has no per-call threshold" in lines[0]


# --------------------------------------------------------------------------------------------
# A real recording: a rule for its dominant tool silences exactly that tool's repeats
# --------------------------------------------------------------------------------------------


def _replay(path: Path, config: WatchdogConfig,
            implementation: str) -> list[tuple[int, str, str | None]]:
    """(event index, signal, tool) of every alert of the recording's one session."""
    wd = Watchdog(config, implementation=implementation)
    out = []
    for item in read_transcript(path):
        event = item.event
        if isinstance(event, Call):
            alerts = wd.observe_call(event.name, event.args)
        elif isinstance(event, Result):
            alerts = wd.observe_result(event.name or "", error=event.error,
                                       no_op=event.no_op, payload=event.payload,
                                       unknown_tool=event.unknown_tool)
        elif isinstance(event, Text):
            alerts = wd.observe_text(event.text)
        else:
            continue
        out += [(a.event, a.signal, a.tool) for a in alerts]
    return out


RECORDINGS = ("corpus", "mini-swe-agent-swebench")


def test_a_rule_for_the_dominant_tool_silences_exactly_its_repeats(implementation: str) -> None:
    """Each recording of a bash-only agent replayed twice: as recorded, and with its dominant
    tool's repeated-tool-call and repeated-tool-name off. The second run's alerts are the
    first's without that tool's repeats: nothing else moves. (django__django-16560 is the one
    whose bash calls run the same program 15 times in a row: repeated-tool-name.)"""
    from collections import Counter

    silenced_in = []
    for path in sorted(need_shared(*RECORDINGS).glob("*.traj.json")):
        calls = Counter(i.event.name for i in read_transcript(path)
                        if isinstance(i.event, Call))
        if not calls:
            continue
        tool = calls.most_common(1)[0][0]
        before = _replay(path, WatchdogConfig(), implementation)
        rule = WatchdogConfig(tools={tool: {"repeated-tool-call": "off",
                                            "repeated-tool-name": "off"}})
        after = _replay(path, rule, implementation)
        silenced = [a for a in before
                    if a[1] in ("repeated-tool-call", "repeated-tool-name") and a[2] == tool]
        assert after == [a for a in before if a not in silenced], path.name
        if silenced:
            silenced_in.append((path.name, silenced))
    assert silenced_in == [("django__django-16560.traj.json", [(55, "repeated-tool-name", "bash")])]


def test_a_claude_code_hook_reads_the_rules_of_its_config(tmp_path: Path,
                                                          implementation: str) -> None:
    """The hook as Claude Code runs it, one process per event: the sixth identical call of an
    MCP debugger's `next` is allowed under a rule for mcp__gdb__*, and without the rule the
    fifth is denied (repeated-tool-call, enforce)."""
    from test_hooks import Hook, common, post, pre

    config = tmp_path / "tripwire.toml"
    config.write_text('[tools."mcp__gdb__*"]\nrepeated-tool-call = "off"\n', encoding="utf-8")
    step = {"command": "next"}

    def run(*args: str) -> list[dict | None]:
        hook = Hook("claude-code", tmp_path / ("ruled" if args else "plain") / "t.sqlite3",
                    implementation)
        hook.raw(json.dumps(common("UserPromptSubmit", prompt="step through main")), *args)
        out = []
        for n in range(1, 7):
            done = hook.raw(json.dumps(pre(n, step, tool="mcp__gdb__next")), *args)
            assert done.returncode == 0 and "Traceback" not in done.stderr, done.stderr
            out.append(json.loads(done.stdout) if done.stdout.strip() else None)
            # the same output each time: no poll whose answer changes (SPEC §12.2)
            hook.raw(json.dumps(post(n, step, stdout="main () at app.c:12", tool="mcp__gdb__next")),
                     *args)
        return out

    assert run("--config", str(config)) == [None] * 6
    denied = run()
    assert denied[:4] == [None] * 4
    assert denied[4] is not None
    assert denied[4]["hookSpecificOutput"]["permissionDecision"] == "deny"
    assert "(repeated-tool-call)" in denied[4]["stopReason"]


# --------------------------------------------------------------------------------------------
# Differential: random traffic under random rules, the two engines alert alike
# --------------------------------------------------------------------------------------------

TOOLS = ("read", "bash", "mcp__gdb__next", "mcp__gdb__step", "mcp__fs__read")
RULED = tuple(s.id for s in BY_ID.values() if s.per_tool)
_rule_value = st.sampled_from(["off", 2, 3, 4, 7])
_rules = st.dictionaries(
    st.sampled_from(("read", "bash", "mcp__gdb__*", "mcp__*", "mcp__gdb__next", "*")),
    st.dictionaries(st.sampled_from(RULED), _rule_value, max_size=3), max_size=3)
_event = st.one_of(
    st.tuples(st.just("call"), st.sampled_from(TOOLS), st.sampled_from(('{}', '{"p": 1}'))),
    st.tuples(st.just("result"), st.sampled_from(TOOLS), st.sampled_from(("x", "y", None)),
              st.sampled_from((None, None, "boom")), st.booleans()),
    st.tuples(st.just("text"), st.sampled_from(("on it", "still on it"))),
    st.tuples(st.just("retract"), st.integers(1, 4)),
)


def _valid(rules: dict[str, dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """The generated rules with the values a signal refuses dropped (an off-only signal's
    threshold), or {} when the globs clash (both refused as config errors, tested above)."""
    cleaned = {p: {s: v for s, v in r.items()
                   if v == "off" or BY_ID[s].per_tool == "threshold"} for p, r in rules.items()}
    try:
        WatchdogConfig(tools=cleaned)
    except ConfigError:
        return {}
    return cleaned


@settings(max_examples=150, deadline=None)
@given(_rules, st.lists(_event, max_size=60))
def test_engines_agree_on_random_traffic_under_random_rules(
        rules: dict[str, dict[str, Any]], events: list[tuple[Any, ...]]) -> None:
    config = WatchdogConfig(tools=_valid(rules))
    runs = []
    for implementation in ("native", "python"):
        wd = Watchdog(config, implementation=implementation)
        seen = []
        for e in events:
            if e[0] == "call":
                alerts = wd.observe_call(e[1], e[2])
            elif e[0] == "result":
                alerts = wd.observe_result(e[1], payload=e[2], error=e[3], no_op=e[4])
            elif e[0] == "retract":
                wd.retract_calls(e[1])
                alerts = ()
            else:
                alerts = wd.observe_text(e[1])
            seen += [(a.event, a.signal, a.count, a.reason) for a in alerts]
        runs.append((seen, wd.silent_calls, wd.failure_streak, wd.no_op_run))
    assert runs[0] == runs[1]
