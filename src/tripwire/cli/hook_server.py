"""A resident hook server, so an invocation does not pay Python's imports on every event.

    tripwire hook serve --socket ~/.local/state/tripwire/hook.sock &
    export TRIPWIRE_HOOK_SOCKET=~/.local/state/tripwire/hook.sock   # in the harness's environment

With ``TRIPWIRE_HOOK_SOCKET`` set, ``tripwire hook <harness>`` sends its options and stdin to the
server over that Unix socket and prints the server's answer; without a server listening (or on
any error talking to it) it runs the event itself, as it does without the variable. The server
reads each connection in a thread of its own under deadlines (the whole request within
``READ_SECONDS``, at most ``_LIMIT`` bytes: a client that sends nothing, trickles or never
stops is dropped, and holds no other client meanwhile), and runs the events one at a time,
answering exactly what the command would have printed: each request reads the session from the
store afresh (other processes write it too). The store key and the
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

**The authority** (``tripwire hook serve --socket PATH --allow-user USER[,USER]``, issue 36:
privilege separation): the same server run as another user than the agent's, holding the store,
its secret key and its anchor. Its socket is open to every user (mode 0666) in a directory the
agent cannot write (refused at start otherwise: whoever can write it could put a socket of
their own in the server's place); each connection's user is read with ``SO_PEERCRED`` and one
not allowed is closed unanswered, with one line on the server's stderr. A request names only
its harness: the store, config, mode and wait are the authority's own (``serve(authority=``)),
never the client's, and a request carries no operator verb (reset, raise and check-in do not
exist on this socket). Its clients (``tripwire hook HARNESS --authority PATH``, the native
client with ``$TRIPWIRE_AUTHORITY``) hold no secret and never open the store; under enforce,
an authority they cannot reach denies the call (``cli.hook``).
"""

from __future__ import annotations

import io
import os
import queue
import socket
import struct
import sys
import threading
import time
from collections.abc import Callable
from typing import Any, NamedTuple

__all__ = ["SOCKET_ENV", "AUTHORITY_ENV", "Request", "serve", "call", "ask", "unsafe_directory"]

SOCKET_ENV = "TRIPWIRE_HOOK_SOCKET"
#: The authority's socket, in the environment of a thin client (``tripwire hook --authority``)
AUTHORITY_ENV = "TRIPWIRE_AUTHORITY"
_LIMIT = 64 << 20  # bytes one request or answer may take
#: Seconds a client has from its connection to the end of its request: a client sends the stdin
#: its harness wrote at once (milliseconds; the rest is room for a loaded machine), so one that
#: sends nothing, trickles or never stops is dropped unanswered at this deadline (its client,
#: if any, runs the event itself), holding no other client meanwhile.
READ_SECONDS = 5.0
#: Seconds from its connection a request may wait for the events before it (they run one at a
#: time), and its answer may take to be sent; past them it is dropped unanswered.
QUEUE_SECONDS = 8.0
SEND_SECONDS = 2.0
#: Connections in hand at once (each read in its own thread, so a stalled one holds no other):
#: one more is closed unanswered, and so is each request's memory bounded (``_LIMIT``).
MAX_CLIENTS = 8
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
        code, out, err = ask(path, request, timeout)
    except (OSError, ValueError):
        return None
    return {"code": code, "stdout": out, "stderr": err}


def ask(path: str, request: Request, timeout: float) -> tuple[int, str, str]:
    """The server's answer: exit status, stdout, stderr. ``OSError`` when it cannot be reached
    or does not answer in ``timeout`` seconds, ``ValueError`` when its answer is no answer
    frame (a server that closed the connection unanswered, as an authority does to a user it
    does not allow, is an empty one)."""
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as s:
        s.settimeout(timeout)
        s.connect(path)
        s.sendall(encode_request(request))
        s.shutdown(socket.SHUT_WR)
        data = _read(s)
    if not data:
        raise ValueError("it closed the connection unanswered (is this user allowed?)")
    return decode_answer(data)


def unsafe_directory(directory: str) -> str | None:
    """Why an authority's socket may not live in ``directory`` (None: it may): a directory
    another user can write (or a symbolic link) lets that user put a socket of their own at
    the path the hooks were installed with."""
    try:
        st = os.lstat(directory)
    except OSError as exc:
        return f"{directory}: {exc.strerror}"
    import stat

    if not stat.S_ISDIR(st.st_mode):
        return f"{directory}: not a directory (a symbolic link or another file)"
    if st.st_uid not in (0, os.getuid()):
        return f"{directory}: owned by uid {st.st_uid}, not by this user or root"
    if st.st_mode & 0o022:
        return f"{directory}: writable by its group or others (mode {st.st_mode & 0o777:o})"
    return None


def serve(path: str, run: Callable[..., int], idle_timeout: float | None = None,
          allow: frozenset[int] | None = None) -> int:
    """Answer hook requests on ``path`` until idle for ``idle_timeout`` seconds (forever when
    None): ``run(request, stdout, stderr, origin)`` is the hook command's (``cli.hook``).

    One server per socket: it holds ``path.lock`` (its process id inside) while it lives, so a
    second one started on the same path says so and exits 1; the holder alone replaces a stale
    socket. It listens before it imports the hooks' modules, so a client that started it (the
    native client's automatic server) connects at once and its first request waits for them.
    Connections from another user are closed unanswered (their clients run the event
    themselves).

    ``allow``: the authority (the module's docstring): the users besides its own that may
    connect, each request run as ``run(request, stdout, stderr, pid, uid)`` with the peer's
    ``SO_PEERCRED``; the socket is open to all (0666) in a directory only its owner writes."""
    os.environ.pop(SOCKET_ENV, None)  # the command it runs must not hand events back here
    os.environ.pop(AUTHORITY_ENV, None)
    directory = os.path.dirname(os.path.abspath(path))
    if allow is not None:
        if not os.path.isdir(directory):
            os.makedirs(directory, mode=0o755)
        problem = unsafe_directory(directory)
        if problem is not None:
            sys.stderr.write(f"tripwire hook serve: the socket's directory {problem}; the "
                             "agent's user must not be able to write it\n")
            return 2
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
            if allow is not None:
                os.chmod(path, 0o666)  # every user may connect: SO_PEERCRED says who may talk
            server.listen(64)
            if allow is not None:
                sys.stderr.write(f"tripwire hook serve: the authority listens on {path} for "
                                 f"uid {', '.join(map(str, sorted(allow)))}\n")
                sys.stderr.flush()
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

            clients = _Clients(run, allow)
            threading.Thread(target=clients.accept, args=(server,), daemon=True,
                             name="tripwire-hook-accept").start()
            while True:  # the events run in this thread (the store's connections are its own)
                if not clients.answer_next(idle_timeout):
                    os.unlink(path)
                    return 0
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


class _Clients:
    """The connections in hand: each read in a thread of its own under its deadlines (so a
    client that stalls holds neither the server nor the other clients), their events run one
    at a time in the server's thread (each reads the store afresh; the store's connections
    belong to that thread; the command's stderr is redirected per event)."""

    def __init__(self, run: Callable[..., int], allow: frozenset[int] | None = None):
        self.run = run
        self.allow = allow  # the authority's other users (None: a same-user server)
        self._ready: queue.Queue[tuple[socket.socket, Request, int | None, int | None,
                                       float]] = queue.Queue()
        self._lock = threading.Lock()
        self._count = 0  # connections accepted and not yet answered or dropped

    def accept(self, server: socket.socket) -> None:
        while True:
            try:
                conn, _ = server.accept()
            except OSError:
                return  # the server's socket is closed: it is exiting
            with self._lock:
                full = self._count >= MAX_CLIENTS
                if not full:
                    self._count += 1
            if full:
                conn.close()  # too many in hand: this client runs the event itself
                continue
            threading.Thread(target=self._read, args=(conn, time.monotonic()), daemon=True,
                             name="tripwire-hook-client").start()

    def _read(self, conn: socket.socket, accepted: float) -> None:
        """A connection's request, read by ``READ_SECONDS`` after ``accepted`` and queued;
        dropped unanswered otherwise (a user the server does not answer, a late or malformed
        request)."""
        try:
            pid, uid = _peer(conn)
            if self._answers(uid, pid):
                request = decode_request(_read(conn, accepted + READ_SECONDS))
                self._ready.put((conn, request, pid, uid, accepted))
                return
            if self.allow is not None:  # read, so the refused client sees a close, not a reset
                _read(conn, accepted + READ_SECONDS)
        except (OSError, ValueError, MemoryError):
            pass
        self._done(conn)

    def _answers(self, uid: int | None, pid: int | None) -> bool:
        """Whether a peer's request is run here: a same-user server answers its own user
        (another user's client runs the event itself); the authority answers its own user and
        each ``--allow-user``, and says on stderr whom it refused (that client fails closed
        under enforce)."""
        if self.allow is None:
            return uid is None or uid == os.getuid()
        if uid is not None and (uid in self.allow or uid == os.getuid()):
            return True
        sys.stderr.write(f"tripwire hook serve: refused a connection from uid {uid} (pid "
                         f"{pid}): not an --allow-user\n")
        sys.stderr.flush()
        return False

    def answer_next(self, idle_timeout: float | None) -> bool:
        """Run the next request read and send its answer (within ``SEND_SECONDS``; one that
        waited past ``QUEUE_SECONDS`` since its connection is dropped unanswered). False: none
        came within ``idle_timeout`` seconds and no connection is in hand."""
        try:
            conn, request, pid, uid, accepted = self._ready.get(timeout=idle_timeout)
        except queue.Empty:
            with self._lock:
                return self._count > 0  # idle means no connection in hand either
        try:
            if time.monotonic() <= accepted + QUEUE_SECONDS:
                out, err = io.StringIO(), io.StringIO()
                code = (self.run(request, out, err, pid) if self.allow is None
                        else self.run(request, out, err, pid, uid))
                conn.settimeout(SEND_SECONDS)  # sendall's whole duration (a client not reading)
                conn.sendall(encode_answer(code, out.getvalue(), err.getvalue()))
        except (OSError, ValueError):
            pass  # that client falls back to running the event itself
        finally:
            self._done(conn)
        return True

    def _done(self, conn: socket.socket) -> None:
        conn.close()
        with self._lock:
            self._count -= 1


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


def _read(s: socket.socket, deadline: float | None = None) -> bytes:
    """What ``s`` sends until it shuts its side, at most ``_LIMIT`` bytes (ValueError past it)
    and, given a ``deadline`` (``time.monotonic()``), by then (``TimeoutError`` after it: a
    deadline for the whole, not for each chunk, so a trickle cannot extend it)."""
    chunks: list[bytes] = []
    size = 0
    while True:
        if deadline is not None:
            left = deadline - time.monotonic()
            if left <= 0:
                raise TimeoutError("the request did not arrive in time")
            s.settimeout(left)
        chunk = s.recv(65536)
        if not chunk:
            return b"".join(chunks)
        chunks.append(chunk)
        size += len(chunk)
        if size > _LIMIT:
            raise ValueError("request too large")
