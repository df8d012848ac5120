"""Serving an ASGI application on uvicorn, as both servers do: the socket bound first (so
``--port 0`` can be announced), TCP_NODELAY on it, a graceful stop on SIGINT/SIGTERM."""

from __future__ import annotations

import signal
import socket
import threading
from collections.abc import Callable
from typing import Any, Literal

from ..errors import ConfigError

__all__ = ["serve_app"]


def serve_app(app: Any, host: str, port: int, announce: Callable[[str], object] | None = None,
              *, lifespan: Literal["auto", "on", "off"] = "off") -> None:
    """Serve ``app`` until SIGINT/SIGTERM. The socket is bound before ``announce`` is told its
    address (port 0: a free port)."""
    import uvicorn

    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    # IPPROTO_TCP explicitly: asyncio sets TCP_NODELAY on a connection only when its socket
    # says proto == IPPROTO_TCP, and a socket made with proto 0 (the default) does not. Without
    # it a reused keep-alive connection waits ~40 ms per request (Nagle holding the response's
    # second write until the client's delayed ACK: benchmarks/test_bench_serve.py). Linux also
    # hands the listening socket's TCP_NODELAY to every accepted connection.
    sock = socket.socket(family, socket.SOCK_STREAM, socket.IPPROTO_TCP)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    try:
        sock.bind((host, port))
    except OSError as exc:
        sock.close()
        raise ConfigError(f"cannot listen on {host}:{port} ({exc.strerror})") from None
    sock.listen(4096)
    bound = sock.getsockname()[1]
    shown = f"[{host}]" if family == socket.AF_INET6 else host
    server = uvicorn.Server(uvicorn.Config(app, log_level="warning", access_log=False,
                                           lifespan=lifespan, backlog=4096))
    if announce is not None:
        announce(f"listening on http://{shown}:{bound}")
    # uvicorn shuts down gracefully on SIGINT/SIGTERM, then re-raises the signal to the handler
    # it found: make that one a no-op, so the rows are flushed and the exit is clean (0).
    if threading.current_thread() is threading.main_thread():
        for sig in (signal.SIGINT, signal.SIGTERM):
            signal.signal(sig, lambda *_: None)
    try:
        server.run(sockets=[sock])
    finally:
        sock.close()
