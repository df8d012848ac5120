"""Watchdog behaviour beyond the conformance data: API shape, config, texts and bad input.

Every test runs on both engines (the ``implementation`` fixture).
"""

from __future__ import annotations

import json
import math

import pytest

from tripwire import SIGNAL_IDS, Alert, ConfigError, InvalidEvent, Watchdog, WatchdogConfig
from tripwire.engine import select as _engine
from tripwire.signals import SIGNALS, truncate_utf8

OPERATOR_WORDS = (
    "/guardrail",
    "guardrails/reset",
    "/interrupt",
    "--max-turn-cost-usd",
    "--watchdog",
    "operator",
    "cost ceiling",
    "Cost ceiling",
)


def only(signal: str, **knobs: int) -> WatchdogConfig:
    return WatchdogConfig(signals={signal: knobs}, only=frozenset({signal}))


# -- shape of the API ----------------------------------------------------------------------


def test_quiet_observations_return_the_empty_tuple(implementation: str) -> None:
    wd = Watchdog(implementation=implementation)
    assert wd.observe_call("read_file", '{"path":"a"}') == ()
    assert wd.observe_result("read_file", payload="x") == ()
    assert wd.observe_text("hello") == ()
    assert wd.end_turn() == ()
    assert wd.reset() == ()
    assert wd.events == 5


def test_alert_carries_signal_severity_scope_texts_and_event_index(implementation: str) -> None:
    wd = Watchdog(implementation=implementation)
    for _ in range(4):
        assert wd.observe_call("read_file", '{"path":"a.go"}') == ()
    wd.observe_text("still looking")
    (alert,) = wd.observe_call("read_file", {"path": "./a.go"})  # decoded args work too
    assert isinstance(alert, Alert)
    assert (alert.signal, alert.severity, alert.scope, alert.event) == (
        "repeated-tool-call",
        "critical",
        "session",
        5,
    )
    assert alert.tool == "read_file" and alert.count == 5
    assert "read_file" in alert.reason and '"./a.go"' in alert.reason
    assert alert.model_text == alert.guidance


def test_implementation_is_reported(implementation: str) -> None:
    wd = Watchdog(implementation=implementation)
    assert wd.implementation == implementation
    assert isinstance(wd, Watchdog)


def test_count_event_advances_the_index(implementation: str) -> None:
    wd = Watchdog(only("repeated-tool-call", threshold=2), implementation=implementation)
    wd.observe_call("x", "{}")
    wd.count_event()  # e.g. a usage event the watchdog does not read
    (alert,) = wd.observe_call("x", "{}")
    assert alert.event == 2


def test_reset_clears_runs_but_keeps_counting_events(implementation: str) -> None:
    wd = Watchdog(only("repeated-tool-call", threshold=3), implementation=implementation)
    wd.observe_call("x", "{}")
    wd.observe_call("x", "{}")
    wd.reset()
    assert wd.observe_call("x", "{}") == ()
    assert wd.observe_call("x", "{}") == ()
    (alert,) = wd.observe_call("x", "{}")
    assert alert.event == 5


# -- every signal's texts obey the two-readers rule ----------------------------------------


def _trip_everything(wd: Watchdog) -> list[Alert]:
    alerts: list[Alert] = []
    for _ in range(6):
        alerts += wd.observe_call("read_file", '{"path":"loop.go"}')
    for _ in range(3):
        alerts += wd.observe_call("a", "{}") + wd.observe_call("b", "{}")
    for i in range(16):
        alerts += wd.observe_call("grep", json.dumps({"pattern": f"p{i}"}))
    for _ in range(3):
        alerts += wd.observe_result("kubectl_get", error="Forbidden: pods is forbidden")
    for _ in range(3):
        alerts += wd.observe_result("mark_task_done", no_op=True, payload="already recorded")
    for _ in range(7):
        alerts += wd.observe_result("read_file", payload="same bytes")
    for error in ("timeout", "connection refused", "Forbidden: nodes is forbidden"):
        alerts += wd.observe_result("kubectl_get", error=error)  # the streak: three errors
    for _ in range(3):  # recycled calls: a 6-call lap, thrice, each call with its answer
        for k in range(6):
            alerts += wd.observe_call(f"step{k}", "{}") + wd.observe_text("again")
            alerts += wd.observe_result(f"step{k}", payload=f"answer {k}")
    for _ in range(3):
        alerts += wd.observe_call("poll", "{}") + wd.observe_call("poll", "{}")
        alerts += wd.observe_call("poll", "{}") + wd.observe_call("x", '{"i":1}')
    for _ in range(3):  # SPEC §12.4: a missing tool, empty responses, compactions
        alerts += wd.observe_result("nope", error="No such tool available", unknown_tool=True)
    for _ in range(4):
        alerts += wd.observe_response()
    for _ in range(3):
        alerts += wd.observe_compaction()
    alerts += wd.observe_text("Let me check. " + "I will read the config file again now.\n" * 9)
    return alerts


def test_guidance_never_names_operator_controls(implementation: str) -> None:
    alerts = _trip_everything(Watchdog(implementation=implementation))
    assert {a.signal for a in alerts} == set(SIGNAL_IDS)
    for alert in alerts:
        assert alert.reason and alert.guidance
        for word in OPERATOR_WORDS:
            assert word not in alert.guidance, (alert.signal, word)


def test_warn_signals_carry_no_scope(implementation: str) -> None:
    for alert in _trip_everything(Watchdog(implementation=implementation)):
        if alert.severity == "warn":
            assert alert.scope is None
        else:
            assert alert.scope == ("turn" if alert.signal == "no-op-streak" else "session")


def test_failure_texts_name_tools_once_and_the_last_error(implementation: str) -> None:
    wd = Watchdog(only("tool-failure-streak", threshold=3), implementation=implementation)
    wd.observe_result("kubectl_get", error="timeout")
    wd.observe_result("kubectl_get", error=True)
    (alert,) = wd.observe_result("", error={"code": 403})
    assert alert.reason.count("kubectl_get") == 1
    assert "unnamed tool" in alert.reason
    assert '{"code": 403}' in alert.reason
    assert "verified" in alert.guidance


def test_cycle_texts_name_every_tool_in_order(implementation: str) -> None:
    wd = Watchdog(only("alternating-tool-cycle"), implementation=implementation)
    alerts = []
    for _ in range(3):
        for tool in ("list_agents", "check_agent", "get_logs"):
            alerts += wd.observe_call(tool, "{}")
    (alert,) = alerts
    assert "list_agents \u2192 check_agent \u2192 get_logs" in alert.reason
    assert "list_agents \u2192 check_agent \u2192 get_logs" in alert.guidance


def test_density_quotes_the_earliest_window_occurrence_as_written(implementation: str) -> None:
    wd = Watchdog(only("dominant-tool-call"), implementation=implementation)
    spellings = ['{"path": "./a.go"}', '{"path":"a.go"}', '{"path":"a.go"}', '{"path":"a.go"}']
    alerts = []
    for i in range(3):
        for s in spellings:
            alerts += wd.observe_call("read_file", s)
        alerts += wd.observe_call("grep", json.dumps({"q": i}))
    assert alerts and '{"path": "./a.go"}' in alerts[0].reason


def test_quoted_args_are_cut_on_a_character_boundary(implementation: str) -> None:
    wd = Watchdog(only("repeated-tool-call", threshold=2), implementation=implementation)
    args = json.dumps({"q": "\u00e9" * 150}, ensure_ascii=False)  # 2-byte characters
    wd.observe_call("search", args)
    (alert,) = wd.observe_call("search", args)
    quoted = alert.reason.split("(", 1)[1].rsplit(")", 1)[0]
    assert "\u2026" in quoted and "\ufffd" not in quoted
    assert len(quoted.encode()) <= 200
    alert.reason.encode("utf-8")


@pytest.mark.parametrize("n", [0, 1, 199, 200, 201, 400])
def test_truncate_utf8_never_splits_a_character(n: int) -> None:
    for ch in ("a", "\u00e9", "\u20ac", "\U0001f600"):
        data = (ch * n).encode()
        out = truncate_utf8(data)
        assert len(out.encode()) <= max(200, len(data) if len(data) <= 200 else 0)
        assert "\ufffd" not in out
        if len(data) <= 200:
            assert out == ch * n


# -- configuration -------------------------------------------------------------------------


def test_default_config_is_spec_section_1() -> None:
    s = WatchdogConfig().engine_settings()
    assert (s.repeat_threshold, s.cycle_max_period, s.cycle_cycles) == (5, 4, 3)
    assert (
        s.density_window,
        s.density_threshold,
        s.density_defer_run,
        s.density_defer_cycle_period,
    ) == (12, 8, 5, 4)
    assert (
        s.name_threshold,
        s.failure_threshold,
        s.no_op_threshold,
        s.no_new_state_threshold,
        s.silence_threshold,
        s.digest_memory,
    ) == (15, 3, 3, 6, 12, 64)
    assert s.exempt_tools == frozenset({"wait_and_verify"})
    assert s.repeated_failure_threshold == 3  # SPEC §7.3's signal, on by default
    assert (s.recycled_threshold, s.recycled_window) == (8, 64)  # SPEC §12.4's, on too
    assert s.poll_plateau == 10  # SPEC §12.2
    # SPEC §12.4's anchors' signals, on too
    assert (s.unknown_tool_threshold, s.repeated_text_threshold, s.empty_responses_threshold,
            s.compaction_per_turn, s.compaction_in_a_row) == (3, 3, 3, 3, 5)
    assert s.known_tools == frozenset()
    assert s.persistent_warnings_threshold == 4  # issue 39's, on too
    assert (s.looping_text_threshold, s.looping_text_max_period) == (8, 512)  # issue 39's
    # what it counts: the signals alerting as warn (by default, every warn signal)
    assert s.warn_signals == sum(spec.bit for spec in SIGNALS if spec.severity == "warn")
    assert s.enabled == 0xFFFF


def test_thresholds_clamp_and_stand_downs_follow_the_detectors_they_defer_to() -> None:
    s = WatchdogConfig(
        signals={
            "repeated-tool-call": {"threshold": -3},
            "alternating-tool-cycle": {"max_period": 3},
            "dominant-tool-call": {"window": 6, "threshold": 99},
        }
    ).engine_settings()
    assert s.repeat_threshold == 2
    assert s.density_threshold == 6  # clamped to the window
    assert s.density_defer_run == 2 and s.density_defer_cycle_period == 3


@pytest.mark.parametrize(
    "signals, message",
    [
        ({"repeated-tool-cal": {"threshold": 3}}, "unknown signal"),
        ({"repeated-tool-call": {"treshold": 3}}, "unknown knob"),
        ({"repeated-tool-call": {"threshold": "3"}}, "must be an integer"),
        ({"repeated-tool-call": {"threshold": math.nan}}, "must be an integer"),
        ({"repeated-tool-call": {"threshold": True}}, "must be an integer"),
        ({"dominant-tool-call": {"window": 65}}, "at most 64"),
        ({"no-new-state": {"exempt_tools": "wait_and_verify"}}, "list of tool names"),
        ({"no-new-state": {"enabled": "no"}}, "true or false"),
    ],
)
def test_bad_config_is_a_config_error(signals: dict, message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        WatchdogConfig(signals=signals).engine_settings()


def test_cycle_history_bound_is_enforced() -> None:
    with pytest.raises(ConfigError, match="max_period x cycles"):
        WatchdogConfig(
            signals={"alternating-tool-cycle": {"max_period": 16, "cycles": 8}}
        ).engine_settings()


def test_a_disabled_signal_stays_silent(implementation: str) -> None:
    config = WatchdogConfig(signals={"repeated-tool-call": {"enabled": False}})
    wd = Watchdog(config, implementation=implementation)
    alerts = [a for _ in range(20) for a in wd.observe_call("x", "{}")]
    # nothing to stand down for: the name run reports the identical calls itself
    assert [(a.signal, a.event) for a in alerts] == [
        ("tools-without-text", 11),
        ("repeated-tool-name", 14),
    ]


def test_exempt_tools_are_configurable(implementation: str) -> None:
    config = WatchdogConfig(
        signals={"no-new-state": {"threshold": 2, "exempt_tools": ["poll_status"]}},
        only=frozenset({"no-new-state"}),
    )
    wd = Watchdog(config, implementation=implementation)
    for _ in range(5):  # exempt: never counts and is not remembered
        assert wd.observe_result("poll_status", payload="pending") == ()
    assert wd.observe_result("wait_and_verify", payload="pending") == ()  # no longer exempt: new
    assert wd.observe_result("wait_and_verify", payload="pending") == ()  # seen: run of 1
    (alert,) = wd.observe_result("wait_and_verify", payload="pending")
    assert alert.signal == "no-new-state" and "wait_and_verify" not in alert.guidance
    assert "poll_status" in alert.guidance


# -- bad input: no crash, documented behaviour ---------------------------------------------


@pytest.mark.parametrize(
    "args",
    [
        "{not json",
        "[1, 2, 3]",
        '"just a string"',
        "42",
        "",
        "null",
        '{"a":1} trailing',
        '{"a": NaN}',
        '{"a": 1e99999999999999999999}',
        '{"a":"\\ud800"}',
        b'{"path": "\xff\xfe"}',
        b"\x80\x81\x82",
        "\ud800 lone surrogate",
        None,
    ],
)
def test_bad_args_compare_as_raw_bytes(implementation: str, args: object) -> None:
    wd = Watchdog(only("repeated-tool-call", threshold=2), implementation=implementation)
    assert wd.observe_call("tool", args) == ()
    (alert,) = wd.observe_call("tool", args)  # byte-identical again: a run of two
    assert alert.signal == "repeated-tool-call"
    assert "\ufffd" not in alert.guidance or isinstance(args, bytes)


def test_raw_args_differing_by_one_byte_are_different(implementation: str) -> None:
    wd = Watchdog(only("repeated-tool-call", threshold=2), implementation=implementation)
    wd.observe_call("tool", "[1,2]")
    assert wd.observe_call("tool", "[1, 2]") == ()


def test_unserializable_decoded_args_are_still_observed(implementation: str) -> None:
    wd = Watchdog(only("repeated-tool-call", threshold=2), implementation=implementation)
    args = {"when": object(), "n": math.nan}
    wd.observe_call("tool", args)
    assert wd.observe_call("tool", {"when": object(), "n": math.nan}) == ()  # repr differs
    wd.observe_call("tool", args)
    (alert,) = wd.observe_call("tool", args)
    assert alert.signal == "repeated-tool-call"


def test_empty_and_none_names_are_the_unnamed_tool(implementation: str) -> None:
    wd = Watchdog(only("repeated-tool-call", threshold=2), implementation=implementation)
    wd.observe_call("", "{}")
    (alert,) = wd.observe_call(None, "{}")
    assert "unnamed tool" in alert.reason


def test_a_non_string_name_is_an_invalid_event(implementation: str) -> None:
    wd = Watchdog(implementation=implementation)
    with pytest.raises(InvalidEvent, match="tool name"):
        wd.observe_call(42, "{}")
    with pytest.raises(InvalidEvent, match="agent text"):
        wd.observe_text(3.5)


def test_ten_megabyte_payloads_and_args(implementation: str) -> None:
    wd = Watchdog(only("no-new-state", threshold=2), implementation=implementation)
    big = "x" * 10_000_000
    assert wd.observe_call("read_file", '{"data":"' + big + '"}') == ()
    wd.observe_result("read_file", payload=big)
    wd.observe_result("read_file", payload=big.encode())
    (alert,) = wd.observe_result("read_file", payload=memoryview(big.encode()))
    assert alert.signal == "no-new-state"


def test_payload_types_share_digests_by_their_bytes(implementation: str) -> None:
    wd = Watchdog(only("no-new-state", threshold=3), implementation=implementation)
    wd.observe_result("a", payload='{"k":1}')
    wd.observe_result("b", payload=b'{"k":1}')
    wd.observe_result("c", payload=bytearray(b'{"k":1}'))
    (alert,) = wd.observe_result("d", payload={"k": 1})  # decoded: sorted compact JSON
    assert alert.signal == "no-new-state"


def test_error_values(implementation: str) -> None:
    wd = Watchdog(only("tool-failure-streak", threshold=2), implementation=implementation)
    for success in (None, False, ""):
        assert wd.observe_result("t", error=success) == ()
        assert wd.failure_streak == 0
    wd.observe_result("t", error="boom")
    (alert,) = wd.observe_result("t", error=True)
    assert "no error text" in alert.reason


def test_unknown_implementation_is_a_config_error() -> None:
    with pytest.raises(ConfigError, match="native or python"):
        Watchdog(implementation="rust")
    with pytest.raises(ConfigError):
        _engine.load("fortran")


def test_native_session_state_is_small_until_a_turn_needs_more() -> None:
    """A session holds the first 8 slots of its payload answers (no-new-state) and of
    recycled-calls' window; the rest are allocated when a turn sees more distinct answers
    (freed at its boundary) or the session answers more calls (kept); repeated-failure's
    pairs at its first failure, dominant-tool-call's reported keys at its first report: a
    fleet's sessions that ran a short turn cost ~1 KB of native state, not 2.7."""
    pytest.importorskip("tripwire._native")
    wd = Watchdog(implementation="native")
    fresh = wd.state_bytes
    assert fresh <= 1080
    for i in range(6):  # a turn of six reads
        wd.observe_call("read_file", json.dumps({"path": f"src/pkg/m{i}.py"}))
        wd.observe_result("read_file", payload=f"contents {i}")
    assert wd.state_bytes <= 1080
    for i in range(30):  # 36 distinct answers in one turn: the later slots of both
        wd.observe_call("read_file", json.dumps({"path": f"src/pkg/n{i}.py"}))
        wd.observe_result("read_file", payload=f"other {i}")
    grown = wd.state_bytes
    assert grown >= fresh + 64 * 18 - 8 * 18 + 64 * 8 - 8 * 8
    wd.turn_boundary()  # the turn's answers go; the window of answered calls stays
    assert wd.state_bytes == grown - (64 - 8) * 18
    wd.observe_result("read_file", error="FileNotFoundError: src/x.py")
    assert wd.state_bytes == grown - (64 - 8) * 18 + 8 * 16  # the failure pairs


def test_native_session_state_is_bounded() -> None:
    """A session's native state is fixed-size rings plus the repeat run's longest spelling:
    1,152 bytes of payload answers (no-new-state), 512 of recycled-calls' window (64 calls'
    32-bit key and answer tags) and 64 of its pending calls, 216 of call ring, ~670 of
    detectors and settings (SPEC §12.4's unknown-tool, repeated-text, empty-responses and
    compaction-storm: 67 of them). It must not grow with the session."""
    native = pytest.importorskip("tripwire._native")
    wd = Watchdog(implementation="native")
    fresh = wd.state_bytes
    for i in range(200):
        wd.observe_call("read_file", json.dumps({"path": f"src/pkg/module_{i % 7}.py"}))
        wd.observe_result("read_file", payload=f"contents {i}")
    assert native is not None
    assert fresh <= wd.state_bytes <= 2755
    for i in range(2000):
        wd.observe_call("grep", json.dumps({"pattern": f"p{i % 50}"}))
        wd.observe_result("grep", payload=f"{i % 7}")
    assert wd.state_bytes <= 2755
