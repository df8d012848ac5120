"""Attacks on the live hooks (issue 23), each with the real ``tripwire hook claude-code``
command run as a subprocess with the event as JSON on stdin, as Claude Code runs it:

- a ``tool_calls`` cap holds across invocations (each one a new process), sequential and with
  8 hooks at once;
- a held lock on the hook's store (SQLite's write lock, ``flock`` on ``<store>.lock``) or a full
  disk never turns the guard off under ``enforce``: the call is denied within a bounded time,
  naming the store problem (``warn`` fails open, as before);
- a corrupted store never hands a halted session a fresh allowance.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

SESSION = "9d2c0a4e-1b7f-4c55-8e0d-3a6f2b1c9e88"


def event(name: str, **fields: object) -> dict[str, object]:
    return {"session_id": SESSION, "transcript_path": None, "cwd": "/w",
            "permission_mode": "default", "hook_event_name": name, **fields}


def pre(n: int, command: str | None = None) -> dict[str, object]:
    """A distinct call each time (no watchdog signal fires): only a budget can stop it."""
    return event("PreToolUse", tool_name="Bash", tool_input={"command": command or f"ls {n}"},
                 tool_use_id=f"toolu_{n:03d}")


class Hook:
    def __init__(self, tmp: Path, implementation: str, *args: str,
                 env: dict[str, str] | None = None) -> None:
        self.store = tmp / "hooks.sqlite3"
        self.args = list(args)
        self.env = {**os.environ, "TRIPWIRE_IMPLEMENTATION": implementation,
                    "TRIPWIRE_STORE": str(self.store), **(env or {})}

    def run(self, payload: dict[str, object], *extra: str,
            timeout: float = 60) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [sys.executable, "-m", "tripwire", "hook", "claude-code", *self.args, *extra],
            input=json.dumps(payload), capture_output=True, text=True, env=self.env,
            timeout=timeout)

    def __call__(self, payload: dict[str, object]) -> dict[str, object] | None:
        done = self.run(payload)
        assert done.returncode == 0, done.stderr
        assert "Traceback" not in done.stderr, done.stderr
        return json.loads(done.stdout) if done.stdout.strip() else None


def denied(out: dict[str, object] | None) -> bool:
    specific = (out or {}).get("hookSpecificOutput")
    return isinstance(specific, dict) and specific.get("permissionDecision") == "deny"


def capped(tmp: Path, implementation: str, cap: int = 20) -> Hook:
    config = tmp / "tripwire.toml"
    config.write_text(f"[budget]\ntool_calls = {cap}\n")
    return Hook(tmp, implementation, "--mode", "enforce", "--config", str(config))


# -- attack 4: a tool_calls cap across hook processes ---------------------------------------


def test_a_tool_calls_cap_holds_across_hook_processes(tmp_path: Path,
                                                      implementation: str) -> None:
    hook = capped(tmp_path, implementation)
    hook(event("UserPromptSubmit", prompt="go", prompt_id="p1"))
    verdicts = [denied(hook(pre(n))) for n in range(24)]
    assert verdicts == [False] * 20 + [True] * 4


def test_a_tool_calls_cap_holds_with_8_hooks_at_once(tmp_path: Path,
                                                     implementation: str) -> None:
    hook = capped(tmp_path, implementation)
    hook(event("UserPromptSubmit", prompt="go", prompt_id="p1"))
    with ThreadPoolExecutor(8) as pool:
        verdicts = list(pool.map(lambda n: denied(hook(pre(n))), range(24)))
    assert verdicts.count(False) == 20 and verdicts.count(True) == 4


# -- attack 2: a held lock or a full disk never turns the guard off ----------------------------

_HOLD_SQLITE = """
import sqlite3, sys, time
db = sqlite3.connect(sys.argv[1], isolation_level=None)
db.execute("BEGIN IMMEDIATE")  # SQLite's write lock, held until this process is killed
print("held", flush=True)
time.sleep(600)
"""

_HOLD_FLOCK = """
import fcntl, sys, time
f = open(sys.argv[1], "a")
fcntl.flock(f, fcntl.LOCK_EX)
print("held", flush=True)
time.sleep(600)
"""


class Holder:
    """A real second process holding a lock until it is killed."""

    def __init__(self, script: str, path: Path) -> None:
        self.proc = subprocess.Popen([sys.executable, "-c", script, str(path)],
                                     stdout=subprocess.PIPE, text=True)
        assert self.proc.stdout is not None
        assert self.proc.stdout.readline().strip() == "held"

    def release(self) -> None:
        self.proc.kill()
        self.proc.wait(timeout=30)


UNRECORDED = "[watchdog] tripwire cannot record this tool call (its guardrail store is unavailable: "


@pytest.mark.parametrize("lock", ["sqlite-write-lock", "flock"])
def test_a_held_lock_denies_under_enforce_within_the_wait(tmp_path: Path, implementation: str,
                                                          lock: str) -> None:
    hook = Hook(tmp_path, implementation, "--mode", "enforce", "--wait", "1")
    hook(event("UserPromptSubmit", prompt="go", prompt_id="p1"))  # the store exists
    holder = Holder(_HOLD_SQLITE if lock == "sqlite-write-lock" else _HOLD_FLOCK,
                    hook.store if lock == "sqlite-write-lock" else Path(f"{hook.store}.lock"))
    try:
        for n in range(3):  # the harness would kill a hook at its timeout (10 s installed)
            done = hook.run(pre(n, "pytest -x"), timeout=8)
            assert done.returncode == 0 and "Traceback" not in done.stderr, done.stderr
            out = json.loads(done.stdout)
            reason = out["hookSpecificOutput"]["permissionDecisionReason"]
            assert out["hookSpecificOutput"]["permissionDecision"] == "deny"
            assert reason.startswith(UNRECORDED)
            assert ("database is locked" if lock == "sqlite-write-lock"
                    else "held by another process") in reason
            assert done.stderr.splitlines()[-1].endswith(
                "the call is denied: under enforce a call the store cannot record does not run")
        # below enforce the hook fails open, as for any transient fault: one line, no decision
        done = hook.run(pre(9, "pytest -x"), "--mode", "warn", timeout=8)
        assert (done.returncode, done.stdout) == (0, "")
        assert done.stderr.splitlines()[-1].endswith("; no decision"), done.stderr
    finally:
        holder.release()
    # the denied calls never ran and were not recorded; with the lock gone the loop is seen
    outs = [hook(pre(10 + n, "pytest -x")) for n in range(5)]
    assert [denied(o) for o in outs] == [False] * 4 + [True]
    assert outs[-1] is not None and outs[-1]["continue"] is False  # repeated-tool-call halts


def _fill(disk: Path) -> None:
    with open(disk / "filler", "wb") as f:
        try:
            while True:
                f.write(b"\0" * 65536)
                f.flush()
        except OSError:
            pass


@pytest.fixture
def small_disk(tmp_path: Path):  # type: ignore[no-untyped-def]
    """A 512 KiB tmpfs, filled on demand (a real ENOSPC; mounting needs root, as in CI)."""
    disk = tmp_path / "disk"
    disk.mkdir()
    made = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=512k", "tmpfs", str(disk)],
                          capture_output=True, text=True)
    if made.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here (needs root): {made.stderr.strip()}")
    try:
        yield disk
    finally:
        subprocess.run(["umount", "-l", str(disk)], check=False)


def test_a_full_disk_denies_under_enforce_and_fails_open_below(small_disk: Path, tmp_path: Path,
                                                               implementation: str) -> None:
    hook = Hook(tmp_path, implementation, "--mode", "enforce",
                env={"TRIPWIRE_STORE": str(small_disk / "hooks.sqlite3")})
    hook.store = small_disk / "hooks.sqlite3"
    for n in range(3):
        assert not denied(hook(pre(n)))
    _fill(small_disk)
    done = hook.run(pre(3), timeout=8)
    assert done.returncode == 0 and "Traceback" not in done.stderr, done.stderr
    out = json.loads(done.stdout)
    assert out["hookSpecificOutput"]["permissionDecision"] == "deny"
    assert out["hookSpecificOutput"]["permissionDecisionReason"].startswith(UNRECORDED)
    assert "database or disk is full" in out["hookSpecificOutput"]["permissionDecisionReason"]
    done = hook.run(pre(4), "--mode", "warn", timeout=8)
    assert (done.returncode, done.stdout) == (0, "")
    assert "database or disk is full" in done.stderr and "Traceback" not in done.stderr
    (small_disk / "filler").unlink()  # space again: the calls are recorded as before
    assert not denied(hook(pre(5)))


def test_a_file_size_limit_denies_under_enforce(tmp_path: Path, implementation: str) -> None:
    """The same without root: RLIMIT_FSIZE makes every write past the first byte fail."""
    import resource
    import signal

    hook = Hook(tmp_path, implementation, "--mode", "enforce")
    for n in range(3):
        assert not denied(hook(pre(n)))

    def limited() -> None:
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # EFBIG instead of a kill
        resource.setrlimit(resource.RLIMIT_FSIZE, (1, 1))

    done = subprocess.run(
        [sys.executable, "-m", "tripwire", "hook", "claude-code", *hook.args],
        input=json.dumps(pre(3)), capture_output=True, text=True, env=hook.env, timeout=8,
        preexec_fn=limited)
    assert done.returncode == 0 and "Traceback" not in done.stderr, done.stderr
    out = json.loads(done.stdout)
    assert out["hookSpecificOutput"]["permissionDecision"] == "deny"
    assert out["hookSpecificOutput"]["permissionDecisionReason"].startswith(UNRECORDED)


# -- attack 1: a corrupted store never hands a halted session a fresh allowance ----------------


@pytest.mark.parametrize("secured", [False, True], ids=["default-key", "secret+anchor"])
@pytest.mark.parametrize("how", ["schema-version", "header", "truncated", "random-page",
                                 "directory"])
def test_a_corrupted_store_denies_the_looping_call(tmp_path: Path, implementation: str,
                                                   how: str, secured: bool) -> None:
    from corruption import corrupt

    env = {}
    if secured:
        (tmp_path / "operator").mkdir()
        env = {"TRIPWIRE_STORE_KEY": "a secret kept from the agent",
               "TRIPWIRE_STORE_ANCHOR": str(tmp_path / "operator" / "hooks.anchor")}
    hook = Hook(tmp_path, implementation, "--mode", "enforce", env=env)
    outs = [hook(pre(n, "pytest -x")) for n in range(5)]
    assert [denied(o) for o in outs] == [False] * 4 + [True]  # the loop halted the session
    corrupt(hook.store, how)
    for n, session in ((5, SESSION), (6, "a-session-the-store-never-saw")):
        out = hook({**pre(n, "pytest -x"), "session_id": session})
        assert denied(out), (session, out)
        assert out is not None and out["continue"] is False
        assert out["stopReason"].startswith(
            "tripwire: watchdog halted the session: store_unreadable: the guardrail store "
            "cannot be read"), out["stopReason"]
        assert out["stopReason"].endswith(
            f"To resume: tripwire reset {hook.store} --session {session}")


# -- bad input: stdin is bounded ----------------------------------------------------------------


def test_a_huge_stdin_is_refused_before_it_is_read_whole(tmp_path: Path,
                                                         implementation: str) -> None:
    """Hook stdin had no bound (300 MB of nested JSON grew the hook to 2.4 GB): more than
    16 MiB is read no further; under enforce the call it names (its leading members) is
    denied, as a call tripwire cannot observe (issue 36), with one line for the operator."""
    import resource

    hook = Hook(tmp_path, implementation, "--mode", "enforce")
    payload = '{"session_id": "s", "hook_event_name": "PreToolUse", "tool_input": ' + \
        "[" * (40 << 20)

    def capped() -> None:  # the hook must not need the input's size many times over
        resource.setrlimit(resource.RLIMIT_AS, (1 << 30, 1 << 30))

    done = subprocess.run([sys.executable, "-m", "tripwire", "hook", "claude-code",
                           *hook.args], input=payload, capture_output=True, text=True,
                          env=hook.env, timeout=60, preexec_fn=capped)
    problem = ("stdin is over 16777216 characters (or too large to decode): not a payload "
               "tripwire can observe")
    assert done.returncode == 0
    assert json.loads(done.stdout)["hookSpecificOutput"]["permissionDecision"] == "deny"
    assert problem in json.loads(done.stdout)["hookSpecificOutput"]["permissionDecisionReason"]
    assert done.stderr.splitlines() == [
        f"tripwire hook claude-code: {problem}; the call is denied: under enforce a call "
        "tripwire cannot decide does not run"]
