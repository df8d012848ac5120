"""A resident hook server, so an invocation does not pay Python's imports on every event.

    tripwire hook serve --socket ~/.local/state/tripwire/hook.sock &
    export TRIPWIRE_HOOK_SOCKET=~/.local/state/tripwire/hook.sock   # in the harness's environment

With ``TRIPWIRE_HOOK_SOCKET`` set, ``tripwire hook <harness>`` sends its options and stdin to the
server over that Unix socket and prints the server's answer; without a server listening (or on
any error talking to it) it runs the event itself, as it does without the variable. The server
answers one request at a time with exactly what the command would have printed: each request
reads the session from the store afresh (other processes write it too). The store key and the
engine come from the server's environment; the socket is the user's alone (mode 0600).

One frame serves both clients, this module's ``call`` and the native ``tripwire-hook``
(``client/tripwire_hook.cpp``, no Python start), in both directions starting with ``TWH1``
(integers little-endian u32): a request is a count and that many strings (length, bytes) —
the number of arguments, the arguments, the client's working directory, its
``$TRIPWIRE_STORE``, ``$XDG_STATE_HOME`` and ``$HOME`` (what relative paths and the default
store are resolved against, as the client would), its stdin; an answer is the exit status,
stdout and stderr. The server removes ``$TRIPWIRE_HOOK_SOCKET`` from its own environment, so
the command it runs never hands the event back to itself.

Without ``$TRIPWIRE_HOOK_SOCKET`` the native client starts a server of its own on demand (the
first event that finds none starts ``tripwire hook serve --socket <auto> --idle-timeout 900``
detached and hands its event over once it listens): its socket is in a directory only the user
can enter (``$XDG_RUNTIME_DIR/tripwire``, else ``/tmp/tripwire-<uid>``), named by a hash of the
client executable and of the variables the hook reads, so it serves only clients whose
environment is its own; ``TRIPWIRE_HOOK_SERVER=off`` or a secret ``TRIPWIRE_STORE_KEY`` turn it
off (``client/tripwire_hook.cpp`` says why).
"""

from __future__ import annotations

import io
import os
import socket
import struct
import sys
import time
from collections.abc import Callable
from typing import Any, NamedTuple

__all__ = ["SOCKET_ENV", "Request", "serve", "call"]

SOCKET_ENV = "TRIPWIRE_HOOK_SOCKET"
_LIMIT = 64 << 20  # bytes one request or answer may take
_MAGIC = b"TWH1"
_U32 = struct.Struct("<I")
#: the client's variables a request carries, in the frame's order
REQUEST_ENV = ("TRIPWIRE_STORE", "XDG_STATE_HOME", "HOME")


class Request(NamedTuple):
    """One hook invocation handed over: its arguments, working directory, the variables that
    locate the default store (``REQUEST_ENV``: "" when unset) and stdin."""

    argv: list[str]
    cwd: str
    env: dict[str, str]
    stdin: str


def _strings(*items: bytes) -> bytes:
    return b"".join(_U32.pack(len(b)) + b for b in items)


def encode_request(request: Request) -> bytes:
    fields = [str(len(request.argv)).encode(), *(a.encode() for a in request.argv),
              request.cwd.encode(), *(request.env.get(k, "").encode() for k in REQUEST_ENV),
              request.stdin.encode()]
    return _MAGIC + _U32.pack(len(fields)) + _strings(*fields)


def decode_request(data: bytes) -> Request:
    """A request frame (ValueError when it is not one)."""
    try:
        return _decode_request(data)
    except struct.error as exc:
        raise ValueError(f"a truncated hook request: {exc}") from None


def _decode_request(data: bytes) -> Request:
    if not data.startswith(_MAGIC):
        raise ValueError("not a hook request")
    (count,), pos = _U32.unpack_from(data, 4), 8
    fields = []
    for _ in range(count):
        (size,) = _U32.unpack_from(data, pos)
        pos += 4
        if pos + size > len(data):
            raise ValueError("a truncated hook request")
        fields.append(data[pos:pos + size].decode())
        pos += size
    if pos != len(data) or not fields or not fields[0].isdigit():
        raise ValueError("a malformed hook request")
    n = int(fields[0])
    if len(fields) != n + 2 + len(REQUEST_ENV) + 1:
        raise ValueError("a malformed hook request")
    env = dict(zip(REQUEST_ENV, fields[n + 2:n + 2 + len(REQUEST_ENV)], strict=True))
    return Request(fields[1:n + 1], fields[n + 1], env, fields[-1])


def encode_answer(code: int, stdout: str, stderr: str) -> bytes:
    return _MAGIC + _U32.pack(code) + _strings(stdout.encode(), stderr.encode())


def decode_answer(data: bytes) -> tuple[int, str, str]:
    """An answer frame: exit status, stdout, stderr (ValueError when it is not one)."""
    if not data.startswith(_MAGIC) or len(data) < 16:
        raise ValueError("not a hook answer")
    (code,) = _U32.unpack_from(data, 4)
    (n,) = _U32.unpack_from(data, 8)
    out = data[12:12 + n]
    if len(data) < 16 + n:
        raise ValueError("a truncated hook answer")
    (m,) = _U32.unpack_from(data, 12 + n)
    err = data[16 + n:16 + n + m]
    if 16 + n + m != len(data) or len(out) != n:
        raise ValueError("a malformed hook answer")
    return code, out.decode(), err.decode()


def call(path: str, request: Request, timeout: float = 5.0) -> dict[str, Any] | None:
    """The server's answer (``code``, ``stdout``, ``stderr``), or None when there is none."""
    try:
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as s:
            s.settimeout(timeout)
            s.connect(path)
            s.sendall(encode_request(request))
            s.shutdown(socket.SHUT_WR)
            code, out, err = decode_answer(_read(s))
    except (OSError, ValueError):
        return None
    return {"code": code, "stdout": out, "stderr": err}


def serve(path: str, run: Callable[..., int], idle_timeout: float | None = None) -> int:
    """Answer hook requests on ``path`` until idle for ``idle_timeout`` seconds (forever when
    None): ``run(request, stdout, stderr, origin)`` is the hook command's (``cli.hook``).

    One server per socket: it holds ``path.lock`` (its process id inside) while it lives, so a
    second one started on the same path says so and exits 1; the holder alone replaces a stale
    socket. It listens before it imports the hooks' modules, so a client that started it (the
    native client's automatic server) connects at once and its first request waits for them.
    Connections from another user are closed unanswered (their clients run the event
    themselves)."""
    os.environ.pop(SOCKET_ENV, None)  # the command it runs must not hand events back here
    directory = os.path.dirname(os.path.abspath(path))
    os.makedirs(directory, exist_ok=True)
    lock = _take_lock(path + ".lock")
    if lock is None:
        sys.stderr.write(f"tripwire hook serve: another server holds {path}.lock; exiting\n")
        return 1
    try:
        if os.path.lexists(path):
            os.unlink(path)  # a stale socket of a server that died (the lock is ours)
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as server:
            old = os.umask(0o177)
            try:
                server.bind(path)
            finally:
                os.umask(old)
            server.listen(64)
            from ..harnesses.hooks import (  # noqa: F401 - import once, here
                _contract,
                _session,
                claude_code,
                codex,
                copilot,
                cursor,
                gemini_cli,
                kiro,
            )

            server.settimeout(idle_timeout)
            while True:
                try:
                    conn, _ = server.accept()
                except TimeoutError:
                    os.unlink(path)
                    return 0
                with conn:
                    _answer(conn, run)
    finally:
        os.close(lock)


def _take_lock(path: str, patience: float = 1.0) -> int | None:
    """The server's lock, its process id written in (None: another server holds it). A client
    holds it shared for an instant to see whether a server is starting: tried again a while."""
    import fcntl  # POSIX: the server runs where Unix sockets do

    fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC | getattr(os, "O_NOFOLLOW", 0),
                 0o600)
    deadline = time.monotonic() + patience
    while True:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            break
        except OSError:
            if time.monotonic() >= deadline:
                os.close(fd)
                return None
            time.sleep(0.01)
    os.ftruncate(fd, 0)
    os.write(fd, f"{os.getpid()}\n".encode())
    return fd


def _answer(conn: socket.socket, run: Callable[..., int]) -> None:
    conn.settimeout(10.0)
    pid, uid = _peer(conn)
    if uid is not None and uid != os.getuid():
        return  # another user's client: it runs the event itself
    try:
        request = decode_request(_read(conn))
        out, err = io.StringIO(), io.StringIO()
        code = run(request, out, err, pid)
        conn.sendall(encode_answer(code, out.getvalue(), err.getvalue()))
    except (OSError, ValueError):
        pass  # that client falls back to running the event itself


def _peer(conn: socket.socket) -> tuple[int | None, int | None]:
    """The client's process id and user id (Linux ``SO_PEERCRED``), None where they cannot be
    had."""
    option = getattr(socket, "SO_PEERCRED", None)
    if option is None:
        return None, None
    try:
        pid, uid, _ = struct.unpack("3i", conn.getsockopt(socket.SOL_SOCKET, option,
                                                          struct.calcsize("3i")))
    except OSError:
        return None, None
    return pid or None, uid


def _read(s: socket.socket) -> bytes:
    chunks, size = [], 0
    while chunk := s.recv(65536):
        chunks.append(chunk)
        size += len(chunk)
        if size > _LIMIT:
            raise ValueError("request too large")
    return b"".join(chunks)
