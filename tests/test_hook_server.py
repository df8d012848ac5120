"""The resident hook server under clients that stall (issue 36): each connection is read in a
thread of its own, the whole request within ``READ_SECONDS`` and at most ``_LIMIT`` bytes, so a
client that connects and sends nothing, trickles its request a byte at a time or sends without
end is dropped unanswered at its deadline and never holds the server or another client.

Real sockets, a real ``tripwire hook serve`` process; the clients that behave are
``hook_server.call`` (the Python command's own client: 5 s per socket operation, so a server
held by a stalled client would leave it unanswered).
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from test_hooks import Hook, block, halt_reason, looping_until_denied, pre, repeat_guidance

from tripwire.cli.hook_server import Request, call, encode_request


class ServedHook(Hook):
    """Events handed to the resident server on ``sock`` through ``hook_server.call``."""

    def __init__(self, sock: Path, store: Path, implementation: str):
        super().__init__("claude-code", store, implementation)
        self.sock = sock

    def raw(self, stdin: str, *args: str) -> subprocess.CompletedProcess:
        request = Request(["claude-code", "--store", str(self.store), *args], str(self.sock.parent),
                          {"TRIPWIRE_STORE": "", "XDG_STATE_HOME": "", "HOME": str(Path.home())},
                          stdin)
        answer = call(str(self.sock), request)
        assert answer is not None, "the server left a well-behaved client unanswered"
        return subprocess.CompletedProcess([], answer["code"], answer["stdout"], answer["stderr"])


@pytest.fixture
def sock(tmp_path: Path, implementation: str) -> Iterator[Path]:
    path = tmp_path / "hook.sock"
    env = {**os.environ, "TRIPWIRE_IMPLEMENTATION": implementation}
    env.pop("TRIPWIRE_HOOK_SOCKET", None)
    server = subprocess.Popen([sys.executable, "-m", "tripwire", "hook", "serve", "--socket",
                               str(path), "--idle-timeout", "120"], env=env)
    try:
        deadline = time.monotonic() + 30
        while not path.exists() and server.poll() is None and time.monotonic() < deadline:
            time.sleep(0.05)
        assert path.exists(), "the server did not start"
        yield path
    finally:
        server.kill()
        server.wait()


def connected(path: Path) -> socket.socket:
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.connect(str(path))
    return s


def dropped(s: socket.socket) -> bytes:
    """What the server sends a client before it closes the connection (b"": no answer)."""
    s.settimeout(60)
    received = b""
    try:
        while chunk := s.recv(65536):
            received += chunk
    except ConnectionResetError:
        pass
    return received


def expected_halt(store: Path) -> dict:
    return {
        "continue": False,
        "stopReason": halt_reason(store),
        "systemMessage": halt_reason(store),
        "hookSpecificOutput": {
            "hookEventName": "PreToolUse",
            "permissionDecision": "deny",
            "permissionDecisionReason": block(("repeated-tool-call", repeat_guidance())),
        },
    }


def test_clients_that_stall_hold_neither_the_server_nor_another_client(
        sock: Path, tmp_path: Path, implementation: str) -> None:
    silent = connected(sock)  # connects and sends nothing
    trickle = connected(sock)  # a request a byte at a time, never finished
    endless = connected(sock)  # bytes without end
    stop = threading.Event()
    ended: dict[str, BaseException] = {}

    def send(s: socket.socket, name: str, data: bytes, pause: float) -> None:
        try:
            while not stop.is_set():
                s.sendall(data)
                time.sleep(pause)
        except OSError as exc:  # the server dropped it
            ended[name] = exc

    frame = encode_request(Request(["claude-code"], "/", {}, "{}"))
    senders = [threading.Thread(target=send, args=(trickle, "trickle", frame[:1], 0.2)),
               threading.Thread(target=send, args=(endless, "endless", bytes(1 << 16), 0))]
    for thread in senders:
        thread.start()
    try:
        # nine events through the server while the three hold their connections: the fifth
        # identical call is denied and the session halted, exactly as the command decides
        hook = ServedHook(sock, tmp_path / "hooks.sqlite3", implementation)
        assert looping_until_denied(hook) == expected_halt(hook.store)
        # each stalled client is dropped at its deadline, unanswered
        assert dropped(silent) == b""
        for thread in senders:
            thread.join(timeout=60)
        assert sorted(ended) == ["endless", "trickle"]
        assert all(isinstance(exc, (BrokenPipeError, ConnectionResetError))
                   for exc in ended.values()), ended
        # and the server still answers, the halt recorded
        assert hook(pre(6))["hookSpecificOutput"]["permissionDecision"] == "deny"
    finally:
        stop.set()
        for s in (silent, trickle, endless):
            s.close()
