"""repeated-failure (SPEC §7.3): the same tool failing with the same error signature, with no
productive success between. Conformance-style scenarios on both engines (the exact event that
trips, the exact alert fields), the error signature of both engines compared (a table and
hypothesis), and the promotion to a turn-scoped critical under enforce."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tripwire import Guardrails, GuardrailsConfig, Watchdog, WatchdogConfig
from tripwire.engine import reference as _reference
from tripwire.errors import ConfigError
from tripwire.signals import BY_ID
from tripwire.signals.repeated_failure import error_bytes, error_signature, signature_key

native = pytest.importorskip("tripwire._native", reason="the native core is not built")

ONLY = WatchdogConfig(only=frozenset({"repeated-failure"}))
MISSING = "ModuleNotFoundError: No module named 'requests'"


def run(implementation: str, events: list[tuple], config: WatchdogConfig = ONLY,
        ) -> list[tuple[int, str, str, str | None]]:
    """(event, signal, severity, scope) of every alert, and the watchdog for its texts."""
    wd = Watchdog(config, implementation=implementation)
    got = []
    for index, e in enumerate(events):
        if e[0] == "call":
            alerts = wd.observe_call(e[1], e[2])
        elif e[0] == "result":
            alerts = wd.observe_result(e[1], error=e[2], no_op=e[3] if len(e) > 3 else False,
                                       payload=e[4] if len(e) > 4 else "ok")
        elif e[0] == "text":
            alerts = wd.observe_text(e[1])
        elif e[0] == "turn_end":
            alerts = wd.end_turn()
        else:
            alerts = wd.reset()
        for a in alerts:
            assert a.event == index
            got.append(a)
    return got  # type: ignore[return-value]


def bash(command: str) -> tuple:
    return ("call", "bash", {"command": command})


def fail(error: Any, name: str = "bash") -> tuple:
    return ("result", name, error)


def ok(payload: str = "ok", name: str = "bash") -> tuple:
    return ("result", name, None, False, payload)


# -- scenarios ---------------------------------------------------------------------------------


def test_respelled_commands_with_one_error_trip_at_the_third_failure(implementation: str) -> None:
    # the seed's case: the test run three ways, the same missing-dependency error each time
    events = [bash("pytest tests/test_api.py"), fail(MISSING),
              bash("python -m pytest tests/test_api.py"), fail(MISSING),
              bash("python3 -m pytest -x tests/test_api.py"), fail(MISSING)]
    alerts = run(implementation, events)
    assert [(a.event, a.signal, a.severity, a.scope) for a in alerts] == [
        (5, "repeated-failure", "warn", None)]
    a = alerts[0]
    assert a.tool == "bash" and a.count == 3
    assert a.reason == (
        "bash failed 3 times with the same error and no successful change in between, however "
        "the calls were spelled: the agent is retrying an unchanged failure. Error: "
        f"{MISSING}")
    assert a.guidance == (
        f"bash has now failed 3 times with the same error, and nothing changed in between: "
        f"{MISSING}. Running it again, even spelled differently, will fail the same way. Find "
        "out why it fails (the environment, a missing dependency, the input) and change that "
        "before you run it again, or say what is blocking you.")
    for text in (a.reason, a.guidance):
        assert "/guardrail" not in text and "reset" not in text


def test_polling_with_changing_successful_output_stays_quiet(implementation: str) -> None:
    events = []
    for i in range(11):  # (12 calls without text would be tools-without-text's)
        events += [bash("kubectl get pods"), ok(f"{i} of 11 pods Running")]
    assert run(implementation, events, WatchdogConfig()) == []
    # output that changes only by a timing (the pod's age) is the same answer (SPEC §12.1): a
    # loop, at the fifth call
    events = []
    for i in range(6):
        events += [bash("kubectl get pods"), ok(f"pod-a 0/1 Pending {i * 2 + 3}s")]
    assert [(a.event, a.signal) for a in run(implementation, events, WatchdogConfig())] == [
        (8, "repeated-tool-call")]


def test_a_poll_that_fails_then_succeeds_is_rearmed_each_time(implementation: str) -> None:
    # fail, fail, success: never three; the success clears the count
    events = [fail("connection refused"), fail("connection refused"), ok("up"),
              fail("connection refused"), fail("connection refused"), ok("up")] * 3
    assert run(implementation, events) == []


def test_alternating_two_errors_trip_once_per_error(implementation: str) -> None:
    # A, B, A, B, A, B: A's third failure is the fifth result, B's third the sixth; the count is
    # per (tool, signature) since the last success, not a run, and each pair alerts once
    a_err, b_err = "E: lockfile is held", "E: network unreachable"
    events = [fail(a_err), fail(b_err)] * 4
    alerts = run(implementation, events)
    assert [(x.event, x.signal) for x in alerts] == [(4, "repeated-failure"),
                                                     (5, "repeated-failure")]
    assert a_err in alerts[0].guidance and b_err in alerts[1].guidance
    # a productive success re-arms both
    alerts = run(implementation, events + [ok()] + events)
    assert [x.event for x in alerts] == [4, 5, 13, 14]


@pytest.mark.parametrize("errors", [
    # only a timestamp differs
    ["2026-12-03T14:11:20.123Z ERROR could not reach db", "2026-12-03T14:12:01.907Z ERROR "
     "could not reach db", "2026-12-04T09:00:00.000Z ERROR could not reach db"],
    # only a temporary path differs: pytest's numbered basetemp, a mkdtemp component (the
    # temporary root stays: /tmp/X and /var/folders/../T/X are two signatures, SPEC §12.1)
    ["FileNotFoundError: /tmp/pytest-of-ci/pytest-41/test_load0/config.yaml",
     "FileNotFoundError: /tmp/pytest-of-ci/pytest-42/test_load0/config.yaml",
     "FileNotFoundError: /tmp/pytest-of-ci/pytest-107/test_load0/config.yaml"],
    ["OSError: /var/folders/x7/k2_9/T/tmpq1w2e3/config.yaml is locked",
     "OSError: /var/folders/x7/k2_9/T/tmpa8b7c6/config.yaml is locked",
     "OSError: /var/folders/x7/k2_9/T/tmp_0zz41/config.yaml is locked"],
    # line numbers, pids, hex ids, whitespace layout
    ["Traceback: app.py:41:7 in main (pid 4242, req 7f3a9c0e)",
     "Traceback: app.py:57:12  in main (pid 99, req 0x1f2e)",
     "Traceback:\tapp.py:3:1 in main\n(pid 1, req 550e8400-e29b-41d4-a716-446655440000)"],
])
def test_errors_differing_only_by_volatile_parts_are_one_signature(
    implementation: str, errors: list[str]
) -> None:
    events = [fail(e, "run_tests") for e in errors]
    alerts = run(implementation, events)
    assert [(a.event, a.signal, a.tool) for a in alerts] == [(2, "repeated-failure", "run_tests")]
    assert errors[2].split()[0] in alerts[0].reason  # the tripping result's own text is quoted


def test_different_errors_tools_and_exempt_tools_do_not_count(implementation: str) -> None:
    events = [fail("E1 missing"), fail("E1 missing", "grep"), fail("E2 other"),
              fail("E1 missing"), fail("E1 missing", "wait_and_verify"),
              fail("E1 missing", "wait_and_verify"), fail("E1 missing", "wait_and_verify")]
    assert run(implementation, events) == []
    # the third bash E1 trips; the exempt tool's results between neither counted nor cleared
    alerts = run(implementation, events + [ok(name="wait_and_verify"), fail("E1 missing")])
    assert [a.event for a in alerts] == [8]


def test_a_no_op_neither_counts_nor_clears_but_a_success_does(implementation: str) -> None:
    noop = ("result", "bash", None, True, "nothing to do")
    assert [a.event for a in run(implementation, [fail("E"), noop, fail("E"), noop, fail("E")])
            ] == [4]
    assert run(implementation, [fail("E"), fail("E"), ok(), fail("E"), fail("E")]) == []
    # a success without payload is still productive: it clears
    assert run(implementation, [fail("E"), fail("E"), ("result", "bash", None, False, None),
                                fail("E")]) == []


def test_memory_is_session_lived_and_cleared_by_a_reset(implementation: str) -> None:
    assert [a.event for a in run(implementation, [fail("E"), ("turn_end",), fail("E"),
                                                  ("turn_end",), fail("E")])] == [4]
    assert run(implementation, [fail("E"), fail("E"), ("reset",), fail("E"), fail("E")]) == []


def test_one_alert_per_pair_until_a_success(implementation: str) -> None:
    alerts = run(implementation, [fail("E")] * 7 + [ok()] + [fail("E")] * 3)
    assert [a.event for a in alerts] == [2, 10]


def test_the_ninth_pair_forgets_the_least_recently_failed(implementation: str) -> None:
    # E0 fails twice, then eight other errors: E0 is forgotten, so its third failure counts 1
    others = [fail(f"error number {chr(97 + k)}") for k in range(8)]
    assert run(implementation, [fail("E0"), fail("E0")] + others + [fail("E0")]) == []
    # seven others keep E0 in memory
    assert [a.event for a in run(implementation, [fail("E0"), fail("E0")] + others[:7]
                                 + [fail("E0")])] == [9]


def test_structured_and_bare_errors(implementation: str) -> None:
    assert [a.event for a in run(implementation, [fail(True)] * 3)] == [2]
    structured = [fail({"code": 403, "message": "Forbidden", "request": f"r-{i}"})
                  for i in range(3)]
    alerts = run(implementation, structured)
    assert [a.event for a in alerts] == [2]
    assert '"message": "Forbidden"' in alerts[0].guidance


def test_three_identical_failures_are_repeated_failure_alone(implementation: str) -> None:
    """SPEC §12.3: one behaviour, one alert. The failure streak stands down while its last
    three failures are one tool with one error signature (repeated-failure's run), and a streak
    it stood down on counts as reported."""
    def signals(events: list[tuple], config: WatchdogConfig = WatchdogConfig()) -> list:
        return [(a.event, a.signal) for a in run(implementation, events, config)]

    assert signals([fail(MISSING)] * 3) == [(2, "repeated-failure")]
    # spelled with another pid and timing each time: still one signature
    assert signals([fail(f"worker pid {p} crashed after {t}s: {MISSING}")
                    for p, t in ((41, 0.2), (57, 0.3), (63, 1.5))]) == [(2, "repeated-failure")]
    # a streak it stood down on counts as reported: another error later is no new streak
    assert signals([fail("E")] * 3 + [fail("F"), fail("G")]) == [(2, "repeated-failure")]
    # different errors, or two tools: the streak's
    assert signals([fail("E"), fail("F"), fail("E")]) == [(2, "tool-failure-streak")]
    assert signals([fail("E"), fail("E", "grep"), fail("E")]) == [(2, "tool-failure-streak")]
    # the last three decide: F, E, E, E is repeated-failure's at the third E only
    assert signals([fail("F"), fail("E"), fail("E"), fail("E")]) == [
        (2, "tool-failure-streak"), (3, "repeated-failure")]
    # a success re-arms both
    assert signals([fail("E")] * 3 + [ok()] + [fail("E")] * 3) == [
        (2, "repeated-failure"), (6, "repeated-failure")]
    # stand-downs need the detector they defer to (SPEC §10.19): repeated-failure off, or an
    # exempt tool (it does not count those), and the streak alerts
    off = WatchdogConfig(signals={"repeated-failure": {"enabled": False}})
    assert signals([fail("E")] * 3, off) == [(2, "tool-failure-streak")]
    assert signals([fail("E", "wait_and_verify")] * 3) == [(2, "tool-failure-streak")]


def test_threshold_knob_and_alongside_the_failure_streak(implementation: str) -> None:
    config = WatchdogConfig(signals={"repeated-failure": {"threshold": 2}})
    # the second E is repeated-failure's; the streak's three are one error: it stands down
    alerts = run(implementation, [fail("E"), fail("E"), fail("E")], config)
    assert [(a.event, a.signal) for a in alerts] == [(1, "repeated-failure")]
    # a streak of several errors fires alongside, in catalogue order
    alerts = run(implementation, [fail("F"), fail("E"), fail("E")], config)
    assert [(a.event, a.signal) for a in alerts] == [
        (2, "tool-failure-streak"), (2, "repeated-failure")]


# -- promotion ---------------------------------------------------------------------------------


def test_severity_knob_promotes_to_a_turn_scoped_critical(implementation: str) -> None:
    config = WatchdogConfig(signals={"repeated-failure": {"severity": " Critical "}})
    alerts = run(implementation, [fail("E")] * 3, config)
    assert [(a.event, a.signal, a.severity, a.scope) for a in alerts] == [
        (2, "repeated-failure", "critical", "turn")]
    with pytest.raises(ConfigError, match="severity must be one of warn, critical"):
        WatchdogConfig(signals={"repeated-failure": {"severity": "fatal"}})
    with pytest.raises(ConfigError, match="severity must be one of"):
        WatchdogConfig(signals={"repeated-failure": {"severity": 2}})
    with pytest.raises(ConfigError, match="unknown knob 'severity'"):
        WatchdogConfig(signals={"tool-failure-streak": {"severity": "critical"}})


def test_promoted_under_enforce_it_cuts_the_turn_and_escalates(implementation: str) -> None:
    g = Guardrails(GuardrailsConfig(
        mode="enforce", unattended=False,
        watchdog=WatchdogConfig(signals={"repeated-failure": {"severity": "critical"}})),
        session_id="rf", implementation=implementation)
    for turn, expected in enumerate(("cut_turn", "cut_turn", "halt_session")):
        g.start_turn()
        # the memory is session-lived: the productive success re-arms the pair (and the streak)
        g.on_call("bash", {"command": f"ls tests/{turn}"})
        assert g.on_result("bash", payload="tests/").action == "continue"
        g.on_call("bash", {"command": f"pytest -k t{turn}"})
        g.on_result("bash", error=MISSING)
        g.on_call("bash", {"command": f"python -m pytest -k t{turn}"})
        g.on_result("bash", error=MISSING)
        g.on_call("bash", {"command": f"pytest -q -k t{turn}"})
        d = g.on_result("bash", error=MISSING)
        assert d.action == expected and d.guardrail == "watchdog"
        assert [a.signal for a in d.alerts] == ["repeated-failure"]  # one error (SPEC §12.3)
        g.end_turn()
    assert g.halted


def test_default_warn_under_enforce_never_cuts(implementation: str) -> None:
    g = Guardrails(GuardrailsConfig(mode="enforce", unattended=False), session_id="rf",
                   implementation=implementation)
    g.start_turn()
    decisions = [g.on_result("bash", error=MISSING) for _ in range(3)]
    assert [d.action for d in decisions] == ["continue"] * 3
    assert [a.signal for a in decisions[2].alerts] == ["repeated-failure"]


# -- the signature, both engines ---------------------------------------------------------------

# The signature is the answer scanner's signature mode (SPEC §12.1: "the same scan with every
# remaining number removed"): spans and numbers alike become "#". Changed from the normalizer
# it replaced: a timestamp is one span (was "#-#T#:#.#Z"); a temporary path loses only its
# component after the temporary root (was "<tmp>" to the next delimiter), and /dev/shm/ is no
# temporary root (not in SPEC §12.1's list).
SIGNATURES = [
    (b"", b""),
    (b"  \t\n ", b""),
    (b"a  b\n\nc ", b"a b c"),
    (b"line 42", b"line #"),
    (b"pid=4242 port 8080", b"pid=# port #"),
    (b"id 7f3a9c0e and deadbeef", b"id # and deadbeef"),
    (b"addr 0x7ffe12ab 0X1F 0x 0xzz", b"addr # # #x #xzz"),
    (b"2026-12-03T14:11:20.123Z", b"#"),
    (b"2026-12-03 14:11:20", b"#"),
    (b"v1.2.3 py3 utf8", b"v#.# py# utf#"),
    (b"a.py:12:5: E501 W6x", b"a.py:#: # W#x"),  # E501 is a hex word
    (b"at /tmp/pytest-of-ci/pytest-3/x.py:12 end", b"at /tmp/#/pytest-#/x.py:# end"),
    (b"'/var/tmp/abc' (/private/var/folders/x7/k2/T/y) /dev/shm/q",
     b"'/var/tmp/#' (/private/var/folders/x7/k2/T/#) /dev/shm/q"),
    (b"/home/u/tmp/x and x/tmp/y and =/tmp/z", b"/home/u/tmp/x and x/tmp/y and =/tmp/#"),
    (b"/tmpfoo /tmp", b"/tmpfoo /tmp"),
    (b"uuid 550e8400-e29b-41d4-a716-446655440000", b"uuid #"),
    ("caf\u00e9 12 \u00e9t\u00e9".encode(), "caf\u00e9 # \u00e9t\u00e9".encode()),
    (b"\x00/tmp/x\x00y z", b"\x00/tmp/# z"),  # a NUL does not end a component
    (b"\xff\xfe 12", b"\xff\xfe #"),
]


@pytest.mark.parametrize(("raw", "normalized"), SIGNATURES)
def test_signature_table_both_engines(raw: bytes, normalized: bytes) -> None:
    assert error_signature(raw) == normalized
    assert _reference.error_signature(raw) == normalized
    assert native.error_signature(raw) == normalized


_ALPHABET = st.sampled_from(
    list("ab fxXT019:.-/_~=,;'\"()\t\n") + ["/tmp/", "/var/tmp/", "/var/folders/a/b/T/", "0x",
                                              "\u00e9", "\x00", "2026-12-03T14:11:20Z",
                                              "/private/tmp/", "pid ", "bash: line ", "s"])


@settings(max_examples=1500, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(_ALPHABET, max_size=40).map("".join) | st.binary(max_size=64))
def test_native_and_reference_signatures_agree(text: str | bytes) -> None:
    data = text if isinstance(text, bytes) else text.encode("utf-8")
    assert native.error_signature(data) == _reference.error_signature(data)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(st.tuples(st.sampled_from(["bash", "grep"]), st.sampled_from([
    "E 12", "E 13", "F at 10:00:01", "F at 11:02:03", True, {"code": 1}, b"raw 7", "",
    None]), st.booleans()), max_size=30), st.integers(1, 4))
def test_engines_agree_on_random_failure_traces(
    trace: list[tuple[str, Any, bool]], threshold: int
) -> None:
    config = WatchdogConfig(signals={"repeated-failure": {"threshold": threshold}})
    events = [("result", name, error, no_op, "p") for name, error, no_op in trace]

    def facts(impl: str) -> list[tuple]:
        return [(a.event, a.signal, a.reason, a.guidance, a.count)
                for a in run(impl, events, config)]

    assert facts("native") == facts("python")


def test_error_bytes_and_key() -> None:
    assert error_bytes(True) == b""
    assert error_bytes("é") == "é".encode()
    assert error_bytes(b"x") == b"x"
    assert error_bytes({"a": 1}) == b'{"a":1}'
    assert signature_key("pid 1") == signature_key("pid 22")
    assert signature_key("pid 1") != signature_key("uid 1")


def test_spec_entry() -> None:
    spec = BY_ID["repeated-failure"]
    assert (spec.severity, spec.scope, spec.index) == ("warn", None, 8)
    assert WatchdogConfig().engine_settings().repeated_failure_threshold == 3
    assert WatchdogConfig(signals={"repeated-failure": {"threshold": 1}}) \
        .engine_settings().repeated_failure_threshold == 2  # counts below 2 become 2


def test_promotion_from_a_config_file_table() -> None:
    resolved = GuardrailsConfig(file={"signals": {"repeated-failure": {
        "severity": "critical", "threshold": 4}}}).resolve()
    assert resolved.watchdog.value("repeated-failure", "severity") == "critical"
    assert BY_ID["repeated-failure"].graded(resolved.watchdog) == ("critical", "turn")
    assert resolved.watchdog.engine_settings().repeated_failure_threshold == 4
    assert BY_ID["repeated-failure"].graded(WatchdogConfig()) == ("warn", None)
