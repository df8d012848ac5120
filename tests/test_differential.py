"""The native core against the pure-Python reference, on random input (hypothesis).

Random traces (runs, cycles, polls, interleaves, path re-spellings, failures, no-ops, repeated
payloads, text, turn ends, resets) go through both engines with random thresholds; every alert,
every canonical key and every token count must be identical. The reference is the spec: a
difference is a bug in the core (or in the reference's reading of SPEC.md).
"""

from __future__ import annotations

import itertools
import json
import math

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tripwire import Watchdog, WatchdogConfig
from tripwire.engine import select as _engine
from tripwire.signals import ResultsConfig

native = pytest.importorskip("tripwire._native", reason="the native core is not built")
reference = _engine.load("python")

pytestmark = pytest.mark.skipif(
    "native" not in __import__("conftest").IMPLEMENTATIONS,
    reason="TRIPWIRE_TEST_IMPLEMENTATIONS excludes native",
)

SETTINGS = settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])

# --------------------------------------------------------------------------------------------
# Hashes


@st.composite
def byte_strings(draw: st.DrawFn) -> bytes:
    # Draw the length first so the 129-240 and >240 byte XXH3 paths get real coverage.
    n = draw(st.one_of(st.integers(0, 300), st.integers(300, 5000)))
    return draw(st.binary(min_size=n, max_size=n))


@SETTINGS
@given(byte_strings(), st.integers(0, 15))
def test_xxh3_bit_identical_with_the_xxhash_package(data: bytes, offset: int) -> None:
    import xxhash

    view = memoryview(b"\0" * offset + data)[offset:]  # unaligned start
    assert native.xxh3_64(view) == xxhash.xxh3_64_intdigest(data)
    assert native.xxh3_128(view) == xxhash.xxh3_128_intdigest(data)


def test_xxh3_at_block_boundaries() -> None:
    import xxhash

    for n in (0, 1, 3, 4, 8, 9, 16, 17, 128, 129, 240, 241, 1024, 1025, 4096, 1 << 20):
        data = bytes((i * 131 + 7) % 251 for i in range(n))
        assert native.xxh3_64(data) == xxhash.xxh3_64_intdigest(data), n
        assert native.xxh3_128(data) == xxhash.xxh3_128_intdigest(data), n


# --------------------------------------------------------------------------------------------
# Canonical forms

KEYS = [
    "path",
    "file_path",
    "filePath",
    "paths",
    "dirs",
    "cwd",
    "root",
    "src",
    "dst",
    "target",
    "pattern",
    "command",
    "limit",
    "opts",
    "q",
    "url",
    "profile",
    "folder_id",
    "HTTPSPath",
    "file1",
    "user_name",
    "edits",
    "notebookPath",
    "a",
    "b",
    "\u00e9",
    "p\u00e4th",
]
PATHISH = st.text(alphabet="./a~\\b", max_size=10) | st.sampled_from(
    ["main.go", "./main.go", "/w/main.go", "dir/../main.go", "a//b/", "/../x", "..", ".", ""]
)


def _number_spellings(value: int, exponent: int) -> list[str]:
    """Several JSON spellings of value * 10**exponent."""
    digits = str(abs(value))
    sign = "-" if value < 0 else ""
    spellings = [f"{sign}{digits}e{exponent}", f"{sign}{digits}E{exponent:+d}"]
    if exponent >= 0:
        spellings.append(sign + digits + "0" * exponent)
        spellings.append(sign + digits + "0" * exponent + ".000")
    else:
        whole = digits.rjust(-exponent + 1, "0")
        spellings.append(f"{sign}{whole[:exponent]}.{whole[exponent:]}")
    return spellings


numbers = st.builds(
    lambda v, e, i: (v, e, i), st.integers(-(10**20), 10**20), st.integers(-8, 8), st.integers(0, 3)
)
scalars = st.one_of(
    st.none(),
    st.booleans(),
    numbers,
    PATHISH,
    st.text(max_size=12),
)


class Obj(list):
    """A JSON object as its (key, value) members in writing order (duplicates allowed)."""


#: very long keys (issue 8's residual: the fuzzer had them, these strategies did not): a known
#: key stretched past the lengths where a fixed buffer or a short-string path would end, with
#: a path-like word kept at either end, or a long run of one character
LONG_KEY_LENGTHS = [63, 64, 65, 127, 128, 255, 256, 257, 1023, 1024, 4095, 4096, 4097, 65537]
long_keys = st.builds(
    lambda base, n, filler, where: (
        base + filler * (n - len(base)) if where == 0 else
        filler * (n - len(base)) + base if where == 1 else
        filler * (n // 2) + base + filler * (n // 2) if where == 2 else filler * n
    ),
    st.sampled_from(KEYS),
    st.sampled_from(LONG_KEY_LENGTHS) | st.integers(20, 2000),
    st.sampled_from(["a", "_", "P", "\u00e9", "/", " ", "0", "ab_", "Path", "_path"]),
    st.integers(0, 3),
)
any_keys = st.sampled_from(KEYS) | st.text(max_size=6) | long_keys

json_values = st.recursive(
    scalars,
    lambda children: st.one_of(
        st.lists(children, max_size=4),
        st.lists(st.tuples(any_keys, children), max_size=5).map(Obj),
    ),
    max_leaves=12,
)


def _spell_string(draw: st.DrawFn, s: str) -> str:
    out = ['"']
    for ch in s:
        mode = draw(st.integers(0, 9))
        if ch == '"' or ch == "\\" or ord(ch) < 0x20 or mode == 0:
            if ord(ch) > 0xFFFF:
                hi, lo = divmod(ord(ch) - 0x10000, 0x400)
                out.append(f"\\u{0xD800 + hi:04x}\\u{0xDC00 + lo:04X}")
            else:
                out.append(f"\\u{ord(ch):04x}")
        elif ch == "/" and mode == 1:
            out.append("\\/")
        else:
            out.append(ch)
    out.append('"')
    return "".join(out)


def _spell(draw: st.DrawFn, value: object) -> str:
    ws = draw(st.sampled_from(["", "", " ", "\n ", "\t"]))
    if value is None or isinstance(value, bool):
        return ws + json.dumps(value)
    if isinstance(value, tuple):
        v, e, i = value
        return ws + _number_spellings(v, e)[i % len(_number_spellings(v, e))]
    if isinstance(value, str):
        return ws + _spell_string(draw, value)
    if isinstance(value, Obj):
        members = [f"{_spell_string(draw, k)}{ws}:{_spell(draw, v)}" for k, v in value]
        return ws + "{" + ",".join(members) + ws + "}"
    return ws + "[" + ",".join(_spell(draw, v) for v in value) + ws + "]"


@st.composite
def json_args(draw: st.DrawFn) -> str:
    members = draw(st.lists(st.tuples(st.sampled_from(KEYS) | long_keys, json_values),
                            max_size=6))
    if draw(st.integers(0, 4)) == 0 and members:
        members.append((members[0][0], draw(json_values)))  # a duplicate key
    ws = draw(st.sampled_from(["", " ", "\n"]))
    body = ",".join(f"{ws}{_spell_string(draw, k)}{ws}:{_spell(draw, v)}" for k, v in members)
    text = ws + "{" + body + ws + "}" + ws
    mutation = draw(st.integers(0, 9))
    if mutation == 0 and text:  # break it: invalid JSON is compared as raw bytes
        i = draw(st.integers(0, len(text) - 1))
        text = (
            text[:i] + draw(st.sampled_from(["", "}", "\\", '"', "\x01", "\ud800"])) + text[i + 1 :]
        )
    elif mutation == 1 and members:
        # a lone surrogate escape (SPEC §10.23), in a path value or in a duplicate key's value
        # that a later member overwrites: decided on the text in both engines
        escape = draw(st.sampled_from(["\\ud800", "\\udc00", "\\ud800\\u0041", "\\ud83d\\ude00"]))
        key = _spell_string(draw, members[0][0])
        shadowed = f'{key}:{{"path":"{escape}src/../src/parser.py"}},{key}:1'
        text = "{" + shadowed + ("," + body if body else "") + "}"
    return text


@SETTINGS
@given(json_args())
def test_canonical_forms_and_keys_agree(args: str) -> None:
    assert native.canonical_form(args) == reference.canonical_form(args)
    assert native.canonical_key("tool", args) == reference.canonical_key("tool", args)
    raw = args.encode("utf-8", "surrogatepass")
    assert native.canonical_key("tool", raw) == reference.canonical_key("tool", raw)


@SETTINGS
@given(st.binary(max_size=200))
def test_arbitrary_bytes_agree(raw: bytes) -> None:
    assert native.canonical_form(raw) == reference.canonical_form(raw)
    assert native.canonical_key("t", raw) == reference.canonical_key("t", raw)


def test_text_level_rules_hold_for_overwritten_values() -> None:
    """A duplicate key's overwritten value still counts for the depth bound and the lone
    surrogate rule (both read the text), and path cleaning cannot hide a surrogate."""
    cases = {
        '{"a": ' + "[" * 200 + "]" * 200 + ', "a": 1}': None,
        '{"a": {"k\\ud800": 1}, "a": 1}': None,
        '{"path": "\\ud800src/../src/parser.py"}': None,
        '{"a": "\\ud800\\n\\udc00"}': None,
        '{"a": "\\\\ud800"}': b'{"a":"\\\\ud800"}',  # an escaped backslash, not an escape
        '{"a": "\\ud83d\\ude00"}': '{"a":"\U0001f600"}'.encode(),
    }
    for args, form in cases.items():
        assert native.canonical_form(args) == reference.canonical_form(args) == form, args
        assert native.canonical_key("t", args) == reference.canonical_key("t", args)


def test_deep_nesting_is_raw_in_both() -> None:
    for depth in (127, 128, 129, 1000, 100_000):
        args = '{"a":' + "[" * (depth - 1) + "]" * (depth - 1) + "}"
        assert (native.canonical_form(args) is None) == (reference.canonical_form(args) is None)
        assert native.canonical_key("t", args) == reference.canonical_key("t", args)
    assert native.canonical_form('{"a":' + "[" * 127 + "]" * 127 + "}") is not None
    assert native.canonical_form('{"a":' + "[" * 128 + "]" * 128 + "}") is None


@SETTINGS
@given(st.text(alphabet="aAbBzZ09_-. /\u00e9\u212a", max_size=14) | st.sampled_from(KEYS)
       | long_keys)
def test_path_key_words_agree(key: str) -> None:
    assert native.is_path_key(key) == reference.is_path_key(key)


@SETTINGS
@given(PATHISH | st.text(max_size=20) | long_keys)
def test_path_cleaning_agrees(path: str) -> None:
    cleaned = native.clean_path(path)
    assert cleaned == reference.clean_path(path)
    assert reference.clean_path(cleaned) == cleaned  # idempotent, as Go's path.Clean


# --------------------------------------------------------------------------------------------
# Traces

NAMES = ["read_file", "grep", "bash", "mark_task_done", "wait_and_verify", ""]
ARG_POOL = [
    '{"path":"main.go"}',
    '{"path":"./main.go"}',
    '{"path":"/w/main.go"}',
    '{"path":"a/main.go"}',
    '{"path":"b/main.go"}',
    '{ "path" : "dir/../main.go" }',
    '{"path":"x.go","limit":5}',
    '{"limit":5.0,"path":"x.go"}',
    '{"pattern":"TODO"}',
    '{"pattern":"\\u0054ODO"}',
    '{"command":"ls"}',
    "{}",
    "",
    "not json",
    "[1,2]",
    '{"src":"a","dst":"/v/b"}',
    '{"src":"/w/a","dst":"b"}',
    '{"q":"\u20ac\u20ac"}',
    # very long keys: one path-like (its value cleaned), one not, the same with a key one
    # character longer (another call), each spelled twice (the same call)
    '{"file_path' + "_" * 4086 + '":"./a.go"}',
    '{"file_path' + "_" * 4086 + '":"a.go"}',
    '{"file_path' + "_" * 4087 + '":"a.go"}',
    '{"' + "k" * 70000 + '":1}',
    '{ "' + "k" * 70000 + '" : 1.0 }',
]
PAYLOADS = [None, "", "A", "B", "pod web-1 Running", b"\x00\xff", {"k": [1, 2]}, "x" * 300,
            # answers (SPEC §12.1): equal but for a volatile span; whitespace only
            "1 failed in 0.53s", "1 failed in 0.61s", "pid 4242 exited", "pid 7 exited", " \n",
            {"request_id": "r-1", "n": 1}, {"request_id": "r-2", "n": 1}]


@st.composite
def poll_run(draw: st.DrawFn) -> list[tuple]:
    """One call polled up to 12 times, its output mostly changing, sometimes repeating, failing,
    a no-op or missing; the results arrive 0-3 calls late (parallel calls, SPEC §10.24)."""
    name, args = draw(st.sampled_from(NAMES)), draw(st.sampled_from(ARG_POOL))
    n, lag = draw(st.integers(1, 12)), draw(st.integers(0, 3))
    results, level = [], 0
    for _ in range(n):
        roll = draw(st.integers(0, 19))
        if roll == 0:
            results.append(("result", name, "timed out", False, None))
        elif roll == 1:
            results.append(("result", name, None, True, "nothing to do"))
        elif roll == 2:
            results.append(("result", name, None, False, None))
        else:
            level += draw(st.sampled_from([1, 1, 1, 0]))
            took = draw(st.sampled_from(["", " in 0.5s", " in 12 ms", " at 10:22:31"]))
            results.append(("result", name, None, False, f"{level} of 20 updated{took}"))
    out: list[tuple] = []
    for i in range(n):
        out.append(("call", name, args))
        if i >= lag:
            out.append(results[i - lag])
    return out + results[max(0, n - lag):]


@st.composite
def events(draw: st.DrawFn) -> list[tuple]:
    out: list[tuple] = []
    for _ in range(draw(st.integers(1, 60))):
        kind = draw(
            st.sampled_from(
                ["call"] * 6
                + ["repeat", "cycle", "poll", "lap", "result", "result", "text", "turn_end",
                   "reset"]
            )
        )
        if kind == "call":
            out.append(("call", draw(st.sampled_from(NAMES)), draw(st.sampled_from(ARG_POOL))))
        elif kind == "repeat" and any(e[0] == "call" for e in out):
            last = [e for e in out if e[0] == "call"][-1]
            out.extend([last] * draw(st.integers(1, 6)))
        elif kind == "cycle":
            block = [
                ("call", draw(st.sampled_from(NAMES)), draw(st.sampled_from(ARG_POOL)))
                for _ in range(draw(st.integers(2, 4)))
            ]
            out.extend(block * draw(st.integers(2, 4)))
        elif kind == "poll":
            out.extend(draw(poll_run()))
        elif kind == "lap":  # recycled calls (SPEC §12.4): a 5..8-call lap, each answered
            block = []
            for _ in range(draw(st.integers(5, 8))):
                name = draw(st.sampled_from(NAMES))
                block += [("call", name, draw(st.sampled_from(ARG_POOL))),
                          ("result", name, None, False, draw(st.sampled_from(PAYLOADS)))]
            out.extend(block * draw(st.integers(2, 3)))
        elif kind == "result":
            error = draw(st.sampled_from([None, False, "", "boom", True, "PermissionDenied",
                                          # repeated-failure: one signature, spelled three ways
                                          "boom at 12:00:01 (pid 41)", "boom at 13:05:59 (pid 7)",
                                          "missing /tmp/a1/x.py", {"code": 7}]))
            out.append(
                (
                    "result",
                    draw(st.sampled_from(NAMES)),
                    error,
                    draw(st.booleans()),
                    draw(st.sampled_from(PAYLOADS)),
                )
            )
        elif kind == "text":
            out.append(("text", draw(st.sampled_from(["", "  \n", "\u3000", "Found it.", "ok"]))))
        elif kind in ("turn_end", "reset"):
            out.append((kind,))
    return out


@st.composite
def configs(draw: st.DrawFn) -> WatchdogConfig:
    window = draw(st.integers(1, 14))
    knobs = {
        "repeated-tool-call": {"threshold": draw(st.integers(0, 6))},
        "alternating-tool-cycle": {
            "max_period": draw(st.integers(0, 4)),
            "cycles": draw(st.integers(0, 3)),
        },
        "dominant-tool-call": {
            "window": window,
            "threshold": draw(st.integers(0, 14)),
            "defer_run": draw(st.none() | st.integers(-1, 6)),
            "defer_cycle_period": draw(st.none() | st.integers(0, 4)),
        },
        "repeated-tool-name": {"threshold": draw(st.integers(2, 8))},
        "tool-failure-streak": {"threshold": draw(st.integers(1, 4))},
        "no-op-streak": {"threshold": draw(st.integers(1, 4))},
        "no-new-state": {"threshold": draw(st.integers(1, 6)), "memory": draw(st.integers(1, 6))},
        "tools-without-text": {"threshold": draw(st.integers(1, 10))},
        "repeated-failure": {"threshold": draw(st.integers(1, 4))},
        "recycled-calls": {"threshold": draw(st.integers(1, 9)),
                           "window": draw(st.integers(2, 64))},
    }
    only = draw(st.none() | st.sets(st.sampled_from(list(knobs)), min_size=1))
    results = draw(st.sampled_from([
        ResultsConfig(), ResultsConfig(volatile=("durations", "hex")),
        ResultsConfig(ignore_json_keys=("request_id",)),
        ResultsConfig(tools={NAMES[0]: ("request_id",)})]))
    return WatchdogConfig(signals=knobs, only=frozenset(only) if only else None,
                          results=results)


def _replay(watchdog: Watchdog, trace: list[tuple]) -> list[tuple]:
    seen = []
    for e in trace:
        if e[0] == "call":
            alerts = watchdog.observe_call(e[1], e[2])
        elif e[0] == "result":
            alerts = watchdog.observe_result(e[1], error=e[2], no_op=e[3], payload=e[4])
        elif e[0] == "text":
            alerts = watchdog.observe_text(e[1])
        elif e[0] == "turn_end":
            alerts = watchdog.end_turn()
        else:
            alerts = watchdog.reset()
        seen.extend(
            (a.signal, a.severity, a.scope, a.reason, a.guidance, a.event, a.tool, a.count)
            for a in alerts
        )
    return seen


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(events(), configs())
def test_random_traces_raise_identical_alerts(trace: list[tuple], config: WatchdogConfig) -> None:
    fast = Watchdog(config, implementation="native")
    spec = Watchdog(config, implementation="python")
    assert _replay(fast, trace) == _replay(spec, trace)
    for attr in (
        "repeat_run",
        "repeat_poll",
        "name_run",
        "silent_calls",
        "failure_streak",
        "no_op_run",
        "stale_results",
        "recycled_run",
        "events",
    ):
        assert getattr(fast, attr) == getattr(spec, attr), attr


@SETTINGS
@given(st.binary(max_size=3000) | st.text(max_size=600), st.lists(st.integers(0, 3000), max_size=8))
def test_token_estimates_ignore_chunking(data: bytes | str, cuts: list[int]) -> None:
    total = len(data.encode("utf-8", "surrogatepass")) if isinstance(data, str) else len(data)
    bounds = sorted({min(c, len(data)) for c in cuts} | {0, len(data)})
    chunks = [data[a:b] for a, b in itertools.pairwise(bounds)]
    for module in (native, reference):
        est = module.TokenEstimator()
        for chunk in chunks:
            est.feed(chunk)
        assert est.bytes == total
        assert est.tokens == math.ceil(total / 3)


# --------------------------------------------------------------------------------------------
# Shell-tool identity (SPEC §11.2): the program word, natively and in the reference

WORDS = ["ls", "cat", "grep", "python", "-m", "-la", "pytest", "x.py", "/tmp", "a b", "é", "sed"]
STEPS = ["cd /testbed &&", "cd src;", "cd", "FOO=1", "A_1=x", "1A=x", "sudo", "sudo -E", "env",
         "env -i", "timeout 5", "timeout -s KILL 10", "time", "&&", ";", "|", "(", "`"]


@st.composite
def commands(draw: st.DrawFn) -> str:
    parts = draw(st.lists(st.sampled_from(STEPS + WORDS), max_size=8))
    sep = draw(st.sampled_from([" ", "  ", "\t", "\n", " && "]))
    return draw(st.sampled_from(["", " ", "\n"])) + sep.join(parts)


@st.composite
def shell_args(draw: st.DrawFn) -> object:
    command = draw(commands() | st.text(max_size=30))
    form = draw(st.sampled_from(["command", "cmd", "script", "other", "argv", "bash-lc",
                                 "plain", "json-string", "escaped", "two-keys", "nested",
                                 "number", "broken"]))
    if form in ("command", "cmd", "script", "other"):
        return {form: command, **draw(st.dictionaries(st.sampled_from(["timeout", "cwd"]),
                                                      st.integers() | st.text(max_size=5),
                                                      max_size=2))}
    if form == "argv":
        return {"command": command.split()}
    if form == "bash-lc":
        return {"command": [draw(st.sampled_from(["bash", "/bin/sh", "zsh", "fish"])),
                            draw(st.sampled_from(["-lc", "-c", "-l", "c"])), command]}
    if form == "plain":
        return command
    if form == "json-string":
        return json.dumps(command, ensure_ascii=draw(st.booleans()))
    if form == "escaped":
        return json.dumps({"command": command}, ensure_ascii=True)
    if form == "two-keys":
        return ('{"script": ' + json.dumps(command) + ', "cmd": ' + json.dumps(command[::-1])
                + ', "cmd": "zzz"}')
    if form == "nested":
        return '{"opts": {"command": "no", "list": ["}", "\\""]}, "command": ' + json.dumps(
            command) + "}"
    if form == "number":
        return '{"command": 17}'
    return json.dumps({"command": command})[: draw(st.integers(0, 40))]


@SETTINGS
@given(shell_args() | st.binary(max_size=80))
def test_shell_program_words_agree(args: object) -> None:
    from tripwire.identity.shell import shell_program

    assert native.shell_program(args) == shell_program(args)


SHELL_NAMES = ["bash", "Bash", "run", "read_file"]
SHELL_POOL = [{"command": "ls"}, {"command": "ls -la"}, {"command": "cd /w && ls src"},
              {"command": "cat a"}, {"cmd": "cat b"}, "grep -r x", {"command": ["bash", "-lc",
              "cat a"]}, None, '{"command": 3}', "", {"path": "a"}]


@st.composite
def shell_traces(draw: st.DrawFn) -> list[tuple]:
    calls = [("call", draw(st.sampled_from(SHELL_NAMES)), draw(st.sampled_from(SHELL_POOL)))
             for _ in range(draw(st.integers(1, 40)))]
    if draw(st.booleans()):  # a cycle, for its text
        block = calls[: draw(st.integers(2, 3))]
        calls.extend(block * 3)
    return calls


@SETTINGS
@given(shell_traces(), st.integers(2, 6),
       st.sets(st.sampled_from(SHELL_NAMES)) | st.none())
def test_shell_identity_traces_raise_identical_alerts(trace: list[tuple], threshold: int,
                                                      shells: set[str] | None) -> None:
    knobs: dict = {"repeated-tool-name": {"threshold": threshold},
                   "alternating-tool-cycle": {"cycles": 3}}
    if shells is not None:
        knobs["repeated-tool-name"]["shell_tools"] = sorted(shells)
    config = WatchdogConfig(signals=knobs)
    fast = Watchdog(config, implementation="native")
    spec = Watchdog(config, implementation="python")
    assert _replay(fast, trace) == _replay(spec, trace)
    assert fast.name_run == spec.name_run
