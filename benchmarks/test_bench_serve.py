"""A bounded load test of `tripwire serve` on loopback: 64 concurrent clients, each its own
session, each posting REQUESTS batches of interchange events (a turn of 6 varied tool calls
and their results). Reports events/s over the whole run and the p50/p99 latency of one request.

    python -m pytest benchmarks/test_bench_serve.py -q -s

The server is a real `python -m tripwire serve` process (uvicorn, one worker) on 127.0.0.1;
the clients are one asyncio process (httpx). Both share this machine's cores, so the figure
is a floor. Without a store, and with a SQLite store (every trip and spend row fsync'd).
"""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

httpx = pytest.importorskip("httpx")
pytest.importorskip("starlette")

CLIENTS = 64
REQUESTS = 15  # per client
TOKEN = "load-test-token"


def _turn(client: int, n: int) -> list[dict[str, object]]:
    events: list[dict[str, object]] = [{"type": "turn_start"}]
    for k in range(6):
        call_id = f"c{n}-{k}"
        events.append({"type": "call", "name": "read_file", "id": call_id,
                       "args": {"path": f"src/{client}/{n}/{k}.py"}})
        events.append({"type": "result", "name": "read_file", "id": call_id,
                       "payload": f"contents of file {k} of turn {n}"})
    events.append({"type": "usage", "cost_usd": 0.001})
    events.append({"type": "turn_end"})
    return events


async def _client(url: str, client: int, latencies: list[float]) -> int:
    sent = 0
    async with httpx.AsyncClient(base_url=url, timeout=60,
                                 headers={"Authorization": f"Bearer {TOKEN}"}) as http:
        for n in range(REQUESTS):
            body = _turn(client, n)
            start = time.perf_counter()
            r = await http.post(f"/sessions/load-{client}/events", json=body)
            latencies.append(time.perf_counter() - start)
            assert r.status_code == 200, r.text
            assert r.json()["halted"] is False
            sent += len(body)
    return sent


async def _load(url: str) -> tuple[int, float, list[float]]:
    latencies: list[float] = []
    start = time.perf_counter()
    sent = await asyncio.gather(*(_client(url, c, latencies) for c in range(CLIENTS)))
    return sum(sent), time.perf_counter() - start, latencies


@pytest.mark.benchmark(group="serve")
@pytest.mark.parametrize("store", ["none", "sqlite"])
def test_serve_64_clients(benchmark, tmp_path: Path, store: str) -> None:
    (tmp_path / "token").write_text(TOKEN)
    args = [sys.executable, "-m", "tripwire", "serve", "--port", "0",
            "--token-file", str(tmp_path / "token")]
    if store == "sqlite":
        args += ["--store", str(tmp_path / "load.db")]
    proc = subprocess.Popen(args, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True,
                            env={**os.environ, "TRIPWIRE_SERVE_TOKEN": ""})
    try:
        assert proc.stdout is not None
        url = proc.stdout.readline().rsplit(" ", 1)[1].strip()
        result = benchmark.pedantic(lambda: asyncio.run(_load(url)), rounds=1, iterations=1)
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.wait(timeout=60)
    events, seconds, latencies = result
    latencies.sort()
    p50 = latencies[len(latencies) // 2] * 1000
    p99 = latencies[min(len(latencies) - 1, len(latencies) * 99 // 100)] * 1000
    benchmark.extra_info.update(clients=CLIENTS, requests=len(latencies), events=events,
                                events_per_s=round(events / seconds), p50_ms=round(p50, 1),
                                p99_ms=round(p99, 1))
    print(f"\nserve ({store} store): {CLIENTS} clients, {len(latencies)} requests, {events} "
          f"events in {seconds:.2f} s: {events / seconds:,.0f} events/s; per request "
          f"p50 {p50:.1f} ms, p99 {p99:.1f} ms")


# --- one client, one request at a time: a reused keep-alive connection against a new one ------

SEQUENTIAL = 200  # requests per way, alternating in rounds of 20 so machine drift hits both


@pytest.mark.benchmark(group="serve-keep-alive")
def test_serve_keep_alive_is_not_slower_than_a_new_connection(benchmark, tmp_path: Path
                                                              ) -> None:
    """Per-request latency of one client posting one event at a time, on one reused
    keep-alive connection and on a new connection per request (``http.client``, the lightest
    client, so the server's time shows), in one run. Before the listening socket was made with
    IPPROTO_TCP (so asyncio sets TCP_NODELAY on each connection), the reused connection took
    ~44 ms per request against ~1 ms: Nagle held the response's second write until the
    client's delayed ACK (issue 23)."""
    import http.client
    import json
    import statistics

    (tmp_path / "token").write_text(TOKEN)
    proc = subprocess.Popen([sys.executable, "-m", "tripwire", "serve", "--port", "0",
                             "--token-file", str(tmp_path / "token")],
                            stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    headers = {"Authorization": f"Bearer {TOKEN}", "Content-Type": "application/json"}

    def post(conn: http.client.HTTPConnection, session: str, i: int) -> None:
        body = json.dumps({"type": "call", "name": "read_file", "args": {"path": f"{i}.py"}})
        conn.request("POST", f"/sessions/{session}/events", body=body, headers=headers)
        response = conn.getresponse()
        response.read()
        assert response.status == 200

    def run() -> tuple[list[float], list[float]]:
        kept: list[float] = []
        fresh: list[float] = []
        reused = http.client.HTTPConnection(host, port, timeout=30)
        post(reused, "kept", -1)  # the connection is open before the first timed request
        for start in range(0, SEQUENTIAL, 20):
            for i in range(start, start + 20):
                t = time.perf_counter()
                post(reused, "kept", i)
                kept.append(time.perf_counter() - t)
            for i in range(start, start + 20):
                t = time.perf_counter()
                one = http.client.HTTPConnection(host, port, timeout=30)
                post(one, "fresh", i)
                one.close()
                fresh.append(time.perf_counter() - t)
        reused.close()
        return kept, fresh

    try:
        assert proc.stdout is not None
        url = proc.stdout.readline().rsplit(" ", 1)[1].strip()
        host, port = url.removeprefix("http://").rsplit(":", 1)
        kept, fresh = benchmark.pedantic(run, rounds=1, iterations=1)
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.wait(timeout=60)
    kept_ms = statistics.median(kept) * 1000
    fresh_ms = statistics.median(fresh) * 1000
    benchmark.extra_info.update(keep_alive_median_ms=round(kept_ms, 2),
                                new_connection_median_ms=round(fresh_ms, 2),
                                ratio=round(kept_ms / fresh_ms, 2))
    print(f"\nserve, one client, {SEQUENTIAL} requests each way: keep-alive median "
          f"{kept_ms:.2f} ms, new connection median {fresh_ms:.2f} ms "
          f"(ratio {kept_ms / fresh_ms:.2f})")
    # a ratio in one run, not an absolute time: a reused connection saves the handshake, so
    # it must not be slower than a new one (it was ~40x slower with Nagle in the way)
    assert kept_ms <= fresh_ms
