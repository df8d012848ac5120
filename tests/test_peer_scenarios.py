"""Where tripwire disagreed with other detectors' scenario tests (issue 39), decided: a cycle
whose laps bring new answers is progress; work between compactions is no storm; a transport
retry takes back the calls of the attempt it replaces. Both engines, exact events."""

from __future__ import annotations

import io
import json
from pathlib import Path
from typing import Any

import pytest

from tripwire import Guardrails, GuardrailsConfig, Watchdog, WatchdogConfig
from tripwire.cli.main import main
from tripwire.errors import InvalidEvent
from tripwire.interchange.events import Retry, event_record, parse_event
from tripwire.session.dispatch import observe, observe_event


def only(*ids: str) -> WatchdogConfig:
    return WatchdogConfig(only=frozenset(ids))


def replay(wd: Watchdog, trace: list[tuple[Any, ...]]) -> list[tuple[int, str]]:
    """(event, signal) of every alert. ("call", name, args), ("result", name, payload),
    ("compaction",), ("turn_start",) (an event, then the turn boundary)."""
    got = []
    for index, e in enumerate(trace):
        if e[0] == "call":
            alerts = wd.observe_call(e[1], e[2])
        elif e[0] == "result":
            alerts = wd.observe_result(e[1], payload=e[2])
        elif e[0] == "compaction":
            alerts = wd.observe_compaction()
        else:
            wd.count_event()
            wd.turn_boundary()
            alerts = ()
        for a in alerts:
            assert a.event == index
            got.append((index, a.signal))
    return got


EDIT = ("call", "edit_file", '{"path": "parser.py", "patch": "fix"}')
TEST = ("call", "bash", '{"command": "pytest -q tests/test_parser.py"}')


def ping_pong(laps: int, edit_out: Any, test_out: Any) -> list[tuple[Any, ...]]:
    """An edit / test ping-pong with identical calls each lap; edit_out(k), test_out(k): the
    results of lap k (None: no result)."""
    trace: list[tuple[Any, ...]] = []
    for k in range(laps):
        for call, out in ((EDIT, edit_out(k)), (TEST, test_out(k))):
            trace.append(call)
            if out is not None:
                trace.append(("result", call[1], out))
    return trace


# -- alternating-tool-cycle reads the answers ----------------------------------------------


def test_a_ping_pong_whose_answers_progress_is_no_cycle(implementation: str) -> None:
    # each lap a new revision and a changing test count: progress however long it goes on
    trace = ping_pong(10, lambda k: f"revision {k} written", lambda k: f"{9 - k} failed")
    wd = Watchdog(only("alternating-tool-cycle"), implementation=implementation)
    assert replay(wd, trace) == []
    # only the test output changes: still a new answer each lap
    trace = ping_pong(10, lambda k: "written", lambda k: f"{9 - k} failed, {k} passed")
    assert replay(Watchdog(only("alternating-tool-cycle"), implementation=implementation),
                  trace) == []


def test_a_ping_pong_whose_answers_repeat_trips_at_the_sixth_call(implementation: str) -> None:
    trace = ping_pong(3, lambda k: "written", lambda k: "3 failed")
    wd = Watchdog(only("alternating-tool-cycle"), implementation=implementation)
    assert replay(wd, trace) == [(10, "alternating-tool-cycle")]  # the sixth call
    # a toggle between two answers: the second is new once (event 7), then two laps of calls
    # bring nothing new: the call at event 14
    trace = ping_pong(4, lambda k: "written", lambda k: ("on", "off")[k % 2])
    assert replay(Watchdog(only("alternating-tool-cycle"), implementation=implementation),
                  trace) == [(14, "alternating-tool-cycle")]


def test_calls_without_results_trip_as_before(implementation: str) -> None:
    trace = ping_pong(3, lambda k: None, lambda k: None)
    wd = Watchdog(only("alternating-tool-cycle"), implementation=implementation)
    assert replay(wd, trace) == [(5, "alternating-tool-cycle")]


def test_a_cycle_trips_two_laps_after_its_answers_stop_changing(implementation: str) -> None:
    # the test count falls for three laps, then stays: the last new answer is event 11; the
    # cycle trips when two full laps of calls (4) came after it: the call at event 18
    trace = ping_pong(6, lambda k: "written", lambda k: f"{max(3 - k, 1)} failed")
    wd = Watchdog(only("alternating-tool-cycle"), implementation=implementation)
    assert replay(wd, trace) == [(18, "alternating-tool-cycle")]
    assert wd.cycle_period == 2


def test_the_cycle_statistic_counts_laps_without_new_answers(implementation: str) -> None:
    wd = Watchdog(only("alternating-tool-cycle"), implementation=implementation)
    wd.enable_stats()
    replay(wd, ping_pong(10, lambda k: "written", lambda k: f"{9 - k} failed"))
    # a lap counts before its results arrive; the next lap's new answer takes it back
    assert wd.stats is not None and wd.stats[1] == 2
    wd = Watchdog(only("alternating-tool-cycle"), implementation=implementation)
    wd.enable_stats()
    replay(wd, ping_pong(5, lambda k: "written", lambda k: "3 failed"))
    assert wd.stats is not None and wd.stats[1] == 5


# -- compaction-storm: work between compactions ----------------------------------------------


def test_a_long_turn_working_between_compactions_is_no_storm(implementation: str) -> None:
    trace: list[tuple[Any, ...]] = [("turn_start",)]
    for i in range(10):
        trace += [("compaction",), ("call", "read_file", f'{{"path": "m{i}.py"}}'),
                  ("result", "read_file", f"module {i}")]
    assert replay(Watchdog(implementation=implementation), trace) == []


def test_compactions_with_nothing_between_trip_at_the_third(implementation: str) -> None:
    trace = [("turn_start",)] + [("compaction",)] * 10
    assert replay(Watchdog(only("compaction-storm"), implementation=implementation),
                  trace) == [(3, "compaction-storm")]


def test_re_reading_what_the_turn_saw_is_no_work(implementation: str) -> None:
    read = ("call", "read_file", '{"path": "big.log"}')
    trace: list[tuple[Any, ...]] = [("turn_start",), read, ("result", "read_file", "log")]
    for _ in range(3):
        trace += [("compaction",), read, ("result", "read_file", "log")]
    assert replay(Watchdog(only("compaction-storm"), implementation=implementation),
                  trace) == [(9, "compaction-storm")]


def test_a_storm_after_work_trips_and_work_re_arms_it(implementation: str) -> None:
    work = [("call", "read_file", '{"path": "a.py"}'), ("result", "read_file", "a")]
    more = [("call", "read_file", '{"path": "b.py"}'), ("result", "read_file", "b")]
    trace = [("turn_start",), *work, *[("compaction",)] * 3, *more, *[("compaction",)] * 3]
    assert replay(Watchdog(only("compaction-storm"), implementation=implementation),
                  trace) == [(5, "compaction-storm"), (10, "compaction-storm")]


# -- a transport retry takes back the replaced attempt's calls --------------------------------

READ = ("read_file", '{"path": "src/a.py"}')


def test_four_calls_retried_are_not_eight(implementation: str) -> None:
    g = Guardrails(GuardrailsConfig(mode="enforce"), implementation=implementation)
    g.start_turn()
    assert all(g.on_call(*READ, id=f"a{i}").proceed for i in range(4))
    assert g.on_retry("stream reset").proceed  # the attempt's 4 calls never ran
    assert all(g.on_call(*READ, id=f"b{i}").proceed for i in range(4))
    assert g.watchdog is not None and g.watchdog.repeat_run == 4
    # the fifth identical call that ran is the fifth in a row
    assert g.on_call(*READ, id="b4").halt_session


def test_without_the_retraction_the_retry_doubles_them(implementation: str) -> None:
    g = Guardrails(GuardrailsConfig(mode="enforce"), implementation=implementation)
    g.start_turn()
    for i in range(4):
        g.on_call(*READ, id=f"a{i}")
    g.on_retry("stream reset", calls=0)  # the host says the attempt streamed no call
    assert g.on_call(*READ, id="b0").halt_session


def test_the_attempt_is_the_calls_since_the_last_result_or_response(implementation: str) -> None:
    wd_of = Guardrails(GuardrailsConfig(), implementation=implementation)
    wd_of.start_turn()
    wd_of.on_call(*READ, id="r0")
    wd_of.on_result("read_file", id="r0", payload="a")
    for i in range(3):
        wd_of.on_call("grep", f'{{"q": "x{i}"}}', id=f"g{i}")
    wd = wd_of.watchdog
    assert wd is not None and (wd.attempt_calls, wd.silent_calls) == (3, 4)
    wd_of.on_retry("overloaded")
    assert (wd.attempt_calls, wd.silent_calls, wd.repeat_run) == (0, 1, 0)
    # a completed model response ends the attempt: its calls are no retry's
    wd_of.on_call(*READ, id="r1")
    wd_of.on_usage(model="claude-sonnet-4", input_tokens=10, output_tokens=5, cost_usd=0.0)
    assert wd.attempt_calls == 0
    wd_of.on_retry("overloaded")
    assert wd.silent_calls == 2


def test_an_explicit_count_and_its_checks(implementation: str) -> None:
    g = Guardrails(GuardrailsConfig(), implementation=implementation)
    g.start_turn()
    for i in range(5):
        g.on_call(*READ, id=f"a{i}")
    g.on_retry("reset", calls=2)
    assert g.watchdog is not None and g.watchdog.repeat_run == 3
    for bad in (-1, True, 1.5, "2"):
        with pytest.raises(InvalidEvent):
            g.on_retry("reset", calls=bad)  # type: ignore[arg-type]


def test_the_interchange_retry_carries_calls() -> None:
    assert parse_event({"type": "retry", "reason": "503"}) == Retry("503")
    event = parse_event({"type": "retry", "reason": "503", "calls": 4})
    assert event == Retry("503", 4)
    assert event_record(event) == {"type": "retry", "reason": "503", "calls": 4}
    for bad in (-1, True, 1.5, "4"):
        with pytest.raises(InvalidEvent):
            parse_event({"type": "retry", "calls": bad})


def test_the_dispatcher_row_and_event_retract_alike(implementation: str) -> None:
    for apply in (lambda g: observe(g, "retry", "reset"),
                  lambda g: observe_event(g, Retry("reset"))):
        g = Guardrails(GuardrailsConfig(), implementation=implementation)
        g.start_turn()
        for i in range(4):
            g.on_call(*READ, id=f"a{i}")
        apply(g)
        assert g.watchdog is not None and g.watchdog.repeat_run == 0


def _retried(path: Path, retry: dict[str, Any] | None) -> Path:
    calls = [{"type": "call", "name": READ[0], "args": {"path": "src/a.py"}}] * 4
    events = [{"type": "turn_start"}, *calls, *([retry] if retry else []), *calls]
    path.write_text("".join(json.dumps(e) + "\n" for e in events))
    return path


def test_replay_takes_a_retried_attempt_back(tmp_path: Path, implementation: str) -> None:
    out = io.StringIO()
    code = main(["replay", str(_retried(tmp_path / "r.jsonl", {"type": "retry"})),
                 "--implementation", implementation], out=out, err=io.StringIO())
    alerts = [r for r in map(json.loads, out.getvalue().splitlines()) if r["kind"] == "alert"]
    assert code == 0 and alerts == []
    out = io.StringIO()
    main(["replay", str(_retried(tmp_path / "n.jsonl", None)), "--implementation",
          implementation], out=out, err=io.StringIO())
    alerts = [r for r in map(json.loads, out.getvalue().splitlines()) if r["kind"] == "alert"]
    assert [(a["event"], a["signal"]) for a in alerts] == [(5, "repeated-tool-call")]


def test_corpus_stats_take_a_retried_attempt_back(tmp_path: Path, implementation: str) -> None:
    pytest.importorskip("numpy", reason="tripwire corpus needs the corpus extra (numpy)")
    from tripwire.corpus.measure import NEVER, measure_paths

    path = _retried(tmp_path / "r.jsonl", {"type": "retry", "reason": "503"})
    measured = measure_paths([str(path)], implementation=implementation)
    assert [int(row[0]) for row in measured.stats] == [4]  # the repeat run's peak
    assert int(measured.first_trip[0][0]) == NEVER  # and it never trips


# -- durations under duration keys and counter-like ids are volatile in answers ---------------

P = b"\x1a"
SCANNED = [
    (b'{"exitCode": 1, "durationMs": 101}', b'{"exitCode": 1, "durationMs": ' + P + b'}'),
    (b'{"elapsed": -0.25, "took_ms": 12, "latencyMS": 5 }',
     b'{"elapsed": ' + P + b', "took_ms": ' + P + b', "latencyMS": ' + P + b' }'),
    (b'{"timeout_seconds": 30}', b'{"timeout_seconds": ' + P + b'}'),
    (b'{"session_id": "sess-7", "runId": "run_12", "id": "om_3"}',
     b'{"session_id": "sess-' + P + b'", "runId": "run_' + P + b'", "id": "om_' + P + b'"}'),
    # not durations: counts, no duration word; not ids: bare numbers, other keys, prose
    (b'{"items": 3, "times": 3, "id": 17, "name": "om_3"}', None),
    (b"test_12 failed on page-3", None),
    (b'{"durationMs": 1e5}', None),  # an exponent: not read
    (b'{"a\\"durationMs": 5}', None),  # an escaped quote: not a key
]


@pytest.mark.parametrize(("payload", "expected"), SCANNED)
def test_the_scanner_twins_agree_on_the_json_classes(implementation: str, payload: bytes,
                                                     expected: bytes | None) -> None:
    from tripwire.engine.select import load
    from tripwire.identity.answer import scan

    engine = load(implementation)
    assert scan(payload) == expected
    assert engine.scan_answer(payload) == expected


def _exec_loop(wd: Watchdog, payloads: list[str]) -> list[tuple[int, str]]:
    """The same exec call, the agent saying a word before each: only the results differ."""
    got: list[tuple[int, str]] = []
    for i, payload in enumerate(payloads):
        for alerts in (wd.observe_text(f"Trying again ({i})."),
                       wd.observe_call("exec", '{"command": "make test"}'),
                       wd.observe_result("exec", payload=payload)):
            got += [(a.event, a.signal) for a in alerts]
    return got


def test_an_exec_loop_whose_results_differ_by_duration_trips(implementation: str) -> None:
    runs = [json.dumps({"exitCode": 2, "stdout": "1 failed", "durationMs": 100 + i})
            for i in range(5)]
    wd = Watchdog(implementation=implementation)
    assert _exec_loop(wd, runs) == [(13, "repeated-tool-call")]  # the fifth call
    # one by a counter-like session id: the same
    runs = [json.dumps({"sessionId": f"sess-{i}", "status": "failed"}) for i in range(5)]
    assert _exec_loop(Watchdog(implementation=implementation), runs) == [
        (13, "repeated-tool-call")]
    # real change is still a poll's progress
    runs = [json.dumps({"exitCode": 2, "stdout": f"{5 - i} failed", "durationMs": 100})
            for i in range(5)]
    assert _exec_loop(Watchdog(implementation=implementation), runs) == []


# -- different by design: a second identical pass, read-only git inspections ----------------


def test_a_second_identical_pass_of_fifteen_writes_trips_recycled_calls(
        implementation: str) -> None:
    wd = Watchdog(implementation=implementation)
    got = []
    for _ in range(2):
        for i in range(15):
            for alerts in (wd.observe_call("write_file", f'{{"path": "gen/m{i}.py", "text": "x"}}'),
                           wd.observe_result("write_file", payload="File written")):
                got += [(a.event, a.signal) for a in alerts if a.signal == "recycled-calls"]
    assert got == [(45, "recycled-calls")]  # the 8th result of the second pass


def test_read_only_git_inspections_are_no_stagnation(implementation: str) -> None:
    wd = Watchdog(implementation=implementation)
    got = []
    for k in range(15):
        for alerts in (wd.observe_text(f"Looking at the history ({k})."),
                       wd.observe_call("bash", json.dumps({"command": f"git log -n {k + 1}"})),
                       wd.observe_result("bash", payload=f"commit {k:040x}")):
            got += [(a.event, a.signal) for a in alerts]
    # nothing in eight (or fourteen); the fifteenth call of bash:git in a row is a warning
    assert got == [(43, "repeated-tool-name")]


def test_serve_takes_a_retried_attempt_back(implementation: str) -> None:
    pytest.importorskip("starlette", reason="tripwire serve needs the serve extra (starlette)")
    pytest.importorskip("httpx", reason="the serve tests talk HTTP with httpx")
    from starlette.testclient import TestClient

    from tripwire.cli.serve import create_app
    from tripwire.fleet.fleet import Fleet

    config = GuardrailsConfig(mode="enforce", unattended=False)
    client = TestClient(create_app(Fleet(config, implementation=implementation), "t0ken"))
    auth = {"Authorization": "Bearer t0ken"}
    calls = [{"type": "call", "name": READ[0], "args": {"path": "src/a.py"}}] * 4
    events = [{"type": "turn_start"}, *calls, {"type": "retry", "reason": "503"}, *calls]
    r = client.post("/sessions/retried/events", json=events, headers=auth)
    assert r.status_code == 200, r.text
    assert r.json()["decisions"] == []
    r = client.post("/sessions/doubled/events", json=[events[0], *calls, *calls], headers=auth)
    halt = r.json()["decisions"][0]  # then each later call, refused by the halt
    assert (halt["event"], halt["action"]) == (5, "halt_session")
