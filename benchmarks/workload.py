"""The benchmark workload: a realistic, deterministic mix of tool calls and results.

Modelled on the reference Go implementation's benchmark trace (reference §14): 70% fresh
read_file / grep / bash calls with path-keyed JSON args (about 80 bytes), 30% repeats of one of
the last 8 calls, a tenth of those re-spelled with ``./``.
"""

from __future__ import annotations

import json
import random
from collections.abc import Callable

CALLS = 4000  # one benchmark round; the args stay cache-resident like a harness's fresh strings


def call_mix(n: int = CALLS, seed: int = 7) -> list[tuple[str, str]]:
    rng = random.Random(seed)
    calls: list[tuple[str, str]] = []
    recent: list[tuple[str, dict]] = []
    for i in range(n):
        if recent and rng.random() < 0.30:
            name, args = rng.choice(recent[-8:])
            if rng.random() < 0.10 and "path" in args:
                args = {**args, "path": "./" + args["path"]}
        else:
            kind = rng.random()
            pkg = f"pkg{rng.randrange(40)}"
            if kind < 0.4:
                name, args = (
                    "read_file",
                    {
                        "path": f"src/tripwire/{pkg}/module_{i}.py",
                        "offset": rng.randrange(400),
                        "limit": 200,
                    },
                )
            elif kind < 0.7:
                name, args = (
                    "grep",
                    {"pattern": f"def handle_{i}", "path": f"src/{pkg}", "glob": "*.py"},
                )
            else:
                name, args = (
                    "bash",
                    {"command": f"pytest tests/test_{pkg}.py -k case_{i} -q", "cwd": "/workspace"},
                )
            recent.append((name, args))
        calls.append((name, json.dumps(args)))
    return calls


def payload(size: int, seed: int = 3) -> str:
    rng = random.Random(seed)
    line = "".join(rng.choice("abcdefghijklmnopqrstuvwxyz0123456789 _-:/{}") for _ in range(79))
    return ((line + "\n") * (size // 80 + 1))[:size]


def _pytest_run(rng: random.Random, i: int) -> list[str]:
    files = [f"tests/test_{w}.py" for w in ("api", "parser", "dates", "cli", "store")]
    lines = ["============================= test session starts ==============================",
             "platform linux -- Python 3.11.9, pytest-8.2.0, pluggy-1.5.0",
             "rootdir: /testbed", f"collected {180 + i % 40} items", ""]
    lines += [f"{f} {'.' * rng.randrange(10, 40)}{'F' if rng.random() < 0.2 else ''}"
              f"{' ' * 8}[{rng.randrange(1, 100):3d}%]" for f in files * 6]
    rule = "=" * 35
    lines += ["", f"{rule} FAILURES {rule}",
              f"{'_' * 33} test_case_{i} {'_' * 33}",
              "", f"    def test_case_{i}():",
              f">       assert parse_date('2026-12-{1 + i % 28:02d}') == date(2026, 12, 4)",
              "E       AssertionError: assert None == datetime.date(2026, 12, 4)",
              "", f"tests/test_dates.py:{40 + i % 60}: AssertionError",
              f"==================== 1 failed, {170 + i % 40} passed in {rng.random() * 9:.2f}s "
              "===================="]
    return lines


def _log_tail(rng: random.Random, i: int) -> list[str]:
    return [f"2026-12-04T10:{k % 60:02d}:{rng.randrange(60):02d}.{rng.randrange(1000):03d}Z "
            f"{rng.choice(['INFO ', 'WARN ', 'ERROR'])} [worker-{k % 8}] request "
            f"{rng.getrandbits(64):016x} GET /api/v1/items/{i * 100 + k} "
            f"{rng.choice([200, 404, 503])} {rng.randrange(1, 900)}ms" for k in range(40)]


def _json_records(rng: random.Random, i: int) -> list[str]:
    return json.dumps([{"reservation_id": f"R{i:05d}{k}",
                        "status": rng.choice(["active", "cancelled"]),
                        "created_at": f"2024-05-{1 + k % 28:02d}T{k % 24:02d}:00:00",
                        "flights": [{"flight_number": f"HAT{rng.randrange(300):03d}",
                                     "price": rng.randrange(50, 900)}],
                        "payment_id": f"credit_card_{rng.randrange(10**7)}", "amount": k * 37}
                       for k in range(16)], indent=2).splitlines()


def _source_read(rng: random.Random, i: int) -> list[str]:
    body = ["def handle_{n}(request, *, retries=3):", "    \"\"\"Serve one request.\"\"\"",
            "    for attempt in range(retries):", "        try:",
            "            return dispatch(request, timeout=30)",
            "        except TimeoutError as exc:  # the upstream is slow",
            "            log.warning('attempt %d failed: %s', attempt, exc)",
            "    raise Busy()", ""]
    return [f"{n + 1:6d}\t{line.format(n=i + n // 9)}"
            for n, line in enumerate(body * 12)]


def _grep_hits(rng: random.Random, i: int) -> list[str]:
    return [f"src/tripwire/pkg{rng.randrange(40)}/module_{i + k}.py:{rng.randrange(1, 900)}:"
            f"    def handle_{i + k}(request, *, retries=3):" for k in range(50)]


_OUTPUTS = (_pytest_run, _log_tail, _json_records, _source_read, _grep_hits)


def tool_outputs(size: int, n: int = CALLS, seed: int = 11) -> list[tuple[str, str]]:
    """Distinct tool outputs of `size` bytes, as agents get them: a pytest run, a log tail, a
    JSON API response, a source file read with line numbers, grep hits, in turn (each with its
    own numbers, timings, timestamps and ids)."""
    rng = random.Random(seed)
    out = []
    for i in range(n):
        make = _OUTPUTS[i % len(_OUTPUTS)]
        text = "\n".join(make(rng, i))
        while len(text) < size:
            text += "\n" + "\n".join(make(rng, i))
        out.append(("bash", text[:size]))
    return out


def results(size: int, n: int = CALLS) -> list[tuple[str, str]]:
    """Distinct payloads of `size` bytes (each result is new information)."""
    base = payload(size)
    return [("read_file", f"{i:08d}" + base[8:]) for i in range(n)]


def polls(n: int = CALLS // 2) -> list[tuple[str, str, str]]:
    """One poll repeated: (name, args, its result), the output changing each time (SPEC §10.24:
    the repeat detector weighs each result against the one before)."""
    args = json.dumps({"command": "kubectl rollout status deploy/api --timeout=10s"})
    base = payload(100)
    return [("bash", args, f"{i:08d}" + base[8:]) for i in range(n)]


def mean_args_bytes(calls: list[tuple[str, str]]) -> float:
    return sum(len(a) for _, a in calls) / len(calls)


def run_calls(observe: Callable[[str, str], object], calls: list[tuple[str, str]]) -> None:
    for name, args in calls:
        observe(name, args)


def run_polls(watchdog: object, polls: list[tuple[str, str, str]]) -> None:
    observe_call, observe_result = watchdog.observe_call, watchdog.observe_result
    for name, args, out in polls:
        observe_call(name, args)
        observe_result(name, payload=out)


def run_turn(guardrails: object, calls: list[tuple[str, str]]) -> None:
    """One turn of calls through Guardrails (start, every call, end)."""
    guardrails.start_turn()
    on_call = guardrails.on_call
    for name, args in calls:
        on_call(name, args)
    guardrails.end_turn()


def fleet_traffic(sessions: int, events: int, seed: int = 11, *,
                  usage: bool = False) -> list[tuple]:
    """Many sessions' interleaved agent steps, the calls of ``call_mix``: each step a tool call
    and its result, a third of them with agent text first. With ``usage``, every step also
    reports its model call's usage, and every 12 steps a session ends its turn and starts the
    next (the rows batch ingest hands to Python)."""
    rng = random.Random(seed)
    calls = call_mix(max(events // 2, 1), seed)
    # tool output (each result then made distinct): its answer is what the result path reads
    payloads = [p for _, p in tool_outputs(600, 8)]
    steps = [0] * sessions
    out: list[tuple] = []
    for i, (name, args) in enumerate(calls):
        k = rng.randrange(sessions)
        sid = f"s-{k}"
        if usage and steps[k] % 12 == 0:
            if steps[k]:
                out.append((sid, "turn_end"))
            out.append((sid, "turn_start"))
        steps[k] += 1
        if rng.random() < 1 / 3:
            out.append((sid, "text", "Checking the handler next."))
        out.append((sid, "call", name, args))
        out.append((sid, "result", name, payloads[i % 8][:-8] + f"{i:08d}"))
        if usage:
            out.append((sid, "usage", "claude-sonnet-4-5", 20_000 + 50 * steps[k], 300, 0.002))
        if len(out) >= events:
            break
    return out[:events]
