"""The interchange reader decodes lines with msgspec and falls back to ``json.loads`` for the
lines msgspec refuses: every line must give the same event, or fail with the same message, as
decoding it with ``json.loads`` alone (the oracle below is the reader as it was before msgspec).
Engine-independent: no engine is involved in reading a file."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tripwire.errors import InvalidEvent, TruncatedLine
from tripwire.interchange.events import UTF8_BOM, parse_event, read_events


def oracle(path: Path) -> list[tuple[int, int, Any, str | None]]:
    """``(index, line, event, error message)`` per line, by ``json.loads`` alone."""
    out = []
    index = 0
    with path.open("rb") as handle:
        for number, raw in enumerate(handle, start=1):
            if number == 1:
                raw = raw.removeprefix(UTF8_BOM)
            ended = raw.endswith(b"\n")
            raw = raw.removesuffix(b"\n").removesuffix(b"\r")
            if not raw.strip():
                continue
            try:
                try:
                    text = raw.decode("utf-8")
                except UnicodeDecodeError as exc:
                    raise InvalidEvent(f"not UTF-8 ({exc.reason} at byte {exc.start})") from None
                try:
                    value = json.loads(text)
                except json.JSONDecodeError as exc:
                    if not ended:
                        raise TruncatedLine() from None
                    raise InvalidEvent(f"not JSON ({exc.msg} at column {exc.colno})") from None
                except RecursionError:
                    raise InvalidEvent("not JSON (nested too deeply)") from None
                out.append((index, number, parse_event(value), None))
            except InvalidEvent as exc:
                out.append((index, number, None, f"{type(exc).__name__}: {exc.message}"))
            index += 1
    return out


def read(path: Path) -> list[tuple[int, int, Any, str | None]]:
    return [(line.index, line.number, line.event,
             None if line.error is None else f"{type(line.error).__name__}: {line.error.message}")
            for line in read_events(path)]


def _same(a: list, b: list) -> bool:
    # repr: NaN != NaN, and -0.0 == 0.0 would hide a difference
    return repr(a) == repr(b)


numbers = st.one_of(
    st.integers(-(2**70), 2**70),  # past 64 bits: msgspec must keep them exact
    st.sampled_from(["1e400", "-1e400", "1e-400", "NaN", "Infinity", "-Infinity", "-0",
                     "-0.0", "1E5", "0.1e1", "123456789012345678901234567890.5", "01", "1."]),
    st.floats(allow_nan=False, allow_infinity=False).map(repr),
)
strings = st.one_of(
    st.text(max_size=8).map(lambda s: json.dumps(s, ensure_ascii=False)),
    st.sampled_from(['"\\ud800"', '"\\udc00x"', '"\\ud83d\\ude00"', '"a\\u0000b"', '"\t"',
                     '"\\x"', '"\x7f"', '"\u2028"']),
)
scalars = st.one_of(numbers.map(str), strings, st.sampled_from(["true", "false", "null"]))
values = st.recursive(
    scalars,
    lambda inner: st.one_of(
        st.lists(inner, max_size=3).map(lambda xs: "[" + ",".join(xs) + "]"),
        st.lists(st.tuples(strings, inner), max_size=3).map(
            lambda kv: "{" + ",".join(f"{k}:{v}" for k, v in kv) + "}"),
    ),
    max_leaves=6,
)
FIELDS = {
    "call": ["name", "args", "id"],
    "result": ["name", "id", "error", "no_op", "payload"],
    "text": ["text"],
    "usage": ["model", "input_tokens", "output_tokens", "cost_usd", "cache_read_tokens",
              "cache_write_tokens", "provider"],
    "turn_start": [], "turn_end": [], "reset": ["guardrail", "additional_budget_usd"],
}


@st.composite
def lines(draw: st.DrawFn) -> bytes:
    kind = draw(st.sampled_from([*FIELDS, "bogus"]))
    members = [f'"type":"{kind}"'] if draw(st.integers(0, 9)) else [f'"kind":"{kind}"']
    for field in FIELDS.get(kind, ["name"]):
        if draw(st.integers(0, 3)):
            members.append(f'"{field}":{draw(values)}')
    ws = draw(st.sampled_from(["", " ", "\t", "\r"]))
    text = ws + "{" + ",".join(members) + "}" + ws
    roll = draw(st.integers(0, 19))
    if roll == 0:
        text = "[" * 1100 + "]" * 1100  # past msgspec's nesting limit
    elif roll == 1:
        text = draw(values)  # not an object
    data = text.encode("utf-8", "surrogatepass")
    if roll == 2:
        cut = draw(st.integers(0, len(data)))
        data = data[:cut] + draw(st.sampled_from([b"\xff", b"\xed\xa0\x80", b"\xc0\x80", b""]))
    elif roll == 3:
        data = b"   "
    return data


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow,
                                                                   HealthCheck.function_scoped_fixture])
@given(st.lists(lines(), min_size=1, max_size=6), st.booleans(), st.booleans())
def test_every_line_decodes_as_json_loads_decodes_it(tmp_path: Path, body: list[bytes],
                                                      bom: bool, last_newline: bool) -> None:
    path = tmp_path / "events.jsonl"
    data = (UTF8_BOM if bom else b"") + b"\n".join(body) + (b"\n" if last_newline else b"")
    path.write_bytes(data)
    got, want = read(path), oracle(path)
    assert _same(got, want), (data, got, want)


def test_big_integers_and_fallback_lines_exactly(tmp_path: Path) -> None:
    path = tmp_path / "events.jsonl"
    path.write_bytes(
        b'{"type":"call","name":"a","args":{"n":123456789012345678901234567890}}\n'
        b'{"type":"usage","input_tokens":18446744073709551616}\n'
        b'{"type":"call","name":"b","args":{"x":NaN,"p":"\\ud800"}}\n'
        b'{"type":"text","text":"' + b"[" * 3 + b'"}\r\n'
        b'{"type":"text"\n'
        b'{"type":"call","name":"c","args":' + b"[" * 1100 + b"]" * 1100 + b'}\n'
        b'{"type":"text","text":"cut')
    lines_ = list(read_events(path))
    assert lines_[0].event.args == {"n": 123456789012345678901234567890}  # an int, not 1.2e29
    # decoded exactly, then refused: a token count above validate.MAX_TOKENS (issue 23)
    assert lines_[1].error.message == ("field 'input_tokens' must be an integer from 0 to "
                                       "1,000,000,000,000, not an integer of 20 digits")
    args = lines_[2].event.args
    assert args["p"] == "\ud800" and args["x"] != args["x"]  # json.loads: a NaN, a surrogate
    assert lines_[3].event.text == "[[["
    assert lines_[4].error.message == "not JSON (Expecting ',' delimiter at column 15)"
    assert lines_[5].error.message == "not JSON (nested too deeply)"
    assert isinstance(lines_[6].error, TruncatedLine)
    assert _same(read(path), oracle(path))
