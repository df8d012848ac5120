"""The native hook client, ``tripwire-hook`` (client/tripwire_hook.cpp): the resident server's
answers without a Python start, and the Python command's answers whenever no server gives one.

Every test runs real processes: the server (``tripwire hook serve``), the client executable
installed beside the interpreter, and the Python command it falls back to.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from test_hooks import Hook, common, looping_until_denied, pre

from tripwire.cli.hook_server import (
    REQUEST_ENV,
    Request,
    decode_answer,
    decode_request,
    encode_answer,
    encode_request,
)

CLIENT = Path(sys.executable).parent / "tripwire-hook"
native_client = pytest.mark.skipif(
    not os.access(CLIENT, os.X_OK),
    reason=f"{CLIENT} is not installed (a build without a C++ compiler installs no native "
           "hook client)")


class NativeHook(Hook):
    """Runs ``tripwire-hook <harness>`` as the harness would: one process per event."""

    cwd: Path | None = None

    def raw(self, stdin: str, *args: str) -> subprocess.CompletedProcess:
        return subprocess.run([str(CLIENT), self.harness, *args], input=stdin,
                              capture_output=True, text=True, env=self.env, timeout=60,
                              cwd=self.cwd)


@pytest.fixture
def server(tmp_path: Path, implementation: str) -> Iterator[Path]:
    sock = tmp_path / "hook.sock"
    env = {**os.environ, "TRIPWIRE_IMPLEMENTATION": implementation,
           "TRIPWIRE_HOOK_SOCKET": str(sock)}  # the server must not hand events to itself
    proc = subprocess.Popen([sys.executable, "-m", "tripwire", "hook", "serve", "--socket",
                             str(sock), "--idle-timeout", "60"], env=env, cwd="/")
    deadline = time.monotonic() + 30
    while not sock.exists() and proc.poll() is None and time.monotonic() < deadline:
        time.sleep(0.05)
    assert sock.exists(), "the server did not start"
    yield sock
    proc.kill()
    proc.wait()


def test_frames_round_trip_and_malformed_ones_are_refused() -> None:
    request = Request(["claude-code", "--store", "é.sqlite3"], "/home/u",
                      {"TRIPWIRE_STORE": "", "XDG_STATE_HOME": "/x", "HOME": "/home/u"},
                      '{"a": "ü"}')
    assert decode_request(encode_request(request)) == request
    assert decode_answer(encode_answer(3, "out ✓", "")) == (3, "out ✓", "")
    frame = encode_request(request)
    for bad in (b"", b"JSON{}", frame[:-1], frame + b"x", frame[:8]):
        with pytest.raises(ValueError):
            decode_request(bad)
    with pytest.raises(ValueError):
        decode_answer(encode_answer(0, "a", "b")[:-1])
    assert REQUEST_ENV == ("TRIPWIRE_STORE", "XDG_STATE_HOME", "HOME")


@native_client
def test_the_native_client_answers_as_the_python_command(server: Path, tmp_path: Path,
                                                         implementation: str) -> None:
    python = Hook("claude-code", tmp_path / "python" / "s.sqlite3", implementation)
    native = NativeHook("claude-code", tmp_path / "native" / "s.sqlite3", implementation)
    # only the server can answer: the client's own engine setting is broken
    native.env.update(TRIPWIRE_HOOK_SOCKET=str(server), TRIPWIRE_IMPLEMENTATION="no-such")
    def same(answer: dict) -> str:  # the reset command names each one's own store
        return json.dumps(answer).replace(str(native.store), str(python.store))

    denied = looping_until_denied(python)
    assert denied["hookSpecificOutput"]["permissionDecision"] == "deny"
    assert same(looping_until_denied(native)) == json.dumps(denied)
    assert native.store.exists()  # the client's store, not one of the server's
    later = native.raw(json.dumps(pre(6)))
    assert later.returncode == 0, later.stderr
    assert same(json.loads(later.stdout)) == json.dumps(python(pre(6)))


@native_client
def test_a_relative_store_is_the_clients(server: Path, tmp_path: Path,
                                         implementation: str) -> None:
    """The server runs in another directory (/): a relative --store is resolved against the
    client's, as the Python command resolves it."""
    project = tmp_path / "project"
    project.mkdir()
    native = NativeHook("claude-code", Path("unused"), implementation)
    native.env.pop("TRIPWIRE_STORE")
    native.env["TRIPWIRE_HOOK_SOCKET"] = str(server)
    native.cwd = project
    done = native.raw(json.dumps(common("UserPromptSubmit", prompt="go")), "--store",
                      "state/hooks.sqlite3")
    assert (done.returncode, done.stdout) == (0, ""), done.stderr
    assert (project / "state" / "hooks.sqlite3").exists()
    assert not Path("/state/hooks.sqlite3").exists()


@native_client
def test_without_a_server_the_client_runs_the_python_command(tmp_path: Path,
                                                             implementation: str) -> None:
    native = NativeHook("claude-code", tmp_path / "s.sqlite3", implementation)
    native.env["TRIPWIRE_HOOK_SOCKET"] = str(tmp_path / "nothing-listens.sock")
    assert looping_until_denied(native)["hookSpecificOutput"]["permissionDecision"] == "deny"
    native.env.pop("TRIPWIRE_HOOK_SOCKET")
    assert native(pre(6))["hookSpecificOutput"]["permissionDecision"] == "deny"


@native_client
def test_a_server_that_answers_garbage_is_not_believed(tmp_path: Path,
                                                       implementation: str) -> None:
    """Something else listening on the socket (a dead server's successor, an agent's fake
    that would allow everything): a reply that is not a frame makes the client run the event
    itself, with the stdin it already read."""
    sock_path = tmp_path / "fake.sock"
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    listener.bind(str(sock_path))
    listener.listen(8)
    stop = threading.Event()

    def fake() -> None:
        listener.settimeout(0.2)
        while not stop.is_set():
            try:
                conn, _ = listener.accept()
            except OSError:
                continue
            with conn:
                while conn.recv(65536):
                    pass
                conn.sendall(json.dumps({"code": 0, "stdout": "", "stderr": ""}).encode())

    thread = threading.Thread(target=fake, daemon=True)
    thread.start()
    try:
        native = NativeHook("claude-code", tmp_path / "s.sqlite3", implementation)
        native.env["TRIPWIRE_HOOK_SOCKET"] = str(sock_path)
        assert looping_until_denied(native)["hookSpecificOutput"]["permissionDecision"] == "deny"
        assert native(pre(6))["hookSpecificOutput"]["permissionDecision"] == "deny"
    finally:
        stop.set()
        thread.join()
        listener.close()
