"""``tripwire gateway`` against a local fake upstream (``gateway_load.py``), all on 127.0.0.1:

- added latency: p50 of one non-streamed request through the gateway minus calling the
  upstream directly (one connection, requests one after another);
- streaming time to first byte, through the gateway minus direct;
- each text delta forwarded as it comes: the upstream stamps each delta with its send time, the
  client its arrival, through the gateway (the deltas are ``GAP`` apart: a gateway that waited
  for the next one would add that much);
- throughput: requests/s through the gateway with 32 connections for ``SECONDS``, every
  request a new session (the worst case), then one session per connection (32 agents, each
  request its agent's next turn);
- the gateway's own CPU per request in the throughput run (its process's user + system time
  from /proc over the requests): the rate one core of the gateway sustains, apart from the load
  client, the upstream and whatever else shares the machine;
- a session's memory: the gateway's resident set after the throughput run (every request a new
  session, kept) less before, per session;
- 1,000 concurrent streams (each held open a second by the upstream) without an error.

    python -m pytest benchmarks/test_bench_gateway.py -q -s

The gateway is a real ``python -m tripwire gateway`` process (uvicorn, one worker, native
engine, no store, ``enforce``), the upstream and the client processes of their own: the three
share the machine's 2 cores, so every figure is a floor. Each session is its own (every
request a turn of its own); the figures are printed and written to the benchmark's extra_info.
"""

from __future__ import annotations

import asyncio
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

import pytest

pytest.importorskip("httpx")
pytest.importorskip("starlette")
sys.path.insert(0, str(Path(__file__).parent))
import gateway_load as load  # noqa: E402

SECONDS = 5.0
SEQUENTIAL = 400
CONCURRENT_STREAMS = 1000


def _start(tmp: Path) -> tuple[subprocess.Popen, subprocess.Popen, int, int]:
    port_file = tmp / "upstream.port"
    upstream = subprocess.Popen([sys.executable, str(Path(load.__file__)), "upstream",
                                 str(port_file)])
    deadline = time.monotonic() + 10
    while not port_file.exists() or not port_file.read_text():
        assert time.monotonic() < deadline, "the fake upstream did not start"
        time.sleep(0.02)
    up = int(port_file.read_text())
    gateway = subprocess.Popen([sys.executable, "-m", "tripwire", "gateway", "--upstream",
                                f"http://127.0.0.1:{up}", "--listen", "127.0.0.1:0"],
                               stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True,
                               env={**os.environ, "TRIPWIRE_IMPLEMENTATION": "native"})
    assert gateway.stdout is not None
    line = gateway.stdout.readline()
    assert "listening on" in line, line
    return upstream, gateway, up, int(line.rsplit(":", 1)[1])


def _body(stream: bool, n: int, hold: float = 0.0) -> bytes:
    body = {"model": "claude-sonnet-4-5", "max_tokens": 64, "stream": stream,
            "messages": [{"role": "user", "content": f"request {n}: summarize the file"}]}
    if hold:
        body["hold"] = hold
    return json.dumps(body).encode()


async def _sequential(port: int, stream: bool) -> tuple[list[float], list[float], list[float]]:
    client = await load.Client.open(port)
    firsts, totals, lags = [], [], []
    for n in range(SEQUENTIAL if not stream else SEQUENTIAL // 8):
        status, first, total, body, marks = await client.request(
            load.request_bytes(port, _body(stream, n), f"seq-{n}"))
        assert status == 200, body[:300]
        firsts.append(first)
        totals.append(total)
        if stream:
            sent = [float(x.split(b"\n")[0]) for x in body.split(b": t=")[1:]]
            assert len(sent) == len(marks) == load.DELTAS
            lags += [arrived - at for arrived, at in zip(marks, sent)]
    client.close()
    return firsts, totals, lags


async def _throughput(port: int, connections: int = 32,
                      fresh: bool = True) -> tuple[int, int, float]:
    """``fresh``: every request a new session's first (the worst case: a session made per
    request); else one session per connection, each request the next turn of its agent."""
    done = errors = 0
    stop = time.perf_counter() + SECONDS

    async def worker(k: int) -> None:
        nonlocal done, errors
        client = await load.Client.open(port)
        n = 0
        while time.perf_counter() < stop:
            status, *_ = await client.request(load.request_bytes(
                port, _body(False, n), f"load-{k}-{n}" if fresh else f"agent-{k}"))
            n += 1
            done += 1
            errors += status != 200
        client.close()
    start = time.perf_counter()
    await asyncio.gather(*(worker(k) for k in range(connections)))
    return done, errors, time.perf_counter() - start


async def _streams(port: int) -> tuple[int, int]:
    async def one(k: int) -> bool:
        try:
            client = await load.Client.open(port)
            status, _, _, body, marks = await client.request(load.request_bytes(
                port, _body(True, k, hold=1.0), f"stream-{k}"))
            client.close()
            return status == 200 and b"message_stop" in body and len(marks) == load.DELTAS
        except (OSError, asyncio.IncompleteReadError):
            return False
    results = await asyncio.gather(*(one(k) for k in range(CONCURRENT_STREAMS)))
    return sum(results), len(results) - sum(results)


def _cpu_and_rss(pid: int) -> tuple[float, int]:
    """A process's user + system CPU seconds and resident bytes (Linux /proc)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    ticks = os.sysconf("SC_CLK_TCK")
    pages = int(Path(f"/proc/{pid}/statm").read_text().split()[1])
    return (int(fields[11]) + int(fields[12])) / ticks, pages * os.sysconf("SC_PAGE_SIZE")


def _ms(values: list[float]) -> float:
    return round(statistics.median(values) * 1000, 3)


@pytest.mark.benchmark(group="gateway")
def test_gateway_overhead_throughput_and_streams(benchmark, tmp_path: Path) -> None:
    upstream, gateway, up, gw = _start(tmp_path)
    try:
        def run() -> dict[str, float]:
            load._loop()
            figures: dict[str, float] = {}
            asyncio.run(_sequential(gw, False))  # warm-up: connections, first sessions
            _, direct, _ = asyncio.run(_sequential(up, False))
            _, through, _ = asyncio.run(_sequential(gw, False))
            figures["direct_p50_ms"] = _ms(direct)
            figures["gateway_p50_ms"] = _ms(through)
            figures["added_p50_ms"] = round(figures["gateway_p50_ms"] -
                                            figures["direct_p50_ms"], 3)
            first_direct, _, _ = asyncio.run(_sequential(up, True))
            first_gateway, _, lags = asyncio.run(_sequential(gw, True))
            figures["ttfb_direct_ms"] = _ms(first_direct)
            figures["ttfb_gateway_ms"] = _ms(first_gateway)
            figures["ttfb_added_ms"] = round(figures["ttfb_gateway_ms"] -
                                             figures["ttfb_direct_ms"], 3)
            figures["delta_lag_p50_ms"] = _ms(lags)
            figures["delta_lag_max_ms"] = round(max(lags) * 1000, 3)
            figures["delta_gap_ms"] = load.GAP * 1000
            cpu, rss = _cpu_and_rss(gateway.pid)
            done, errors, took = asyncio.run(_throughput(gw))
            cpu_after, rss_after = _cpu_and_rss(gateway.pid)
            figures["requests_per_s"] = round(done / took)
            figures["throughput_errors"] = errors
            figures["gateway_cpu_ms_per_request"] = round((cpu_after - cpu) * 1000 / done, 3)
            figures["requests_per_gateway_cpu_s"] = round(done / max(cpu_after - cpu, 1e-9))
            figures["sessions"] = done
            figures["rss_per_session_bytes"] = round((rss_after - rss) / done)
            cpu, _ = _cpu_and_rss(gateway.pid)
            done, errors, took = asyncio.run(_throughput(gw, fresh=False))
            cpu_after, _ = _cpu_and_rss(gateway.pid)
            figures["requests_per_s_session_per_connection"] = round(done / took)
            figures["throughput_errors"] += errors
            figures["gateway_cpu_ms_per_request_session_per_connection"] = round(
                (cpu_after - cpu) * 1000 / done, 3)
            ok, failed = asyncio.run(_streams(gw))
            figures["concurrent_streams_ok"] = ok
            figures["concurrent_streams_failed"] = failed
            return figures

        figures = benchmark.pedantic(run, rounds=1, iterations=1)
    finally:
        for p in (gateway, upstream):
            p.terminate()
            p.wait(10)
    benchmark.extra_info.update(figures)
    print("\n" + json.dumps(figures, indent=1))
    assert figures["throughput_errors"] == 0 and figures["concurrent_streams_failed"] == 0
