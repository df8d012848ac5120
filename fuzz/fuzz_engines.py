"""A bounded-time fuzzer that compares the two engines on inputs built to be hard.

    python fuzz/fuzz_engines.py --seconds 60 [--seed N]

Three targets, each run in turn until the time is up:

- **canonicalizer**: random JSON objects (path-shaped and very long keys, camelCase, acronyms and
  digits, path values with ``.``/``..``/``//``, volatile parts of arguments (temporary names,
  ``sleep N``, URL query values), lone and paired surrogate escapes, numbers in many
  spellings, nesting up to well past the depth limit), then mutated bytes of them; the native and
  the reference canonical form and key must be equal, for str and bytes input;
- **batch decoder**: random ``Fleet.observe_many`` rows (every kind, wrong types, missing or
  extra fields, None and empty session ids, event objects, decoded args); both engines must
  return the same outcomes or raise the same error type with the same message;
- **observations**: decoded values of any depth and type through ``Watchdog.observe_call``;
  agent messages built to end in laps (random passages of ASCII, non-ASCII and lone surrogates,
  repeated any number of times, cut mid-lap, under random ``looping-text`` knobs) through
  ``Watchdog.observe_text``: the same alerts and the same (laps, period) (issue 39);
- the batch rows run under random per-tool rules (``[tools]``: names and globs, every signal
  that takes one), so the call ring's rule flags are exercised too.

Under the sanitizer build (.ci/run) a memory error aborts the process; a disagreement prints the
input and exits 1. The last line is a JSON summary with the number of inputs tried.
"""

from __future__ import annotations

import argparse
import json
import logging
import random
import sys
import time
from typing import Any

from tripwire import GuardrailsConfig, TripwireError, Watchdog
from tripwire.engine import select as _engine
from tripwire.fleet.fleet import Fleet
from tripwire.interchange.events import Call, Result, Text, Usage

logging.getLogger("tripwire").addHandler(logging.NullHandler())  # the fuzzed traffic's alerts
logging.getLogger("tripwire").propagate = False
NATIVE = _engine.load("native")
REFERENCE = _engine.load("python")

PATH_WORDS = ["path", "paths", "file", "files", "filename", "filepath", "dirname", "dir", "cwd",
              "root", "target", "source", "src", "dst", "folder", "destination"]
OTHER_WORDS = ["profile", "redirect", "pattern", "url", "name", "id", "user", "query", "x"]


def rand_key(rng: random.Random) -> str:
    words = [rng.choice(PATH_WORDS + OTHER_WORDS) for _ in range(rng.randint(1, 4))]
    if rng.random() < 0.03:  # very long keys: the splitter and hashing over long spans
        words.insert(0, rng.choice("aAbZ_") * rng.choice([63, 64, 65, 255, 256, 4096, 70000]))
    style = rng.randrange(6)
    if style == 0:
        key = "_".join(words)
    elif style == 1:
        key = words[0] + "".join(w.capitalize() for w in words[1:])
    elif style == 2:
        key = "-".join(w.upper() if rng.random() < 0.3 else w for w in words)
    elif style == 3:
        key = ".".join(words) + str(rng.randint(0, 99))
    elif style == 4:
        key = "".join(w.upper() for w in words)
    else:
        key = " ".join(words)
    if rng.random() < 0.05:
        key += rng.choice(["\u00e9", "\u00df", "\u0130", "\U0001f600", "\\ud800", "\u2028"])
    return key


#: pieces the volatile-argument scan reads (arguments.scan_argument), whole and cut short
VOLATILE = ["tmp", "tmpa8f3kq2z", "tmp.Xa81bC9dQz", "tmp_x1y2z3", "var", "folders", "T", "Temp",
            "sleep 7", "sleep 0.5s&&", "xsleep 3", "sleep\t2m;", "?_=1733480000123",
            "&ts=2026-12-04T10:22:31Z", "?id=0ccf1a04-1b4c-43b6-8aa5-79e41db43a68#",
            "?a=&b==", "&n=9f86d081884c7d65", "?=1", "?ts=173348000012"]


def rand_path(rng: random.Random) -> str:
    pieces = ["a", "src", "..", ".", "", "main.go", "x y", "~", "\\\\", "é"]
    if rng.random() < 0.3:
        pieces += VOLATILE
    parts = [rng.choice(pieces) for _ in range(rng.randint(0, 6))]
    path = "/".join(parts)
    if rng.random() < 0.3:
        path = "/" + path
    if rng.random() < 0.1:
        path = rng.choice(["\\ud800", "\\udc00", "\\ud83d\\ude00"]) + path
    return path


def rand_number(rng: random.Random) -> str:
    return rng.choice(["0", "-0", "1", "1.0", "1e0", "10E-1", "9007199254740993",
                       "9.007199254740993e15", "0.1", "0.10000000000000001", "1e400", "-1e-400",
                       str(rng.randint(-10**30, 10**30)), f"{rng.random()}e{rng.randint(-30, 30)}"])


def rand_value(rng: random.Random, depth: int) -> str:
    r = rng.random()
    if depth > 3 or r < 0.35:
        return rng.choice([json.dumps(rand_path(rng))[:-1].replace("\\\\u", "\\u") + '"',
                           rand_number(rng), "true", "false", "null", '""', '"plain"'])
    if r < 0.55:
        return "[" + ",".join(rand_value(rng, depth + 1) for _ in range(rng.randint(0, 4))) + "]"
    return rand_object(rng, depth + 1)


def rand_object(rng: random.Random, depth: int = 0) -> str:
    members = [f"{json.dumps(rand_key(rng)).replace(chr(92) * 2 + 'u', chr(92) + 'u')}:"
               f"{rand_value(rng, depth)}" for _ in range(rng.randint(0, 6))]
    ws = rng.choice(["", " ", "\n", "\t"])
    return "{" + ws + ("," + ws).join(members) + ws + "}"


def deep(rng: random.Random) -> str:
    n = rng.choice([126, 127, 128, 129, 1000, 20000])
    opener = rng.choice(["[", '{"a":'])
    closer = "]" if opener == "[" else "}"
    return '{"path":' + opener * n + "1" + closer * n + "}"


def mutate(rng: random.Random, text: str) -> bytes:
    data = bytearray(text.encode("utf-8", "surrogatepass"))
    for _ in range(rng.randint(1, 4)):
        op = rng.randrange(4)
        i = rng.randrange(len(data) + 1)
        if op == 0 and data:
            data[min(i, len(data) - 1)] = rng.randrange(256)
        elif op == 1:
            data[i:i] = rng.choice([b"\\", b'"', b"}", b"\x00", b"\xff", b"\xed\xa0\x80", b"\\u"])
        elif op == 2 and data:
            del data[i:i + rng.randint(1, 8)]
        else:
            data[i:i] = data[:rng.randint(0, 16)]
    return bytes(data)


class Disagreement(AssertionError):
    def __init__(self, what: str, data: Any) -> None:
        super().__init__(what)
        self.data = data


def check_canonical(args: str | bytes) -> None:
    a = NATIVE.canonical_form(args), NATIVE.canonical_key("t", args)
    b = REFERENCE.canonical_form(args), REFERENCE.canonical_key("t", args)
    if a != b:
        raise Disagreement(f"canonical forms differ: native {a!r}, reference {b!r}", args)


def rand_field(rng: random.Random) -> Any:
    return rng.choice([None, "", "x", "read_file", b"bytes", 0, -1, 10**20, 1.5, float("nan"),
                       float("inf"), True, [], {}, {"path": "./a"}, ["a"], '{"path": "a"}',
                       object(), "\ud800", 1e308])


def rand_row(rng: random.Random) -> Any:
    r = rng.random()
    sid = rng.choice(["s1", "s2", "s3", None, "", 5, b"s1"]) if r < 0.1 else \
        rng.choice(["s1", "s2", "s3"])
    if r < 0.15:
        return (sid, rng.choice([Call("f", "{}"), Result("f", payload="x"), Text("hi"),
                                 Usage(model="m", input_tokens=3, cost_usd=0.01)]))
    if r < 0.2:
        return (sid, "text", rand_message(rng))
    kind = rng.choice(["call", "result", "text", "usage", "turn_start", "turn_end", "reset",
                       "bogus", None])
    fields = [rand_field(rng) for _ in range(rng.randint(0, 7))]
    if kind == "call" and rng.random() < 0.8:
        fields = ["read_file", rng.choice(['{"path": "a"}', '{"path": "./a"}', rand_object(rng),
                                           {"path": "a"}])][: rng.randint(0, 2)] + fields[:1]
    elif kind == "usage" and rng.random() < 0.7:
        fields = ["m", rng.randint(0, 10**6), rng.randint(0, 10**4),
                  rng.choice([None, 0.01, 0.0, -1.0, 10**12, 0.5])]
    return (sid, kind, *fields)


def outcome(implementation: str, rows: list) -> Any:
    fleet = Fleet(GuardrailsConfig(mode=rng_mode, unattended=False, max_turn_cost_usd=1.0,
                                   tools=rng_tools), implementation=implementation)
    try:
        out = fleet.observe_many(rows)
    except TripwireError as exc:
        return ("error", type(exc).__name__, str(exc))
    return [(i, s, getattr(d, "action", None), getattr(d, "guardrail", None)) for i, s, d in out]


rng_mode = "enforce"
rng_tools: dict[str, dict[str, Any]] = {}
#: what a random per-tool rule sets: "off" for any signal that takes a rule, a threshold for
#: those with one
RULED = ("repeated-tool-call", "repeated-tool-name", "repeated-failure", "no-new-state",
         "recycled-calls", "tool-failure-streak", "no-op-streak", "tools-without-text",
         "alternating-tool-cycle", "dominant-tool-call")
THRESHOLDED = ("repeated-tool-call", "repeated-tool-name", "repeated-failure")


def rand_tools(rng: random.Random) -> dict[str, dict[str, Any]]:
    rules: dict[str, dict[str, Any]] = {}
    for pattern in rng.sample(["read_file", "f", "*", "read_*", "x"], rng.randint(0, 2)):
        rules[pattern] = {s: ("off" if s not in THRESHOLDED or rng.random() < 0.5
                              else rng.randint(2, 6))
                          for s in rng.sample(RULED, rng.randint(1, 4))}
    if "*" in rules and "read_*" in rules:
        del rules["read_*"]  # never ambiguous: "*" and "read_*" differ in literal characters
    return rules


def rand_message(rng: random.Random) -> str:
    """An agent message that may end in laps of one passage."""
    alphabet = rng.choice(["ab c.\n", "x", "é中 ok\n", "\ud800a b", "-|", "the "])
    passage = "".join(rng.choice(alphabet) for _ in range(rng.randint(1, 300)))
    head = "".join(rng.choice("hello world.\n") for _ in range(rng.randint(0, 80)))
    return head + passage * rng.randint(1, 60) + passage[:rng.randint(0, len(passage))]


def check_batch(rng: random.Random) -> None:
    global rng_mode, rng_tools
    rng_mode = rng.choice(["warn", "feedback", "enforce"])
    rng_tools = rand_tools(rng)
    rows = [rand_row(rng) for _ in range(rng.randint(1, 30))]
    a, b = outcome("native", rows), outcome("python", rows)
    if a != b:
        raise Disagreement(f"batch outcomes differ in {rng_mode}:\nnative {a!r}\n"
                           f"reference {b!r}", rows)


def check_observe(rng: random.Random) -> None:
    value: Any = rand_field(rng)
    for _ in range(rng.choice([1, 2, 5, 130, 3000])):
        value = {"a": value} if rng.random() < 0.5 else [value]
    got = []
    for implementation in ("native", "python"):
        w = Watchdog(implementation=implementation)
        got.append([tuple(a.signal for a in w.observe_call("t", value)) for _ in range(5)])
    if got[0] != got[1]:
        raise Disagreement(f"observe_call differs: {got!r}", value)


def check_text(rng: random.Random) -> None:
    from tripwire.signals import WatchdogConfig

    config = WatchdogConfig(signals={"looping-text": {
        "threshold": rng.choice([2, 3, 8, 40]), "max_period": rng.choice([16, 100, 512, 4096])}})
    message = rand_message(rng)
    got = []
    for implementation in ("native", "python"):
        w = Watchdog(config, implementation=implementation)
        got.append(([(a.signal, a.count) for a in w.observe_text(message)], w.looping_text))
    if got[0] != got[1]:
        raise Disagreement(f"observe_text differs: {got!r}", message)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=30.0)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--failure", default="fuzz-failure.txt",
                        help="where the input of a disagreement is written (repr)")
    args = parser.parse_args(argv)
    rng = random.Random(args.seed)
    deadline = time.monotonic() + args.seconds
    counts = {"canonicalizer": 0, "batch": 0, "observe": 0, "text": 0}
    try:
        run(rng, deadline, counts)
    except Disagreement as exc:
        with open(args.failure, "w", encoding="utf-8") as f:
            f.write(repr(exc.data) + "\n")
        print(f"fuzz: {str(exc)[:2000]}\nthe input is in {args.failure}", file=sys.stderr)
        return 1
    import tripwire._native as native_module

    print(json.dumps({"seconds": args.seconds, "seed": args.seed, "inputs": counts,
                      "total": sum(counts.values()), "native": native_module.__file__}))
    return 0


def run(rng: random.Random, deadline: float, counts: dict[str, int]) -> None:
    while time.monotonic() < deadline:
        for _ in range(200):
            text = deep(rng) if rng.random() < 0.02 else rand_object(rng)
            check_canonical(text)
            check_canonical(text.encode("utf-8", "surrogatepass"))
            check_canonical(mutate(rng, text))
            counts["canonicalizer"] += 3
        for _ in range(10):
            check_batch(rng)
            counts["batch"] += 1
        check_observe(rng)
        counts["observe"] += 1
        for _ in range(20):
            check_text(rng)
            counts["text"] += 1


if __name__ == "__main__":
    sys.exit(main())
