"""SPEC §10.16–§10.23, decided after the conformance data was written (none of its lines pins
them): each rule, exactly, in both engines."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tripwire import Guardrails, GuardrailsConfig, Watchdog, WatchdogConfig
from tripwire.base.inputs import payload_bytes
from tripwire.engine import select as _engine
from tripwire.interchange.events import Text, read_events


def engine(implementation: str):
    return _engine.load(implementation)


def fired(watchdog: Watchdog, events: list[tuple]) -> list[tuple[int, str]]:
    """(0-based event index, signal) of every alert, feeding (kind, *fields) events."""
    alerts = []
    for index, (kind, *fields) in enumerate(events):
        if kind == "call":
            got = watchdog.observe_call(*fields)
        elif kind == "result":
            name, kw = fields
            got = watchdog.observe_result(name, **kw)
        elif kind == "text":
            got = watchdog.observe_text(*fields)
        else:
            got = watchdog.end_turn()
        alerts += [(index, a.signal) for a in got]
    return alerts


# -- §10.16 containers in path-key arrays are recursed into ------------------------------------


def test_objects_inside_path_arrays_are_recursed_into(implementation: str) -> None:
    key = engine(implementation).canonical_key
    assert key("t", '{"paths":[{"path":"./a"}]}') == key("t", '{"paths":[{"path":"a"}]}')
    assert key("t", '{"files":[{"dir":"x/../b"}, "c"]}') == key("t", '{"files":[{"dir":"b"}, "c"]}')
    # recursed into *normally*: a non-path key inside is not cleaned
    assert key("t", '{"paths":[{"q":"./a"}]}') != key("t", '{"paths":[{"q":"a"}]}')
    spellings = ['{"paths":[{"path":"./a"}]}', '{"paths":[{"path":"a"}]}',
                 '{"paths":[{"path":"x/../a"}]}', '{"paths":[{"path":"a/"}]}',
                 '{"paths":[{"path":"./a"}]}']
    wd = Watchdog(implementation=implementation)
    assert fired(wd, [("call", "read", s) for s in spellings]) == [(4, "repeated-tool-call")]


# -- §10.17 whitespace is exactly str.isspace ----------------------------------------------------

WHITESPACE = [chr(c) for c in range(0x110000) if chr(c).isspace()]


def test_whitespace_is_str_isspace(implementation: str) -> None:
    assert {"\x1c", "\x1d", "\x1e", "\x1f", "\xa0", "\u3000", "\x85"} <= set(WHITESPACE)
    # a text of every whitespace character between the calls never clears the silence run
    wd = Watchdog(implementation=implementation)
    events = []
    for n in range(12):
        events += [("call", "grep", json.dumps({"n": n})), ("text", "".join(WHITESPACE))]
    assert fired(wd, events) == [(22, "tools-without-text")]
    # one character that is not whitespace (U+001B ESC, U+200B zero width space) does
    for visible in ("\x1b", "\u200b"):
        wd = Watchdog(implementation=implementation)
        calls = [("call", "grep" if n % 2 else "glob", json.dumps({"n": n})) for n in range(22)]
        events = [*calls[:11], ("text", f" {visible} "), *calls[11:]]
        assert fired(wd, events) == []


# -- §10.18 skipped results are not remembered ---------------------------------------------------


@pytest.mark.parametrize("skipped", [{"error": "boom"}, {"no_op": True}])
def test_failures_and_no_ops_never_enter_the_seen_set(implementation: str,
                                                      skipped: dict) -> None:
    wd = Watchdog(implementation=implementation)
    events = [("result", "read", {**skipped, "payload": "P"})]
    events += [("result", "read", {"payload": "P"})] * 6
    # the first success reads as new: five seen ones after it stay below the threshold of 6
    assert fired(wd, events) == []
    assert fired(wd, [("result", "read", {"payload": "P"})]) == [(0, "no-new-state")]


# -- §10.19 stand-downs need the detector they defer to ------------------------------------------


def test_without_the_repeat_detector_the_name_detector_never_stands_down(
        implementation: str) -> None:
    calls = [("call", "read_file", '{"path": "a.py"}')] * 15
    with_repeat = Watchdog(implementation=implementation)
    assert fired(with_repeat, calls) == [(4, "repeated-tool-call"), (11, "tools-without-text")]
    config = WatchdogConfig(signals={"repeated-tool-call": {"enabled": False}})
    without = Watchdog(config, implementation=implementation)
    # density still defers to its own explicit defer_run (default 5): silent
    assert fired(without, calls) == [(11, "tools-without-text"), (14, "repeated-tool-name")]
    no_defer = WatchdogConfig(signals={"repeated-tool-call": {"enabled": False},
                                       "dominant-tool-call": {"defer_run": 0,
                                                              "defer_cycle_period": 0}})
    assert fired(Watchdog(no_defer, implementation=implementation), calls) == [
        (7, "dominant-tool-call"), (11, "tools-without-text"), (14, "repeated-tool-name")]


# -- §10.20 a reset of one guardrail -------------------------------------------------------------


@pytest.mark.parametrize("guardrail, fires", [("cost_ceiling", True), ("watchdog", False),
                                              ("all", False)])
def test_a_cost_ceiling_reset_leaves_the_detectors(implementation: str, guardrail: str,
                                                   fires: bool) -> None:
    g = Guardrails(GuardrailsConfig(mode="warn", unattended=False, max_session_cost_usd=5.0),
                   implementation=implementation)
    g.start_turn()
    for _ in range(4):
        g.on_call("read_file", '{"path": "a.py"}')
    g.reset(guardrail)
    decision = g.on_call("read_file", '{"path": "a.py"}')
    assert [a.signal for a in decision.alerts] == (["repeated-tool-call"] if fires else [])


# -- §10.21 payload identity ---------------------------------------------------------------------


def test_a_json_value_payload_is_its_compact_json_text(implementation: str) -> None:
    # both engines digest what _common.payload_bytes gives (the native payload_digest export
    # is gone); the no-new-state run below shows each engine reads it so
    digest = payload_bytes
    assert digest({"a": 1}) == digest('{"a":1}')
    assert digest({"b": 2, "a": [1, "é"]}) == digest('{"b":2,"a":[1,"é"]}')  # order as given
    assert digest({"a": 1}) != digest('{"a": 1}')  # the compact text, not any spelling
    wd = Watchdog(implementation=implementation)
    events = [("result", "read", {"payload": {"b": 2, "a": 1}}),
              *[("result", "read", {"payload": '{"b":2,"a":1}'})] * 6]
    assert fired(wd, events) == [(6, "no-new-state")]


# -- §10.22 JSONL splitting and key words --------------------------------------------------------


def test_jsonl_splits_on_newline_only(tmp_path: Path) -> None:
    inner = "a\u2028b\u2029c\x85d\re"
    line = json.dumps({"type": "text", "text": inner}, ensure_ascii=False)
    path = tmp_path / "s.jsonl"
    path.write_bytes((line + "\r\n" + line + "\n").encode())
    events = [entry.event for entry in read_events(path)]
    assert events == [Text(inner), Text(inner)]


def test_key_words_split_only_on_separators_case_and_digits(implementation: str) -> None:
    is_path_key = engine(implementation).is_path_key
    for key in ("a/path", "$path", "my~file", "src:dir", "ファイルpath", "path!"):
        assert not is_path_key(key), key
    for key in ("a_path", "a-path", "a.path", "a path", "aPath", "HTTPSPath", "file1",
                "path_2", "outputDir", "file_name", "FILE", "x2path"):
        assert is_path_key(key), key


# -- §10.23 lone surrogates ----------------------------------------------------------------------


def test_lone_surrogate_args_are_not_canonicalized(implementation: str) -> None:
    e = engine(implementation)
    lone = '{"path": "\\ud800src/../src/parser.py"}'
    assert e.canonical_form(lone) is None
    assert e.canonical_key("t", lone) != e.canonical_key("t", '{"path": "\\ud800src/parser.py"}')
    # a valid pair is an ordinary character
    assert e.canonical_form('{"path": "\\ud83d\\ude00/../x"}') == b'{"path":"x"}'
