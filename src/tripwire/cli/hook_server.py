"""A resident hook server, so an invocation does not pay Python's imports on every event.

    tripwire hook serve --socket ~/.local/state/tripwire/hook.sock &
    export TRIPWIRE_HOOK_SOCKET=~/.local/state/tripwire/hook.sock   # in the harness's environment

With ``TRIPWIRE_HOOK_SOCKET`` set, ``tripwire hook <harness>`` sends its options and stdin to the
server over that Unix socket and prints the server's answer; without a server listening (or on
any error talking to it) it runs the event itself, as it does without the variable. The server
answers one request at a time with exactly what the command would have printed: each request
reads the session from the store afresh (other processes write it too). The store key and the
engine come from the server's environment; the socket is the user's alone (mode 0600).
"""

from __future__ import annotations

import io
import json
import os
import socket
from collections.abc import Callable
from typing import Any

__all__ = ["SOCKET_ENV", "serve", "call"]

SOCKET_ENV = "TRIPWIRE_HOOK_SOCKET"
_LIMIT = 64 << 20  # bytes one request or answer may take


def call(path: str, argv: list[str], stdin: str, timeout: float = 5.0) -> dict[str, Any] | None:
    """The server's answer (``code``, ``stdout``, ``stderr``), or None when there is none."""
    try:
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as s:
            s.settimeout(timeout)
            s.connect(path)
            s.sendall(json.dumps({"argv": argv, "stdin": stdin}).encode())
            s.shutdown(socket.SHUT_WR)
            answer = json.loads(_read(s))
    except (OSError, ValueError):
        return None
    ok = isinstance(answer, dict) and isinstance(answer.get("code"), int) and all(
        isinstance(answer.get(k), str) for k in ("stdout", "stderr"))
    return answer if ok else None


def serve(path: str, main: Callable[..., int], idle_timeout: float | None = None) -> int:
    """Answer hook requests on ``path`` with ``main`` (the hook command's: argv, stdin, stdout,
    stderr) until idle for ``idle_timeout`` seconds (forever when None)."""
    from ..harnesses.hooks import _contract, _session, claude_code, codex, cursor, gemini_cli  # noqa: F401 - once, here

    if os.path.exists(path):
        os.unlink(path)  # a stale socket of a server that died
    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as server:
        old = os.umask(0o177)
        try:
            server.bind(path)
        finally:
            os.umask(old)
        server.listen(16)
        server.settimeout(idle_timeout)
        while True:
            try:
                conn, _ = server.accept()
            except TimeoutError:
                os.unlink(path)
                return 0
            with conn:
                conn.settimeout(10.0)
                try:
                    request = json.loads(_read(conn))
                    out, err = io.StringIO(), io.StringIO()
                    code = main(list(request["argv"]), io.StringIO(request["stdin"]), out, err,
                                close=False,  # the store stays open between requests
                                origin=_peer(conn))
                    conn.sendall(json.dumps({"code": code, "stdout": out.getvalue(),
                                             "stderr": err.getvalue()}).encode())
                except (OSError, ValueError, KeyError, TypeError):
                    continue  # that client falls back to running the event itself


def _peer(conn: socket.socket) -> int | None:
    """The client's process id (Linux ``SO_PEERCRED``), None where it cannot be had."""
    import struct

    option = getattr(socket, "SO_PEERCRED", None)
    if option is None:
        return None
    try:
        pid, _, _ = struct.unpack("3i", conn.getsockopt(socket.SOL_SOCKET, option,
                                                        struct.calcsize("3i")))
    except OSError:
        return None
    return pid or None


def _read(s: socket.socket) -> bytes:
    chunks, size = [], 0
    while chunk := s.recv(65536):
        chunks.append(chunk)
        size += len(chunk)
        if size > _LIMIT:
            raise ValueError("request too large")
    return b"".join(chunks)
