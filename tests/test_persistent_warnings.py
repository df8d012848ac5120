"""persistent-warnings (issue 39): warn alerts that keep coming back with no new answer between
them escalate to one critical of their own. Both engines, exact events; one event at a time,
through ``Guardrails`` and through a batch; the recorded sessions that went on to submit never
trip it."""

from __future__ import annotations

import io
import json
from typing import Any

import pytest
from conftest import need_shared

from tripwire import Guardrails, GuardrailsConfig, Watchdog, WatchdogConfig
from tripwire.cli.main import main
from tripwire.fleet.fleet import Fleet
from tripwire.interchange.events import parse_event
from tripwire.signals import BY_ID

PERSIST = "persistent-warnings"


LAPS = iter(range(10**6))  # a fresh number per lap: no two laps make the same call


def lap(wd: Watchdog, error: str = "FAILED test_parse: AssertionError",
        payload: str = "<returncode>0</returncode>") -> list[tuple[int, str, str]]:
    """One lap of a fix-and-test loop that gets nowhere: an edit (a new one each lap, a
    success answering ``payload``), then three test runs (each its own command) failing with
    the same error (repeated-failure warns at the third). No call repeats: the repeat, cycle
    and density detectors have nothing to see."""
    n = next(LAPS)
    got = [(wd.events - 1, a.signal, a.severity) for a in wd.observe_call(
        "bash", json.dumps({"command": f"sed -i 's/limit = .*/limit = {n}/' parse.py"}))]
    got += [(wd.events - 1, a.signal, a.severity)
            for a in wd.observe_result("bash", payload=payload)]
    for k in range(3):
        got += [(wd.events - 1, a.signal, a.severity) for a in wd.observe_call(
            "bash", json.dumps({"command": f"pytest -x tests/test_parse.py::case_{n}_{k}"}))]
        got += [(wd.events - 1, a.signal, a.severity)
                for a in wd.observe_result("bash", error=error)]
    return got


def test_the_fourth_warning_with_nothing_new_is_critical(implementation: str) -> None:
    wd = Watchdog(WatchdogConfig(), implementation=implementation)
    got = [alert for _ in range(6) for alert in lap(wd)]
    # lap 1's edit answers something new (progress); from lap 2 on nothing is new:
    # repeated-failure warns at each lap's third failure (7, 15, 23, ...), tools-without-text
    # at the 12th call (22), and the fourth warning since the last new answer is critical
    assert got == [
        (7, "repeated-failure", "warn"),
        (15, "repeated-failure", "warn"),
        (22, "tools-without-text", "warn"),
        (23, "repeated-failure", "warn"), (23, PERSIST, "critical"),
        (31, "repeated-failure", "warn"),
        (39, "repeated-failure", "warn"),
        (47, "repeated-failure", "warn"),
    ]
    assert wd.persistent_warnings[0] == 7  # it trips once; the count goes on


def test_its_texts_name_the_warnings_and_what_to_do(implementation: str) -> None:
    wd = Watchdog(WatchdogConfig(), implementation=implementation)
    for _ in range(2):
        lap(wd)
    wd.observe_call("bash", '{"command": "sed -i s/a/b/ parse.py"}')
    wd.observe_result("bash", payload="<returncode>0</returncode>")
    for k in range(3):
        wd.observe_call("bash", json.dumps({"command": f"pytest -k last_{k}"}))
        alerts = wd.observe_result("bash", error="FAILED test_parse: AssertionError")
    warn, alert = alerts
    assert (warn.signal, alert.signal, alert.severity, alert.scope, alert.count) == (
        "repeated-failure", PERSIST, "critical", "session", 4)
    assert alert.reason.startswith(
        "4 warnings (tools-without-text, repeated-failure) with no new tool result between")
    assert "take one different step" in alert.guidance


def test_a_new_answer_between_the_warnings_is_progress(implementation: str) -> None:
    wd = Watchdog(WatchdogConfig(), implementation=implementation)
    # each lap's edit answers something new: the warnings never pile up
    got = [alert for n in range(8) for alert in lap(wd, payload=f"patched line {n}")]
    assert [a for a in got if a[1] != "repeated-failure"] == [(22, "tools-without-text", "warn")]
    assert len(got) == 9
    assert wd.persistent_warnings == (1, 1 << 8)  # the last lap's warning alone


def test_several_warn_signals_over_a_stretch_with_nothing_new(implementation: str) -> None:
    wd = Watchdog(WatchdogConfig(), implementation=implementation)
    got: list[tuple[int, str]] = []

    def note(alerts: Any) -> None:
        got.extend((wd.events - 1, a.signal) for a in alerts)

    note(wd.observe_result("read_file", payload="the same output"))  # new once (event 0)
    for n in range(6):  # no-new-state at the sixth already-seen payload (event 12)
        note(wd.observe_call("grep", json.dumps({"pattern": f"parse{n}"})))
        note(wd.observe_result("grep", payload="the same output"))
    for _ in range(3):  # repeated-text at the third same message (event 15)
        note(wd.observe_text("Let me look at the parser again."))
    # tool-failure-streak at the third failure, three different errors (event 21)
    for error in ("disk full", "permission denied", "connection refused"):
        note(wd.observe_call("bash", json.dumps({"command": f"make '{error}'"})))
        note(wd.observe_result("bash", error=error))
    note(wd.observe_call("bash", '{"command": "make"}'))
    note(wd.observe_result("bash", payload="the same output"))  # a success, nothing new
    # the streak, re-armed by it, warns again (event 29)
    for error in ("no such file", "segmentation fault", "killed"):
        note(wd.observe_call("bash", json.dumps({"command": f"make '{error}'"})))
        note(wd.observe_result("bash", error=error))
    assert got == [(12, "no-new-state"), (15, "repeated-text"), (21, "tool-failure-streak"),
                   (29, "tool-failure-streak"), (29, PERSIST)]
    assert wd.persistent_warnings == (4, BY_ID["no-new-state"].bit | BY_ID["repeated-text"].bit
                                      | BY_ID["tool-failure-streak"].bit)


def test_text_changing_topic_is_not_progress(implementation: str) -> None:
    wd = Watchdog(WatchdogConfig(), implementation=implementation)
    got = []
    for n in range(4):
        got += [a[1] for a in lap(wd)]
        got += [a.signal for a in wd.observe_text(f"Attempt {n}: trying another angle.")]
    # words between the laps (so no tools-without-text): the fourth repeated-failure since
    # lap 1's new answer is the fourth warning
    assert got == ["repeated-failure"] * 4 + [PERSIST]


def test_a_promoted_warning_is_not_counted_and_disabled_is_silent(implementation: str) -> None:
    promoted = WatchdogConfig(signals={"repeated-failure": {"severity": "critical"},
                                       "tools-without-text": {"enabled": False}})
    wd = Watchdog(promoted, implementation=implementation)
    got = [a for _ in range(8) for a in lap(wd)]
    # the critical failures are not counted; the one warning (no-new-state: the sixth edit
    # since the first answering what the first did, event 49) is
    criticals = [(7 + 8 * n, "repeated-failure", "critical") for n in range(8)]
    assert got == [*criticals[:6], (49, "no-new-state", "warn"), *criticals[6:]]
    assert wd.persistent_warnings == (1, BY_ID["no-new-state"].bit)
    off = WatchdogConfig(signals={PERSIST: {"enabled": False}})
    wd = Watchdog(off, implementation=implementation)
    got = [a for _ in range(8) for a in lap(wd)]
    rf, quiet, seen = "repeated-failure", "tools-without-text", "no-new-state"
    assert [(e, signal) for e, signal, _ in got] == [  # the warnings themselves unchanged
        (7, rf), (15, rf), (22, quiet), (23, rf), (31, rf), (39, rf), (47, rf), (49, seen),
        (55, rf), (63, rf)]


def test_turns_do_not_clear_it_a_reset_does(implementation: str) -> None:
    wd = Watchdog(WatchdogConfig(), implementation=implementation)
    got = []
    for n in range(4):
        wd.count_event()
        wd.turn_boundary()
        got += [a[1] for a in lap(wd)]
        got += [a.signal for a in wd.observe_text(f"Turn {n} done: still failing.")]
    # each turn's first edit answer is new to that turn's seen-set: progress every turn
    assert got == ["repeated-failure"] * 4
    wd = Watchdog(WatchdogConfig(), implementation=implementation)
    got = []
    for _ in range(4):
        wd.count_event()
        wd.turn_boundary()  # repeated-text re-arms at each turn; nothing new in any of them
        for _ in range(3):
            got += [(wd.events - 1, a.signal) for a in wd.observe_text("Let me try again.")]
    assert got == [(3, "repeated-text"), (7, "repeated-text"), (11, "repeated-text"),
                   (15, "repeated-text"), (15, PERSIST)]
    wd.reset()
    assert wd.persistent_warnings == (0, 0)


def test_it_halts_the_session_under_enforce(implementation: str) -> None:
    g = Guardrails(GuardrailsConfig(mode="enforce", unattended=True), session_id="p",
                   implementation=implementation)
    g.start_turn()
    decisions = []
    for n in range(6):
        calls = [(f"e{n}", f"sed -i 's/limit = .*/limit = {n}/' parse.py")] + [
            (f"t{n}-{k}", f"pytest -x tests/test_parse.py::case_{n}_{k}") for k in range(3)]
        for call_id, command in calls:
            d = g.on_call("bash", json.dumps({"command": command}), id=call_id)
            if d.action == "continue":
                d = (g.on_result(id=call_id, payload="<returncode>0</returncode>")
                     if call_id.startswith("e") else
                     g.on_result(id=call_id, error="FAILED test_parse: AssertionError"))
            decisions.append(d)
            if d.action != "continue":
                break
        if decisions[-1].action != "continue":
            break
    d = decisions[-1]
    assert len(decisions) == 4 * 2 + 4  # the third lap's last result (the 4th warning)
    assert d.action == "halt_session" and d.guardrail == "watchdog"
    assert [a.signal for a in d.alerts] == ["repeated-failure", PERSIST]
    assert g.status().halted


# -- vectors: the conformance data's shape, one at a time and in a batch ---------------------

def _lap_events(n: int, payload: str) -> list[dict[str, Any]]:
    """``lap``'s events as interchange records (ids for the results)."""
    events: list[dict[str, Any]] = [
        {"type": "call", "name": "bash", "id": f"e{n}",
         "args": {"command": f"sed -i 's/limit = .*/limit = {n}/' parse.py"}},
        {"type": "result", "id": f"e{n}", "payload": payload}]
    for k in range(3):
        events += [{"type": "call", "name": "bash", "id": f"t{n}-{k}",
                    "args": {"command": f"pytest -x tests/test_parse.py::case_{n}_{k}"}},
                   {"type": "result", "id": f"t{n}-{k}",
                    "error": "FAILED test_parse: AssertionError"}]
    return events


VECTORS: list[dict[str, Any]] = [
    {"name": "fix-and-test-nothing-new",
     "events": [{"type": "turn_start"}] + [
         e for n in range(5) for e in _lap_events(n, "<returncode>0</returncode>")],
     # the watchdog's events plus one: the turn_start is event 0
     "expect": [(8, "repeated-failure", "warn"), (16, "repeated-failure", "warn"),
                (23, "tools-without-text", "warn"),
                (24, "repeated-failure", "warn"), (24, PERSIST, "critical"),
                (32, "repeated-failure", "warn"), (40, "repeated-failure", "warn")]},
    {"name": "fix-and-test-each-edit-new",
     "events": [{"type": "turn_start"}] + [
         e for n in range(5) for e in _lap_events(n, f"patched line {n}")],
     "expect": [(8, "repeated-failure", "warn"), (16, "repeated-failure", "warn"),
                (23, "tools-without-text", "warn"), (24, "repeated-failure", "warn"),
                (32, "repeated-failure", "warn"), (40, "repeated-failure", "warn")]},
]


def _guardrails_alerts(implementation: str, events: list[dict[str, Any]],
                       ) -> list[tuple[int, str, str]]:
    g = Guardrails(GuardrailsConfig(mode="warn"), session_id="v", implementation=implementation)
    got = []
    for i, record in enumerate(events):
        e = parse_event(record)
        kind = record["type"]
        if kind == "turn_start":
            g.start_turn()
            continue
        d = (g.on_call(e.name, e.args, id=e.id) if kind == "call" else
             g.on_result(e.name, id=e.id, error=e.error, payload=e.payload))
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


# -- the recorded sessions -------------------------------------------------------------------

def _corpus_lines(implementation: str, *paths: str) -> list[dict[str, Any]]:
    out, err = io.StringIO(), io.StringIO()
    code = main(["corpus", "stats", *paths, "--json", "-j", "2", "--implementation",
                 implementation], out=out, err=err)
    assert code == 0, err.getvalue()
    return [json.loads(line) for line in out.getvalue().splitlines()]


def test_no_recorded_session_that_submitted_trips_it(implementation: str) -> None:
    corpus = need_shared("corpus")
    samples = need_shared("format-samples")
    paths = [str(p) for p in sorted(corpus.iterdir()) if p.is_dir()]
    paths += [str(p) for p in sorted(samples.iterdir()) if p.is_dir() and any(
        q.is_file() and q.name != "README.md" for q in p.rglob("*"))]
    lines = _corpus_lines(implementation, *paths)
    sessions = [line for line in lines if line["kind"] == "session"]
    summary = lines[-1]
    assert len(sessions) >= 491
    tripped = [s["session"] for s in sessions if s["first_trip"][PERSIST] is not None]
    assert tripped == []
    # the statistic: the most warn alerts any session got with no new answer between
    stat = summary["signals"][PERSIST]
    assert (stat["threshold"], stat["max"], stat["trips"]) == (4, 2, 0)
    assert stat["margin"] == 2
