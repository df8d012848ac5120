"""The native hook client, ``tripwire-hook`` (client/tripwire_hook.cpp): the resident server's
answers without a Python start, and the Python command's answers whenever no server gives one.

Every test runs real processes: the server (``tripwire hook serve``), the client executable
installed beside the interpreter, and the Python command it falls back to.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from conftest import stop_hook_servers
from test_hooks import Hook, common, looping_until_denied, post, pre

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


# -- the automatic server: started by the first event that finds none -------------------------


@pytest.fixture
def runtime(tmp_path: Path) -> Iterator[Path]:
    """A private $XDG_RUNTIME_DIR for the client's automatic server, ended after the test."""
    path = tmp_path / "run"
    path.mkdir(mode=0o700)
    yield path
    stop_hook_servers(path)


def automatic(harness: str, store: Path, implementation: str, runtime: Path) -> NativeHook:
    """A native client whose automatic server is allowed (the suite turns it off elsewhere)."""
    hook = NativeHook(harness, store, implementation)
    hook.env["XDG_RUNTIME_DIR"] = str(runtime)
    for key in ("TRIPWIRE_HOOK_SERVER", "TRIPWIRE_HOOK_SOCKET", "TRIPWIRE_STORE_KEY"):
        hook.env.pop(key, None)
    return hook


def servers(runtime: Path) -> dict[Path, int]:
    """The automatic servers' sockets under ``runtime`` and the live process holding each."""
    found = {}
    for lock in sorted(runtime.glob("tripwire/hook-*.sock.lock")):
        pid = int(lock.read_text().strip() or 0)
        if pid and Path(f"/proc/{pid}").exists():
            found[lock.with_suffix("")] = pid
    return found


@native_client
def test_the_first_event_starts_a_server_that_answers_the_next_ones(
        tmp_path: Path, implementation: str, runtime: Path) -> None:
    python = Hook("claude-code", tmp_path / "python" / "s.sqlite3", implementation)
    native = automatic("claude-code", tmp_path / "native" / "s.sqlite3", implementation,
                       runtime)

    def same(answer: dict) -> str:  # the reset command names each one's own store
        return json.dumps(answer).replace(str(native.store), str(python.store))

    denied = looping_until_denied(python)
    assert same(looping_until_denied(native)) == json.dumps(denied)
    ((sock, pid),) = servers(runtime).items()
    # the directory is the user's alone, the socket too; the server is `tripwire hook serve`
    # on that socket, in a session of its own that can take no terminal
    assert (runtime / "tripwire").stat().st_mode & 0o777 == 0o700
    assert sock.is_socket() and sock.stat().st_mode & 0o777 == 0o600
    cmdline = Path(f"/proc/{pid}/cmdline").read_text().split("\0")
    assert cmdline[-6:-1] == ["serve", "--socket", str(sock), "--idle-timeout", "900"]
    assert os.getsid(pid) not in (os.getsid(0), pid)  # a session of its own, never a leader
    # the stderr of an event is the same through the server as from the command
    python_later = python.raw(json.dumps(pre(6)))
    native_later = native.raw(json.dumps(pre(6)))
    assert same(json.loads(native_later.stdout)) == json.dumps(json.loads(python_later.stdout))
    assert native_later.stderr.replace(str(native.store), str(python.store)) == \
        python_later.stderr
    # the event goes to the server: stopped, it holds the client; continued, it answers
    os.kill(pid, signal.SIGSTOP)
    try:
        with pytest.raises(subprocess.TimeoutExpired):
            subprocess.run([str(CLIENT), "claude-code"], input=json.dumps(pre(7)),
                           capture_output=True, text=True, env=native.env, timeout=1.5)
    finally:
        os.kill(pid, signal.SIGCONT)
    assert native(pre(8))["hookSpecificOutput"]["permissionDecision"] == "deny"
    assert servers(runtime) == {sock: pid}  # still the one server


@native_client
def test_each_environment_has_its_own_server(tmp_path: Path, implementation: str,
                                             runtime: Path) -> None:
    """A server answers only clients whose environment is its own: another engine, store or
    key source is another server, each deciding as the command would in its environment."""
    first = automatic("claude-code", tmp_path / "a.sqlite3", implementation, runtime)
    second = automatic("claude-code", tmp_path / "b.sqlite3", implementation, runtime)
    assert first(common("UserPromptSubmit", prompt="go")) is None
    assert second(common("UserPromptSubmit", prompt="go")) is None
    assert first(common("UserPromptSubmit", prompt="again")) is None
    assert len(servers(runtime)) == 2
    assert (tmp_path / "a.sqlite3").exists() and (tmp_path / "b.sqlite3").exists()


@native_client
@pytest.mark.parametrize("setting", [{"TRIPWIRE_HOOK_SERVER": "off"},
                                     {"TRIPWIRE_STORE_KEY": "a secret of the operator's"}])
def test_no_server_when_turned_off_or_with_a_secret_key(tmp_path: Path, implementation: str,
                                                        runtime: Path, setting: dict) -> None:
    """A secret key exists so that an agent running as the same user cannot forge the
    session's record; a resident server is a process such an agent could stand in for, so
    with one the client runs every event itself."""
    native = automatic("claude-code", tmp_path / "s.sqlite3", implementation, runtime)
    native.env.update(setting)
    assert looping_until_denied(native)["hookSpecificOutput"]["permissionDecision"] == "deny"
    assert not (runtime / "tripwire").exists() or not list((runtime / "tripwire").iterdir())


@native_client
@pytest.mark.parametrize("unsafe", ["open to others", "a link", "someone's file"])
def test_no_server_in_a_directory_others_could_enter(tmp_path: Path, implementation: str,
                                                     runtime: Path, unsafe: str) -> None:
    """The socket's directory must be the user's alone: otherwise another user could put a
    server of theirs in its place. The client then runs each event itself."""
    target = runtime / "tripwire"
    if unsafe == "open to others":
        target.mkdir(mode=0o755)
        target.chmod(0o755)
    elif unsafe == "a link":
        elsewhere = tmp_path / "elsewhere"
        elsewhere.mkdir(mode=0o700)
        target.symlink_to(elsewhere)
    else:
        target.write_text("not a directory")
    native = automatic("claude-code", tmp_path / "s.sqlite3", implementation, runtime)
    assert looping_until_denied(native)["hookSpecificOutput"]["permissionDecision"] == "deny"
    assert servers(runtime) == {}
    assert not list((tmp_path / "elsewhere").glob("*")) if unsafe == "a link" else True


@native_client
def test_a_killed_server_is_replaced_and_no_event_is_lost(tmp_path: Path, implementation: str,
                                                          runtime: Path) -> None:
    """SIGKILL leaves a stale socket: the next events run in the client's own Python command
    (none is started again within 30 seconds of the last start: a server that crashes is not
    started on every event); after that, the next event starts a new one. The session's
    record holds throughout."""
    native = automatic("claude-code", tmp_path / "s.sqlite3", implementation, runtime)
    assert native(common("UserPromptSubmit", prompt="make the tests pass")) is None
    ((sock, pid),) = servers(runtime).items()
    os.kill(pid, signal.SIGKILL)
    while Path(f"/proc/{pid}").exists():
        time.sleep(0.01)
    for n in range(1, 4):
        assert native(pre(n)) is None
        assert native(post(n)) is None
    assert servers(runtime) == {} and sock.exists()  # stale, not replaced yet
    lock = sock.with_name(sock.name + ".lock")
    os.utime(lock, (time.time() - 31, time.time() - 31))  # the last start: over 30 s ago
    assert native(pre(4)) is None
    assert native(post(4)) is None
    assert native(pre(5))["hookSpecificOutput"]["permissionDecision"] == "deny"
    ((new_sock, new_pid),) = servers(runtime).items()
    assert new_sock == sock and new_pid != pid


def test_a_second_server_on_a_socket_exits(tmp_path: Path) -> None:
    sock = tmp_path / "hook.sock"
    env = {**os.environ, "TRIPWIRE_HOOK_SOCKET": ""}
    first = subprocess.Popen([sys.executable, "-m", "tripwire", "hook", "serve", "--socket",
                              str(sock), "--idle-timeout", "60"], env=env)
    try:
        deadline = time.monotonic() + 30
        while not sock.exists() and time.monotonic() < deadline:
            time.sleep(0.05)
        assert sock.exists()
        second = subprocess.run([sys.executable, "-m", "tripwire", "hook", "serve", "--socket",
                                 str(sock)], capture_output=True, text=True, env=env,
                                timeout=60)
        assert second.returncode == 1
        assert second.stderr == (f"tripwire hook serve: another server holds {sock}.lock; "
                                 "exiting\n")
        assert first.poll() is None and sock.exists()
        assert int((tmp_path / "hook.sock.lock").read_text()) == first.pid
    finally:
        first.kill()
        first.wait()
