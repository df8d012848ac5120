"""The hooks' authority and its thin clients (issue 36), as one user: ``tripwire hook serve
--allow-user`` decides with its own store, config and mode; ``tripwire hook HARNESS --authority
SOCKET`` and the native client forward the payload and never open a store; an authority that
cannot answer denies the call under enforce (a reason for the model, one line for the operator)
and decides nothing below it. The attacks from another uid are tests/test_privsep.py's.

Every test runs real processes: the authority, the Python command and the native client.
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
from test_hook_client import NativeHook, native_client
from test_hooks import SESSION, Hook, looping_until_denied, post, pre

from tripwire.cli.hook_closed import DENIED
from tripwire.cli.hook_server import Request, encode_request

CLIENTS = ["python", pytest.param("native", marks=native_client)]


def start_authority(root: Path, implementation: str, *options: str,
                    env: dict[str, str] | None = None) -> tuple[subprocess.Popen, Path]:
    """``tripwire hook serve --allow-user`` (this uid) on ``root/run/authority.sock``, its
    store in ``root/private``; returns once it listens."""
    sock = root / "run" / "authority.sock"
    (root / "private").mkdir(exist_ok=True)
    proc = subprocess.Popen(
        [sys.executable, "-m", "tripwire", "hook", "serve", "--socket", str(sock),
         "--allow-user", str(os.getuid()), "--store", str(root / "private" / "hooks.sqlite3"),
         *options],
        env={**os.environ, "TRIPWIRE_IMPLEMENTATION": implementation, **(env or {})},
        stderr=subprocess.PIPE, text=True, cwd="/")
    deadline = time.monotonic() + 30
    while not sock.exists() and proc.poll() is None and time.monotonic() < deadline:
        time.sleep(0.02)
    assert sock.exists(), proc.stderr.read() if proc.poll() is not None else "no socket"
    return proc, sock


@pytest.fixture
def authority(tmp_path: Path, implementation: str) -> Iterator[Path]:
    proc, sock = start_authority(tmp_path, implementation, "--mode", "enforce")
    yield sock
    proc.kill()
    proc.wait()


def thin(kind: str, tmp_path: Path, implementation: str, sock: Path, *args: str) -> Hook:
    """A thin client of ``sock``; its own ``$TRIPWIRE_STORE`` names a store it must never make."""
    cls = NativeHook if kind == "native" else Hook
    hook = cls("claude-code", tmp_path / "client-store" / "never.sqlite3", implementation)
    hook.env.pop("TRIPWIRE_HOOK_SOCKET", None)
    hook.env["TRIPWIRE_AUTHORITY"] = str(sock)
    if args:
        raw = hook.raw
        hook.raw = lambda stdin, *more: raw(stdin, *args, *more)  # type: ignore[method-assign]
    return hook


@pytest.mark.parametrize("kind", CLIENTS)
def test_a_thin_client_gets_the_authoritys_decisions(kind: str, authority: Path,
                                                     tmp_path: Path, implementation: str) -> None:
    hook = thin(kind, tmp_path, implementation, authority)
    fifth = looping_until_denied(hook)
    assert fifth["hookSpecificOutput"]["permissionDecision"] == "deny"
    assert fifth["continue"] is False
    assert "repeated-tool-call" in fifth["stopReason"]
    # the halt is the authority's store's: the next call is denied, and the client made none
    assert hook(pre(6))["hookSpecificOutput"]["permissionDecision"] == "deny"
    assert (tmp_path / "private" / "hooks.sqlite3").exists()
    assert not (tmp_path / "client-store").exists()


@native_client
def test_the_authority_ignores_the_clients_store_mode_and_config(
        authority: Path, tmp_path: Path, implementation: str) -> None:
    """The native client sends its arguments as they are: a store, a warn mode and a config
    the agent wrote into the hook command are not the authority's, which decides alone."""
    lax = tmp_path / "lax.toml"
    lax.write_text('[watchdog]\nmode = "warn"\n')
    hook = thin("native", tmp_path, implementation, authority, "--store",
                str(tmp_path / "agent.sqlite3"), "--mode", "warn", "--config", str(lax))
    assert looping_until_denied(hook)["hookSpecificOutput"]["permissionDecision"] == "deny"
    assert not (tmp_path / "agent.sqlite3").exists()


def test_a_request_naming_no_harness_decides_nothing(authority: Path) -> None:
    """The socket has no operator verb: a frame asking for a reset is no hook event."""
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as s:
        s.connect(str(authority))
        s.sendall(encode_request(Request(["reset", "--session", SESSION], "/", {}, "")))
        s.shutdown(socket.SHUT_WR)
        data = b"".join(iter(lambda: s.recv(65536), b""))
    from tripwire.cli.hook_server import decode_answer

    code, out, err = decode_answer(data)
    assert (code, out) == (0, "")
    assert err.startswith("tripwire hook: the authority takes a harness (claude-code, codex")


def down_line(done: subprocess.CompletedProcess, sock: Path, what: str, tail: str) -> None:
    (line,) = done.stderr.splitlines()
    assert line.startswith(f"tripwire hook claude-code: the authority at {sock} {what}"), line
    assert line.endswith(tail), line


@pytest.mark.parametrize("kind", CLIENTS)
def test_an_unreachable_authority_denies_under_enforce(kind: str, tmp_path: Path,
                                                       implementation: str) -> None:
    sock = tmp_path / "nothing-listens.sock"
    hook = thin(kind, tmp_path, implementation, sock)
    done = hook.raw(json.dumps(pre(1)))
    assert done.returncode == 0, done.stderr
    out = json.loads(done.stdout)["hookSpecificOutput"]
    assert out["permissionDecision"] == "deny"
    assert out["permissionDecisionReason"].startswith(
        f"[watchdog] tripwire could not decide on this tool call (the authority at {sock} "
        "cannot be reached (")
    down_line(done, sock, "cannot be reached", DENIED)
    # a result has nothing to deny: no decision, the same line
    done = hook.raw(json.dumps(post(1)))
    assert (done.returncode, done.stdout) == (0, "")
    down_line(done, sock, "cannot be reached", "; no decision")
    assert not (tmp_path / "client-store").exists()


@pytest.mark.parametrize("kind", CLIENTS)
def test_below_enforce_an_unreachable_authority_decides_nothing(kind: str, tmp_path: Path,
                                                                implementation: str) -> None:
    sock = tmp_path / "nothing-listens.sock"
    hook = thin(kind, tmp_path, implementation, sock, "--mode", "warn")
    done = hook.raw(json.dumps(pre(1)))
    assert (done.returncode, done.stdout) == (0, "")
    down_line(done, sock, "cannot be reached", "; no decision")


@pytest.fixture
def fake_authority(tmp_path: Path, request: pytest.FixtureRequest) -> Iterator[Path]:
    """Something else on the socket: it answers ``request.param`` (b"" closes unanswered)."""
    sock = tmp_path / "fake.sock"
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    listener.bind(str(sock))
    listener.listen(8)
    listener.settimeout(0.2)
    stop = threading.Event()

    def answer() -> None:
        while not stop.is_set():
            try:
                conn, _ = listener.accept()
            except OSError:
                continue
            with conn:
                while conn.recv(65536):
                    pass
                conn.sendall(request.param)

    thread = threading.Thread(target=answer, daemon=True)
    thread.start()
    yield sock
    stop.set()
    thread.join()
    listener.close()


@pytest.mark.parametrize("fake_authority", [b'{"code": 0, "stdout": "", "stderr": ""}', b""],
                         indirect=True, ids=["garbled", "unanswered"])
@pytest.mark.parametrize("kind", CLIENTS)
def test_a_garbled_or_missing_answer_denies_under_enforce(kind: str, fake_authority: Path,
                                                          tmp_path: Path,
                                                          implementation: str) -> None:
    hook = thin(kind, tmp_path, implementation, fake_authority)
    done = hook.raw(json.dumps(pre(1)))
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["hookSpecificOutput"]["permissionDecision"] == "deny"
    what = "gave no hook answer" if kind == "native" else "answered no hook answer"
    down_line(done, fake_authority, what, DENIED)


def test_the_authority_refuses_a_directory_others_can_write(tmp_path: Path) -> None:
    run = tmp_path / "run"
    run.mkdir()
    os.chmod(run, 0o777)
    done = subprocess.run(
        [sys.executable, "-m", "tripwire", "hook", "serve", "--socket", str(run / "a.sock"),
         "--allow-user", str(os.getuid()), "--store", str(tmp_path / "s.sqlite3")],
        capture_output=True, text=True, timeout=60)
    assert done.returncode == 2
    assert done.stderr == (f"tripwire hook serve: the socket's directory {run}: writable by its "
                           "group or others (mode 777); the agent's user must not be able to "
                           "write it\n")
    assert not (run / "a.sock").exists()


def test_install_writes_the_thin_client(tmp_path: Path) -> None:
    from test_hooks import INSTALLED

    sock = tmp_path / "run" / "authority.sock"
    settings = tmp_path / "settings.json"
    keyless = {k: v for k, v in os.environ.items() if k != "TRIPWIRE_STORE_KEY"}
    done = subprocess.run([sys.executable, "-m", "tripwire", "hook", "claude-code", "--install",
                           "--authority", str(sock), "--write", str(settings)],
                          capture_output=True, text=True, timeout=60, env=keyless)
    assert done.returncode == 0, done.stderr
    assert done.stderr == (f"tripwire: no authority listens on {sock} yet: under enforce every "
                           "tool call is denied until one does\n")
    done = subprocess.run([sys.executable, "-m", "tripwire", "hook", "claude-code", "--install",
                           "--authority", str(sock)], capture_output=True, text=True,
                          timeout=60, env={**keyless, "TRIPWIRE_STORE_KEY": "a secret"})
    assert done.returncode == 0, done.stderr
    assert done.stderr.splitlines()[1] == (
        "tripwire: TRIPWIRE_STORE_KEY is set here, and a thin client needs none: keep it out "
        "of the harness's environment (the agent's user can read it there), in the "
        "authority's alone")
    commands = {h["command"] for groups in json.loads(settings.read_text())["hooks"].values()
                for g in groups for h in g["hooks"]}
    assert commands == {f"{INSTALLED} claude-code --authority {sock}"}
    done = subprocess.run([sys.executable, "-m", "tripwire", "hook", "claude-code", "--install",
                           "--authority", str(sock), "--store", str(tmp_path / "s.sqlite3")],
                          capture_output=True, text=True, timeout=60)
    assert (done.returncode, done.stdout) == (2, "")
    assert done.stderr == ("tripwire hook claude-code: --install: --store: the authority's own "
                           "(tripwire hook serve --allow-user), not its thin client's; nothing "
                           "written\n")


def test_doctor_says_an_authority_of_this_user_is_the_same_user_setup(
        authority: Path, tmp_path: Path, implementation: str) -> None:
    from test_hooks import INSTALLED

    settings = tmp_path / "settings.json"
    settings.write_text(json.dumps({"hooks": {"PreToolUse": [{"matcher": "*", "hooks": [
        {"type": "command", "command": f"{INSTALLED} claude-code --authority {authority}",
         "timeout": 10}]}]}}))
    done = subprocess.run([sys.executable, "-m", "tripwire", "doctor", str(settings)],
                          capture_output=True, text=True, timeout=120,
                          env={**os.environ, "TRIPWIRE_IMPLEMENTATION": implementation})
    assert done.returncode == 0, done.stdout + done.stderr
    hook = json.loads(done.stdout.splitlines()[0])
    assert (hook["decides"], hook["denies_call"], hook["setup"], hook["authority_uid"]) == (
        True, 5, "same-user", os.getuid())
    assert hook["protects_against"].startswith("mistakes (a loop, an overspend), not an "
                                               "adversary")
    # the probe's session went to the authority's scratch store, not its real one
    status = subprocess.run([sys.executable, "-m", "tripwire", "status",
                             str(tmp_path / "private" / "hooks.sqlite3")],
                            capture_output=True, text=True, timeout=60)
    assert "tripwire-doctor-" not in status.stdout + status.stderr


@pytest.mark.parametrize(("options", "line"), [
    (["--allow-user", "no-such-user-here"],
     "--allow-user no-such-user-here: no such user 'no-such-user-here'"),
    (["--store", "s.sqlite3"],
     "--store is an option of --allow-user (a same-user server takes each event's own)"),
    (["--allow-user", "0", "--config", "/no/such.toml"], "--config /no/such.toml: no such config "
     "file"),
])
def test_the_authoritys_bad_options_are_one_line_and_exit_2(options: list[str], line: str,
                                                            tmp_path: Path) -> None:
    done = subprocess.run([sys.executable, "-m", "tripwire", "hook", "serve", "--socket",
                           str(tmp_path / "run" / "a.sock"), *options],
                          capture_output=True, text=True, timeout=60)
    assert (done.returncode, done.stdout) == (2, "")
    assert done.stderr == f"tripwire hook serve: {line} (see tripwire hook serve --help)\n"
    assert not (tmp_path / "run").exists()
