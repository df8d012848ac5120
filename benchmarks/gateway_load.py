"""The pieces of the gateway benchmark (benchmarks/test_bench_gateway.py), usable alone:

    python benchmarks/gateway_load.py upstream PORT_FILE      # the fake model server

A fake upstream and a load client, each a bare asyncio protocol on uvloop (when installed), so
that neither costs the 2-core machine more than the gateway it measures: the upstream answers
every POST with one canned Messages response (whole, or streamed: a first frame at once, then
``DELTAS`` text deltas ``GAP`` seconds apart); the client keeps its connections alive and
times each request to its first and last byte.
"""

from __future__ import annotations

import asyncio
import json
import sys
import time
from typing import Any

DELTAS = 5
GAP = 0.02  # seconds between a streamed response's text deltas

_MESSAGE = {"id": "msg_1", "type": "message", "role": "assistant", "model": "claude-sonnet-4-5",
            "content": [{"type": "text", "text": "all done here"}], "stop_reason": "end_turn",
            "stop_sequence": None, "usage": {"input_tokens": 1200, "output_tokens": 40,
                                             "cache_read_input_tokens": 0,
                                             "cache_creation_input_tokens": 0}}
WHOLE = json.dumps(_MESSAGE).encode()


def _frame(event: str, data: Any) -> bytes:
    return f"event: {event}\ndata: {json.dumps(data)}\n\n".encode()


FIRST = _frame("message_start", {"type": "message_start", "message": {
    **_MESSAGE, "content": [], "stop_reason": None}}) + _frame(
    "content_block_start", {"type": "content_block_start", "index": 0,
                            "content_block": {"type": "text", "text": ""}})


def delta(i: int) -> bytes:
    return _frame("content_block_delta", {"type": "content_block_delta", "index": 0,
                                          "delta": {"type": "text_delta", "text": f"<{i}>"}})


LAST = _frame("content_block_stop", {"type": "content_block_stop", "index": 0}) + _frame(
    "message_delta", {"type": "message_delta", "delta": {"stop_reason": "end_turn"},
                      "usage": {"output_tokens": 40}}) + _frame("message_stop",
                                                                 {"type": "message_stop"})


def _chunk(data: bytes) -> bytes:
    return b"%x\r\n%s\r\n" % (len(data), data)


class Upstream(asyncio.Protocol):
    """POST anything: ``"stream": true`` in the body gets the stream, else the whole body.
    A ``hold`` number in the body holds the stream's end that many seconds."""

    def connection_made(self, transport: Any) -> None:
        self.transport = transport
        self.buffer = b""

    def data_received(self, data: bytes) -> None:
        self.buffer += data
        while True:
            head_end = self.buffer.find(b"\r\n\r\n")
            if head_end < 0:
                return
            head = self.buffer[:head_end].lower()
            at = head.find(b"content-length:")
            length = int(head[at + 15:head.find(b"\r\n", at) if head.find(b"\r\n", at) > 0
                              else None]) if at >= 0 else 0
            end = head_end + 4 + length
            if len(self.buffer) < end:
                return
            body, self.buffer = self.buffer[head_end + 4:end], self.buffer[end:]
            if b'"stream": true' in body or b'"stream":true' in body:
                hold = 0.0
                if b'"hold"' in body:
                    hold = float(json.loads(body)["hold"])
                asyncio.ensure_future(self.stream(hold))
            else:
                self.transport.write(b"HTTP/1.1 200 OK\r\ncontent-type: application/json\r\n"
                                     b"content-length: %d\r\n\r\n%s" % (len(WHOLE), WHOLE))

    async def stream(self, hold: float) -> None:
        write = self.transport.write
        write(b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\n"
              b"transfer-encoding: chunked\r\n\r\n" + _chunk(FIRST))
        for i in range(DELTAS):
            await asyncio.sleep(GAP)
            if self.transport.is_closing():
                return
            write(_chunk(delta(i) + str(time.perf_counter()).encode().join((b": t=", b"\n\n"))))
        if hold:
            await asyncio.sleep(hold)
        if not self.transport.is_closing():
            write(_chunk(LAST) + b"0\r\n\r\n")


def request_bytes(port: int, body: bytes, session: str = "bench") -> bytes:
    return (b"POST /v1/messages HTTP/1.1\r\nhost: 127.0.0.1:%d\r\ncontent-type: "
            b"application/json\r\nx-api-key: k\r\nanthropic-version: 2023-06-01\r\n"
            b"x-tripwire-session: %s\r\ncontent-length: %d\r\n\r\n%s"
            % (port, session.encode(), len(body), body))


class Client:
    """One keep-alive connection: ``await request(raw)`` -> (status, first byte s, last byte
    s, the body's bytes, arrival times of the marked deltas)."""

    def __init__(self, reader: Any, writer: Any):
        self.reader, self.writer = reader, writer

    @classmethod
    async def open(cls, port: int) -> Client:
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
        return cls(reader, writer)

    async def request(self, raw: bytes) -> tuple[int, float, float, bytes, list[float]]:
        start = time.perf_counter()
        self.writer.write(raw)
        head = await self.reader.readuntil(b"\r\n\r\n")
        first = time.perf_counter() - start
        status = int(head.split(b" ", 2)[1])
        lower = head.lower()
        body, marks = b"", []
        if b"transfer-encoding: chunked" in lower:
            while True:
                size = int((await self.reader.readuntil(b"\r\n")).strip(), 16)
                data = await self.reader.readexactly(size + 2)
                if size == 0:
                    break
                now = time.perf_counter()
                marks += [now] * data.count(b": t=")  # deltas that came in one chunk: each
                body += data[:-2]
        else:
            at = lower.find(b"content-length:")
            length = int(lower[at + 15:lower.find(b"\r\n", at)])
            body = await self.reader.readexactly(length)
        return status, first, time.perf_counter() - start, body, marks

    def close(self) -> None:
        self.writer.close()


def _loop() -> None:
    try:
        import uvloop

        uvloop.install()
    except ImportError:
        pass


def serve_upstream(port_file: str) -> None:
    _loop()

    async def main() -> None:
        server = await asyncio.get_running_loop().create_server(Upstream, "127.0.0.1", 0,
                                                                backlog=4096)
        with open(port_file, "w") as f:
            f.write(str(server.sockets[0].getsockname()[1]))
        await server.serve_forever()
    asyncio.run(main())


if __name__ == "__main__":
    if sys.argv[1] == "upstream":
        serve_upstream(sys.argv[2])
