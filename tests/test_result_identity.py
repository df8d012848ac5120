"""Results compared by their answer (SPEC §12.1) in the detectors, both engines, exact events:
a re-run whose output differs only by a volatile span is a loop, no-new-state sees re-reads
whose output differs only by a timing, empty results are no payload, and [results] configures
the classes and the JSON keys per tool."""

from __future__ import annotations

from typing import Any

import pytest

from tripwire import Guardrails, GuardrailsConfig, Watchdog, WatchdogConfig
from tripwire.session.config import watchdog_config
from tripwire.signals import ResultsConfig

#: A real SWE-agent session's persistent shell: each `cd` that fails says where it is in the
#: shell's own history, so every answer differs (seen repeating 19-25 times until the limit).
CD = ("bash", '{"command": "cd fastjson/ && ls"}')


def cd_output(i: int) -> str:
    return f"/bin/bash: line {11301 + 15 * i}: cd: fastjson/: No such file or directory\n"


def pytest_output(i: int) -> str:
    t = (0.53, 0.61, 0.48, 0.57, 0.66, 0.5)[i % 6]
    return (
        "============================= test session starts ==============================\n"
        "platform linux -- Python 3.11.9, pytest-8.2.0, pluggy-1.5.0\n"
        "rootdir: /testbed\ncollected 15 items\n\n"
        "tests/test_api.py ..............F                                         [100%]\n\n"
        "=================================== FAILURES ===================================\n"
        "_________________________________ test_retry __________________________________\n"
        "E       assert 3 == 4\n"
        f"========================= 1 failed, 14 passed in {t}s =========================\n")


#: (tool, args, output of the i-th run): one call re-run, its output different every time
#: only by one volatile class.
RERUNS: dict[str, tuple[str, str, Any]] = {
    "a shell's line counter": (*CD, cd_output),
    "a test run's timing": ("bash", '{"command": "python -m pytest tests/test_api.py"}',
                            pytest_output),
    "a server's pid": ("bash", '{"command": "python serve.py"}', lambda i: (
        f"Starting server (pid {48211 + 7 * i})\nOSError: [Errno 98] Address already in use\n")),
    "an object's address": ("python", '{"code": "print(load())"}', lambda i: (
        f"<config.Loader object at 0x7f{3 + i:x}a9c2d1e{i:02x}0>\n")),
    "a temporary directory": ("bash", '{"command": "python build.py"}', lambda i: (
        f"error: cannot write /tmp/tmp{'abcdef'[i]}x{i}q2_z/out.o: disk full\n")),
    "an ISO timestamp": ("bash", '{"command": "tail -1 /var/log/app.log"}', lambda i: (
        f"2026-12-04T10:{22 + i}:{(31 + 7 * i) % 60:02d}.{123 + i}Z ERROR db unreachable\n")),
    "an epoch": ("http_get", '{"url": "http://localhost:8080/health"}', lambda i: (
        f'{{"status": "degraded", "checked_at": {1712345678 + 30 * i}}}')),
    "a UUID": ("http_get", '{"url": "http://localhost:8080/jobs"}', lambda i: (
        f"503 Service Unavailable (request {i}50e8400-e29b-41d4-a716-44665544000{i})")),
    "a request id": ("http_get", '{"url": "http://localhost:8080/jobs"}', lambda i: (
        f"HTTP/1.1 503\nx-request-id: 9f86d08188{i}c7d659a2f\n\nupstream timeout")),
}


def replay(wd: Watchdog, trace: list[tuple]) -> list[tuple[int, str]]:
    got = []
    for index, e in enumerate(trace):
        if e[0] == "call":
            alerts = wd.observe_call(e[1], e[2])
        elif e[0] == "result":
            alerts = wd.observe_result(e[1], payload=e[2], error=e[3] if len(e) > 3 else None)
        elif e[0] == "text":
            alerts = wd.observe_text(e[1])
        else:
            alerts = wd.end_turn()
        for a in alerts:
            assert a.event == index
            got.append((index, a.signal))
    return got


def reruns(tool: str, args: str, output: Any, n: int) -> list[tuple]:
    trace: list[tuple] = []
    for i in range(n):
        trace += [("call", tool, args), ("result", tool, output(i))]
    return trace


@pytest.mark.parametrize("case", list(RERUNS))
def test_a_rerun_differing_only_by_a_volatile_span_trips_at_the_fifth_call(
        implementation: str, case: str) -> None:
    tool, args, output = RERUNS[case]
    outputs = {output(i) for i in range(6)}
    assert len(outputs) == 6  # every byte-for-byte payload differs
    trace = reruns(tool, args, output, 6)
    # events 0..7: four runs; 8: the fifth call
    assert replay(Watchdog(implementation=implementation), trace) == [(8, "repeated-tool-call")]


def test_the_line_counter_loop_a_recorded_run_repeated_until_its_limit(
        implementation: str) -> None:
    # SWE-agent: thought, `cd fastjson/ && ls`, the shell's complaint, 20 times over
    trace: list[tuple] = []
    for i in range(20):
        trace += [("text", "Let me look at the fastjson directory first."), ("call", *CD),
                  ("result", CD[0], cd_output(i))]
    wd = Watchdog(implementation=implementation)
    assert replay(wd, trace) == [(13, "repeated-tool-call"), (20, "no-new-state")]
    assert wd.repeat_run == 20


def test_a_class_turned_off_is_progress_again(implementation: str) -> None:
    tool, args, output = RERUNS["a request id"]
    keep_hashes = WatchdogConfig(results=ResultsConfig(
        volatile=("durations", "timestamps", "pids", "line_counters", "temp_paths")))
    # a host whose polls report progress as a hash: each new hash is a change, a poll
    assert replay(Watchdog(keep_hashes, implementation=implementation),
                  reruns(tool, args, output, 6)) == []
    assert replay(Watchdog(keep_hashes, implementation=implementation),
                  reruns(*RERUNS["a test run's timing"], 6)) == [(8, "repeated-tool-call")]


def test_rereads_differing_only_by_a_timing_are_already_seen(implementation: str) -> None:
    # seven different calls whose outputs are one build log but for its timings
    trace: list[tuple] = [("text", "Checking the build.")]
    for i in range(7):
        trace += [("call", "read_file", f'{{"path": "logs/build-{i}.log"}}'),
                  ("result", "read_file", f"[{10 + i}:02:11] build finished in {1.2 + i}s\n")]
    # the first is new, the next six already seen: no-new-state at the seventh result
    assert replay(Watchdog(implementation=implementation), trace) == [(14, "no-new-state")]


@pytest.mark.parametrize("empty", ["", "   ", "\n\n", None])
def test_empty_results_are_never_already_seen(implementation: str, empty: str | None) -> None:
    # writes that return nothing are not a stall (SPEC §12.1)
    trace: list[tuple] = []
    for i in range(10):
        trace += [("call", "write_file", f'{{"path": "out/{i}.txt"}}'),
                  ("result", "write_file", empty)]
    assert replay(Watchdog(implementation=implementation), trace) == []
    # and one breaks a run of seen payloads, as a result without payload does
    seen = [("result", "read_file", "same")] * 6
    wd = Watchdog(implementation=implementation)
    assert replay(wd, seen[:4] + [("result", "read_file", empty)] + seen[:5]) == []
    assert wd.stale_results == 5  # 3 seen, reset by the empty one, then 5 seen


def test_json_keys_ignored_globally_and_per_tool(implementation: str) -> None:
    def health(i: int) -> str:
        return (f'{{"status": "degraded", "request_id": "req-{i}a", "etag": "W/{i}",'
                f' "replicas": {{"ready": 2, "want": 3}}}}')

    def rerun(tool: str) -> list[tuple]:
        return reruns(tool, '{"url": "http://api/health"}', health, 6)

    plain = Watchdog(implementation=implementation)
    assert replay(plain, rerun("http_get")) == []  # every answer differs: a poll that moves
    config = WatchdogConfig(results=ResultsConfig(
        ignore_json_keys=("request_id",), tools={"http_get": ("etag",)}))
    assert replay(Watchdog(config, implementation=implementation), rerun("http_get")) == [
        (8, "repeated-tool-call")]
    # another tool's etag is not ignored: its answers still differ
    assert replay(Watchdog(config, implementation=implementation), rerun("curl")) == []
    # but its request_id is (the global key)
    same_etag = reruns("curl", '{"url": "http://api/health"}', lambda i: (
        f'{{"status": "degraded", "request_id": "req-{i}a", "etag": "W/1"}}'), 6)
    assert replay(Watchdog(config, implementation=implementation), same_etag) == [
        (8, "repeated-tool-call")]


def test_results_from_a_config_file(tmp_path: Any, implementation: str) -> None:
    path = tmp_path / "tripwire.toml"
    path.write_text('[results]\nvolatile = ["durations"]\nignore_json_keys = ["request_id"]\n'
                    '[results.tools.http_get]\nignore_json_keys = ["etag"]\n')
    config = GuardrailsConfig.from_file(str(path), mode="enforce", unattended=False)
    resolved = config.resolve().watchdog
    assert resolved.results == ResultsConfig(volatile=("durations",),
                                             ignore_json_keys=("request_id",),
                                             tools={"http_get": ("etag",)})
    settings = resolved.engine_settings()
    assert settings.answer_volatile == 1
    assert settings.ignore_json_keys_by_tool == (("http_get", ("request_id", "etag")),)
    assert watchdog_config({"results": {"volatile": []}}).engine_settings().answer_volatile == 0
    # through Guardrails, enforce: the timing-only re-run halts the session at the fifth call
    g = Guardrails(config, session_id="s", implementation=implementation)
    g.start_turn()
    tool, args, output = RERUNS["a test run's timing"]
    actions = []
    for i in range(5):
        actions.append(g.on_call(tool, args).action)
        if i < 4:
            g.on_result(tool, payload=output(i))
    assert actions == ["continue"] * 4 + ["halt_session"]


def test_a_hook_observes_a_payload_as_its_answer(implementation: str) -> None:
    """The live hooks store a result as a digest; it is the answer's, in a spelling the
    scanner leaves alone (a hex digest would be one long hex id to it: every result equal)."""
    from tripwire.engine import select as _engine
    from tripwire.harnesses.hooks._session import payload_digest

    settings = WatchdogConfig().engine_settings()
    engine = _engine.load(implementation)

    def digest(payload: Any) -> str | None:
        return payload_digest(payload, settings, "bash", engine)

    assert digest("1 failed in 0.53s") == digest("1 failed in 0.61s") != digest("2 failed in 0.5s")
    assert digest("  \n") is None and digest(None) is None
    for i in range(3000):
        text = digest(f"output {i}")
        assert text is not None and engine.scan_answer(text.encode()) is None, text
